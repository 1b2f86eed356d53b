//! The REST API against Toxiproxy 2.12's routes, bodies, status codes and
//! messages, and connections through real sockets on the loopback.
//!
//! Timing checks are physical bounds (a toxic never lets bytes through
//! sooner than it should), with generous upper bounds for a busy machine.

mod common;

use common::{connect, echo, proxy};
use serde_json::Value;
use sluice_proxy::api::Api;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn add_toxic(api: &Api, proxy: &str, body: &str) {
    let r = api.route("POST", &format!("/proxies/{proxy}/toxics"), body);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Send `n` bytes and read them back; returns the time it took.
fn round_trip(s: &mut TcpStream, n: usize) -> Duration {
    let t = Instant::now();
    let sent: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let w = {
        let mut s = s.try_clone().unwrap();
        let sent = sent.clone();
        thread::spawn(move || s.write_all(&sent).unwrap())
    };
    let mut got = vec![0u8; n];
    s.read_exact(&mut got).unwrap();
    w.join().unwrap();
    assert!(got == sent, "the echoed bytes differ");
    t.elapsed()
}

#[test]
fn proxies_are_created_listed_updated_and_deleted_as_toxiproxy_does() {
    let api = Api::default();
    let r = api.route(
        "POST",
        "/proxies",
        r#"{"name":"db","listen":"localhost:0","upstream":"localhost:6379","enabled":false}"#,
    );
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body,
        r#"{"name":"db","listen":"localhost:0","upstream":"localhost:6379","enabled":false,"toxics":[]}"#
    );
    // Enabling binds it: the listen address becomes the bound one.
    let r = api.route("PATCH", "/proxies/db", r#"{"enabled":true}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    let listen = json(&r.body)["listen"].as_str().unwrap().to_string();
    assert!(
        listen.starts_with("127.0.0.1:") && !listen.ends_with(":0"),
        "{listen}"
    );
    let r = api.route("POST", "/proxies", r#"{"name":"db","upstream":"x:1"}"#);
    assert_eq!(
        (r.status, r.content_type, r.body.as_str()),
        (
            409,
            "text/plain; charset=utf-8",
            "{\"error\":\"proxy already exists\",\"status\":409}\n"
        )
    );
    let r = api.route("POST", "/proxies", r#"{"upstream":"x:1"}"#);
    assert_eq!(
        r.body,
        "{\"error\":\"missing required field: name\",\"status\":400}\n"
    );
    let r = api.route("POST", "/proxies", r#"{"name":"a"}"#);
    assert_eq!(
        r.body,
        "{\"error\":\"missing required field: upstream\",\"status\":400}\n"
    );
    let r = api.route("POST", "/proxies", "");
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            400,
            "{\"error\":\"bad request body: EOF\",\"status\":400}\n"
        )
    );
    // A taken port: Go's message, and no proxy.
    let r = api.route(
        "POST",
        "/proxies",
        &format!(r#"{{"name":"b","listen":"{listen}","upstream":"x:1"}}"#),
    );
    assert_eq!(r.status, 500);
    assert_eq!(
        json(&r.body)["error"],
        format!("listen tcp {listen}: bind: address already in use")
    );
    assert_eq!(api.route("GET", "/proxies/b", "").status, 404);
    let all = json(&api.route("GET", "/proxies", "").body);
    assert_eq!(all.as_object().unwrap().len(), 1);
    assert_eq!(all["db"]["upstream"], "localhost:6379");
    assert_eq!(api.route("DELETE", "/proxies/db", "").status, 204);
    let r = api.route("GET", "/proxies/db", "");
    assert_eq!(r.body, "{\"error\":\"proxy not found\",\"status\":404}\n");
    assert_eq!(api.route("GET", "/proxies", "").body, "{}");
    // Paths and methods.
    assert_eq!(api.route("GET", "/nope", "").body, "404 page not found\n");
    assert_eq!(api.route("DELETE", "/proxies", "").status, 405);
    let v = api.route("GET", "/version", "");
    assert_eq!(v.body, "{\"version\": \"2.12.0\"}\n");
}

#[test]
fn toxics_take_toxiproxys_defaults_checks_and_merges() {
    let api = common::stopped_proxy();
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"latency","attributes":{"latency":1000}}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        r#"{"attributes":{"latency":1000,"jitter":0},"name":"latency_downstream","type":"latency","stream":"downstream","toxicity":1}"#
    );
    let r = api.route("POST", "/proxies/p/toxics", r#"{"type":"latency"}"#);
    assert_eq!(
        r.body,
        "{\"error\":\"toxic already exists\",\"status\":409}\n"
    );
    let r = api.route("POST", "/proxies/p/toxics", r#"{"type":"nope"}"#);
    assert_eq!(
        r.body,
        "{\"error\":\"invalid toxic type\",\"status\":400}\n"
    );
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"latency","stream":"sideways"}"#,
    );
    assert_eq!(
        r.body,
        "{\"error\":\"stream was invalid, can be either upstream or downstream\",\"status\":400}\n"
    );
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"bandwidth","stream":"UpStream","toxicity":0.5,"attributes":{"rate":"x"}}"#,
    );
    assert_eq!(r.status, 400);
    assert!(json(&r.body)["error"]
        .as_str()
        .unwrap()
        .starts_with("bad request body: "));
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"bandwidth","stream":"UpStream","toxicity":0.5,"attributes":{"rate":10}}"#,
    );
    assert_eq!(
        r.body,
        r#"{"attributes":{"rate":10},"name":"bandwidth_UpStream","type":"bandwidth","stream":"UpStream","toxicity":0.5}"#
    );
    // A slicer that would cut forever, and a qdisc tc refuses.
    let r = api.route("POST", "/proxies/p/toxics", r#"{"type":"slicer"}"#);
    assert_eq!(r.status, 400);
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"tc","attributes":{"qdisc":"netem delay"}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    // Upstream toxics are listed first.
    let list = json(&api.route("GET", "/proxies/p/toxics", "").body);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bandwidth_UpStream", "latency_downstream"]);
    // An update merges the attributes it names; type and stream stay.
    let r = api.route(
        "PATCH",
        "/proxies/p/toxics/latency_downstream",
        r#"{"attributes":{"jitter":50},"stream":"upstream"}"#,
    );
    assert_eq!(
        r.body,
        r#"{"attributes":{"latency":1000,"jitter":50},"name":"latency_downstream","type":"latency","stream":"downstream","toxicity":1}"#
    );
    let r = api.route("GET", "/proxies/p/toxics/none", "");
    assert_eq!(r.body, "{\"error\":\"toxic not found\",\"status\":404}\n");
    assert_eq!(
        api.route("DELETE", "/proxies/p/toxics/bandwidth_UpStream", "")
            .status,
        204
    );
    // Reset: every proxy enabled, every toxic gone.
    assert_eq!(api.route("POST", "/reset", "").status, 204);
    let p = json(&api.route("GET", "/proxies/p", "").body);
    assert_eq!(p["enabled"], true);
    assert_eq!(p["toxics"], Value::Array(vec![]));
}

