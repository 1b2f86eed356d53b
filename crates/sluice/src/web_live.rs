//! Web page loads for real: the HTTP server and browser that `sim --live`
//! runs for a scenario's `web` workloads, as the hidden subcommands
//! `sluice web-server` and `sluice web-client`, over the kernel's TCP.
//!
//! # What a load is
//!
//! The same as in the simulator's model (sluice-sim's `web.rs`): a load
//! starts when the browser asks for the page and ends when the last byte of
//! the last object has been read. The page names its objects, so they are
//! known only once the whole page has arrived.
//!
//! - **HTTP/1.1** (`--h1`): no pipelining, one request at a time on a
//!   connection. The page goes over one connection; when it has arrived,
//!   every object is queued, each idle connection takes the next one, and
//!   new connections are opened, up to `--connections` in all, while
//!   objects are waiting (as many as there are objects, at most).
//! - **HTTP/2** (`--h2`): cleartext with prior knowledge (h2c), one
//!   connection; after the page, every object request is sent at once and
//!   the server answers them as fast as its window allows. HPACK shortens
//!   the requests after a connection's first, as the model's
//!   `HPACK_REQUEST_BYTES` say.
//! - **Cold or warm** (`--warm`): a cold load opens new connections and
//!   closes them at its end; warm loads keep them, and the first load only
//!   opens them (a warm-up, not reported).
//!
//! Loads repeat (`--repeat` reported loads) at most every `--interval`,
//! never overlapping: the next starts at the later of the previous start
//! plus the interval and the previous end. No load starts after `--stop`;
//! at `--end` the browser gives up, and says whether a load was under way.
//!
//! # The site
//!
//! `sluice web-server --page BYTES --objects SIZES` serves `/`, the page,
//! and `/o/N`, object N, with bodies of exactly those sizes. The page is
//! the objects' paths, one a line, then filler up to its size (a page too
//! small to hold the list is the list: the model's 1-byte page of 10 000
//! objects cannot be served otherwise). The object sizes are a list of
//! `SIZE` or `SIZExCOUNT` (`10000x20`, `1000,2000x3`), short enough for a
//! command line however many objects. Bodies are filler written in chunks
//! of [`CHUNK`], never a whole object in memory. The server speaks HTTP/1.1
//! and h2c on the same port (hyper-util tells them apart by the preface)
//! and serves until `--for` has passed.
//!
//! # What the browser prints
//!
//! One line per reported load, `load start_ns=S took_ns=T bytes=B
//! connections=C`: when it started (from the browser's own start), how long
//! it took, the body bytes it read and the connections it opened. The last
//! line is `done`, or `unfinished` if a load was under way at `--end`, or
//! `error MESSAGE` (status 1): the caller reads standard output only, and
//! output without one of these means the browser did not run to its end.
//!
//! # Versus the model
//!
//! Sizes here are bodies; the model's are bytes on the stream, so each
//! response is a hundred-odd bytes of headers longer live. A request is
//! padded with a `cookie` header to about `--request` bytes (the model's
//! `request_size`). Both sockets set `TCP_NODELAY`, as the model's server
//! does and browsers do; `--cc`, `--sndbuf`, `--rcvbuf` and `--tos` set
//! what the workload's keys do in the model. Not here: TLS (`sim --live`
//! refuses `handshake = true`), DNS (the server is an address), HTTP/2
//! priorities, server push. HTTP/2's flow-control windows are hyper's
//! defaults (5 MB a connection, 2 MB a stream), and the server lets a
//! client open as many streams at once as the page has objects.

use clap::Parser;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::cell::Cell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::time::Instant;

/// Bytes of filler a body is written in.
const CHUNK: usize = 64 * 1024;

