//! The retransmission queue and its SACK scoreboard (Linux's `tcp_rtx_queue`
//! with the `TCPCB_SACKED_*` tags of `tcp_sacktag_write_queue()`).
//!
//! Every segment sent and not yet cumulatively acknowledged is a [`SentSeg`]
//! in sequence order. Segment boundaries never change once sent (the model
//! has no TSO and no re-segmentation), so SACK blocks from our receiver line
//! up with them; a block that covers part of a segment leaves it unsacked,
//! as Linux does without fragmenting. Tags, and the counters Linux keeps:
//!
//! - `sacked`: selectively acknowledged (`TCPCB_SACKED_ACKED`, `sacked_out`);
//! - `lost`: deemed lost by RACK or an RTO (`TCPCB_LOST`, `lost_out`);
//! - `retrans`: a retransmission is in flight (`TCPCB_SACKED_RETRANS`,
//!   `retrans_out`); `ever_retrans` (`TCPCB_EVER_RETRANS`) stays set.
//!
//! Packets in flight are `packets_out − sacked_out − lost_out + retrans_out`
//! (`tcp_packets_in_flight`, RFC 6675's "pipe" in Linux's form).
//!
//! Two indexes keep per-ACK work proportional to what changed:
//! `by_send_order` holds the segments RACK must examine — neither sacked nor
//! lost-and-awaiting-retransmission — ordered by (re)transmission, like
//! Linux's `tsorted_sent_queue`; `lost_pending` holds the lost segments not
//! yet retransmitted, in sequence order, for `tcp_xmit_retransmit_queue()`.
//! Every (re)transmission takes the next send order, so `by_send_order` is
//! a queue appended at its back: a segment leaving it leaves a hole, found
//! by binary search, and holes are dropped when they reach the front (the
//! cumulative ACK takes segments from there).
//! SACKed bytes are also kept as a [`RangeSet`] so a block repeated on every
//! ACK is only processed for its new part.

use super::rate::TxSnapshot;
use super::seq::RangeSet;
use sluice_core::time::Time;
use std::collections::{BTreeSet, VecDeque};

/// One transmitted, not cumulatively acknowledged segment.
#[derive(Clone, Debug)]
pub struct SentSeg {
    /// Stable identity (monotonic in sequence order).
    pub id: u64,
    /// First stream offset.
    pub start: u64,
    /// One past the last stream offset (a FIN counts one).
    pub end: u64,
    /// Carries FIN.
    pub fin: bool,
    /// Time of the latest (re)transmission.
    pub xmit_time: Time,
    /// Order of the latest (re)transmission among all transmissions.
    pub send_order: u64,
    /// Selectively acknowledged.
    pub sacked: bool,
    /// Deemed lost.
    pub lost: bool,
    /// A retransmission is in flight.
    pub retrans: bool,
    /// Retransmitted at least once.
    pub ever_retrans: bool,
    /// The delivery-rate snapshot of its latest transmission.
    pub tx: TxSnapshot,
}

impl SentSeg {
    /// Payload bytes (FIN excluded).
    pub fn payload_len(&self) -> u32 {
        (self.end - self.start - u64::from(self.fin)) as u32
    }
}

/// What a newly (s)acknowledged segment tells RTT, RACK and PRR.
#[derive(Clone, Copy, Debug)]
pub struct Delivered {
    /// When it was last sent.
    pub xmit_time: Time,
    /// Its end offset.
    pub end: u64,
    /// Whether it had been retransmitted.
    pub ever_retrans: bool,
    /// Whether it had been SACKed before this cumulative ACK.
    pub was_sacked: bool,
    /// Payload bytes.
    pub bytes: u32,
    /// Carried FIN.
    pub fin: bool,
    /// The delivery-rate snapshot of its latest transmission.
    pub tx: TxSnapshot,
}

/// The retransmission queue with SACK tags and counters.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    segs: VecDeque<SentSeg>,
    /// `(send order, id)` in send order; a hole has the id [`HOLE`].
    by_send_order: VecDeque<(u64, u64)>,
    lost_pending: BTreeSet<u64>,
    sacked_bytes: RangeSet,
    next_id: u64,
    next_send_order: u64,
    /// Segments in the queue (`packets_out`).
    pub packets_out: u32,
    /// SACKed segments (`sacked_out`).
    pub sacked_out: u32,
    /// Lost segments (`lost_out`).
    pub lost_out: u32,
    /// Retransmissions in flight (`retrans_out`).
    pub retrans_out: u32,
    /// Segments ever marked lost, a lost retransmission again (`tp->lost`).
    pub lost_total: u64,
}

/// The id of a hole in `by_send_order` (segment ids count from 0 up).
const HOLE: u64 = u64::MAX;

