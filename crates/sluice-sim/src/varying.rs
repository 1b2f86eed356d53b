//! Links whose capacity, delay or loss change over time: reading their
//! traces, schedules and generated models from a scenario, and the
//! capacity a link direction offers over a run, for reports and checks.
//!
//! The wire itself follows them in sluice-core ([`sluice_core::port`]:
//! Mahimahi's delivery opportunities, schedules, [`Port::change`]); here a
//! link's keys become the [`WireChange`] its port starts with at time 0,
//! and [`Timeline`] replays the same changes (the schedule's steps, the
//! scenario's link events) without packets to say how many bits the wire
//! could carry in any interval. `docs/time-varying-links.md` describes
//! the formats and keys.
//!
//! [`Port::change`]: sluice_core::port::Port::change

use crate::limits;
use crate::scenario::substitute;
use sluice_core::port::WireChange;
use sluice_core::schedule::{Schedule, ScheduleCursor};
use sluice_core::time::{Duration, Time};
use sluice_core::trace::{DelayTrace, Trace, OPPORTUNITY_BYTES};
use sluice_core::trace_model::WalkModel;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Bits one delivery opportunity carries.
pub const OPPORTUNITY_BITS: u64 = OPPORTUNITY_BYTES as u64 * 8;

/// The most changes a link direction's capacity may go through in one run
/// (a schedule's rate steps, ramps expanded and loops repeated, plus
/// events): about 50 MB of timeline. A 140 s ramp in 1 ms steps is 140 000.
pub const MAX_CHANGES: usize = 1_000_000;

/// Read a file a scenario names, relative to `dir` (the scenario's
/// directory), at most [`limits::MAX_TRACE_FILE`] bytes.
pub fn read_file(dir: Option<&Path>, name: &str, what: &str) -> Result<String, String> {
    let path = match dir {
        Some(d) if !Path::new(name).is_absolute() => d.join(name),
        _ => Path::new(name).to_path_buf(),
    };
    let shown = path.display();
    let file = std::fs::File::open(&path).map_err(|e| format!("{what}: {shown}: {e}"))?;
    let mut text = String::new();
    file.take(limits::MAX_TRACE_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{what}: {shown}: {e}"))?;
    if text.len() as u64 > limits::MAX_TRACE_FILE {
        return Err(format!(
            "{what}: {shown}: larger than {} MiB",
            limits::MAX_TRACE_FILE >> 20
        ));
    }
    Ok(text)
}

/// A trace key's value: a file name (a Mahimahi trace), or an inline model
/// table (`{ model = "walk", seed = 7, mean = "12mbit", duration = "140s" }`).
pub fn trace(
    v: &toml::Value,
    what: &str,
    dir: Option<&Path>,
    vars: &BTreeMap<String, String>,
) -> Result<Trace, String> {
    match v {
        toml::Value::String(name) => {
            let name = substitute(name, vars)?;
            let text = read_file(dir, &name, what)?;
            Trace::parse(&text).map_err(|e| format!("{what}: {name}: {e}"))
        }
        toml::Value::Table(t) => walk_model(t, what, vars)?
            .generate()
            .map_err(|e| format!("{what}: {e}")),
        other => Err(format!(
            "{what}: a file name or a model table, not {}",
            other.type_str()
        )),
    }
}

/// The keys of a `walk` model table (see [`sluice_core::trace_model`]).
const WALK_KEYS: &[&str] = &[
    "model",
    "seed",
    "mean",
    "duration",
    "volatility",
    "reversion",
    "step",
    "fades",
    "fade",
];

/// A `walk` model from its table.
pub fn walk_model(
    t: &toml::Table,
    what: &str,
    vars: &BTreeMap<String, String>,
) -> Result<WalkModel, String> {
    if let Some(k) = t.keys().find(|k| !WALK_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{what}: {k}: not a key of a model (it has: {})",
            WALK_KEYS.join(", ")
        ));
    }
    let text = |k: &str| -> Result<Option<String>, String> {
        t.get(k)
            .map(|v| substitute(&crate::scenario::value_text(v), vars))
            .transpose()
    };
    let key = |k: &str| format!("{what}: {k}");
    match text("model")?.as_deref() {
        Some("walk") => {}
        Some(m) => return Err(format!("{}: unknown model {m:?} (walk)", key("model"))),
        None => {
            return Err(format!(
                "{what}: a model table names its model (model = \"walk\")"
            ))
        }
    }
    let mut m = WalkModel::default();
    let time = |k: &str, d: Duration| -> Result<Duration, String> {
        match text(k)? {
            Some(s) => limits::time(&s, &key(k), Duration(1), limits::MAX_TIME),
            None => Ok(d),
        }
    };
    let number = |k: &str, d: f64| -> Result<f64, String> {
        match text(k)? {
            Some(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{}: not a number: {s:?}", key(k))),
            None => Ok(d),
        }
    };
    if let Some(s) = text("seed")? {
        m.seed = limits::integer(&s, &key("seed"), 0, u64::MAX)?;
    }
    m.mean_bps = match text("mean")? {
        Some(s) => limits::rate(&s, &key("mean"))?,
        None => return Err(format!("{what}: a model needs a mean (e.g. \"12mbit\")")),
    };
    m.duration = match text("duration")? {
        Some(_) => time("duration", m.duration)?,
        None => return Err(format!("{what}: a model needs a duration (e.g. \"140s\")")),
    };
    m.volatility = number("volatility", m.volatility)?;
    m.reversion = time("reversion", m.reversion)?;
    m.step = time("step", m.step)?;
    m.fades_per_min = number("fades", m.fades_per_min)?;
    m.fade = time("fade", m.fade)?;
    m.validate().map_err(|e| format!("{what}: {e}"))?;
    Ok(m)
}

