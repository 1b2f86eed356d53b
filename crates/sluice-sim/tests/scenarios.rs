//! The simulator against physics, against its own determinism, and against
//! the expectations each bundled scenario states (examples/*.toml).

use sluice_sim::report::{check, metric, RunResult};
use sluice_sim::run::{build, run, run_all};
use sluice_sim::scenario::Scenario;
use sluice_sim::world::Census;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn no_overrides() -> BTreeMap<String, String> {
    BTreeMap::new()
}

#[test]
fn every_bundled_scenario_meets_its_stated_expectations() {
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(examples())
        .expect("examples/")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
    {
        let sc = Scenario::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert!(
            !sc.expects.is_empty(),
            "{}: a bundled scenario states what it should show",
            path.display()
        );
        if sc.nodes.iter().any(|n| n.script.is_some()) {
            continue; // needs bash and the binary: crates/sluice/tests/sim.rs checks it
        }
        let runs = run_all(&sc, &no_overrides(), None, false, None).unwrap();
        let (lines, ok) = check(&sc.expects, &runs);
        for l in &lines {
            eprintln!("{}: {l}", sc.name);
        }
        assert!(
            ok,
            "{}: expectations failed:\n{}",
            sc.name,
            lines.join("\n")
        );
        checked += lines.len();
    }
    assert!(checked > 0);
}

/// A two-host path: sender -- RATE, DELAY -- router -- 1 Gbit/s -- receiver.
fn path(rate: &str, delay: &str, qdisc: &str, loss: f64, workloads: &str, seed: u64) -> Scenario {
    Scenario::parse(&format!(
        r#"
        name = "path"
        duration = "20s"
        seed = {seed}
        [[node]]
        name = "s"
        addr = "10.0.0.1"
        tc = ["tc qdisc replace dev eth0 root {qdisc}"]
        [[node]]
        name = "r"
        addr = "10.0.0.254"
        router = true
        [[node]]
        name = "d"
        addr = "10.0.1.1"
        [[link]]
        a = "s:eth0"
        b = "r:eth0"
        rate = "{rate}"
        delay = "{delay}"
        buffer = "1p"
        loss = {loss}
        [[link]]
        a = "r:eth1"
        b = "d:eth0"
        rate = "1gbit"
        buffer = "1000p"
        {workloads}
        "#
    ))
    .unwrap()
}

fn one_run(sc: &Scenario) -> RunResult {
    run(
        build(sc, &sc.vars_for(None, &no_overrides())).unwrap(),
        "default",
        false,
    )
}

#[test]
fn a_single_flow_on_an_empty_path_gets_the_bottleneck_rate() {
    let sc = path("10mbit", "10ms", "pfifo limit 1000", 0.0, "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"\nsndbuf = \"4MiB\"\nrcvbuf = \"4MiB\"", 1);
    let r = one_run(&sc);
    let payload_rate = 10.0 * 1448.0 / 1514.0; // Mbit/s of payload in 1514-byte frames
    let g = r.total_goodput_mbps();
    assert!(
        g > 0.95 * payload_rate && g < payload_rate,
        "goodput {g} vs {payload_rate}"
    );
}

/// A download from s to d over a 10 Mbit/s path whose nodes run the tc
/// lines given (TOML strings), shaped by a TBF of 2 Mbit/s on an ifb device
/// one of them redirects to: held to 2 Mbit/s of frames (1448/1514 of it
/// payload), and the census accounts for every packet, the redirected ones
/// included, none lost to mirred. Returns the census.
fn held_to_2mbit_through_ifb0(s_tc: &str, d_tc: &str) -> Census {
    let sc = Scenario::parse(&format!(
        r#"
        name = "ifb"
        duration = "20s"
        seed = 1
        [[node]]
        name = "s"
        addr = "10.0.0.1"
        tc = [{s_tc}]
        [[node]]
        name = "d"
        addr = "10.0.1.1"
        tc = [{d_tc}]
        [[link]]
        a = "s:eth0"
        b = "d:eth0"
        rate = "10mbit"
        delay = "10ms"
        buffer = "100p"
        [[workload]]
        type = "tcp"
        from = "s"
        to = "d"
        name = "f"
        "#
    ))
    .unwrap();
    let mut b = build(&sc, &sc.vars_for(None, &no_overrides())).unwrap();
    b.world.run_until(b.duration);
    let c = b.world.census();
    assert_eq!(
        c.entered + c.cut,
        c.qdisc_dropped + c.ring_dropped + c.queued + c.transmitted + c.stolen,
        "{c:?}"
    );
    assert_eq!(
        c.transmitted,
        c.wire_lost + c.in_flight + c.arrived,
        "{c:?}"
    );
    assert_eq!(b.world.losses.mirred, 0, "{:?}", b.world.losses);
    let r = run(b, "default", false);
    // Payload of 2 Mbit/s of 1514-byte frames, plus at most the 10 kB
    // bucket the TBF starts with, over the whole 20 s.
    let payload = 2.0 * 1448.0 / 1514.0;
    let most = payload + 10_000.0 * 8.0 / 20.0 / 1e6;
    let g = r.flows[0].bytes as f64 * 8.0 / 20.0 / 1e6;
    assert!(
        g > 0.95 * payload && g <= most,
        "goodput {g} vs {payload}..{most}"
    );
    c
}

const IFB0_AT_2MBIT: &str = r#""ip link add ifb0 type ifb", "ip link set dev ifb0 up",
    "tc qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms""#;

/// The common way to shape what a host receives: its ingress redirected
/// by mirred to an ifb device whose egress qdisc shapes.
#[test]
fn ingress_shaping_through_an_ifb_device_holds_a_download_to_the_rate() {
    let d = format!(
        r#"{IFB0_AT_2MBIT}, "tc qdisc add dev eth0 handle ffff: ingress",
        "tc filter add dev eth0 parent ffff: protocol ip matchall action mirred egress redirect dev ifb0""#
    );
    // Taken at an ingress, not at a qdisc: nothing counts as stolen.
    assert_eq!(held_to_2mbit_through_ifb0("", &d).stolen, 0);
}

