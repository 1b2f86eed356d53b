//! Live data plane tests: real packets of real programs through `sluice link`
//! and `sluice shell`. They need root (namespaces, TUN devices, iptables), as
//! CI has; where the machine lacks a capability they say so and skip.
//!
//! Each test uses its own link name (`lv<pid><letter>`) and its own state
//! directory, so they run in parallel and leave nothing behind.
//!
//! Tolerances are physical: the emulated delays are lower bounds that must
//! hold for every packet (the plane never delivers early), and the upper
//! bounds allow for this shared 2-core machine, where a process can wait
//! milliseconds for a core (load averages above 10 are common while eight
//! builds run); the medians are what is compared.
//!
//! The accuracy tests (the tbf/htb rate matrix, netem's delay and jitter)
//! hold the issue's tolerances on that machine because the link daemon runs
//! at real-time priority (sluice-net's `clock::prefer_cpu`) and so do their
//! TCP senders and receivers (`TcpRun::urgent`): the figures are then the
//! data plane's, not the share of CPU a load generator got. They run one at
//! a time ([`heavy`]), about a minute and a half in all (the side-by-side
//! comparisons with the kernel's htb and tbf on a veth pair among them).

mod common;

use common::{median, private_dir, rtts, skip_live, Link, EXE};
use sluice_net::traffic;
use std::path::Path;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Skip the test (saying why) unless a link can come up here and every
/// tool named is installed.
macro_rules! require {
    ($($tool:expr),*) => {
        if skip_live(&[$($tool),*]) {
            return;
        }
    };
}

/// This binary's link for one test: `lv<pid><letter>`.
fn link(letter: &str) -> Link {
    Link::new("lv", letter)
}

impl Link {
    fn pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.record()).expect("record");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        v["pid"].as_i64().expect("pid") as i32
    }

    /// From side a to side b.
    fn path(&self) -> traffic::Endpoints {
        traffic::Endpoints {
            from: self.ns('a'),
            to: self.ns('b'),
            addr: self.addr_b().parse().expect("address"),
        }
    }
}

fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

#[test]
fn ping_through_live_netem_delay_adds_exactly_the_delay() {
    require!("ping");
    let _g = light();
    let l = link("p");
    l.up(&[]);
    let base = l.ping(20, "0.02");
    assert!(base.len() >= 18, "unshaped pings lost: {base:?}");
    let base_median = median(&base);
    l.ok(&[
        "tc", "-n", &l.name, "qdisc", "add", "dev", "a0", "root", "netem", "delay", "50ms",
    ]);
    let shaped = l.ping(30, "0.02");
    assert!(shaped.len() >= 28, "shaped pings lost: {shaped:?}");
    // Physics: no echo can come back sooner than the 50 ms netem holds it.
    let min = shaped.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(min >= 50.0, "an RTT below the 50 ms delay: {shaped:?}");
    // The median is 50 ms plus the unshaped RTT, within 3 ms of scheduling
    // on this loaded machine (the plane itself releases packets within
    // microseconds: see the timer in sluice-net's clock.rs).
    let m = median(&shaped);
    assert!(
        m <= 50.0 + base_median + 3.0,
        "median {m} ms vs 50 + {base_median} ms: {shaped:?}"
    );
    // -s shows the live counters of the running qdisc.
    let stats = l.ok(&["tc", "-s", "-n", &l.name, "qdisc", "show", "dev", "a0"]);
    assert!(stats.contains("qdisc netem 8001: root"), "{stats}");
    let sent: u64 = stats
        .split("pkt")
        .next()
        .and_then(|s| s.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(sent >= 28, "netem counted {sent} packets: {stats}");
}

#[test]
fn the_wire_delay_applies_to_each_direction() {
    require!("ping");
    let _g = light();
    let l = link("d");
    l.up(&["--delay-ab", "20ms", "--delay-ba", "5ms"]);
    let r = l.ping(15, "0.05");
    assert!(r.len() >= 14, "pings lost: {r:?}");
    assert!(
        r.iter().all(|&t| t >= 25.0),
        "an RTT below 20 + 5 ms: {r:?}"
    );
    assert!(
        median(&r) <= 25.0 + 4.0,
        "median too far above 25 ms: {r:?}"
    );
}

/// Bulk TCP along `path`: the receiver's goodput in bit/s over the last
/// `secs - 1` of `secs` seconds (the first is warm-up), with a TCP window
/// of about `window` bytes (the receive buffer; `None`: autotuned).
fn bulk_tcp(path: &traffic::Endpoints, secs: f64, window: Option<usize>) -> f64 {
    let run = traffic::TcpRun {
        secs,
        rcvbuf: window,
        urgent: true,
        ..Default::default()
    };
    traffic::tcp_goodput(path, run).expect("bulk TCP")
}

/// A TCP window for bulk TCP through a shaper of `rate_bps`: 50 ms of
/// data at the rate (at least 16 kB). It is under the shapers' queues (100
/// ms of data and more), so TCP never overflows them and the shaper alone
/// sets the pace, and it lets the sender and receiver be held up for tens of
/// milliseconds on this busy machine without the shaper running dry. From 1
/// MB on, Linux's own receive-buffer tuning (up to `tcp_rmem`'s 6 MB, under
/// the shapers' queues at those rates) opens the window faster than a fixed
/// buffer does: `None`.
fn window_for(rate_bps: f64) -> Option<usize> {
    let w = ((rate_bps / 8.0 * 0.050) as usize).max(16_000);
    (w < 1 << 20).then_some(w)
}

/// Move this thread into network namespace `ns`.
fn enter(ns: &str) {
    traffic::enter_netns(ns).expect("setns");
}

/// Tests that load the CPU or need it calm (bulk TCP, delay accuracy) run
/// alone: on this 2-core machine a second bulk flow, a garbage flood or a
/// link being set up would take the daemon's core and show up as shaping or
/// timer error (a 2 ms stall in ten of a thousand echoes breaks the p99
/// bound). The other tests run in parallel with each other ([`light`]).
static CALM: RwLock<()> = RwLock::new(());

fn heavy() -> RwLockWriteGuard<'static, ()> {
    CALM.write().unwrap_or_else(|e| e.into_inner())
}

fn light() -> RwLockReadGuard<'static, ()> {
    CALM.read().unwrap_or_else(|e| e.into_inner())
}

/// Goodput of bulk TCP along `path` against what a shaper of `rate_bps`
/// lets through: the rate less the headers it counts in each packet of
/// `wire` bytes that carries 1448 bytes of data (IP and TCP with
/// timestamps, 52 bytes; on a veth also Ethernet's 14).
fn goodput_ratio(what: &str, path: &traffic::Endpoints, rate_bps: f64, wire: f64) -> f64 {
    let goodput = bulk_tcp(path, 5.0, window_for(rate_bps));
    let expect = rate_bps * 1448.0 / wire;
    let ratio = goodput / expect;
    eprintln!(
        "{what}: goodput {:.4} Mbit/s ({:+.2}% of {:.4})",
        goodput / 1e6,
        (ratio - 1.0) * 100.0,
        expect / 1e6
    );
    ratio
}

