//! Toxiproxy's REST API (2.12): the routes, bodies, status codes and error
//! messages its clients expect.
//!
//! [`Api::route`] answers a request from its method, target and body, so
//! the whole API is testable without sockets; [`serve`] puts it behind an
//! HTTP/1.1 server of its own (below: bounded in every size and time a
//! client controls, see [`Limits`]). Errors are Toxiproxy's envelope,
//! `{"error":"...","status":N}` and a newline, as text/plain (Go's
//! `http.Error`); successes are compact JSON with the keys in Toxiproxy's
//! order. Path segments are percent-decoded after the path is split at its
//! `/`s, so any name can be addressed (`a%20b`, and `x%2Fy`, which
//! Toxiproxy's router would decode before splitting, and so not find).

use crate::conn::{self, Proxy, Shared};
use crate::toxic::{ApiError, Stream, Toxic};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The Toxiproxy version whose API this is (clients look at it to know
/// whether PATCH is understood).
pub const TOXIPROXY_VERSION: &str = "2.12.0";

/// An answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

impl Reply {
    fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            content_type: JSON,
            body,
        }
    }

    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: TEXT,
            body: body.into(),
        }
    }

    fn empty(status: u16) -> Reply {
        Reply::text(status, "")
    }
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Reply {
        Reply::text(e.status, format!("{}\n", envelope(&e)))
    }
}

/// `{"error":"...","status":N}`.
fn envelope(e: &ApiError) -> String {
    format!(
        "{{\"error\":{},\"status\":{}}}",
        Value::String(e.message.clone()),
        e.status
    )
}

fn not_found_proxy() -> ApiError {
    ApiError::new(404, "proxy not found")
}

/// A proxy as JSON, keys in Toxiproxy's order; toxics upstream first.
fn proxy_json(p: &Proxy) -> String {
    let toxics: Vec<String> = ordered(&p.toxics).map(|t| t.to_json()).collect();
    // `protocol` only for UDP proxies (sluice's own), so a TCP proxy's JSON
    // is Toxiproxy's to the byte.
    format!(
        "{{\"name\":{},\"listen\":{},\"upstream\":{},\"enabled\":{},{}\"toxics\":[{}]}}",
        Value::String(p.name.clone()),
        Value::String(p.listen.clone()),
        Value::String(p.upstream.clone()),
        p.enabled,
        if p.udp { "\"protocol\":\"udp\"," } else { "" },
        toxics.join(",")
    )
}

/// A proxy's toxics as Toxiproxy lists them: the upstream chain, then the downstream one.
fn ordered(toxics: &[Toxic]) -> impl Iterator<Item = &Toxic> {
    let up = toxics.iter().filter(|t| t.stream == Stream::Upstream);
    up.chain(toxics.iter().filter(|t| t.stream == Stream::Downstream))
}

/// Go's text for a failed bind: `listen tcp ADDR: bind: address already in use`.
fn listen_error(listen: &str, e: &str) -> ApiError {
    let e = e.split(" (os error").next().unwrap_or(e);
    let mut msg = e.to_string();
    if let Some(first) = msg.get(..1) {
        msg.replace_range(..1, &first.to_lowercase());
    }
    ApiError::new(500, format!("listen tcp {listen}: bind: {msg}"))
}

/// Where a listen address binds: `:PORT` and empty mean every address,
/// names resolve (IPv4 preferred, as Go's listener does).
fn resolve_listen(listen: &str) -> Result<SocketAddr, ApiError> {
    let spelled = if listen.is_empty() {
        "[::]:0".to_string()
    } else if listen.starts_with(':') {
        format!("[::]{listen}")
    } else {
        listen.to_string()
    };
    let addrs: Vec<SocketAddr> = spelled
        .to_socket_addrs()
        .map_err(|e| ApiError::new(500, format!("listen tcp {listen}: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| ApiError::new(500, format!("listen tcp {listen}: no address")))
}

/// The fields of a proxy in a request body, over `current` values.
struct ProxyBody {
    name: String,
    listen: String,
    upstream: String,
    enabled: bool,
    /// `"protocol": "udp"` (sluice's own; `tcp` is the default).
    udp: bool,
}

impl ProxyBody {
    /// A create request's starting values.
    fn new() -> ProxyBody {
        ProxyBody {
            name: String::new(),
            listen: String::new(),
            upstream: String::new(),
            enabled: true,
            udp: false,
        }
    }

    /// An update request's starting values: the proxy's.
    fn of(p: &Proxy) -> ProxyBody {
        ProxyBody {
            name: p.name.clone(),
            listen: p.listen.clone(),
            upstream: p.upstream.clone(),
            enabled: p.enabled,
            udp: p.udp,
        }
    }

    fn proxy(self) -> Shared {
        Arc::new(Mutex::new(Proxy::new(
            self.name,
            self.listen,
            self.upstream,
            self.enabled,
            self.udp,
        )))
    }
}

fn proxy_body(v: &Value, current: ProxyBody) -> Result<ProxyBody, ApiError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::body("json: cannot unmarshal into a proxy"))?;
    let string = |key: &str, cur: String| -> Result<String, ApiError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(cur),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(ApiError::body(format!(
                "json: cannot unmarshal {v} into Go struct field Proxy.{key} of type string"
            ))),
        }
    };
    let enabled = match obj.get("enabled") {
        None | Some(Value::Null) => current.enabled,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(ApiError::body(format!(
                "json: cannot unmarshal {v} into Go struct field Proxy.enabled of type bool"
            )))
        }
    };
    let udp = match string("protocol", (if current.udp { "udp" } else { "tcp" }).into())?.as_str() {
        "tcp" => false,
        "udp" => true,
        other => {
            return Err(ApiError::body(format!(
                "protocol {other:?}: must be tcp or udp"
            )))
        }
    };
    Ok(ProxyBody {
        name: string("name", current.name)?,
        listen: string("listen", current.listen)?,
        upstream: string("upstream", current.upstream)?,
        enabled,
        udp,
    })
}