/// Why a server or a browser stopped.
#[derive(Debug)]
pub enum WebError {
    /// An option's value does not parse.
    Usage(String),
    /// A socket call failed.
    Socket(&'static str, std::io::Error),
    /// HTTP failed on a connection.
    Http(&'static str, hyper::Error),
    /// The server answered a request with something else than 200.
    Status(String, StatusCode),
    /// A request's task died.
    Task(tokio::task::JoinError),
}

impl std::fmt::Display for WebError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WebError::Usage(m) => write!(f, "{m}"),
            WebError::Task(e) => write!(f, "a request's task: {e}"),
            WebError::Socket(what, e) => write!(f, "{what}: {e}"),
            WebError::Http(what, e) => write!(f, "{what}: {e}"),
            WebError::Status(path, s) => write!(f, "GET {path}: {s}"),
        }
    }
}

/// Socket options both ends take from the workload.
#[derive(clap::Args, Clone, Debug, Default)]
struct SocketOpts {
    /// Congestion control of every connection (TCP_CONGESTION).
    #[arg(long)]
    cc: Option<String>,
    /// SO_SNDBUF, bytes (as setsockopt takes it; the kernel doubles it).
    #[arg(long)]
    sndbuf: Option<u32>,
    /// SO_RCVBUF, bytes.
    #[arg(long)]
    rcvbuf: Option<u32>,
    /// IP TOS byte of the packets sent.
    #[arg(long, default_value_t = 0)]
    tos: u8,
}

impl SocketOpts {
    /// A TCP socket with these options and TCP_NODELAY, not yet bound.
    fn socket(&self) -> Result<TcpSocket, WebError> {
        let s = TcpSocket::new_v4().map_err(|e| WebError::Socket("socket", e))?;
        let set = |what, r: std::io::Result<()>| r.map_err(|e| WebError::Socket(what, e));
        set("TCP_NODELAY", s.set_nodelay(true))?;
        if let Some(b) = self.sndbuf {
            set("SO_SNDBUF", s.set_send_buffer_size(b))?;
        }
        if let Some(b) = self.rcvbuf {
            set("SO_RCVBUF", s.set_recv_buffer_size(b))?;
        }
        if self.tos != 0 {
            set("IP_TOS", s.set_tos_v4(u32::from(self.tos)))?;
        }
        if let Some(cc) = &self.cc {
            set("TCP_CONGESTION", set_congestion(s.as_raw_fd(), cc))?;
        }
        Ok(s)
    }
}

/// setsockopt(TCP_CONGESTION): the socket's congestion control by name.
fn set_congestion(fd: std::os::fd::RawFd, name: &str) -> std::io::Result<()> {
    // SAFETY: `fd` is an open socket for the duration of the call, and the
    // option value is `name`'s bytes with their exact length.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Object sizes as `SIZE` or `SIZExCOUNT`, comma-separated.
fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let mut sizes = vec![];
    for item in s.split(',').filter(|i| !i.is_empty()) {
        let (size, count) = item.split_once('x').unwrap_or((item, "1"));
        let bad = || format!("{item:?}: expected SIZE or SIZExCOUNT");
        let size: u64 = size.parse().map_err(|_| bad())?;
        let count: usize = count.parse().map_err(|_| bad())?;
        sizes.extend(std::iter::repeat_n(size, count));
    }
    Ok(sizes)
}

/// The object sizes as [`parse_sizes`] reads them, runs of one size folded.
pub fn format_sizes(sizes: &[u64]) -> String {
    let mut runs: Vec<(u64, usize)> = vec![];
    for &s in sizes {
        match runs.last_mut() {
            Some((size, n)) if *size == s => *n += 1,
            _ => runs.push((s, 1)),
        }
    }
    let words: Vec<String> = runs
        .iter()
        .map(|&(s, n)| match n {
            1 => s.to_string(),
            n => format!("{s}x{n}"),
        })
        .collect();
    words.join(",")
}

/// The path of object `i`.
fn object_path(i: usize) -> String {
    format!("/o/{i}")
}

/// The paths a page lists, in order.
fn links(page: &[u8]) -> Vec<String> {
    page.split(|&b| b == b'\n')
        .map_while(|l| {
            let l = std::str::from_utf8(l).ok()?;
            l.starts_with("/o/").then(|| l.to_string())
        })
        .collect()
}

