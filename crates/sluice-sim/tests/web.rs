//! Web page loads against the physics of round trips, in virtual time.
//!
//! The path is empty (nothing else on it) and fast (100 Mbit/s), so a load
//! is made of round trips: TCP's handshake (1), TLS's (2 more with
//! `handshake = true`), one per request/response on an HTTP/1.1 connection,
//! and slow start's doubling rounds on a multiplexed one. Serialization adds
//! a little: 1 KB takes 0.08 ms at 100 Mbit/s.

use sluice_sim::plot::write_plots;
use sluice_sim::report::{metric, table, RunResult, WebResult};
use sluice_sim::run::{build, run};
use sluice_sim::scenario::Scenario;
use std::collections::BTreeMap;

/// Round-trip time of the path below: 2 × (20 ms + 5 ms).
const RTT_MS: f64 = 50.0;

/// browser -- 100 Mbit/s, 20 ms -- router -- 100 Mbit/s, 5 ms -- server,
/// with one web workload whose keys are `web`.
fn path(web: &str, duration: &str) -> Scenario {
    Scenario::parse(&format!(
        r#"
        name = "web"
        duration = "{duration}"
        [[node]]
        name = "browser"
        addr = "10.0.0.1"
        [[node]]
        name = "router"
        addr = "10.0.0.254"
        router = true
        [[node]]
        name = "server"
        addr = "10.0.1.1"
        [[link]]
        a = "browser:eth0"
        b = "router:eth0"
        rate = "100mbit"
        delay = "20ms"
        [[link]]
        a = "router:eth1"
        b = "server:eth0"
        rate = "100mbit"
        delay = "5ms"
        [[workload]]
        type = "web"
        name = "page"
        from = "browser"
        to = "server"
        {web}
        "#
    ))
    .expect("scenario parses")
}

fn load(web: &str, duration: &str) -> (RunResult, WebResult) {
    let sc = path(web, duration);
    let built = build(&sc, &BTreeMap::new()).expect("builds");
    let r = run(built, "default", false);
    let w = r.webs.first().expect("a web result").clone();
    eprintln!(
        "{}: {:.2}/{:.2}/{:.2} RTTs over {} loads",
        web.replace('\n', " "),
        rtts(w.min_ms),
        rtts(w.load_ms),
        rtts(w.max_ms),
        w.loads
    );
    (r, w)
}

fn rtts(ms: f64) -> f64 {
    ms / RTT_MS
}

