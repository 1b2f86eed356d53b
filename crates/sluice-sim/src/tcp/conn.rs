//! [`TcpConnection`]: one endpoint, its state, and the application's side of
//! it (`connect`, `listen`, `write`, `close`, `read`, getters).
//!
//! The endpoint is sans-IO, like quinn's and smoltcp's: it never reads a
//! clock and never touches a socket. The engine drives it with four calls:
//!
//! - [`TcpConnection::on_segment`]`(seg, now)` — a segment arrived;
//! - [`TcpConnection::poll_transmit`]`(now)` — call until `None` after every
//!   event, and put each returned segment on the wire;
//! - [`TcpConnection::poll_timeout`]`()` — when to call back at the latest;
//! - [`TcpConnection::on_timeout`]`(now)` — that time has come.
//!
//! The application writes byte *counts* (payload is never materialized) and,
//! unless `auto_read` is off, reads everything as soon as it arrives.
//! Ports are the only addressing the endpoint knows; the host that owns it
//! demultiplexes by 4-tuple and adds IP addresses when it turns segments into
//! packet bytes (`wire.rs`). A listening endpoint accepts the first SYN sent
//! to its port and becomes that connection (a host wanting more connections
//! creates one listening endpoint per expected client, or one per SYN).
//!
//! The implementation is split by concern, each file an `impl` block on this
//! struct: `input.rs` (arrivals, handshake, state transitions), `ack.rs`
//! (what an ACK tells the sender), `recovery.rs` (Linux's congestion state
//! machine, PRR, undo), `output.rs` (what to send now), `timers.rs` (RTO,
//! TLP, RACK reordering timer, zero-window probes, delayed ACK, TIME-WAIT).

use super::buffers::{RecvBuffer, SendBuffer};
use super::cc::{CongestionControl, Window};
use super::config::TcpConfig;
use super::rack::Rack;
use super::rate::RateState;
use super::receiver::Receiver;
use super::rtt::RttEstimator;
use super::scoreboard::Scoreboard;
use super::segment::Segment;
use super::stats::TcpStats;
use sluice_core::time::{Duration, Time};
use std::collections::VecDeque;

/// RFC 9293 connection states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// No connection.
    Closed,
    /// Waiting for a SYN.
    Listen,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received, SYN-ACK sent, waiting for the ACK.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed; our FIN is not acknowledged yet.
    FinWait1,
    /// We closed and our FIN is acknowledged; the peer has not closed.
    FinWait2,
    /// The peer closed; we have not.
    CloseWait,
    /// Both closed at once; our FIN is not acknowledged yet.
    Closing,
    /// The peer closed, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both closed; lingering for 60 s (`TCP_TIMEWAIT_LEN`).
    TimeWait,
}

/// Linux's congestion-avoidance state (`icsk_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    /// Nothing unusual.
    Open,
    /// SACKs or duplicate ACKs seen, no loss inferred.
    Disorder,
    /// Window reduced after ECN (or a loss repaired by a probe).
    Cwr,
    /// Fast recovery: losses inferred from SACKs, PRR reducing the window.
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Why a connection ended abnormally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpError {
    /// The peer answered our SYN with RST.
    Refused,
    /// The peer reset an established connection.
    Reset,
    /// Too many retransmissions without progress.
    TimedOut,
}

/// Which job the single transmit timer does now (`icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XmitTimer {
    /// Retransmission timeout (also SYN/SYN-ACK retransmission).
    Retrans,
    /// Tail loss probe.
    LossProbe,
    /// RACK reordering timeout.
    ReoTimeout,
    /// Zero-window probe.
    Probe0,
}

