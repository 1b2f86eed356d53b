//! The receiving half: in-order and out-of-order data, SACK and D-SACK
//! blocks, delayed ACKs, the advertised window, ECN echo (Linux
//! `tcp_data_queue()`, `tcp_event_data_recv()`, `__tcp_ack_snd_check()`,
//! `tcp_send_delayed_ack()`, `__tcp_select_window()`, `tcp_cleanup_rbuf()`).
//!
//! **ACK policy.** An ACK is owed whenever data arrives. It goes out at once
//! when more than one full segment (`rcv_mss`) is unacknowledged, in
//! quick-ACK mode (the first ~16 ACKs of a connection, after a gap longer
//! than the RTO, after duplicates or CE), for out-of-order data (every one
//! produces a duplicate ACK carrying SACK blocks; Linux's SACK compression
//! only engages above ~1 packet per ms and is not modelled), and when a hole
//! is filled. Otherwise the delayed-ACK timer runs for `ato` (40 ms,
//! adapted to the inter-arrival time as Linux does, bounded by
//! `max(srtt, 40 ms)` and 200 ms). When the application reads and the
//! buffer empties after a pushed segment, or a read frees enough space to
//! double the window, the ACK is sent then (`tcp_cleanup_rbuf`).
//!
//! **Window.** What the receive buffer is worth (`buffers.rs`: the
//! measured `scaling_ratio`, autotuning), less the bytes held in the
//! receive and out-of-order queues, at most `rcv_ssthresh` (which each
//! full in-order segment raises by two) and the clamp. Below half the
//! buffer's worth the window is rounded down to the scale granule and
//! closed under one MSS or 1/16 of the buffer (silly window avoidance);
//! the right edge never moves left.
//!
//! **SACK blocks** (RFC 2018 as Linux orders them): the block changed by the
//! latest out-of-order arrival comes first; at most four are remembered; a
//! D-SACK block (RFC 2883) for duplicate data precedes them once.

use super::buffers::RecvBuffer;
use super::segment::SackBlocks;
use super::seq::{to_wire, RangeSet};
use sluice_core::time::{Duration, Time};

/// `TCP_ATO_MIN` / `TCP_DELACK_MIN`: 40 ms.
pub const ATO_MIN: Duration = Duration::from_millis(40);
/// `TCP_DELACK_MAX`: 200 ms.
pub const DELACK_MAX: Duration = Duration::from_millis(200);
/// `TCP_MAX_QUICKACKS`.
pub const MAX_QUICKACKS: u32 = 16;
/// Remembered SACK blocks (`TCP_NUM_SACKS`).
const NUM_SACKS: usize = 4;
/// `TCP_MSS_DEFAULT`.
const MSS_DEFAULT: u32 = 536;

/// One arriving segment, as the receiver sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Arrival {
    /// Stream offset of the first payload byte.
    pub start: u64,
    /// Payload bytes.
    pub len: u32,
    /// FIN set.
    pub fin: bool,
    /// PSH set.
    pub psh: bool,
    /// CWR set (the sender reacted to our ECE).
    pub cwr: bool,
    /// IP ECN field (only read when ECN was negotiated).
    pub ecn: super::segment::Ecn,
}

#[derive(Clone, Debug)]
struct AckState {
    /// An ACK is owed (`ICSK_ACK_SCHED`).
    scheduled: bool,
    /// Send it now (`ICSK_ACK_NOW`).
    now: bool,
    /// Delayed-ACK deadline (`ICSK_ACK_TIMER`).
    timer: Option<Time>,
    pushed: bool,
    pushed2: bool,
    /// Quick ACKs left.
    quick: u32,
    ato: Duration,
    /// Last in-order data arrival; `None` before the first.
    lrcvtime: Option<Time>,
    rcv_mss: u32,
    last_seg_size: u32,
}

