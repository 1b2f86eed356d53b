//! Schedules: a wire's rate, delay and loss as steps (and ramps) over time.
//!
//! A schedule is a small CSV table, one row per change:
//!
//! ```text
//! # at,   rate,   delay, loss   [,ramp]
//! 0s,     50mbit, 20ms,  0%
//! 15s,    0,      ,            # an outage: nothing is carried
//! 15.3s,  50mbit, 45ms,        # back, on a longer path
//! 25s,    5mbit,  ,      1%, ramp
//! 30s,    loop
//! ```
//!
//! `at` is the time since the wire started (tc's time syntax, with a unit:
//! `15s`, `300ms`); rows are strictly in order of time. `rate` is tc's rate
//! syntax, `0` an outage (packets wait in the qdisc and the transmit
//! buffer, as behind a modem that lost its signal); `delay` a tc time; `loss`
//! a percentage (`1%`) or a fraction (`0.01`). An empty cell leaves that
//! value as it was. A row ending in `ramp` moves every value it sets
//! linearly from the row before's to its own, reaching them at its `at`
//! (taken in steps of [`RAMP_STEP`]); a row without is a step. A last row
//! `AT,loop` plays the schedule again from its first row every `AT`.
//! A first row `at,rate,delay,loss` (a header) and `#` comments are
//! skipped. Before the first row's time the wire has its own settings.
//!
//! A row out of order, at the same time as the one before, with a bad
//! value or extra cells is refused with its line number; so is a ramp
//! from a value no row before it set.

use crate::port::WireChange;
use crate::time::Duration;
use crate::units::{parse_link_rate, parse_time_ns, strtod};
use std::sync::Arc;

pub use crate::trace::TraceError as ScheduleError;

/// How finely a ramp is followed.
pub const RAMP_STEP: Duration = Duration::from_millis(1);

/// The most steps a schedule (its ramps expanded) may have.
pub const MAX_STEPS: usize = 1_000_000;

/// A wire's settings over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    steps: Arc<[(Duration, WireChange)]>,
    period: Option<Duration>,
}

/// What one row of a schedule sets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Row {
    rate: Option<u64>,
    delay: Option<u64>,
    loss: Option<f64>,
}

fn fail<T>(line: usize, reason: impl Into<String>) -> Result<T, ScheduleError> {
    Err(ScheduleError {
        line,
        reason: reason.into(),
    })
}

fn time_cell(line: usize, what: &str, s: &str) -> Result<u64, ScheduleError> {
    if s == "0" {
        return Ok(0);
    }
    let bad = || {
        fail(
            line,
            format!("{what} {s:?} is not a time with a unit (e.g. 15s, 300ms)"),
        )
    };
    if s.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return bad();
    }
    match parse_time_ns(s) {
        Ok(ns) if ns >= 0 && (ns as u64) <= MAX_TIME_NS => Ok(ns as u64),
        Ok(ns) if ns >= 0 || ns == i64::MIN => fail(line, format!("{what} {s} is too long")),
        Ok(_) => fail(line, format!("{what} {s} is negative")),
        Err(_) => bad(),
    }
}

/// The latest time or longest delay a schedule takes: a year.
const MAX_TIME_NS: u64 = 365 * 24 * 3600 * 1_000_000_000;

fn loss_cell(line: usize, s: &str) -> Result<f64, ScheduleError> {
    let (v, rest) = strtod(s).unwrap_or((f64::NAN, s));
    let v = match rest {
        "%" => v / 100.0,
        "" => v,
        _ => f64::NAN,
    };
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        fail(
            line,
            format!("loss {s:?} is not a percentage (0% to 100%) or a fraction (0 to 1)"),
        )
    }
}

fn rate_cell(line: usize, s: &str) -> Result<u64, ScheduleError> {
    if s == "0" {
        return Ok(0);
    }
    parse_link_rate(s).map_err(|e| ScheduleError {
        line,
        reason: format!("rate {s:?}: {e}"),
    })
}