/// Loss recovery and window-reduction bookkeeping.
#[derive(Clone, Debug)]
pub(crate) struct Recovery {
    pub state: CaState,
    /// `snd_nxt` when the current reduction or recovery began.
    pub high_seq: u64,
    pub prior_cwnd: u32,
    pub prior_ssthresh: u32,
    pub prr_delivered: u32,
    pub prr_out: u32,
    /// Undo is possible for this episode (`undo_marker`).
    pub undo_marker: bool,
    /// TSval of the first retransmission of this episode (`retrans_stamp`).
    pub retrans_stamp: Option<u32>,
    /// Set CWR on the next new data segment.
    pub queue_cwr: bool,
    /// `snd_nxt` after a tail loss probe (`tlp_high_seq`).
    pub tlp_high_seq: Option<u64>,
    /// The probe was a retransmission.
    pub tlp_retrans: bool,
    /// RTO retransmissions since the last forward progress.
    pub retransmits: u32,
    /// Zero-window probes without an answer (also their backoff).
    pub probes_out: u32,
}

/// Cwnd-use tracking for validation (RFC 7661 as in `tcp_cwnd_validate`).
#[derive(Clone, Debug, Default)]
pub(crate) struct CwndUse {
    pub is_cwnd_limited: bool,
    pub max_packets_out: u32,
    pub cwnd_usage_seq: u64,
    pub snd_cwnd_used: u32,
    pub snd_cwnd_stamp: Time,
}

/// Handshake bookkeeping.
#[derive(Clone, Debug, Default)]
pub(crate) struct Handshake {
    pub syn_sent_at: Option<Time>,
    pub retries: u32,
    /// Window we offered in our SYN or SYN-ACK.
    pub our_syn_window: u64,
    /// Window scale the peer's SYN offered.
    pub peer_wscale: Option<u8>,
}

/// One TCP endpoint.
#[derive(Clone, Debug)]
pub struct TcpConnection {
    pub(crate) cfg: TcpConfig,
    pub(crate) state: TcpState,
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    // Negotiated in the handshake.
    pub(crate) mss: u32,
    pub(crate) sack_ok: bool,
    pub(crate) ts_ok: bool,
    pub(crate) ecn_ok: bool,
    pub(crate) snd_wscale: u8,
    // Send side (stream offsets; the SYN is offset 0).
    pub(crate) iss: u32,
    pub(crate) snd_una: u64,
    pub(crate) snd_nxt: u64,
    /// One past the last byte the application wrote.
    pub(crate) write_end: u64,
    pub(crate) fin_queued: bool,
    pub(crate) snd_wnd: u64,
    pub(crate) snd_wl1: u64,
    /// End of the last sub-MSS segment sent (Minshall's Nagle).
    pub(crate) snd_sml: u64,
    pub(crate) lsndtime: Time,
    /// TSecr of the ACK being processed (for Eifel undo).
    pub(crate) last_tsecr: Option<u32>,
    pub(crate) sb: Scoreboard,
    pub(crate) rtt: RttEstimator,
    pub(crate) cc: CongestionControl,
    pub(crate) w: Window,
    pub(crate) rack: Rack,
    pub(crate) rec: Recovery,
    pub(crate) cwnd_use: CwndUse,
    // Receive side.
    pub(crate) rcv: Receiver,
    // Timers and queued transmissions.
    pub(crate) xmit_timer: Option<(Time, XmitTimer)>,
    pub(crate) time_wait_until: Option<Time>,
    pub(crate) hs: Handshake,
    pub(crate) outbox: VecDeque<Segment>,
    pub(crate) stats: TcpStats,
    pub(crate) error: Option<TcpError>,
    /// Delivery-rate estimation (BBR's samples).
    pub(crate) rate: RateState,
    /// Pacing: when the next data segment may leave (`tcp_wstamp_ns`).
    pub(crate) wstamp: Time,
    /// Pacing: when the packet being built started and how many more
    /// segments it may take.
    pub(crate) gso_room: (Time, u32),
    /// Pacing held data back until this time (the pacing timer).
    pub(crate) pacing_wake: Option<Time>,
    /// The send buffer.
    pub(crate) sndbuf: SendBuffer,
}

/// The [`super::bbr::Cx`] of a connection: a macro, so that borrowing
/// `rate` leaves `cc` and `w` free for the call.
macro_rules! bbr_cx {
    ($c:expr, $now:expr) => {
        super::bbr::Cx {
            now: $now,
            mss: $c.mss,
            rate: &mut $c.rate,
            in_flight: $c.sb.in_flight(),
            min_rtt: $c.rtt.min_rtt(),
            srtt: $c.rtt.srtt(),
            ca_state: $c.rec.state,
            lost: $c.sb.lost_total,
            wstamp: $c.wstamp,
        }
    };
}
pub(crate) use bbr_cx;