/// A schedule key's value: CSV text (it has a comma or a line break) or a
/// file name.
pub fn schedule(text: &str, what: &str, dir: Option<&Path>) -> Result<Schedule, String> {
    if text.contains([',', '\n']) {
        return Schedule::parse(text).map_err(|e| format!("{what}: {e}"));
    }
    let body = read_file(dir, text.trim(), what)?;
    Schedule::parse(&body).map_err(|e| format!("{what}: {}: {e}", text.trim()))
}

/// A delay trace file, each line holding for `step`.
pub fn delay_trace(
    name: &str,
    step: Duration,
    what: &str,
    dir: Option<&Path>,
) -> Result<DelayTrace, String> {
    let body = read_file(dir, name.trim(), what)?;
    DelayTrace::parse(&body, step).map_err(|e| format!("{what}: {}: {e}", name.trim()))
}

/// What carries a wire's bits during a stretch of time.
#[derive(Clone, Debug, PartialEq)]
enum Carrier {
    /// A fixed rate, bits/s (0: unlimited).
    Rate(u64),
    /// Nothing: an outage.
    Outage,
    /// A trace's opportunities, played from `start`.
    Trace {
        trace: Trace,
        start: Time,
        once: bool,
    },
}

/// The capacity of one direction of a link over a run: the carrier in
/// force from each change on, and whether the carrier (`up`) was there.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// `(from, carrier, up)`, in order of time, the first at 0.
    stretches: Vec<(Time, Carrier, bool)>,
    /// The least and the most one-way delay the wire has over the run.
    pub delay_range: (Duration, Duration),
}

impl Timeline {
    /// Replay a wire's changes up to `end`: its fixed rate and delay
    /// (`rate_bps` 0: unlimited), what it starts with at 0 (`initial`: a
    /// trace, a schedule), then `events` (in order of time). At a tie a
    /// schedule's step comes first, as the port applies it before a change
    /// made at that time.
    pub fn replay(
        rate_bps: u64,
        delay: Duration,
        initial: &WireChange,
        events: &[(Time, WireChange)],
        end: Time,
    ) -> Result<Timeline, String> {
        let mut tl = Timeline {
            stretches: vec![(Time::ZERO, Carrier::Rate(rate_bps), true)],
            delay_range: (delay, delay),
        };
        let mut cursor = initial
            .schedule
            .clone()
            .map(|s| ScheduleCursor::new(s, Time::ZERO));
        tl.apply(Time::ZERO, initial);
        let mut events = events.iter().peekable();
        loop {
            let step = cursor
                .as_ref()
                .and_then(ScheduleCursor::next_time)
                .filter(|&t| t < end);
            let event = events.peek().map(|(t, _)| *t).filter(|&t| t < end);
            match (step, event) {
                (Some(s), e) if e.is_none_or(|e| s <= e) => {
                    let c = cursor.as_mut().and_then(|c| c.pop_due(s)).expect("due");
                    tl.apply(s, &c);
                }
                (_, Some(e)) => {
                    let (_, c) = events.next().expect("peeked");
                    if let Some(s) = &c.schedule {
                        cursor = Some(ScheduleCursor::new(s.clone(), e));
                    }
                    tl.apply(e, c);
                }
                _ => break,
            }
            if tl.stretches.len() > MAX_CHANGES {
                return Err(format!(
                    "more than {MAX_CHANGES} changes over the run (a schedule's steps \
                     repeated by its loop); shorten the run or lengthen the loop"
                ));
            }
        }
        Ok(tl)
    }