/// A body of `head`, then `filler` bytes of `x`.
struct Filler {
    head: Option<Bytes>,
    filler: u64,
    chunk: Bytes,
}

impl Filler {
    fn new(head: Bytes, filler: u64, chunk: &Bytes) -> Self {
        Filler {
            head: (!head.is_empty()).then_some(head),
            filler,
            chunk: chunk.clone(),
        }
    }
}

impl Body for Filler {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(head) = self.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if self.filler == 0 {
            return Poll::Ready(None);
        }
        let n = self.filler.min(self.chunk.len() as u64);
        self.filler -= n;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n as usize)))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.filler == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.head.as_ref().map_or(0, |h| h.len() as u64) + self.filler)
    }
}

/// What the server serves.
struct Site {
    /// The page's list of object paths.
    list: Bytes,
    /// The page's filler after the list.
    page_filler: u64,
    objects: Vec<u64>,
    chunk: Bytes,
}

impl Site {
    fn new(page: u64, objects: Vec<u64>) -> Site {
        let list: String = (0..objects.len()).map(|i| object_path(i) + "\n").collect();
        Site {
            page_filler: page.saturating_sub(list.len() as u64),
            list: Bytes::from(list),
            objects,
            chunk: Bytes::from(vec![b'x'; CHUNK]),
        }
    }

    fn answer(&self, path: &str) -> Response<Filler> {
        let body = match path {
            "/" => Some(Filler::new(
                self.list.clone(),
                self.page_filler,
                &self.chunk,
            )),
            p => p
                .strip_prefix("/o/")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| self.objects.get(i))
                .map(|&n| Filler::new(Bytes::new(), n, &self.chunk)),
        };
        body.map_or_else(
            || {
                let mut r = Response::new(Filler::new(Bytes::new(), 0, &self.chunk));
                *r.status_mut() = StatusCode::NOT_FOUND;
                r
            },
            Response::new,
        )
    }
}

/// Serve `site` on `listener`'s connections, HTTP/1.1 or h2c each.
async fn serve(listener: TcpListener, site: Arc<Site>) -> WebError {
    let streams = u32::try_from(site.objects.len()).unwrap_or(u32::MAX).max(1);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => return WebError::Socket("accept", e),
        };
        // The listener's buffers, TOS and congestion control pass to the
        // connections it accepts; TCP_NODELAY is set on each, to be sure.
        let _ = stream.set_nodelay(true);
        let site = site.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let r = site.answer(req.uri().path());
                async move { Ok::<_, Infallible>(r) }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(streams);
            // A connection that fails ends alone; the browser reports it.
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// `sluice web-server`.
#[derive(Parser, Debug)]
#[command(
    name = "sluice web-server",
    hide = true,
    about = "Serve a page and its objects over HTTP/1.1 and h2c (for sim --live)"
)]
struct ServerArgs {
    /// Address and port to listen on.
    #[arg(long, default_value = "0.0.0.0:80")]
    listen: SocketAddr,
    /// Bytes of the page.
    #[arg(long)]
    page: u64,
    /// The objects' sizes: SIZE or SIZExCOUNT, comma-separated.
    #[arg(long, default_value = "", value_parser = parse_sizes)]
    objects: ::std::vec::Vec<u64>,
    /// Milliseconds to serve, then exit.
    #[arg(long = "for")]
    for_ms: u64,
    #[command(flatten)]
    sock: SocketOpts,
}

/// A current-thread runtime with timers and sockets.
fn runtime() -> Result<tokio::runtime::Runtime, WebError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| WebError::Socket("runtime", e))
}

/// Parse `args` for `name`'s clap parser, or the exit status of a refusal.
fn parse<P: Parser>(name: &str, args: &[String]) -> Result<P, i32> {
    P::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned())).map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            2
        } else {
            0
        }
    })
}

