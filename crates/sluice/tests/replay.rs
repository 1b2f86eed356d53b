//! `sluice replay` end to end: captures written with pcap-file, replayed
//! through tc policies by the binary, the departures checked against physics.

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A 1000-byte Ethernet/IPv4/UDP frame carrying `seq` in the IP ID field.
fn frame(seq: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    ip[20..22].copy_from_slice(&40000u16.to_be_bytes());
    ip[22..24].copy_from_slice(&dport.to_be_bytes());
    ip[24..26].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    f
}

fn seq_of(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[18], f[19]])
}

fn dport_of(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[36], f[37]])
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sluice-replay-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Write a capture of (timestamp, frame) starting at a realistic epoch time.
fn write_pcap(path: &Path, pkts: &[(Duration, Vec<u8>)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(f).unwrap();
    let epoch = Duration::from_secs(1_700_000_000);
    for (t, data) in pkts {
        w.write_packet(&PcapPacket::new(epoch + *t, data.len() as u32, data))
            .unwrap();
    }
}

/// (time since the first input packet, frame) of every departure.
fn read_pcap(path: &Path) -> Vec<(Duration, Vec<u8>)> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let epoch = Duration::from_secs(1_700_000_000);
    let mut out = vec![];
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        out.push((p.timestamp - epoch, p.data.into_owned()));
    }
    out
}

struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

fn replay(args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("replay")
        .args(args)
        .output()
        .unwrap();
    Run {
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        code: o.status.code().unwrap_or(-1),
    }
}

/// `sluice replay --tc SCRIPT --rate RATE in.pcap OUT` in `d`, the script
/// written there first.
fn replay_script(d: &Dir, script: &str, rate: &str, out: &str) -> Run {
    std::fs::write(d.path("script.tc"), script).unwrap();
    replay(&[
        "--tc",
        d.path("script.tc").to_str().unwrap(),
        "--rate",
        rate,
        d.path("in.pcap").to_str().unwrap(),
        d.path(out).to_str().unwrap(),
    ])
}

/// The summary line's packets in, out, dropped.
fn summary(stdout: &str) -> (u64, u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("replay: packets"))
        .expect("summary line");
    let w: Vec<&str> = line.split_whitespace().collect();
    let num = |k: &str| {
        w[w.iter().position(|x| *x == k).unwrap() + 1]
            .parse::<u64>()
            .unwrap()
    };
    (num("in"), num("out"), num("dropped"))
}

/// 1000-byte frames at `rate_bps`, `n` of them, with destination port `dport`.
fn cbr(n: usize, rate_bps: u64, dport: u16, seq0: u16) -> Vec<(Duration, Vec<u8>)> {
    let gap = Duration::from_nanos(1000 * 8 * 1_000_000_000 / rate_bps);
    (0..n)
        .map(|i| (gap * i as u32, frame(seq0 + i as u16, dport, 1000)))
        .collect()
}