impl Schedule {
    /// Parse a schedule's text ([module docs](self)).
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let mut steps: Vec<(Duration, WireChange)> = vec![];
        let mut last: Option<(u64, Row)> = None;
        let mut period = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let body = raw.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            if period.is_some() {
                return fail(line, "nothing may follow the loop row");
            }
            let cells: Vec<&str> = body.split(',').map(str::trim).collect();
            if steps.is_empty() && last.is_none() && cells[0].eq_ignore_ascii_case("at") {
                continue;
            }
            let at = time_cell(line, "at", cells[0])?;
            if let Some((prev, _)) = last {
                if at <= prev {
                    return fail(
                        line,
                        "rows must be in order of time, each after the one before",
                    );
                }
            }
            if cells.get(1) == Some(&"loop") {
                if cells.len() > 2 || at == 0 {
                    return fail(
                        line,
                        "a loop row is `AT,loop` with AT after the last change",
                    );
                }
                period = Some(Duration(at));
                continue;
            }
            let (row, ramp) = Self::row(line, &cells)?;
            let before = last.map(|(_, r)| r).unwrap_or_default();
            if ramp {
                let (t0, _) = last
                    .ok_or(())
                    .or_else(|_| fail(line, "a ramp needs a row before it"))?;
                Self::ramp(line, &mut steps, (t0, before), (at, row))?;
            } else {
                steps.push((Duration(at), row.change()));
            }
            let merged = Row {
                rate: row.rate.or(before.rate),
                delay: row.delay.or(before.delay),
                loss: row.loss.or(before.loss),
            };
            last = Some((at, merged));
            if steps.len() > MAX_STEPS {
                return fail(
                    line,
                    format!("the schedule has more than {MAX_STEPS} steps"),
                );
            }
        }
        if steps.is_empty() {
            return fail(0, "no rows");
        }
        if period.is_some_and(|p| steps.last().is_some_and(|(at, _)| *at >= p)) {
            return fail(0, "the loop comes before the last change");
        }
        Ok(Schedule {
            steps: steps.into(),
            period,
        })
    }

    fn row(line: usize, cells: &[&str]) -> Result<(Row, bool), ScheduleError> {
        let ramp = cells.get(4).is_some_and(|c| c.eq_ignore_ascii_case("ramp"));
        if cells.len() > 5 || (cells.len() == 5 && !ramp && !cells[4].is_empty()) {
            return fail(line, "a row is at,rate,delay,loss with an optional `ramp`");
        }
        let cell = |i: usize| cells.get(i).copied().filter(|c| !c.is_empty());
        let row = Row {
            rate: cell(1).map(|s| rate_cell(line, s)).transpose()?,
            delay: cell(2).map(|s| time_cell(line, "delay", s)).transpose()?,
            loss: cell(3).map(|s| loss_cell(line, s)).transpose()?,
        };
        Ok((row, ramp))
    }

    /// Expand a ramp from `from` (at its time) to `to` into steps.
    fn ramp(
        line: usize,
        steps: &mut Vec<(Duration, WireChange)>,
        from: (u64, Row),
        to: (u64, Row),
    ) -> Result<(), ScheduleError> {
        let ((t0, a), (t1, b)) = (from, to);
        let n = (t1 - t0).div_ceil(RAMP_STEP.0);
        if steps.len() as u64 + n > MAX_STEPS as u64 {
            return fail(
                line,
                format!("the ramp makes more than {MAX_STEPS} steps of 1 ms"),
            );
        }
        let unset = (b.rate.is_some() && a.rate.is_none())
            || (b.delay.is_some() && a.delay.is_none())
            || (b.loss.is_some() && a.loss.is_none());
        if unset {
            return fail(line, "a ramp must start from values a row before it set");
        }
        let mix = |x: f64, y: f64, f: f64| x + (y - x) * f;
        for k in 1..=n {
            let at = (t0 + k * RAMP_STEP.0).min(t1);
            let f = (at - t0) as f64 / (t1 - t0) as f64;
            let row = Row {
                rate: b
                    .rate
                    .map(|r| mix(a.rate.unwrap_or(0) as f64, r as f64, f).round() as u64),
                delay: b
                    .delay
                    .map(|d| mix(a.delay.unwrap_or(0) as f64, d as f64, f).round() as u64),
                loss: b.loss.map(|l| mix(a.loss.unwrap_or(0.0), l, f)),
            };
            steps.push((Duration(at), row.change()));
        }
        Ok(())
    }

    /// The changes, each at its time since the start.
    pub fn steps(&self) -> &[(Duration, WireChange)] {
        &self.steps
    }

    /// The loop's period, if the schedule repeats.
    pub fn period(&self) -> Option<Duration> {
        self.period
    }
}

impl Row {
    fn change(self) -> WireChange {
        WireChange {
            rate_bps: self.rate,
            delay: self.delay.map(Duration),
            loss: self.loss,
            ..Default::default()
        }
    }
}

/// A schedule being followed: which step comes next.
#[derive(Debug, Clone)]
pub struct ScheduleCursor {
    schedule: Schedule,
    start: crate::time::Time,
    next: usize,
}