/// The receive side of a connection.
#[derive(Clone, Debug)]
pub struct Receiver {
    /// Peer's initial sequence number.
    pub irs: u32,
    /// Next expected stream offset.
    pub rcv_nxt: u64,
    ooo: RangeSet,
    sack_list: Vec<(u64, u64)>,
    dsack: Option<(u64, u64)>,
    /// In-order bytes the application has not read.
    buffered: u64,
    /// In-order payload bytes received so far.
    pub delivered: u64,
    /// Bytes the application has read.
    pub read_total: u64,
    /// Window last advertised, in bytes, from `rcv_wup`.
    rcv_wnd: u64,
    rcv_wup: u64,
    /// Our window scale shift (0 unless both sides agreed).
    pub wscale: u8,
    /// The receive buffer and what it is worth.
    pub buf: RecvBuffer,
    adv_mss: u32,
    fin_seq: Option<u64>,
    /// The peer's FIN has been received in order.
    pub fin_received: bool,
    ack: AckState,
    /// Latest TSval to echo (`ts_recent`).
    pub ts_recent: u32,
    ecn_demand_cwr: bool,
    ecn_seen: bool,
    delayed_ack: bool,
    /// Segments that arrived with CE.
    pub ce_received: u64,
    /// Duplicate segments (all bytes already received).
    pub dup_segments: u64,
}

/// What the caller needs to know about an arrival.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// New in-order payload bytes.
    pub new_bytes: u64,
    /// The peer's FIN was consumed.
    pub fin: bool,
}

impl Receiver {
    /// A receiver with buffer `buf` that advertises an MSS of `adv_mss`.
    pub fn new(buf: RecvBuffer, adv_mss: u32, delayed_ack: bool) -> Self {
        Receiver {
            irs: 0,
            rcv_nxt: 0,
            ooo: RangeSet::default(),
            sack_list: Vec::new(),
            dsack: None,
            buffered: 0,
            delivered: 0,
            read_total: 0,
            rcv_wnd: 0,
            rcv_wup: 0,
            wscale: 0,
            buf,
            adv_mss: adv_mss.max(1),
            fin_seq: None,
            fin_received: false,
            ack: AckState {
                scheduled: false,
                now: false,
                timer: None,
                pushed: false,
                pushed2: false,
                quick: 0,
                ato: Duration::ZERO,
                lrcvtime: None,
                rcv_mss: adv_mss.clamp(88, MSS_DEFAULT),
                last_seg_size: 0,
            },
            ts_recent: 0,
            ecn_demand_cwr: false,
            ecn_seen: false,
            delayed_ack,
            ce_received: 0,
            dup_segments: 0,
        }
    }

    /// The peer's SYN arrived with sequence number `irs` and we offered
    /// `syn_window` bytes (unscaled) in our SYN or SYN-ACK.
    pub fn on_syn(&mut self, irs: u32, syn_window: u64) {
        self.irs = irs;
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.rcv_wnd = syn_window;
    }

    /// The window for a SYN or SYN-ACK: unscaled, the buffer's worth
    /// rounded down to whole segments of `mss` (`tcp_select_initial_window`;
    /// Linux rounds a SYN to 1460-byte segments — 64240 — and a SYN-ACK
    /// with timestamps to 1448-byte ones — 65160).
    pub fn syn_window(&mut self, mss: u32) -> u16 {
        self.buf.initial_window(mss).min(u64::from(u16::MAX)) as u16
    }

    /// Bytes held in the receive and out-of-order queues.
    pub fn held(&self) -> u64 {
        self.buffered + self.ooo.bytes()
    }

    /// In-order bytes waiting for the application.
    pub fn readable(&self) -> u64 {
        self.buffered
    }

    /// Bytes waiting in the out-of-order queue.
    pub fn out_of_order_bytes(&self) -> u64 {
        self.ooo.bytes()
    }

    /// Right edge of the advertised window.
    fn right_edge(&self) -> u64 {
        self.rcv_wup + self.rcv_wnd
    }

    /// True if `start` lies in the receive window (RFC 5961 RST check).
    pub fn in_window(&self, start: u64) -> bool {
        start >= self.rcv_nxt && start <= self.right_edge().max(self.rcv_nxt)
    }

    /// Owe an ACK and send it at once (handshake, challenge, window probe).
    pub fn force_ack(&mut self) {
        self.ack.scheduled = true;
        self.ack.now = true;
    }

    /// Store TSval per RFC 7323 §4.3 (`tcp_replace_ts_recent`).
    pub fn update_ts_recent(&mut self, seg_start: u64, tsval: u32) {
        if seg_start <= self.rcv_wup {
            self.ts_recent = tsval;
        }
    }