/// [`goodput_ratio`] through a sluice link whose `dev a0` has the tree
/// `tree("a0")` makes (a TUN device: no Ethernet header).
fn sluice_ratio(what: &str, rate_bps: f64, tree: &dyn Fn(&str) -> Vec<String>) -> f64 {
    let l = link(&what.replace(' ', ""));
    l.up(&[]);
    for cmd in tree("a0") {
        let mut args = vec!["tc", "-n", &l.name];
        args.extend(cmd.split(' '));
        l.ok(&args);
    }
    let ratio = goodput_ratio(&format!("sluice {what}"), &l.path(), rate_bps, 1500.0);
    let stats = l.ok(&["tc", "-s", "-n", &l.name, "qdisc", "show", "dev", "a0"]);
    eprintln!("{stats}");
    ratio
}

/// [`goodput_ratio`] through the kernel's own qdiscs: the same tree on
/// `dev va` of a kernel veth pair. `None` when `tc` on PATH is not
/// iproute2's or the kernel lacks what the tree needs.
fn kernel_ratio(what: &str, rate_bps: f64, tree: &dyn Fn(&str) -> Vec<String>) -> Option<f64> {
    if !kernel_tc_here() {
        return None;
    }
    let pid = std::process::id();
    let veth = traffic::VethPair::new(
        &format!("lv{pid}{}", what.replace(' ', "")),
        (pid % 250 + 1) as u8,
    )
    .expect("veth pair");
    for cmd in tree("va") {
        if !kernel_tc(&veth.ns('a'), &cmd) {
            return None;
        }
    }
    Some(goodput_ratio(
        &format!("kernel {what}"),
        &veth.path(),
        rate_bps,
        1514.0,
    ))
}

/// Bulk TCP through the shaper `tree` makes delivers its rate less headers
/// within 2 %. Above the rate is wrong whatever the machine does, so every
/// run must stay under 102 %. Below 98 % can also be the machine's doing:
/// at 1 Gbit/s the TCP sender and receiver, the kernel's stack and the
/// daemon share two vCPUs whose host sometimes runs them slower (in such
/// phases the kernel's own htb on a veth pair also fell to -2.4 %, while an
/// unshaped sluice link still carried 19 Gbit/s). So a short run is
/// followed at once by the kernel's own qdiscs with the same tree on a veth
/// pair: if the kernel too falls short of 98 %, the machine could not carry
/// the rate just then, and sluice passes if it is within a point of the
/// kernel; if the kernel reaches 98 %, sluice must as well, in one of three
/// attempts (sequential runs differ by a point or two on a 2-core virtual machine).
fn shapes_within_2_percent(what: &str, rate_bps: f64, tree: &dyn Fn(&str) -> Vec<String>) {
    let _g = heavy();
    let mut report = String::new();
    for attempt in 1..=3 {
        let s = sluice_ratio(what, rate_bps, tree);
        assert!(
            s <= 1.02,
            "{what}: goodput {:.2}% of the rate less headers",
            s * 100.0
        );
        if s >= 0.98 {
            return;
        }
        let Some(k) = kernel_ratio(what, rate_bps, tree) else {
            report += &format!("attempt {attempt}: sluice {:.2}%; ", s * 100.0);
            continue;
        };
        report += &format!(
            "attempt {attempt}: sluice {:.2}%, kernel {:.2}%; ",
            s * 100.0,
            k * 100.0
        );
        if k < 0.98 && s >= k - 0.01 {
            eprintln!("{what}: the kernel's own qdisc fell short too, sluice within a point of it: {report}");
            return;
        }
    }
    panic!("{what}: goodput of the rate less headers: {report}");
}

/// The tbf of the rate matrix: a burst of a millisecond at the rate (at
/// least 10 kB, so TCP's GSO packets of up to 64 kB are segmented at the
/// higher rates), and a 100 ms queue.
fn tbf_at(rate: &str, bps: f64) {
    let burst = ((bps / 8.0 / 1000.0) as u64).max(10_000);
    let tree = |dev: &str| {
        vec![format!(
            "qdisc add dev {dev} root tbf rate {rate} burst {burst} latency 100ms"
        )]
    };
    shapes_within_2_percent(&format!("tbf {rate}"), bps, &tree)
}

/// The htb of the rate matrix: one class of `rate R ceil R` (default
/// bursts), every packet in it.
fn htb_at(rate: &str, bps: f64) {
    let tree = |dev: &str| {
        vec![
            format!("qdisc add dev {dev} root handle 1: htb default 10"),
            format!("class add dev {dev} parent 1: classid 1:10 htb rate {rate} ceil {rate}"),
        ]
    };
    shapes_within_2_percent(&format!("htb {rate}"), bps, &tree)
}

macro_rules! rate_matrix {
    ($($name:ident: $f:ident($rate:expr, $bps:expr);)*) => {$(
        #[test]
        fn $name() {
            require!();
            $f($rate, $bps);
        }
    )*};
}

rate_matrix! {
    tbf_1mbit_shapes_bulk_tcp_within_2_percent: tbf_at("1mbit", 1e6);
    tbf_10mbit_shapes_bulk_tcp_within_2_percent: tbf_at("10mbit", 1e7);
    tbf_100mbit_shapes_bulk_tcp_within_2_percent: tbf_at("100mbit", 1e8);
    tbf_1gbit_shapes_bulk_tcp_within_2_percent: tbf_at("1gbit", 1e9);
    htb_1mbit_shapes_bulk_tcp_within_2_percent: htb_at("1mbit", 1e6);
    htb_10mbit_shapes_bulk_tcp_within_2_percent: htb_at("10mbit", 1e7);
    htb_100mbit_shapes_bulk_tcp_within_2_percent: htb_at("100mbit", 1e8);
    htb_1gbit_shapes_bulk_tcp_within_2_percent: htb_at("1gbit", 1e9);
}

#[test]
fn an_htb_class_behind_a_faster_wire_shapes_and_shows_its_counters() {
    require!();
    let _g = heavy();
    let l = link("h");
    // The wire (20 Mbit/s) is faster than the class, so the class shapes.
    l.up(&["--rate", "20mbit"]);
    for cmd in [
        "qdisc add dev a0 root handle 1: htb default 10",
        "class add dev a0 parent 1: classid 1:10 htb rate 5mbit ceil 5mbit",
    ] {
        let mut args = vec!["tc", "-n", &l.name];
        args.extend(cmd.split(' '));
        l.ok(&args);
    }
    let goodput = bulk_tcp(&l.path(), 4.0, window_for(5e6));
    let expect = 5e6 * 1448.0 / 1500.0;
    let ratio = goodput / expect;
    eprintln!(
        "htb 5mbit: goodput {:.3} Mbit/s ({:.1}% of {:.3})",
        goodput / 1e6,
        ratio * 100.0,
        expect / 1e6
    );
    assert!(
        (0.98..=1.02).contains(&ratio),
        "goodput {goodput} vs {expect}"
    );
    let stats = l.ok(&["tc", "-s", "-n", &l.name, "class", "show", "dev", "a0"]);
    assert!(
        stats.contains("class htb 1:10 root prio 0 rate 5Mbit ceil 5Mbit"),
        "{stats}"
    );
}

