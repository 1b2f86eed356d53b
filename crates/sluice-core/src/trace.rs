//! Links whose capacity or delay is a recorded trace: Mahimahi's
//! packet-delivery-opportunity traces and per-packet delay traces.
//!
//! # Delivery opportunities (Mahimahi's `mm-link`)
//!
//! A trace is a text file of integer millisecond timestamps, one per line,
//! never decreasing. Each line is one *opportunity* to deliver
//! [`OPPORTUNITY_BYTES`] (1504: Mahimahi reads its TUN device with the 4-byte
//! packet-information header, so one opportunity carries exactly one
//! 1500-byte IP packet); a timestamp written on several lines is several
//! opportunities in that millisecond. When the trace ends the link plays it
//! again, shifted by its last timestamp (so a one-line trace `1` is one
//! opportunity every millisecond, 12 Mbit/s of 1500-byte packets), unless
//! it was started `--once`, when the link stops delivering for good.
//!
//! The link spends an opportunity as `LinkQueue::rationalize` does
//! (Mahimahi `src/frontend/link_queue.cc`), which [`crate::port`] follows:
//! its bytes go to the packet in transit and then to the packets behind it
//! in turn, so several small packets share one opportunity and a packet
//! larger than what is left continues in the next; a packet leaves at the
//! opportunity that carries its last byte; bytes of an opportunity that
//! find the queue empty are lost. An opportunity at time T serves only
//! packets that arrived before T (Mahimahi burns the opportunities that are
//! due before it enqueues an arriving packet).
//!
//! # Delay traces
//!
//! A delay trace gives the one-way delay a packet sees by the time it
//! leaves the wire: one delay in milliseconds per line, each line holding
//! for one step of the trace's resolution (1 ms unless told), the trace
//! repeating at its end — the format of Mahimahi's proposed `mm-file-delay`.
//! The link stays first-in first-out (a packet never overtakes the one
//! before it) unless reordering is asked for.
//!
//! Parsing is strict and bounded by the text it is given: a line that is
//! not a whole number, a decreasing timestamp, a trace without
//! opportunities or that lasts no time is refused with its line number.

use crate::time::{Duration, Time};
use std::sync::Arc;

/// Bytes one delivery opportunity carries.
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// The latest timestamp a trace may hold, in milliseconds (a year).
pub const MAX_TRACE_MS: u64 = 365 * 24 * 3600 * 1000;

/// The longest delay a delay trace may give, in milliseconds (netem's limit).
pub const MAX_TRACE_DELAY_MS: u64 = 274_877;

/// Why a trace is refused: the 1-based line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct TraceError {
    /// 1-based line number (0: the trace as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

fn fail<T>(line: usize, reason: impl Into<String>) -> Result<T, TraceError> {
    Err(TraceError {
        line,
        reason: reason.into(),
    })
}

/// The lines of a trace that carry a value: blank lines at the very end
/// are ignored (a final newline), `#` comments are not Mahimahi's but are
/// refused as what they are.
fn value_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let body = text.trim_end_matches(['\n', '\r', ' ', '\t']);
    body.lines().enumerate().map(|(i, l)| (i + 1, l.trim()))
}

fn whole_number(line: usize, s: &str, what: &str, max: u64) -> Result<u64, TraceError> {
    if s.is_empty() {
        return fail(line, "empty line");
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return fail(line, format!("{s:?} is not a whole number of milliseconds"));
    }
    match s.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        _ => fail(line, format!("{what} {s} is beyond {max} ms")),
    }
}

/// A Mahimahi delivery-opportunity trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The opportunities' timestamps, ms, never decreasing.
    ms: Arc<[u64]>,
}