/// Run `sluice web-server`; returns the exit status.
pub fn server_main(args: &[String]) -> i32 {
    let a: ServerArgs = match parse("sluice web-server", args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<(), WebError> {
        let rt = runtime()?;
        rt.block_on(async {
            let s = a.sock.socket()?;
            s.set_reuseaddr(true)
                .map_err(|e| WebError::Socket("SO_REUSEADDR", e))?;
            s.bind(a.listen).map_err(|e| WebError::Socket("bind", e))?;
            let listener = s.listen(1024).map_err(|e| WebError::Socket("listen", e))?;
            let site = Arc::new(Site::new(a.page, a.objects));
            let serving = serve(listener, site);
            match tokio::time::timeout(Duration::from_millis(a.for_ms), serving).await {
                Ok(e) => Err(e),
                Err(_elapsed) => Ok(()),
            }
        })
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice web-server: {e}");
            1
        }
    }
}

/// HTTP/1.1 or HTTP/2 (h2c, prior knowledge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// One request at a time per connection, several connections.
    Http1,
    /// Every request at once on one connection.
    Http2,
}

/// One connection's request sender.
enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

/// How the browser behaves (the workload's parameters).
#[derive(Clone, Debug)]
pub struct Browsing {
    /// The server.
    pub server: SocketAddr,
    /// The page's path.
    pub page: String,
    /// HTTP/1.1 or HTTP/2.
    pub protocol: Protocol,
    /// Most connections at once (HTTP/1.1).
    pub connections: usize,
    /// About how many bytes a request is (padded with a cookie).
    pub request: usize,
    sock: SocketOpts,
}

/// One load as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    /// Body bytes read (the page and every object).
    pub bytes: u64,
    /// Connections opened for it.
    pub connections: usize,
}

/// A browser: its open connections, between loads when warm.
struct Browser {
    how: Browsing,
    /// Connections left open, first opened first.
    open: VecDeque<Sender>,
}

impl Browser {
    fn new(how: Browsing) -> Browser {
        Browser {
            how,
            open: VecDeque::new(),
        }
    }

    /// One load: the page, then its objects. `keep`: leave the
    /// connections open for the next load.
    async fn load(&mut self, keep: bool) -> Result<Load, WebError> {
        let mut opened = 0;
        let mut first = match self.open.pop_front() {
            Some(s) => s,
            None => {
                opened += 1;
                connect(&self.how).await?
            }
        };
        let page = get(&mut first, &self.how, &self.how.page, true).await?;
        let paths = links(&page.body);
        let mut bytes = page.bytes;
        let multiplexed = match &first {
            Sender::Http2(send) => Some(send.clone()),
            Sender::Http1(_) => None,
        };
        self.open.push_front(first);
        match multiplexed {
            Some(send) => {
                let tasks: Vec<_> = paths
                    .iter()
                    .map(|p| {
                        let mut s = Sender::Http2(send.clone());
                        let (how, p) = (self.how.clone(), p.clone());
                        tokio::spawn(async move { get(&mut s, &how, &p, false).await })
                    })
                    .collect();
                for t in tasks {
                    bytes += joined(t.await)?.bytes;
                }
            }
            None => {
                let queue = Arc::new(Mutex::new(paths.iter().cloned().collect::<VecDeque<_>>()));
                let wanted = self.how.connections.max(1).min(paths.len());
                let mut workers = vec![];
                while workers.len() < wanted {
                    let conn = match self.open.pop_front() {
                        Some(s) => Conn::Open(s),
                        None => {
                            opened += 1;
                            Conn::ToOpen
                        }
                    };
                    let (how, queue) = (self.how.clone(), queue.clone());
                    workers.push(tokio::spawn(fetch_all(how, conn, queue)));
                }
                for w in workers {
                    let (s, n) = joined(w.await)?;
                    bytes += n;
                    self.open.push_back(s);
                }
            }
        }
        if !keep {
            self.open.clear();
        }
        Ok(Load {
            bytes,
            connections: opened,
        })
    }
}