#[test]
fn ingress_shaping_through_an_ifb_device_paces_a_download() {
    // The usual way to shape what a host receives: its ingress filter
    // redirects every packet to an ifb device, whose qdisc shapes, and the
    // ifb device hands the packets back up the host's stack. Here the host
    // is side b, all through `sluice ip/tc -n` on the running link.
    require!();
    let _g = heavy();
    let l = link("ifb");
    l.up(&[]);
    let name = l.name.clone();
    for cmd in [
        "ip link add ifb0 type ifb",
        "ip link set dev ifb0 up",
        "tc qdisc add dev b0 handle ffff: ingress",
        "tc filter add dev b0 parent ffff: protocol ip u32 match u32 0 0 action mirred egress redirect dev ifb0",
        "tc qdisc add dev ifb0 root tbf rate 5mbit burst 10000 latency 100ms",
    ] {
        let mut words = cmd.split(' ');
        let mut args = vec![words.next().unwrap(), "-n", &name];
        args.extend(words);
        l.ok(&args);
    }
    let ratio = goodput_ratio("ifb tbf 5mbit", &l.path(), 5e6, 1500.0);
    assert!((0.98..=1.02).contains(&ratio), "goodput ratio {ratio}");
    // Every byte the filter redirected went through ifb0's shaper or waits
    // in it (one batch: both read at the same moment), and none was dropped:
    // the window (31 kB) is under the shaper's queue (72.5 kB). Bytes, not
    // packets: a GSO packet waiting counts as one in the backlog.
    let batch = l.state.path().join("show.tc");
    std::fs::write(&batch, "qdisc show dev ifb0\nfilter show dev b0 ingress\n").unwrap();
    let shown = l.ok(&["tc", "-s", "-n", &name, "-b", batch.to_str().unwrap()]);
    eprintln!("{shown}");
    // "Sent B bytes N pkt (dropped D, ...", "backlog Bb Np".
    let w: Vec<&str> = shown.split_whitespace().collect();
    let count = |key: &str, off: isize, nth: usize| -> u64 {
        let i = w
            .iter()
            .enumerate()
            .filter(|(_, x)| **x == key)
            .nth(nth)
            .expect(key)
            .0;
        let v = w[(i as isize + off) as usize].trim_end_matches([',', 'b']);
        v.parse().unwrap()
    };
    let (ifb_sent, ifb_dropped, ifb_backlog) = (
        count("bytes", -1, 0),
        count("(dropped", 1, 0),
        count("backlog", 1, 0),
    );
    let redirected = count("bytes", -1, 1);
    assert!(ifb_sent > 1_000_000, "{shown}");
    assert_eq!(
        (ifb_dropped, ifb_sent + ifb_backlog),
        (0, redirected),
        "{shown}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&l.ok(&["link", "status", &name])).unwrap();
    assert_eq!(status["mirred_drops"], 0, "{status}");
}

#[test]
fn bulk_tcp_through_a_10mbit_wire_runs_at_the_wire_rate() {
    require!();
    let _g = heavy();
    let l = link("w");
    // A 100-packet modem buffer after the default qdisc.
    l.up(&["--rate", "10mbit", "--buffer", "100p"]);
    // A 64 kB window: under the 1000-packet qdisc, over what the wire holds.
    let goodput = bulk_tcp(&l.path(), 4.0, Some(64 << 10));
    let expect = 10e6 * 1448.0 / 1500.0;
    let ratio = goodput / expect;
    eprintln!(
        "wire 10mbit: goodput {:.3} Mbit/s ({:.1}% of {:.3})",
        goodput / 1e6,
        ratio * 100.0,
        expect / 1e6
    );
    assert!(
        (0.98..=1.02).contains(&ratio),
        "goodput {goodput} vs {expect}"
    );
}

/// The `q` quantile of `v` (sorted in place).
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// RTTs in ms of `count` ICMP echoes from side a to side b, 2 ms apart,
/// measured with kernel receive timestamps.
fn probe(l: &Link, count: u16) -> Vec<f64> {
    let addr = l.addr_b().parse().expect("address");
    traffic::icmp_rtts(&l.ns('a'), addr, count, Duration::from_millis(2), 56)
        .expect("ICMP probe")
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect()
}

/// `netem delay 50ms` adds 50 ms to every echo, within 0.2 ms at the
/// median, p90 and p99 of the RTTs against the same quantile of the
/// unshaped link's measured just before. One echo in a hundred meeting a
/// stall of the VM's host moves the p99 by milliseconds (seen here in
/// phases when the whole machine ran jerkily), so a disturbed pair of runs
/// is repeated, up to five times (a clean-clone CI run once met stalls
/// of 4.9, 1.7 and 0.5 ms in three in a row, and passed alone right
/// after); netem that is really off by 0.2 ms fails all five.
#[test]
fn netem_delay_50ms_adds_50ms_within_0_2ms_at_the_99th_percentile() {
    require!();
    let _g = heavy();
    let l = link("n");
    l.up(&[]);
    let mut reports = Vec::new();
    for attempt in 1..=5 {
        if attempt > 1 {
            l.ok(&["tc", "-n", &l.name, "qdisc", "del", "dev", "a0", "root"]);
        }
        let mut base = probe(&l, 1000);
        assert!(base.len() >= 990, "unshaped echoes lost: {}", base.len());
        l.ok(&[
            "tc", "-n", &l.name, "qdisc", "add", "dev", "a0", "root", "netem", "delay", "50ms",
        ]);
        let mut shaped = probe(&l, 1000);
        assert!(shaped.len() >= 990, "shaped echoes lost: {}", shaped.len());
        let min = shaped.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!(min >= 50.0, "an RTT below the 50 ms delay: {min}");
        // The same quantile of the unshaped RTT plus 50 ms: netem's error alone.
        let mut report = format!("attempt {attempt}: ");
        let mut worst: f64 = 0.0;
        for q in [0.5, 0.9, 0.99] {
            let (b, s) = (quantile(&mut base, q), quantile(&mut shaped, q));
            let err = s - 50.0 - b;
            worst = worst.max(err.abs());
            report += &format!("p{:.0}: {s:.3} ms = 50 + {b:.3} {err:+.3} ms; ", q * 100.0);
        }
        eprintln!("netem delay 50ms: {report}");
        if worst < 0.2 {
            return;
        }
        reports.push(report);
    }
    panic!("{}", reports.join("\n"));
}

#[test]
fn netem_normal_jitter_has_the_configured_mean_and_deviation() {
    require!();
    let _g = heavy();
    let l = link("j");
    l.up(&[]);
    let mut base = probe(&l, 500);
    let base_median = quantile(&mut base, 0.5);
    l.ok(&[
        "tc",
        "-n",
        &l.name,
        "qdisc",
        "add",
        "dev",
        "a0",
        "root",
        "netem",
        "delay",
        "100ms",
        "10ms",
        "distribution",
        "normal",
    ]);
    let shaped = probe(&l, 2500);
    assert!(shaped.len() >= 2450, "echoes lost: {}", shaped.len());
    let n = shaped.len() as f64;
    let delays: Vec<f64> = shaped.iter().map(|r| r - base_median).collect();
    let mean = delays.iter().sum::<f64>() / n;
    let sd = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    eprintln!("netem 100ms 10ms normal: mean {mean:.3} ms, deviation {sd:.3} ms over {n} echoes");
    assert!((mean - 100.0).abs() <= 5.0, "mean {mean} ms");
    assert!((sd - 10.0).abs() <= 0.5, "deviation {sd} ms");
}

#[test]
fn a_taken_name_is_refused_and_down_removes_everything() {
    require!();
    let _g = light();
    let l = link("r");
    l.up(&[]);
    let o = l.sluice(&["link", "up", &l.name]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("already up"), "{err}");
    assert!(l.ok(&["link", "list"]).contains(&l.name));
    l.ok(&["link", "down", &l.name]);
    assert!(!netns_exists(&l.ns('a')) && !netns_exists(&l.ns('b')));
    assert!(!l.record().exists());
    assert!(!l.ok(&["link", "list"]).contains(&l.name));
    // Down again: a clear error.
    let o = l.sluice(&["link", "down", &l.name]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no link named"));
}

#[test]
fn sigterm_makes_the_daemon_clean_up_and_kill_9_leftovers_are_reaped() {
    require!();
    let _g = light();
    // SIGTERM: the daemon removes everything itself.
    let l = link("k");
    l.up(&[]);
    let pid = l.pid();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(
        wait_until(Duration::from_secs(5), || !l.record().exists()
            && !netns_exists(&l.ns('a'))),
        "SIGTERM left {} behind",
        l.name
    );
    assert!(!netns_exists(&l.ns('b')));
    // SIGKILL: the next `list` finds and removes the leftovers.
    l.up(&[]);
    let pid = l.pid();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    assert!(wait_until(Duration::from_secs(5), || !Path::new(&format!(
        "/proc/{pid}"
    ))
    .exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true)));
    assert!(
        netns_exists(&l.ns('a')),
        "the namespaces outlive a killed daemon"
    );
    let o = l.sluice(&["link", "list"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("removed the leftovers"));
    assert!(!netns_exists(&l.ns('a')) && !netns_exists(&l.ns('b')) && !l.record().exists());
    // And the name is free again.
    l.up(&[]);
}

#[test]
fn garbage_written_into_the_tun_is_counted_and_traffic_goes_on() {
    require!("ping");
    let _g = light();
    let l = link("g");
    l.up(&[]);
    let ns_a = l.ns('a');
    // AF_PACKET frames on a0 reach the daemon's TUN read exactly as written.
    let sent = std::thread::spawn(move || {
        enter(&ns_a);
        inject_garbage("a0", 2000)
    })
    .join()
    .expect("injector");
    assert_eq!(sent, 2000);
    let r = l.ping(5, "0.05");
    assert_eq!(r.len(), 5, "traffic stopped after garbage");
    let status = l.ok(&["link", "status", &l.name]);
    let v: serde_json::Value = serde_json::from_str(&status).expect("status json");
    let ab = &v["a_to_b"]["plane"];
    let (malformed, rx, delivered) = (
        ab["malformed"].as_u64().unwrap_or(0),
        ab["rx_packets"].as_u64().unwrap_or(0),
        ab["delivered"].as_u64().unwrap_or(0),
    );
    // The kernel's own queue in front of the TUN drops part of a flood
    // (txqueuelen 500); whatever reached the daemon was counted, and only the
    // pings (and the kernel's own IP packets) were forwarded.
    assert!(malformed >= 100, "{status}");
    assert_eq!(rx, malformed + delivered, "{status}");
}

/// Write `n` non-IP frames of assorted sizes out of `ifname` with a packet socket.
fn inject_garbage(ifname: &str, n: usize) -> usize {
    // SAFETY: plain socket calls on a socket this function owns.
    unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM,
            (libc::ETH_P_IP as u16).to_be() as i32,
        );
        assert!(
            fd >= 0,
            "packet socket: {}",
            std::io::Error::last_os_error()
        );
        let name = std::ffi::CString::new(ifname).expect("name");
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
        sll.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
        let mut sent = 0;
        for i in 0..n {
            // First nibble 0xf..0x0 but never 4 or 6; sizes 1..1400.
            let mut buf = vec![(i % 256) as u8; 1 + (i * 7919) % 1400];
            buf[0] = [0x00, 0x15, 0x2a, 0x75, 0x80, 0xff][i % 6];
            let r = libc::sendto(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            if r >= 0 {
                sent += 1;
            }
        }
        libc::close(fd);
        sent
    }
}

#[test]
fn shell_runs_a_command_behind_the_link_and_removes_everything() {
    require!("ping", "iptables");
    let _g = light();
    let state = private_dir();
    let o = Command::new(EXE)
        .args(["shell", "--delay", "10ms", "--", "sh", "-c"])
        .arg("ping -n -c 5 -i 0.05 $(ip route | awk '/default/ {print $3}') && echo link=$SLUICE_LINK")
        .env("SLUICE_STATE_DIR", state.path())
        .output()
        .expect("sluice shell");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = rtts(&out);
    assert_eq!(r.len(), 5, "{out}");
    assert!(
        r.iter().all(|&t| t >= 20.0),
        "an RTT below 2 x 10 ms: {r:?}"
    );
    let name = out
        .split("link=")
        .nth(1)
        .expect("link name")
        .trim()
        .to_string();
    assert!(!netns_exists(&format!("{name}-a")));
    let rules = Command::new("iptables")
        .args(["-t", "nat", "-S"])
        .output()
        .expect("iptables");
    assert!(!String::from_utf8_lossy(&rules.stdout).contains(&format!("sluice:{name}")));
    // The command's exit status is the shell's.
    let o = Command::new(EXE)
        .args(["shell", "--", "sh", "-c", "exit 7"])
        .env("SLUICE_STATE_DIR", state.path())
        .output()
        .expect("sluice shell");
    assert_eq!(o.status.code(), Some(7));
}

/// Simultaneous bulk TCP flows along `path`, one to each of `ports`, each
/// with a window of `window` bytes: the receivers' goodputs in bit/s, in
/// the order of `ports`.
fn parallel_goodputs(
    path: &traffic::Endpoints,
    ports: &[u16],
    secs: f64,
    window: Option<usize>,
) -> Vec<f64> {
    std::thread::scope(|s| {
        let flows: Vec<_> = ports
            .iter()
            .map(|&port| {
                s.spawn(move || {
                    let run = traffic::TcpRun {
                        port,
                        secs,
                        warm: 2.0,
                        rcvbuf: window,
                        urgent: true,
                        ..Default::default()
                    };
                    traffic::tcp_goodput(path, run)
                        .unwrap_or_else(|e| panic!("bulk TCP to port {port}: {e}"))
                })
            })
            .collect();
        flows.into_iter().map(|f| f.join().expect("flow")).collect()
    })
}

/// Is `tc` on PATH the kernel's (iproute2), not a link to sluice?
fn kernel_tc_here() -> bool {
    Command::new("tc")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("iproute2"))
        .unwrap_or(false)
}