impl Trace {
    /// Parse a trace's text.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut ms = Vec::new();
        for (line, s) in value_lines(text) {
            let v = whole_number(line, s, "timestamp", MAX_TRACE_MS)?;
            if ms.last().is_some_and(|&last| v < last) {
                return fail(line, format!("timestamp {v} is before the one above it"));
            }
            ms.push(v);
        }
        Trace::from_ms(ms)
    }

    /// A trace from its timestamps (ms, never decreasing).
    pub fn from_ms(ms: Vec<u64>) -> Result<Trace, TraceError> {
        match ms.last() {
            None => fail(0, "no delivery opportunities"),
            Some(0) => fail(0, "the trace lasts no time (its last timestamp is 0)"),
            Some(_) if ms.windows(2).any(|w| w[1] < w[0]) => fail(0, "timestamps decrease"),
            Some(&last) if last > MAX_TRACE_MS => fail(0, "a timestamp is beyond a year"),
            Some(_) => Ok(Trace { ms: ms.into() }),
        }
    }

    /// A constant trace: `per_ms` opportunities every millisecond.
    pub fn constant(per_ms: u32) -> Trace {
        Trace {
            ms: vec![1; per_ms.max(1) as usize].into(),
        }
    }

    /// The timestamps, ms.
    pub fn opportunities(&self) -> &[u64] {
        &self.ms
    }

    /// How long one pass lasts: its last timestamp, ms.
    pub fn period_ms(&self) -> u64 {
        *self.ms.last().expect("a trace has opportunities")
    }

    /// The mean capacity over one pass, bits/s.
    pub fn mean_bps(&self) -> f64 {
        self.ms.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 / (self.period_ms() as f64 / 1e3)
    }

    /// Opportunities a link started at time 0 has in `[from, to)`: the
    /// capacity of that interval is this times [`OPPORTUNITY_BYTES`].
    pub fn opportunities_between(&self, from: Time, to: Time, once: bool) -> u64 {
        self.opportunities_before(to, once) - self.opportunities_before(from, once)
    }

    /// Opportunities strictly before `t` (ns since the link started). Pass
    /// k holds those at k·period + each timestamp, so its last one is at
    /// the start of pass k + 1.
    fn opportunities_before(&self, t: Time, once: bool) -> u64 {
        let before = |ns: u64| self.ms.partition_point(|&m| m * 1_000_000 < ns) as u64;
        if once {
            return before(t.0);
        }
        let period = self.period_ms() * 1_000_000;
        let (laps, rest) = (t.0 / period, t.0 % period);
        match laps {
            0 => before(rest),
            _ => (laps - 1) * self.ms.len() as u64 + before(period + rest) + before(rest),
        }
    }

    /// The trace as Mahimahi writes it.
    pub fn to_mahimahi(&self) -> String {
        let mut s = String::with_capacity(self.ms.len() * 6);
        for m in self.ms.iter() {
            s.push_str(&m.to_string());
            s.push('\n');
        }
        s
    }
}

/// A trace being played by a link: which opportunity comes next.
#[derive(Debug, Clone)]
pub struct TracePlayer {
    trace: Trace,
    /// Index of the next opportunity.
    next: usize,
    /// When the current pass started.
    base: Time,
    /// Stop at the end instead of repeating (`--once`).
    once: bool,
    finished: bool,
}

impl TracePlayer {
    /// Play `trace` from `start`.
    pub fn new(trace: Trace, start: Time, once: bool) -> Self {
        TracePlayer {
            trace,
            next: 0,
            base: start,
            once,
            finished: false,
        }
    }

    /// The trace played.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// When the next opportunity is, or `None` once a `--once` trace ended.
    pub fn next_opportunity(&self) -> Option<Time> {
        (!self.finished).then(|| Time(self.base.0 + self.trace.ms[self.next] * 1_000_000))
    }

    /// Use up the next opportunity.
    pub fn advance(&mut self) {
        self.next += 1;
        if self.next == self.trace.ms.len() {
            self.next = 0;
            self.base = Time(self.base.0 + self.trace.period_ms() * 1_000_000);
            self.finished = self.once;
        }
    }

    /// Skip, without iterating over them, every opportunity due at or
    /// before `now` (they find the link idle and are wasted).
    pub fn skip_through(&mut self, now: Time) {
        let period = self.trace.period_ms() * 1_000_000;
        while self.next_opportunity().is_some_and(|t| t <= now) {
            let since = now.0 - self.base.0;
            if since >= period {
                // Every opportunity of this pass is due: skip whole passes.
                self.finished = self.once;
                self.base = Time(self.base.0 + since / period * period);
                self.next = 0;
                continue;
            }
            // The last timestamp is the period, so some opportunity is later.
            let idx = self.trace.ms.partition_point(|&m| m * 1_000_000 <= since);
            self.next = idx.max(self.next);
        }
    }
}

/// A per-packet delay trace ([module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayTrace {
    delays: Arc<[Duration]>,
    step: Duration,
    /// Let a packet overtake the one before it when its delay is shorter.
    pub reorder: bool,
}