/// Open a connection (TCP, then HTTP/2's preface if that is the protocol).
async fn connect(how: &Browsing) -> Result<Sender, WebError> {
    let s = how.sock.socket()?;
    let stream: TcpStream = s
        .connect(how.server)
        .await
        .map_err(|e| WebError::Socket("connect", e))?;
    let io = TokioIo::new(stream);
    // The connection's task ends when its sender is dropped (HTTP/1.1) or
    // the last clone is (HTTP/2): that closes the socket.
    Ok(match how.protocol {
        Protocol::Http1 => {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| WebError::Http("HTTP/1.1 handshake", e))?;
            tokio::spawn(conn);
            Sender::Http1(send)
        }
        Protocol::Http2 => {
            let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await
                .map_err(|e| WebError::Http("HTTP/2 handshake", e))?;
            tokio::spawn(conn);
            Sender::Http2(send)
        }
    })
}

/// An HTTP/1.1 worker's connection: one left open, or one to open.
enum Conn {
    Open(Sender),
    ToOpen,
}

/// Take paths from `queue` one at a time over one connection until none is
/// left; returns the connection and the body bytes read.
async fn fetch_all(
    how: Browsing,
    conn: Conn,
    queue: Arc<Mutex<VecDeque<String>>>,
) -> Result<(Sender, u64), WebError> {
    let mut s = match conn {
        Conn::Open(s) => s,
        Conn::ToOpen => connect(&how).await?,
    };
    let mut bytes = 0;
    loop {
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        let Some(path) = next else {
            return Ok((s, bytes));
        };
        bytes += get(&mut s, &how, &path, false).await?.bytes;
    }
}

/// A task's result, its panic or cancellation an error.
fn joined<T>(r: Result<Result<T, WebError>, tokio::task::JoinError>) -> Result<T, WebError> {
    r.map_err(WebError::Task)?
}

/// A GET of `path` with a cookie that brings it to about `how.request`
/// bytes (as HTTP/1.1 writes it; HPACK shortens it after the first on an
/// HTTP/2 connection).
fn request(how: &Browsing, path: &str) -> Result<Request<Empty<Bytes>>, WebError> {
    let host = how.server.to_string();
    let base = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\ncookie: \r\n\r\n").len();
    let uri = match how.protocol {
        Protocol::Http1 => path.to_string(),
        Protocol::Http2 => format!("http://{host}{path}"),
    };
    let mut req = Request::get(uri).header(hyper::header::HOST, host);
    if how.request > base {
        req = req.header(hyper::header::COOKIE, "c".repeat(how.request - base));
    }
    req.body(Empty::new())
        .map_err(|e| WebError::Usage(format!("GET {path}: {e}")))
}

/// A response read to its end.
struct Got {
    bytes: u64,
    /// The body, if asked to keep it.
    body: Vec<u8>,
}

/// GET `path` on `s` and read the whole answer; `keep` the body.
async fn get(s: &mut Sender, how: &Browsing, path: &str, keep: bool) -> Result<Got, WebError> {
    let req = request(how, path)?;
    let resp = match s {
        Sender::Http1(s) => {
            s.ready().await.map_err(|e| WebError::Http("HTTP/1.1", e))?;
            s.send_request(req).await
        }
        Sender::Http2(s) => {
            s.ready().await.map_err(|e| WebError::Http("HTTP/2", e))?;
            s.send_request(req).await
        }
    }
    .map_err(|e| WebError::Http("request", e))?;
    if resp.status() != StatusCode::OK {
        return Err(WebError::Status(path.to_string(), resp.status()));
    }
    let mut body = resp.into_body();
    let mut got = Got {
        bytes: 0,
        body: vec![],
    };
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| WebError::Http("response body", e))?;
        if let Ok(data) = frame.into_data() {
            got.bytes += data.len() as u64;
            if keep {
                got.body.extend_from_slice(&data);
            }
        }
    }
    Ok(got)
}

