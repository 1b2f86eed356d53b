//! The body of the `proxy_api` target: requests to the proxy's REST API.
//!
//! Each line of the input is one request, `METHOD PATH BODY` (the body is
//! the rest of the line). Before a request runs, any `enabled` in its body
//! becomes `false` and any `listen` a numeric address, so the fuzzer never
//! binds sockets or waits on name resolution; everything else reaches the
//! handlers as sent: paths, JSON of any shape, toxics of every type (a `tc`
//! toxic's qdisc goes through the tc parser), updates, deletes.

use serde_json::Value;
use sluice_proxy::api::Api;

/// Make a body safe to run: never enabled, never a name to resolve.
fn defang(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("enabled") || m.contains_key("name") {
                m.insert("enabled".into(), Value::Bool(false));
            }
            if m.contains_key("listen") {
                m.insert("listen".into(), Value::String("127.0.0.1:1".into()));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(defang),
        _ => {}
    }
}

pub fn proxy_api(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let api = Api::default();
    for line in text.lines().take(64) {
        let mut parts = line.splitn(3, ' ');
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            continue;
        };
        // `/reset` enables every proxy: not run here (the tests cover it).
        if path.starts_with("/reset") {
            continue;
        }
        let body = parts.next().unwrap_or("");
        let body = match serde_json::from_str::<Value>(body) {
            Ok(mut v) => {
                defang(&mut v);
                v.to_string()
            }
            Err(_) => body.to_string(),
        };
        let reply = api.route(method, path, &body);
        assert!((200..600).contains(&reply.status));
    }
}
