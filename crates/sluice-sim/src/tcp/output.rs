//! What to send now (Linux `tcp_write_xmit()`, `tcp_xmit_retransmit_queue()`,
//! `tcp_send_ack()`, `tcp_transmit_skb()`, `tcp_cwnd_validate()`).
//!
//! [`TcpConnection::poll_transmit`] returns one segment per call, in
//! Linux's priority order: segments a timer produced (SYN, RTO or probe);
//! retransmissions of segments marked lost, lowest sequence first, while
//! packets in flight are below cwnd; new data, while in flight is below cwnd
//! and the segment fits the peer's window, full-sized unless Nagle allows a
//! small one (Minshall's variant: a sub-MSS segment waits only while an
//! earlier sub-MSS segment is unacknowledged) or it carries FIN; finally a
//! pure ACK if one is due. Every segment carries the ACK, window, timestamps
//! and SACK blocks, so data piggybacks a pending ACK.
//!
//! Sending new data keeps Linux's bookkeeping: the first data after an idle
//! period longer than the RTO collapses cwnd (`tcp_cwnd_restart`, halving
//! per RTO idle, not below the initial window); CUBIC's epoch is shifted
//! over the idle time (`CA_EVENT_TX_START`); cwnd-limitedness is recorded
//! per window (`tcp_cwnd_validate`), and a window left unused for an RTO
//! while the application, not cwnd, limited sending is decayed towards what
//! was used (RFC 2861/7661, `tcp_cwnd_application_limited`); the RTO is armed
//! if nothing was outstanding and a tail loss probe scheduled.
//!
//! ECN: new data carries ECT(0) and, once after a reduction, CWR;
//! retransmissions and pure ACKs are not ECN-capable (RFC 3168 §6.1.5);
//! ECE is set while the receiver owes it.
//!
//! Pacing (`tcp_pacing_check`, `tcp_update_skb_after_send`): when the
//! congestion control asks for a pacing rate (BBR; Linux paces CUBIC only
//! under the `fq` qdisc, which hosts here do not run), data waits until
//! `wstamp`, which each data segment moves on by its payload at the rate
//! (less up to half of it for lateness), from the tenth segment on. Every
//! transmission also takes a delivery-rate snapshot (`tcp_rate_skb_sent`).
//! A packet of several segments (`tso.rs`) is paced as one, as Linux
//! paces its GSO packets. Not modelled: autocorking, TCP small queues (a
//! host-level concern).

use super::cc::CongestionControl;
use super::conn::{bbr_cx, CaState, TcpConnection, TcpState};
use super::segment::{Ecn, Flags, Segment, TcpOptions};
use super::seq::to_wire;
use sluice_core::time::{Duration, Time};