/// `sluice web-client`.
#[derive(Parser, Debug)]
#[command(
    name = "sluice web-client",
    hide = true,
    group(clap::ArgGroup::new("protocol").required(true).args(["h1", "h2"])),
    about = "Load a page and its objects again and again, HTTP/1.1 or h2c (for sim --live)"
)]
struct ClientArgs {
    /// The page: http://ADDRESS:PORT/PATH (an IPv4 address, no name).
    #[arg(long)]
    url: Uri,
    /// HTTP/1.1, up to --connections connections.
    #[arg(long)]
    h1: bool,
    /// HTTP/2 over cleartext with prior knowledge, one connection.
    #[arg(long)]
    h2: bool,
    /// Most HTTP/1.1 connections at once.
    #[arg(long, default_value_t = 6)]
    connections: usize,
    /// Loads to report.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Least milliseconds between two loads' starts.
    #[arg(long, default_value_t = 0)]
    interval: u64,
    /// Keep connections between loads; the first load is a warm-up.
    #[arg(long)]
    warm: bool,
    /// About how many bytes a request is.
    #[arg(long, default_value_t = 400)]
    request: usize,
    /// No load starts this many milliseconds after the start or later.
    #[arg(long)]
    stop: Option<u64>,
    /// Give up this many milliseconds after the start.
    #[arg(long)]
    end: Option<u64>,
    #[command(flatten)]
    sock: SocketOpts,
}

impl ClientArgs {
    fn browsing(&self) -> Result<Browsing, WebError> {
        let bad = || {
            WebError::Usage(format!(
                "--url {}: expected http://ADDRESS:PORT/PATH",
                self.url
            ))
        };
        if self.url.scheme_str() != Some("http") {
            return Err(bad());
        }
        let host = self.url.host().ok_or_else(bad)?;
        let port = self.url.port_u16().unwrap_or(80);
        let server = SocketAddr::new(host.parse().map_err(|_| bad())?, port);
        Ok(Browsing {
            server,
            page: self.url.path().to_string(),
            // The group makes it one of the two.
            protocol: match (self.h1, self.h2) {
                (_, true) => Protocol::Http2,
                _ => Protocol::Http1,
            },
            connections: self.connections,
            request: self.request,
            sock: self.sock.clone(),
        })
    }
}

/// The loads of `a`, each printed as it finishes; `loading` says whether
/// one is under way.
async fn browse(
    a: &ClientArgs,
    how: Browsing,
    t0: Instant,
    loading: &Cell<bool>,
) -> Result<(), WebError> {
    let mut b = Browser::new(how);
    let total = a.repeat + u32::from(a.warm);
    let stop = a.stop.map(|ms| t0 + Duration::from_millis(ms));
    let mut next = t0;
    for i in 0..total {
        tokio::time::sleep_until(next).await;
        let start = Instant::now();
        if stop.is_some_and(|s| start >= s) {
            break;
        }
        loading.set(true);
        let load = b.load(a.warm).await?;
        loading.set(false);
        let end = Instant::now();
        if !(a.warm && i == 0) {
            println!(
                "load start_ns={} took_ns={} bytes={} connections={}",
                (start - t0).as_nanos(),
                (end - start).as_nanos(),
                load.bytes,
                load.connections
            );
        }
        next = (start + Duration::from_millis(a.interval)).max(end);
    }
    Ok(())
}

