//! A Linux-faithful TCP model for the simulator, in sans-IO form.
//!
//! # Why a model of our own
//!
//! The bundled examples' experiments (bufferbloat behind a 1000-packet queue,
//! LARTC's upload RTTs, shaping with TBF/HTB) are made of Linux's congestion
//! behaviour. smoltcp, measured in docs/simulator.md, recovers a slow-start
//! overshoot by timeouts (no SACK) and reaches 1.6 Mbit/s where Linux and ns-3
//! reach 9.6. Extending it would mean replacing its congestion control, loss
//! recovery, timers and ACK policy — most of a TCP. So, as ns-3 does, this is
//! a focused model of one endpoint: everything that shapes timing and sizes on
//! the wire is Linux's, everything else (payload bytes, socket API, options
//! nobody negotiates in the examples) is left out.
//!
//! # What is modelled, and where
//!
//! | file | concern | source |
//! |---|---|---|
//! | `segment.rs` | segment fields, Linux option layout, header sizes | `tcp_options_write` |
//! | `wire.rs` | real IPv4 + TCP header bytes (emit/parse, etherparse) | RFC 791/9293 |
//! | `seq.rs` | 32-bit wire vs 64-bit stream offsets, byte-range sets | RFC 9293 §3.4 |
//! | `config.rs` | parameters and Linux defaults | sysctls |
//! | `buffers.rs` | SO_RCVBUF/SO_SNDBUF, `scaling_ratio`, receive and send buffer autotuning | `tcp_rcv_space_adjust`, `tcp_grow_window`, `tcp_sndbuf_expand` |
//! | `conn.rs` | the endpoint and its application API | — |
//! | `input.rs` | arrivals, handshake, states, FIN | `tcp_rcv_state_process` |
//! | `receiver.rs` | reassembly, SACK/D-SACK, delayed ACK, window | `tcp_data_queue`, `__tcp_select_window` |
//! | `ack.rs` | ACK processing, RTT sampling | `tcp_ack` |
//! | `scoreboard.rs` | retransmission queue, SACK tags, pipe | `tcp_sacktag_write_queue` |
//! | `rack.rs` | RACK loss detection | RFC 8985, `tcp_recovery.c` |
//! | `recovery.rs` | Open/Disorder/CWR/Recovery/Loss, PRR, undo, TLP result | RFC 6937, `tcp_fastretrans_alert` |
//! | `rtt.rs` | SRTT/RTTVAR/RTO the way Linux computes them | RFC 6298, `tcp_rtt_estimator` |
//! | `timers.rs` | RTO, TLP, reordering, zero-window probe, SYN | `tcp_timer.c` |
//! | `output.rs` | what to send, Nagle, cwnd validation, ECN marks | `tcp_write_xmit` |
//! | `tso.rs` | segments per packet (GSO), the pacing rate it is sized from | `tcp_tso_autosize`, `tcp_update_pacing_rate` |
//! | `cc.rs`, `cubic.rs`, `reno.rs`, `bbr.rs` | congestion control | RFC 9438, RFC 5681, `tcp_cubic.c`, `tcp_bbr.c` |
//! | `rate.rs` | delivery-rate samples | `tcp_rate.c` |
//! | `stats.rs` | counters | `tcp_info` |
//!
//! Pacing is modelled where Linux paces without the fq qdisc: for a
//! congestion control that asks for it (BBR), `tcp_wstamp_ns` advancing by
//! each data segment's length at the pacing rate (`output.rs`).
//!
//! Not modelled (each file says more): TCP small queues,
//! SACK compression, F-RTO and D-SACK undo, PAWS, urgent data, simultaneous open, RST
//! generation, IPv6, path MTU discovery, reordering adaptation.
//!
//! # Driving an endpoint
//!
//! ```
//! use sluice_core::time::Time;
//! use sluice_sim::tcp::{TcpConfig, TcpConnection};
//!
//! let mut client = TcpConnection::new(TcpConfig::default(), 40000, 5001);
//! let mut server = TcpConnection::new(TcpConfig::default(), 5001, 0);
//! server.listen();
//! client.connect(Time::ZERO);
//! let syn = client.poll_transmit(Time::ZERO).unwrap();
//! server.on_segment(&syn, Time(1_000_000));
//! let syn_ack = server.poll_transmit(Time(1_000_000)).unwrap();
//! client.on_segment(&syn_ack, Time(2_000_000));
//! assert!(client.is_established());
//! client.write(10_000);
//! while let Some(seg) = client.poll_transmit(Time(2_000_000)) {
//!     // hand `seg` to the network; here: straight to the server
//!     server.on_segment(&seg, Time(3_000_000));
//! }
//! assert_eq!(server.stats().bytes_received, 10_000);
//! ```

mod ack;
pub mod bbr;
pub mod buffers;
pub mod cc;
pub mod config;
mod conn;
pub mod cubic;
mod input;
mod output;
pub mod rack;
pub mod rate;
pub mod receiver;
mod recovery;
pub mod reno;
pub mod rtt;
pub mod scoreboard;
pub mod segment;
pub mod seq;
pub mod stats;
mod timers;
mod tso;
pub mod wire;

pub use config::{CongestionAlgorithm, EcnMode, TcpConfig};
pub use conn::{CaState, TcpConnection, TcpError, TcpState};
pub use segment::{Ecn, Flags, SackBlocks, Segment, TcpOptions};
pub use stats::TcpStats;
pub use wire::{Ipv4Meta, ParseError};
