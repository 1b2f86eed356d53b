//! Live links whose wires follow files, and changes to a running link's
//! wires: `sluice link up --trace-ab/--schedule-ab/--delay-trace-ab`,
//! `sluice link set`.
//!
//! They need root and `/dev/net/tun` (CI runs as root); where either is
//! missing the test FAILS saying so, rather than passing without having run.

mod common;

use common::{median, require_live, Link};
use sluice_net::control::{Request, Response};
use sluice_net::wire::WireSettings;
use std::path::Path;
use std::time::{Duration, Instant};

impl Link {
    /// A control request to the link's daemon, as `sluice link set` sends it.
    fn request(&self, req: &Request) -> Response {
        use std::io::{BufRead, BufReader, Write};
        let sock = self.state.path().join(format!("links/{}.sock", self.name));
        let mut s = std::os::unix::net::UnixStream::connect(sock).expect("control socket");
        let mut line = serde_json::to_string(req).expect("json");
        line.push('\n');
        s.write_all(line.as_bytes()).expect("send");
        let mut answer = String::new();
        BufReader::new(&s).read_line(&mut answer).expect("answer");
        serde_json::from_str(&answer).expect("response")
    }
}

/// `link set --rate` on a running link: the daemon applies the change
/// within 1 ms of the request being sent (its answer says when, on the
/// same monotonic clock) at the median and for at least 190 of 200
/// requests. The tail is the control socket's thread waiting for a core:
/// it runs at the default priority on purpose (control_thread.rs), so
/// beside other builds on a 2-core machine a few requests wait
/// milliseconds (p99 0.29 ms at a load of 3, 4.1 ms at a load of 5);
/// the p99 and maximum are printed. The requests follow each other at
/// once: a request after the daemon's threads have slept waits for them
/// to wake (on a 2-core virtual machine, a median of 1.9 ms at a load of 5
/// with requests 2 ms apart). The wire's pace follows at once:
/// 1400-byte pings take ~230 ms round a 100 kbit/s wire, and under a
/// millisecond once `link set` makes it 1 Gbit/s.
#[test]
fn link_set_rate_takes_effect_within_1ms() {
    require_live(&[]);
    let l = Link::new("lt", "r");
    l.up(&["--rate", "100kbit"]);
    let slow = l.ping_sized(3, "0.3", 1400);
    assert_eq!(slow.len(), 3, "{slow:?}");
    // 2 x 1428 bytes at 100 kbit/s is 228 ms.
    assert!(median(&slow) >= 228.0, "{slow:?}");
    let mut took = vec![];
    for i in 0..200 {
        let rate = if i % 2 == 0 {
            1_000_000_000
        } else {
            2_000_000_000
        };
        let req = Request::Wire {
            ab: Some(Box::new(WireSettings {
                rate_bps: Some(rate),
                ..Default::default()
            })),
            ba: Some(Box::new(WireSettings {
                rate_bps: Some(rate),
                ..Default::default()
            })),
        };
        let sent = sluice_net::clock::now();
        let r = l.request(&req);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let applied: u64 = r
            .stdout
            .trim()
            .strip_prefix("applied at ")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{:?}", r.stdout));
        took.push((applied - sent.0) as f64 / 1e6);
    }
    took.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99, max) = (took[100], took[198], took[199]);
    let within = took.iter().filter(|&&t| t <= 1.0).count();
    eprintln!(
        "link set: applied {p50:.3} ms after the request at p50, {p99:.3} at p99, {max:.3} max; \
         {within} of 200 within 1 ms"
    );
    assert!(p50 <= 1.0, "applied {p50} ms after the request at p50");
    assert!(within >= 190, "only {within} of 200 applied within 1 ms");
    let fast = l.ping_sized(5, "0.1", 1400);
    assert_eq!(fast.len(), 5);
    assert!(median(&fast) < 1.0, "{fast:?}");
    // The command line does the same, quietly.
    let out = l.ok(&["link", "set", &l.name, "--rate", "100kbit", "--dir", "ab"]);
    assert_eq!(out, "");
    let half = l.ping_sized(3, "0.3", 1400);
    assert!(
        (114.0..150.0).contains(&median(&half)),
        "one way at 100 kbit/s: {half:?}"
    );
}

/// A link up on traces: a 1-opportunity-per-ms trace each way gives
/// pings an RTT of 1–2 ms more than nothing (an echo waits for the next
/// opportunity each way), and `link set --trace-ab` replaces one.
#[test]
fn link_up_on_traces_and_link_set_a_new_trace() {
    require_live(&[]);
    let l = Link::new("lt", "t");
    let trace = l.state.path().join("c.trace");
    std::fs::write(&trace, "1\n").unwrap();
    let t = trace.to_str().unwrap();
    l.up(&["--trace-ab", t, "--trace-ba", t]);
    let list = l.ok(&["link", "list"]);
    assert!(list.contains(&format!("trace {t}")), "{list}");
    let r = l.ping(10, "0.05");
    assert!(r.iter().all(|&x| (0.0..3.5).contains(&x)), "{r:?}");
    // One opportunity every 100 ms a→b: a ping waits up to 100 ms.
    let slow = l.state.path().join("s.trace");
    std::fs::write(&slow, "100\n").unwrap();
    l.ok(&["link", "set", &l.name, "--trace-ab", slow.to_str().unwrap()]);
    let r = l.ping(10, "0.137");
    assert!(r.iter().any(|&x| x > 20.0), "{r:?}");
    assert!(r.iter().all(|&x| x < 103.0), "{r:?}");
}

/// A schedule steps a wire's delay while it runs.
#[test]
fn a_schedule_steps_the_delay() {
    require_live(&[]);
    let l = Link::new("lt", "s");
    let sched = l.state.path().join("s.csv");
    std::fs::write(&sched, "at,rate,delay,loss\n0s,,10ms,\n1s,,40ms,\n").unwrap();
    l.up(&["--schedule-ab", sched.to_str().unwrap()]);
    let early = l.ping(3, "0.1");
    std::thread::sleep(Duration::from_millis(1200));
    let late = l.ping(3, "0.1");
    assert!(
        early.iter().all(|&x| (10.0..15.0).contains(&x)),
        "{early:?}"
    );
    assert!(late.iter().all(|&x| (40.0..45.0).contains(&x)), "{late:?}");
}

/// Bad files stop `link up` before anything starts, naming file and line;
/// `link set` refuses them and the link runs on unchanged.
#[test]
fn bad_files_are_refused_with_file_and_line_and_nothing_starts() {
    require_live(&[]);
    let l = Link::new("lt", "b");
    let bad = l.state.path().join("bad.trace");
    std::fs::write(&bad, "1\n\n3\n").unwrap();
    let b = bad.to_str().unwrap();
    let o = l.sluice(&["link", "up", &l.name, "--trace-ba", b]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("sluice link: {b}: line 2: empty line\n")
    );
    assert!(!Path::new(&format!("/run/netns/{}-a", l.name)).exists());
    let o = l.sluice(&["link", "up", &l.name, "--schedule-ab", "/nonexistent.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent.csv: "));
    l.up(&["--delay", "5ms"]);
    let o = l.sluice(&["link", "set", &l.name, "--trace-ab", b]);
    assert_eq!(o.status.code(), Some(2));
    let o = l.sluice(&["link", "set", &l.name]);
    assert_eq!(o.status.code(), Some(2));
    let start = Instant::now();
    let r = l.ping(3, "0.1");
    assert!(r.iter().all(|&x| (10.0..15.0).contains(&x)), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}
