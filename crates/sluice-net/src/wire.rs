//! Changes to a running link's wires: what `sluice link up` starts a wire
//! with beyond its fixed rate and delay (a Mahimahi trace, a schedule, a
//! delay trace), and what `sluice link set` changes while it runs.
//!
//! [`WireSettings`] is the serializable form of sluice-core's
//! [`WireChange`]: it travels in the link's description (to the daemon) and
//! in control requests, and carries files as their text (with their names,
//! for messages), so the daemon never opens a user's file. The front end
//! reads each file with [`read_bounded`] and checks it with
//! [`WireSettings::change`] before anything starts; the daemon builds the
//! same change again from the same text, which cannot fail differently.

use serde::{Deserialize, Serialize};
use sluice_core::port::{TxBuffer, WireChange};
use sluice_core::schedule::Schedule;
use sluice_core::time::Duration;
use sluice_core::trace::{DelayTrace, Trace};
use std::io::Read;

/// The largest trace, schedule or delay trace file read.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// A file's name and its text.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TextFile {
    /// The name it was given by (for messages and `link list`).
    pub name: String,
    /// Its contents; empty in a link's record once the daemon has read it.
    #[serde(default)]
    pub text: String,
}

/// A transmit buffer's size.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Buffer {
    /// At most this many packets (0 on a trace: no ring at all).
    Packets(u32),
    /// At most this many bytes.
    Bytes(u64),
}

/// What to set on a wire; every field left `None` (or `false`) stays as it is.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WireSettings {
    /// A fixed rate, bits/s; 0 is an outage. Ends a trace.
    pub rate_bps: Option<u64>,
    /// A fixed one-way delay, ns. Ends a delay trace.
    pub delay_ns: Option<u64>,
    /// Probability of losing a packet on the wire.
    pub loss: Option<f64>,
    /// The transmit buffer.
    pub buffer: Option<Buffer>,
    /// Carrier up (`--up`) or down (`--down`).
    pub up: Option<bool>,
    /// A Mahimahi delivery-opportunity trace giving the capacity.
    pub trace: Option<TextFile>,
    /// Play the trace once, then carry nothing (Mahimahi's `--once`).
    #[serde(default)]
    pub once: bool,
    /// A schedule of rate/delay/loss steps (sluice-core's `schedule`).
    pub schedule: Option<TextFile>,
    /// A per-packet delay trace, one delay (ms) per line.
    pub delay_trace: Option<TextFile>,
    /// How long each line of the delay trace holds, ns (default 1 ms).
    pub delay_trace_step_ns: Option<u64>,
}

/// Read a file of at most [`MAX_FILE_BYTES`] as text; the error names it.
pub fn read_bounded(path: &str) -> Result<TextFile, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{path}: larger than {} MiB, the most sluice reads",
            MAX_FILE_BYTES >> 20
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{path}: not text (UTF-8)"))?;
    Ok(TextFile {
        name: path.to_string(),
        text,
    })
}

impl WireSettings {
    /// Nothing to set.
    pub fn is_empty(&self) -> bool {
        *self == WireSettings::default()
    }

    /// The change to apply: files parsed, errors as `FILE: line N: reason`.
    pub fn change(&self) -> Result<WireChange, String> {
        let named = |f: &TextFile, e: &dyn std::fmt::Display| format!("{}: {e}", f.name);
        let trace = match &self.trace {
            Some(f) => Some((Trace::parse(&f.text).map_err(|e| named(f, &e))?, self.once)),
            None => None,
        };
        let schedule = match &self.schedule {
            Some(f) => Some(Schedule::parse(&f.text).map_err(|e| named(f, &e))?),
            None => None,
        };
        let step = Duration(self.delay_trace_step_ns.unwrap_or(1_000_000));
        let delay_trace = match &self.delay_trace {
            Some(f) => Some(DelayTrace::parse(&f.text, step).map_err(|e| named(f, &e))?),
            None => None,
        };
        if let Some(l) = self.loss {
            if !(0.0..=1.0).contains(&l) {
                return Err(format!("loss {l} is not between 0 and 1"));
            }
        }
        Ok(WireChange {
            rate_bps: self.rate_bps,
            trace,
            delay: self.delay_ns.map(Duration),
            delay_trace,
            loss: self.loss,
            buffer: self.buffer.map(|b| match b {
                Buffer::Packets(n) => TxBuffer::Packets(n),
                Buffer::Bytes(n) => TxBuffer::Bytes(n),
            }),
            up: self.up,
            schedule,
        })
    }

