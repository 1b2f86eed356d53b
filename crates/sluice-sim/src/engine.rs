//! The discrete-event core: a queue of events ordered by `(time, sequence)`.
//!
//! Ties in time are broken by the order events were scheduled, so a run is a
//! pure function of its inputs: the same scenario and seed give the same
//! sequence of events and byte-identical results. Virtual time is
//! `sluice_core::time::Time` (nanoseconds).
//!
//! Two heaps hold the keys: one for events due within [`HORIZON`] of the
//! time they were scheduled at, one for the rest, and the earlier of their
//! two heads comes out, so the order is that of one heap. The far one
//! collects wake-ups that are mostly superseded before they are due (a
//! port's next scheduled change, re-armed after every packet it sends; a
//! TCP timer pushed back by every ACK): there they cost a push each, and
//! the near heap, where every packet's events come and go, stays small.

use sluice_core::time::{Duration, Time};
use std::collections::BinaryHeap;

/// Bits of a heap key that name the event's slab slot (at most 2^24 = 16.7 M
/// events pending at once); the sequence number gets the other 40 (10^12
/// events in a run: twelve days of simulation at a million events a second).
const SLOT_BITS: u32 = 24;

/// A heap key, packed into one integer so that the heap's comparisons are
/// single 128-bit compares: the time in the top 64 bits, then the sequence
/// number, then the slot. Ordered by `(time, sequence)` as the slot is below
/// the sequence number and sequence numbers are unique. Stored inverted
/// (`!key`), so the max-heap pops the earliest.
///
/// Events themselves (a packet rides in one) stay put in a slab; the heap
/// moves only these 16-byte keys as it sifts, which is most of its work.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u128);

impl Key {
    fn new(at: Time, seq: u64, slot: u32) -> Key {
        assert!(
            seq < 1 << (64 - SLOT_BITS) && slot < 1 << SLOT_BITS,
            "the event queue's limits (2^40 events, 2^24 pending) exceeded"
        );
        let low = (seq << SLOT_BITS) | slot as u64;
        Key(!(((at.0 as u128) << 64) | low as u128))
    }
    fn at(self) -> Time {
        Time(((!self.0) >> 64) as u64)
    }
    fn slot(self) -> u32 {
        (!self.0 as u64 & ((1 << SLOT_BITS) - 1)) as u32
    }
}

/// Events due later than this after they are scheduled go in the far heap.
pub const HORIZON: Duration = Duration::from_millis(100);

/// Pending events.
pub struct EventQueue<E> {
    /// Keys of events due within [`HORIZON`] of their scheduling.
    heap: BinaryHeap<Key>,
    /// Keys of the others.
    far: BinaryHeap<Key>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    next_seq: u64,
    now: Time,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            far: BinaryHeap::new(),
            slab: vec![],
            free: vec![],
            next_seq: 0,
            now: Time::ZERO,
        }
    }
}

impl<E> EventQueue<E> {
    /// The time of the event being processed (or of the last one).
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedule `event` at `at` (never earlier than now).
    pub fn schedule(&mut self, at: Time, event: E) {
        let at = at.max(self.now);
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(event);
                i
            }
            None => {
                self.slab.push(Some(event));
                u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 pending events")
            }
        };
        let key = Key::new(at, self.next_seq, slot);
        if at.saturating_since(self.now) < HORIZON {
            self.heap.push(key);
        } else {
            self.far.push(key);
        }
        self.next_seq += 1;
    }

    /// Take the next event due at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: Time) -> Option<(Time, E)> {
        // Inverted keys: the greater is the earlier.
        let near = self.heap.peek() >= self.far.peek();
        let next = if near {
            self.heap.peek()
        } else {
            self.far.peek()
        };
        if next?.at() > until {
            return None;
        }
        let k = if near {
            self.heap.pop()
        } else {
            self.far.pop()
        }?;
        let (at, slot) = (k.at(), k.slot());
        self.now = at;
        self.free.push(slot);
        let event = self.slab[slot as usize]
            .take()
            .expect("a scheduled slot holds its event");
        Some((at, event))
    }

    /// Move the clock to `t` (after the last event before it).
    pub fn advance_to(&mut self, t: Time) {
        self.now = self.now.max(t);
    }

    /// Events still pending.
    pub fn len(&self) -> usize {
        self.heap.len() + self.far.len()
    }

    /// No events pending?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_time_then_schedule_order() {
        let mut q = EventQueue::default();
        q.schedule(Time(5), "c");
        q.schedule(Time(1), "a");
        q.schedule(Time(5), "d");
        q.schedule(Time(1), "b");
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(Time(10)).map(|(_, e)| e)).collect();
        assert_eq!(got, vec!["a", "b", "c", "d"]);
        assert_eq!(q.now(), Time(5));
    }

    #[test]
    fn nothing_after_the_horizon_and_never_in_the_past() {
        let mut q = EventQueue::default();
        q.schedule(Time(10), 1);
        assert!(q.pop_until(Time(9)).is_none());
        assert_eq!(q.pop_until(Time(10)), Some((Time(10), 1)));
        q.schedule(Time(3), 2); // in the past: runs now
        assert_eq!(q.pop_until(Time(10)), Some((Time(10), 2)));
    }

    #[test]
    fn near_and_far_events_come_out_in_one_order() {
        let mut q = EventQueue::default();
        let far = HORIZON.0;
        q.schedule(Time(far + 5), "e"); // far
        q.schedule(Time(3), "a"); // near
        q.schedule(Time(far + 5), "f"); // far, after e
        assert_eq!(q.pop_until(Time(3)), Some((Time(3), "a")));
        q.schedule(Time(far + 5), "g"); // far, after f
        q.schedule(Time(far + 1), "d"); // near
        assert_eq!(q.len(), 4);
        let got: Vec<_> =
            std::iter::from_fn(|| q.pop_until(Time(u64::MAX)).map(|(_, e)| e)).collect();
        assert_eq!(got, vec!["d", "e", "f", "g"]);
        assert!(q.is_empty());
    }

    #[test]
    fn keys_order_by_time_then_sequence_whatever_the_slot() {
        let k = |at, seq, slot| Key::new(Time(at), seq, slot);
        // Inverted: the greater key is the earlier event.
        assert!(k(1, 9, 0) > k(2, 0, 5));
        assert!(k(2, 3, (1 << SLOT_BITS) - 1) > k(2, 4, 0));
        let x = k(u64::MAX, (1 << 40) - 1, 77);
        assert_eq!((x.at(), x.slot()), (Time(u64::MAX), 77));
    }
}
