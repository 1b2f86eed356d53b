//! Parameters of one TCP endpoint, with Linux's defaults.
//!
//! Buffers are what an application asks for with `SO_SNDBUF`/`SO_RCVBUF`
//! (Linux's autotuning is out of scope: sizes are fixed). For the receive
//! side the kernel doubles the requested value to cover bookkeeping overhead
//! (`sk_rcvbuf = 2 × SO_RCVBUF`) and then advertises only half of its buffer
//! space as window (`tcp_adv_win_scale = 1`: it assumes each payload byte
//! costs about two bytes of `truesize`). The model keeps that arithmetic:
//! the advertised window is at most `recv_buffer`, and every byte held in
//! the receive or out-of-order queue is charged twice against the doubled
//! buffer, so the free window is `recv_buffer − held bytes`. For the send
//! side, `send_buffer` is the payload the socket can hold, unsent plus
//! unacknowledged (the kernel's doubling and its `truesize` charging roughly
//! cancel).

use sluice_core::time::Duration;

/// Congestion control algorithm (`net.ipv4.tcp_congestion_control`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CongestionAlgorithm {
    /// CUBIC (RFC 9438, Linux `tcp_cubic.c`), Linux's default.
    #[default]
    Cubic,
    /// Reno / NewReno-with-SACK (RFC 5681, Linux `tcp_cong.c`).
    Reno,
    /// BBR v1 (Linux `tcp_bbr.c`), with pacing.
    Bbr,
}

/// ECN negotiation (`net.ipv4.tcp_ecn`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EcnMode {
    /// Never use ECN (`tcp_ecn = 0`).
    Off,
    /// Use ECN when the peer asks for it, never ask (`tcp_ecn = 2`, the default).
    #[default]
    Passive,
    /// Ask for ECN on outgoing connections and accept it (`tcp_ecn = 1`).
    On,
}

/// One endpoint's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Payload bytes of a full segment once options are accounted (1448 =
    /// 1500 MTU − 20 IP − 20 TCP − 12 timestamp option). The SYN advertises
    /// `mss + 12` when timestamps are enabled, as Linux advertises 1460.
    pub mss: u32,
    /// `SO_SNDBUF`: payload bytes the socket may hold (unsent + unacked).
    pub send_buffer: u64,
    /// `SO_RCVBUF`: the advertised window never exceeds this (see module doc).
    pub recv_buffer: u64,
    /// Initial congestion window in segments (`TCP_INIT_CWND`).
    pub initial_cwnd: u32,
    /// Lower bound of the RTO (`TCP_RTO_MIN`).
    pub rto_min: Duration,
    /// RTO before any RTT sample (`TCP_TIMEOUT_INIT`).
    pub rto_initial: Duration,
    /// Upper bound of the RTO (`TCP_RTO_MAX`).
    pub rto_max: Duration,
    /// Delayed ACKs (Linux always delays; false ACKs every segment).
    pub delayed_ack: bool,
    /// Selective acknowledgments (`tcp_sack`).
    pub sack: bool,
    /// Timestamps (`tcp_timestamps`).
    pub timestamps: bool,
    /// Window scaling (`tcp_window_scaling`).
    pub window_scaling: bool,
    /// Congestion control.
    pub congestion: CongestionAlgorithm,
    /// HyStart in CUBIC's slow start (`tcp_cubic.hystart`).
    pub hystart: bool,
    /// ECN negotiation.
    pub ecn: EcnMode,
    /// Tail loss probes (`tcp_early_retrans = 3`).
    pub tlp: bool,
    /// `TCP_NODELAY`: disable Nagle's algorithm.
    pub nodelay: bool,
    /// The application reads everything as soon as it arrives.
    pub auto_read: bool,
    /// Collapse cwnd after an idle period longer than the RTO
    /// (`tcp_slow_start_after_idle`).
    pub slow_start_after_idle: bool,
    /// Initial send sequence number; `None` derives one from the ports.
    pub iss: Option<u32>,
    /// Offset added to the millisecond timestamp clock (Linux randomizes it).
    pub ts_offset: u32,
    /// SYN retransmissions before giving up (`tcp_syn_retries`).
    pub syn_retries: u32,
    /// SYN-ACK retransmissions before giving up (`tcp_synack_retries`).
    pub synack_retries: u32,
    /// RTO retransmissions of the same data before giving up (`tcp_retries2`).
    pub max_retransmits: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            send_buffer: 4 << 20,
            recv_buffer: 3 << 20,
            initial_cwnd: 10,
            rto_min: Duration::from_millis(200),
            rto_initial: Duration::from_secs(1),
            rto_max: Duration::from_secs(120),
            delayed_ack: true,
            sack: true,
            timestamps: true,
            window_scaling: true,
            congestion: CongestionAlgorithm::Cubic,
            hystart: true,
            ecn: EcnMode::Passive,
            tlp: true,
            nodelay: false,
            auto_read: true,
            slow_start_after_idle: true,
            iss: None,
            ts_offset: 0,
            syn_retries: 6,
            synack_retries: 5,
            max_retransmits: 15,
        }
    }
}

/// Bytes of the timestamp option with its two NOPs.
pub const TS_OPTION_LEN: u32 = 12;
/// Linux's `tcp_rmem[2]` default, which sets the window scale it offers.
pub const TCP_RMEM_MAX: u64 = 6 << 20;
/// Largest window scale shift (RFC 7323).
pub const MAX_WSCALE: u8 = 14;

impl TcpConfig {
    /// The MSS option value this endpoint advertises in its SYN.
    pub fn advertised_mss(&self) -> u16 {
        let ts = if self.timestamps { TS_OPTION_LEN } else { 0 };
        (self.mss + ts).clamp(88, u32::from(u16::MAX)) as u16
    }

    /// The window scale shift offered in the SYN: Linux's
    /// `tcp_select_initial_window()` sizes it for the larger of the buffer
    /// and `tcp_rmem[2]`, so it is 7 unless the buffer exceeds 8 MiB.
    pub fn offered_wscale(&self) -> u8 {
        let space = self.recv_buffer.max(TCP_RMEM_MAX).max(1);
        let log2 = 63 - space.leading_zeros() as u8;
        log2.saturating_sub(15).min(MAX_WSCALE)
    }
}