    /// A change at `at`, as [`sluice_core::port::Port::change`] applies it.
    fn apply(&mut self, at: Time, c: &WireChange) {
        let (_, mut carrier, mut up) = self.stretches.last().cloned().expect("one stretch");
        if let Some(r) = c.rate_bps {
            carrier = if r == 0 {
                Carrier::Outage
            } else {
                Carrier::Rate(r)
            };
        }
        if let Some((trace, once)) = &c.trace {
            carrier = Carrier::Trace {
                trace: trace.clone(),
                start: at,
                once: *once,
            };
        }
        if let Some(u) = c.up {
            up = u;
        }
        if let Some(d) = c.delay {
            self.delay_range = (self.delay_range.0.min(d), self.delay_range.1.max(d));
        }
        match self.stretches.last_mut() {
            // Delay or loss only: the capacity goes on as it was.
            Some(last) if last.1 == carrier && last.2 == up => {}
            Some(last) if last.0 == at => *last = (at, carrier, up),
            _ => self.stretches.push((at, carrier, up)),
        }
    }

    /// Is some stretch unlimited (a fixed rate of 0), so capacity means nothing?
    pub fn unlimited(&self) -> bool {
        self.stretches
            .iter()
            .any(|(_, c, up)| *up && *c == Carrier::Rate(0))
    }

    /// Bits the wire could carry in `[from, to)` (a wire that is down carries none).
    pub fn bits_between(&self, from: Time, to: Time) -> f64 {
        if to <= from {
            return 0.0;
        }
        let first = self.stretches.partition_point(|s| s.0 <= from).max(1) - 1;
        let mut bits = 0.0;
        for (i, (at, carrier, up)) in self.stretches.iter().enumerate().skip(first) {
            if *at >= to {
                break;
            }
            let next = self.stretches.get(i + 1).map_or(Time::NEVER, |s| s.0);
            let (a, b) = ((*at).max(from), next.min(to));
            if b <= a || !up {
                continue;
            }
            bits += match carrier {
                Carrier::Rate(r) => *r as f64 * (b.0 - a.0) as f64 / 1e9,
                Carrier::Outage => 0.0,
                Carrier::Trace { trace, start, once } => {
                    let rel = |t: Time| Time(t.0 - start.0);
                    (trace.opportunities_between(rel(a), rel(b), *once) * OPPORTUNITY_BITS) as f64
                }
            };
        }
        bits
    }

    /// Bits per bin of `bin` from 0 to `end` (the last bin may be partial).
    pub fn bins(&self, bin: Duration, end: Time) -> Vec<f64> {
        (0..end.0.div_ceil(bin.0))
            .map(|k| {
                let a = Time(k * bin.0);
                self.bits_between(a, Time((a.0 + bin.0).min(end.0)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_constant_trace_offers_one_opportunity_a_millisecond() {
        let initial = WireChange {
            trace: Some((Trace::constant(1), false)),
            ..Default::default()
        };
        let tl = Timeline::replay(0, Duration::ZERO, &initial, &[], Time(10 * S)).unwrap();
        // Opportunities at 1, 2, ... ms: [0, 1 s) holds 999, [1 s, 2 s) 1000.
        assert_eq!(tl.bits_between(Time(0), Time(S)), 999.0 * 12032.0);
        assert_eq!(tl.bits_between(Time(S), Time(2 * S)), 1000.0 * 12032.0);
    }

    #[test]
    fn a_schedule_and_events_make_steps_of_capacity() {
        let s = Schedule::parse("0s,10mbit,,\n1s,0,,\n1.5s,20mbit,,\n").unwrap();
        let initial = WireChange {
            schedule: Some(s),
            ..Default::default()
        };
        let down = WireChange {
            up: Some(false),
            ..Default::default()
        };
        let tl = Timeline::replay(
            1_000_000,
            Duration::ZERO,
            &initial,
            &[(Time(3 * S), down)],
            Time(4 * S),
        )
        .unwrap();
        assert_eq!(tl.bits_between(Time(0), Time(S)), 10e6);
        assert_eq!(tl.bits_between(Time(S), Time(2 * S)), 10e6);
        assert_eq!(tl.bits_between(Time(2 * S), Time(4 * S)), 20e6);
    }
}
