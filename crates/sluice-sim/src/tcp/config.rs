//! Parameters of one TCP endpoint, with a stock Linux 6.18 kernel's
//! defaults. Socket buffers are what a program asks for with
//! `SO_SNDBUF`/`SO_RCVBUF`, or nothing: then they grow as the kernel grows
//! them (`buffers.rs`, which also says what a buffer is worth as window).

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

impl CongestionAlgorithm {
    /// Its name, as `tcp_congestion_control` and `iperf3 -C` spell it.
    pub fn name(self) -> &'static str {
        match self {
            CongestionAlgorithm::Cubic => "cubic",
            CongestionAlgorithm::Reno => "reno",
            CongestionAlgorithm::Bbr => "bbr",
        }
    }

    /// Congestion windows of memory an unset send buffer provisions
    /// (`sndbuf_expand`: 3 for BBR, which may slow-start in recovery; the
    /// kernel's 2 for the others).
    pub fn sndbuf_windows(self) -> u64 {
        match self {
            CongestionAlgorithm::Bbr => 3,
            CongestionAlgorithm::Cubic | CongestionAlgorithm::Reno => 2,
        }
    }

    /// The algorithm of that name, if the model has it.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Cubic, Self::Reno, Self::Bbr]
            .into_iter()
            .find(|c| c.name() == name)
    }
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
    /// `SO_SNDBUF` as the program sets it (the kernel doubles it), or
    /// `None`: the buffer grows with cwnd (`tcp_wmem`).
    pub send_buffer: Option<u64>,
    /// `SO_RCVBUF` as the program sets it (the kernel doubles it), or
    /// `None`: autotuned (`tcp_rmem`, `tcp_moderate_rcvbuf`).
    pub recv_buffer: Option<u64>,
    /// The sysctls that size buffers.
    pub buffers: super::buffers::BufferSysctls,
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
    /// Segmentation offload: data leaves in packets of several segments,
    /// as `tcp_tso_segs` sizes them (`tso.rs`); false sends one per packet.
    pub gso: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            send_buffer: None,
            recv_buffer: None,
            buffers: super::buffers::BufferSysctls::default(),
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
            gso: true,
        }
    }
}

/// Bytes of the timestamp option with its two NOPs.
pub const TS_OPTION_LEN: u32 = 12;
/// Largest window scale shift (RFC 7323).
pub const MAX_WSCALE: u8 = 14;

impl TcpConfig {
    /// The MSS option value this endpoint advertises in its SYN.
    pub fn advertised_mss(&self) -> u16 {
        let ts = if self.timestamps { TS_OPTION_LEN } else { 0 };
        (self.mss + ts).clamp(88, u32::from(u16::MAX)) as u16
    }
}
