//! Header bytes: emit/parse round trips, the offsets u32 filters read, and
//! no panic on any input.

use proptest::prelude::*;
use sluice_core::time::Time;
use sluice_sim::tcp::{Ecn, Flags, Ipv4Meta, Segment, TcpConfig, TcpConnection};
use std::net::Ipv4Addr;

fn meta() -> Ipv4Meta {
    Ipv4Meta {
        tos: 0x10,
        ..Ipv4Meta::new(Ipv4Addr::new(192, 168, 1, 2), Ipv4Addr::new(10, 1, 1, 1))
    }
}

/// `match u8 VAL MASK at OFF` as the u32 classifier evaluates it.
fn u8_at(b: &[u8], val: u8, mask: u8, off: usize) -> bool {
    b.get(off).is_some_and(|x| x & mask == val)
}
/// `match u16 VAL MASK at OFF`.
fn u16_at(b: &[u8], val: u16, mask: u16, off: usize) -> bool {
    b.get(off..off + 2)
        .is_some_and(|x| u16::from_be_bytes([x[0], x[1]]) & mask == val)
}

/// The LARTC "Ultimate Traffic Conditioner" ACK filter: IPv4 protocol 6,
/// IHL 5, total length < 64, TCP flags byte (offset 33) exactly ACK.
fn lartc_ack_filter(b: &[u8]) -> bool {
    u8_at(b, 6, 0xff, 9)
        && u8_at(b, 0x05, 0x0f, 0)
        && u16_at(b, 0, 0xffc0, 2)
        && u8_at(b, 0x10, 0xff, 33)
}

/// Segments from a real handshake and one data exchange.
fn exchange() -> (Segment, Segment, Segment, Segment) {
    let mut c = TcpConnection::new(TcpConfig::default(), 40000, 80);
    let mut s = TcpConnection::new(TcpConfig::default(), 80, 0);
    s.listen();
    c.connect(Time(0));
    let syn = c.poll_transmit(Time(0)).unwrap();
    s.on_segment(&syn, Time(1_000_000));
    let synack = s.poll_transmit(Time(1_000_000)).unwrap();
    c.on_segment(&synack, Time(2_000_000));
    c.write(3 * 1448);
    let data = c.poll_transmit(Time(2_000_000)).unwrap();
    s.on_segment(&data, Time(3_000_000));
    let ack = s.poll_transmit(Time(3_000_000)).unwrap();
    (syn, synack, data, ack)
}

#[test]
fn linux_sizes_on_the_wire() {
    let (syn, synack, data, ack) = exchange();
    assert_eq!(syn.emit_ipv4(&meta()).unwrap().len(), 60);
    assert_eq!(synack.emit_ipv4(&meta()).unwrap().len(), 60);
    assert_eq!(data.ip_len(), 1500);
    assert_eq!(data.emit_ipv4(&meta()).unwrap().len(), 52); // headers only
    assert_eq!(data.emit_ipv4_with_payload(&meta()).unwrap().len(), 1500);
    assert!(ack.is_pure_ack());
    assert_eq!(ack.emit_ipv4(&meta()).unwrap().len(), 52);
}

#[test]
fn handshake_windows_are_linuxs() {
    let (syn, synack, _, _) = exchange();
    assert_eq!(syn.window, 64240); // 44 × 1460
    assert_eq!(synack.window, 65160); // 45 × 1448
    assert_eq!(syn.options.mss, Some(1460));
    // Sized for tcp_rmem[2] = 32 MiB: log2 25 − 15 (`ss -ti` on Linux
    // 6.18 shows wscale:10,10; with SO_RCVBUF 128 KiB, wscale:10,2).
    assert_eq!(syn.options.window_scale, Some(10));
}

/// A qdisc that sets CE rewrites the TOS byte; the parser reads the mark
/// whether or not the header checksum was updated.
#[test]
fn ce_mark_in_the_tos_byte_is_read_back() {
    let (_, _, data, _) = exchange();
    assert_eq!(data.ecn, Ecn::NotEct);
    let mut b = data.emit_ipv4(&meta()).unwrap();
    b[1] |= 3;
    assert_eq!(Segment::parse_ipv4(&b).unwrap().1.ecn, Ecn::Ce);
}

#[test]
fn round_trip_preserves_every_field() {
    let (syn, synack, data, ack) = exchange();
    for seg in [syn, synack, data, ack] {
        let bytes = seg.emit_ipv4(&meta()).unwrap();
        let (m, back) = Segment::parse_ipv4(&bytes).unwrap();
        assert_eq!(back, seg);
        assert_eq!(m.src, meta().src);
        assert_eq!(m.dst, meta().dst);
        assert_eq!(m.tos & !3, 0x10);
    }
}

