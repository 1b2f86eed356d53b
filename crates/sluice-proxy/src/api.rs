//! Toxiproxy's REST API (2.12): the routes, bodies, status codes and error
//! messages its clients expect.
//!
//! [`Api::route`] answers a request from its method, path and body, so the
//! whole API is testable without sockets; [`serve`] puts it behind an HTTP
//! server. Errors are Toxiproxy's envelope, `{"error":"...","status":N}`
//! and a newline, as text/plain (Go's `http.Error`); successes are compact
//! JSON with the keys in Toxiproxy's order.

use crate::conn::{self, Proxy, Shared};
use crate::toxic::{ApiError, Stream, Toxic};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

    fn empty(status: u16) -> Reply {
        Reply {
            status,
            content_type: TEXT,
            body: String::new(),
        }
    }
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Reply {
        Reply {
            status: e.status,
            content_type: TEXT,
            body: format!("{}\n", envelope(&e)),
        }
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

    /// Answer a request.
    pub fn route(&self, method: &str, path: &str, body: &str) -> Reply {
        let path = path.split('?').next().unwrap_or(path);
        let parts: Vec<&str> = path.split('/').skip(1).collect();
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
            _ => {
                return Reply {
                    status: 404,
                    content_type: TEXT,
                    body: "404 page not found\n".into(),
                }
            }
        };
        if !allowed.contains(&method) {
            return Reply::empty(405);
        }
        let r = match (parts.as_slice(), method) {
            (["proxies"], "GET") => {
                let map = match self.proxies.lock() {
                    Ok(m) => m,
                    Err(_) => return ApiError::new(500, "state poisoned").into(),
                };
                let items: Vec<String> = map
                    .iter()
                    .map(|(n, p)| format!("{}:{}", Value::String(n.clone()), Self::show(p)))
                    .collect();
                Ok(Reply::json(200, format!("{{{}}}", items.join(","))))
            }
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

/// The API's HTTP server, bound to `addr` (its port may be 0).
pub fn bind(addr: &str) -> Result<tiny_http::Server, String> {
    tiny_http::Server::http(addr).map_err(|e| format!("listen {addr}: {e}"))
}

/// Serve the API until the process ends.
pub fn serve(api: Arc<Api>, server: tiny_http::Server) -> Result<(), String> {
    for mut req in server.incoming_requests() {
        let api = api.clone();
        // (Without a thread to be had, the request's connection is closed.)
        let _ = std::thread::Builder::new().spawn(move || {
            let mut body = String::new();
            let read = std::io::Read::read_to_string(req.as_reader(), &mut body);
            let browser = req
                .headers()
                .iter()
                .any(|h| h.field.equiv("User-Agent") && h.value.as_str().starts_with("Mozilla/"));
            let reply = if read.is_err() {
                ApiError::body("unreadable body").into()
            } else if browser {
                Reply {
                    status: 403,
                    content_type: TEXT,
                    body: "User agent not allowed\n".into(),
                }
            } else {
                api.route(req.method().as_str(), req.url(), &body)
            };
            let id = api.requests.fetch_add(1, Ordering::Relaxed);
            let mut resp =
                tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
            for (k, v) in [
                ("Content-Type", reply.content_type.to_string()),
                ("X-Toxiproxy-Request-Id", format!("sluice{id:014}")),
            ] {
                if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    resp.add_header(h);
                }
            }
            let _ = req.respond(resp);
        });
    }
    Ok(())
}