    /// Handle an arriving segment with data or FIN (`tcp_data_queue`).
    pub fn on_data(&mut self, a: &Arrival, ecn_ok: bool, now: Time, rto: Duration) -> Accepted {
        let end = a.start + u64::from(a.len) + u64::from(a.fin);
        if ecn_ok && a.cwr {
            self.accept_cwr(a.len);
        }
        if end <= self.rcv_nxt {
            self.old_data(a.start, end);
            return Accepted::default();
        }
        if a.len > 0 && a.start >= self.right_edge() {
            self.enter_quickack_mode(MAX_QUICKACKS);
            self.ack.scheduled = true;
            return Accepted::default();
        }
        let got = if a.start <= self.rcv_nxt {
            self.in_order(a, now, rto)
        } else {
            self.out_of_order(a);
            Accepted::default()
        };
        if ecn_ok {
            self.check_ce(a.ecn);
        }
        got
    }

    fn old_data(&mut self, start: u64, end: u64) {
        self.dup_segments += 1;
        if end > start {
            self.dsack = Some((start, end.min(self.rcv_nxt)));
        }
        self.enter_quickack_mode(MAX_QUICKACKS);
        self.ack.scheduled = true;
    }

    fn in_order(&mut self, a: &Arrival, now: Time, rto: Duration) -> Accepted {
        if a.start < self.rcv_nxt && a.len > 0 {
            self.dsack = Some((a.start, self.rcv_nxt));
        }
        let data_end = a.start + u64::from(a.len);
        let mut got = Accepted::default();
        if data_end > self.rcv_nxt {
            got.new_bytes = data_end - self.rcv_nxt;
            self.advance(data_end);
            self.event_data_recv(a, now, rto);
        }
        if a.fin {
            self.fin_seq = Some(data_end);
        }
        got.new_bytes += self.drain_out_of_order();
        got.fin = self.consume_fin();
        self.ack.scheduled = true;
        got
    }

    fn advance(&mut self, to: u64) {
        let add = to.saturating_sub(self.rcv_nxt);
        self.rcv_nxt += add;
        self.buffered += add;
        self.delivered += add;
    }

    /// Move data the hole was hiding into the receive queue.
    fn drain_out_of_order(&mut self) -> u64 {
        if self.ooo.is_empty() {
            return 0;
        }
        let before = self.rcv_nxt;
        while let Some((s, e)) = self.ooo.first() {
            if s > self.rcv_nxt {
                break;
            }
            self.ooo.pop_first();
            self.advance(e);
        }
        let rcv_nxt = self.rcv_nxt;
        self.sack_list.retain(|&(s, _)| s > rcv_nxt);
        if self.ooo.is_empty() {
            self.ack.now = true; // RFC 5681 4.2: ACK at once when a gap fills
        }
        self.rcv_nxt - before
    }

    fn consume_fin(&mut self) -> bool {
        if self.fin_received || self.fin_seq != Some(self.rcv_nxt) {
            return false;
        }
        self.rcv_nxt += 1;
        self.fin_received = true;
        self.ack.now = true;
        true
    }

    fn out_of_order(&mut self, a: &Arrival) {
        let (s, e) = (a.start, a.start + u64::from(a.len));
        if a.fin {
            self.fin_seq = Some(e);
        }
        if e > s {
            if self.ooo.insert(s, e).is_empty() {
                self.dup_segments += 1;
                self.dsack = Some((s, e));
            }
            self.note_sack_block(s, e);
        }
        self.ack.scheduled = true;
        self.ack.now = true;
    }

    /// `tcp_sack_new_ofo_skb`: the block holding `[s, e)` moves to the front.
    fn note_sack_block(&mut self, s: u64, e: u64) {
        let Some((lo, hi)) = self.ooo.covering(s, e) else {
            return;
        };
        self.sack_list.retain(|&(bs, be)| be < lo || bs > hi);
        self.sack_list.insert(0, (lo, hi));
        self.sack_list.truncate(NUM_SACKS);
    }