/// Run the kernel's `tc -n NS WORDS`, which must succeed; `false` when the
/// kernel lacks what it asks for (a module not built), so the test skips.
fn kernel_tc(ns: &str, cmd: &str) -> bool {
    let o = Command::new("tc")
        .args(["-n", ns])
        .args(cmd.split(' '))
        .output()
        .expect("tc");
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success()
        && (err.to_lowercase().contains("unknown") || err.contains("No such file or directory"))
    {
        eprintln!("SKIPPED: the kernel lacks what `tc {cmd}` needs: {err}");
        return false;
    }
    assert!(o.status.success(), "tc -n {ns} {cmd}: {err}");
    true
}

/// The same policy on a kernel veth pair (the kernel's own tc on `dev va`)
/// and on a sluice link (`sluice tc -n LINK` on `dev a0`), one after the
/// other; on each, simultaneous bulk TCP flows to `ports` for 7 s (the
/// last 5 measured). `tree` gives the tc command lines for a device.
/// Returns the goodputs per flow, kernel's first; `None`: the kernel
/// cannot run the policy here.
fn kernel_and_sluice(
    what: &str,
    tree: &dyn Fn(&str) -> Vec<String>,
    ports: &[u16],
    window: Option<usize>,
) -> Option<(Vec<f64>, Vec<f64>)> {
    let pid = std::process::id();
    let kernel = {
        let veth = traffic::VethPair::new(&format!("lv{pid}{what}v"), (pid % 250 + 1) as u8)
            .expect("veth pair");
        for cmd in tree("va") {
            if !kernel_tc(&veth.ns('a'), &cmd) {
                return None;
            }
        }
        let g = parallel_goodputs(&veth.path(), ports, 7.0, window);
        for kind in ["qdisc", "class"] {
            let o = Command::new("tc")
                .args(["-s", "-n", &veth.ns('a'), kind, "show", "dev", "va"])
                .output()
                .expect("tc");
            eprintln!("kernel {what}:\n{}", String::from_utf8_lossy(&o.stdout));
        }
        g
    };
    let l = link(what);
    l.up(&[]);
    for cmd in tree("a0") {
        let mut args = vec!["tc", "-n", &l.name];
        args.extend(cmd.split(' '));
        l.ok(&args);
    }
    let sluice = parallel_goodputs(&l.path(), ports, 7.0, window);
    for kind in ["qdisc", "class"] {
        eprintln!(
            "sluice {what}:\n{}",
            l.ok(&["tc", "-s", "-n", &l.name, kind, "show", "dev", "a0"])
        );
    }
    Some((kernel, sluice))
}

