//! A burst of connections through one proxy: 500 opened at once (more than
//! std's listen backlog of 128), none refused or reset, every byte echoed
//! intact, all held open together, on the proxy's few event-loop threads.
//!
//! This file holds one test, so that the process's thread count is the
//! proxy's and this test's own.

mod common;

use common::threads;
use mio::net::{TcpListener, TcpStream as MioStream};
use mio::{Events, Interest, Poll, Token};
use sluice_proxy::api::Api;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::thread;
use std::time::Duration;

const CONNS: usize = 500;
const BYTES: usize = 4096;

/// An echo server on one thread, listening with the system's backlog;
/// returns its address.
fn echo() -> SocketAddr {
    let std = sluice_proxy::reactor::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = std.local_addr().unwrap();
    let mut l = TcpListener::from_std(std);
    thread::spawn(move || {
        let mut poll = Poll::new().unwrap();
        poll.registry()
            .register(&mut l, Token(0), Interest::READABLE)
            .unwrap();
        // Each connection with the bytes it still has to send back.
        let mut conns: HashMap<usize, (MioStream, Vec<u8>)> = HashMap::new();
        let mut next = 1;
        let mut events = Events::with_capacity(256);
        let mut buf = vec![0u8; 65536];
        loop {
            poll.poll(&mut events, None).unwrap();
            for ev in events.iter() {
                if ev.token() == Token(0) {
                    while let Ok((mut c, _)) = l.accept() {
                        let both = Interest::READABLE | Interest::WRITABLE;
                        poll.registry().register(&mut c, Token(next), both).unwrap();
                        conns.insert(next, (c, Vec::new()));
                        next += 1;
                    }
                    continue;
                }
                let Some((c, pending)) = conns.get_mut(&ev.token().0) else {
                    continue;
                };
                let mut done = false;
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => {
                            done = true;
                            break;
                        }
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => {
                            done = true;
                            break;
                        }
                    }
                }
                while !pending.is_empty() {
                    match c.write(pending) {
                        Ok(n) => {
                            pending.drain(..n);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => {
                            done = true;
                            break;
                        }
                    }
                }
                if done {
                    conns.remove(&ev.token().0);
                }
            }
        }
    });
    addr
}

/// What connection `i` sends.
fn payload(i: usize) -> Vec<u8> {
    (0..BYTES)
        .map(|k| (k * 13 + i * 7 + k / 256) as u8)
        .collect()
}

#[test]
fn a_burst_of_500_connections_is_carried_whole_on_a_few_threads() {
    let upstream = echo();
    let before = threads();
    let api = Api::default();
    let listen: SocketAddr = common::proxy(&api, "burst", &upstream.to_string())
        .parse()
        .unwrap();

    // All the SYNs at once: non-blocking connects, then blocking sockets
    // (a blocking write waits for its connection to be established).
    let pending: Vec<MioStream> = (0..CONNS)
        .map(|_| MioStream::connect(listen).unwrap())
        .collect();
    let mut conns: Vec<TcpStream> = pending
        .into_iter()
        // SAFETY: the descriptor moves from the mio stream to the std one.
        .map(|s| unsafe { TcpStream::from_raw_fd(s.into_raw_fd()) })
        .collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.set_nonblocking(false).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(&payload(i))
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
    }
    let mut got = vec![0u8; BYTES];
    for (i, c) in conns.iter_mut().enumerate() {
        c.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        assert!(got == payload(i), "connection {i}: the echoed bytes differ");
    }
    // Every connection is open at once: the proxy carries them on its few
    // event loops (a thread per connection or more would be 500+).
    let during = threads();
    let loops = sluice_proxy::reactor::loops_per_proxy();
    assert!(
        during <= before + loops,
        "{during} threads with {CONNS} connections open, {before} before the proxy ({loops} loops)"
    );
    // And they end cleanly: each client's FIN comes back from the server.
    for (i, c) in conns.iter_mut().enumerate() {
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(c.read(&mut got).unwrap(), 0, "connection {i}");
    }
}