    /// `tcp_event_data_recv` for in-order data.
    fn event_data_recv(&mut self, a: &Arrival, now: Time, rto: Duration) {
        self.measure_rcv_mss(a);
        self.buf.rtt_sample_window(self.rcv_nxt, self.rcv_wnd, now);
        match self.ack.lrcvtime {
            None => {
                self.incr_quickack(MAX_QUICKACKS);
                self.ack.ato = ATO_MIN;
            }
            Some(last) => self.adapt_ato(now.saturating_since(last), rto),
        }
        self.ack.lrcvtime = Some(now);
        if self.buf.grow_window(a.len, self.held(), self.adv_mss) {
            self.ack.quick |= 1;
        }
    }

    fn adapt_ato(&mut self, m: Duration, rto: Duration) {
        let half_min = Duration(ATO_MIN.as_nanos() / 2);
        let ato = self.ack.ato;
        if m <= half_min {
            self.ack.ato = Duration(ato.as_nanos() / 2) + half_min;
        } else if m < ato {
            self.ack.ato = (Duration(ato.as_nanos() / 2) + m).min(rto);
        } else if m > rto {
            self.incr_quickack(MAX_QUICKACKS);
        }
    }

    /// `tcp_measure_rcv_mss` (segment size estimate and the PUSHED flags).
    fn measure_rcv_mss(&mut self, a: &Arrival) {
        let ack = &mut self.ack;
        let lss = ack.last_seg_size;
        ack.last_seg_size = 0;
        if a.len >= ack.rcv_mss {
            if a.len != ack.rcv_mss {
                self.buf.measure_ratio(a.len, self.rcv_wnd);
            }
            ack.rcv_mss = a.len.min(self.adv_mss);
            if a.psh {
                ack.pushed = true;
            }
            return;
        }
        let remnant = a.psh || a.fin;
        if a.len + 20 >= MSS_DEFAULT || (a.len + 20 >= 88 && !remnant) {
            ack.last_seg_size = a.len;
            if a.len == lss {
                ack.rcv_mss = a.len;
                return;
            }
        }
        if ack.pushed {
            ack.pushed2 = true;
        }
        ack.pushed = true;
    }

    fn incr_quickack(&mut self, max: u32) {
        let per = 2 * u64::from(self.ack.rcv_mss.max(1));
        let q = ((self.rcv_wnd / per) as u32).max(2).min(max);
        self.ack.quick = self.ack.quick.max(q);
    }

    fn enter_quickack_mode(&mut self, max: u32) {
        self.incr_quickack(max);
        self.ack.ato = ATO_MIN;
    }

    fn accept_cwr(&mut self, len: u32) {
        self.ecn_demand_cwr = false;
        if len > 0 {
            self.ack.now = true;
        }
    }

    /// `tcp_ecn_check_ce`.
    fn check_ce(&mut self, ecn: super::segment::Ecn) {
        use super::segment::Ecn;
        match ecn {
            Ecn::NotEct if self.ecn_seen => self.enter_quickack_mode(2),
            Ecn::NotEct => {}
            Ecn::Ce => {
                self.ce_received += 1;
                if !self.ecn_demand_cwr {
                    self.enter_quickack_mode(2);
                    self.ecn_demand_cwr = true;
                }
                self.ecn_seen = true;
            }
            _ => self.ecn_seen = true,
        }
    }

    /// ECE should be set on our segments.
    pub fn ece(&self) -> bool {
        self.ecn_demand_cwr
    }

    /// Decide between an immediate and a delayed ACK (`__tcp_ack_snd_check`).
    pub fn ack_snd_check(&mut self, now: Time, srtt: Option<Duration>) {
        if !self.ack.scheduled {
            return;
        }
        let two_segments = self.rcv_nxt - self.rcv_wup > u64::from(self.ack.rcv_mss)
            && self.compute_window() >= self.rcv_wnd;
        if two_segments || self.in_quickack_mode() || self.ack.now || !self.delayed_ack {
            self.ack.now = true;
        } else if self.ooo.is_empty() {
            self.send_delayed_ack(now, srtt);
        } else {
            self.ack.now = true;
        }
    }

    fn in_quickack_mode(&self) -> bool {
        self.ack.quick > 0
    }

