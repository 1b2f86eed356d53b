//! Many UDP sessions through one proxy: each client's datagrams come back
//! whole through a session of its own, all carried by the proxy's one
//! event loop, and a corrupting `tc` toxic loses datagrams rather than
//! delivering flipped bits.
//!
//! This file holds one test, so that the process's thread count is the
//! proxy's and this test's own.

mod common;

use common::threads;
use sluice_proxy::api::Api;
use std::net::UdpSocket;
use std::time::Duration;

const CLIENTS: usize = 200;

#[test]
fn two_hundred_udp_sessions_on_one_thread_and_corruption_is_loss() {
    let up = common::udp_echo();
    let before = threads();
    let api = Api::default();
    let listen = common::udp_proxy(&api, "u", up);
    let clients: Vec<UdpSocket> = (0..CLIENTS)
        .map(|_| {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.connect(&listen).unwrap();
            c
        })
        .collect();
    // One client after another (a burst of 200 datagrams into one socket
    // could overflow its receive buffer, as it would anywhere); each
    // session stays open after its echo.
    let mut buf = [0u8; 2048];
    for (i, c) in clients.iter().enumerate() {
        c.send(&[i as u8; 300]).unwrap();
        let n = c
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("client {i}: {e}"));
        assert_eq!(&buf[..n], &[i as u8; 300][..], "client {i}");
    }
    // 200 sessions open: one event loop for them all (a thread or more per
    // session would be 200+).
    let during = threads();
    assert!(
        during <= before + 2,
        "{during} threads with {CLIENTS} sessions open, {before} before the proxy"
    );

    // netem flips a bit in half the datagrams; the receiver's UDP checksum
    // drops those: about half come back, every one as it was sent.
    let r = api.route(
        "POST",
        "/proxies/u/toxics",
        r#"{"type":"tc","stream":"upstream","attributes":{"qdisc":"netem corrupt 50%"}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &clients[0];
    // (Loopback echoes take well under a millisecond: a datagram not back
    // in 100 ms was lost.)
    c.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut back = 0;
    for k in 0..60u8 {
        c.send(&[k; 200]).unwrap();
        if let Ok(n) = c.recv(&mut buf) {
            assert_eq!(
                &buf[..n],
                &[buf[0]; 200][..],
                "a datagram came back changed"
            );
            back += 1;
        }
    }
    assert!((10..50).contains(&back), "{back} of 60 came back");
}
