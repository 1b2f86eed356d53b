//! `bandwidth` and `latency` toxics whose wire changes over time (sluice's
//! own attributes: `trace`, `schedule`, `delay_trace`), through real
//! proxied TCP connections on the loopback, and what the API refuses.

mod common;

use common::{connect, echo, proxy};

use serde_json::Value;
use sluice_proxy::api::Api;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A server that reads everything sent to it: for each read, the time
/// since it accepted and the bytes received so far (sent when it ends).
fn sink() -> (String, mpsc::Receiver<Vec<(Duration, usize)>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let start = Instant::now();
        let (mut total, mut seen) = (0, Vec::new());
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            seen.push((start.elapsed(), total));
        }
        let _ = tx.send(seen);
    });
    (addr, rx)
}

/// Send `n` bytes through the proxy at `listen` and close; what the sink saw.
fn send(
    listen: &str,
    n: usize,
    rx: mpsc::Receiver<Vec<(Duration, usize)>>,
) -> Vec<(Duration, usize)> {
    let mut c = connect(listen);
    c.write_all(&vec![7u8; n]).unwrap();
    drop(c);
    rx.recv_timeout(Duration::from_secs(60)).unwrap()
}

/// Bytes received by `t` (the last read at or before it).
fn by(seen: &[(Duration, usize)], t: Duration) -> usize {
    seen.iter()
        .take_while(|(at, _)| *at <= t)
        .last()
        .map_or(0, |(_, b)| *b)
}

fn add(api: &Api, proxy: &str, body: &Value) -> (u16, String) {
    let r = api.route(
        "POST",
        &format!("/proxies/{proxy}/toxics"),
        &body.to_string(),
    );
    (r.status, r.body)
}

#[test]
fn a_constant_trace_of_one_carries_1504_stream_bytes_a_millisecond() {
    let api = Api::default();
    let (upstream, rx) = sink();
    let listen = proxy(&api, "lte", &upstream);
    let toxic = serde_json::json!({
        "type": "bandwidth", "stream": "upstream", "attributes": {"trace": "1\n"}
    });
    let (status, body) = add(&api, "lte", &toxic);
    assert_eq!(status, 200, "{body}");
    let seen = send(&listen, 1_504_000, rx);
    assert_eq!(seen.last().unwrap().1, 1_504_000);
    // From the first read to the last: 1000 opportunities, less the first.
    let (first, last) = (seen[0].0, seen.last().unwrap().0);
    let ms = (last - first).as_secs_f64() * 1e3;
    let rate = (1_504_000 - seen[0].1) as f64 / ms;
    assert!(
        (rate - 1504.0).abs() <= 1504.0 * 0.04,
        "{rate:.0} bytes/ms over {ms:.0} ms"
    );
}

#[test]
fn a_schedule_step_changes_the_rate_at_its_time() {
    let api = Api::default();
    let (upstream, rx) = sink();
    let listen = proxy(&api, "steps", &upstream);
    // 8 Mbit/s (1000 bytes/ms) for 500 ms, then 2 Mbit/s (250 bytes/ms).
    let toxic = serde_json::json!({
        "type": "bandwidth", "stream": "upstream",
        "attributes": {"rate": 0, "schedule": "at,rate,delay,loss\n0s,8mbit,,\n500ms,2mbit,,\n"}
    });
    let (status, body) = add(&api, "steps", &toxic);
    assert_eq!(status, 200, "{body}");
    let seen = send(&listen, 800_000, rx);
    assert_eq!(seen.last().unwrap().1, 800_000);
    let ms = Duration::from_millis;
    let rate = |a: u64, b: u64| (by(&seen, ms(b)) - by(&seen, ms(a))) as f64 / (b - a) as f64;
    let (before, after) = (rate(100, 450), rate(600, 1400));
    assert!(
        (before - 1000.0).abs() <= 60.0,
        "{before:.0} bytes/ms before"
    );
    assert!((after - 250.0).abs() <= 15.0, "{after:.0} bytes/ms after");
    // The step came at 500 ms: about 500 000 bytes by then.
    let at_step = by(&seen, ms(500));
    assert!(
        (470_000..=530_000).contains(&at_step),
        "{at_step} by 500 ms"
    );
    // And the rest took 300 000 / 250 ms more.
    let end = seen.last().unwrap().0.as_millis();
    assert!((1650..=1800).contains(&end), "done at {end} ms");
}