/// Run `sluice web-client`; returns the exit status.
pub fn client_main(args: &[String]) -> i32 {
    let a: ClientArgs = match parse("sluice web-client", args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    // Whether a load was under way at the end.
    let run = || -> Result<bool, WebError> {
        let how = a.browsing()?;
        let rt = runtime()?;
        rt.block_on(async {
            let t0 = Instant::now();
            let loading = Cell::new(false);
            let loads = browse(&a, how, t0, &loading);
            let end = a.end.map(|ms| t0 + Duration::from_millis(ms));
            match end {
                None => loads.await.map(|()| false),
                Some(end) => match tokio::time::timeout_at(end, loads).await {
                    Ok(r) => r.map(|()| false),
                    Err(_elapsed) => Ok(loading.get()),
                },
            }
        })
    };
    match run() {
        Ok(unfinished) => {
            println!("{}", if unfinished { "unfinished" } else { "done" });
            0
        }
        Err(e) => {
            println!("error {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_back_as_written() {
        let sizes = vec![10_000, 10_000, 10_000, 5, 7, 7];
        assert_eq!(format_sizes(&sizes), "10000x3,5,7x2");
        assert_eq!(parse_sizes(&format_sizes(&sizes)), Ok(sizes));
        assert_eq!(parse_sizes(""), Ok(vec![]));
        assert!(parse_sizes("10x").is_err());
    }

    /// A server for `page` and `objects` on a loopback port, and a
    /// browser of `protocol` for it; runs `f` with the browser.
    fn with_site<R>(
        page: u64,
        objects: Vec<u64>,
        protocol: Protocol,
        f: impl AsyncFnOnce(&mut Browser) -> R,
    ) -> R {
        let rt = runtime().unwrap();
        rt.block_on(async {
            let s = SocketOpts::default().socket().unwrap();
            s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let listener = s.listen(64).unwrap();
            let server = listener.local_addr().unwrap();
            tokio::spawn(serve(listener, Arc::new(Site::new(page, objects))));
            let mut b = Browser::new(Browsing {
                server,
                page: "/".into(),
                protocol,
                connections: 6,
                request: 400,
                sock: SocketOpts::default(),
            });
            f(&mut b).await
        })
    }

    #[test]
    fn the_page_and_each_object_have_their_sizes() {
        let objects = vec![10_000, 1, 70_000, 3];
        for protocol in [Protocol::Http1, Protocol::Http2] {
            let sizes = with_site(1000, objects.clone(), protocol, async |b| {
                let mut s = connect(&b.how).await.unwrap();
                let page = get(&mut s, &b.how, "/", true).await.unwrap();
                assert_eq!(links(&page.body), ["/o/0", "/o/1", "/o/2", "/o/3"]);
                let mut sizes = vec![page.bytes];
                for p in links(&page.body) {
                    sizes.push(get(&mut s, &b.how, &p, false).await.unwrap().bytes);
                }
                let missing = get(&mut s, &b.how, "/o/4", false).await;
                assert!(matches!(
                    missing,
                    Err(WebError::Status(_, StatusCode::NOT_FOUND))
                ));
                sizes
            });
            assert_eq!(sizes, [1000, 10_000, 1, 70_000, 3], "{protocol:?}");
        }
    }

    #[test]
    fn a_page_too_small_for_its_list_is_the_list() {
        let site = Site::new(1, vec![5; 12]);
        let listed = (0..12)
            .map(|i| object_path(i).len() as u64 + 1)
            .sum::<u64>();
        assert_eq!(site.answer("/").body().size_hint().exact(), Some(listed));
    }

    #[test]
    fn loads_read_every_byte_over_the_connections_each_protocol_opens() {
        let objects = vec![10_000; 20];
        let whole = 10_000 + 20 * 10_000;
        // HTTP/1.1: one connection for the page, five more for the objects;
        // kept, the next load opens none.
        let loads = with_site(10_000, objects.clone(), Protocol::Http1, async |b| {
            [
                b.load(true).await.unwrap(),
                b.load(false).await.unwrap(),
                b.load(false).await.unwrap(),
            ]
        });
        let n = |connections| Load {
            bytes: whole,
            connections,
        };
        assert_eq!(loads, [n(6), n(0), n(6)]);
        // HTTP/2: one connection for everything.
        let loads = with_site(10_000, objects, Protocol::Http2, async |b| {
            [
                b.load(true).await.unwrap(),
                b.load(false).await.unwrap(),
                b.load(false).await.unwrap(),
            ]
        });
        assert_eq!(loads, [n(1), n(0), n(1)]);
    }
}
