//! `sluice proxy`: the Toxiproxy-compatible TCP proxy (see the
//! `sluice-proxy` crate). The options are Toxiproxy's server's, spelled with
//! one dash or two (`-port 8474`, `--port=8474`).

use clap::Parser;
use std::path::PathBuf;
use std::sync::Arc;

const AFTER_HELP: &str = "\
Proxies are created and given toxics through Toxiproxy's REST API, so its
clients and CLI work unchanged:
  curl -X POST localhost:8474/proxies \\
    -d '{\"name\":\"db\",\"listen\":\"127.0.0.1:26379\",\"upstream\":\"127.0.0.1:6379\"}'
  curl -X POST localhost:8474/proxies/db/toxics \\
    -d '{\"type\":\"latency\",\"attributes\":{\"latency\":100,\"jitter\":10}}'
Each direction of every connection runs through sluice's qdiscs: latency is
netem, bandwidth tbf, and the `tc` toxic takes any qdisc the tc language does:
  -d '{\"type\":\"tc\",\"stream\":\"upstream\",\"attributes\":{\"qdisc\":\"netem loss 5% delay 20ms\"}}'
A tc toxic may be a tree: tc commands after the root one, separated by `;`,
without `dev` (\"handle 1: prio; qdisc add parent 1:3 netem delay 60ms; filter
add parent 1: protocol ip prio 1 u32 match ip dport 5432 0xffff flowid 1:3\");
its segments carry the connection's addresses and ports.
Toxics: latency, bandwidth, slow_close, timeout, reset_peer, slicer,
limit_data, tc. A proxy with \"protocol\":\"udp\" carries UDP datagrams (one
session per client address). No privileges needed.";

/// `sluice proxy` options.
#[derive(Parser, Debug)]
#[command(
    name = "sluice proxy",
    about = "A TCP/UDP proxy whose traffic runs through tc qdiscs, driven by Toxiproxy's REST API",
    after_help = AFTER_HELP
)]
pub(crate) struct ProxyArgs {
    /// Address the API listens on.
    #[arg(long, default_value = "localhost")]
    host: String,
    /// Port the API listens on.
    #[arg(long, default_value_t = 8474)]
    port: u16,
    /// A JSON file of proxies to create at start (a /populate body).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve /metrics: bytes received and sent per proxy and direction (Prometheus).
    #[arg(long = "proxy-metrics")]
    proxy_metrics: bool,
}

/// The largest config file read (a populate body of ~100 000 proxies):
/// `-config /dev/zero` is an error, not memory without end.
const MAX_CONFIG: u64 = 16 << 20;

/// A config file's text, at most [`MAX_CONFIG`] bytes.
fn read_config(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_CONFIG + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_CONFIG {
        return Err(format!("larger than {} MiB", MAX_CONFIG >> 20));
    }
    Ok(text)
}

/// Run `sluice proxy`; returns the exit status (only on failure: it serves
/// until killed).
pub fn main(args: &[String]) -> i32 {
    // Toxiproxy's flags are Go's: `-port` as well as `--port`.
    let args = args.iter().map(|a| match a.strip_prefix('-') {
        Some(rest) if !rest.starts_with('-') && rest.len() > 1 => format!("--{rest}"),
        _ => a.clone(),
    });
    let argv = std::iter::once("sluice proxy".to_string()).chain(args);
    let a = match ProxyArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let mut api = sluice_proxy::api::Api::default();
    api.metrics = a.proxy_metrics;
    let api = Arc::new(api);
    if let Some(path) = &a.config {
        let text = match read_config(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("sluice proxy: {}: {e}", path.display());
                return 1;
            }
        };
        if let Err(e) = api.load(&text) {
            eprintln!("sluice proxy: {}: {}", path.display(), e.trim_end());
            return 1;
        }
    }
    let addr = format!("{}:{}", a.host, a.port);
    let server = match sluice_proxy::api::bind(&addr) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice proxy: {e}");
            return 1;
        }
    };
    let bound = server.local_addr().map_or(addr.clone(), |a| a.to_string());
    eprintln!("sluice proxy: API on http://{bound}");
    match sluice_proxy::api::serve(api, server) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice proxy: {e}");
            1
        }
    }
}