#[test]
fn a_latency_delay_trace_delays_each_echo() {
    let api = Api::default();
    let listen = proxy(&api, "delays", &echo());
    let toxic = serde_json::json!({
        "type": "latency", "attributes": {"delay_trace": "40\n", "delay_trace_step": 10}
    });
    let (status, body) = add(&api, "delays", &toxic);
    assert_eq!(status, 200, "{body}");
    let mut c = connect(&listen);
    for _ in 0..3 {
        let t = Instant::now();
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).unwrap();
        let rtt = t.elapsed().as_millis();
        assert!((40..200).contains(&rtt), "{rtt} ms");
    }
}

#[test]
fn bad_attributes_are_refused_with_the_line_and_change_nothing() {
    let api = Api::default();
    proxy(&api, "bad", &echo());
    let refused = |attrs: Value, type_name: &str| -> String {
        let body = serde_json::json!({"name": "x", "type": type_name, "attributes": attrs});
        let (status, body) = add(&api, "bad", &body);
        assert_eq!(status, 400, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["error"].as_str().unwrap().to_string()
    };
    let e = refused(serde_json::json!({"trace": "1\n2\nfast\n"}), "bandwidth");
    assert!(
        e.contains("attribute trace: line 3: \"fast\" is not a whole number"),
        "{e}"
    );
    let e = refused(serde_json::json!({"trace": "5\n3\n"}), "bandwidth");
    assert!(e.contains("line 2: timestamp 3 is before"), "{e}");
    let e = refused(
        serde_json::json!({"schedule": "0s,1mbit,,\n0s,2mbit,,\n"}),
        "bandwidth",
    );
    assert!(
        e.contains("attribute schedule: line 2: rows must be in order"),
        "{e}"
    );
    let e = refused(serde_json::json!({"schedule": "0s,,10ms,\n"}), "bandwidth");
    assert!(e.contains("no row sets a rate"), "{e}");
    let e = refused(
        serde_json::json!({"trace": "1", "schedule": "0s,1mbit,,"}),
        "bandwidth",
    );
    assert!(e.contains("exclude each other"), "{e}");
    let e = refused(
        serde_json::json!({"trace_file": "/etc/passwd"}),
        "bandwidth",
    );
    assert!(e.contains("trace_file is not taken"), "{e}");
    let e = refused(serde_json::json!({"delay_trace": "10\n-1\n"}), "latency");
    assert!(e.contains("attribute delay_trace: line 2"), "{e}");
    let e = refused(
        serde_json::json!({"delay_trace": "10", "delay_trace_step": 0}),
        "latency",
    );
    assert!(e.contains("delay_trace_step"), "{e}");
    let e = refused(serde_json::json!({"trace": 1}), "bandwidth");
    assert!(e.contains("cannot unmarshal 1 into attribute trace"), "{e}");
    let r = api.route("GET", "/proxies/bad/toxics", "");
    assert_eq!(r.body, "[]");

    // A good one reads back with its attributes; a bad update leaves it so.
    let good =
        serde_json::json!({"name": "lte", "type": "bandwidth", "attributes": {"trace": "1\n1\n"}});
    let (status, created) = add(&api, "bad", &good);
    assert_eq!(status, 200, "{created}");
    let v: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(v["attributes"]["trace"], "1\n1\n");
    assert_eq!(v["attributes"]["trace_once"], false);
    let r = api.route(
        "POST",
        "/proxies/bad/toxics/lte",
        r#"{"attributes":{"trace":"1\nx\n"}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("line 2"), "{}", r.body);
    let r = api.route("GET", "/proxies/bad/toxics/lte", "");
    assert_eq!(r.body, created);
    // Cleared: a Toxiproxy toxic again.
    let r = api.route(
        "POST",
        "/proxies/bad/toxics/lte",
        r#"{"attributes":{"trace":null,"rate":500}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["attributes"], serde_json::json!({"rate": 500}));
    // A Toxiproxy toxic's JSON has Toxiproxy's attributes only.
    let plain = serde_json::json!({"name": "bw", "type": "bandwidth", "attributes": {"rate": 10}});
    let (_, body) = add(&api, "bad", &plain);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["attributes"], serde_json::json!({"rate": 10}));
}