fn parse_body(body: &str) -> Result<Value, ApiError> {
    if body.trim().is_empty() {
        return Err(ApiError::body("EOF"));
    }
    serde_json::from_str(body).map_err(ApiError::body)
}

/// A path segment with its `%XX` escapes decoded, as Go's url package
/// does (`+` stays); `None` when a `%` is not followed by two hex digits.
/// Bytes that are not UTF-8 become U+FFFD (names are JSON strings, always
/// UTF-8, so such a segment names nothing a client created).
fn percent_decode(segment: &str) -> Option<String> {
    if !segment.contains('%') {
        return Some(segment.to_string());
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// All proxies.
#[derive(Default)]
pub struct Api {
    proxies: Mutex<BTreeMap<String, Shared>>,
    requests: AtomicU64,
    /// Serve `/metrics` (Toxiproxy's `-proxy-metrics`).
    pub metrics: bool,
}

impl Api {
    fn get(&self, name: &str) -> Result<Shared, ApiError> {
        let map = self
            .proxies
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?;
        map.get(name).cloned().ok_or_else(not_found_proxy)
    }

    fn show(p: &Shared) -> String {
        p.lock().map(|p| proxy_json(&p)).unwrap_or_default()
    }

    /// Bind a proxy that is enabled; on failure it is left disabled.
    fn start(p: &Shared) -> Result<(), ApiError> {
        let listen = {
            let mut g = p.lock().map_err(|_| ApiError::new(500, "state poisoned"))?;
            if !g.enabled {
                return Ok(());
            }
            let addr = resolve_listen(&g.listen)?;
            g.listen = addr.to_string();
            g.listen.clone()
        };
        conn::start(p).map_err(|e| {
            if let Ok(mut g) = p.lock() {
                g.enabled = false;
            }
            listen_error(&listen, &e)
        })
    }

    /// Does `b` ask for another address (or protocol) than `p` has
    /// (Toxiproxy 2.12: listen compared once resolved)?
    fn differs(p: &Proxy, b: &ProxyBody) -> Result<bool, ApiError> {
        let listen = b.listen != p.listen && resolve_listen(&b.listen)?.to_string() != p.listen;
        Ok(listen || b.upstream != p.upstream || b.udp != p.udp)
    }

    fn create(&self, body: &str) -> Result<Reply, ApiError> {
        let v = parse_body(body)?;
        let b = proxy_body(&v, ProxyBody::new())?;
        if b.name.is_empty() {
            return Err(ApiError::new(400, "missing required field: name"));
        }
        if b.upstream.is_empty() {
            return Err(ApiError::new(400, "missing required field: upstream"));
        }
        let mut map = self
            .proxies
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?;
        if map.contains_key(&b.name) {
            return Err(ApiError::new(409, "proxy already exists"));
        }
        let name = b.name.clone();
        let p = b.proxy();
        Self::start(&p)?;
        map.insert(name, p.clone());
        Ok(Reply::json(201, Self::show(&p)))
    }

    fn update(&self, name: &str, body: &str) -> Result<Reply, ApiError> {
        let p = self.get(name)?;
        let v = parse_body(body)?;
        {
            let mut g = p.lock().map_err(|_| ApiError::new(500, "state poisoned"))?;
            let b = proxy_body(&v, ProxyBody::of(&g))?;
            if Self::differs(&g, &b)? {
                g.stop();
                g.enabled = false;
                g.listen = b.listen;
                g.upstream = b.upstream;
                g.udp = b.udp;
            }
            if !b.enabled {
                g.stop();
            }
            g.enabled = b.enabled;
        }
        Self::start(&p)?;
        Ok(Reply::json(200, Self::show(&p)))
    }

    fn delete(&self, name: &str) -> Result<Reply, ApiError> {
        let p = {
            let mut map = self
                .proxies
                .lock()
                .map_err(|_| ApiError::new(500, "state poisoned"))?;
            map.remove(name).ok_or_else(not_found_proxy)?
        };
        if let Ok(mut g) = p.lock() {
            g.stop();
        }
        Ok(Reply::empty(204))
    }

    /// `POST /populate`: create or replace the listed proxies.
    fn populate(&self, body: &str) -> Reply {
        let fail = |e: ApiError, done: &[String]| {
            let proxies = if done.is_empty() {
                "null".to_string()
            } else {
                format!("[{}]", done.join(","))
            };
            Reply::json(
                e.status,
                format!(
                    "{{\"error\":{},\"status\":{},\"proxies\":{proxies}}}",
                    Value::String(e.message.clone()),
                    e.status
                ),
            )
        };
        let items = match parse_body(body) {
            Ok(Value::Array(a)) => a,
            Ok(v) => {
                return fail(
                    ApiError::body(format!("json: cannot unmarshal {v} into []Proxy")),
                    &[],
                )
            }
            Err(e) => return fail(e, &[]),
        };
        let mut wanted = Vec::new();
        for (i, v) in items.iter().enumerate() {
            let b = match proxy_body(v, ProxyBody::new()) {
                Ok(b) => b,
                Err(e) => return fail(e, &[]),
            };
            for (field, value) in [("name", &b.name), ("upstream", &b.upstream)] {
                if value.is_empty() {
                    let msg = format!("missing required field: {field} at proxy {}", i + 1);
                    return fail(ApiError::new(400, msg), &[]);
                }
            }
            wanted.push(b);
        }
        let mut done = Vec::new();
        for b in wanted {
            match self.replace(b) {
                Ok(p) => done.push(Self::show(&p)),
                Err(e) => return fail(e, &done),
            }
        }
        Reply::json(201, format!("{{\"proxies\":[{}]}}", done.join(",")))
    }

    /// One proxy of a populate: kept if it asks for the same addresses,
    /// otherwise (re)created.
    fn replace(&self, b: ProxyBody) -> Result<Shared, ApiError> {
        let mut map = self
            .proxies
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?;
        if let Some(old) = map.get(&b.name).cloned() {
            let mut g = old
                .lock()
                .map_err(|_| ApiError::new(500, "state poisoned"))?;
            if !Self::differs(&g, &b)? {
                drop(g);
                return Ok(old);
            }
            g.stop();
            map.remove(&b.name);
        }
        let name = b.name.clone();
        let p = b.proxy();
        Self::start(&p)?;
        map.insert(name, p.clone());
        Ok(p)
    }

    fn reset(&self) -> Result<Reply, ApiError> {
        let all: Vec<Shared> = self
            .proxies
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?
            .values()
            .cloned()
            .collect();
        for p in all {
            if let Ok(mut g) = p.lock() {
                g.enabled = true;
            }
            Self::start(&p)?;
            if let Ok(mut g) = p.lock() {
                g.toxics.clear();
                g.toxics_changed();
            }
        }
        Ok(Reply::empty(204))
    }

    fn toxics(&self, name: &str) -> Result<Reply, ApiError> {
        let p = self.get(name)?;
        let g = p.lock().map_err(|_| ApiError::new(500, "state poisoned"))?;
        let list: Vec<String> = ordered(&g.toxics).map(|t| t.to_json()).collect();
        Ok(Reply::json(200, format!("[{}]", list.join(","))))
    }

    fn add_toxic(&self, name: &str, body: &str) -> Result<Reply, ApiError> {
        let p = self.get(name)?;
        let v = parse_body(body)?;
        let mut g = p.lock().map_err(|_| ApiError::new(500, "state poisoned"))?;
        let t = Toxic::from_json(&v, |n| g.toxics.iter().any(|t| t.name == n))?;
        let json = t.to_json();
        g.toxics.push(t);
        g.toxics_changed();
        Ok(Reply::json(200, json))
    }

    fn toxic(&self, name: &str, toxic: &str) -> Result<(Shared, usize), ApiError> {
        let p = self.get(name)?;
        let i = p
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?
            .toxics
            .iter()
            .position(|t| t.name == toxic)
            .ok_or_else(|| ApiError::new(404, "toxic not found"))?;
        Ok((p, i))
    }

    fn toxic_op(
        &self,
        method: &str,
        name: &str,
        toxic: &str,
        body: &str,
    ) -> Result<Reply, ApiError> {
        let (p, i) = self.toxic(name, toxic)?;
        let mut g = p.lock().map_err(|_| ApiError::new(500, "state poisoned"))?;
        if i >= g.toxics.len() {
            return Err(ApiError::new(404, "toxic not found"));
        }
        match method {
            "GET" => Ok(Reply::json(200, g.toxics[i].to_json())),
            "DELETE" => {
                g.toxics.remove(i);
                g.toxics_changed();
                Ok(Reply::empty(204))
            }
            _ => {
                let v = parse_body(body)?;
                let t = g.toxics[i].updated(&v)?;
                let json = t.to_json();
                g.toxics[i] = t;
                g.toxics_changed();
                Ok(Reply::json(200, json))
            }
        }
    }

    /// Answer a request. `target` is the request's, as sent: its path's
    /// segments are percent-decoded after it is split at its `/`s (a name
    /// may hold any character, `%2F` included); a malformed escape is 400.
    pub fn route(&self, method: &str, target: &str, body: &str) -> Reply {
        let path = target.split('?').next().unwrap_or(target);
        let Some(decoded) = path
            .split('/')
            .skip(1)
            .map(percent_decode)
            .collect::<Option<Vec<_>>>()
        else {
            return Reply::text(400, "400 Bad Request: invalid URL escape");
        };
        let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
        if self.metrics && parts.as_slice() == ["metrics"] {
            return self.prometheus();
        }
        let allowed: &[&str] = match parts.as_slice() {
            ["proxies"] => &["GET", "POST"],
            ["populate"] | ["reset"] => &["POST"],
            ["version"] => &["GET"],
            ["proxies", p] if !p.is_empty() => &["GET", "POST", "PATCH", "DELETE"],
            ["proxies", p, "toxics"] if !p.is_empty() => &["GET", "POST"],
            ["proxies", p, "toxics", t] if !p.is_empty() && !t.is_empty() => {
                &["GET", "POST", "PATCH", "DELETE"]
            }
            _ => return Reply::text(404, "404 page not found\n"),
        };
        if !allowed.contains(&method) {
            return Reply::empty(405);
        }
        let r = match (parts.as_slice(), method) {
            (["proxies"], "GET") => self.list(),
            (["proxies"], _) => self.create(body),
            (["populate"], _) => Ok(self.populate(body)),
            (["reset"], _) => self.reset(),
            (["version"], _) => Ok(Reply {
                status: 200,
                content_type: "application/json;charset=utf-8",
                body: format!("{{\"version\": \"{TOXIPROXY_VERSION}\"}}\n"),
            }),
            (["proxies", p], "GET") => self.get(p).map(|p| Reply::json(200, Self::show(&p))),
            (["proxies", p], "DELETE") => self.delete(p),
            (["proxies", p], _) => self.update(p, body),
            (["proxies", p, "toxics"], "GET") => self.toxics(p),
            (["proxies", p, "toxics"], _) => self.add_toxic(p, body),
            (["proxies", p, "toxics", t], m) => self.toxic_op(m, p, t, body),
            _ => Err(ApiError::new(404, "404 page not found")),
        };
        r.unwrap_or_else(Reply::from)
    }

    /// `GET /proxies`: every proxy by name.
    fn list(&self) -> Result<Reply, ApiError> {
        let map = self
            .proxies
            .lock()
            .map_err(|_| ApiError::new(500, "state poisoned"))?;
        let items: Vec<String> = map
            .iter()
            .map(|(n, p)| format!("{}:{}", Value::String(n.clone()), Self::show(p)))
            .collect();
        Ok(Reply::json(200, format!("{{{}}}", items.join(","))))
    }

    /// `/metrics`: bytes each proxy received and sent per direction, as
    /// Prometheus counters under the names Toxiproxy's `-proxy-metrics` uses.
    fn prometheus(&self) -> Reply {
        let mut rows: [Vec<String>; 2] = Default::default();
        if let Ok(map) = self.proxies.lock() {
            for p in map.values() {
                let Ok(g) = p.lock() else { continue };
                let bytes = g.bytes();
                for (d, dir) in ["upstream", "downstream"].iter().enumerate() {
                    for (w, row) in rows.iter_mut().enumerate() {
                        row.push(format!(
                            "{{direction=\"{dir}\",listener={},proxy={},upstream={}}} {}",
                            Value::String(g.listen.clone()),
                            Value::String(g.name.clone()),
                            Value::String(g.upstream.clone()),
                            bytes[d][w]
                        ));
                    }
                }
            }
        }
        let mut body = String::new();
        for (row, (name, help)) in rows.iter().zip([
            (
                "received",
                "The total bytes received from a client or an upstream",
            ),
            ("sent", "The total bytes sent to a client or an upstream"),
        ]) {
            let metric = format!("toxiproxy_proxy_{name}_bytes_total");
            body += &format!("# HELP {metric} {help}\n# TYPE {metric} counter\n");
            for r in row {
                body += &format!("{metric}{r}\n");
            }
        }
        Reply {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body,
        }
    }

    /// Create the proxies of a Toxiproxy config file (a populate body).
    pub fn load(&self, config: &str) -> Result<(), String> {
        let r = self.populate(config);
        if r.status == 201 {
            Ok(())
        } else {
            Err(r.body)
        }
    }

    /// Stop every proxy.
    pub fn shutdown(&self) {
        if let Ok(map) = self.proxies.lock() {
            for p in map.values() {
                if let Ok(mut g) = p.lock() {
                    g.stop();
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The HTTP/1.1 server.
//
// One thread accepts; each connection is served by a thread of its own, at
// most `Limits::connections` at once (beyond, a new connection takes the
// place of the one that has waited longest for a request, see `Table`). A
// connection
// reads a request head (httparse over a buffer), then its body
// (Content-Length, or chunked), answers, and waits for the next request
// (keep-alive; pipelined requests are answered in order). Everything a
// client controls is bounded before it is used: the head's size (431), the
// target's (414), the number of header fields (431), the body's announced
// and actual size (413: a body is never allocated from its announced length
// beyond the limit), the time a request may take from its first byte
// (15 s, Toxiproxy's ReadTimeout; 408), the time between requests (60 s,
// its IdleTimeout) and the time an answer may take to write (30 s, its
// WriteTimeout). A refused request closes its connection, after its answer
// is sent and what the client still sends is drained for a moment, so the
// answer is read rather than lost to a reset.

/// The bounds of the API's HTTP server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Request line and header fields, bytes (431 beyond; Go's default is 1 MiB).
    pub head: usize,
    /// The request target, bytes (414 beyond).
    pub target: usize,
    /// A body, bytes (413 beyond): a populate of thousands of proxies fits.
    pub body: usize,
    /// Connections served at once: beyond, the one that has waited longest
    /// for a request is closed (503 if every one is handling a request).
    pub connections: usize,
    /// A request, from its first byte (the first request: from the
    /// connection's opening) to its last (408 beyond).
    pub read: Duration,
    /// Waiting for the next request on a kept-alive connection.
    pub idle: Duration,
    /// Writing an answer.
    pub write: Duration,
}

impl Default for Limits {
    /// Toxiproxy's timeouts (api.go: ReadTimeout 15 s, IdleTimeout 60 s,
    /// WriteTimeout 30 s); sizes a client of the API never comes near.
    fn default() -> Limits {
        Limits {
            head: 64 * 1024,
            target: 8 * 1024,
            body: 1 << 20,
            connections: 128,
            read: Duration::from_secs(15),
            idle: Duration::from_secs(60),
            write: Duration::from_secs(30),
        }
    }
}

/// Header fields a request may have (431 beyond): httparse fills an array
/// of this size.
pub const MAX_HEADERS: usize = 64;

/// The longest chunk-size line (with extensions) of a chunked body.
const MAX_CHUNK_LINE: usize = 1024;

/// The API's listening socket and the bounds it serves within.
pub struct Server {
    listener: TcpListener,
    /// Bounds of requests and connections (tests shorten the timeouts).
    pub limits: Limits,
}

impl Server {
    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// The API's HTTP server, bound to `addr` (its port may be 0).
pub fn bind(addr: &str) -> Result<Server, String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("listen {addr}: {e}"))?;
    Ok(Server {
        listener,
        limits: Limits::default(),
    })
}

/// The connections being served, each with the time it began waiting for
/// a request (`None` while it handles one). A connection beyond the limit
/// takes the place of the one that has waited longest (idle, or sending a
/// request slowly): however many idle or slow clients there are, a new
/// client is served, and a client that was kept waiting is closed as an
/// idle keep-alive connection may be (RFC 9112 §9.8).
#[derive(Default)]
struct Table {
    entries: Mutex<std::collections::HashMap<u64, Entry>>,
    /// Threads serving a connection (evicted ones included, until they end).
    live: AtomicUsize,
}

struct Entry {
    /// The connection's socket (a second handle, to shut it down).
    stream: TcpStream,
    waiting_since: Option<Instant>,
}

impl Table {
    /// Close the connection that has waited longest for a request; false
    /// when every connection is handling one.
    fn evict(&self) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let oldest = entries
            .iter()
            .filter_map(|(id, e)| e.waiting_since.map(|t| (t, *id)))
            .min();
        let Some(e) = oldest.and_then(|(_, id)| entries.remove(&id)) else {
            return false;
        };
        // Its thread's read ends at once (an answer being written still
        // goes out whole), and the thread with it.
        let _ = e.stream.shutdown(Shutdown::Read);
        true
    }
}

/// A connection's place in the table, given back when its thread ends (or
/// is never started).
struct Slot {
    table: Arc<Table>,
    id: u64,
}

impl Slot {
    /// Give the place up: the connection is closing.
    fn leave(&self) {
        if let Ok(mut entries) = self.table.entries.lock() {
            entries.remove(&self.id);
        }
    }

    /// Mark the connection as waiting for a request since `since`, or
    /// (`None`) as handling one.
    fn waiting(&self, since: Option<Instant>) {
        if let Ok(mut entries) = self.table.entries.lock() {
            if let Some(e) = entries.get_mut(&self.id) {
                e.waiting_since = since;
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.leave();
        self.table.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serve the API until the process ends.
pub fn serve(api: Arc<Api>, server: Server) -> Result<(), String> {
    let table = Arc::new(Table::default());
    let limits = server.limits;
    for (id, stream) in server.listener.incoming().enumerate() {
        let stream = match stream {
            Ok(s) => s,
            Err(_) => {
                // Out of descriptors, or the connection was gone before
                // its accept: wait a little rather than spin.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Only this thread adds, so the counts can only fall meanwhile.
        // Connections closing (evicted, or after their last answer) hold no
        // place; their threads end within a second, and twice the limit
        // bounds them while they do.
        let places = table.entries.lock().map_or(usize::MAX, |e| e.len());
        let threads = table.live.load(Ordering::Acquire);
        if threads >= 2 * limits.connections || (places >= limits.connections && !table.evict()) {
            busy(stream);
            continue;
        }
        let Ok(handle) = stream.try_clone() else {
            busy(stream);
            continue;
        };
        table.live.fetch_add(1, Ordering::AcqRel);
        let id = id as u64;
        if let Ok(mut entries) = table.entries.lock() {
            let waiting_since = Some(Instant::now());
            entries.insert(
                id,
                Entry {
                    stream: handle,
                    waiting_since,
                },
            );
        }
        let slot = Slot {
            table: table.clone(),
            id,
        };
        let api = api.clone();
        // Without a thread to be had, the closure is dropped: the
        // connection closes and its slot is given back.
        let _ = thread::Builder::new()
            .name("sluice-api".into())
            .spawn(move || Connection::new(stream, limits, slot).serve(&api));
    }
    Ok(())
}

/// At the connection limit with every connection handling a request: 503
/// without waiting for the request (one write that fits any socket
/// buffer, never blocking the accepting thread).
fn busy(stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let _ = (&stream).write_all(plain_refusal(503, "503 Service Unavailable").as_bytes());
    let _ = stream.shutdown(Shutdown::Write);
}

/// Go's reason phrases (net/http's StatusText) for the statuses sent.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Request Entity Too Large",
        414 => "Request URI Too Long",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// An answer to a request that is not served (as Go's server words them:
/// plain text, then the connection closes).
fn plain_refusal(status: u16, text: &str) -> String {
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {TEXT}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        reason(status),
        text.len()
    )
}

/// `Date`'s form (RFC 9110 IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // 1970-01-01 was a Thursday.
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // Days to a civil date (H. Hinnant's algorithm, eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A target's path and query: an absolute-form target
/// (`http://host:port/path`, RFC 9112 §3.2.2) without its scheme and authority.
fn origin_form(target: &str) -> &str {
    let lower = |n: usize| target.get(..n).map(str::to_ascii_lowercase);
    let after = if lower(7).as_deref() == Some("http://") {
        7
    } else if lower(8).as_deref() == Some("https://") {
        8
    } else {
        return target;
    };
    let rest = &target[after..];
    rest.find('/').map_or("/", |i| &rest[i..])
}

/// Why a request is not served: its status and the text of the answer.
#[derive(Debug, PartialEq, Eq)]
struct Refusal {
    status: u16,
    text: String,
}

impl Refusal {
    fn new(status: u16) -> Refusal {
        Refusal {
            status,
            text: format!("{status} {}", reason(status)),
        }
    }

    fn with(status: u16, detail: &str) -> Refusal {
        Refusal {
            status,
            text: format!("{status} {}: {detail}", reason(status)),
        }
    }
}

/// How a request's body is delimited.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
}

/// What the server needs of a request head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    target: String,
    /// HTTP/1.`minor`.
    minor: u8,
    framing: Framing,
    /// The client asked to close after this request (or HTTP/1.0 without keep-alive).
    close: bool,
    /// `Expect: 100-continue`.
    expect_continue: bool,
    /// A browser's `User-Agent` (turned away, as Toxiproxy does).
    browser: bool,
    /// The head's length in the buffer.
    len: usize,
}

/// A request head at the start of `buf`: `Ok(None)` while incomplete.
fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<Head>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            // Still in the request line: its target is too long.
            if !buf.contains(&b'\n') && buf.len() > limits.target + 32 {
                return Err(Refusal::new(414));
            }
            if buf.len() > limits.head {
                return Err(Refusal::new(431));
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::new(431)),
        Err(httparse::Error::Version) => {
            return Err(Refusal::with(505, "unsupported protocol version"))
        }
        Err(_) => return Err(Refusal::new(400)),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Refusal::new(400));
    };
    if target.len() > limits.target {
        return Err(Refusal::new(414));
    }
    if len > limits.head {
        return Err(Refusal::new(431));
    }
    let mut head = Head {
        method: method.to_string(),
        target: target.to_string(),
        minor,
        framing: Framing::Length(0),
        close: minor == 0,
        expect_continue: false,
        browser: false,
        len,
    };
    read_fields(&mut head, req.headers, limits)?;
    Ok(Some(head))
}

/// The fields of a request head that frame its body and keep or close the
/// connection, into `head`.
fn read_fields(
    head: &mut Head,
    fields: &[httparse::Header],
    limits: &Limits,
) -> Result<(), Refusal> {
    let (mut length, mut chunked) = (None, false);
    for f in fields {
        let value = std::str::from_utf8(f.value).unwrap_or("").trim();
        let name = f.name;
        if name.eq_ignore_ascii_case("Content-Length") {
            // Digits only; several must agree (RFC 9112 §6.3).
            let n =
                content_length(value).ok_or_else(|| Refusal::with(400, "bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(Refusal::with(400, "bad Content-Length"));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("Transfer-Encoding") {
            // Only chunked, once (as Go's server).
            if chunked || !value.eq_ignore_ascii_case("chunked") {
                return Err(Refusal {
                    status: 501,
                    text: "Unsupported transfer encoding".into(),
                });
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case("Connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    head.close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") && head.minor == 0 {
                    head.close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("Expect") {
            if !value.eq_ignore_ascii_case("100-continue") {
                return Err(Refusal::new(417));
            }
            head.expect_continue = head.minor == 1;
        } else if name.eq_ignore_ascii_case("User-Agent") {
            head.browser = value.starts_with("Mozilla/");
        }
    }
    head.framing = match (chunked, length) {
        // Both: which one delimits the body is what request smuggling
        // plays on; refused (RFC 9112 §6.3 allows it).
        (true, Some(_)) => {
            return Err(Refusal::with(
                400,
                "both Transfer-Encoding and Content-Length",
            ))
        }
        (true, None) => Framing::Chunked,
        (false, n) => Framing::Length(n.unwrap_or(0)),
    };
    if let Framing::Length(n) = head.framing {
        if n > limits.body as u64 {
            return Err(Refusal::new(413));
        }
    }
    Ok(())
}

/// A Content-Length's value: digits only (no sign, no spaces), at most 19.
fn content_length(value: &str) -> Option<u64> {
    let ok = !value.is_empty() && value.len() <= 19 && value.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| value.parse().ok()).flatten()
}

/// Where a chunked body's decoding is (RFC 9112 §7.1).
#[derive(Debug, Default, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk: bytes left.
    Data(usize),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer fields (read and dropped) up to an empty line.
    Trailer,
    Done,
}

/// A chunked body being decoded, fed as its bytes arrive (each byte looked
/// at once); extensions and trailer fields are read and dropped.
#[derive(Debug, Default)]
struct Dechunk {
    state: ChunkState,
    body: Vec<u8>,
    /// Trailer bytes so far.
    trailer: usize,
}

impl Dechunk {
    /// Decode what it can from the front of `input`; returns the bytes used.
    fn feed(&mut self, input: &[u8], limits: &Limits) -> Result<usize, Refusal> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match self.state {
                ChunkState::Size => {
                    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                        if rest.len() > MAX_CHUNK_LINE {
                            return Err(Refusal::with(400, "chunk line too long"));
                        }
                        return Ok(at);
                    };
                    if nl > MAX_CHUNK_LINE {
                        return Err(Refusal::with(400, "chunk line too long"));
                    }
                    let size = chunk_size(&rest[..nl])?;
                    at += nl + 1;
                    if size == 0 {
                        self.state = ChunkState::Trailer;
                    } else if size > (limits.body - self.body.len().min(limits.body)) as u64 {
                        return Err(Refusal::new(413));
                    } else {
                        self.state = ChunkState::Data(size as usize);
                    }
                }
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok(at);
                    }
                    let take = left.min(rest.len());
                    self.body.extend_from_slice(&rest[..take]);
                    at += take;
                    self.state = if take == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - take)
                    };
                }
                ChunkState::DataEnd => match rest {
                    [b'\n', ..] => {
                        at += 1;
                        self.state = ChunkState::Size;
                    }
                    [b'\r', b'\n', ..] => {
                        at += 2;
                        self.state = ChunkState::Size;
                    }
                    [] | [b'\r'] => return Ok(at),
                    _ => return Err(Refusal::with(400, "malformed chunked encoding")),
                },
                ChunkState::Trailer => {
                    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                        if self.trailer + rest.len() > limits.head {
                            return Err(Refusal::new(431));
                        }
                        return Ok(at);
                    };
                    self.trailer += nl + 1;
                    if self.trailer > limits.head {
                        return Err(Refusal::new(431));
                    }
                    let line = &rest[..nl];
                    at += nl + 1;
                    if line.is_empty() || line == b"\r" {
                        self.state = ChunkState::Done;
                    }
                }
                ChunkState::Done => return Ok(at),
            }
        }
    }
}

