//! The data path of a TCP proxy through real sockets on the loopback:
//! corruption, half-close, flow control, an unreachable upstream.

mod common;

use common::{connect, echo, proxy};

use sluice_proxy::api::Api;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener};
use std::thread;
use std::time::Duration;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_corrupting_tc_toxic_delivers_every_byte_intact() {
    // netem flips a bit in half the segments each way; TCP's checksum
    // drops those and they are sent again: the program sees no flipped bit.
    let api = Api::default();
    let listen = proxy(&api, "corrupt", &echo());
    for stream in ["upstream", "downstream"] {
        let r = api.route(
            "POST",
            "/proxies/corrupt/toxics",
            &format!(
                r#"{{"name":"c{stream}","type":"tc","stream":"{stream}","attributes":{{"qdisc":"netem corrupt 50%"}}}}"#
            ),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut s = connect(&listen);
    let sent = data(30_000);
    s.write_all(&sent).unwrap();
    let mut got = vec![0u8; sent.len()];
    s.read_exact(&mut got).unwrap();
    let bad = got.iter().zip(&sent).filter(|(a, b)| a != b).count();
    assert_eq!(bad, 0, "{bad} of {} bytes differ", sent.len());
}

#[test]
fn a_half_close_passes_through_and_the_other_way_goes_on() {
    // A server that reads to the end, then answers and closes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        c.write_all(format!("got {}", all.len()).as_bytes())
            .unwrap();
    });
    let api = Api::default();
    let listen = proxy(&api, "half", &upstream);
    let mut s = connect(&listen);
    s.write_all(&data(100_000)).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "got 100000");
}

#[test]
fn a_server_that_does_not_read_stops_the_client_through_flow_control() {
    // The proxy reads no more than its window ahead of what it could write:
    // the client's writes stop once the buffers on the way are full (a few
    // MiB of kernel buffers on the loopback), never growing without bound.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = l.local_addr().unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        // Hold the connection, never reading.
        let _ = rx.recv();
        drop(c);
    });
    let api = Api::default();
    let listen = proxy(&api, "slow", &upstream);
    let mut s = connect(&listen);
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    let mut sent = 0usize;
    loop {
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e} after {sent} bytes"),
        }
        assert!(
            sent < 256 << 20,
            "256 MiB taken from a client whose server reads nothing"
        );
    }
    tx.send(()).unwrap();
}

#[test]
fn an_unreachable_upstream_closes_the_client() {
    // A port nothing listens on (bound, then closed).
    let upstream = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let api = Api::default();
    let listen = proxy(&api, "nowhere", &upstream);
    let mut s = connect(&listen);
    let mut buf = [0u8; 16];
    // Closed: an end (or a reset), never bytes, never a hang.
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    // The proxy still serves the next client the same way.
    let mut s = connect(&listen);
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
}

#[test]
fn toxicity_is_drawn_for_each_connection() {
    // A limit_data of 0 bytes at toxicity 0.5: a connection it acts on is
    // closed before any byte passes, one it spares echoes. Toxiproxy draws
    // once per connection, so 40 connections show both (all alike: 2^-39).
    let api = Api::default();
    let listen = proxy(&api, "some", &echo());
    let r = api.route(
        "POST",
        "/proxies/some/toxics",
        r#"{"type":"limit_data","stream":"upstream","toxicity":0.5,"attributes":{"bytes":0}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (mut cut, mut whole) = (0, 0);
    for _ in 0..40 {
        let mut s = connect(&listen);
        // (A write into a connection the proxy already closed may fail.)
        let _ = s.write_all(b"ping");
        let _ = s.shutdown(Shutdown::Write);
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        match got.as_slice() {
            b"" => cut += 1,
            b"ping" => whole += 1,
            other => panic!("{other:?}"),
        }
        drop(s);
    }
    assert!(cut > 0 && whole > 0, "{cut} cut, {whole} whole");
}
