//! `sluice replay` on wires that change over time: a Mahimahi trace in
//! place of the rate, a schedule, a delay trace; and their files' errors.

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const EPOCH: Duration = Duration::from_secs(1_700_000_000);
const MS: u128 = 1_000_000;

/// An Ethernet/IPv4/UDP frame whose IP packet is `ip_len` bytes, `seq` in its IP ID.
fn frame(seq: u16, ip_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + ip_len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    f
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sluice-wires-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, f: &str) -> String {
        self.0.join(f).to_str().unwrap().to_string()
    }
    fn write(&self, f: &str, text: &str) -> String {
        std::fs::write(self.0.join(f), text).unwrap();
        self.path(f)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` frames of `ip_len`-byte packets, all captured at once (back to back).
fn write_burst(path: &str, n: u16, ip_len: usize) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for i in 0..n {
        let f = frame(i, ip_len);
        w.write_packet(&PcapPacket::new(EPOCH, f.len() as u32, &f))
            .unwrap();
    }
}

/// (ns since the first input packet, IP ID) of every departure.
fn departures(path: &str) -> Vec<(u128, u16)> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = vec![];
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let id = u16::from_be_bytes([p.data[18], p.data[19]]);
        out.push(((p.timestamp - EPOCH).as_nanos(), id));
    }
    out
}

fn replay(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("replay")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn a_constant_trace_of_one_lets_a_1500_byte_packet_leave_every_millisecond() {
    let d = Dir::new("constant");
    let input = d.path("in.pcap");
    write_burst(&input, 50, 1500);
    let trace = d.write("one.trace", "1\n");
    let out = d.path("out.pcap");
    let (code, stdout, stderr) = replay(&["--trace", &trace, &input, &out]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("out 50 dropped 0"), "{stdout}");
    assert!(stdout.contains("trace"), "{stdout}");
    // 1500 bytes + Mahimahi's 4: one opportunity each, 1 ms apart, in order.
    let want: Vec<(u128, u16)> = (0..50).map(|i| ((i as u128 + 1) * MS, i)).collect();
    assert_eq!(departures(&out), want);
}

#[test]
fn a_trace_played_once_stops_and_a_delay_trace_delays() {
    let d = Dir::new("once");
    let input = d.path("in.pcap");
    write_burst(&input, 5, 1500);
    let trace = d.write("t", "1\n2\n3\n");
    let delays = d.write("d", "10\n20\n");
    let out = d.path("out.pcap");
    let (code, stdout, stderr) = replay(&[
        "--trace",
        &trace,
        "--once",
        "--delay-trace",
        &delays,
        "--delay-trace-step",
        "2ms",
        &input,
        &out,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("out 3 dropped 2"), "{stdout}");
    // Leaving at 1, 2, 3 ms: delays 10 (step 0), 20 (step 1), 20 (step 1).
    assert_eq!(departures(&out), [(11 * MS, 0), (22 * MS, 1), (23 * MS, 2)]);
}

#[test]
fn a_schedule_changes_the_rate_at_its_time() {
    let d = Dir::new("schedule");
    let input = d.path("in.pcap");
    write_burst(&input, 4, 1500);
    // 1514-byte frames at 12.112 Mbit/s take 1 ms; from 2 ms, half that.
    let s = d.write(
        "s.csv",
        "at,rate,delay,loss\n0s,12112kbit,,\n2ms,6056kbit,,\n",
    );
    let out = d.path("out.pcap");
    let (code, _, stderr) = replay(&["--rate", "1gbit", "--schedule", &s, &input, &out]);
    assert_eq!(code, 0, "{stderr}");
    let t: Vec<u128> = departures(&out).iter().map(|(t, _)| *t).collect();
    assert_eq!(t, [MS, 2 * MS, 4 * MS, 6 * MS]);
}

#[test]
fn bad_files_name_the_file_the_line_and_the_reason() {
    let d = Dir::new("bad");
    let input = d.path("in.pcap");
    write_burst(&input, 1, 100);
    let out = d.path("out.pcap");
    let bad = d.write("bad.trace", "1\n2\nsoon\n");
    let (code, _, stderr) = replay(&["--trace", &bad, &input, &out]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("{bad}: line 3: \"soon\" is not a whole number")),
        "{stderr}"
    );
    let bad = d.write("bad.csv", "0s,1mbit,,\n1s,2mbit,5,\n");
    let (code, _, stderr) = replay(&["--rate", "1mbit", "--schedule", &bad, &input, &out]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("{bad}: line 2: delay")),
        "{stderr}"
    );
    let (code, _, stderr) = replay(&["--trace", &d.path("missing"), &input, &out]);
    assert_eq!(code, 1);
    assert!(stderr.contains("missing"), "{stderr}");
    // A trace replaces the rate: not both; neither is a usage error.
    let good = d.write("good.trace", "1\n");
    let (code, _, _) = replay(&["--trace", &good, "--rate", "1mbit", &input, &out]);
    assert_eq!(code, 2);
    let (code, _, _) = replay(&[&input, &out]);
    assert_eq!(code, 2);
    let (code, _, stderr) = replay(&[
        "--rate",
        "1mbit",
        "--delay-trace",
        &good,
        "--delay-trace-step",
        "0",
        &input,
        &out,
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(!Path::new(&out).exists(), "nothing written on failure");
}
