//! The body of the `pcap_reader` target: bytes as a capture for `sluice
//! replay`.
//!
//! `sluice` is a binary without a library, so its `replay.rs` is compiled
//! here as a module of its own (the same file, nothing copied), and its
//! `replay_bytes` reads the bytes as pcap or pcapng (both byte orders,
//! every link type replay takes, pcapng's interfaces and timestamp
//! resolutions), splits each frame into what the qdiscs see and what is
//! kept aside, and replays them through eth0's default qdisc and a
//! 10 Mbit/s wire, the departures written as a pcap to nowhere. It must
//! return an error for what it cannot read, never panic, and never put
//! out more packets than went in.

#[allow(dead_code)]
#[path = "../../crates/sluice/src/replay.rs"]
mod replay;

pub fn pcap_reader(data: &[u8]) {
    if let Ok((packets_in, packets_out)) = replay::replay_bytes(data) {
        assert!(
            packets_out <= packets_in,
            "{packets_out} out of {packets_in}"
        );
    }
}