#[test]
fn tbf_departures_obey_the_token_bucket_and_keep_order() {
    let d = Dir::new("tbf");
    // 400 frames at 4 Mbit/s (0.8 s) into a 1 Mbit/s shaper on a 10 Mbit/s wire.
    let input = cbr(400, 4_000_000, 5001, 0);
    write_pcap(&d.path("in.pcap"), &input);
    std::fs::write(
        d.path("tbf.tc"),
        "# shaper\ntc qdisc add dev eth0 root tbf rate 1mbit burst 10k latency 50ms\n",
    )
    .unwrap();
    let r = replay(&[
        "--tc",
        d.path("tbf.tc").to_str().unwrap(),
        "--rate",
        "10mbit",
        "--delay",
        "5ms",
        d.path("in.pcap").to_str().unwrap(),
        d.path("out.pcap").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("qdisc tbf"), "{}", r.stdout);
    let out = read_pcap(&d.path("out.pcap"));
    let (pin, pout, dropped) = summary(&r.stdout);
    assert_eq!(pin, 400);
    assert_eq!(pout as usize, out.len());
    assert_eq!(pout, pin - dropped);
    assert!(dropped > 0, "a 4:1 overload must drop");
    // Order kept, times non-decreasing, every frame intact.
    for w in out.windows(2) {
        assert!(seq_of(&w[0].1) < seq_of(&w[1].1));
        assert!(w[0].0 <= w[1].0);
    }
    for (t, f) in &out {
        let s = seq_of(f) as usize;
        assert_eq!(f, &input[s].1);
        // Not before it arrived + serialization (0.8 ms) + propagation.
        assert!(*t >= input[s].0 + Duration::from_micros(800) + Duration::from_millis(5));
    }
    // No window carries more than burst + rate * t (+ the packet that
    // opened it, for the granularity of the departure instants).
    let (burst, rate) = (10_240.0, 125_000.0);
    for i in 0..out.len() {
        let mut bytes = 0.0;
        for j in i..out.len() {
            bytes += out[j].1.len() as f64;
            let t = (out[j].0 - out[i].0).as_secs_f64();
            assert!(
                bytes <= burst + rate * t + 1000.0,
                "{bytes} bytes in {t} s from departure {i}"
            );
        }
    }
    // And the shaper is work-conserving: close to 1 Mbit/s once the burst is spent.
    let span = (out.last().unwrap().0 - out[20].0).as_secs_f64();
    let bytes = (out.len() - 21) as f64 * 1000.0;
    assert!(
        (bytes / span - rate).abs() < 0.03 * rate,
        "{} B/s",
        bytes / span
    );
}

#[test]
fn htb_shares_the_link_by_class_rates() {
    let d = Dir::new("htb");
    // Two 4 Mbit/s flows for 2 s; HTB gives port 5001 1.5 Mbit/s and the rest 0.5.
    let mut input = cbr(1000, 4_000_000, 5001, 0);
    input.extend(cbr(1000, 4_000_000, 6001, 1000));
    input.sort_by_key(|(t, _)| *t);
    write_pcap(&d.path("in.pcap"), &input);
    let script = "\
tc qdisc add dev eth0 root handle 1: htb default 20
tc class add dev eth0 parent 1: classid 1:1 htb rate 2mbit
tc class add dev eth0 parent 1:1 classid 1:10 htb rate 1500kbit ceil 2mbit
tc class add dev eth0 parent 1:1 classid 1:20 htb rate 500kbit ceil 2mbit
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \\
    match ip dport 5001 0xffff flowid 1:10
";
    std::fs::write(d.path("htb.tc"), script).unwrap();
    let r = replay(&[
        "--tc",
        d.path("htb.tc").to_str().unwrap(),
        "--rate",
        "10mbit",
        "--txqueuelen",
        "100",
        d.path("in.pcap").to_str().unwrap(),
        d.path("out.pcap").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("class htb 1:10"), "{}", r.stdout);
    let out = read_pcap(&d.path("out.pcap"));
    let (pin, pout, dropped) = summary(&r.stdout);
    assert_eq!((pin, pout), (2000, pin - dropped));
    // Shares while both flows are backlogged: 0.5 s .. 2 s.
    let window = |lo: f64, hi: f64, port: u16| {
        let n = out
            .iter()
            .filter(|(t, f)| dport_of(f) == port && (lo..hi).contains(&t.as_secs_f64()))
            .count();
        n as f64 * 8000.0 / (hi - lo)
    };
    let (a, b) = (window(0.5, 2.0, 5001), window(0.5, 2.0, 6001));
    assert!((a - 1.5e6).abs() < 0.05 * 1.5e6, "class 1:10 got {a} bit/s");
    assert!((b - 0.5e6).abs() < 0.05 * 0.5e6, "class 1:20 got {b} bit/s");
    // Per-flow order survives.
    for port in [5001, 6001] {
        let seqs: Vec<u16> = out
            .iter()
            .filter(|(_, f)| dport_of(f) == port)
            .map(|(_, f)| seq_of(f))
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn pcapng_input_with_nanosecond_stamps_is_read() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::PcapNgWriter;
    let d = Dir::new("ng");
    let mut w = PcapNgWriter::new(std::fs::File::create(d.path("in.pcapng")).unwrap()).unwrap();
    let mut idb = InterfaceDescriptionBlock::new(pcap_file::DataLink::ETHERNET, 65535);
    idb.options.push(InterfaceDescriptionOption::IfTsResol(9));
    w.write_pcapng_block(idb).unwrap();
    let epoch = Duration::from_secs(1_700_000_000);
    for (t, f) in cbr(10, 1_000_000, 5001, 0) {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: epoch + t,
            original_len: f.len() as u32,
            data: f.into(),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    drop(w);
    let r = replay(&[
        "--rate",
        "100mbit",
        d.path("in.pcapng").to_str().unwrap(),
        d.path("out.pcap").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 10);
    // 8 ms apart in, 8 ms apart out (each 80 µs on a 100 Mbit/s wire).
    for (i, (t, _)) in out.iter().enumerate() {
        assert_eq!(
            *t,
            Duration::from_millis(8) * i as u32 + Duration::from_micros(80)
        );
    }
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    let d = Dir::new("bad");
    let out = d.path("out.pcap");
    let out = out.to_str().unwrap();
    // Garbage, and a valid header followed by a truncated record.
    std::fs::write(d.path("garbage.pcap"), b"this is not a capture at all").unwrap();
    write_pcap(&d.path("good.pcap"), &cbr(3, 1_000_000, 5001, 0));
    let good = std::fs::read(d.path("good.pcap")).unwrap();
    std::fs::write(d.path("cut.pcap"), &good[..good.len() - 100]).unwrap();
    let r = replay(&[
        "--rate",
        "10mbit",
        d.path("garbage.pcap").to_str().unwrap(),
        out,
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("not a pcap or pcapng file"),
        "{}",
        r.stderr
    );
    let r = replay(&[
        "--rate",
        "10mbit",
        d.path("cut.pcap").to_str().unwrap(),
        out,
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("truncated"), "{}", r.stderr);
    let r = replay(&[
        "--rate",
        "10mbit",
        d.path("missing.pcap").to_str().unwrap(),
        out,
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("missing.pcap"), "{}", r.stderr);
    let r = replay(&["--rate", "fast", d.path("good.pcap").to_str().unwrap(), out]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--rate"), "{}", r.stderr);
    std::fs::write(
        d.path("bad.tc"),
        "tc qdisc add dev eth0 root tbf rate 1mbit\n",
    )
    .unwrap();
    let r = replay(&[
        "--tc",
        d.path("bad.tc").to_str().unwrap(),
        "--rate",
        "10mbit",
        d.path("good.pcap").to_str().unwrap(),
        out,
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
    // Random corruption of a good capture never panics (exit 101).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..40 {
        let mut bytes = good.clone();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = 24 + (seed as usize % (bytes.len() - 24));
            bytes[at] = (seed >> 32) as u8;
        }
        std::fs::write(d.path("fuzz.pcap"), &bytes).unwrap();
        let r = replay(&[
            "--rate",
            "10mbit",
            d.path("fuzz.pcap").to_str().unwrap(),
            out,
        ]);
        assert!(r.code == 0 || r.code == 1, "exit {}: {}", r.code, r.stderr);
    }
}

/// The one's-complement sum of `b` (as 16-bit words) plus `start`, folded.
fn ones_sum(b: &[u8], start: u32) -> u16 {
    let mut s = start;
    for c in b.chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Does the frame's IPv4 header checksum verify?
fn ip_sum_ok(f: &[u8]) -> bool {
    ones_sum(&f[14..34], 0) == 0xffff
}

/// Does the frame's UDP checksum (over the pseudo-header) verify?
fn udp_sum_ok(f: &[u8]) -> bool {
    let udp = &f[34..];
    let pseudo = ones_sum(&f[26..34], 17 + udp.len() as u32);
    ones_sum(udp, pseudo as u32) == 0xffff
}

/// `frame` with both checksums filled in.
fn checked_frame(seq: u16, dport: u16) -> Vec<u8> {
    let mut f = frame(seq, dport, 1000);
    let c = !ones_sum(&f[14..34], 0);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let pseudo = ones_sum(&f[26..34], 17 + 966);
    let c = !ones_sum(&f[34..], pseudo as u32);
    f[40..42].copy_from_slice(&c.to_be_bytes());
    assert!(ip_sum_ok(&f) && udp_sum_ok(&f));
    f
}

#[test]
fn pedit_rewrites_headers_and_csum_repairs_their_checksums() {
    let d = Dir::new("pedit");
    // Flow to port 5001 is NATed to 192.168.1.7:8080 with its TTL
    // decremented; the flow to 6001 passes untouched.
    let input: Vec<(Duration, Vec<u8>)> = (0..200u16)
        .map(|i| {
            let port = if i % 2 == 0 { 5001 } else { 6001 };
            (
                Duration::from_micros(1000 * i as u64),
                checked_frame(i, port),
            )
        })
        .collect();
    write_pcap(&d.path("in.pcap"), &input);
    let nat = "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \\
    match ip dport 5001 0xffff flowid 1:1 \\
    action pedit ex munge ip dst set 192.168.1.7 munge udp dport set 8080 \\
    munge ip ttl decrement pipe";
    for (name, csum) in [("fixed", " action csum ip4h udp\n"), ("stale", "\n")] {
        let script = format!("tc qdisc add dev eth0 root handle 1: prio\n{nat}{csum}");
        let out = format!("{name}.pcap");
        let r = replay_script(&d, &script, "100mbit", &out);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let out = read_pcap(&d.path(&out));
        assert_eq!(out.len(), 200);
        for (_, f) in &out {
            let natted = seq_of(f).is_multiple_of(2);
            let (dst, port, ttl) = if natted {
                ([192, 168, 1, 7], 8080, 63)
            } else {
                ([10, 0, 0, 2], 6001, 64)
            };
            assert_eq!((&f[30..34], dport_of(f), f[22]), (&dst[..], port, ttl));
            // pedit leaves the checksums stale, as the kernel's does; csum
            // recomputes them.
            let valid = !natted || name == "fixed";
            assert_eq!(
                (ip_sum_ok(f), udp_sum_ok(f)),
                (valid, valid),
                "{name} {}",
                seq_of(f)
            );
        }
    }
}

#[test]
fn ethernet_addresses_are_the_captures_and_actions_rewrite_them() {
    // Frames to port 5001 get a new destination address (pedit's `eth`
    // keys) and have their addresses swapped back and forth by skbmod; a
    // flower filter keys on the capture's source address.
    let d = Dir::new("ethaddr");
    let input: Vec<(Duration, Vec<u8>)> = (0..20u16)
        .map(|i| {
            let port = if i % 2 == 0 { 5001 } else { 6001 };
            (
                Duration::from_micros(1000 * i as u64),
                checked_frame(i, port),
            )
        })
        .collect();
    write_pcap(&d.path("in.pcap"), &input);
    let src = input[0].1[6..12].to_vec();
    let mac = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let script = format!(
        "tc qdisc add dev eth0 root handle 1: prio\n\
         tc filter add dev eth0 parent 1: protocol ip prio 1 flower src_mac {} ip_proto udp dst_port 5001 \\\n\
         action pedit ex munge eth dst set 11:22:33:44:55:66 pipe \\\n\
         action skbmod swap mac pipe action skbmod swap mac\n",
        mac(&src)
    );
    let r = replay_script(&d, &script, "100mbit", "out.pcap");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 20);
    for ((_, f), (_, i)) in out.iter().zip(&input) {
        let dst = if seq_of(f).is_multiple_of(2) {
            vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66]
        } else {
            i[..6].to_vec()
        };
        assert_eq!(
            (&f[..6], &f[6..12], &f[12..]),
            (&dst[..], &src[..], &i[12..])
        );
    }
}

#[test]
fn nat_translates_addresses_and_keeps_checksums_valid() {
    let d = Dir::new("nat");
    let input: Vec<(Duration, Vec<u8>)> = (0..50u16)
        .map(|i| {
            (
                Duration::from_micros(1000 * i as u64),
                checked_frame(i, 5001),
            )
        })
        .collect();
    write_pcap(&d.path("in.pcap"), &input);
    // Source 10.0.0.1 -> 172.16.0.1 (the /24's host bits kept), destination
    // 10.0.0.2 -> 192.168.9.9: stateless NAT both ways, as a gateway would.
    let script = "tc qdisc add dev eth0 root handle 1: prio
tc filter add dev eth0 parent 1: protocol ip prio 1 matchall \\
    action nat egress 10.0.0.0/24 172.16.0.0 pipe action nat ingress 10.0.0.2 192.168.9.9
";
    let r = replay_script(&d, script, "100mbit", "out.pcap");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 50);
    for (_, f) in &out {
        assert_eq!(
            (&f[26..30], &f[30..34]),
            (&[172, 16, 0, 1][..], &[192, 168, 9, 9][..])
        );
        assert!(ip_sum_ok(f) && udp_sum_ok(f), "{}", seq_of(f));
    }
}

#[test]
fn clsact_egress_filters_run_before_the_root_qdisc() {
    let d = Dir::new("clsact");
    let mut input = cbr(100, 4_000_000, 5001, 0);
    input.extend(cbr(100, 4_000_000, 6001, 100));
    input.sort_by_key(|(t, _)| *t);
    write_pcap(&d.path("in.pcap"), &input);
    let script = "tc qdisc add dev eth0 clsact
tc filter add dev eth0 egress protocol ip u32 match ip dport 5001 0xffff action drop
";
    let r = replay_script(&d, script, "100mbit", "out.pcap");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 100);
    assert!(out.iter().all(|(_, f)| dport_of(f) == 6001));
    assert_eq!(summary(&r.stdout), (200, 100, 100));
}

/// `netem duplicate 100%` sends every packet twice (the kernel's netem
/// clones the skb and enqueues the copy at the root), so the far end must
/// see every frame twice — the qdisc's own counter says how many left.
#[test]
fn netem_duplicates_are_all_written() {
    let d = Dir::new("dup");
    write_pcap(&d.path("in.pcap"), &cbr(100, 1_000_000, 5001, 0));
    let r = replay_script(
        &d,
        "tc qdisc add dev eth0 root netem duplicate 100%\n",
        "100mbit",
        "out.pcap",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sent: u64 = r
        .stdout
        .split("Sent ")
        .nth(1)
        .and_then(|s| s.split(" pkt").next())
        .and_then(|s| s.split_whitespace().nth(2))
        .and_then(|s| s.parse().ok())
        .expect("qdisc Sent line");
    assert_eq!(sent, 200, "{}", r.stdout);
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 200);
    for seq in 0..100u16 {
        assert_eq!(
            out.iter().filter(|(_, f)| seq_of(f) == seq).count(),
            2,
            "seq {seq}"
        );
    }
    assert_eq!(summary(&r.stdout).1, 200, "{}", r.stdout);
}

/// `sluice replay IN IN` would truncate the capture it is about to read:
/// refused, by file identity rather than by name.
#[test]
fn output_that_is_an_input_is_refused_and_nothing_is_written_on_failure() {
    let d = Dir::new("same");
    let cap = cbr(5, 1_000_000, 5001, 0);
    write_pcap(&d.path("in.pcap"), &cap);
    let before = std::fs::read(d.path("in.pcap")).unwrap();
    let input = d.path("in.pcap");
    let input = input.to_str().unwrap();
    let r = replay(&["--rate", "10mbit", input, input]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("the same file"), "{}", r.stderr);
    // Another name for the same file (a hard link) is the same file too.
    std::fs::hard_link(d.path("in.pcap"), d.path("alias.pcap")).unwrap();
    let r = replay(&[
        "--rate",
        "10mbit",
        input,
        d.path("alias.pcap").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(std::fs::read(d.path("in.pcap")).unwrap(), before);
    // A replay that fails part way leaves an existing output as it was,
    // and no temporary file behind.
    std::fs::write(d.path("out.pcap"), b"old").unwrap();
    std::fs::write(d.path("cut.pcap"), &before[..before.len() - 100]).unwrap();
    let r = replay(&[
        "--rate",
        "10mbit",
        d.path("cut.pcap").to_str().unwrap(),
        d.path("out.pcap").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(std::fs::read(d.path("out.pcap")).unwrap(), b"old");
    let mut names: Vec<_> = std::fs::read_dir(&d.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["alias.pcap", "cut.pcap", "in.pcap", "out.pcap"]);
}

/// An output that is not a regular file (a named pipe here; `/dev/stdout`
/// alike) is written in place: renaming a temporary file over it would
/// replace the pipe, and a reader would get nothing.
#[test]
fn an_output_that_is_a_pipe_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let d = Dir::new("fifo");
    write_pcap(&d.path("in.pcap"), &cbr(5, 1_000_000, 5001, 0));
    let fifo = d.path("out.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // The reader opens without waiting for a writer and gives up after
    // 20 s, so a replay that never writes the pipe fails rather than hangs.
    let reader = {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        std::thread::spawn(move || {
            let (mut got, mut buf) = (vec![], [0u8; 4096]);
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while std::time::Instant::now() < until {
                match f.read(&mut buf) {
                    Ok(0) if !got.is_empty() => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            got
        })
    };
    let r = replay(&[
        "--rate",
        "10mbit",
        d.path("in.pcap").to_str().unwrap(),
        fifo.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = reader.join().unwrap();
    std::fs::write(d.path("got.pcap"), bytes).unwrap();
    assert_eq!(read_pcap(&d.path("got.pcap")).len(), 5);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}