/// The HTB tree of the side-by-side test: 20 Mbit/s in all; class 1:10
/// (rate 12, ceil 20, prio 0) and class 1:20 (rate 4, ceil 20, prio 1),
/// u32 filters sending TCP to port 5301 into 1:10 and to 5302 into 1:20.
/// Both busy, each gets its rate and the spare 4 Mbit/s goes to the class
/// of the lower prio, so the kernel's shares are about 80 % and 20 %.
fn htb_two_classes(dev: &str) -> Vec<String> {
    [
        "qdisc add dev DEV root handle 1: htb default 20",
        "class add dev DEV parent 1: classid 1:1 htb rate 20mbit ceil 20mbit",
        "class add dev DEV parent 1:1 classid 1:10 htb rate 12mbit ceil 20mbit prio 0",
        "class add dev DEV parent 1:1 classid 1:20 htb rate 4mbit ceil 20mbit prio 1",
        "filter add dev DEV parent 1: protocol ip prio 1 u32 match ip dport 5301 0xffff flowid 1:10",
        "filter add dev DEV parent 1: protocol ip prio 1 u32 match ip dport 5302 0xffff flowid 1:20",
    ]
    .iter()
    .map(|c| c.replace("DEV", dev))
    .collect()
}

#[test]
fn htb_with_two_classes_shares_like_the_kernels_within_3_percent() {
    require!("tc");
    if !kernel_tc_here() {
        eprintln!("SKIPPED: `tc` on PATH is not iproute2's");
        return;
    }
    let _g = heavy();
    let Some((kernel, sluice)) =
        kernel_and_sluice("hk", &htb_two_classes, &[5301, 5302], window_for(20e6))
    else {
        return;
    };
    let share = |g: &[f64]| g[0] / (g[0] + g[1]);
    let (k, s) = (share(&kernel), share(&sluice));
    eprintln!(
        "htb side by side: kernel 1:10 {:.3} + 1:20 {:.3} Mbit/s (share {:.1}%), sluice {:.3} + {:.3} Mbit/s (share {:.1}%): {:+.2} points",
        kernel[0] / 1e6,
        kernel[1] / 1e6,
        k * 100.0,
        sluice[0] / 1e6,
        sluice[1] / 1e6,
        s * 100.0,
        (s - k) * 100.0
    );
    // The kernel's figures show the tree at work (the filters classify,
    // prio sends the spare to 1:10); otherwise the comparison proves nothing.
    assert!((0.7..=0.9).contains(&k), "the kernel's 1:10 share {k}");
    assert!(
        (s - k).abs() <= 0.03,
        "sluice's share {s} vs the kernel's {k}"
    );
}

#[test]
fn tbf_total_matches_the_kernels_within_3_percent() {
    require!("tc");
    if !kernel_tc_here() {
        eprintln!("SKIPPED: `tc` on PATH is not iproute2's");
        return;
    }
    let _g = heavy();
    // The rate matrix's tbf (a 10 kB burst, a 100 ms queue), two flows.
    // The kernel's veth counts each packet's 14-byte Ethernet header
    // against the rate and sluice's TUN device has none, so sluice's
    // goodput is 1514/1500 of the kernel's, 0.9 % more, at the same rate.
    let tree = |dev: &str| {
        vec![format!(
            "qdisc add dev {dev} root tbf rate 20mbit burst 10000 latency 100ms"
        )]
    };
    let Some((kernel, sluice)) = kernel_and_sluice("tk", &tree, &[5311, 5312], window_for(20e6))
    else {
        return;
    };
    let (k, s) = (kernel[0] + kernel[1], sluice[0] + sluice[1]);
    eprintln!(
        "tbf side by side: kernel {:.3} + {:.3} = {:.3} Mbit/s, sluice {:.3} + {:.3} = {:.3} Mbit/s: {:+.2}%",
        kernel[0] / 1e6,
        kernel[1] / 1e6,
        k / 1e6,
        sluice[0] / 1e6,
        sluice[1] / 1e6,
        s / 1e6,
        (s / k - 1.0) * 100.0
    );
    assert!(
        (s / k - 1.0).abs() <= 0.03,
        "sluice's total {s} vs the kernel's {k}"
    );
}

