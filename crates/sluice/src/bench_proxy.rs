//! `sluice bench proxy`: what `sluice proxy` costs and how exactly it
//! shapes, measured on the loopback in-process: bulk TCP through a proxy
//! without toxics against the same without the proxy, the round-trip time a
//! proxy adds to small echoes, and a bandwidth and a latency toxic against
//! their settings. One machine-readable line per case.

use sluice_proxy::api::Api;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: sluice bench proxy [--quick]
  bulk       one TCP stream for 2 s, direct and through a proxy without toxics
  rtt        1000 echoes of 64 bytes, direct and through the proxy (p50, p99)
  bandwidth  a `bandwidth` toxic of 10000 KB/s: the rate a bulk stream gets
  latency    a `latency` toxic of 10 ms: p50 echo time less the proxied p50
";

/// A server that echoes (or, `sink`, reads and discards) on each
/// connection; returns its address and the count of bytes it received.
fn server(sink: bool) -> (String, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind the loopback");
    let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let received = Arc::new(AtomicU64::new(0));
    let count = received.clone();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let count = count.clone();
            thread::spawn(move || {
                let _ = c.set_nodelay(true);
                let mut buf = vec![0u8; 256 * 1024];
                while let Ok(n) = c.read(&mut buf) {
                    count.fetch_add(n as u64, Ordering::Relaxed);
                    if n == 0 || (!sink && c.write_all(&buf[..n]).is_err()) {
                        break;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// A proxy to `upstream` with the toxic `toxic` (a JSON body), if any.
fn proxy(api: &Api, name: &str, upstream: &str, toxic: Option<&str>) -> String {
    let body = format!(r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{upstream}"}}"#);
    let r = api.route("POST", "/proxies", &body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
    if let Some(t) = toxic {
        api.route("POST", &format!("/proxies/{name}/toxics"), t);
    }
    v["listen"].as_str().unwrap_or_default().to_string()
}

/// Bytes per second the server counting in `received` gets from one
/// stream written to `addr` as fast as it goes, over `secs` after a
/// quarter second to fill the buffers.
fn bulk(addr: &str, received: &AtomicU64, secs: f64) -> f64 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0.0;
    };
    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        thread::spawn(move || {
            let buf = vec![0x5au8; 256 * 1024];
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = s.write(&buf) {
                    if e.kind() != std::io::ErrorKind::WouldBlock {
                        break;
                    }
                }
            }
        })
    };
    thread::sleep(Duration::from_millis(250));
    let (c0, t0) = (received.load(Ordering::Relaxed), Instant::now());
    thread::sleep(Duration::from_secs_f64(secs));
    let (c1, el) = (received.load(Ordering::Relaxed), t0.elapsed().as_secs_f64());
    stop.store(true, Ordering::Relaxed);
    let _ = writer.join();
    (c1 - c0) as f64 / el
}

/// Echo times of `n` 64-byte messages to `addr`, sorted, in µs.
fn echoes(addr: &str, n: usize) -> Vec<f64> {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return vec![0.0];
    };
    let _ = s.set_nodelay(true);
    let mut times = Vec::with_capacity(n);
    let mut buf = [0u8; 64];
    for _ in 0..n {
        let t = Instant::now();
        if s.write_all(&[1u8; 64]).is_err() || s.read_exact(&mut buf).is_err() {
            break;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    times
}

fn pct(v: &[f64], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p) as usize)
        .copied()
        .unwrap_or(0.0)
}

/// Run `sluice bench proxy`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut secs = 2.0;
    let mut n = 1000;
    for a in args {
        match a.as_str() {
            "--quick" | "-q" => (secs, n) = (0.5, 200),
            "-h" | "--help" | "help" => {
                print!("{USAGE}");
                return 0;
            }
            other => {
                eprintln!("sluice bench proxy: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    if cfg!(debug_assertions) {
        eprintln!("sluice bench: this is a debug build; use --release for real figures");
    }
    let api = Api::default();
    let ((sink, received), (echo, _)) = (server(true), server(false));
    let direct = bulk(&sink, &received, secs);
    let proxied = bulk(&proxy(&api, "bulk", &sink, None), &received, secs);
    println!(
        "proxy=tcp case=bulk gbps={:.2} direct_gbps={:.2}",
        proxied * 8e-9,
        direct * 8e-9
    );
    let d = echoes(&echo, n);
    let p = echoes(&proxy(&api, "rtt", &echo, None), n);
    println!(
        "proxy=tcp case=rtt p50_us={:.1} p99_us={:.1} direct_p50_us={:.1} direct_p99_us={:.1}",
        pct(&p, 0.5),
        pct(&p, 0.99),
        pct(&d, 0.5),
        pct(&d, 0.99)
    );
    let toxic = r#"{"type":"bandwidth","stream":"upstream","attributes":{"rate":10000}}"#;
    let got = bulk(
        &proxy(&api, "bw", &sink, Some(toxic)),
        &received,
        secs.max(2.0),
    );
    println!(
        "proxy=tcp case=bandwidth rate_kBps=10000 measured_kBps={:.0}",
        got / 1000.0
    );
    let toxic = r#"{"type":"latency","attributes":{"latency":10}}"#;
    let l = echoes(&proxy(&api, "lat", &echo, Some(toxic)), n / 10);
    println!(
        "proxy=tcp case=latency latency_ms=10 added_p50_ms={:.3} added_p99_ms={:.3}",
        (pct(&l, 0.5) - pct(&p, 0.5)) / 1000.0,
        (pct(&l, 0.99) - pct(&p, 0.5)) / 1000.0
    );
    api.shutdown();
    0
}