#[test]
fn ack_filter_offsets() {
    let (_, _, data, ack) = exchange();
    let ack_bytes = ack.emit_ipv4(&meta()).unwrap();
    assert_eq!(ack_bytes[33], 0x10, "byte 33 is the TCP flags byte");
    assert!(lartc_ack_filter(&ack_bytes));
    let data_bytes = data.emit_ipv4(&meta()).unwrap();
    assert!(
        !lartc_ack_filter(&data_bytes),
        "a data segment is not a bare ACK"
    );
    // An ACK carrying one SACK block is 64 bytes: the length match fails.
    let mut sack = ack.clone();
    sack.options.sack.push(1, 2);
    let sack_bytes = sack.emit_ipv4(&meta()).unwrap();
    assert_eq!(sack_bytes.len(), 64);
    assert!(!lartc_ack_filter(&sack_bytes));
    // ECN bits do not disturb the TOS match of the rest of the byte.
    let mut marked = data.clone();
    marked.ecn = Ecn::Ce;
    let b = marked.emit_ipv4(&meta()).unwrap();
    assert_eq!(b[1], 0x13);
    assert!(u8_at(&b, 0x10, 0xfc, 1));
    assert!(ack.flags == Flags::ACK);
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = Segment::parse_ipv4(&bytes);
    }

    #[test]
    fn parse_survives_mutated_real_headers(idx in 0usize..60, val in any::<u8>(), cut in 0usize..61) {
        let (syn, ..) = exchange();
        let mut b = syn.emit_ipv4(&meta()).unwrap();
        let i = idx % b.len();
        b[i] = val;
        b.truncate(cut);
        let _ = Segment::parse_ipv4(&b);
    }

    #[test]
    fn arbitrary_segments_never_panic_an_endpoint(
        segs in proptest::collection::vec(
            (any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(), 0u32..70000, any::<bool>(),
             proptest::collection::vec((any::<u32>(), any::<u32>()), 0..4)),
            1..40),
    ) {
        let mut s = TcpConnection::new(TcpConfig::default(), 80, 0);
        s.listen();
        let mut c = TcpConnection::new(TcpConfig::default(), 40000, 80);
        c.connect(Time(0));
        let mut now = Time(0);
        for (seq, ack, flags, window, len, ts, sacks) in segs {
            now = Time(now.0 + 1_000_000);
            let mut seg = Segment {
                src_port: 40000, dst_port: 80, seq, ack, flags: Flags(flags), window,
                payload_len: len, ..Default::default()
            };
            if ts { seg.options.timestamp = Some((seq, ack)); }
            for (l, r) in sacks { seg.options.sack.push(l, r); }
            s.on_segment(&seg, now);
            seg.src_port = 80;
            seg.dst_port = 40000;
            c.on_segment(&seg, now);
            for e in [&mut s, &mut c] {
                while e.poll_transmit(now).is_some() {}
                if e.poll_timeout().is_some_and(|t| t <= now) { e.on_timeout(now); }
                e.write(5000);
            }
        }
    }

    /// Random segments near the live sequence numbers of an established
    /// pair, interleaved with real traffic: nothing may panic (debug builds
    /// trap every arithmetic overflow).
    #[test]
    fn fuzz_established_pair(
        ops in proptest::collection::vec(
            (-3000i32..70000, -3000i32..70000, any::<u8>(), any::<u16>(), 0u32..3000, 0u8..4,
             proptest::collection::vec((-5000i32..80000, -5000i32..80000), 0..4)),
            1..60),
    ) {
        let mut c = TcpConnection::new(TcpConfig::default(), 40000, 80);
        let mut s = TcpConnection::new(TcpConfig::default(), 80, 0);
        s.listen();
        c.connect(Time(0));
        let syn = c.poll_transmit(Time(0)).unwrap();
        s.on_segment(&syn, Time(1));
        let sa = s.poll_transmit(Time(1)).unwrap();
        c.on_segment(&sa, Time(2));
        let c_iss = syn.seq;
        let s_iss = sa.seq;
        let mut now = Time(2);
        for (dseq, dack, flags, window, len, who, sacks) in ops {
            now = Time(now.0 + 3_000_000);
            let to_server = who % 2 == 0;
            let (seq0, ack0) = if to_server { (c_iss, s_iss) } else { (s_iss, c_iss) };
            let mut seg = Segment {
                src_port: if to_server { 40000 } else { 80 },
                dst_port: if to_server { 80 } else { 40000 },
                seq: seq0.wrapping_add(dseq as u32),
                ack: ack0.wrapping_add(dack as u32),
                flags: Flags(flags & !Flags::RST.0) | Flags::ACK,
                window,
                payload_len: len,
                ..Default::default()
            };
            seg.options.timestamp = Some((now.0 as u32 / 1_000_000, 1));
            for (l, r) in sacks {
                seg.options.sack.push(ack0.wrapping_add(l as u32), ack0.wrapping_add(r as u32));
            }
            if who >= 2 {
                c.write(20_000);
            }
            if to_server { s.on_segment(&seg, now) } else { c.on_segment(&seg, now) }
            // Real traffic both ways, delivered at once.
            for _ in 0..50 {
                let Some(x) = c.poll_transmit(now) else { break };
                s.on_segment(&x, now);
            }
            for _ in 0..50 {
                let Some(x) = s.poll_transmit(now) else { break };
                c.on_segment(&x, now);
            }
            for e in [&mut s, &mut c] {
                if e.poll_timeout().is_some_and(|t| t <= now) { e.on_timeout(now); }
            }
        }
    }
}