/// The repository's copy of the LARTC HOWTO's HTB conditioner
/// (examples/ultimate-traffic-conditioner-htb.sh).
fn conditioner_htb_script() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ultimate-traffic-conditioner-htb.sh");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Run a shell script as an unmodified tc script runs on a router: bash,
/// with a `tc` that is sluice first on PATH and `SLUICE_NETNS` naming the
/// link, so every `tc ... dev a0 ...` line reaches the running daemon.
/// Returns what the script wrote to stderr.
fn run_tc_script(l: &Link, script: &str) -> String {
    use std::io::Write;
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(EXE, bin.path().join("tc")).expect("symlink tc");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-s")
        .env("PATH", path)
        .env("SLUICE_NETNS", &l.name)
        .env("SLUICE_STATE_DIR", l.state.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bash");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write the script");
    let o = child.wait_with_output().expect("bash");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// RTTs in ms of pings from side a to side b during an upload (bulk TCP
/// a→b with the 128 KiB socket buffers of the HOWTO's era and a loss-based
/// congestion control, cubic, as Linux's default is and the HOWTO's era's
/// was; a default of bbr, as some distributions set, keeps the queue short by itself): the
/// upload runs 12 s; 30 echoes go 200 ms apart from its fourth second on,
/// when the upload has filled whatever queue it can.
fn rtts_during_upload(l: &Link) -> Vec<f64> {
    let path = l.path();
    let upload = std::thread::spawn(move || {
        let run = traffic::TcpRun {
            port: 5320,
            secs: 12.0,
            warm: 4.0,
            rcvbuf: Some(128 << 10),
            urgent: true,
            congestion: Some("cubic"),
        };
        traffic::tcp_goodput(&path, run)
    });
    std::thread::sleep(Duration::from_secs(4));
    let addr = l.addr_b().parse().expect("address");
    let rtts: Vec<f64> = traffic::icmp_rtts(&l.ns('a'), addr, 30, Duration::from_millis(200), 56)
        .expect("ICMP probe")
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let goodput = upload.join().expect("upload").expect("bulk TCP");
    eprintln!("upload goodput {:.1} kbit/s", goodput / 1e3);
    rtts
}

#[test]
fn lartc_htb_conditioner_keeps_pings_under_100ms_during_an_upload() {
    require!("bash");
    let _g = light();
    // The HOWTO's ADSL line: 256 kbit/s up, 1000 kbit/s down, 7 ms each way,
    // a modem buffering 64000 bytes (2 s at 256 kbit/s) in front of the uplink.
    let line = [
        "--rate-ab",
        "256kbit",
        "--rate-ba",
        "1000kbit",
        "--delay",
        "7ms",
        "--buffer-ab",
        "64000b",
    ];
    let (bare, shaped) = (link("ub"), link("uc"));
    bare.up(&line);
    shaped.up(&line);
    // The script unchanged but for its parameter DEV (the router's ppp0 is
    // the link's a0); UPLINK=220 and DOWNLINK=800 already sit "somewhat
    // less" than this line's 256 and 1000 kbit/s, as the script asks.
    let script = conditioner_htb_script();
    assert!(
        script.contains("\nDEV=ppp0\n"),
        "the script's DEV parameter"
    );
    let errors = run_tc_script(&shaped, &script.replace("\nDEV=ppp0\n", "\nDEV=a0\n"));
    assert!(errors.is_empty(), "the script failed: {errors}");
    let qdiscs = shaped.ok(&["tc", "-n", &shaped.name, "qdisc", "show", "dev", "a0"]);
    for q in [
        "qdisc htb 1: root",
        "qdisc sfq 10: parent 1:10",
        "qdisc sfq 20: parent 1:20",
        "qdisc ingress ffff:",
    ] {
        assert!(qdiscs.contains(q), "no {q:?} in:\n{qdiscs}");
    }
    // Both uploads at once: at 256 kbit/s they take next to no CPU.
    let shaped_rtts = {
        let shaped = &shaped;
        std::thread::scope(|s| {
            let h = s.spawn(|| rtts_during_upload(shaped));
            let bare_rtts = rtts_during_upload(&bare);
            (bare_rtts, h.join().expect("shaped upload"))
        })
    };
    let (bare_rtts, shaped_rtts) = shaped_rtts;
    let stats = |r: &[f64]| {
        let mean = r.iter().sum::<f64>() / r.len() as f64;
        let max = r.iter().cloned().fold(0.0, f64::max);
        let min = r.iter().cloned().fold(f64::INFINITY, f64::min);
        (min, mean, max)
    };
    let (b, c) = (stats(&bare_rtts), stats(&shaped_rtts));
    eprintln!(
        "ultimate traffic conditioner, live: ping min/avg/max during an upload {:.1}/{:.1}/{:.1} ms ({} echoes) without the conditioner, {:.1}/{:.1}/{:.1} ms ({} echoes) with its HTB script (the HOWTO: 2041/2332/2428 and 15.7/51.8/79.9)",
        b.0, b.1, b.2, bare_rtts.len(), c.0, c.1, c.2, shaped_rtts.len()
    );
    eprintln!(
        "{}",
        shaped.ok(&["tc", "-s", "-n", &shaped.name, "class", "show", "dev", "a0"])
    );
    // Without it the modem's 2 s buffer fills (echoes slower than a second
    // are not waited for, so they are missing, not counted).
    assert!(
        bare_rtts.len() >= 10,
        "echoes lost without the conditioner: {bare_rtts:?}"
    );
    assert!(
        b.1 >= 1000.0,
        "no bufferbloat without the conditioner: {bare_rtts:?}"
    );
    // With it, as in the HOWTO (avg 51.8 ms) and the simulator's
    // ultimate-traffic-conditioner scenario.
    assert!(
        shaped_rtts.len() >= 29,
        "echoes lost with the conditioner: {shaped_rtts:?}"
    );
    assert!(
        c.1 < 100.0,
        "mean RTT {} ms with the conditioner: {shaped_rtts:?}",
        c.1
    );
}

/// Packets the link's daemon has delivered a→b (`sluice link status`).
fn delivered_ab(l: &Link, name: &str) -> u64 {
    let status = l.ok(&["link", "status", name]);
    let v: serde_json::Value = serde_json::from_str(&status).expect("status json");
    v["a_to_b"]["plane"]["delivered"].as_u64().unwrap_or(0)
}

/// SIGKILL `pid` and wait until it is gone (or a zombie).
fn kill_9(pid: i32) {
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true)
    }));
}

