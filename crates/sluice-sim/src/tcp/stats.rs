//! Per-connection counters, named after Linux's `tcp_info` and the
//! `TcpExt` MIB counters where one exists. All are updated where the event
//! happens (`output.rs` for what is sent, `ack.rs` for what is acknowledged,
//! `recovery.rs`/`timers.rs` for loss events). Once a transfer is complete,
//! the sender's `bytes_acked` equals the receiver's `bytes_received`.

use sluice_core::time::Duration;

/// Counters of one endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments sent (`tcpi_segs_out`).
    pub segs_out: u64,
    /// Segments received (`tcpi_segs_in`).
    pub segs_in: u64,
    /// Segments sent that carried payload (`tcpi_data_segs_out`).
    pub data_segs_out: u64,
    /// Pure ACKs sent.
    pub pure_acks_out: u64,
    /// Payload bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Payload bytes retransmitted (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Payload bytes cumulatively acknowledged (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// In-order payload bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Payload bytes the application read.
    pub bytes_read: u64,
    /// Segments retransmitted, all causes (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Retransmissions in fast recovery (`TCPFastRetrans`).
    pub fast_retransmits: u64,
    /// Retransmissions in the Loss state (`TCPSlowStartRetrans` + timeouts).
    pub loss_retransmits: u64,
    /// Retransmission timeouts (`TCPTimeouts`).
    pub rtos: u64,
    /// Entries into fast recovery.
    pub recoveries: u64,
    /// Tail loss probes sent (`TCPLossProbes`).
    pub tlp_probes: u64,
    /// Losses repaired by a probe (`TCPLossProbeRecovery`).
    pub tlp_recoveries: u64,
    /// Retransmissions found lost again by RACK (`TCPLostRetransmit`).
    pub lost_retransmits: u64,
    /// Window reductions undone as spurious (`TCPLossUndo` + `TCPFullUndo`).
    pub undos: u64,
    /// Window reductions for ECN (entries into CWR).
    pub ecn_reductions: u64,
    /// ACKs received with ECE.
    pub ece_received: u64,
    /// Data segments received with CE.
    pub ce_received: u64,
    /// D-SACK blocks received.
    pub dsacks_received: u64,
    /// Zero-window probes sent.
    pub zero_window_probes: u64,
    /// SYN or SYN-ACK retransmissions.
    pub syn_retransmits: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// Largest RTT sample.
    pub max_rtt: Duration,
}
