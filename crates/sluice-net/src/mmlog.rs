//! Mahimahi's link log (`mm-link --uplink-log=FILE`), written by a link's
//! daemon so that Mahimahi's `mm-throughput-graph` and `mm-delay-graph`
//! read it unchanged.
//!
//! # Format (Mahimahi `src/frontend/link_queue.cc`)
//!
//! ```text
//! # mahimahi mm-link (Uplink) [TRACE] > LOG
//! # command line: 'mm-link' 'up.trace' ...
//! # queue: droptail [packets=100]
//! # init timestamp: 1733600000123      (wall clock, ms since the epoch)
//! # base timestamp: 12                 (the link's start, ms after init)
//! 15 + 1504                            arrival: time, bytes
//! 16 # 1504                            a delivery opportunity
//! 16 - 1504 1                          departure: time, bytes, queueing delay
//! 17 d 1 1504                          a drop on arrival: packets, bytes
//! ```
//!
//! Times are whole milliseconds after the init timestamp; sizes count the
//! 4-byte packet-information header Mahimahi reads with each packet from
//! its TUN device. A GSO packet (the TUN devices here carry TCP as 64 KiB
//! packets) is logged as the packets it stands for, each with its own
//! headers, as Mahimahi would have read them one by one.
//!
//! The plane records the events ([`LogEvent`], on the link's monotonic
//! clock) only for a direction asked to; the daemon turns them into lines
//! ([`MmLog`]). Mahimahi logs the drops its queue makes when a packet
//! arrives, not CoDel's or PIE's drops at dequeue, and so does this.

use serde::{Deserialize, Serialize};
use sluice_core::packet::Packet;
use sluice_core::time::Time;
use std::fs::File;
use std::io::{BufWriter, Write};

/// What happened on a logged wire, on the link's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEvent {
    /// A packet of this many bytes (with the 4-byte header) arrived.
    Arrival(Time, u32),
    /// A delivery opportunity of the wire's trace.
    Opportunity(Time),
    /// A packet of this many bytes left; it had arrived at the second time.
    Departure(Time, u32, Time),
    /// The queue refused packets on arrival: how many, and their bytes.
    Drop(Time, u32, u64),
}

/// The sizes Mahimahi would have logged for a packet: each segment of a
/// GSO packet with its own headers, plus the 4-byte TUN header.
pub fn logged_sizes(pkt: &Packet) -> impl Iterator<Item = u32> {
    let whole = pkt.data.len() as u64;
    let (segs, size) = match pkt.gso {
        Some(g) if g.segs > 1 => (g.segs as u64, g.size as u64),
        _ => (1, 0),
    };
    // `len` counts every segment's headers; `data` holds them once.
    let hdr = if segs > 1 {
        (pkt.len as u64).saturating_sub(whole) / (segs - 1)
    } else {
        0
    };
    let last = if segs > 1 {
        whole.saturating_sub((segs - 1) * size)
    } else {
        pkt.network_len() as u64
    };
    (0..segs).map(move |i| (if i + 1 < segs { hdr + size } else { last }) as u32 + 4)
}

/// Where a direction's log goes and what heads it (written by the front end).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogSpec {
    /// The a→b direction (else b→a).
    pub ab: bool,
    /// The log file (an absolute path).
    pub path: String,
    /// The header lines before the timestamps (`# mahimahi mm-link ...`,
    /// `# command line: ...`, `# queue: ...`), each ending in a newline.
    pub header: String,
    /// Wall-clock milliseconds since the epoch when the command started
    /// (`# init timestamp`).
    pub init_ms: u64,
    /// A line after the timestamps (`# mahimahi config: PREFIX`), if any.
    #[serde(default)]
    pub config: Option<String>,
}