/// The iptables rules (nat and filter) tagged for link `name`.
fn nat_rules_of(name: &str) -> Vec<String> {
    let tag = format!("sluice:{name}");
    ["nat", "filter"]
        .iter()
        .flat_map(|t| {
            let o = Command::new("iptables")
                .args(["-t", t, "-S"])
                .output()
                .expect("iptables");
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.split_whitespace().any(|w| w.trim_matches('"') == tag))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Start a 64-byte UDP flood along `path` for 3 s on a thread.
fn flood(
    path: traffic::Endpoints,
    port: u16,
) -> std::thread::JoinHandle<Result<traffic::UdpRate, String>> {
    std::thread::spawn(move || traffic::udp_flood(&path, port, 64, (3.0, 0.0), false))
}

#[test]
fn kill_9_during_a_udp_flood_then_down_or_list_leave_nothing_behind() {
    require!("iptables");
    let _g = heavy();
    // A link, killed while a flood runs through it; `link down` cleans up.
    let l = link("f");
    l.up(&[]);
    let pid = l.pid();
    let f = flood(l.path(), 5330);
    assert!(
        wait_until(Duration::from_secs(2), || delivered_ab(&l, &l.name) > 1000),
        "the flood does not pass"
    );
    eprintln!("link: killed after {} datagrams", delivered_ab(&l, &l.name));
    kill_9(pid);
    // The TUN devices go with the daemon's descriptors. The flood goes on for the rest of its 3 s (into a namespace whose
    // a0 is going); when it ends, so has a0. (The kernel unregisters the
    // TUN device of a killed process in its exit, behind an RCU barrier
    // that a flood busy on both CPUs holds up until it ends: a0 lingered
    // up to 2.7 s after the kill, never after the flood.)
    let rate = f.join().expect("flood").expect("UDP flood");
    let a0_gone = || {
        !Command::new("ip")
            .args(["-n", &l.ns('a'), "link", "show", "a0"])
            .output()
            .expect("ip")
            .status
            .success()
    };
    let t = Instant::now();
    assert!(
        wait_until(Duration::from_secs(3), a0_gone),
        "a0 outlives its daemon"
    );
    eprintln!(
        "link flood: sent {:.0} datagrams/s for 3 s; a0 gone {:?} after it",
        rate.sent_pps,
        t.elapsed()
    );
    assert!(
        netns_exists(&l.ns('a')),
        "the namespaces outlive a killed daemon"
    );
    l.ok(&["link", "down", &l.name]);
    assert!(!netns_exists(&l.ns('a')) && !netns_exists(&l.ns('b')) && !l.record().exists());

    // A `sluice shell` (NAT rules, a TUN device in the host's namespace),
    // its daemon killed while the shell's namespace floods the host;
    // `link list` cleans up.
    let state = private_dir();
    let mut shell = Command::new(EXE)
        .args(["shell", "--", "sleep", "60"])
        .env("SLUICE_STATE_DIR", state.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sluice shell");
    let name = format!("shell{}", shell.id());
    // Its first line says the link is up; the rest is read to the end (a
    // closed pipe would make its later messages fail).
    let said = {
        use std::io::{BufRead, Read};
        let mut err = std::io::BufReader::new(shell.stderr.take().expect("stderr"));
        let mut line = String::new();
        let _ = err.read_line(&mut line);
        assert!(
            line.contains(&format!("link {name}")),
            "sluice shell: {line}"
        );
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            rest
        })
    };
    let links = Link {
        name: name.clone(),
        state,
    };
    let text = std::fs::read_to_string(links.record()).expect("record");
    let rec: serde_json::Value = serde_json::from_str(&text).expect("json");
    let host_if = rec["spec"]["b"]["ifname"]
        .as_str()
        .expect("ifname")
        .to_string();
    let host_addr = rec["spec"]["b"]["addr"].as_str().expect("addr");
    let host_addr = host_addr
        .split('/')
        .next()
        .unwrap_or(host_addr)
        .parse()
        .expect("address");
    assert!(
        !nat_rules_of(&name).is_empty(),
        "the shell made no NAT rules"
    );
    let f = flood(
        traffic::Endpoints {
            from: format!("{name}-a"),
            to: String::new(),
            addr: host_addr,
        },
        5331,
    );
    assert!(
        wait_until(Duration::from_secs(2), || delivered_ab(&links, &name)
            > 1000),
        "the flood does not pass"
    );
    eprintln!(
        "shell: killed after {} datagrams",
        delivered_ab(&links, &name)
    );
    kill_9(links.pid());

    let rate = f.join().expect("flood").expect("UDP flood");
    eprintln!("shell flood: sent {:.0} datagrams/s for 3 s", rate.sent_pps);
    let o = links.sluice(&["link", "list"]);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains(&format!("removed the leftovers of link {name}")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !netns_exists(&format!("{name}-a")),
        "the shell's namespace is left"
    );
    assert!(!links.record().exists());
    let left = nat_rules_of(&name);
    assert!(left.is_empty(), "NAT rules left: {left:?}");
    let t = Instant::now();
    assert!(
        wait_until(Duration::from_secs(3), || !Path::new("/sys/class/net")
            .join(&host_if)
            .exists()),
        "{host_if} outlives its daemon"
    );
    eprintln!("{host_if} gone {:?} after the clean-up", t.elapsed());
    // The shell's command still runs (in its now nameless namespace); when
    // it ends the shell finds its link gone and exits with its status.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", shell.id()))
        .unwrap_or_default();
    for child in children.split_whitespace() {
        let child: i32 = child.parse().expect("pid");
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    let status = shell.wait().expect("sluice shell");
    let said = said.join().expect("stderr");
    assert_eq!(
        status.code(),
        Some(128 + 9),
        "sluice shell's status: {said}"
    );
    // `links` is dropped: `link down` of a link that is gone, harmlessly.
}

// ---- Live iptables: `sluice iptables -n LINK` and the plane's OUTPUT/POSTROUTING hooks ----

/// The packets a `tc -s class show` block for `class` says were sent.
fn class_sent_packets(stats: &str, class: &str) -> u64 {
    let at = stats
        .find(&format!("class htb {class} "))
        .unwrap_or_else(|| panic!("no class {class}: {stats}"));
    stats[at..]
        .split("Sent ")
        .nth(1)
        .and_then(|s| s.split(" pkt").next())
        .and_then(|s| s.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counters for {class}: {stats}"))
}

/// The packet counter of rule `num` in an `iptables -L -v -n -x --line-numbers` listing.
fn rule_packets(listing: &str, num: u32) -> u64 {
    listing
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(&num.to_string())).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no rule {num}: {listing}"))
}

#[test]
fn live_iptables_marks_classify_real_packets_through_a_fw_filter() {
    require!("ping");
    let _g = light();
    let l = link("ipm");
    l.up(&[]);
    for cmd in [
        "qdisc add dev a0 root handle 1: htb default 10",
        "class add dev a0 parent 1: classid 1:10 htb rate 100mbit",
        "class add dev a0 parent 1: classid 1:20 htb rate 100mbit",
        "filter add dev a0 parent 1: protocol ip handle 2 fw flowid 1:20",
    ] {
        let mut args = vec!["tc", "-n", &l.name];
        args.extend(cmd.split(' '));
        l.ok(&args);
    }
    let mark = "-t mangle -A POSTROUTING -o a0 -p icmp -j MARK --set-mark 2";
    let mut args = vec!["iptables", "-n", &l.name];
    args.extend(mark.split(' '));
    l.ok(&args);
    let r = l.ping(10, "0.02");
    assert_eq!(r.len(), 10, "pings lost: {r:?}");
    // The ten echo requests went into the marked class (anything else
    // side a sends, such as IPv6 router solicitations, into 1:10).
    let stats = l.ok(&["tc", "-s", "-n", &l.name, "class", "show", "dev", "a0"]);
    assert_eq!(class_sent_packets(&stats, "1:20"), 10, "{stats}");
    let mut args = vec!["iptables", "-n", &l.name];
    args.extend("-t mangle -L POSTROUTING -v -n -x --line-numbers".split(' '));
    let listing = l.ok(&args);
    assert_eq!(rule_packets(&listing, 1), 10, "{listing}");
    // `ip -n LINK link show` shows the live devices and the root qdisc.
    let shown = l.ok(&["ip", "-n", &l.name, "link", "show", "dev", "a0"]);
    assert!(
        shown.contains(
            "a0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc htb state UNKNOWN"
        ),
        "{shown}"
    );
    // Nothing was written to the offline namespace of that name.
    let log = l.state.path().join("netns").join(format!("{}.log", l.name));
    assert!(!log.exists(), "{} was written", log.display());
}

#[test]
fn live_iptables_drop_drops_pings_and_counts_them() {
    require!("ping");
    let _g = light();
    let l = link("ipd");
    l.up(&[]);
    let ipt = |words: &str| {
        let mut args = vec!["iptables", "-n", &l.name];
        args.extend(words.split(' '));
        l.ok(&args)
    };
    ipt("-A OUTPUT -o a0 -p icmp -j DROP");
    let r = l.ping(5, "0.02");
    assert!(r.is_empty(), "pings passed a DROP rule: {r:?}");
    let listing = ipt("-L OUTPUT -v -n -x --line-numbers");
    assert_eq!(rule_packets(&listing, 1), 5, "{listing}");
    // Deleted, the rule no longer acts; the link's status counts the drops.
    ipt("-D OUTPUT 1");
    let r = l.ping(5, "0.02");
    assert_eq!(r.len(), 5, "pings lost after the DROP rule went: {r:?}");
    let status = l.ok(&["link", "status", &l.name]);
    assert!(status.contains("\"netfilter_drops\": 5"), "{status}");
}

#[test]
fn dash_n_of_an_unknown_link_is_the_offline_namespace_for_iptables_and_ip() {
    // No link named so runs: `-n` is the state directory's namespace, as for tc.
    let l = link("ipo");
    l.ok(&["iptables", "-n", &l.name, "-A", "OUTPUT", "-j", "DROP"]);
    let rules = l.ok(&["iptables", "-n", &l.name, "-S", "OUTPUT"]);
    assert_eq!(rules, "-P OUTPUT ACCEPT\n-A OUTPUT -j DROP\n");
    // The offline namespace's files (whatever their form) hold it.
    let dir = l.state.path().join("netns");
    let kept = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{}.", l.name))
        });
    assert!(kept, "no offline namespace {} in {}", l.name, dir.display());
    let shown = l.ok(&["ip", "-n", &l.name, "link", "show"]);
    assert!(shown.contains("lo: ") && !shown.contains("a0: "), "{shown}");
}