/// The same on the way out: eth0's root qdisc redirects to ifb0, whose
/// qdisc shapes and sends the packets back out of eth0, where the filter's
/// action is skipped once (`tc_skip_classify`) so they leave instead of
/// going round again.
#[test]
fn egress_shaping_through_an_ifb_device_holds_an_upload_to_the_rate() {
    let s = format!(
        r#"{IFB0_AT_2MBIT}, "tc qdisc add dev eth0 root handle 1: prio",
        "tc filter add dev eth0 parent 1: protocol ip matchall action mirred egress redirect dev ifb0""#
    );
    // Each packet s sends is taken once by eth0's root (an egress action
    // steals it) before it comes back and leaves.
    let c = held_to_2mbit_through_ifb0(&s, "");
    assert!(c.stolen > 1000, "{c:?}");
}

#[test]
fn queueing_delay_is_backlog_over_rate() {
    // 2x overload of a 1 Mbit/s link into a 50-packet fifo: the queue stays
    // full, so a ping waits behind 50 packets of 1028 bytes (+14): 50 * 1042 * 8 / 1e6 s.
    let w = r#"
        [[workload]]
        type = "udp"
        from = "s"
        to = "d"
        rate = "2mbit"
        size = 1000
        [[workload]]
        type = "ping"
        name = "p"
        from = "s"
        to = "d"
        interval = "200ms"
        start = "2s"
        "#;
    let sc = path("1mbit", "5ms", "pfifo limit 50", 0.0, w, 1);
    let r = one_run(&sc);
    let queue_ms = 50.0 * 1042.0 * 8.0 / 1e6 * 1e3;
    let p = &r.pings[0];
    assert!(
        (p.median_ms - (queue_ms + 10.0)).abs() < 0.1 * queue_ms,
        "median {} vs {}",
        p.median_ms,
        queue_ms + 10.0
    );
    // The link carries its rate: 1 Mbit/s of 1042-byte frames holding 1028-byte IP packets.
    let udp = r.flows.iter().find(|f| f.kind == "udp").unwrap();
    assert!(
        (udp.goodput_mbps - 1028.0 / 1042.0).abs() < 0.03,
        "udp {}",
        udp.goodput_mbps
    );
    // iperf's loss: the link carries 1e6 / (1042 * 8) datagrams a second of
    // the 2e6 / (1028 * 8) sent; the last ~50 still queued count as lost too.
    let carried = (1e6 / (1042.0 * 8.0)) / (2e6 / (1028.0 * 8.0));
    let loss = udp.loss_pct.unwrap();
    let (sent, received) = udp.datagrams.unwrap();
    assert!(
        (loss - 100.0 * (1.0 - carried)).abs() < 2.5,
        "loss {loss}% of {sent}, expected {}",
        100.0 * (1.0 - carried)
    );
    assert!(received < sent && sent > 4500, "{sent} {received}");
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\ncount = 2\n[[workload]]\ntype = \"ping\"\nfrom = \"s\"\nto = \"d\"\ninterval = \"50ms\"";
    let json = |seed| {
        serde_json::to_string(&one_run(&path(
            "5mbit",
            "20ms",
            "pfifo_fast",
            0.01,
            w,
            seed,
        )))
        .unwrap()
    };
    let (a, b, c) = (json(7), json(7), json(8));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn every_packet_is_delivered_dropped_or_still_queued() {
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\ncount = 3\n[[workload]]\ntype = \"udp\"\nfrom = \"s\"\nto = \"d\"\nrate = \"3mbit\"";
    let sc = path("2mbit", "10ms", "pfifo limit 20", 0.02, w, 3);
    let mut b = build(&sc, &sc.vars_for(None, &no_overrides())).unwrap();
    b.world.run_until(b.duration);
    let c = b.world.census();
    assert!(
        c.qdisc_dropped > 0 && c.wire_lost > 0,
        "the test needs drops of both kinds: {c:?}"
    );
    assert_eq!(
        c.entered + c.cut,
        c.qdisc_dropped + c.ring_dropped + c.queued + c.transmitted + c.stolen,
        "{c:?}"
    );
    assert_eq!(
        c.transmitted,
        c.wire_lost + c.in_flight + c.arrived,
        "{c:?}"
    );
}

/// The result's egress drop count is every packet an egress qdisc or ring
/// lost: those refused at enqueue and those an AQM accepted and dropped
/// later (CoDel drops at dequeue; fq_codel sheds its fattest flow), which
/// the report once left out (found comparing the dumbbell against ns-3).
#[test]
fn egress_drops_count_what_aqms_drop_after_enqueue() {
    let text = std::fs::read_to_string(examples().join("dumbbell.toml")).unwrap();
    let sc = Scenario::parse(&text).unwrap();
    for variant in ["pfifo_100", "fq_codel"] {
        let v = sc.variants.iter().find(|v| v.name == variant).unwrap();
        let mut b = build(&sc, &sc.vars_for(Some(v), &no_overrides())).unwrap();
        b.world.run_until(b.duration);
        let c = b.world.census();
        assert!(
            c.qdisc_dropped > 0,
            "{variant}: the test needs drops: {c:?}"
        );
        assert_eq!(
            b.world.losses.egress,
            c.qdisc_dropped + c.ring_dropped,
            "{variant}: {c:?}"
        );
    }
}

#[test]
fn absurd_numbers_are_errors_not_panics() {
    // Found by the scenario_parser fuzz target: rates that overflow bits/s.
    let inf = path("infbit", "1ms", "pfifo", 0.0, "", 1);
    assert!(build(&inf, &inf.vars_for(None, &no_overrides())).is_err());
    let flood = path(
        "1mbit",
        "1ms",
        "pfifo",
        0.0,
        "[[workload]]\ntype = \"udp\"\nfrom = \"s\"\nto = \"d\"\nrate = \"1e30bit\"",
        1,
    );
    assert!(build(&flood, &flood.vars_for(None, &no_overrides())).is_err());
    // A stagger that would overflow virtual time is beyond any time a
    // scenario may hold (a day, iperf3's MAX_TIME).
    let late = path("1mbit", "1ms", "pfifo", 0.0, "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\ncount = 4\nstagger = \"9000000000s\"", 1);
    let e = build(&late, &late.vars_for(None, &no_overrides())).err();
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("stagger") && e.contains("out of range")),
        "{e:?}"
    );
    // Found the same way: a ping every 0 s would never let virtual time
    // move; iputils ping refuses a user anything under 2 ms.
    let ping = |interval: &str| {
        path(
            "1mbit",
            "1ms",
            "pfifo",
            0.0,
            &format!("[[workload]]\ntype = \"ping\"\nfrom = \"s\"\nto = \"d\"\ninterval = \"{interval}\""),
            1,
        )
    };
    for interval in ["0s", "1us", "1999us"] {
        let sc = ping(interval);
        let e = build(&sc, &sc.vars_for(None, &no_overrides())).err();
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("interval") && e.contains("less than 2ms")),
            "{interval}: {e:?}"
        );
    }
    let fast = ping("2ms");
    assert!(build(&fast, &fast.vars_for(None, &no_overrides())).is_ok());
}

