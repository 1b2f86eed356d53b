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
//!
//! Events that come due in the order they are scheduled can wait in a
//! [`Lane`] instead: a wire's arrivals (first in, first out, after a
//! fixed delay). A lane is a queue of keys of which only the first is in
//! the near heap; when it comes out, the next takes its place. The keys
//! are those the heaps would hold, so the order is the same, but the heaps
//! hold one entry per wire rather than one per packet on it (over a
//! hundred on a 60 Mbit/s satellite hop of 27 ms).

use sluice_core::time::{Duration, Time};
use std::collections::{BinaryHeap, VecDeque};

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

/// A queue of events due in the order they were scheduled
/// ([`EventQueue::lane`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane(u32);

/// The lane of an event that waits in the heaps only.
const NO_LANE: u32 = u32::MAX;

/// A lane's events: the first one's key in the near heap, the others'
/// behind it here, in order.
#[derive(Default)]
struct LaneKeys {
    /// The lane's first event is in the near heap.
    head_in_heap: bool,
    /// When its last event is due.
    last: Time,
    /// The keys of the events after the first.
    behind: VecDeque<Key>,
}

/// Pending events.
pub struct EventQueue<E> {
    /// Keys of events due within [`HORIZON`] of their scheduling, and the
    /// first key of every lane.
    heap: BinaryHeap<Key>,
    /// Keys of the others.
    far: BinaryHeap<Key>,
    /// Events by slot, each with its lane (or [`NO_LANE`]).
    slab: Vec<(Option<E>, u32)>,
    free: Vec<u32>,
    /// Each lane's keys.
    lanes: Vec<LaneKeys>,
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
            lanes: vec![],
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
        let key = self.key(at, event, NO_LANE);
        if at.saturating_since(self.now) < HORIZON {
            self.heap.push(key);
        } else {
            self.far.push(key);
        }
    }

    /// A new lane, for events that mostly come due in the order they are
    /// scheduled.
    pub fn lane(&mut self) -> Lane {
        self.lanes.push(LaneKeys::default());
        Lane(u32::try_from(self.lanes.len() - 1).expect("fewer than 2^32 lanes"))
    }

    /// Schedule `event` at `at` (never earlier than now) in `lane`: the
    /// same as [`EventQueue::schedule`], at less cost when it is due no
    /// earlier than the lane's last event (else it goes in the heaps).
    pub fn schedule_in(&mut self, lane: Lane, at: Time, event: E) {
        let at = at.max(self.now);
        let i = lane.0 as usize;
        if self.lanes[i].head_in_heap && self.lanes[i].last > at {
            return self.schedule(at, event);
        }
        let key = self.key(at, event, lane.0);
        let l = &mut self.lanes[i];
        l.last = at;
        if l.head_in_heap {
            l.behind.push_back(key);
        } else {
            l.head_in_heap = true;
            self.heap.push(key);
        }
    }

    /// Put `event` in the slab and give it the next key.
    fn key(&mut self, at: Time, event: E, lane: u32) -> Key {
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = (Some(event), lane);
                i
            }
            None => {
                self.slab.push((Some(event), lane));
                u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 pending events")
            }
        };
        let key = Key::new(at, self.next_seq, slot);
        self.next_seq += 1;
        key
    }

    /// Take the next event due at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: Time) -> Option<(Time, E)> {
        // Inverted keys: the greater is the earlier.
        let near = self.heap.peek() >= self.far.peek();
        let k = *if near {
            self.heap.peek()
        } else {
            self.far.peek()
        }?;
        let (at, slot) = (k.at(), k.slot());
        if at > until {
            return None;
        }
        self.now = at;
        self.free.push(slot);
        let (event, lane) = &mut self.slab[slot as usize];
        let event = event.take().expect("a scheduled slot holds its event");
        let next = match self.lanes.get_mut(*lane as usize) {
            None => None,
            Some(l) => {
                let next = l.behind.pop_front();
                l.head_in_heap = next.is_some();
                next
            }
        };
        match (near, next) {
            // The lane's next event takes its place at the top of the near
            // heap, where lanes keep their first keys: one sift down.
            (true, Some(next)) => *self.heap.peek_mut().expect("its top was read") = next,
            (true, None) => drop(self.heap.pop()),
            (false, _) => drop(self.far.pop()),
        }
        Some((at, event))
    }

    /// Move the clock to `t` (after the last event before it).
    pub fn advance_to(&mut self, t: Time) {
        self.now = self.now.max(t);
    }

    /// Events still pending.
    pub fn len(&self) -> usize {
        let waiting: usize = self.lanes.iter().map(|l| l.behind.len()).sum();
        self.heap.len() + self.far.len() + waiting
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
    fn lanes_and_heaps_give_one_order() {
        let mut q = EventQueue::default();
        let (a, b) = (q.lane(), q.lane());
        q.schedule_in(a, Time(5), "a5");
        q.schedule(Time(5), "h5");
        q.schedule_in(b, Time(2), "b2");
        q.schedule_in(a, Time(5), "a5'");
        q.schedule_in(a, Time(9), "a9");
        q.schedule_in(a, Time(3), "a3"); // before the lane's last: the heaps
        q.schedule(Time(HORIZON.0), "far");
        q.schedule_in(b, Time(7), "b7");
        assert_eq!(q.len(), 8);
        let got: Vec<_> =
            std::iter::from_fn(|| q.pop_until(Time(u64::MAX)).map(|(_, e)| e)).collect();
        assert_eq!(got, ["b2", "a3", "a5", "h5", "a5'", "b7", "a9", "far"]);
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