/// An open log.
pub struct MmLog {
    out: BufWriter<File>,
    /// The link's start on its clock, and in ms after init.
    start: Time,
    base_ms: u64,
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl MmLog {
    /// Open (truncate) the log and write its header; `start` is the
    /// moment the wire started, on the link's clock (now).
    pub fn open(spec: &LogSpec, start: Time) -> Result<MmLog, String> {
        let f = File::create(&spec.path).map_err(|e| format!("{}: {e}", spec.path))?;
        let base_ms = wall_ms().saturating_sub(spec.init_ms);
        let mut out = BufWriter::with_capacity(256 << 10, f);
        let mut head = spec.header.clone();
        head += &format!("# init timestamp: {}\n", spec.init_ms);
        head += &format!("# base timestamp: {base_ms}\n");
        if let Some(c) = &spec.config {
            head += &format!("# mahimahi config: {c}\n");
        }
        out.write_all(head.as_bytes())
            .map_err(|e| format!("{}: {e}", spec.path))?;
        Ok(MmLog {
            out,
            start,
            base_ms,
        })
    }

    fn ms(&self, t: Time) -> u64 {
        self.base_ms + t.0.saturating_sub(self.start.0) / 1_000_000
    }

    /// Write events as lines (errors are dropped: a full disk must not stop the link).
    pub fn write(&mut self, events: &[LogEvent]) {
        for e in events {
            let _ = match *e {
                LogEvent::Arrival(t, size) => writeln!(self.out, "{} + {size}", self.ms(t)),
                LogEvent::Opportunity(t) => writeln!(
                    self.out,
                    "{} # {}",
                    self.ms(t),
                    sluice_core::trace::OPPORTUNITY_BYTES
                ),
                LogEvent::Departure(t, size, arrived) => {
                    let (t, a) = (self.ms(t), self.ms(arrived));
                    writeln!(self.out, "{t} - {size} {}", t.saturating_sub(a))
                }
                LogEvent::Drop(t, pkts, bytes) => {
                    writeln!(self.out, "{} d {pkts} {bytes}", self.ms(t))
                }
            };
        }
    }

    /// Write out what is buffered.
    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_mahimahis() {
        let dir = tempfile_path("lines");
        let spec = LogSpec {
            ab: true,
            path: dir.clone(),
            header: "# mahimahi mm-link (Uplink) [t] > l\n# command line: 'mm-link'\n# queue: infinite\n"
                .into(),
            init_ms: wall_ms() - 5,
            config: None,
        };
        let ms = 1_000_000;
        let mut log = MmLog::open(&spec, Time(100 * ms)).unwrap();
        log.write(&[
            LogEvent::Arrival(Time(100 * ms + 300_000), 1504),
            LogEvent::Opportunity(Time(101 * ms)),
            LogEvent::Departure(Time(101 * ms), 1504, Time(100 * ms + 300_000)),
            LogEvent::Drop(Time(102 * ms), 1, 1504),
        ]);
        log.flush();
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], "# queue: infinite");
        assert!(lines[3].starts_with("# init timestamp: "));
        let base: u64 = lines[4]
            .strip_prefix("# base timestamp: ")
            .unwrap()
            .parse()
            .unwrap();
        assert!((5..100).contains(&base), "{base}");
        assert_eq!(
            lines[5..],
            [
                format!("{base} + 1504"),
                format!("{} # 1504", base + 1),
                format!("{} - 1504 1", base + 1),
                format!("{} d 1 1504", base + 2)
            ]
        );
    }

    fn tempfile_path(what: &str) -> String {
        std::env::temp_dir()
            .join(format!("sluice-mmlog-{what}-{}", std::process::id()))
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_gso_packet_is_logged_as_its_segments() {
        use sluice_core::packet::{Gso, GsoKind};
        // 3 segments of 1448 payload bytes behind 52 bytes of headers, the last of 100.
        let data = vec![0x45u8; 52 + 1448 * 2 + 100];
        let mut p = Packet::new(data, 3 * 52 + 1448 * 2 + 100, 0x0800);
        p.gso = Some(Gso {
            size: 1448,
            segs: 3,
            kind: GsoKind::TcpV4,
            ecn: false,
        });
        assert_eq!(
            logged_sizes(&p).collect::<Vec<_>>(),
            [1504, 1504, 52 + 100 + 4]
        );
    }
}