impl TcpConnection {
    /// The next segment to put on the wire now, if any.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Segment> {
        if let Some(seg) = self.outbox.pop_front() {
            return Some(seg);
        }
        if self.can_send_data() && !self.paced(now) {
            if let Some(seg) = self.next_retransmission(now) {
                return Some(seg);
            }
            if let Some(seg) = self.next_new_data(now, false) {
                return Some(seg);
            }
        }
        if self.is_established() && self.state != TcpState::Closed && self.rcv.ack_now() {
            let seg = self.build(self.snd_nxt, 0, Flags::ACK, now);
            self.stats.pure_acks_out += 1;
            return Some(seg);
        }
        None
    }

    /// `tcp_pacing_check`: must data wait for the pacing timer? Not the
    /// rest of a packet whose first segment has gone (Linux paces packets,
    /// each of up to [`TcpConnection::tso_segs`] segments).
    fn paced(&mut self, now: Time) -> bool {
        if self.cc.pacing_rate().is_none() || self.wstamp <= now {
            return false;
        }
        if self.gso_room.0 == now && self.gso_room.1 > 0 {
            return false;
        }
        let unsent = self.write_end > self.snd_nxt || self.sb.next_lost().is_some();
        if unsent {
            self.pacing_wake = Some(self.wstamp);
        }
        true
    }

    /// `tcp_update_skb_after_send`: the next data segment may leave once
    /// this one's payload has gone at the pacing rate.
    fn pace(&mut self, len: u32, now: Time) {
        let Some(rate) = self.cc.pacing_rate().filter(|&r| r > 0) else {
            return;
        };
        self.gso_room = match self.gso_room {
            (at, room) if at == now && room > 0 => (now, room - 1),
            _ => (now, self.tso_segs() - 1),
        };
        let prior = self.wstamp;
        self.wstamp = self.wstamp.max(now);
        if self.stats.data_segs_out >= 10 {
            let len_ns = u64::from(len) * 1_000_000_000 / rate;
            let credit = self.wstamp.saturating_since(prior).as_nanos();
            self.wstamp += Duration(len_ns - credit.min(len_ns / 2));
        }
    }

    fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            TcpState::Established
                | TcpState::CloseWait
                | TcpState::FinWait1
                | TcpState::Closing
                | TcpState::LastAck
        )
    }

    /// `tcp_xmit_retransmit_queue`, one segment at a time.
    fn next_retransmission(&mut self, now: Time) -> Option<Segment> {
        let id = self.sb.next_lost()?;
        if self.sb.in_flight() >= self.w.cwnd {
            return None;
        }
        Some(self.retransmit(id, now))
    }

    /// Retransmit segment `id` (`tcp_retransmit_skb`).
    pub(crate) fn retransmit(&mut self, id: u64, now: Time) -> Segment {
        let is_head = self.sb.head().is_some_and(|h| h.id == id);
        let tx = self.rate.on_sent(self.sb.packets_out, now);
        let Some(seg) = self.sb.retransmitted(id, now, tx) else {
            return self.build(self.snd_nxt, 0, Flags::ACK, now);
        };
        if self.in_cwnd_reduction() {
            self.rec.prr_out += 1;
        }
        if self.rec.retrans_stamp.is_none() {
            self.rec.retrans_stamp = Some(self.ts_clock(now));
        }
        if self.rec.state == CaState::Loss {
            self.stats.loss_retransmits += 1;
        } else {
            self.stats.fast_retransmits += 1;
        }
        self.stats.retransmits += 1;
        self.stats.bytes_retrans += u64::from(seg.payload_len());
        let out = self.data_segment(seg.start, seg.end, seg.fin, now, true);
        if is_head && self.xmit_kind() != Some(super::conn::XmitTimer::ReoTimeout) {
            self.xmit_timer = Some((now + self.rtt.rto(), super::conn::XmitTimer::Retrans));
        }
        out
    }

    /// New data (or a lone FIN), if cwnd, the peer's window and Nagle allow.
    /// A loss or window probe (`probe`) ignores cwnd and Nagle.
    pub(crate) fn next_new_data(&mut self, now: Time, probe: bool) -> Option<Segment> {
        let unsent = self.write_end.saturating_sub(self.snd_nxt);
        let fin_due = self.fin_queued && self.snd_nxt <= self.write_end;
        if unsent == 0 && !fin_due {
            return None;
        }
        if !probe && self.sb.in_flight() >= self.w.cwnd {
            self.cwnd_validate(true, now);
            return None;
        }
        let window_room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
        let mut len = unsent.min(u64::from(self.mss));
        if probe {
            len = len.min(window_room);
        } else if len > window_room {
            self.check_probe_timer(now);
            return None;
        }
        let fin = fin_due && self.snd_nxt + len == self.write_end;
        if len == 0 && !fin {
            return None;
        }
        if !probe && len < u64::from(self.mss) && !fin && !self.nagle_allows() {
            return None;
        }
        Some(self.send_new_segment(len as u32, fin, now, probe))
    }

    fn send_new_segment(&mut self, len: u32, fin: bool, now: Time, probe: bool) -> Segment {
        self.restart_after_idle(now);
        if self.sb.in_flight() == 0 {
            if let CongestionControl::Bbr(b) = &mut self.cc {
                let mut cx = bbr_cx!(self, now);
                b.on_tx_start(&mut self.w, &mut cx);
            }
            self.cc.on_tx_start(now, self.lsndtime);
        }
        let prior_packets = self.sb.packets_out;
        let start = self.snd_nxt;
        let end = start + u64::from(len) + u64::from(fin);
        let seg = self.data_segment(start, end, fin, now, false);
        let tx = self.rate.on_sent(prior_packets, now);
        self.sb.push(start, end, fin, now, tx);
        self.snd_nxt = end;
        if len < self.mss {
            self.snd_sml = end;
        }
        if self.in_cwnd_reduction() {
            self.rec.prr_out += 1;
        }
        self.after_new_data(now, prior_packets, probe);
        seg
    }

    /// `tcp_event_new_data_sent` + the tail of `tcp_write_xmit`.
    fn after_new_data(&mut self, now: Time, prior_packets: u32, probe: bool) {
        use super::conn::XmitTimer;
        if prior_packets == 0 || self.xmit_kind() == Some(XmitTimer::LossProbe) {
            self.rearm_rto(now);
        }
        if !probe {
            let limited = self.sb.in_flight() >= self.w.cwnd;
            self.cwnd_validate(limited, now);
            self.schedule_loss_probe(now, false);
        }
    }

    /// `tcp_nagle_test` with Minshall's check.
    fn nagle_allows(&self) -> bool {
        let small_unacked = self.snd_sml > self.snd_una && self.snd_sml <= self.snd_nxt;
        self.cfg.nodelay || self.sb.packets_out == 0 || !small_unacked
    }

    /// `tcp_slow_start_after_idle_check` + `tcp_cwnd_restart`.
    fn restart_after_idle(&mut self, now: Time) {
        if !self.cfg.slow_start_after_idle || !self.sb.is_empty() || self.cc.controls_cwnd() {
            return;
        }
        let rto = self.rtt.rto().as_nanos().max(1);
        let mut idle = now.saturating_since(self.lsndtime).as_nanos();
        if idle <= rto {
            return;
        }
        self.w.ssthresh = self.current_ssthresh();
        let restart = self.cfg.initial_cwnd.min(self.w.cwnd);
        let mut cwnd = self.w.cwnd;
        while idle > rto && cwnd > restart {
            idle -= rto;
            cwnd >>= 1;
        }
        self.w.cwnd = cwnd.max(restart);
        self.cwnd_use.snd_cwnd_stamp = now;
        self.cwnd_use.snd_cwnd_used = 0;
    }

    /// `tcp_cwnd_validate`.
    pub(crate) fn cwnd_validate(&mut self, is_cwnd_limited: bool, now: Time) {
        let packets_out = self.sb.packets_out;
        let u = &mut self.cwnd_use;
        let new_window = self.snd_una >= u.cwnd_usage_seq;
        if new_window || is_cwnd_limited || (!u.is_cwnd_limited && packets_out > u.max_packets_out)
        {
            u.is_cwnd_limited = is_cwnd_limited;
            u.max_packets_out = packets_out;
            u.cwnd_usage_seq = self.snd_nxt;
        }
        if self.is_cwnd_limited() {
            self.cwnd_use.snd_cwnd_used = 0;
            self.cwnd_use.snd_cwnd_stamp = now;
            return;
        }
        let u = &mut self.cwnd_use;
        u.snd_cwnd_used = u.snd_cwnd_used.max(packets_out);
        let idle = now.saturating_since(u.snd_cwnd_stamp);
        if self.cfg.slow_start_after_idle && idle >= self.rtt.rto() && !self.cc.controls_cwnd() {
            self.cwnd_application_limited(now);
        }
    }

    /// `tcp_cwnd_application_limited` (RFC 2861 decay).
    fn cwnd_application_limited(&mut self, now: Time) {
        let app_blocked = self.send_buffer_space() == 0;
        if self.rec.state == CaState::Open && !app_blocked {
            let used = self.cwnd_use.snd_cwnd_used.max(self.cfg.initial_cwnd);
            if used < self.w.cwnd {
                self.w.ssthresh = self.current_ssthresh();
                self.w.cwnd = (self.w.cwnd + used) >> 1;
            }
            self.cwnd_use.snd_cwnd_used = 0;
        }
        self.cwnd_use.snd_cwnd_stamp = now;
    }

    /// A data segment for `[start, end)` (end includes FIN).
    fn data_segment(&mut self, start: u64, end: u64, fin: bool, now: Time, rtx: bool) -> Segment {
        let len = (end - start - u64::from(fin)) as u32;
        let mut flags = Flags::ACK;
        if fin {
            flags.insert(Flags::FIN);
        }
        if end - u64::from(fin) == self.write_end && len > 0 {
            flags.insert(Flags::PSH);
        }
        if self.ecn_ok && !rtx && self.rec.queue_cwr && len > 0 {
            flags.insert(Flags::CWR);
            self.rec.queue_cwr = false;
        }
        let mut seg = self.build(start, len, flags, now);
        if self.ecn_ok && !rtx && len > 0 {
            seg.ecn = Ecn::Ect0;
        }
        self.stats.data_segs_out += u64::from(len > 0);
        self.stats.bytes_sent += u64::from(len);
        self.lsndtime = now;
        if len > 0 {
            self.pace(len, now);
        }
        seg
    }

    /// A zero-window probe: an old sequence number the peer must ACK.
    pub(crate) fn zero_window_probe(&mut self, now: Time) -> Segment {
        self.stats.zero_window_probes += 1;
        self.build(self.snd_una.saturating_sub(1), 0, Flags::ACK, now)
    }

    /// Fill in the header fields every synchronized segment carries.
    fn build(&mut self, seq: u64, len: u32, mut flags: Flags, now: Time) -> Segment {
        if self.ecn_ok && self.rcv.ece() {
            flags.insert(Flags::ECE);
        }
        let mut options = TcpOptions::default();
        if self.ts_ok {
            options.timestamp = Some((self.ts_clock(now), self.rcv.ts_recent));
        }
        if self.sack_ok {
            options.sack = self.rcv.sack_blocks();
        }
        let seg = Segment {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq: to_wire(self.iss, seq),
            ack: to_wire(self.rcv.irs, self.rcv.rcv_nxt),
            flags,
            window: self.rcv.window_field(),
            options,
            payload_len: len,
            ecn: Ecn::NotEct,
        };
        self.rcv.on_ack_sent();
        self.stats.segs_out += 1;
        seg
    }

    /// Queue our SYN and arm its retransmission.
    pub(crate) fn send_syn(&mut self, now: Time) {
        let mut flags = Flags::SYN;
        if self.cfg.ecn == super::config::EcnMode::On {
            flags = flags | Flags::ECE | Flags::CWR;
            self.ecn_ok = true; // confirmed or withdrawn by the SYN-ACK
        }
        let mss = u32::from(self.cfg.advertised_mss());
        self.hs.our_syn_window = u64::from(self.rcv.syn_window(mss));
        let options = TcpOptions {
            mss: Some(self.cfg.advertised_mss()),
            window_scale: self
                .cfg
                .window_scaling
                .then(|| self.rcv.buf.offered_wscale()),
            sack_permitted: self.cfg.sack,
            timestamp: self.cfg.timestamps.then(|| (self.ts_clock(now), 0)),
            ..Default::default()
        };
        let seg = self.syn_segment(flags, 0, options);
        self.queue_handshake(seg, now);
    }

    /// Queue our SYN-ACK and arm its retransmission.
    pub(crate) fn send_synack(&mut self, now: Time) {
        let mut flags = Flags::SYN | Flags::ACK;
        if self.ecn_ok {
            flags.insert(Flags::ECE);
        }
        let offered = self.cfg.window_scaling && self.hs.peer_wscale.is_some();
        let wscale = offered.then_some(self.rcv.wscale);
        let options = TcpOptions {
            mss: Some(self.cfg.advertised_mss()),
            window_scale: wscale,
            sack_permitted: self.sack_ok,
            timestamp: self.ts_ok.then(|| (self.ts_clock(now), self.rcv.ts_recent)),
            ..Default::default()
        };
        let ack = to_wire(self.rcv.irs, 1);
        let seg = self.syn_segment(flags, ack, options);
        self.queue_handshake(seg, now);
    }

    fn syn_segment(&mut self, flags: Flags, ack: u32, options: TcpOptions) -> Segment {
        self.stats.segs_out += 1;
        Segment {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq: self.iss,
            ack,
            flags,
            window: self.hs.our_syn_window.min(u64::from(u16::MAX)) as u16,
            options,
            payload_len: 0,
            ecn: Ecn::NotEct,
        }
    }

    fn queue_handshake(&mut self, seg: Segment, now: Time) {
        self.outbox.push_back(seg);
        if self.hs.retries == 0 {
            self.hs.syn_sent_at = Some(now);
        }
        let t = now + self.rtt.rto();
        self.xmit_timer = Some((t, super::conn::XmitTimer::Retrans));
    }
}