impl DelayTrace {
    /// Parse a delay trace: one delay (ms) per line, each for `step`.
    pub fn parse(text: &str, step: Duration) -> Result<DelayTrace, TraceError> {
        if step == Duration::ZERO {
            return fail(0, "the resolution of a delay trace must be more than 0 ms");
        }
        let mut delays = Vec::new();
        for (line, s) in value_lines(text) {
            let v = whole_number(line, s, "delay", MAX_TRACE_DELAY_MS)?;
            delays.push(Duration::from_millis(v));
        }
        if delays.is_empty() {
            return fail(0, "no delays");
        }
        Ok(DelayTrace {
            delays: delays.into(),
            step,
            reorder: false,
        })
    }

    /// The delays, one per [`DelayTrace::step`].
    pub fn delays(&self) -> &[Duration] {
        &self.delays
    }

    /// How long each delay holds.
    pub fn step(&self) -> Duration {
        self.step
    }

    /// The delay of a packet leaving the wire `since` after the trace started.
    pub fn delay_at(&self, since: Duration) -> Duration {
        let i = (since.0 / self.step.0) % self.delays.len() as u64;
        self.delays[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn parsing_refuses_what_mahimahi_refuses_with_the_line() {
        let e = |t: &str| Trace::parse(t).unwrap_err().to_string();
        assert_eq!(e("1\n\n2\n"), "line 2: empty line");
        assert_eq!(
            e("1\nx\n"),
            "line 2: \"x\" is not a whole number of milliseconds"
        );
        assert_eq!(
            e("1\n-3\n"),
            "line 2: \"-3\" is not a whole number of milliseconds"
        );
        assert_eq!(
            e("5\n3\n"),
            "line 2: timestamp 3 is before the one above it"
        );
        assert_eq!(e(""), "line 0: no delivery opportunities");
        assert_eq!(
            e("0\n0\n"),
            "line 0: the trace lasts no time (its last timestamp is 0)"
        );
        assert!(e("99999999999999999999999").contains("beyond"));
        assert_eq!(
            Trace::parse("1\n1\n3\n").unwrap().opportunities(),
            [1, 1, 3]
        );
    }

    #[test]
    fn a_player_repeats_the_trace_shifted_by_its_last_timestamp() {
        let t = Trace::parse("1\n1\n3\n").unwrap();
        let mut p = TracePlayer::new(t.clone(), Time(0), false);
        let mut seen = vec![];
        for _ in 0..7 {
            seen.push(p.next_opportunity().unwrap().0 / MS);
            p.advance();
        }
        assert_eq!(seen, [1, 1, 3, 4, 4, 6, 7]);
        let mut once = TracePlayer::new(t, Time(0), true);
        for _ in 0..3 {
            once.advance();
        }
        assert_eq!(once.next_opportunity(), None);
    }

    #[test]
    fn skipping_lands_on_the_first_opportunity_after_now() {
        let t = Trace::parse("1\n1\n3\n").unwrap();
        for now_ms in [0u64, 1, 2, 3, 4, 5, 6, 3000, 3001, 3002] {
            let mut a = TracePlayer::new(t.clone(), Time(0), false);
            let mut b = a.clone();
            a.skip_through(Time(now_ms * MS));
            while b.next_opportunity().unwrap() <= Time(now_ms * MS) {
                b.advance();
            }
            assert_eq!(a.next_opportunity(), b.next_opportunity(), "at {now_ms} ms");
        }
        let mut once = TracePlayer::new(t, Time(0), true);
        once.skip_through(Time(10 * MS));
        assert_eq!(once.next_opportunity(), None);
    }

    #[test]
    fn capacity_counts_opportunities_in_an_interval() {
        let t = Trace::parse("1\n1\n3\n").unwrap();
        // [0, 6 ms): opportunities at 1, 1, 3, 4, 4 (6 is not before 6).
        assert_eq!(t.opportunities_between(Time(0), Time(6 * MS), false), 5);
        assert_eq!(t.opportunities_between(Time(0), Time(6 * MS), true), 3);
        assert_eq!(Trace::constant(1).mean_bps(), 12_032_000.0);
    }

    #[test]
    fn a_delay_trace_steps_and_repeats() {
        let d = DelayTrace::parse("10\n20\n", Duration::from_millis(5)).unwrap();
        let at = |ms| d.delay_at(Duration::from_millis(ms)).0 / MS;
        assert_eq!([at(0), at(4), at(5), at(9), at(10)], [10, 10, 20, 20, 10]);
        assert!(DelayTrace::parse("", Duration::from_millis(1)).is_err());
        assert!(DelayTrace::parse("1", Duration::ZERO).is_err());
        assert!(DelayTrace::parse("300000", Duration::from_millis(1)).is_err());
    }
}
