//! netem's time-ordered queue ("tfifo").
//!
//! Packets wait here until their `time_to_send`. The kernel keeps them in
//! two structures: a linear list for the common case where packets arrive
//! in time order (constant delay, or low jitter), and a red-black tree for
//! the ones that would go earlier than the list's tail. A packet joins the
//! list when the list is empty or its time is not earlier than the list's
//! tail; otherwise it goes into the tree, after any packets with the same
//! time. The next packet out is the earlier of the tree's first and the
//! list's head, the list winning ties (`netem_peek`). sluice keeps the same
//! two structures (a `BTreeMap` keyed by time and arrival order stands for
//! the rb-tree), so packets with equal times leave in the kernel's order.

use crate::packet::Packet;
use std::collections::{BTreeMap, VecDeque};

/// A packet with its departure time (ns on the caller's clock; may be
/// negative when a negative jittered delay meets an early clock).
#[derive(Debug)]
pub(crate) struct Timed {
    pub(crate) time_to_send: i64,
    pub(crate) pkt: Packet,
}

/// The tfifo: `t_root` and `t_head`..`t_tail`.
#[derive(Debug, Default)]
pub(crate) struct Tfifo {
    tree: BTreeMap<(i64, u64), Packet>,
    list: VecDeque<Timed>,
    /// Insertion counter: orders equal times in the tree.
    seq: u64,
    /// Bytes queued (accounted lengths).
    bytes: u64,
}

impl Tfifo {
    /// Packets queued (`t_len`).
    pub(crate) fn len(&self) -> usize {
        self.tree.len() + self.list.len()
    }

    /// Bytes queued.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// `tfifo_enqueue`.
    #[inline]
    pub(crate) fn push(&mut self, t: Timed) {
        self.bytes += t.pkt.len as u64;
        match self.list.back() {
            Some(tail) if t.time_to_send < tail.time_to_send => {
                self.seq += 1;
                self.tree.insert((t.time_to_send, self.seq), t.pkt);
            }
            _ => self.list.push_back(t),
        }
    }

    /// `netem_peek`: the departure time of the next packet out.
    pub(crate) fn peek_time(&self) -> Option<i64> {
        self.head_in_tree().map(|(_, t)| t)
    }

    /// Whether the next packet is the tree's (else the list's), and its time.
    fn head_in_tree(&self) -> Option<(bool, i64)> {
        let tree = self.tree.keys().next().map(|k| k.0);
        let list = self.list.front().map(|t| t.time_to_send);
        match (tree, list) {
            (None, None) => None,
            (Some(t), None) => Some((true, t)),
            (None, Some(l)) => Some((false, l)),
            (Some(t), Some(l)) => Some(if t < l { (true, t) } else { (false, l) }),
        }
    }

    /// `netem_erase_head`: take the next packet out.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Timed> {
        let (in_tree, _) = self.head_in_tree()?;
        let t = if in_tree {
            let ((time_to_send, _), pkt) = self.tree.pop_first()?;
            Timed { time_to_send, pkt }
        } else {
            self.list.pop_front()?
        };
        self.bytes -= t.pkt.len as u64;
        Some(t)
    }

    /// The latest departure time queued: the later of the tree's last
    /// packet and the list's tail (the reference `rate` spaces packets from).
    pub(crate) fn last_time(&self) -> Option<i64> {
        let tree = self.tree.keys().next_back().map(|k| k.0);
        let list = self.list.back().map(|t| t.time_to_send);
        match (tree, list) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// `tfifo_reset`.
    pub(crate) fn clear(&mut self) {
        self.tree.clear();
        self.list.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;

    fn timed(t: i64, id: u64) -> Timed {
        Timed {
            time_to_send: t,
            pkt: Packet::from(Skb {
                id,
                len: 100,
                ..Default::default()
            }),
        }
    }

    fn drain(q: &mut Tfifo) -> Vec<(i64, u64)> {
        std::iter::from_fn(|| q.pop().map(|t| (t.time_to_send, t.pkt.id))).collect()
    }

    #[test]
    fn packets_leave_in_time_order_and_equal_times_in_arrival_order() {
        let mut q = Tfifo::default();
        for (t, id) in [(10, 1), (30, 2), (20, 3), (20, 4), (30, 5), (5, 6), (30, 7)] {
            q.push(timed(t, id));
        }
        assert_eq!((q.len(), q.bytes()), (7, 700));
        assert_eq!(q.last_time(), Some(30));
        assert_eq!(
            drain(&mut q),
            vec![(5, 6), (10, 1), (20, 3), (20, 4), (30, 2), (30, 5), (30, 7)]
        );
        assert_eq!((q.len(), q.bytes(), q.peek_time()), (0, 0, None));
    }

    #[test]
    fn the_list_wins_ties_with_the_tree() {
        let mut q = Tfifo::default();
        q.push(timed(60, 1)); // list
        q.push(timed(80, 2)); // list
        q.push(timed(60, 3)); // tree: earlier than the list's tail
        q.push(timed(70, 4)); // tree
        assert_eq!(q.peek_time(), Some(60));
        assert_eq!(drain(&mut q), vec![(60, 1), (60, 3), (70, 4), (80, 2)]);
        // A packet earlier than the list's tail goes to the tree and still leaves first.
        q.push(timed(90, 5));
        q.push(timed(10, 6));
        assert_eq!(q.last_time(), Some(90));
        assert_eq!(drain(&mut q), vec![(10, 6), (90, 5)]);
    }
}