#[test]
fn ip_address_and_route_lines_are_refused_not_ignored() {
    // The topology gives simulated nodes their addresses and routes; an
    // `ip address`/`ip route` line would change nothing there, so a
    // scenario holding one says so instead of running as if it had worked.
    for line in [
        "ip addr add 10.0.0.9/24 dev eth0",
        "ip -4 route add default via 10.0.0.254",
    ] {
        let sc = path("1mbit", "1ms", "pfifo", 0.0, "", 1);
        let mut sc = sc;
        sc.nodes[0].tc.push(line.to_string());
        let err = build(&sc, &sc.vars_for(None, &no_overrides()))
            .err()
            .expect("refused");
        assert!(err.contains("come from the scenario"), "{err}");
    }
    // `ip link` lines still run.
    let mut sc = path("1mbit", "1ms", "pfifo", 0.0, "", 1);
    sc.nodes[0]
        .tc
        .push("ip link set dev eth0 txqueuelen 50".to_string());
    assert!(build(&sc, &sc.vars_for(None, &no_overrides())).is_ok());
}

#[test]
fn flower_filters_classify_simulated_tcp_into_htb_classes() {
    // Two bulk TCP flows share a 10 Mbit/s uplink whose HTB gives 1:10
    // 8 Mbit/s and the default 1:20 2 Mbit/s. A flower filter on the
    // destination port sends the first flow to 1:10: the flows split about
    // 80/20 (were the filter to miss, both would share 1:20 evenly).
    let flow = |name: &str, port: u16| {
        format!(
            "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"{name}\"\n\
             port = {port}\nsndbuf = \"4MiB\"\nrcvbuf = \"4MiB\"\n"
        )
    };
    let w = flow("a", 5001) + &flow("b", 5002);
    let mut sc = path("10mbit", "10ms", "handle 1: htb default 20", 0.0, &w, 1);
    for line in [
        "tc class add dev eth0 parent 1: classid 1:1 htb rate 10mbit",
        "tc class add dev eth0 parent 1:1 classid 1:10 htb rate 8mbit ceil 10mbit",
        "tc class add dev eth0 parent 1:1 classid 1:20 htb rate 2mbit ceil 10mbit",
        "tc filter add dev eth0 parent 1: protocol ip pref 1 flower ip_proto tcp dst_port 5001 classid 1:10",
    ] {
        sc.nodes[0].tc.push(line.to_string());
    }
    let mut r = one_run(&sc);
    r.compute_shares();
    let share_a = r.flows.iter().find(|f| f.name == "a").unwrap().share;
    assert!((0.75..0.85).contains(&share_a), "flow a's share {share_a}");
}

/// Two bulk downloads from s to d (flow `a` to port 5001, `b` to 5002)
/// over a 10 Mbit/s link, d running `d_tc` (TOML-quoted here), with its
/// `tc -s` statistics.
fn two_downloads_into(d_tc: &[String]) -> RunResult {
    let flow = |name: &str, port: u16| {
        format!(
            "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"{name}\"\n\
             port = {port}\nsndbuf = \"4MiB\"\nrcvbuf = \"4MiB\"\n"
        )
    };
    let d_tc: Vec<String> = d_tc.iter().map(|l| format!("{l:?}")).collect();
    let sc = Scenario::parse(&format!(
        r#"
        name = "ingress"
        duration = "20s"
        seed = 1
        [[node]]
        name = "s"
        addr = "10.0.0.1"
        [[node]]
        name = "d"
        addr = "10.0.1.1"
        tc = [{}]
        [[link]]
        a = "s:eth0"
        b = "d:eth0"
        rate = "10mbit"
        delay = "10ms"
        buffer = "100p"
        {}{}
        "#,
        d_tc.join(", "),
        flow("a", 5001),
        flow("b", 5002)
    ))
    .unwrap();
    run(
        build(&sc, &sc.vars_for(None, &no_overrides())).unwrap(),
        "default",
        true,
    )
}

