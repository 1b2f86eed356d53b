//! Arriving segments: the handshake, connection-state transitions, and the
//! dispatch of ACK and data processing (Linux `tcp_rcv_state_process()`,
//! `tcp_rcv_synsent_state_process()`, `tcp_conn_request()`).
//!
//! Option negotiation follows Linux: window scaling, SACK and timestamps are
//! used only if both SYNs carry them; the effective MSS is the smaller of
//! the two advertised values minus the 12 timestamp bytes when timestamps
//! are on (1460 → 1448); ECN is on when the SYN carried ECE+CWR and the
//! SYN-ACK ECE (RFC 3168 §6.1.1). A SYN or SYN-ACK that was never
//! retransmitted gives the first RTT sample. After two or more SYN
//! retransmissions the initial window is 1 segment (`tcp_init_transfer`).
//!
//! Simplifications: no simultaneous open, no RST generation (a segment for a
//! closed endpoint is ignored; the host may answer with RST), no PAWS, and a
//! segment outside the receive window has its ACK field processed anyway
//! (Linux would only send a duplicate ACK) — harmless when ACKs are valid.

use super::cc::CongestionControl;
use super::conn::{CaState, TcpConnection, TcpError, TcpState, XmitTimer};
use super::receiver::Arrival;
use super::segment::{Flags, Segment};
use super::seq::{to_wire, unwrap};
use sluice_core::time::{Duration, Time};

/// `TCP_TIMEWAIT_LEN`.
pub const TIME_WAIT: Duration = Duration::from_secs(60);
/// MSS assumed when the peer's SYN carries none (RFC 9293).
const DEFAULT_PEER_MSS: u32 = 536;

impl TcpConnection {
    /// A segment arrived for this endpoint at `now`.
    pub fn on_segment(&mut self, seg: &Segment, now: Time) {
        if seg.dst_port != self.local_port {
            return;
        }
        if self.state != TcpState::Listen && seg.src_port != self.remote_port {
            return;
        }
        self.stats.segs_in += 1;
        match self.state {
            TcpState::Closed => {}
            TcpState::Listen => self.on_listen(seg, now),
            TcpState::SynSent => self.on_syn_sent(seg, now),
            _ => self.on_synchronized(seg, now),
        }
        if self.cfg.auto_read {
            self.read(u64::MAX, now);
        }
    }

    fn on_listen(&mut self, seg: &Segment, now: Time) {
        let f = seg.flags;
        if !f.contains(Flags::SYN) || f.contains(Flags::ACK) || f.contains(Flags::RST) {
            return;
        }
        self.remote_port = seg.src_port;
        self.negotiate(seg);
        self.ecn_ok = self.cfg.ecn != super::config::EcnMode::Off
            && f.contains(Flags::ECE)
            && f.contains(Flags::CWR);
        self.state = TcpState::SynReceived;
        self.snd_nxt = 1;
        self.hs.our_syn_window = u64::from(self.rcv.syn_window(self.mss));
        self.rcv.on_syn(seg.seq, self.hs.our_syn_window);
        self.snd_wnd = u64::from(seg.window);
        if let Some((val, _)) = seg.options.timestamp.filter(|_| self.ts_ok) {
            self.rcv.ts_recent = val;
        }
        self.send_synack(now);
    }

    fn on_syn_sent(&mut self, seg: &Segment, now: Time) {
        let f = seg.flags;
        let ack_ok = f.contains(Flags::ACK) && seg.ack == to_wire(self.iss, 1);
        if f.contains(Flags::ACK) && !ack_ok {
            return;
        }
        if f.contains(Flags::RST) {
            if ack_ok {
                self.abort(TcpError::Refused);
            }
            return;
        }
        if !(f.contains(Flags::SYN) && ack_ok) {
            return; // simultaneous open is not modelled
        }
        self.negotiate(seg);
        self.ecn_ok = self.ecn_ok && f.contains(Flags::ECE) && !f.contains(Flags::CWR);
        self.rcv.on_syn(seg.seq, self.hs.our_syn_window);
        self.snd_una = 1;
        self.snd_wnd = u64::from(seg.window);
        self.snd_wl1 = 0;
        if let Some((val, ecr)) = seg.options.timestamp.filter(|_| self.ts_ok) {
            self.rcv.ts_recent = val;
            self.handshake_rtt(now, Some(ecr));
        } else {
            self.handshake_rtt(now, None);
        }
        self.establish(now);
        self.rcv.force_ack();
    }

