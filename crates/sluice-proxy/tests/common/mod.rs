//! Helpers the proxy's integration tests share: echo servers (TCP, UDP), a proxy
//! made through the API (or one that is stopped), a client connection, the process's thread count.
// Each test file uses some of these.
#![allow(dead_code)]

use serde_json::Value;
use sluice_proxy::api::Api;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::thread;
use std::time::Duration;

/// An echo server (a thread per connection, which ends its side when the
/// client ends its); returns its address.
pub fn echo() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 || c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = c.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// A UDP echo server (one thread); returns its address.
pub fn udp_echo() -> SocketAddr {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            let _ = server.send_to(&buf[..n], from);
        }
    });
    addr
}

/// A proxy named `name` to `upstream`; returns its listen address.
pub fn proxy(api: &Api, name: &str, upstream: &str) -> String {
    let r = api.route(
        "POST",
        "/proxies",
        &format!(r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{upstream}"}}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    v["listen"].as_str().unwrap().to_string()
}

/// A UDP proxy named `name` to `upstream`; returns its listen address.
pub fn udp_proxy(api: &Api, name: &str, upstream: SocketAddr) -> String {
    let body = format!(
        r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{upstream}","protocol":"udp"}}"#
    );
    let r = api.route("POST", "/proxies", &body);
    assert_eq!(r.status, 201, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["protocol"], "udp");
    v["listen"].as_str().unwrap().to_string()
}

/// An API holding one proxy, `p`, disabled (nothing listens).
pub fn stopped_proxy() -> Api {
    let api = Api::default();
    let r = api.route(
        "POST",
        "/proxies",
        r#"{"name":"p","upstream":"x:1","enabled":false}"#,
    );
    assert_eq!(r.status, 201);
    api
}

/// A client connection without Nagle's delay, reads bounded by 30 s.
pub fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// The process's thread count (`Threads:` in /proc/self/status).
pub fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads in /proc/self/status")
}