/// d's ingress filter: `restore`, then off to ifb0 (which `ifb0_tc` sets up).
fn ingress_through_ifb0(iptables: &[&str], ifb0_tc: &[&str], restore: &str) -> Vec<String> {
    let mut v: Vec<String> = iptables.iter().map(|l| l.to_string()).collect();
    v.push("ip link add ifb0 type ifb".into());
    v.push("ip link set dev ifb0 up".into());
    v.extend(ifb0_tc.iter().map(|l| l.to_string()));
    v.push("tc qdisc add dev eth0 handle ffff: ingress".into());
    v.push(format!(
        "tc filter add dev eth0 parent ffff: protocol ip matchall action {restore} \
         action mirred egress redirect dev ifb0"
    ));
    v
}

/// Ingress shaping by connection, the way home gateways do it: iptables
/// stores a mark in each connection as its first packets come in
/// (`CONNMARK --set-mark` by destination port), and on d's ingress every
/// later packet gets its connection's mark back (`restore`: `connmark`, or
/// ctinfo's `cpmark`) before mirred sends it to ifb0, where fw filters put
/// mark 1 into a 4 Mbit/s class and mark 2 into a 1 Mbit/s one, neither
/// borrowing. The two downloads then run at those rates (of frames; the
/// payload is 1448/1514 of it). Were the marks not restored, both would
/// share the 100 kbit/s default class.
fn downloads_split_by_connection_mark(restore: &str) -> (f64, f64) {
    let d_tc = ingress_through_ifb0(
        &[
            "iptables -t mangle -A PREROUTING -p tcp --dport 5001 -j CONNMARK --set-mark 1",
            "iptables -t mangle -A PREROUTING -p tcp --dport 5002 -j CONNMARK --set-mark 2",
        ],
        &[
            "tc qdisc add dev ifb0 root handle 1: htb default 30",
            "tc class add dev ifb0 parent 1: classid 1:10 htb rate 4mbit",
            "tc class add dev ifb0 parent 1: classid 1:20 htb rate 1mbit",
            "tc class add dev ifb0 parent 1: classid 1:30 htb rate 100kbit",
            "tc filter add dev ifb0 parent 1: protocol ip handle 1 fw flowid 1:10",
            "tc filter add dev ifb0 parent 1: protocol ip handle 2 fw flowid 1:20",
        ],
        restore,
    );
    let r = two_downloads_into(&d_tc);
    let g = |name: &str| {
        r.flows
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .goodput_mbps
    };
    (g("a"), g("b"))
}

#[test]
fn connmark_restores_connection_marks_for_ingress_shaping() {
    let payload = 1448.0 / 1514.0;
    for restore in ["connmark", "ctinfo cpmark"] {
        let (a, b) = downloads_split_by_connection_mark(restore);
        assert!((a / (4.0 * payload) - 1.0).abs() < 0.03, "{restore}: a {a}");
        assert!((b / payload - 1.0).abs() < 0.03, "{restore}: b {b}");
    }
    // Without a restoring action both share the 100 kbit/s class.
    let (a, b) = downloads_split_by_connection_mark("pipe");
    assert!(a + b < 0.1, "{a} + {b}");
}

/// sqm's layer_cake recipe: an iptables rule stores a DSCP (EF, 46) and a
/// "valid" flag in the connection mark of the download to port 5001; on
/// d's ingress ctinfo writes it back into every packet of that connection
/// before mirred hands them to ifb0's cake `diffserv4`, which files them by
/// DSCP: flow a's packets in the Voice tin, flow b's (no stored DSCP) in
/// Best Effort. Without the restoring action both would be Best Effort.
#[test]
fn ctinfo_restores_a_stored_dscp_into_cakes_voice_tin() {
    let tins = |restore: &str| -> Vec<u64> {
        let d_tc = ingress_through_ifb0(
            &["iptables -t mangle -A PREROUTING -p tcp --dport 5001 -j CONNMARK --set-mark 0xb9000000"],
            &["tc qdisc add dev ifb0 root cake bandwidth 8mbit diffserv4"],
            restore,
        );
        let r = two_downloads_into(&d_tc);
        let stats = r.tc_stats.expect("tc -s");
        // cake's per-tin table: `  pkts  BULK BESTEFFORT VIDEO VOICE`, ifb0's
        // being the one after its heading.
        let at = stats.find("dev ifb0").expect("ifb0 in the statistics");
        let line = stats[at..]
            .lines()
            .find(|l| l.trim_start().starts_with("pkts"))
            .expect("pkts row");
        line.split_whitespace()
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect()
    };
    let restored = tins("ctinfo dscp 0xfc000000 0x01000000");
    let plain = tins("pipe");
    assert_eq!(restored.len(), 4, "{restored:?}");
    // Voice holds flow a and only it (Bulk and Video nothing). Cake lets
    // the Voice tin send at priority up to its threshold, a quarter of the
    // bandwidth, so against a busy Best Effort flow a gets about that.
    let total: u64 = restored.iter().sum();
    let voice = restored[3] as f64 / total as f64;
    assert!((0.2..0.35).contains(&voice), "{restored:?}");
    assert_eq!((restored[0], restored[2]), (0, 0), "{restored:?}");
    assert_eq!((plain[0], plain[2], plain[3]), (0, 0, 0), "{plain:?}");
}

