//! The body of the `proxy_http` target: raw bytes to the proxy's REST API
//! over a real socket.
//!
//! The API's HTTP server starts once per process, on 127.0.0.1:0 with the
//! default bounds but 2 s timeouts. Each input is written to a fresh
//! connection in up to four writes (cut where the input's first byte
//! says), the client's sending side is closed, and the answer read until
//! the server closes (10 s at most: a server that keeps a finished
//! client's connection open is a finding). Whatever was answered must
//! begin with a status line; then every proxy the input created is
//! deleted through the API (so inputs do not pile up listeners), and a
//! fresh connection's `GET /version` must be answered 200.

use sluice_proxy::api::{self, Api};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

struct Fixture {
    addr: SocketAddr,
    api: Arc<Api>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut server = api::bind("127.0.0.1:0").expect("bind the API");
        server.limits.read = Duration::from_secs(2);
        server.limits.idle = Duration::from_secs(2);
        let addr = server.local_addr().expect("the API's address");
        let api = Arc::new(Api::default());
        let served = api.clone();
        std::thread::spawn(move || api::serve(served, server));
        Fixture { addr, api }
    })
}

/// `%XX` for every byte but the unreserved ones (RFC 3986).
fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The input cut into up to four pieces, at points its first byte chooses.
fn pieces(data: &[u8]) -> Vec<&[u8]> {
    let Some(&first) = data.first() else {
        return vec![];
    };
    let n = data.len();
    let mut cuts: Vec<usize> = (0..3)
        .map(|i| (usize::from(first.rotate_left(3 * i)) * n / 256).min(n))
        .collect();
    cuts.push(0);
    cuts.push(n);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}

/// Send `data` on a fresh connection, close the sending side, and read the
/// answer until the server closes.
fn exchange(addr: SocketAddr, data: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect to the API");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    for piece in pieces(data) {
        // The server may have answered and closed already (a refusal).
        if s.write_all(piece).is_err() {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            // libFuzzer's timer signal.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("the server kept a finished client's connection open: {e}"),
        }
    }
    answer
}

/// Delete every proxy (names percent-encoded, as clients send them).
fn delete_all(api: &Api) {
    let list = api.route("GET", "/proxies", "");
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(&list.body) else {
        panic!("GET /proxies: {}", list.body);
    };
    for name in map.keys() {
        let r = api.route("DELETE", &format!("/proxies/{}", percent_encode(name)), "");
        assert_eq!(r.status, 204, "DELETE {name:?}: {}", r.body);
    }
}

pub fn proxy_http(data: &[u8]) {
    let f = fixture();
    let answer = exchange(f.addr, data);
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1."),
        "not an HTTP answer: {:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(200)])
    );
    delete_all(&f.api);
    let version = exchange(
        f.addr,
        b"GET /version HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n",
    );
    assert!(
        version.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "GET /version: {:?}",
        String::from_utf8_lossy(&version)
    );
}