/// The size a chunk-size line (without its `\n`) gives; its extensions
/// are dropped.
fn chunk_size(line: &[u8]) -> Result<u64, Refusal> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let size = line.split(|&b| b == b';').next().unwrap_or(b"");
    let size = std::str::from_utf8(size)
        .unwrap_or("")
        .trim_matches([' ', '\t']);
    (!size.is_empty() && size.len() <= 16)
        .then(|| u64::from_str_radix(size, 16).ok())
        .flatten()
        .ok_or_else(|| Refusal::with(400, "bad chunk size"))
}

/// How reading a request ended without one to serve.
enum Unread {
    /// The client closed, or went quiet between requests: close too.
    Gone,
    /// Answer this, then close.
    Refused(Refusal),
}

impl From<Refusal> for Unread {
    fn from(r: Refusal) -> Unread {
        Unread::Refused(r)
    }
}

/// One client connection.
struct Connection {
    stream: TcpStream,
    limits: Limits,
    slot: Slot,
    /// Bytes read and not yet used (the start of the next request).
    buf: Vec<u8>,
    /// When the request being read must be whole.
    deadline: Instant,
}

impl Connection {
    fn new(stream: TcpStream, limits: Limits, slot: Slot) -> Connection {
        let _ = stream.set_write_timeout(Some(limits.write));
        let _ = stream.set_nodelay(true);
        Connection {
            stream,
            limits,
            slot,
            buf: Vec::new(),
            deadline: Instant::now() + limits.read,
        }
    }