    /// Record what the peer's SYN or SYN-ACK offers.
    fn negotiate(&mut self, seg: &Segment) {
        let o = &seg.options;
        let peer_mss = o.mss.map_or(DEFAULT_PEER_MSS, u32::from);
        self.hs.peer_wscale = o.window_scale;
        self.ts_ok = self.cfg.timestamps && o.timestamp.is_some();
        self.sack_ok = self.cfg.sack && o.sack_permitted;
        match (self.cfg.window_scaling, o.window_scale) {
            (true, Some(ws)) => {
                self.snd_wscale = ws.min(super::config::MAX_WSCALE);
                self.rcv.wscale = self.rcv.buf.offered_wscale();
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv.wscale = 0;
                self.rcv.buf.no_scaling();
            }
        }
        let ours = u32::from(self.cfg.advertised_mss());
        let ts = if self.ts_ok {
            super::config::TS_OPTION_LEN
        } else {
            0
        };
        self.mss = peer_mss.min(ours).saturating_sub(ts).max(48);
    }

    /// RTT from a handshake that needed no retransmission (Karn).
    fn handshake_rtt(&mut self, now: Time, ecr: Option<u32>) {
        if self.hs.retries > 0 {
            return;
        }
        let sample = match (self.hs.syn_sent_at, ecr) {
            (Some(t), _) => Some(now.saturating_since(t)),
            (None, Some(ecr)) if ecr != 0 => {
                let ms = self.ts_clock(now).wrapping_sub(ecr);
                Some(Duration::from_millis(u64::from(ms)))
            }
            _ => None,
        };
        if let Some(rtt) = sample {
            self.take_rtt_sample(rtt);
        }
    }

    /// `tcp_init_transfer`: the connection is synchronized.
    fn establish(&mut self, now: Time) {
        self.state = if self.fin_queued {
            TcpState::FinWait1
        } else {
            TcpState::Established
        };
        self.xmit_timer = None;
        let cwnd = if self.hs.retries > 1 {
            1
        } else {
            self.cfg.initial_cwnd
        };
        self.w = super::cc::Window::new(cwnd);
        self.cc = CongestionControl::new(self.cfg.congestion, self.cfg.hystart, now, self.snd_nxt);
        if self.cfg.congestion == super::config::CongestionAlgorithm::Bbr {
            let seed = u64::from(self.iss) << 16 | u64::from(self.local_port);
            let mut cx = super::conn::bbr_cx!(self, now);
            let bbr = super::bbr::Bbr::new(&mut self.w, &mut cx, seed);
            self.cc = CongestionControl::Bbr(Box::new(bbr));
        }
        self.cwnd_use.snd_cwnd_stamp = now;
        self.lsndtime = now;
        self.rec.high_seq = self.snd_nxt;
        self.rcv.establish(now);
        self.expand_sndbuf();
    }

    fn on_synchronized(&mut self, seg: &Segment, now: Time) {
        let f = seg.flags;
        if f.contains(Flags::RST) {
            self.on_rst(seg);
            return;
        }
        if f.contains(Flags::SYN) {
            self.on_repeated_syn(now);
            return;
        }
        if !f.contains(Flags::ACK) {
            return;
        }
        let start = self.seg_start(seg);
        if let Some((val, ecr)) = seg.options.timestamp.filter(|_| self.ts_ok) {
            self.rcv.update_ts_recent(start, val);
            let ts_now = self.ts_clock(now);
            self.rcv.rtt_sample_ts(ecr, ts_now, seg.payload_len);
        }
        if self.state == TcpState::SynReceived && !self.complete_passive_open(seg, now) {
            return;
        }
        self.on_ack(seg, now);
        self.on_data_segment(seg, start, now);
        self.after_ack_state_changes(now);
        let srtt = self.rtt.srtt();
        self.rcv.ack_snd_check(now, srtt);
    }

