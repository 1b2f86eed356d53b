//! The control socket's own thread: it reads requests, the packet thread
//! only runs them.
//!
//! A control client is a process the daemon does not trust to be quick: it
//! may connect and send nothing, send half a request and stop, send more
//! than any request should hold, or send a request and never read the
//! answer. Whatever it does must not cost the link's packets a microsecond,
//! so the packet thread never touches a client. This thread accepts the
//! connections, checks each peer's uid ([`control::peer_allowed`]), reads
//! each request to its end with non-blocking reads and a buffer per client,
//! and hands the whole, parsed [`Request`] to the packet thread as a
//! [`Job`] over a channel, waking it through an eventfd its epoll set
//! watches. The packet thread runs the job at once, on its clock, against
//! the plane as it is at that moment ([`Inbox::serve`]), and sends the
//! [`Response`] back; this thread writes it out, again without blocking.
//!
//! Every client is bounded:
//!
//! - a request is one line of at most [`Limits::max_request`] bytes (16
//!   MiB: a big `tc -b` batch); reading stops one byte past it, the client
//!   is told why, and what it still sends is read and thrown away until it
//!   stops (closing a Unix socket with unread data would reset the
//!   connection, and the client would lose the explanation);
//! - all clients together buffer at most [`Limits::max_buffered`] bytes of
//!   unfinished requests; the client whose bytes would go over is refused
//!   the same way;
//! - a request must be whole within [`Limits::request_time`] of the
//!   connection, and an answer read within [`Limits::response_time`] of
//!   being ready; a client that misses either is closed;
//! - at most [`Limits::max_clients`] connections are held; a new one
//!   closes the oldest, so a crowd of idle connections delays no honest
//!   client (which sends its request as soon as it connects) for longer
//!   than it takes to accept them.
//!
//! The thread runs one job at a time and waits for its answer: the packet
//! thread runs commands one at a time anyway, so no queue of jobs builds up
//! (the packet thread finds at most one per wake-up). It starts at the default scheduling policy
//! (before the packet thread takes a real-time one), so reading and parsing
//! a large request never takes the packet thread's CPU time.

use crate::control::{self, Request, Response};
use crate::io::IoStats;
use crate::plane::Plane;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use sluice_core::time::Time;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How much each client, and all of them, may hold and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in one request (its line, without the newline).
    pub max_request: usize,
    /// Bytes of unfinished requests of all clients together.
    pub max_buffered: usize,
    /// Connections held at once.
    pub max_clients: usize,
    /// From the connection to the request's end.
    pub request_time: Duration,
    /// From the answer being ready to its last byte written.
    pub response_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request: 16 << 20,
            max_buffered: 64 << 20,
            max_clients: 64,
            request_time: Duration::from_secs(5),
            response_time: Duration::from_secs(10),
        }
    }
}

/// A request read whole, waiting for the packet thread.
pub struct Job {
    /// The request.
    pub request: Request,
    reply: Sender<Response>,
}

impl Job {
    /// Send the answer back to the control thread.
    pub fn answer(self, response: Response) {
        // A control thread that is gone has nobody to tell.
        let _ = self.reply.send(response);
    }
}

/// The packet thread's end of the control thread: an eventfd to watch and
/// the jobs it announces. Dropping it stops the thread.
pub struct Inbox {
    jobs: Option<Receiver<Job>>,
    wake: Arc<EventFd>,
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Inbox {
    /// Start the control thread serving `listener`.
    pub fn start(listener: UnixListener, limits: Limits) -> std::io::Result<Inbox> {
        let flags = EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK;
        let wake = Arc::new(EventFd::from_flags(flags)?);
        let stop = Arc::new(EventFd::from_flags(flags)?);
        listener.set_nonblocking(true)?;
        let (tx, rx) = mpsc::channel();
        let mut server = Server {
            listener,
            limits,
            clients: BTreeMap::new(),
            next_id: FIRST_CLIENT,
            buffered: 0,
            jobs: tx,
            wake: wake.clone(),
            epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
        };
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || server.run(&stop2))?;
        Ok(Inbox {
            jobs: Some(rx),
            wake,
            stop,
            thread: Some(thread),
        })
    }