#[test]
fn filters_read_the_ethernet_header_the_sender_built() {
    // Every simulated interface has an address of its own (s's eth0:
    // 02:00:00:00:00:01, r's eth0 02:00:00:01:00:01) and frames leave with
    // an Ethernet header from the sender's to the next hop's. At r's
    // ingress a flower filter dropping s's source address stops the
    // download; one naming another address does not; u32 reads the header
    // at negative offsets (the source address's first four bytes at -8,
    // the EtherType at -2).
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"";
    let run_with = |filter: &str| {
        let mut sc = path("10mbit", "10ms", "pfifo limit 100", 0.0, w, 1);
        sc.nodes[1].tc.extend([
            "tc qdisc add dev eth0 ingress".to_string(),
            format!("tc filter add dev eth0 parent ffff: protocol ip {filter} action drop"),
        ]);
        one_run(&sc).total_goodput_mbps()
    };
    assert!(run_with("flower src_mac 02:00:00:00:00:01") < 0.01);
    assert!(run_with("flower dst_mac 02:00:00:01:00:01 src_mac 02:00:00:00:00:00/40") < 0.01);
    assert!(run_with("flower src_mac 02:00:00:00:00:02") > 9.0);
    assert!(run_with("flower dst_mac 02:00:00:00:00:01") > 9.0);
    assert!(
        run_with("u32 match u32 0x02000000 0xffffffff at -8 match u16 0x0800 0xffff at -2") < 0.01
    );
    assert!(run_with("u32 match u32 0x02000001 0xffffffff at -8") > 9.0);
}

#[test]
fn cbs_holds_a_class_to_what_its_credit_arithmetic_gives() {
    // A 100 Mbit/s port (the link's rate is the speed cbs reads) reserving
    // 20 Mbit/s for s's traffic: each 1514-byte frame spends
    // 1514 * 80/100 = 1211 bytes of credit when dequeued, earned back at
    // idleslope, 2.5 bytes/us, from then on — one frame per 484.4 us, 25.0
    // Mbit/s on the wire and 23.9 of TCP payload (1448 of 1514 bytes). The
    // standard's credit curve would give 20; the kernel's software mode
    // earns credit during the frame's own transmission too. The sender
    // sends one segment per packet (`gso = false`, as TSN hosts turn
    // segmentation offload off): a GSO packet of two frames would spend
    // 2422 bytes, clamped at locredit's 1514, and get more.
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"";
    let q = "handle 1: cbs idleslope 20000 sendslope -80000 hicredit 300 locredit -1514";
    let mut sc = path("100mbit", "10ms", q, 0.0, w, 1);
    sc.nodes[0].gso = false;
    let r = one_run(&sc);
    let g = r.total_goodput_mbps();
    assert!((23.3..=24.0).contains(&g), "{g}");
    // With every parameter 0 it is a plain fifo: the whole port.
    let plain = one_run(&path("100mbit", "10ms", "handle 1: cbs", 0.0, w, 1));
    assert!(
        plain.total_goodput_mbps() > 90.0,
        "{}",
        plain.total_goodput_mbps()
    );
}

#[test]
fn an_mpls_label_keeps_packets_from_a_host_until_popped() {
    // s labels everything it sends at its clsact egress (label 100); the
    // router r routes no labels, so the download never starts — unless r's
    // ingress pops the label, here found by a u32 filter reading the label
    // stack entry where the network header was (label 100 = 0x64 in the
    // top 20 bits). An expiring TTL is dropped at r's ingress instead. A
    // flower filter picks a two-label stack by both its entries.
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"";
    let run_with = |push: &str, r_actions: Option<&str>| {
        let mut sc = path("10mbit", "10ms", "pfifo limit 100", 0.0, w, 1);
        sc.nodes[0].tc.push("tc qdisc add dev eth0 clsact".into());
        sc.nodes[0].tc.push(format!(
            "tc filter add dev eth0 egress matchall action mpls push {push}"
        ));
        if let Some(acts) = r_actions {
            sc.nodes[1].tc.push("tc qdisc add dev eth0 ingress".into());
            sc.nodes[1].tc.push(format!(
                "tc filter add dev eth0 parent ffff: protocol mpls_uc u32 match u32 0x00064000 0xfffff000 at 0 {acts}"
            ));
        }
        one_run(&sc)
    };
    let labelled = run_with("label 100", None);
    assert!(labelled.losses.mpls > 0, "{:?}", labelled.losses);
    assert!(labelled.total_goodput_mbps() < 0.01);
    let pop = "action mpls pop protocol ip";
    let popped = run_with("label 100", Some(pop));
    assert_eq!(popped.losses.mpls, 0);
    let g = popped.total_goodput_mbps();
    // 4 more bytes per 1514-byte frame on s's 10 Mbit/s link than plain IP.
    assert!(g > 9.0, "{g}");
    // Another label: the filter does not match, nothing is popped.
    let other = run_with("label 101", Some(pop));
    assert!(other.losses.mpls > 0 && other.total_goodput_mbps() < 0.01);
    // TTL 1 expires at r's decrement: dropped at its ingress.
    let expiring = run_with(
        "label 100 ttl 1",
        Some("action mpls dec_ttl pipe action mpls pop protocol ip"),
    );
    assert!(expiring.losses.ingress > 0, "{:?}", expiring.losses);
    assert_eq!(expiring.losses.mpls, 0);
    assert!(expiring.total_goodput_mbps() < 0.01);
    let lasting = run_with(
        "label 100 ttl 2",
        Some("action mpls dec_ttl pipe action mpls pop protocol ip"),
    );
    assert!(lasting.total_goodput_mbps() > 9.0);
    // Two labels (200 outermost, 100 at the bottom of the stack); a flower
    // filter matching both entries pops both, one naming 100 as the
    // outer entry matches nothing.
    let stacked = |keys: &str| {
        let mut sc = path("10mbit", "10ms", "pfifo limit 100", 0.0, w, 1);
        sc.nodes[0].tc.extend([
            "tc qdisc add dev eth0 clsact".into(),
            "tc filter add dev eth0 egress matchall action mpls push label 100 \
             action mpls push label 200"
                .into(),
        ]);
        sc.nodes[1].tc.extend([
            "tc qdisc add dev eth0 ingress".into(),
            format!(
                "tc filter add dev eth0 parent ffff: protocol mpls_uc flower {keys} \
                 action mpls pop protocol mpls_uc action mpls pop protocol ip"
            ),
        ]);
        one_run(&sc)
    };
    let both = stacked("mpls lse depth 1 label 200 bos 0 lse depth 2 label 100 bos 1");
    assert_eq!(both.losses.mpls, 0);
    assert!(both.total_goodput_mbps() > 9.0);
    let wrong = stacked("mpls_label 100");
    assert!(wrong.losses.mpls > 0 && wrong.total_goodput_mbps() < 0.01);
}