impl Scoreboard {
    /// `tcp_packets_in_flight`.
    pub fn in_flight(&self) -> u32 {
        (self.packets_out + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    /// True when nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// The oldest outstanding segment.
    pub fn head(&self) -> Option<&SentSeg> {
        self.segs.front()
    }

    /// The newest outstanding segment.
    pub fn last(&self) -> Option<&SentSeg> {
        self.segs.back()
    }

    /// A segment by id.
    pub fn get(&self, id: u64) -> Option<&SentSeg> {
        self.index(id).map(|i| &self.segs[i])
    }

    fn index(&self, id: u64) -> Option<usize> {
        self.segs.binary_search_by_key(&id, |s| s.id).ok()
    }

    fn order(&mut self) -> u64 {
        self.next_send_order += 1;
        self.next_send_order
    }

    /// Put segment `id` in `by_send_order` at `order`: at the back for a
    /// (re)transmission, back in its place after an undo.
    fn insert_order(&mut self, order: u64, id: u64) {
        if self.by_send_order.back().is_none_or(|&(o, _)| o < order) {
            self.by_send_order.push_back((order, id));
            return;
        }
        match self.by_send_order.binary_search_by_key(&order, |&(o, _)| o) {
            Ok(i) => self.by_send_order[i].1 = id,
            Err(i) => self.by_send_order.insert(i, (order, id)),
        }
    }

    /// Take the segment sent at `order` out of `by_send_order`.
    fn remove_order(&mut self, order: u64) {
        // Mostly the oldest: the cumulative ACK takes segments in order.
        if self.by_send_order.front().is_some_and(|&(o, _)| o == order) {
            self.by_send_order.pop_front();
        } else if let Ok(i) = self.by_send_order.binary_search_by_key(&order, |&(o, _)| o) {
            self.by_send_order[i].1 = HOLE;
        }
        while self
            .by_send_order
            .front()
            .is_some_and(|&(_, id)| id == HOLE)
        {
            self.by_send_order.pop_front();
        }
    }

    /// Record a first transmission of `[start, end)`.
    pub fn push(&mut self, start: u64, end: u64, fin: bool, now: Time, tx: TxSnapshot) {
        let id = self.next_id;
        self.next_id += 1;
        let send_order = self.order();
        self.insert_order(send_order, id);
        self.segs.push_back(SentSeg {
            id,
            start,
            end,
            fin,
            xmit_time: now,
            send_order,
            sacked: false,
            lost: false,
            retrans: false,
            ever_retrans: false,
            tx,
        });
        self.packets_out += 1;
    }

    /// Record a retransmission of segment `id` (`tcp_retransmit_skb`).
    pub fn retransmitted(&mut self, id: u64, now: Time, tx: TxSnapshot) -> Option<SentSeg> {
        let i = self.index(id)?;
        let order = self.order();
        self.remove_order(self.segs[i].send_order);
        let seg = &mut self.segs[i];
        seg.tx = tx;
        seg.send_order = order;
        seg.xmit_time = now;
        seg.ever_retrans = true;
        if !seg.retrans {
            seg.retrans = true;
            self.retrans_out += 1;
        }
        self.lost_pending.remove(&id);
        self.insert_order(order, id);
        Some(self.segs[i].clone())
    }

    /// `tcp_mark_skb_lost`: tag a segment lost (or a lost retransmission).
    pub fn mark_lost(&mut self, id: u64) -> bool {
        let Some(i) = self.index(id) else {
            return false;
        };
        let seg = &mut self.segs[i];
        if seg.sacked {
            return false;
        }
        if seg.lost {
            if !seg.retrans {
                return false;
            }
            seg.retrans = false; // the retransmission was lost too
            self.retrans_out -= 1;
            self.lost_total += 1;
        } else {
            self.lost_total += 1;
            seg.lost = true;
            self.lost_out += 1;
            if seg.retrans {
                return true; // stays examined by RACK until marked again
            }
        }
        let order = seg.send_order;
        self.remove_order(order);
        self.lost_pending.insert(id);
        true
    }

    /// Forget every loss mark (undo of a spurious timeout).
    pub fn unmark_lost(&mut self) {
        let mut back = vec![];
        for seg in self.segs.iter_mut().filter(|s| s.lost) {
            seg.lost = false;
            if !seg.retrans {
                back.push((seg.send_order, seg.id));
            }
        }
        for (order, id) in back {
            self.insert_order(order, id);
        }
        self.lost_pending.clear();
        self.lost_out = 0;
    }

    /// The first lost segment awaiting retransmission.
    pub fn next_lost(&self) -> Option<u64> {
        self.lost_pending.first().copied()
    }

    /// Segments RACK examines, oldest transmission first.
    pub fn in_send_order(&self) -> impl Iterator<Item = &SentSeg> + '_ {
        self.by_send_order
            .iter()
            .filter(|&&(_, id)| id != HOLE)
            .filter_map(|&(_, id)| self.get(id))
    }

    /// Apply one SACK block; returns the newly SACKed segments.
    pub fn sack(&mut self, start: u64, end: u64) -> Vec<Delivered> {
        let news = self.sacked_bytes.insert(start, end);
        let mut out = Vec::new();
        for (s, e) in news {
            let mut i = self.segs.partition_point(|g| g.end <= s);
            while i < self.segs.len() && self.segs[i].start < e {
                if let Some(d) = self.try_sack(i) {
                    out.push(d);
                }
                i += 1;
            }
        }
        out
    }

    fn try_sack(&mut self, i: usize) -> Option<Delivered> {
        let seg = &self.segs[i];
        if seg.sacked || !self.sacked_bytes.contains(seg.start, seg.end) {
            return None;
        }
        let seg = &mut self.segs[i];
        seg.sacked = true;
        self.sacked_out += 1;
        if seg.lost {
            self.lost_out -= 1;
        }
        if seg.retrans {
            self.retrans_out -= 1;
        }
        let (id, order) = (seg.id, seg.send_order);
        self.lost_pending.remove(&id);
        self.remove_order(order);
        let seg = &mut self.segs[i];
        let d = delivered(seg, false);
        // Its rate sample is taken; the cumulative ACK must not take it again.
        seg.tx.delivered_time = None;
        Some(d)
    }

    /// Remove everything below `ack` (`tcp_clean_rtx_queue`); a segment the
    /// ACK covers only in part is trimmed (`tcp_trim_head`).
    pub fn ack(&mut self, ack: u64) -> Vec<Delivered> {
        let mut out = Vec::new();
        while let Some(d) = self.ack_next(ack) {
            out.push(d);
        }
        self.ack_trim(ack);
        out
    }

    /// [`Scoreboard::ack`] one segment at a time, without a list: the
    /// next segment `ack` covers, removed; `None` when there is none
    /// left, and then [`Scoreboard::ack_trim`] finishes.
    pub fn ack_next(&mut self, ack: u64) -> Option<Delivered> {
        if self.segs.front()?.end > ack {
            return None;
        }
        let seg = self.segs.pop_front()?;
        Some(self.forget(seg))
    }

    /// The end of [`Scoreboard::ack`]: trim the head segment if `ack`
    /// covers part of it, and forget SACKed ranges below `ack`.
    pub fn ack_trim(&mut self, ack: u64) {
        if let Some(head) = self.segs.front_mut() {
            if head.start < ack {
                head.start = ack;
            }
        }
        self.sacked_bytes.remove_below(ack);
    }

    fn forget(&mut self, seg: SentSeg) -> Delivered {
        self.packets_out -= 1;
        if seg.sacked {
            self.sacked_out -= 1;
        } else {
            if seg.lost {
                self.lost_out -= 1;
            }
            if seg.retrans {
                self.retrans_out -= 1;
            }
        }
        self.lost_pending.remove(&seg.id);
        self.remove_order(seg.send_order);
        let was_sacked = seg.sacked;
        delivered(&seg, was_sacked)
    }

    /// Ids of every segment, in sequence order.
    pub fn ids(&self) -> Vec<u64> {
        self.segs.iter().map(|s| s.id).collect()
    }
}

fn delivered(seg: &SentSeg, was_sacked: bool) -> Delivered {
    Delivered {
        xmit_time: seg.xmit_time,
        end: seg.end,
        ever_retrans: seg.ever_retrans,
        was_sacked,
        bytes: seg.payload_len(),
        fin: seg.fin,
        tx: seg.tx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::default();
        for i in 0..n {
            b.push(
                1 + i * 100,
                1 + (i + 1) * 100,
                false,
                Time(i),
                TxSnapshot::default(),
            );
        }
        b
    }

    #[test]
    fn counters_follow_sack_loss_retransmit_ack() {
        let mut b = board(10);
        assert_eq!(b.in_flight(), 10);
        assert_eq!(b.sack(201, 501).len(), 3);
        assert_eq!(b.sack(201, 601).len(), 1);
        assert_eq!((b.sacked_out, b.in_flight()), (4, 6));
        let lost = b.ids()[0];
        assert!(b.mark_lost(lost));
        assert_eq!(
            (b.lost_out, b.in_flight(), b.next_lost()),
            (1, 5, Some(lost))
        );
        b.retransmitted(lost, Time(50), TxSnapshot::default());
        assert_eq!((b.retrans_out, b.in_flight(), b.next_lost()), (1, 6, None));
        assert!(b.mark_lost(lost)); // the retransmission is lost too
        assert_eq!(
            (b.retrans_out, b.lost_out, b.next_lost()),
            (0, 1, Some(lost))
        );
        let acked = b.ack(601);
        assert_eq!(acked.len(), 6);
        assert_eq!((b.packets_out, b.sacked_out, b.lost_out), (4, 0, 0));
        assert_eq!(b.in_flight(), 4);
    }

    #[test]
    fn partial_block_does_not_sack_and_partial_ack_trims() {
        let mut b = board(3);
        assert!(b.sack(101, 150).is_empty());
        assert_eq!(b.sack(150, 201).len(), 1);
        b.ack(50);
        assert_eq!(b.head().map(|s| s.start), Some(50));
        assert_eq!(b.packets_out, 3);
    }
}