impl TcpConnection {
    /// A closed endpoint on `local_port` that will talk to `remote_port`
    /// (0 for a listener that learns it from the SYN).
    pub fn new(cfg: TcpConfig, local_port: u16, remote_port: u16) -> Self {
        let iss = cfg
            .iss
            .unwrap_or_else(|| derive_iss(local_port, remote_port));
        let rtt = RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max);
        let rcv = Receiver::new(RecvBuffer::new(&cfg), cfg.mss, cfg.delayed_ack);
        let sndbuf = SendBuffer::new(&cfg);
        let cc = CongestionControl::new(cfg.congestion, cfg.hystart, Time::ZERO, 0);
        TcpConnection {
            mss: cfg.mss,
            w: Window::new(cfg.initial_cwnd),
            cfg,
            state: TcpState::Closed,
            local_port,
            remote_port,
            sack_ok: false,
            ts_ok: false,
            ecn_ok: false,
            snd_wscale: 0,
            iss,
            snd_una: 0,
            snd_nxt: 0,
            write_end: 1,
            fin_queued: false,
            snd_wnd: 0,
            snd_wl1: 0,
            snd_sml: 0,
            lsndtime: Time::ZERO,
            last_tsecr: None,
            sb: Scoreboard::default(),
            rtt,
            cc,
            rack: Rack::default(),
            rec: Recovery::new(),
            cwnd_use: CwndUse::default(),
            rcv,
            xmit_timer: None,
            time_wait_until: None,
            hs: Handshake::default(),
            outbox: VecDeque::new(),
            stats: TcpStats::default(),
            error: None,
            rate: RateState::default(),
            wstamp: Time::ZERO,
            gso_room: (Time::ZERO, 0),
            pacing_wake: None,
            sndbuf,
        }
    }

    /// Active open: send a SYN now (retransmitted after 1 s, 2 s, 4 s, …).
    pub fn connect(&mut self, now: Time) {
        if self.state != TcpState::Closed {
            return;
        }
        self.state = TcpState::SynSent;
        self.snd_nxt = 1;
        self.send_syn(now);
    }

    /// Passive open: accept the first SYN for our port.
    pub fn listen(&mut self) {
        if self.state == TcpState::Closed {
            self.state = TcpState::Listen;
        }
    }

    /// The application hands over `n` bytes; returns how many fit in the
    /// send buffer (the rest must be offered again later).
    pub fn write(&mut self, n: u64) -> u64 {
        if self.fin_queued || !self.can_queue_data() {
            return 0;
        }
        // `tcp_sendmsg` first asks whether the sender was app-limited.
        let lost_waiting = self.sb.lost_out > self.sb.retrans_out;
        let unsent = self.write_end.saturating_sub(self.snd_nxt);
        let (in_flight, cwnd) = (self.sb.in_flight(), self.w.cwnd);
        self.rate
            .check_app_limited(unsent, self.mss, in_flight, cwnd, lost_waiting);
        let room = self.send_buffer_space();
        let take = n.min(room);
        self.write_end += take;
        take
    }

    fn can_queue_data(&self) -> bool {
        matches!(
            self.state,
            TcpState::SynSent | TcpState::SynReceived | TcpState::Established | TcpState::CloseWait
        )
    }

    /// Free send-buffer space in bytes.
    pub fn send_buffer_space(&self) -> u64 {
        let queued = self.write_end.saturating_sub(self.snd_una.max(1));
        self.sndbuf.sndbuf.saturating_sub(queued)
    }

    /// `tcp_sndbuf_expand`: an unset send buffer grows with cwnd.
    pub(crate) fn expand_sndbuf(&mut self) {
        let windows = self.cfg.congestion.sndbuf_windows();
        self.sndbuf.expand(self.w.cwnd, windows);
    }

    /// Bytes written but not yet acknowledged.
    pub fn unacked_bytes(&self) -> u64 {
        self.write_end.saturating_sub(self.snd_una.max(1))
    }

    /// Send FIN after everything written so far.
    pub fn close(&mut self) {
        match self.state {
            TcpState::Listen | TcpState::SynSent => self.state = TcpState::Closed,
            TcpState::SynReceived => self.fin_queued = true, // FIN once established
            TcpState::Established => {
                self.fin_queued = true;
                self.state = TcpState::FinWait1;
            }
            TcpState::CloseWait => {
                self.fin_queued = true;
                self.state = TcpState::LastAck;
            }
            _ => {}
        }
    }

    /// In-order bytes the application has not read yet.
    pub fn readable(&self) -> u64 {
        self.rcv.readable()
    }

    /// The application reads up to `n` bytes at `now`; returns how many.
    pub fn read(&mut self, n: u64, now: Time) -> u64 {
        let got = self.rcv.read(n, now);
        self.stats.bytes_read += got;
        got
    }

    /// Switch the "application reads everything at once" model on or off.
    pub fn set_auto_read(&mut self, on: bool) {
        self.cfg.auto_read = on;
    }

    /// Connection state.
    pub fn state(&self) -> TcpState {
        self.state
    }
    /// Congestion state.
    pub fn ca_state(&self) -> CaState {
        self.rec.state
    }
    /// Why the connection failed, if it did.
    pub fn error(&self) -> Option<TcpError> {
        self.error
    }
    /// Statistics.
    pub fn stats(&self) -> &TcpStats {
        &self.stats
    }
    /// Configuration.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    /// Local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }
    /// Remote port (learned from the SYN by a listener).
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }
    /// Congestion window in segments.
    pub fn cwnd(&self) -> u32 {
        self.w.cwnd
    }
    /// Slow-start threshold in segments.
    pub fn ssthresh(&self) -> u32 {
        self.w.ssthresh
    }
    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// Minimum RTT seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.rtt.min_rtt()
    }
    /// Latest RTT sample.
    pub fn latest_rtt(&self) -> Option<Duration> {
        self.rtt.latest()
    }
    /// Current retransmission timeout (backoff included).
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    /// Segments in flight (`tcp_packets_in_flight`).
    pub fn packets_in_flight(&self) -> u32 {
        self.sb.in_flight()
    }
    /// Peer's receive window in bytes.
    pub fn send_window(&self) -> u64 {
        self.snd_wnd
    }
    /// Payload bytes of a full segment.
    pub fn mss(&self) -> u32 {
        self.mss
    }
    /// ECN was negotiated.
    pub fn ecn_enabled(&self) -> bool {
        self.ecn_ok
    }
    /// True once the handshake completed and until the connection closed.
    pub fn is_established(&self) -> bool {
        !matches!(
            self.state,
            TcpState::Closed | TcpState::Listen | TcpState::SynSent | TcpState::SynReceived
        )
    }
    /// All written data (and our FIN, if closed) is acknowledged.
    pub fn all_acked(&self) -> bool {
        self.snd_una >= self.write_end + u64::from(self.fin_queued)
    }
    /// The peer's FIN has arrived.
    pub fn peer_closed(&self) -> bool {
        self.rcv.fin_received
    }

    /// Millisecond timestamp clock (`tcp_time_stamp_ts`).
    pub(crate) fn ts_clock(&self, now: Time) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.cfg.ts_offset)
    }
}

impl Recovery {
    fn new() -> Self {
        Recovery {
            state: CaState::Open,
            high_seq: 0,
            prior_cwnd: 0,
            prior_ssthresh: 0,
            prr_delivered: 0,
            prr_out: 0,
            undo_marker: false,
            retrans_stamp: None,
            queue_cwr: false,
            tlp_high_seq: None,
            tlp_retrans: false,
            retransmits: 0,
            probes_out: 0,
        }
    }
}

/// A deterministic initial sequence number from the ports (Linux hashes the
/// 4-tuple with a secret and a clock; any fixed spread will do here).
fn derive_iss(local: u16, remote: u16) -> u32 {
    let x = (u32::from(local) << 16 | u32::from(remote)).wrapping_mul(0x9e37_79b9);
    x ^ (x >> 15)
}