    /// `tcp_send_delayed_ack`: arm (or keep) the delayed-ACK timer.
    fn send_delayed_ack(&mut self, now: Time, srtt: Option<Duration>) {
        let mut ato = self.ack.ato.max(ATO_MIN);
        if ato > ATO_MIN {
            let mut max_ato = if self.ack.pushed {
                DELACK_MAX
            } else {
                Duration::from_millis(500)
            };
            if let Some(s) = srtt {
                max_ato = max_ato.min(s.max(ATO_MIN));
            }
            ato = ato.min(max_ato);
        }
        ato = ato.min(DELACK_MAX);
        let mut deadline = now + ato;
        if let Some(t) = self.ack.timer {
            if t <= now + Duration(ato.as_nanos() / 4) {
                self.ack.now = true;
                return;
            }
            deadline = deadline.min(t);
        }
        self.ack.timer = Some(deadline);
    }

    /// An ACK must go out now.
    pub fn ack_now(&self) -> bool {
        self.ack.scheduled && self.ack.now
    }

    /// When the delayed-ACK timer fires, if armed.
    pub fn delack_deadline(&self) -> Option<Time> {
        self.ack.timer.filter(|_| self.ack.scheduled)
    }

    /// The delayed-ACK timer fired (`tcp_delack_timer_handler`): the ACK is
    /// due, and Linux inflates `ato` since the timer was missed.
    pub fn on_delack_timeout(&mut self, rto: Duration) {
        self.ack.timer = None;
        if self.ack.scheduled {
            self.ack.ato = Duration(self.ack.ato.as_nanos() * 2).min(rto);
            self.ack.now = true;
        }
    }

    /// Some segment carrying our ACK is being sent (`tcp_event_ack_sent`).
    pub fn on_ack_sent(&mut self) {
        if self.ack.quick > 0 {
            let pkts = u32::from(self.ack.scheduled);
            if pkts >= self.ack.quick {
                self.ack.quick = 0;
                self.ack.ato = ATO_MIN;
            } else {
                self.ack.quick -= pkts;
            }
        }
        self.ack.scheduled = false;
        self.ack.now = false;
        self.ack.timer = None;
        self.ack.pushed = false;
        self.ack.pushed2 = false;
        self.dsack = None;
    }

    /// SACK blocks for the next ACK (D-SACK first), as wire sequence numbers.
    pub fn sack_blocks(&self) -> SackBlocks {
        let mut b = SackBlocks::default();
        let wire = |x: u64| to_wire(self.irs, x);
        if let Some((s, e)) = self.dsack {
            b.push(wire(s), wire(e));
        }
        for &(s, e) in &self.sack_list {
            b.push(wire(s), wire(e));
        }
        b
    }

    /// `__tcp_select_window`: the window we could offer now, in bytes.
    fn compute_window(&mut self) -> u64 {
        let allowed = self.buf.full_space();
        let full = allowed.min(self.buf.window_clamp);
        let mss = u64::from(self.ack.rcv_mss).min(full);
        if mss == 0 {
            return 0;
        }
        let mut free = self.buf.free_space(self.held());
        let granule = 1u64 << self.wscale;
        if free < full / 2 {
            self.ack.quick = 0;
            free -= free % granule;
            if free < allowed / 16 || free < mss {
                return 0;
            }
        }
        free = free.min(self.buf.rcv_ssthresh);
        if self.wscale > 0 {
            free.div_ceil(granule) * granule
        } else {
            let win = self.rcv_wnd;
            if win + mss <= free || win > free {
                free - free % mss
            } else {
                win
            }
        }
    }

    /// `tcp_select_window`: the window field of an outgoing segment; never
    /// moves the right edge left.
    pub fn window_field(&mut self) -> u16 {
        let cur = self.right_edge().saturating_sub(self.rcv_nxt);
        let granule = 1u64 << self.wscale;
        let mut new = self.compute_window();
        if new < cur {
            new = cur.div_ceil(granule) * granule;
        }
        self.rcv_wnd = new;
        self.rcv_wup = self.rcv_nxt;
        let max = u64::from(u16::MAX) << self.wscale;
        (new.min(max) >> self.wscale) as u16
    }