    /// Stream offset of the segment's first byte.
    fn seg_start(&self, seg: &Segment) -> u64 {
        let rcv_nxt = self.rcv.rcv_nxt;
        unwrap(seg.seq, rcv_nxt, to_wire(self.rcv.irs, rcv_nxt))
    }

    fn on_rst(&mut self, seg: &Segment) {
        if self.rcv.in_window(self.seg_start(seg)) {
            self.abort(TcpError::Reset);
        }
    }

    /// A SYN on a synchronized connection: our SYN-ACK was lost, or a
    /// challenge ACK is due (RFC 5961).
    fn on_repeated_syn(&mut self, now: Time) {
        if self.state == TcpState::SynReceived {
            self.send_synack(now);
        } else {
            self.rcv.force_ack();
        }
    }

    /// The ACK of our SYN-ACK completes a passive open.
    fn complete_passive_open(&mut self, seg: &Segment, now: Time) -> bool {
        if seg.ack != to_wire(self.iss, 1) {
            return false;
        }
        self.snd_una = 1;
        let ecr = seg.options.timestamp.map(|(_, e)| e);
        self.handshake_rtt(now, ecr.filter(|_| self.ts_ok));
        self.establish(now);
        self.snd_wnd = u64::from(seg.window) << self.snd_wscale;
        self.snd_wl1 = self.seg_start(seg);
        true
    }

    fn on_data_segment(&mut self, seg: &Segment, start: u64, now: Time) {
        let fin = seg.flags.contains(Flags::FIN);
        if seg.payload_len == 0 && !fin {
            if start < self.rcv.rcv_nxt {
                self.rcv.force_ack(); // e.g. a zero-window probe
            }
            return;
        }
        let a = Arrival {
            start,
            len: seg.payload_len,
            fin,
            psh: seg.flags.contains(Flags::PSH),
            cwr: seg.flags.contains(Flags::CWR),
            ecn: seg.ecn,
        };
        let got = self.rcv.on_data(&a, self.ecn_ok, now, self.rtt.rto());
        self.stats.bytes_received += got.new_bytes;
        self.stats.ce_received = self.rcv.ce_received;
        if got.fin {
            self.on_peer_fin(now);
        }
    }

    fn on_peer_fin(&mut self, now: Time) {
        self.state = match self.state {
            TcpState::SynReceived | TcpState::Established => TcpState::CloseWait,
            TcpState::FinWait1 if self.our_fin_acked() => self.enter_time_wait(now),
            TcpState::FinWait1 => TcpState::Closing,
            TcpState::FinWait2 => self.enter_time_wait(now),
            s => s,
        };
    }

    fn our_fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una > self.write_end
    }

    /// Transitions driven by the ACK of our FIN.
    fn after_ack_state_changes(&mut self, now: Time) {
        if !self.our_fin_acked() {
            return;
        }
        self.state = match self.state {
            TcpState::FinWait1 => TcpState::FinWait2,
            TcpState::Closing => self.enter_time_wait(now),
            TcpState::LastAck => {
                self.xmit_timer = None;
                TcpState::Closed
            }
            s => s,
        };
    }

    fn enter_time_wait(&mut self, now: Time) -> TcpState {
        self.xmit_timer = None;
        self.time_wait_until = Some(now + TIME_WAIT);
        TcpState::TimeWait
    }

    /// The connection is over: drop all state that could still transmit.
    pub(crate) fn abort(&mut self, err: TcpError) {
        self.error = Some(err);
        self.state = TcpState::Closed;
        self.xmit_timer = None;
        self.outbox.clear();
        self.rec.state = CaState::Open;
    }

    /// The transmit timer's current job, if armed.
    pub(crate) fn xmit_kind(&self) -> Option<XmitTimer> {
        self.xmit_timer.map(|(_, k)| k)
    }
}