#[test]
fn a_vlan_tag_keeps_packets_from_a_host_without_vlans_until_popped() {
    // s tags everything it sends (VLAN 10) at its clsact egress; the router
    // r has no VLAN device, so the tagged packets are not for it and the
    // download never starts — unless r's ingress pops the tag, or the tag
    // carries a priority only (VLAN id 0); a flower filter pops the
    // tag only if it names VLAN 10 (and, if given, its priority).
    let w = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"";
    let run_with = |push: &str, r_tc: &[&str]| {
        let mut sc = path("10mbit", "10ms", "pfifo limit 100", 0.0, w, 1);
        sc.nodes[0].tc.push("tc qdisc add dev eth0 clsact".into());
        sc.nodes[0].tc.push(format!(
            "tc filter add dev eth0 egress matchall action vlan push {push}"
        ));
        sc.nodes[1].tc.extend(r_tc.iter().map(|l| l.to_string()));
        one_run(&sc)
    };
    let tagged = run_with("id 10", &[]);
    assert!(tagged.losses.vlan > 0, "{:?}", tagged.losses);
    assert!(tagged.total_goodput_mbps() < 0.01);
    let popped = run_with(
        "id 10 priority 5",
        &[
            "tc qdisc add dev eth0 ingress",
            "tc filter add dev eth0 parent ffff: protocol 802.1Q matchall action vlan pop",
        ],
    );
    assert_eq!(popped.losses.vlan, 0);
    assert!(
        popped.total_goodput_mbps() > 9.0,
        "{}",
        popped.total_goodput_mbps()
    );
    // A flower filter pops only the VLAN it names.
    let flower = |keys: &str| {
        run_with(
            "id 10 priority 5",
            &[
                "tc qdisc add dev eth0 ingress",
                &format!(
                    "tc filter add dev eth0 parent ffff: protocol 802.1Q flower {keys} action vlan pop"
                ),
            ],
        )
    };
    let other = flower("vlan_id 11");
    assert!(other.losses.vlan > 0 && other.total_goodput_mbps() < 0.01);
    let other_prio = flower("vlan_id 10 vlan_prio 4");
    assert!(other_prio.losses.vlan > 0 && other_prio.total_goodput_mbps() < 0.01);
    let named = flower("vlan_id 10 vlan_prio 5 vlan_ethtype ip ip_proto tcp");
    assert_eq!(named.losses.vlan, 0);
    assert!(
        named.total_goodput_mbps() > 9.0,
        "{}",
        named.total_goodput_mbps()
    );
    let priority_only = run_with("id 0 priority 6", &[]);
    assert_eq!(priority_only.losses.vlan, 0);
    assert!(priority_only.total_goodput_mbps() > 9.0);
}

#[test]
fn skbmod_ecn_marks_make_an_ecn_flow_back_off_and_leave_others_alone() {
    // r marks every packet it forwards to d Congestion Experienced
    // (`skbmod ecn`, only ECN-capable packets are changed). A flow that
    // negotiated ECN sees an echo every round trip and keeps its window at
    // the floor: about 2 segments per 20 ms round trip, ~1.2 Mbit/s of the
    // 10 Mbit/s. A flow without ECN sends Not-ECT packets, which skbmod
    // leaves alone, and fills the link; so does the ECN flow unmarked.
    let run_with = |ecn: bool, mark: bool| {
        let w = format!(
            "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"\necn = {ecn}"
        );
        let mut sc = path("10mbit", "10ms", "pfifo limit 100", 0.0, &w, 1);
        if mark {
            sc.nodes[1].tc.extend([
                "tc qdisc add dev eth1 clsact".to_string(),
                "tc filter add dev eth1 egress matchall action skbmod ecn".to_string(),
            ]);
        }
        one_run(&sc).total_goodput_mbps()
    };
    let marked = run_with(true, true);
    assert!((0.5..3.0).contains(&marked), "{marked}");
    let not_ect = run_with(false, true);
    assert!(not_ect > 9.0, "{not_ect}");
    let unmarked = run_with(true, false);
    assert!(unmarked > 9.0, "{unmarked}");
}

#[test]
fn a_gate_passes_a_flow_only_while_its_schedule_is_open() {
    // r's egress to d gates everything: open 6 ms, closed 4 ms. A 2 Mbit/s
    // UDP flow (far below every link's rate, so nothing queues) loses the
    // 40 % of its datagrams that meet the closed gate; with a 1500-byte
    // budget per open interval only one datagram of each interval's ~1.5
    // gets through, whatever the schedule leaves open.
    let run_with = |entries: &str| {
        let w =
            "[[workload]]\ntype = \"udp\"\nfrom = \"s\"\nto = \"d\"\nrate = \"2mbit\"\nsize = 1000";
        let mut sc = path("100mbit", "1ms", "pfifo limit 100", 0.0, w, 1);
        sc.nodes[1].tc.extend([
            "tc qdisc add dev eth1 clsact".to_string(),
            format!("tc filter add dev eth1 egress matchall action gate {entries}"),
        ]);
        let r = one_run(&sc);
        let udp = r.flows.iter().find(|f| f.kind == "udp").unwrap();
        udp.loss_pct.unwrap()
    };
    let closed = run_with("sched-entry open 6ms sched-entry close 4ms");
    assert!((closed - 40.0).abs() < 2.0, "{closed}");
    let open = run_with("sched-entry open 10ms");
    assert!(open < 0.5, "{open}");
    // 2 Mbit/s of 1028-byte packets is 243 a second, 1.46 per 6 ms interval;
    // a budget of 1500 bytes (one packet) passes 100 per second: 59 % lost.
    let budget = run_with("sched-entry open 6ms -1 1500 sched-entry close 4ms");
    assert!((budget - 59.0).abs() < 3.0, "{budget}");
}

