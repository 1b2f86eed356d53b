//! The API's HTTP server over real sockets: every request is bounded in
//! size and time and answered with the status a server gives it, no client
//! can take the server down or keep others out, requests keep a
//! connection alive, names are percent-decoded, and Toxiproxy's clients'
//! requests (Content-Length bodies, `Expect: 100-continue`, chunked
//! bodies) are served. Statuses are RFC 9110/9112's; the timeouts are
//! shortened so that a test waits for their effect, never measures it.

mod common;

use serde_json::Value;
use sluice_proxy::api::{self, Api, Limits};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// A server with these limits; its address and API.
fn start(limits: impl FnOnce(&mut Limits)) -> (SocketAddr, Arc<Api>) {
    let mut server = api::bind("127.0.0.1:0").unwrap();
    limits(&mut server.limits);
    let addr = server.local_addr().unwrap();
    let api = Arc::new(Api::default());
    let served = api.clone();
    thread::spawn(move || api::serve(served, server));
    (addr, api)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Read until the server closes (a reset after its answer counts as a close).
fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read: {e} after {:?}", String::from_utf8_lossy(&out)),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Send `req` on a fresh connection, close the sending side, read to the end.
fn exchange(addr: SocketAddr, req: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(req).unwrap();
    let _ = s.shutdown(Shutdown::Write);
    read_all(&mut s)
}

/// Read one answer (a head and a Content-Length body) off a kept-alive connection.
fn read_answer(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed after {out:?}");
        out.push(byte[0]);
    }
    let head = String::from_utf8(out).unwrap();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    head + &String::from_utf8(body).unwrap()
}

fn assert_alive(addr: SocketAddr) {
    let r = exchange(
        addr,
        b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.ends_with("{\"version\": \"2.12.0\"}\n"), "{r}");
}