impl ScheduleCursor {
    /// Follow `schedule` from `start`.
    pub fn new(schedule: Schedule, start: crate::time::Time) -> Self {
        ScheduleCursor {
            schedule,
            start,
            next: 0,
        }
    }

    /// When the next change is due, if any.
    pub fn next_time(&self) -> Option<crate::time::Time> {
        let (at, _) = self.schedule.steps.get(self.next)?;
        Some(self.start + *at)
    }

    /// The next change, if due at or before `now`; the cursor moves past it.
    pub fn pop_due(&mut self, now: crate::time::Time) -> Option<WireChange> {
        if self.next_time()? > now {
            return None;
        }
        let change = self.schedule.steps[self.next].1.clone();
        self.next += 1;
        if self.next == self.schedule.steps.len() {
            if let Some(p) = self.schedule.period {
                self.next = 0;
                self.start += p;
            }
        }
        Some(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    const MS: u64 = 1_000_000;

    #[test]
    fn rows_become_steps_and_empty_cells_leave_values_alone() {
        let s = Schedule::parse(
            "at,rate,delay,loss\n0s, 10mbit, 20ms, 0%\n15s, 0,,  # outage\n15.5s,10mbit,40ms,1%\n",
        )
        .unwrap();
        let st = s.steps();
        assert_eq!(st.len(), 3);
        assert_eq!(st[0].0, Duration(0));
        assert_eq!(st[0].1.rate_bps, Some(10_000_000));
        assert_eq!(st[0].1.delay, Some(Duration::from_millis(20)));
        assert_eq!(st[1].0, Duration(15_000 * MS));
        assert_eq!(
            (st[1].1.rate_bps, st[1].1.delay, st[1].1.loss),
            (Some(0), None, None)
        );
        assert_eq!(st[2].1.loss, Some(0.01));
        assert_eq!(s.period(), None);
    }

    #[test]
    fn a_ramp_moves_linearly_in_one_millisecond_steps() {
        let s = Schedule::parse("0s,10mbit,10ms,0\n10ms,20mbit,20ms,,ramp\n").unwrap();
        let st = s.steps();
        assert_eq!(st.len(), 11);
        assert_eq!(st[1].0, Duration(MS));
        assert_eq!(st[1].1.rate_bps, Some(11_000_000));
        assert_eq!(st[5].1.delay, Some(Duration::from_millis(15)));
        assert_eq!(st[10].1.rate_bps, Some(20_000_000));
        assert_eq!(st[10].1.loss, None);
    }

    #[test]
    fn a_loop_plays_the_schedule_again() {
        let s = Schedule::parse("0s,10mbit,,\n1s,0,,\n2s,loop\n").unwrap();
        let mut c = ScheduleCursor::new(s, Time(5));
        let mut seen = vec![];
        while seen.len() < 5 {
            let t = c.next_time().unwrap();
            let ch = c.pop_due(t).unwrap();
            seen.push((t.0, ch.rate_bps.unwrap()));
        }
        let s = 1_000_000_000;
        assert_eq!(
            seen,
            [
                (5, 10_000_000),
                (s + 5, 0),
                (2 * s + 5, 10_000_000),
                (3 * s + 5, 0),
                (4 * s + 5, 10_000_000)
            ]
        );
    }

    #[test]
    fn bad_rows_are_refused_with_their_line() {
        let e = |t: &str| Schedule::parse(t).unwrap_err().to_string();
        assert_eq!(
            e("1s,1mbit,,\n1s,2mbit,,\n"),
            "line 2: rows must be in order of time, each after the one before"
        );
        assert_eq!(
            e("2s,1mbit,,\n1s,2mbit,,\n"),
            "line 2: rows must be in order of time, each after the one before"
        );
        assert!(e("0s,fast,,\n").starts_with("line 1: rate \"fast\""));
        assert!(e("0s,1mbit,5,\n").contains("not a time with a unit"));
        assert!(e("0s,1mbit,5ms,150%\n").contains("loss"));
        assert!(e("5,1mbit,,\n").contains("not a time with a unit"));
        assert!(e("0s,1mbit,,,,\n").starts_with("line 1: a row is"));
        assert_eq!(
            e("0s,,1ms,\n1s,2mbit,,,ramp\n"),
            "line 2: a ramp must start from values a row before it set"
        );
        assert_eq!(
            e("0s,1mbit,,\n1s,loop\n2s,1mbit,,\n"),
            "line 3: nothing may follow the loop row"
        );
        assert_eq!(e("# nothing\n"), "line 0: no rows");
        assert!(e("0s,1mbit,,\n10000s,2mbit,,,ramp\n").contains("more than"));
        assert!(e("0s,-1mbit,,\n").contains("negative"));
    }
}