    /// Read more bytes before the deadline: Ok(0) at the end of the stream,
    /// `TimedOut` past the deadline.
    fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 8192];
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return Err(ErrorKind::TimedOut.into())
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// More bytes of a request that has begun: none coming is a refusal
    /// (408 past the deadline; 400 when the client ended its stream).
    fn more(&mut self) -> Result<(), Unread> {
        match self.fill() {
            Ok(0) => Err(Unread::Refused(Refusal::new(400))),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::TimedOut => Err(Refusal::new(408).into()),
            Err(_) => Err(Unread::Gone),
        }
    }

    /// Serve requests until the client closes, a request is refused, or an
    /// answer says to close.
    fn serve(mut self, api: &Api) {
        let mut first = true;
        loop {
            if self.buf.is_empty() {
                // The first request's time runs from the connection's
                // opening; a later one's from its first byte.
                if !first {
                    self.deadline = Instant::now() + self.limits.idle;
                }
                match self.fill() {
                    Ok(n) if n > 0 => {}
                    _ => return,
                }
            }
            if !first {
                self.deadline = Instant::now() + self.limits.read;
            }
            first = false;
            let (head, body) = match self.read_request() {
                Ok(r) => r,
                Err(Unread::Gone) => return,
                Err(Unread::Refused(r)) => return self.refuse(&r),
            };
            self.slot.waiting(None);
            let reply = if head.browser {
                Reply::text(403, "User agent not allowed\n")
            } else {
                let body = String::from_utf8_lossy(&body);
                api.route(&head.method, origin_form(&head.target), &body)
            };
            let id = api.requests.fetch_add(1, Ordering::Relaxed);
            if !head.close {
                // Waiting from now on: an eviction (which only ends the
                // reading side) lets this answer out whole.
                self.slot.waiting(Some(Instant::now()));
            }
            if self.answer(&head, &reply, id).is_err() {
                return;
            }
            if head.close {
                return self.linger();
            }
        }
    }

    /// A whole request: its head and body (the buffer keeps what follows).
    fn read_request(&mut self) -> Result<(Head, Vec<u8>), Unread> {
        let head = loop {
            if let Some(h) = parse_head(&self.buf, &self.limits)? {
                break h;
            }
            self.more()?;
        };
        self.buf.drain(..head.len);
        let continue_ = head.expect_continue && self.buf.is_empty();
        let body = match head.framing {
            Framing::Length(0) => Vec::new(),
            Framing::Length(n) => {
                // n is within limits.body (parse_head checked it).
                let n = n as usize;
                if continue_ {
                    self.interim()?;
                }
                while self.buf.len() < n {
                    self.more()?;
                }
                self.buf.drain(..n).collect()
            }
            Framing::Chunked => {
                if continue_ {
                    self.interim()?;
                }
                let mut d = Dechunk::default();
                loop {
                    let used = d.feed(&self.buf, &self.limits)?;
                    self.buf.drain(..used);
                    if d.state == ChunkState::Done {
                        break d.body;
                    }
                    self.more()?;
                }
            }
        };
        Ok((head, body))
    }

    /// `100 Continue`: the client waits for it before sending its body.
    fn interim(&mut self) -> Result<(), Unread> {
        self.stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(|_| Unread::Gone)
    }

    /// Send an answer, with Toxiproxy's headers.
    fn answer(&mut self, head: &Head, reply: &Reply, id: u64) -> std::io::Result<()> {
        let status = reply.status;
        let mut out = format!("HTTP/1.{} {status} {}\r\n", head.minor, reason(status));
        if !reply.body.is_empty() {
            out += &format!("Content-Type: {}\r\n", reply.content_type);
        }
        out += &format!(
            "X-Toxiproxy-Request-Id: sluice{id:014}\r\nDate: {}\r\n",
            http_date(SystemTime::now())
        );
        // A 204 has no body and says no length (RFC 9110 §8.6).
        let body = if status == 204 { "" } else { &reply.body };
        if status != 204 {
            out += &format!("Content-Length: {}\r\n", body.len());
        }
        if head.close {
            out += "Connection: close\r\n";
        } else if head.minor == 0 {
            out += "Connection: keep-alive\r\n";
        }
        out += "\r\n";
        if head.method != "HEAD" {
            out += body;
        }
        self.stream.write_all(out.as_bytes())
    }

    /// Answer a request that is not served, then close.
    fn refuse(mut self, r: &Refusal) {
        if self
            .stream
            .write_all(plain_refusal(r.status, &r.text).as_bytes())
            .is_err()
        {
            return;
        }
        self.linger();
    }

    /// Close after an answer: the sending side first, then the client's
    /// stream is drained for a moment (at most a second and a body's
    /// worth), so that the answer reaches it rather than a reset (which
    /// closing with unread bytes would send).
    fn linger(mut self) {
        self.slot.leave();
        let _ = self.stream.shutdown(Shutdown::Write);
        self.deadline = Instant::now() + Duration::from_secs(1);
        let mut drained = 0;
        while drained < self.limits.body {
            self.buf.clear();
            match self.fill() {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 9112 §7.1's form: hex sizes, extensions, a trailer field.
    fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        for &n in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let n = n.clamp(1, rest.len());
            out.extend_from_slice(format!("{n:X};x=y\r\n").as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        out.extend_from_slice(b"0\r\nT: 1\r\n\r\n");
        out
    }

    proptest! {
        /// However the bytes arrive, the body comes out whole, every byte
        /// used once, and nothing after the body is taken.
        #[test]
        fn a_chunked_body_decodes_the_same_in_any_pieces(
            body in prop::collection::vec(any::<u8>(), 0..600),
            sizes in prop::collection::vec(1usize..70, 1..8),
            cut in prop::collection::vec(1usize..40, 1..30),
        ) {
            let mut wire = chunked(&body, &sizes);
            let end = wire.len();
            wire.extend_from_slice(b"GET /next");
            let limits = Limits::default();
            let (mut d, mut buf, mut fed) = (Dechunk::default(), Vec::new(), 0);
            for &n in cut.iter().cycle() {
                let n = n.min(wire.len() - fed);
                buf.extend_from_slice(&wire[fed..fed + n]);
                fed += n;
                let used = d.feed(&buf, &limits).unwrap();
                buf.drain(..used);
                if d.state == ChunkState::Done || fed == wire.len() {
                    break;
                }
            }
            prop_assert_eq!(d.state, ChunkState::Done);
            prop_assert_eq!(&d.body, &body);
            prop_assert_eq!(fed - buf.len(), end);
        }
    }

    #[test]
    fn a_chunk_past_the_body_limit_is_413_before_its_data() {
        let limits = Limits {
            body: 100,
            ..Limits::default()
        };
        let mut d = Dechunk::default();
        assert_eq!(d.feed(b"64\r\n", &limits), Ok(4));
        let mut d = Dechunk::default();
        assert_eq!(d.feed(b"65\r\n", &limits).unwrap_err().status, 413);
        // 2^64 - 1 and more digits than 16.
        let mut d = Dechunk::default();
        assert_eq!(
            d.feed(b"ffffffffffffffff\r\n", &limits).unwrap_err().status,
            413
        );
        let mut d = Dechunk::default();
        assert_eq!(
            d.feed(b"00000000000000001\r\n", &limits)
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn path_segments_decode_as_gos_url_package_does() {
        assert_eq!(percent_decode("a%20b").as_deref(), Some("a b"));
        assert_eq!(percent_decode("x%2fy%2F").as_deref(), Some("x/y/"));
        assert_eq!(percent_decode("a+b").as_deref(), Some("a+b"));
        assert_eq!(percent_decode("%E2%82%AC").as_deref(), Some("€"));
        for bad in ["%", "%2", "%zz", "a%g1", "%%41"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn absolute_form_targets_keep_their_path() {
        assert_eq!(origin_form("http://h:1/proxies?x"), "/proxies?x");
        assert_eq!(origin_form("HTTP://h"), "/");
        assert_eq!(origin_form("/version"), "/version");
    }
}
