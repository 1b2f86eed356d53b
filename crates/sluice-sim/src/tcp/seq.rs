//! Sequence numbers and byte ranges.
//!
//! On the wire sequence numbers are 32-bit and wrap (RFC 9293 §3.4). Inside
//! the model every sequence number is a 64-bit *stream offset*: the SYN is
//! offset 0, the first data byte offset 1, and nothing ever wraps, so
//! comparisons are plain `<`. Wire values are unwrapped against a nearby
//! known offset (`snd_una` for ACKs, `rcv_nxt` for data), the way the
//! kernel's `before()`/`after()` compare within half the number space.
//!
//! [`RangeSet`] keeps disjoint byte ranges: the receiver's out-of-order
//! queue and the sender's record of SACKed bytes. Inserting reports which
//! parts are new, so SACK blocks repeated on every ACK cost only their news
//! (Linux gets the same effect from its SACK block cache).

use std::collections::BTreeMap;

/// A stream offset to its wire sequence number, given the initial one.
pub fn to_wire(initial: u32, offset: u64) -> u32 {
    initial.wrapping_add(offset as u32)
}

/// A wire sequence number to the stream offset nearest `near`, whose wire
/// value is `near_wire`. Offsets below zero clamp to zero.
pub fn unwrap(wire: u32, near: u64, near_wire: u32) -> u64 {
    let delta = i64::from(wire.wrapping_sub(near_wire) as i32);
    near.saturating_add_signed(delta)
}

/// Disjoint, non-adjacent half-open byte ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
    bytes: u64,
}

impl RangeSet {
    /// Add `[start, end)`; returns the sub-ranges that were not covered yet.
    pub fn insert(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if start >= end {
            return Vec::new();
        }
        let touching = self.touching(start, end);
        let news = gaps(start, end, &touching);
        let (mut lo, mut hi) = (start, end);
        for (s, e) in touching {
            self.map.remove(&s);
            self.bytes -= e - s;
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.map.insert(lo, hi);
        self.bytes += hi - lo;
        news
    }

    /// Ranges overlapping or adjacent to `[start, end)`, in order.
    fn touching(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut found: Vec<(u64, u64)> = self
            .map
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        found.reverse();
        found
    }

    /// Forget everything below `offset` (trimming a range that straddles it).
    pub fn remove_below(&mut self, offset: u64) {
        while let Some((&s, &e)) = self.map.iter().next() {
            if s >= offset {
                break;
            }
            self.map.remove(&s);
            self.bytes -= e - s;
            if e > offset {
                self.map.insert(offset, e);
                self.bytes += e - offset;
            }
        }
    }

    /// The lowest range.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.map.iter().next().map(|(&s, &e)| (s, e))
    }

    /// The highest range.
    pub fn last(&self) -> Option<(u64, u64)> {
        self.map.iter().next_back().map(|(&s, &e)| (s, e))
    }

    /// Remove and return the lowest range.
    pub fn pop_first(&mut self) -> Option<(u64, u64)> {
        let (s, e) = self.map.pop_first()?;
        self.bytes -= e - s;
        Some((s, e))
    }

    /// The range containing `[start, end)` entirely, if any.
    pub fn covering(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self.map.range(..=start).next_back()?;
        (e >= end).then_some((s, e))
    }

    /// True if `[start, end)` is entirely covered.
    pub fn contains(&self, start: u64, end: u64) -> bool {
        self.covering(start, end).is_some()
    }

    /// Total bytes covered.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// Parts of `[start, end)` not covered by the sorted, disjoint `covered`.
fn gaps(start: u64, end: u64, covered: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = start;
    for &(s, e) in covered {
        if s > at {
            out.push((at, s.min(end)));
        }
        at = at.max(e);
        if at >= end {
            break;
        }
    }
    if at < end {
        out.push((at, end));
    }
    out.retain(|(s, e)| s < e);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_across_the_wrap() {
        let iss = u32::MAX - 10;
        let off = 100u64;
        let w = to_wire(iss, off);
        assert_eq!(unwrap(w, 50, to_wire(iss, 50)), off);
        assert_eq!(unwrap(to_wire(iss, 40), 50, to_wire(iss, 50)), 40);
        assert_eq!(unwrap(0, 0, 5), 0);
    }

    #[test]
    fn insert_reports_news_and_merges() {
        let mut r = RangeSet::default();
        assert_eq!(r.insert(10, 20), vec![(10, 20)]);
        assert_eq!(r.insert(30, 40), vec![(30, 40)]);
        assert_eq!(r.insert(5, 45), vec![(5, 10), (20, 30), (40, 45)]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.bytes(), 40);
        assert_eq!(r.insert(12, 18), vec![]);
        assert_eq!(r.insert(45, 50), vec![(45, 50)]);
        assert_eq!(r.len(), 1);
        r.remove_below(20);
        assert_eq!(r.first(), Some((20, 50)));
        assert_eq!(r.bytes(), 30);
        assert!(r.contains(25, 50));
        assert!(!r.contains(25, 51));
    }
}