#[test]
fn a_huge_content_length_is_refused_without_allocating_it() {
    let (addr, _) = start(|_| {});
    // 10^12 bytes announced, one sent, then the client's side closed: the
    // server used to allocate the rest to drain it, and abort.
    let r = exchange(
        addr,
        b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n{",
    );
    assert!(
        r.starts_with("HTTP/1.1 413 Request Entity Too Large\r\n"),
        "{r}"
    );
    assert!(r.contains("Connection: close\r\n"), "{r}");
    assert_alive(addr);
    // The same without waiting for the answer.
    let mut s = connect(addr);
    s.write_all(b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n{")
        .unwrap();
    drop(s);
    assert_alive(addr);
    // Beyond u64, and not a number.
    for cl in ["99999999999999999999999", "12a", "-1", "1, 2"] {
        let r = exchange(
            addr,
            format!("POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: {cl}\r\n\r\n{{}}")
                .as_bytes(),
        );
        assert!(r.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{cl}: {r}");
    }
    assert_alive(addr);
}

#[test]
fn bodies_heads_and_targets_beyond_their_limits_get_413_431_and_414() {
    let (addr, api) = start(|l| l.body = 1000);
    let limits = Limits::default();
    // A body of 1001 bytes, announced: refused before it is sent.
    let r = exchange(
        addr,
        b"POST /populate HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
    // Chunked, growing past the limit.
    let mut req =
        b"POST /populate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"190\r\n");
        req.extend_from_slice(&[b' '; 400]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = exchange(addr, &req);
    assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
    // A header block of more than 64 KiB, in fields of 1 KiB.
    let mut req = b"GET /version HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..(limits.head / 1024 + 1).min(60) {
        req.extend_from_slice(format!("X-{i}: {}\r\n", "a".repeat(1100)).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    let r = exchange(addr, &req);
    assert!(
        r.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{r}"
    );
    // More header fields than the server takes.
    let mut req = b"GET /version HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..api::MAX_HEADERS {
        req.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    let r = exchange(addr, &req);
    assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
    // A target of 8 KiB and more.
    let long = format!("/proxies/{}", "a".repeat(limits.target));
    let r = exchange(
        addr,
        format!("GET {long} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    );
    assert!(
        r.starts_with("HTTP/1.1 414 Request URI Too Long\r\n"),
        "{r}"
    );
    // A request line of 1 MiB with no end: refused once past the limit.
    let mut s = connect(addr);
    let mut line = b"GET /".to_vec();
    line.extend(std::iter::repeat_n(b'a', 1 << 20));
    let _ = s.write_all(&line);
    let r = read_all(&mut s);
    assert!(r.starts_with("HTTP/1.1 414 "), "{r}");
    // Nothing was created, and the server answers.
    assert_eq!(api.route("GET", "/proxies", "").body, "{}");
    assert_alive(addr);
}

#[test]
fn a_slow_or_idle_client_neither_blocks_others_nor_holds_on_forever() {
    let (addr, _) = start(|l| {
        l.read = Duration::from_millis(300);
        l.idle = Duration::from_millis(300);
    });
    // A head that never ends, and a connection that never sends.
    let mut slow = connect(addr);
    slow.write_all(b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    let mut idle = connect(addr);
    // Others are served meanwhile.
    assert_alive(addr);
    // The slow one gets 408 once its time is up; the idle one is closed.
    let r = read_all(&mut slow);
    assert!(r.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{r}");
    assert_eq!(read_all(&mut idle), "");
    // A body that stops short: 408 as well.
    let mut s = connect(addr);
    s.write_all(b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"na")
        .unwrap();
    let r = read_all(&mut s);
    assert!(r.starts_with("HTTP/1.1 408 "), "{r}");
    // A kept-alive connection is closed after the idle time.
    let mut s = connect(addr);
    s.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let r = read_all(&mut s);
    assert!(
        r.starts_with("HTTP/1.1 200 ") && !r.contains("Connection: close"),
        "{r}"
    );
}

#[test]
fn a_connection_beyond_the_limit_takes_the_place_of_the_longest_waiting() {
    let (addr, _) = start(|l| l.connections = 2);
    // A kept-alive connection, served once; it then waits for a request.
    // (503 while closed connections' threads are still ending: at most
    // twice the limit run at once.)
    let served = || {
        for _ in 0..500 {
            let mut s = connect(addr);
            s.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let r = read_answer(&mut s);
            if r.starts_with("HTTP/1.1 200 ") {
                return s;
            }
            assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
            thread::sleep(Duration::from_millis(10));
        }
        panic!("never served");
    };
    let mut a = served();
    let mut b = served();
    // Both places are taken: each new client is served all the same, in
    // the place of the connection that has waited longest, which is closed.
    let c = served();
    assert_eq!(read_all(&mut a), "");
    let d = served();
    assert_eq!(read_all(&mut b), "");
    // A client sending its request slowly takes c's place, e d's...
    let mut slow = connect(addr);
    slow.write_all(b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    let e = served();
    // ... and, having waited longest, gives its own to the next.
    let _f = served();
    let r = read_all(&mut slow);
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 400 "), "{r}");
    drop((c, d, e));
}

#[test]
fn requests_keep_the_connection_alive_and_are_answered_in_order() {
    let (addr, _) = start(|_| {});
    let mut s = connect(addr);
    let body = r#"{"name":"k","upstream":"x:1","enabled":false}"#;
    // Two requests in one write (pipelined), then a third.
    s.write_all(
        format!(
            "POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}GET /proxies/k HTTP/1.1\r\nHost: x\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let a = read_answer(&mut s);
    assert!(a.starts_with("HTTP/1.1 201 Created\r\n"), "{a}");
    assert!(a.contains("Content-Type: application/json\r\n"), "{a}");
    assert!(a.contains("X-Toxiproxy-Request-Id: "), "{a}");
    assert!(a.contains("\r\nDate: ") && a.contains(" GMT\r\n"), "{a}");
    let b = read_answer(&mut s);
    assert!(b.starts_with("HTTP/1.1 200 OK\r\n"), "{b}");
    assert!(b.ends_with(r#""enabled":false,"toxics":[]}"#), "{b}");
    // A 204 has no body and no length; the connection stays open.
    s.write_all(b"DELETE /proxies/k HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let c = read_answer(&mut s);
    assert!(c.starts_with("HTTP/1.1 204 No Content\r\n"), "{c}");
    assert!(
        !c.contains("Content-Length") && !c.contains("Content-Type"),
        "{c}"
    );
    // HEAD: the length, no body.
    s.write_all(b"HEAD /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let d = read_all(&mut s);
    assert!(
        d.starts_with("HTTP/1.1 405 ") && d.ends_with("\r\n\r\n"),
        "{d}"
    );
    // An absolute-form target (RFC 9112 §3.2.2) is served as its path.
    let r = exchange(
        addr,
        b"GET http://127.0.0.1:8474/version HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    // HTTP/1.0 closes unless asked to keep alive.
    let r = exchange(addr, b"GET /version HTTP/1.0\r\n\r\n");
    assert!(
        r.starts_with("HTTP/1.0 200 OK\r\n") && r.contains("Connection: close\r\n"),
        "{r}"
    );
    let mut s = connect(addr);
    s.write_all(b"GET /version HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let r = read_answer(&mut s);
    assert!(r.contains("Connection: keep-alive\r\n"), "{r}");
    s.write_all(b"GET /version HTTP/1.0\r\n\r\n").unwrap();
    assert!(read_all(&mut s).starts_with("HTTP/1.0 200 "));
}

#[test]
fn chunked_bodies_and_expect_continue_are_served_and_other_codings_refused() {
    let (addr, api) = start(|_| {});
    // Chunked, with an extension and a trailer field.
    let r = exchange(
        addr,
        b"POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          10;ext=1\r\n{\"name\":\"c\",\"ups\r\n1e\r\ntream\":\"x:1\",\"enabled\":false}\r\n0\r\nX-T: 1\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 201 "), "{r}");
    assert_eq!(api.route("GET", "/proxies/c", "").status, 200);
    // Expect: 100-continue (curl sends it for larger bodies): the interim
    // answer first, then the body is read.
    let body = r#"{"name":"e","upstream":"x:1","enabled":false}"#;
    let mut s = connect(addr);
    s.write_all(
        format!(
            "POST /proxies HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(body.as_bytes()).unwrap();
    assert!(read_all(&mut s).starts_with("HTTP/1.1 201 "));
    for (req, status) in [
        // A coding the server does not know (Go's server: the same).
        ("POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "501 Not Implemented"),
        // Both framings: refused (RFC 9112 §6.3).
        ("POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", "400 Bad Request"),
        ("POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400 Bad Request"),
        ("POST /proxies HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n", "417 Expectation Failed"),
        ("GET /version HTTP/2.0\r\nHost: x\r\n\r\n", "505 HTTP Version Not Supported"),
        ("GET\x01 /version HTTP/1.1\r\n\r\n", "400 Bad Request"),
    ] {
        let r = exchange(addr, req.as_bytes());
        assert!(r.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{req:?}: {r}");
    }
    assert_alive(addr);
}

#[test]
fn percent_encoded_names_are_decoded_as_gos_router_does() {
    let (addr, api) = start(|_| {});
    let send = |method: &str, target: &str, body: &str| {
        exchange(
            addr,
            format!(
                "{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    let r = send(
        "POST",
        "/proxies",
        r#"{"name":"a b","upstream":"x:1","enabled":false}"#,
    );
    assert!(r.starts_with("HTTP/1.1 201 "), "{r}");
    let r = send("GET", "/proxies/a%20b", "");
    assert!(
        r.starts_with("HTTP/1.1 200 ") && r.contains(r#""name":"a b""#),
        "{r}"
    );
    // A toxic whose name holds a space and a slash (the clients encode both).
    let r = send(
        "POST",
        "/proxies/a%20b/toxics",
        r#"{"name":"x y/z","type":"latency","attributes":{"latency":5}}"#,
    );
    assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
    let r = send("GET", "/proxies/a%20b/toxics/x%20y%2Fz", "");
    assert!(
        r.starts_with("HTTP/1.1 200 ") && r.contains(r#""name":"x y/z""#),
        "{r}"
    );
    let r = send(
        "PATCH",
        "/proxies/a%20b/toxics/x%20y%2fz",
        r#"{"attributes":{"latency":7}}"#,
    );
    assert!(r.contains(r#""latency":7"#), "{r}");
    assert!(send("DELETE", "/proxies/a%20b/toxics/x%20y%2Fz", "").starts_with("HTTP/1.1 204 "));
    assert!(send("DELETE", "/proxies/a%20b", "").starts_with("HTTP/1.1 204 "));
    assert_eq!(api.route("GET", "/proxies", "").body, "{}");
    // `+` is not a space in a path; a malformed escape is 400.
    assert!(send(
        "POST",
        "/proxies",
        r#"{"name":"a+b","upstream":"x:1","enabled":false}"#
    )
    .starts_with("HTTP/1.1 201 "));
    assert!(send("GET", "/proxies/a+b", "").starts_with("HTTP/1.1 200 "));
    for bad in [
        "/proxies/a%2",
        "/proxies/a%zz",
        "/proxies/%",
        "/proxies/a%20b/toxics/%g0",
    ] {
        let r = send("GET", bad, "");
        assert!(r.starts_with("HTTP/1.1 400 "), "{bad}: {r}");
    }
    // Not UTF-8 once decoded: names nothing.
    assert!(send("GET", "/proxies/%FF", "").starts_with("HTTP/1.1 404 "));
}

/// The fields of a 400's envelope.
fn refused(r: &api::Reply) -> String {
    assert_eq!(r.status, 400, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    v["error"].as_str().unwrap().to_string()
}

#[test]
fn latency_beyond_what_netem_takes_is_refused_never_wrapped() {
    let api = common::stopped_proxy();
    // 4 294 968 ms is 2^32 µs and a little: it used to act as ~1 ms.
    // netem's delay is 2^32 ticks of 64 ns at most (iproute2's get_ticks):
    // 274 877 ms.
    for (attr, v) in [
        ("latency", 4_294_968i64),
        ("latency", 274_878),
        ("jitter", 274_878),
        ("latency", i64::MAX),
    ] {
        let r = api.route(
            "POST",
            "/proxies/p/toxics",
            &format!(r#"{{"type":"latency","attributes":{{"{attr}":{v}}}}}"#),
        );
        let e = refused(&r);
        assert_eq!(
            e,
            format!("bad request body: latency: attribute {attr} is {v} ms, at most 274877 ms")
        );
    }
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        r#"{"type":"latency","attributes":{"latency":274877,"jitter":274877}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // An update past the limit changes nothing.
    let r = api.route(
        "PATCH",
        "/proxies/p/toxics/latency_downstream",
        r#"{"attributes":{"latency":4294968}}"#,
    );
    refused(&r);
    let t: Value = serde_json::from_str(
        &api.route("GET", "/proxies/p/toxics/latency_downstream", "")
            .body,
    )
    .unwrap();
    assert_eq!(t["attributes"]["latency"], 274877);
}

#[test]
fn every_toxic_attribute_is_carried_out_or_refused_never_wrapped() {
    let api = common::stopped_proxy();
    // Past the largest value each can be carried out with: named, refused.
    let ns = i64::MAX / 1_000_000 + 1;
    for (kind, attr, v, message) in [
        (
            "bandwidth",
            "rate",
            i64::MAX / 8000 + 1,
            format!(
                "bandwidth: attribute rate is {} KB/s, at most {} KB/s",
                i64::MAX / 8000 + 1,
                i64::MAX / 8000
            ),
        ),
        (
            "slow_close",
            "delay",
            ns,
            format!(
                "slow_close: attribute delay is {ns} ms, at most {} ms",
                ns - 1
            ),
        ),
        (
            "timeout",
            "timeout",
            ns,
            format!(
                "timeout: attribute timeout is {ns} ms, at most {} ms",
                ns - 1
            ),
        ),
        (
            "reset_peer",
            "timeout",
            i64::MAX,
            format!(
                "reset_peer: attribute timeout is {} ms, at most {} ms",
                i64::MAX,
                ns - 1
            ),
        ),
    ] {
        let r = api.route(
            "POST",
            "/proxies/p/toxics",
            &format!(r#"{{"type":"{kind}","attributes":{{"{attr}":{v}}}}}"#),
        );
        assert_eq!(refused(&r), format!("bad request body: {message}"));
    }
    let r = api.route(
        "POST",
        "/proxies/p/toxics",
        &format!(
            r#"{{"type":"slicer","attributes":{{"average_size":10,"delay":{}}}}}"#,
            i64::MAX
        ),
    );
    assert_eq!(
        refused(&r),
        format!(
            "bad request body: slicer: attribute delay is {} us, at most {} us",
            i64::MAX,
            i64::MAX / 1000
        )
    );
    // A toxicity beyond float32 (Toxiproxy's type): Go's decoder refuses it;
    // it used to become an infinity, printed as `inf`, which is not JSON.
    for t in ["1e39", "-1e300"] {
        let r = api.route(
            "POST",
            "/proxies/p/toxics",
            &format!(r#"{{"type":"latency","toxicity":{t}}}"#),
        );
        assert!(refused(&r).contains("float32"), "{}", r.body);
    }
    assert_eq!(api.route("GET", "/proxies/p/toxics", "").body, "[]");
}

#[test]
fn toxics_at_their_extremes_carry_bytes() {
    use std::net::TcpListener;
    // An echo server.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = l.local_addr().unwrap();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 || c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let api = Api::default();
    let listen = common::proxy(&api, "x", &up.to_string());
    let (min, max) = (i64::MIN, i64::MAX);
    for body in [
        format!(
            r#"{{"name":"l","type":"latency","attributes":{{"latency":{min},"jitter":{min}}}}}"#
        ),
        format!(
            r#"{{"name":"b","type":"bandwidth","attributes":{{"rate":{}}}}}"#,
            max / 8000
        ),
        format!(
            r#"{{"name":"b2","type":"bandwidth","stream":"upstream","attributes":{{"rate":{min}}}}}"#
        ),
        format!(r#"{{"name":"d","type":"limit_data","attributes":{{"bytes":{max}}}}}"#),
        format!(
            r#"{{"name":"s","type":"slow_close","attributes":{{"delay":{}}}}}"#,
            max / 1_000_000
        ),
        format!(
            r#"{{"name":"c","type":"slicer","attributes":{{"average_size":{max},"size_variation":{max},"delay":{}}}}}"#,
            max / 1000
        ),
    ] {
        let r = api.route("POST", "/proxies/x/toxics", &body);
        assert_eq!(r.status, 200, "{body}: {}", r.body);
    }
    let mut s = TcpStream::connect(&listen).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
}

#[test]
fn dates_are_rfc_9110s_imf_fixdate() {
    // RFC 9110 §5.6.7's example, and the epoch.
    assert_eq!(
        api::http_date(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777)),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(
        api::http_date(std::time::UNIX_EPOCH),
        "Thu, 01 Jan 1970 00:00:00 GMT"
    );
    // 2000-02-29 (a leap day of a century year) and 2100-03-01.
    assert_eq!(
        api::http_date(std::time::UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "Tue, 29 Feb 2000 00:00:00 GMT"
    );
    assert_eq!(
        api::http_date(std::time::UNIX_EPOCH + Duration::from_secs(4_107_542_400)),
        "Mon, 01 Mar 2100 00:00:00 GMT"
    );
}

#[allow(dead_code)]
#[path = "../../../fuzz/src/proxy_http.rs"]
mod proxy_http;

/// The `proxy_http` fuzz target's body over its seeds and a few hostile
/// inputs (cargo-fuzz explores further, `fuzz/README.md`).
#[test]
fn fuzz_body_survives_its_seeds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/proxy_http");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(inputs.len() >= 8, "{} seeds in {dir}", inputs.len());
    inputs.extend([
        b"".to_vec(),
        b"\r\n\r\n".to_vec(),
        b"POST /proxies HTTP/1.1\r\nContent-Length: 1000000000000\r\n\r\n{".to_vec(),
        b"POST /proxies HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"
            .to_vec(),
        b"GET /proxies/%zz HTTP/1.1\r\n\r\nGET /version HTTP/1.1\r\n\r\n".to_vec(),
    ]);
    for input in &inputs {
        proxy_http::proxy_http(input);
    }
}