#[test]
fn a_page_on_a_fresh_connection_takes_the_handshake_and_one_round_trip() {
    let (_, w) = load(r#"page = "10000""#, "2s");
    assert_eq!(w.loads, 1);
    // 1 RTT for SYN/SYN-ACK, 1 for the request and the page (7 segments,
    // within the initial window of 10), plus serialization: ~0.9 ms.
    assert!(
        w.load_ms > 2.0 * RTT_MS && w.load_ms < 2.0 * RTT_MS + 3.0,
        "{w:?}"
    );
}

#[test]
fn tls_adds_two_round_trips_per_connection() {
    let (_, plain) = load(r#"page = "10000""#, "2s");
    let (_, tls) = load("page = \"10000\"\nhandshake = true", "2s");
    let extra = rtts(tls.load_ms - plain.load_ms);
    assert!((extra - 2.0).abs() < 0.1, "TLS added {extra:.2} RTTs");
    // And on a multiplexed connection with objects, still 2.
    let objs = "page = \"10000\"\nobjects = 20\nobject_size = \"1000\"\nmultiplexed = true";
    let (_, plain) = load(objs, "5s");
    let (_, tls) = load(&format!("{objs}\nhandshake = true"), "5s");
    let extra = rtts(tls.load_ms - plain.load_ms);
    assert!(
        (extra - 2.0).abs() < 0.2,
        "TLS added {extra:.2} RTTs to the multiplexed load"
    );
}

#[test]
fn http11_takes_a_round_trip_per_six_small_objects() {
    let (_, w) = load(
        "page = \"10000\"\nobjects = 360\nobject_size = \"1000\"",
        "10s",
    );
    // SYN (1) + page (1) + SYN of five more connections (1) + 360/6 = 60
    // request/response rounds: 63 RTTs, plus a little serialization.
    let n = rtts(w.load_ms);
    assert!((62.5..64.5).contains(&n), "{n:.2} RTTs ({w:?})");
}

#[test]
fn fewer_connections_take_proportionally_longer() {
    let (_, w) = load(
        "page = \"10000\"\nobjects = 60\nobject_size = \"1000\"\nconnections = 2",
        "10s",
    );
    // SYN + page + SYN of the second connection (while the first serves)
    // + 60/2 rounds ~ 32-33 RTTs.
    let n = rtts(w.load_ms);
    assert!((31.5..33.5).contains(&n), "{n:.2} RTTs");
}

#[test]
fn one_multiplexed_connection_takes_a_few_round_trips() {
    let (_, w) = load(
        "page = \"10000\"\nobjects = 360\nobject_size = \"1000\"\nmultiplexed = true",
        "10s",
    );
    // SYN (1) + page (1) + requests up and 360 kB down in slow start from
    // a window of ~17 segments: 17 + 34 + 68 + 136 >= 249 segments, so 4
    // rounds: ~6-7 RTTs in all, ten times fewer than HTTP/1.1.
    let n = rtts(w.load_ms);
    assert!((5.0..8.0).contains(&n), "{n:.2} RTTs");
}

#[test]
fn warm_connections_skip_the_handshakes() {
    let common = "page = \"10000\"\nobjects = 20\nobject_size = \"1000\"\nmultiplexed = true\nhandshake = true\nrepeat = 3\ninterval = \"2s\"";
    let (_, cold) = load(common, "10s");
    let (_, warm) = load(&format!("{common}\nwarm = true"), "10s");
    assert_eq!((cold.loads, warm.loads), (3, 3));
    // Cold: TCP + TLS (3) + page (1) + objects (1) = 5 RTTs every time;
    // warm: page + objects = 2.
    assert!((rtts(cold.min_ms) - 5.0).abs() < 0.2, "{cold:?}");
    assert!((rtts(warm.max_ms) - 2.0).abs() < 0.2, "{warm:?}");
    // Loads start `interval` apart.
    let starts: Vec<f64> = cold.series.iter().map(|(t, _)| *t).collect();
    assert_eq!(starts, vec![0.0, 2.0, 4.0]);
}

#[test]
fn loads_are_reported_in_the_table_and_as_metrics() {
    let (r, w) = load(
        "page = \"10000\"\nobject_sizes = [\"2000\", 500]\nrepeat = 2",
        "10s",
    );
    assert_eq!(w.loads, 2);
    assert_eq!(metric(&r, "web.page.load_ms"), Some(w.load_ms));
    assert_eq!(metric(&r, "web.page.min_ms"), Some(w.min_ms));
    assert_eq!(metric(&r, "web.page.max_ms"), Some(w.max_ms));
    assert_eq!(metric(&r, "web.load_ms"), Some(w.load_ms));
    assert_eq!(metric(&r, "web.page.loads"), Some(2.0));
    let t = table("web", &[r]);
    assert!(t.contains("web page          load min/avg/max = "), "{t}");
    assert!(t.contains(" ms over 2 loads"), "{t}");
}

#[test]
fn a_load_that_cannot_finish_is_not_counted() {
    let (r, w) = load(
        "page = \"10000\"\nobjects = 360\nobject_size = \"1000\"",
        "1s",
    );
    assert_eq!(w.loads, 0);
    assert!(w.unfinished);
    assert_eq!(
        metric(&r, "web.page.load_ms"),
        None,
        "no load time without a load"
    );
}

#[test]
fn bad_web_keys_are_refused() {
    for (keys, needle) in [
        ("objects = 3", "web needs a page size"),
        ("page = \"1k\"\nobjects = 3", "objects needs an object_size"),
        ("page = \"1k\"\nconnections = 0", "at least 1"),
        (
            "page = \"1k\"\nmultiplexed = \"maybe\"",
            "not true or false",
        ),
        (
            "page = \"1k\"\nobjects = 99999999999\nobject_size = \"1\"",
            "at most",
        ),
        ("page = \"1k\"\nport = 70000", "port"),
    ] {
        let sc = path(keys, "1s");
        let err = build(&sc, &BTreeMap::new()).err().unwrap_or_default();
        assert!(err.contains(needle), "{keys}: {err}");
    }
}

/// The points of the SVG polylines drawn in `stroke` with `opacity`.
fn polyline_points(svg: &str, stroke: &str, opacity: &str) -> Vec<usize> {
    let head = format!("<polyline fill=\"none\" opacity=\"{opacity}\" stroke=\"{stroke}\"");
    svg.split(&head)
        .skip(1)
        .filter_map(|rest| rest.split("points=\"").nth(1)?.split('"').next())
        .map(|pts| pts.split_whitespace().count())
        .collect()
}

#[test]
fn plots_are_written_with_every_point_of_every_series() {
    let extra = r#"
        objects = 20
        object_size = "1000"
        repeat = 4
        interval = "500ms"
        [[workload]]
        type = "ping"
        name = "rtt"
        from = "browser"
        to = "server"
        interval = "100ms"
        [[workload]]
        type = "tcp"
        name = "bulk"
        from = "server"
        to = "browser"
        bytes = "2MB"
    "#;
    let sc = path(&format!("page = \"10000\"\n{extra}"), "3s");
    let r = run(build(&sc, &BTreeMap::new()).unwrap(), "base line", false);
    let dir = tempfile::tempdir().unwrap();
    let files = write_plots(dir.path(), "web", std::slice::from_ref(&r)).unwrap();
    assert_eq!(files.len(), 6, "{files:?}");
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(bytes.len() > 1000, "{} is nearly empty", f.display());
        if f.extension().is_some_and(|e| e == "png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display());
        }
    }
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    // A dot per answered ping and per load; a line through them.
    let rtt = read("base_line-rtt.svg");
    let pings = r.pings[0].series.len();
    assert!(pings > 25);
    assert_eq!(rtt.matches("<circle").count(), pings);
    assert_eq!(
        polyline_points(&rtt, "#1F77B4", "1"),
        vec![pings, 2],
        "series, legend"
    );
    let loads = read("base_line-pageload.svg");
    assert_eq!(r.webs[0].loads, 4);
    assert_eq!(loads.matches("<circle").count(), 4);
    // Every 100 ms bin of the flow, faint, and its average, bold.
    let tput = read("base_line-throughput.svg");
    let bins = r.flows[0].series.len();
    assert!(bins > 5);
    assert_eq!(polyline_points(&tput, "#1F77B4", "0.35"), vec![bins]);
    assert_eq!(polyline_points(&tput, "#1F77B4", "1")[0], bins);
}