#[test]
fn populate_creates_keeps_and_reports_as_toxiproxy_does() {
    let api = Api::default();
    let body = r#"[{"name":"a","listen":"127.0.0.1:0","upstream":"x:1"},{"name":"b","listen":"127.0.0.1:0","upstream":"x:2","enabled":false}]"#;
    let r = api.route("POST", "/populate", body);
    assert_eq!(r.status, 201, "{}", r.body);
    let v = json(&r.body);
    assert_eq!(v["proxies"].as_array().unwrap().len(), 2);
    let a_listen = v["proxies"][0]["listen"].as_str().unwrap().to_string();
    // The same again with the bound address: kept as it is, toxics included.
    add_toxic(&api, "a", r#"{"type":"latency"}"#);
    let again = format!(r#"[{{"name":"a","listen":"{a_listen}","upstream":"x:1"}}]"#);
    let r = api.route("POST", "/populate", &again);
    assert_eq!(
        json(&r.body)["proxies"][0]["toxics"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let r = api.route("POST", "/populate", r#"[{"listen":":1"}]"#);
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            400,
            r#"{"error":"missing required field: name at proxy 1","status":400,"proxies":null}"#
        )
    );
}

#[test]
fn latency_delays_each_direction_and_toxics_reach_open_connections() {
    let api = Api::default();
    let listen = proxy(&api, "e", &echo());
    let mut s = connect(&listen);
    let base = round_trip(&mut s, 100);
    assert!(base < Duration::from_millis(200), "{base:?}");
    // Added while the connection is open: it applies to it.
    add_toxic(
        &api,
        "e",
        r#"{"type":"latency","attributes":{"latency":100}}"#,
    );
    add_toxic(
        &api,
        "e",
        r#"{"type":"latency","stream":"upstream","attributes":{"latency":50,"jitter":20}}"#,
    );
    for _ in 0..3 {
        let rtt = round_trip(&mut s, 100);
        // 100 ms down plus at least 30 ms up: never sooner than 130 ms.
        assert!(rtt >= Duration::from_millis(130), "{rtt:?}");
        assert!(rtt < Duration::from_millis(1500), "{rtt:?}");
    }
    // Many chunks under jitter come back whole and in order.
    round_trip(&mut s, 300_000);
}

#[test]
fn bandwidth_limits_a_bulk_transfer_to_its_rate() {
    let api = Api::default();
    let listen = proxy(&api, "bw", &echo());
    add_toxic(
        &api,
        "bw",
        r#"{"type":"bandwidth","attributes":{"rate":200}}"#,
    );
    let mut s = connect(&listen);
    // 300 000 bytes at 200 KB/s: at least 1.5 s (less one segment of bucket).
    let took = round_trip(&mut s, 300_000);
    assert!(took >= Duration::from_millis(1490), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
}

#[test]
fn limit_data_timeout_reset_and_slow_close_end_connections_as_toxiproxy_does() {
    let api = Api::default();
    let up = echo();
    // limit_data: 1000 bytes back, then the connection closes.
    let listen = proxy(&api, "limit", &up);
    add_toxic(
        &api,
        "limit",
        r#"{"type":"limit_data","attributes":{"bytes":1000}}"#,
    );
    let mut s = connect(&listen);
    s.write_all(&[7u8; 5000]).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert_eq!(got, vec![7u8; 1000]);

    // timeout: nothing through, closed 300 ms after the last chunk.
    let listen = proxy(&api, "to", &up);
    add_toxic(
        &api,
        "to",
        r#"{"type":"timeout","stream":"upstream","attributes":{"timeout":300}}"#,
    );
    let mut s = connect(&listen);
    let t = Instant::now();
    s.write_all(b"hello").unwrap();
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );

    // reset_peer: the client's read fails with a reset.
    let listen = proxy(&api, "rst", &up);
    add_toxic(
        &api,
        "rst",
        r#"{"type":"reset_peer","stream":"upstream","attributes":{"timeout":100}}"#,
    );
    let mut s = connect(&listen);
    s.write_all(b"x").unwrap();
    let e = s.read(&mut buf);
    assert!(
        matches!(&e, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "{e:?}"
    );

    // slow_close: the server's close reaches the client 400 ms late.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let (c, _) = server.accept().unwrap();
        drop(c);
    });
    let listen = proxy(&api, "slow", &addr);
    add_toxic(
        &api,
        "slow",
        r#"{"type":"slow_close","attributes":{"delay":400}}"#,
    );
    let t = Instant::now();
    let mut s = connect(&listen);
    assert_eq!(s.read(&mut buf).unwrap(), 0);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn metrics_count_each_directions_bytes_when_asked_for() {
    let mut api = Api::default();
    assert_eq!(api.route("GET", "/metrics", "").status, 404);
    api.metrics = true;
    let listen = proxy(&api, "m", &echo());
    let mut s = connect(&listen);
    round_trip(&mut s, 1000);
    let m = api.route("GET", "/metrics", "");
    assert_eq!(m.status, 200);
    let line = |metric: &str, dir: &str| {
        let head = format!(
            "toxiproxy_proxy_{metric}_bytes_total{{direction=\"{dir}\",listener=\"{listen}\",proxy=\"m\","
        );
        m.body
            .lines()
            .find(|l| l.starts_with(&head))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{head} in:\n{}", m.body))
    };
    // The echo's 1000 bytes went up and came back down, each received and sent once.
    for metric in ["received", "sent"] {
        for dir in ["upstream", "downstream"] {
            assert_eq!(line(metric, dir), 1000, "{metric} {dir}");
        }
    }
}

#[test]
fn a_tc_toxic_with_loss_keeps_the_stream_whole() {
    let api = Api::default();
    let listen = proxy(&api, "tc", &echo());
    add_toxic(
        &api,
        "tc",
        r#"{"type":"tc","stream":"upstream","attributes":{"qdisc":"netem loss 20% delay 5ms"}}"#,
    );
    let mut s = connect(&listen);
    round_trip(&mut s, 200_000);
}

#[test]
fn a_disabled_proxy_closes_its_connections_and_refuses_new_ones() {
    let api = Api::default();
    let listen = proxy(&api, "d", &echo());
    let mut s = connect(&listen);
    round_trip(&mut s, 10);
    let r = api.route("POST", "/proxies/d", r#"{"enabled":false}"#);
    assert_eq!(json(&r.body)["enabled"], false);
    let mut buf = [0u8; 8];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    assert!(TcpStream::connect(&listen).is_err());
}

#[test]
fn the_api_answers_over_http_with_toxiproxys_headers() {
    let server = sluice_proxy::api::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let api = std::sync::Arc::new(Api::default());
    thread::spawn(move || sluice_proxy::api::serve(api, server));
    let request = |req: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let body = r#"{"name":"h","upstream":"x:1","enabled":false}"#;
    let r = request(&format!(
        "POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(r.starts_with("HTTP/1.1 201"), "{r}");
    assert!(r.contains("Content-Type: application/json\r\n"), "{r}");
    assert!(r.contains("X-Toxiproxy-Request-Id: "), "{r}");
    assert!(r.ends_with(r#""enabled":false,"toxics":[]}"#), "{r}");
    let r = request("GET /proxies/none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    assert!(
        r.contains("Content-Type: text/plain; charset=utf-8\r\n"),
        "{r}"
    );
    // Browsers are turned away (a page could otherwise drive the API).
    let r = request(
        "GET /proxies HTTP/1.1\r\nHost: x\r\nUser-Agent: Mozilla/5.0\r\nConnection: close\r\n\r\n",
    );
    assert!(
        r.starts_with("HTTP/1.1 403") && r.ends_with("User agent not allowed\n"),
        "{r}"
    );
}

#[allow(dead_code)]
#[path = "../../../fuzz/src/proxy_body.rs"]
mod proxy_body;

/// The fuzz target's body over generated requests (a fixed-seed smoke run
/// in CI; cargo-fuzz explores further, `fuzz/README.md`).
#[test]
fn fuzz_body_survives_generated_requests() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let method = prop::sample::select(vec!["GET", "POST", "PATCH", "DELETE", "PUT"]);
    let path = prop::sample::select(vec![
        "/proxies",
        "/proxies/p",
        "/proxies/p/toxics",
        "/proxies/p/toxics/t",
        "/proxies/p/toxics/latency_downstream",
        "/populate",
        "/version",
        "/proxies/",
        "//",
    ]);
    let body = prop::sample::select(vec![
        r#"{"name":"p","upstream":"x:1"}"#,
        r#"{"name":"t","type":"latency","attributes":{"latency":-5,"jitter":9999999999}}"#,
        r#"{"type":"bandwidth","attributes":{"rate":-1}}"#,
        r#"{"type":"slicer","attributes":{"average_size":1,"size_variation":1,"delay":-1}}"#,
        r#"{"type":"tc","attributes":{"qdisc":"htb default 1"}}"#,
        r#"{"type":"tc","attributes":{"qdisc":7}}"#,
        r#"{"type":"limit_data","stream":"UP","toxicity":-3,"attributes":{"bytes":1e300}}"#,
        r#"[{"name":"p","upstream":"x:1"},{"name":""}]"#,
        r#"{"attributes":null,"toxicity":"x"}"#,
        "",
        "{",
        "[]",
        "null",
    ]);
    let line = (method, path, body).prop_map(|(m, p, b)| format!("{m} {p} {b}"));
    let input = prop::collection::vec(line, 1..12).prop_map(|l| l.join("\n"));
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&input, |text| {
            proxy_body::proxy_api(text.as_bytes());
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_udp_proxy_carries_datagrams_through_its_toxics() {
    use std::net::UdpSocket;
    let up = common::udp_echo();
    let api = Api::default();
    let listen = common::udp_proxy(&api, "u", up);
    add_toxic(
        &api,
        "u",
        r#"{"type":"latency","attributes":{"latency":80}}"#,
    );
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.connect(&listen).unwrap();
    for i in 0..3u8 {
        let t = Instant::now();
        c.send(&[i; 700]).unwrap();
        let mut buf = [0u8; 2048];
        let n = c.recv(&mut buf).unwrap();
        // One datagram back, whole, no sooner than the latency.
        assert_eq!(&buf[..n], &[i; 700][..]);
        assert!(
            t.elapsed() >= Duration::from_millis(80),
            "{:?}",
            t.elapsed()
        );
    }
    // A toxic change with a session open, then disabled and enabled again
    // at once: the port is free again (the session's threads are gone).
    add_toxic(
        &api,
        "u",
        r#"{"type":"bandwidth","attributes":{"rate":1000}}"#,
    );
    let r = api.route("PATCH", "/proxies/u", r#"{"enabled":false}"#);
    assert_eq!(r.status, 200);
    let r = api.route("PATCH", "/proxies/u", r#"{"enabled":true}"#);
    assert_eq!(
        (r.status, json(&r.body)["listen"].as_str()),
        (200, Some(listen.as_str()))
    );
    c.send(&[9; 10]).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf).unwrap(), 10);
    let r = api.route(
        "POST",
        "/proxies",
        r#"{"name":"x","upstream":"a:1","protocol":"sctp"}"#,
    );
    assert_eq!(r.status, 400);
}