/// Ten clients that connect to a link's control socket and send nothing,
/// and one that sends a request larger than the daemon takes, must not hold
/// up the link's packets: the control socket is served off the packet path.
/// Echoes 10 ms apart run through the link meanwhile; a packet thread that
/// waited on the clients (200 ms each, as it once did) would hold them for
/// two seconds, so the bound below is generous for a loaded machine and
/// still far from that.
#[test]
fn idle_control_clients_do_not_stall_the_packets() {
    require!();
    let _g = light();
    let l = link("ic");
    l.up(&[]);
    let sock = l
        .state
        .path()
        .join("links")
        .join(format!("{}.sock", l.name));
    let (ns, addr) = (l.ns('a'), l.addr_b().parse().expect("address"));
    let probe = std::thread::spawn(move || {
        traffic::icmp_rtts(&ns, addr, 300, Duration::from_millis(10), 56)
    });
    std::thread::sleep(Duration::from_millis(500));
    let idle: Vec<std::os::unix::net::UnixStream> = (0..10)
        .map(|_| std::os::unix::net::UnixStream::connect(&sock).expect("connect"))
        .collect();
    let big = {
        let sock = sock.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            use std::io::Write;
            let mut s = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
            // 17 MiB of one unfinished line: over the 16 MiB a request may take.
            let chunk = vec![b'x'; 1 << 20];
            let _ = (0..17).try_for_each(|_| s.write_all(&chunk));
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            answer
        })
    };
    // A request is answered while they are held.
    let status = l.sluice(&["link", "status", &l.name]);
    assert!(
        status.status.success(),
        "link status with idle clients: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::thread::sleep(Duration::from_millis(1500));
    drop(idle);
    let answer = big.join().expect("oversize client");
    assert!(
        answer.contains("sluice: control request larger than 16777216 bytes"),
        "the answer to 17 MiB of request: {answer:?}"
    );
    let rtts = probe.join().expect("probe").expect("echoes");
    let worst = rtts.iter().max().copied().unwrap_or_default();
    eprintln!("{} of 300 echoes, the slowest {worst:?}", rtts.len());
    assert!(rtts.len() >= 295, "echoes lost: {} of 300", rtts.len());
    assert!(
        worst < Duration::from_millis(250),
        "an echo waited {worst:?}: the packets stalled behind the control clients"
    );
}

/// A wire flag whose value rounds to nothing, is negative or overflows is
/// refused before anything is made (no root needed: the flags are read
/// first). A rate is rounded down to whole bytes/s as tc's `get_rate64`
/// does, so under 8 bit/s it is 0, which would otherwise be taken for "no
/// limit"; the wording is tbf's for an illegal value.
#[test]
fn wire_flags_that_round_to_zero_go_negative_or_overflow_are_refused() {
    let l = link("w0");
    // (A value starting with '-' goes after '=', or it reads as a flag.)
    for (flags, why) in [
        (
            &["--rate", "7bit"][..],
            "\"--rate\": \"7bit\": it rounds to 0 bytes/s",
        ),
        (
            &["--rate", "0.5Bps"],
            "\"--rate\": \"0.5Bps\": it rounds to 0 bytes/s",
        ),
        (
            &["--rate-ab", "0"],
            "\"--rate-ab\": \"0\": it rounds to 0 bytes/s",
        ),
        (
            &["--rate", "10mbit", "--rate-ba", "1bit"],
            "\"--rate-ba\": \"1bit\": it rounds to 0",
        ),
        (
            &["--rate=-8bit"],
            "\"--rate\": \"-8bit\": a rate cannot be negative",
        ),
        (
            &["--rate", "1e30bit"],
            "\"--rate\": \"1e30bit\": more than 4294967294mbit",
        ),
        (&["--rate", "inf"], "\"--rate\": \"inf\": more than"),
        (
            &["--rate", "10furlongs"],
            "\"--rate\": \"10furlongs\": not a rate",
        ),
        (
            &["--delay=-1ms"],
            "\"--delay\": \"-1ms\": a delay cannot be negative",
        ),
        (
            &["--delay-ab", "1e30s"],
            "\"--delay-ab\": \"1e30s\": out of range",
        ),
        (
            &["--buffer", "0p"],
            "\"--buffer\": \"0p\": a buffer holds at least 1 packet",
        ),
        (&["--buffer=-1p"], "\"--buffer\": \"-1p\": N packets"),
        (
            &["--buffer", "0.4b"],
            "\"--buffer\": \"0.4b\": a buffer holds at least 1 byte",
        ),
        (
            &["--buffer-ba", "5gb"],
            "\"--buffer-ba\": \"5gb\": N packets",
        ),
        (
            &["--loss", "nan"],
            "\"--loss\": \"nan\": a percentage, 0 to 100",
        ),
        (
            &["--loss=-1%"],
            "\"--loss\": \"-1%\": a percentage, 0 to 100",
        ),
    ] {
        let mut args = vec!["link", "up", &l.name];
        args.extend(flags);
        let o = l.sluice(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            err.starts_with("sluice link: illegal value for ") && err.contains(why),
            "{flags:?}: {err}"
        );
        assert!(
            !l.record().exists() && !netns_exists(&l.ns('a')),
            "{flags:?} made something"
        );
        // The same flags of `sluice shell`.
        let mut args = vec!["shell"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let o = l.sluice(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "shell {flags:?}: {err}");
        assert!(err.contains(why), "shell {flags:?}: {err}");
    }
}