#[test]
fn mq_gives_each_transmit_queue_its_own_qdisc() {
    // s's eth0 has two transmit queues under an mq root: queue 0 (class
    // 1:1) is held to 1 Mbit/s by a tbf, queue 1 (1:2) has a plain fifo.
    // clsact egress pins flow "a" (port 5001) and "b" (5002) to a queue
    // with skbedit queue_mapping, before the queue is picked. Each offers 4
    // Mbit/s to a 10 Mbit/s link: a flow on queue 0 gets (with the other
    // flows there) the tbf's 1 Mbit/s of 1042-byte frames, of which
    // goodput counts the 1028-byte IP packets; one on queue 1 all of its 4.
    let w = "[[workload]]\ntype = \"udp\"\nname = \"a\"\nfrom = \"s\"\nto = \"d\"\nrate = \"4mbit\"\nsize = 1000\nport = 5001\n\
             [[workload]]\ntype = \"udp\"\nname = \"b\"\nfrom = \"s\"\nto = \"d\"\nrate = \"4mbit\"\nsize = 1000\nport = 5002";
    let run_with = |queues: [u16; 2]| {
        let mut sc = path("10mbit", "1ms", "handle 1: mq", 0.0, w, 1);
        sc.links[0].txqueues_a = Some(toml::Value::Integer(2));
        sc.nodes[0].tc.extend([
            "tc qdisc add dev eth0 parent 1:1 handle 10: tbf rate 1mbit burst 4k latency 20ms"
                .to_string(),
            "tc qdisc add dev eth0 parent 1:2 handle 20: pfifo limit 100".to_string(),
            "tc qdisc add dev eth0 clsact".to_string(),
        ]);
        for (port, queue) in [5001, 5002].into_iter().zip(queues) {
            sc.nodes[0].tc.push(format!(
                "tc filter add dev eth0 egress protocol ip u32 match ip dport {port} 0xffff action skbedit queue_mapping {queue}"
            ));
        }
        let r = one_run(&sc);
        let g = |n: &str| metric(&r, &format!("flow.{n}.goodput_mbps")).unwrap();
        (g("a"), g("b"))
    };
    let tbf = 1028.0 / 1042.0;
    let near = |x: f64, want: f64| (x - want).abs() < 0.01 * want;
    let (a, b) = run_with([0, 1]);
    assert!(near(a, tbf) && near(b, 4.0), "a {a} b {b}");
    let (a, b) = run_with([1, 0]);
    assert!(near(a, 4.0) && near(b, tbf), "a {a} b {b}");
    // Both on queue 0: they share the tbf.
    let (a, b) = run_with([0, 0]);
    assert!(near(a + b, tbf), "a {a} b {b}");
}

#[test]
fn mqprio_sends_each_priority_to_its_traffic_classs_queues() {
    // s's eth0 has four transmit queues under mqprio: traffic class 0 owns
    // queues 0-1 (classes 1:1, 1:2), each held to 1 Mbit/s by a tbf, class
    // 1 owns queues 2-3 with plain fifos. The map sends priority 6 (what
    // the IP stack makes of TOS 0x10, "interactive") to one class and every
    // other priority to the other; nothing else steers the packets. Flow
    // "a" (TOS 0x10) and "b" (TOS 0) each offer 4 Mbit/s to a 10 Mbit/s
    // link: a flow in class 0 lands on one of its tbf queues and gets
    // 1 Mbit/s of 1042-byte frames (goodput counts their 1028-byte IP
    // packets), one in class 1 all of its 4.
    let w = "[[workload]]\ntype = \"udp\"\nname = \"a\"\nfrom = \"s\"\nto = \"d\"\nrate = \"4mbit\"\nsize = 1000\nport = 5001\ntos = 16\n\
             [[workload]]\ntype = \"udp\"\nname = \"b\"\nfrom = \"s\"\nto = \"d\"\nrate = \"4mbit\"\nsize = 1000\nport = 5002";
    let run_with = |map: &str| {
        let root = format!("handle 1: mqprio num_tc 2 map {map} queues 2@0 2@2 hw 0");
        let mut sc = path("10mbit", "1ms", &root, 0.0, w, 1);
        sc.links[0].txqueues_a = Some(toml::Value::Integer(4));
        for q in 1..=2 {
            sc.nodes[0].tc.push(format!(
                "tc qdisc add dev eth0 parent 1:{q} tbf rate 1mbit burst 4k latency 20ms"
            ));
        }
        for q in 3..=4 {
            sc.nodes[0].tc.push(format!(
                "tc qdisc add dev eth0 parent 1:{q} pfifo limit 100"
            ));
        }
        let r = one_run(&sc);
        let g = |n: &str| metric(&r, &format!("flow.{n}.goodput_mbps")).unwrap();
        (g("a"), g("b"))
    };
    let tbf = 1028.0 / 1042.0;
    let near = |x: f64, want: f64| (x - want).abs() < 0.01 * want;
    let (a, b) = run_with("0 0 0 0 0 0 1 0");
    assert!(near(a, 4.0) && near(b, tbf), "a {a} b {b}");
    let (a, b) = run_with("1 1 1 1 1 1 0 1 1 1 1 1 1 1 1 1");
    assert!(near(a, tbf) && near(b, 4.0), "a {a} b {b}");
}