    /// The application reads up to `n` bytes at `now` (`tcp_recvmsg`:
    /// `tcp_rcv_space_adjust`, then `tcp_cleanup_rbuf`).
    pub fn read(&mut self, n: u64, now: Time) -> u64 {
        let got = n.min(self.buffered);
        self.buffered -= got;
        self.read_total += got;
        if got > 0 {
            let ooo = self.ooo.last().map_or(0, |(_, e)| e - self.rcv_nxt);
            self.buf
                .space_adjust(now, self.read_total, self.buffered, ooo);
            self.cleanup_rbuf();
        }
        got
    }

    /// The connection is established (`tcp_init_buffer_space`).
    pub fn establish(&mut self, now: Time) {
        let (wnd, read) = (self.rcv_wnd, self.read_total);
        self.buf.establish(self.adv_mss, wnd, now, read);
    }

    /// An arriving segment echoed `tsecr` when our timestamp clock read
    /// `ts_now` (`tcp_rcv_rtt_measure_ts`).
    pub fn rtt_sample_ts(&mut self, tsecr: u32, ts_now: u32, len: u32) {
        self.buf.rtt_sample_ts(tsecr, ts_now, len, self.ack.rcv_mss);
    }

    fn cleanup_rbuf(&mut self) {
        let a = &self.ack;
        let mut ack = a.scheduled
            && (self.rcv_nxt - self.rcv_wup > u64::from(a.rcv_mss)
                || ((a.pushed2 || a.pushed) && self.held() == 0));
        if !ack && !self.fin_received {
            let now_wnd = self.right_edge().saturating_sub(self.rcv_nxt);
            if 2 * now_wnd <= self.buf.window_clamp {
                let new = self.compute_window();
                ack = new > 0 && new >= 2 * now_wnd;
            }
        }
        if ack {
            self.ack.scheduled = true;
            self.ack.now = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver with a 512 KiB SO_RCVBUF whose window has fully opened.
    fn rx() -> Receiver {
        let cfg = crate::tcp::TcpConfig {
            recv_buffer: Some(512 << 10),
            ..Default::default()
        };
        let mut r = Receiver::new(RecvBuffer::new(&cfg), 1448, true);
        r.on_syn(1000, 65535);
        r.wscale = 7;
        r.buf.window_clamp = u64::MAX;
        r.buf.rcv_ssthresh = u64::MAX;
        r
    }

    fn seg(start: u64, len: u32) -> Arrival {
        Arrival {
            start,
            len,
            ..Default::default()
        }
    }

    #[test]
    fn out_of_order_then_fill() {
        let mut r = rx();
        let t = Time::ZERO;
        let rto = Duration::from_secs(1);
        r.on_data(&seg(1, 1448), false, t, rto);
        r.on_data(&seg(1 + 2 * 1448, 1448), false, t, rto);
        assert!(r.ack_now());
        let b = r.sack_blocks();
        assert_eq!(b.len(), 1);
        assert_eq!(b.as_slice()[0].0, to_wire(1000, 1 + 2 * 1448));
        let got = r.on_data(&seg(1 + 1448, 1448), false, t, rto);
        assert_eq!(got.new_bytes, 2 * 1448);
        assert_eq!(r.rcv_nxt, 1 + 3 * 1448);
        assert!(r.sack_blocks().is_empty());
        assert!(r.ack_now());
    }

    #[test]
    fn duplicate_gets_dsack() {
        let mut r = rx();
        let rto = Duration::from_secs(1);
        r.on_data(&seg(1, 100), false, Time::ZERO, rto);
        r.on_ack_sent();
        r.on_data(&seg(1, 100), false, Time::ZERO, rto);
        r.ack_snd_check(Time::ZERO, None);
        assert!(r.ack_now());
        assert_eq!(r.sack_blocks().as_slice(), &[(1001, 1101)]);
    }

    #[test]
    fn window_shrinks_with_held_data_but_not_its_right_edge() {
        let mut r = rx();
        r.window_field();
        assert_eq!(r.rcv_wnd, 512 << 10); // 1 MiB of memory at 128/256
        r.on_data(&seg(1, 1448), false, Time::ZERO, Duration::from_secs(1));
        // The first full segment measures 160/256: 640 KiB, less the
        // segment held, rounded up to 128-byte granules.
        r.window_field();
        assert_eq!(r.rcv_wnd, (640 << 10) - 1408);
        r.read(1448, Time::ZERO);
        r.window_field();
        assert_eq!(r.rcv_wnd, 640 << 10);
    }
}