    /// The jobs that arrived since the last call (at most one: the control
    /// thread waits for each answer before it sends the next job).
    pub fn jobs(&self) -> Vec<Job> {
        let _ = self.wake.read();
        match &self.jobs {
            Some(rx) => rx.try_iter().collect(),
            None => vec![],
        }
    }

    /// Run the arrived jobs against the plane at `now` and send their answers.
    pub fn serve(&self, plane: &mut Plane, io: &IoStats, now: Time) {
        for Job { request, reply } in self.jobs() {
            let _ = reply.send(control::handle(request, plane, io, now));
        }
    }
}

impl AsFd for Inbox {
    /// Readable when jobs wait.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        // Jobs never run go first: the thread may be waiting for an answer.
        self.jobs = None;
        let _ = self.stop.write(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const TOK_LISTENER: u64 = 0;
const TOK_STOP: u64 = 1;
const FIRST_CLIENT: u64 = 2;

/// Where a connection is.
enum Stage {
    /// Reading the request: the bytes so far.
    Reading(Vec<u8>),
    /// Writing the answer: its bytes and how many are written.
    Writing(Vec<u8>, usize),
    /// Refused (and told why) while still sending: what it sends is read
    /// and thrown away until it stops, so that it can read why (a socket
    /// closed with unread data resets the connection, and the peer loses
    /// what it had not read yet).
    Draining,
}

/// One connection.
struct Client {
    stream: UnixStream,
    stage: Stage,
    /// When it is closed, whatever it has done.
    deadline: Instant,
}

/// What a client's bytes make so far.
#[derive(Debug, PartialEq, Eq)]
enum Framed {
    /// Not a whole line yet.
    Partial,
    /// A whole request of this many bytes (the newline not counted).
    Whole(usize),
    /// More than `max_request` bytes with no end in sight.
    TooLarge,
}

/// Where the request in `buf` ends, when `new` bytes of it are new.
fn framed(buf: &[u8], new: usize, max_request: usize) -> Framed {
    let from = buf.len() - new;
    match buf[from..].iter().position(|&b| b == b'\n') {
        Some(i) if from + i <= max_request => Framed::Whole(from + i),
        Some(_) => Framed::TooLarge,
        None if buf.len() > max_request => Framed::TooLarge,
        None => Framed::Partial,
    }
}

fn failure(msg: String) -> Response {
    Response {
        stderr: format!("sluice: {msg}\n"),
        code: 1,
        ..Default::default()
    }
}

fn encode(r: &Response) -> Vec<u8> {
    let mut v = serde_json::to_vec(r).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Write `response` if the socket takes it at once (a short one does).
fn say(stream: &UnixStream, response: &Response) {
    let _ = stream.set_nonblocking(true);
    let _ = (&*stream).write(&encode(response));
}

/// A read that would block, or was interrupted, reads nothing.
fn read_some(stream: &UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    match (&*stream).read(buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(0),
        Ok(0) => Err(ErrorKind::UnexpectedEof.into()),
        r => r,
    }
}

/// The control thread's state.
struct Server {
    listener: UnixListener,
    limits: Limits,
    clients: BTreeMap<u64, Client>,
    next_id: u64,
    /// Bytes in the clients' request buffers.
    buffered: usize,
    jobs: Sender<Job>,
    wake: Arc<EventFd>,
    epoll: Epoll,
}

impl Server {
    fn run(&mut self, stop: &EventFd) {
        let watch = |fd: BorrowedFd<'_>, tok| {
            self.epoll
                .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, tok))
                .is_ok()
        };
        if !watch(self.listener.as_fd(), TOK_LISTENER) || !watch(stop.as_fd(), TOK_STOP) {
            return;
        }
        let mut events = [EpollEvent::empty(); 64];
        loop {
            let timeout = match self.clients.values().map(|c| c.deadline).min() {
                Some(d) => {
                    let ms = d.saturating_duration_since(Instant::now()).as_millis() + 1;
                    EpollTimeout::try_from(ms.min(60_000)).unwrap_or(EpollTimeout::NONE)
                }
                None => EpollTimeout::NONE,
            };
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(_) => return,
            };
            for ev in &events[..n] {
                match ev.data() {
                    TOK_STOP => return,
                    TOK_LISTENER => self.accept_all(),
                    id => self.ready(id),
                }
            }
            self.expire(Instant::now());
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                Err(_) => {
                    // Out of file descriptors, say: let the backlog wait
                    // rather than spin on a listener that stays readable.
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }

    fn admit(&mut self, stream: UnixStream) {
        if !control::peer_allowed(&stream) {
            say(&stream, &failure("permission denied".into()));
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        while self.clients.len() >= self.limits.max_clients.max(1) {
            let Some((&oldest, _)) = self.clients.first_key_value() else {
                break;
            };
            if let Some(c) = self.remove(oldest) {
                if matches!(c.stage, Stage::Reading(_)) {
                    let why = "too many control connections at once: this one was the oldest";
                    say(&c.stream, &failure(why.into()));
                }
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let ev = EpollEvent::new(EpollFlags::EPOLLIN, id);
        if self.epoll.add(stream.as_fd(), ev).is_err() {
            return;
        }
        let client = Client {
            stream,
            stage: Stage::Reading(vec![]),
            deadline: Instant::now() + self.limits.request_time,
        };
        self.clients.insert(id, client);
    }

    /// Forget client `id` (dropping what it returns closes it).
    fn remove(&mut self, id: u64) -> Option<Client> {
        let c = self.clients.remove(&id)?;
        if let Stage::Reading(buf) = &c.stage {
            self.buffered -= buf.len();
        }
        let _ = self.epoll.delete(c.stream.as_fd());
        Some(c)
    }

    /// Tell client `id` why it is refused, then read what it still sends
    /// until it stops or its time is up.
    fn refuse(&mut self, id: u64, why: String) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if let Stage::Reading(buf) = &c.stage {
            self.buffered -= buf.len();
        }
        c.stage = Stage::Draining;
        say(&c.stream, &failure(why));
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
        self.drain(id);
    }

    fn ready(&mut self, id: u64) {
        match self.clients.get(&id).map(|c| &c.stage) {
            Some(Stage::Reading(_)) => self.read(id),
            Some(Stage::Writing(..)) => self.write(id),
            Some(Stage::Draining) => self.drain(id),
            None => {}
        }
    }

    fn read(&mut self, id: u64) {
        let limits = self.limits;
        let Some(Client {
            stream,
            stage: Stage::Reading(buf),
            ..
        }) = self.clients.get_mut(&id)
        else {
            return;
        };
        // At most one byte past the bound, which is enough to know it is passed.
        let room = (limits.max_request + 1)
            .saturating_sub(buf.len())
            .min(64 << 10);
        if self.buffered + room > limits.max_buffered {
            let why = format!(
                "the link's control socket holds {} bytes of unfinished requests, \
                 as many as it takes: try again",
                self.buffered
            );
            return self.refuse(id, why);
        }
        let old = buf.len();
        buf.resize(old + room, 0);
        let got = read_some(stream, &mut buf[old..]);
        let n = *got.as_ref().unwrap_or(&0);
        buf.truncate(old + n);
        self.buffered += n;
        let end = match (framed(buf, n, limits.max_request), got) {
            (Framed::Whole(end), _) => end,
            (Framed::TooLarge, _) => {
                let why = format!("control request larger than {} bytes", limits.max_request);
                return self.refuse(id, why);
            }
            (Framed::Partial, Ok(_)) => return,
            // A client that shut its sending side has sent its request.
            (Framed::Partial, Err(e))
                if e.kind() == ErrorKind::UnexpectedEof && !buf.is_empty() =>
            {
                buf.len()
            }
            (Framed::Partial, Err(_)) => {
                self.remove(id);
                return;
            }
        };
        let response = match serde_json::from_slice::<Request>(&buf[..end]) {
            Ok(request) => match self.run_job(request) {
                Some(r) => r,
                None => {
                    // The packet thread is gone, and the link with it.
                    self.remove(id);
                    return;
                }
            },
            Err(e) => failure(format!("bad control request: {e}")),
        };
        self.respond(id, &response);
    }

    /// Hand `request` to the packet thread and wait for its answer.
    fn run_job(&self, request: Request) -> Option<Response> {
        let (tx, rx) = mpsc::channel();
        self.jobs.send(Job { request, reply: tx }).ok()?;
        self.wake.write(1).ok()?;
        rx.recv().ok()
    }

    /// Start writing `response` to client `id`.
    fn respond(&mut self, id: u64, response: &Response) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if let Stage::Reading(buf) = &c.stage {
            self.buffered -= buf.len();
        }
        c.stage = Stage::Writing(encode(response), 0);
        c.deadline = Instant::now() + self.limits.response_time;
        let mut ev = EpollEvent::new(EpollFlags::EPOLLOUT, id);
        if self.epoll.modify(c.stream.as_fd(), &mut ev).is_err() {
            self.remove(id);
            return;
        }
        self.write(id);
    }

    fn write(&mut self, id: u64) {
        let Some(Client {
            stream,
            stage: Stage::Writing(out, sent),
            ..
        }) = self.clients.get_mut(&id)
        else {
            return;
        };
        while *sent < out.len() {
            match (&*stream).write(&out[*sent..]) {
                Ok(0) => break,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.remove(id);
    }

    /// Throw away what a refused client still sends; close it when it stops.
    fn drain(&mut self, id: u64) {
        let Some(c) = self.clients.get(&id) else {
            return;
        };
        let mut scrap = [0u8; 16 << 10];
        // A bounded turn: a fast sender does not keep the thread to itself.
        for _ in 0..64 {
            match read_some(&c.stream, &mut scrap) {
                Ok(0) => return,
                Ok(_) => {}
                Err(_) => {
                    self.remove(id);
                    return;
                }
            }
        }
    }

    /// Close the clients whose time is up, telling those still reading why.
    fn expire(&mut self, now: Instant) {
        let late: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            if let Some(c) = self.remove(id) {
                if matches!(c.stage, Stage::Reading(_)) {
                    let secs = self.limits.request_time.as_secs_f64();
                    say(
                        &c.stream,
                        &failure(format!("control request not finished within {secs} s")),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_request_is_one_line_of_at_most_max_request_bytes() {
        // (bytes so far, of which new, bound) -> framing
        assert_eq!(framed(b"{\"Sta", 5, 10), Framed::Partial);
        assert_eq!(framed(b"{\"Status\"}\n", 6, 10), Framed::Whole(10));
        assert_eq!(framed(b"0123456789\nrest", 15, 10), Framed::Whole(10));
        assert_eq!(framed(b"0123456789", 10, 10), Framed::Partial);
        assert_eq!(framed(b"0123456789a", 1, 10), Framed::TooLarge);
        assert_eq!(framed(b"0123456789a\n", 12, 10), Framed::TooLarge);
    }

    /// A control thread on a socket of its own, and a stand-in for the
    /// packet thread that answers every request with `answer`.
    struct Daemon {
        path: PathBuf,
        stop: Arc<AtomicBool>,
        packets: Option<JoinHandle<()>>,
    }

    impl Daemon {
        fn new(limits: Limits, answer: fn(&Request) -> Response) -> Daemon {
            static N: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "sluice-control-{}-{}.sock",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let inbox =
                Inbox::start(control::listen(&path).expect("listen"), limits).expect("start");
            let stop = Arc::new(AtomicBool::new(false));
            let stop2 = stop.clone();
            let packets = std::thread::spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    for job in inbox.jobs() {
                        let r = answer(&job.request);
                        job.answer(r);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            Daemon {
                path,
                stop,
                packets: Some(packets),
            }
        }

        fn connect(&self) -> UnixStream {
            let s = UnixStream::connect(&self.path).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            s
        }

        /// Send `bytes` on a new connection and read the answer.
        fn ask(&self, bytes: &[u8]) -> Response {
            let mut s = self.connect();
            s.write_all(bytes).expect("send");
            answer_of(&mut s)
        }
    }

    impl Drop for Daemon {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.packets.take() {
                let _ = t.join();
            }
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Everything the daemon sends until it closes, as one answer.
    fn answer_of(s: &mut UnixStream) -> Response {
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read the answer");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
    }

    fn echo(req: &Request) -> Response {
        Response {
            stdout: format!("{req:?}"),
            ..Default::default()
        }
    }

    fn status() -> Vec<u8> {
        b"{\"Status\":null}\n".to_vec()
    }

    #[test]
    fn an_oversize_or_unfinished_request_is_dropped_and_others_answered() {
        let limits = Limits {
            max_request: 1000,
            request_time: Duration::from_millis(300),
            ..Limits::default()
        };
        let d = Daemon::new(limits, echo);
        // Sends half a request and nothing more.
        let mut half = d.connect();
        half.write_all(b"{\"Tc\":").expect("send");
        // Exactly the bound is a request (JSON allows the padding), a byte more is not.
        let mut at_bound = b"\"Status\"".to_vec();
        at_bound.resize(1000, b' ');
        at_bound.push(b'\n');
        assert_eq!(d.ask(&at_bound).stdout, "Status");
        at_bound.insert(0, b' ');
        let r = d.ask(&at_bound);
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (1, "sluice: control request larger than 1000 bytes\n")
        );
        // No newline ever: refused once past the bound, not read on.
        let mut big = d.connect();
        let _ = big.write_all(&[b'x'; 5000]);
        let r = answer_of(&mut big);
        assert_eq!(r.stderr, "sluice: control request larger than 1000 bytes\n");
        // Bad JSON is said so.
        let r = d.ask(b"{\"Tc\": 3}\n");
        assert!(
            r.stderr.starts_with("sluice: bad control request: "),
            "{}",
            r.stderr
        );
        // The half request is dropped at its deadline, with a word why.
        let r = answer_of(&mut half);
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (1, "sluice: control request not finished within 0.3 s\n")
        );
        // A client that shuts its side after the request is answered.
        let mut s = d.connect();
        s.write_all(b"{\"Status\":null}").expect("send");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        assert_eq!(answer_of(&mut s).stdout, "Status");
    }

    #[test]
    fn a_client_that_never_reads_its_answer_holds_up_nobody() {
        let limits = Limits {
            response_time: Duration::from_millis(300),
            ..Limits::default()
        };
        // Status answers 8 MiB, more than a socket buffers.
        let d = Daemon::new(limits, |req| match req {
            Request::Status => Response {
                stdout: "x".repeat(8 << 20),
                ..Default::default()
            },
            _ => echo(req),
        });
        let mut deaf = d.connect();
        deaf.write_all(&status()).expect("send");
        let r = d.ask(b"{\"Ip\":{\"argv\":[\"link\"]}}\n");
        assert_eq!(r.stdout, "Ip { argv: [\"link\"] }");
        // The deaf client is closed (the daemon hangs up; what it wrote
        // before stays readable) with its answer cut short.
        let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).expect("epoll");
        ep.add(&deaf, EpollEvent::new(EpollFlags::EPOLLRDHUP, 0))
            .expect("watch");
        let mut ev = [EpollEvent::empty()];
        assert_eq!(
            ep.wait(&mut ev, 20_000u16).expect("wait"),
            1,
            "never closed"
        );
        let mut got = vec![];
        let _ = deaf.read_to_end(&mut got);
        assert!(
            !got.is_empty() && got.len() < (8 << 20),
            "{} bytes of the answer",
            got.len()
        );
    }

    #[test]
    fn a_thousand_connections_at_once_close_the_oldest_and_a_request_is_answered() {
        // Room for the thousand client ends and the daemon's.
        let mut lim = nix::libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with a valid rlimit on this process.
        unsafe {
            nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut lim);
            lim.rlim_cur = lim.rlim_max.min(4096).max(lim.rlim_cur);
            nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &lim);
        }
        let d = Daemon::new(Limits::default(), echo);
        let crowd: Vec<UnixStream> = (0..1000).map(|_| d.connect()).collect();
        // Accepted after the crowd, answered.
        assert_eq!(d.ask(&status()).stdout, "Status");
        let mut closed = 0;
        for mut s in crowd {
            s.set_nonblocking(true).expect("nonblocking");
            let mut text = String::new();
            match s.read_to_string(&mut text) {
                Ok(_) => {
                    let r: Response = serde_json::from_str(&text).expect("an answer");
                    assert_eq!(
                        r.stderr,
                        "sluice: too many control connections at once: this one was the oldest\n"
                    );
                    closed += 1;
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
            }
        }
        // The daemon held at most 64 connections, the answered one among them.
        assert!(closed >= 1000 - 63, "{closed} closed");
    }
}