#[test]
fn taprio_gives_each_traffic_class_its_window_of_the_cycle() {
    // s's eth0 (four queues, 10 Mbit/s) runs taprio: traffic class 1
    // (priority 6, TOS 0x10: flow "a") owns queues 2-3, class 0 (everything
    // else: flow "b") queues 0-1. A 10 ms cycle opens one class for `open_a`
    // ms, then the other for the rest. Each flow offers 6 Mbit/s. A class
    // may send in its window only what ends before the window closes and
    // fits its byte budget (the window at 10 Mbit/s, 1250 bytes a ms): in a
    // 2 ms window, two 1042-byte frames (a third would overrun), 200 a
    // second, 1.645 Mbit/s of their 1028-byte IP packets, which is what
    // goodput counts. An 8 ms window carries 9, more than the flow offers.
    let w = "[[workload]]\ntype = \"udp\"\nname = \"a\"\nfrom = \"s\"\nto = \"d\"\nrate = \"6mbit\"\nsize = 1000\nport = 5001\ntos = 16\n\
             [[workload]]\ntype = \"udp\"\nname = \"b\"\nfrom = \"s\"\nto = \"d\"\nrate = \"6mbit\"\nsize = 1000\nport = 5002";
    let run_with = |open_a: u32| {
        let root = format!(
            "handle 100: taprio num_tc 2 map 0 0 0 0 0 0 1 0 queues 2@0 2@2 base-time 0 \
             sched-entry S 02 {} sched-entry S 01 {} clockid CLOCK_TAI",
            open_a * 1_000_000,
            (10 - open_a) * 1_000_000
        );
        let mut sc = path("10mbit", "1ms", &root, 0.0, w, 1);
        sc.links[0].txqueues_a = Some(toml::Value::Integer(4));
        for q in 1..=4 {
            sc.nodes[0].tc.push(format!(
                "tc qdisc replace dev eth0 parent 100:{q} pfifo limit 1000"
            ));
        }
        let r = one_run(&sc);
        let g = |n: &str| metric(&r, &format!("flow.{n}.goodput_mbps")).unwrap();
        (g("a"), g("b"))
    };
    let window = 2.0 * 100.0 * 1028.0 * 8.0 / 1e6;
    let near = |x: f64, want: f64| (x - want).abs() < 0.01 * want;
    let (a, b) = run_with(2);
    assert!(near(a, window) && near(b, 6.0), "a {a} b {b}");
    let (a, b) = run_with(8);
    assert!(near(a, 6.0) && near(b, window), "a {a} b {b}");
}

/// A node's sysctls are its connections' defaults: `tcp_congestion_control
/// = bbr` on the sender runs what `cc = "bbr"` on the workload runs, byte
/// for byte; a smaller `tcp_rmem[2]` on the receiver caps autotuning, so
/// its window, and with it the queue a lone CUBIC flow keeps, is smaller;
/// an unknown name is an error naming the ones there are.
#[test]
fn node_sysctls_are_its_connections_defaults() {
    let flow = "[[workload]]\ntype = \"tcp\"\nfrom = \"s\"\nto = \"d\"\nname = \"f\"";
    let ping = "[[workload]]\ntype = \"ping\"\nname = \"p\"\nfrom = \"s\"\nto = \"d\"\ninterval = \"100ms\"";
    let by_workload = path(
        "10mbit",
        "10ms",
        "pfifo limit 1000",
        0.0,
        &format!("{flow}\ncc = \"bbr\"\n{ping}"),
        1,
    );
    let with = |sender: &str, receiver: &str| {
        let text = format!("{flow}\n{ping}");
        let sc = path("10mbit", "10ms", "pfifo limit 1000", 0.0, &text, 1);
        let mut sc = sc;
        for (node, table) in [("s", sender), ("d", receiver)] {
            let n = sc.nodes.iter_mut().find(|n| n.name == node).unwrap();
            n.sysctl = toml::from_str::<BTreeMap<String, toml::Value>>(table).unwrap();
        }
        sc
    };
    let by_node = with("\"net.ipv4.tcp_congestion_control\" = \"bbr\"", "");
    let (a, b) = (one_run(&by_workload), one_run(&by_node));
    assert_eq!(a.flows[0].bytes, b.flows[0].bytes);
    assert_eq!(a.pings[0].series, b.pings[0].series);
    // A workload's own `cc` wins over its node's.
    let mut cubic_over_bbr = with("\"net.ipv4.tcp_congestion_control\" = \"bbr\"", "");
    cubic_over_bbr.workloads[0].cc = Some("cubic".into());
    let (c, d) = (one_run(&cubic_over_bbr), one_run(&with("", "")));
    assert_eq!(c.flows[0].bytes, d.flows[0].bytes);
    assert_ne!(c.flows[0].bytes, b.flows[0].bytes);

    // Autotuning capped at 256 KiB of memory (160 KiB of window): the
    // standing queue is at most that less the 27.5 kB path, ~0.11 s at
    // 10 Mbit/s, plus 22 ms; the stock 32 MiB cap lets CUBIC's window grow
    // with the queue (about 50 ms of RTT a second) until the 1000 packets
    // (1.2 s) overflow.
    let stock = one_run(&with("", ""));
    let capped = one_run(&with("", "\"net.ipv4.tcp_rmem\" = \"4096 131072 262144\""));
    let (s, c) = (stock.pings[0].median_ms, capped.pings[0].median_ms);
    println!("ping median: stock {s:.1} ms, tcp_rmem max 256 KiB {c:.1} ms");
    assert!(c < 160.0, "capped {c}");
    assert!(s > 3.0 * c, "stock {s}");

    let bad = with("\"net.ipv4.tcp_fastopen\" = 1", "");
    let e = build(&bad, &bad.vars_for(None, &no_overrides()))
        .err()
        .unwrap();
    assert!(
        e.contains("node s: sysctl net.ipv4.tcp_fastopen") && e.contains("net.ipv4.tcp_rmem"),
        "{e}"
    );
}