    /// The settings that make `c` (the inverse of [`WireSettings::change`]):
    /// a trace, schedule or delay trace written out as the text that
    /// parses back to it, each named `name` and what it is. A delay trace
    /// that lets packets reorder has no text form.
    pub fn from_change(c: &WireChange, name: &str) -> Result<WireSettings, String> {
        let file = |what: &str, text: String| TextFile {
            name: format!("{name} {what}"),
            text,
        };
        let schedule = c.schedule.as_ref().map(|s| {
            let cell = |v: Option<String>| v.unwrap_or_default();
            let mut text = String::new();
            for (at, row) in s.steps() {
                text += &format!(
                    "{}ns,{},{},{}\n",
                    at.0,
                    cell(row.rate_bps.map(|r| match r {
                        0 => "0".to_string(),
                        r => format!("{r}bit"),
                    })),
                    cell(row.delay.map(|d| format!("{}ns", d.0))),
                    cell(row.loss.map(|l| l.to_string())),
                );
            }
            if let Some(p) = s.period() {
                text += &format!("{}ns,loop\n", p.0);
            }
            file("schedule", text)
        });
        let delay_trace = match &c.delay_trace {
            Some(d) if d.reorder => {
                return Err(format!(
                    "{name}: a delay trace that reorders has no text form"
                ))
            }
            Some(d) => Some(d),
            None => None,
        };
        Ok(WireSettings {
            rate_bps: c.rate_bps,
            delay_ns: c.delay.map(|d| d.0),
            loss: c.loss,
            buffer: c.buffer.map(|b| match b {
                TxBuffer::Packets(n) => Buffer::Packets(n),
                TxBuffer::Bytes(n) => Buffer::Bytes(n),
            }),
            up: c.up,
            trace: c
                .trace
                .as_ref()
                .map(|(t, _)| file("trace", t.to_mahimahi())),
            once: c.trace.as_ref().is_some_and(|(_, once)| *once),
            schedule,
            delay_trace: delay_trace.map(|d| {
                let ms: Vec<String> = d
                    .delays()
                    .iter()
                    .map(|x| (x.0 / 1_000_000).to_string())
                    .collect();
                file("delay trace", ms.join("\n") + "\n")
            }),
            delay_trace_step_ns: delay_trace.map(|d| d.step().0),
        })
    }

    /// The same settings without the files' texts (their names stay): what
    /// a link's record keeps once the daemon has built its wires.
    pub fn without_texts(&self) -> WireSettings {
        let strip = |f: &Option<TextFile>| {
            f.as_ref().map(|f| TextFile {
                name: f.name.clone(),
                text: String::new(),
            })
        };
        WireSettings {
            trace: strip(&self.trace),
            schedule: strip(&self.schedule),
            delay_trace: strip(&self.delay_trace),
            ..self.clone()
        }
    }

    /// A few words for `link list`: the files a wire follows.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.trace {
            s += &format!(" trace {}{}", f.name, if self.once { " once" } else { "" });
        }
        if let Some(f) = &self.schedule {
            s += &format!(" schedule {}", f.name);
        }
        if let Some(f) = &self.delay_trace {
            s += &format!(" delay-trace {}", f.name);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> Option<TextFile> {
        Some(TextFile {
            name: name.into(),
            text: text.into(),
        })
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let s = WireSettings {
            trace: file("up.trace", "1\n2\nx\n"),
            ..Default::default()
        };
        assert_eq!(
            s.change().unwrap_err(),
            "up.trace: line 3: \"x\" is not a whole number of milliseconds"
        );
        let s = WireSettings {
            schedule: file("s.csv", "0s,10mbit,,\n0s,5mbit,,\n"),
            ..Default::default()
        };
        assert!(s.change().unwrap_err().starts_with("s.csv: line 2: "));
    }

    #[test]
    fn settings_go_through_json_and_build_the_change() {
        let s = WireSettings {
            rate_bps: Some(0),
            trace: file("t", "1\n"),
            once: true,
            buffer: Some(Buffer::Packets(0)),
            ..Default::default()
        };
        let back: WireSettings = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let c = back.change().unwrap();
        assert!(c.trace.unwrap().1);
        assert_eq!(c.buffer, Some(TxBuffer::Packets(0)));
        assert!(s.without_texts().trace.unwrap().text.is_empty());
        assert!(WireSettings::default().is_empty());
    }

    #[test]
    fn a_change_written_out_parses_back_to_itself() {
        let s = WireSettings {
            delay_ns: Some(7_000_000),
            loss: Some(0.125),
            up: Some(true),
            buffer: Some(Buffer::Bytes(64_000)),
            trace: file("t", "0\n0\n3\n10\n"),
            once: true,
            schedule: file(
                "s",
                "0s,50mbit,20ms,0%\n15s,0,,\n15.3s,50mbit,45ms,\n15.305s,5mbit,,1%,ramp\n30s,loop\n",
            ),
            delay_trace: file("d", "5\n20\n7\n"),
            delay_trace_step_ns: Some(2_000_000),
            ..Default::default()
        };
        let c = s.change().unwrap();
        let back = WireSettings::from_change(&c, "x").unwrap();
        assert_eq!(back.change().unwrap(), c);
        assert_eq!(back.schedule.unwrap().name, "x schedule");
        let mut d = c.clone();
        d.delay_trace.as_mut().unwrap().reorder = true;
        assert!(WireSettings::from_change(&d, "x").is_err());
    }

    #[test]
    fn files_beyond_the_bound_are_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("sluice-wire-{}", std::process::id()));
        let f = std::fs::File::create(&dir).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_bounded(dir.to_str().unwrap()).unwrap_err();
        let _ = std::fs::remove_file(&dir);
        assert!(e.contains("larger than 64 MiB"), "{e}");
        assert!(read_bounded("/nonexistent/x")
            .unwrap_err()
            .starts_with("/nonexistent/x: "));
    }
}
