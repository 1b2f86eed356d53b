//! Traffic for measuring a path between two network namespaces: bulk TCP
//! (iperf3 when it is installed, else a built-in sender and receiver) and a
//! flood of small UDP datagrams; and a kernel veth pair to measure against.
//! `sluice bench live` uses them on a sluice link and on the veth pair.
//!
//! The built-in tools run as threads of this process, each moved into its
//! namespace with `setns` (which changes only the calling thread's network
//! namespace). Rates are measured at the receiver, after a warm-up, over
//! the rest of the run.

use crate::link;
use nix::sched::{setns, CloneFlags};
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Move the calling thread into network namespace `ns` (`/run/netns/NS`).
pub fn enter_netns(ns: &str) -> Result<(), String> {
    let f = std::fs::File::open(Path::new("/run/netns").join(ns))
        .map_err(|e| format!("namespace {ns}: {e}"))?;
    setns(&f, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {ns}: {e}"))
}

/// Run `f` on a thread of its own inside namespace `ns` (`""`: the
/// calling thread's own, such as the host's end of a `sluice shell` link).
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> std::thread::JoinHandle<Result<T, String>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        if !ns.is_empty() {
            enter_netns(&ns)?;
        }
        f()
    })
}

fn join<T>(h: std::thread::JoinHandle<Result<T, String>>) -> Result<T, String> {
    h.join()
        .map_err(|_| "a traffic thread panicked".to_string())?
}

/// Where traffic goes: from namespace `from` to `to`, whose address is
/// `addr`. For the built-in tools (not iperf3) an empty name is the
/// namespace of the thread that starts the traffic (for a `sluice shell`
/// link, whose side b is the host's).
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// The sender's namespace.
    pub from: String,
    /// The receiver's namespace.
    pub to: String,
    /// The receiver's IPv4 address.
    pub addr: Ipv4Addr,
}

/// How [`tcp_goodput`] runs.
#[derive(Clone, Copy, Debug)]
pub struct TcpRun {
    /// The receiver's port.
    pub port: u16,
    /// Seconds from the connection to the end of the measuring window.
    pub secs: f64,
    /// Seconds of warm-up before the window opens.
    pub warm: f64,
    /// The receiver's `SO_RCVBUF`, which bounds the TCP window (`None`:
    /// Linux tunes it). A window smaller than a shaper's queue keeps TCP
    /// from overflowing it, so no loss recovery (which hands over
    /// out-of-order data in bursts) blurs the edges of the measuring window.
    pub rcvbuf: Option<usize>,
    /// Run the sender and receiver at the daemon's priority
    /// ([`crate::clock::prefer_cpu`]), so that other work on a busy machine
    /// does not hold them up for longer than the path's buffers last: what
    /// is measured is then the path, not the machine's load.
    pub urgent: bool,
    /// The sender's congestion control (`TCP_CONGESTION`, e.g. "cubic");
    /// `None`: the namespace's default (`net.ipv4.tcp_congestion_control`,
    /// which may be bbr, which keeps a bottleneck's queue short where a
    /// loss-based one such as cubic or reno fills it).
    pub congestion: Option<&'static str>,
}

impl Default for TcpRun {
    fn default() -> Self {
        TcpRun {
            port: 5201,
            secs: 5.0,
            warm: 1.0,
            rcvbuf: None,
            urgent: false,
            congestion: None,
        }
    }
}

/// Bulk TCP from `p.from` to `p.to` with the built-in sender and receiver:
/// the goodput in bit/s the receiver saw between `warm` and `secs` seconds
/// after the connection was accepted. The receiver then closes, which stops
/// the sender, so whatever is still queued on the path does not lengthen
/// the run (a shaped path with a long queue would take long to drain).
pub fn tcp_goodput(p: &Endpoints, run: TcpRun) -> Result<f64, String> {
    let TcpRun {
        port,
        secs,
        warm,
        rcvbuf,
        urgent,
        congestion,
    } = run;
    let (tx, rx) = mpsc::channel();
    let receiver = in_netns(&p.to, move || {
        if urgent {
            crate::clock::prefer_cpu();
        }
        let listener = listen_tcp(port, rcvbuf);
        let _ = tx.send(listener.as_ref().map(|_| ()).map_err(Clone::clone));
        let (mut s, _) = listener?.accept().map_err(|e| format!("accept: {e}"))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 1 << 17];
        let start = Instant::now();
        // The window runs from the first read after the warm-up to the last
        // read before the end, and counts the bytes read after the first:
        // both edges are reads, so neither holds a fraction of a packet's time.
        let (mut bytes, mut from, mut to) = (0u64, None, None);
        loop {
            let n = match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if would_block(&e) => 0,
                Err(e) => return Err(format!("read: {e}")),
            };
            let now = Instant::now();
            let t = now.duration_since(start).as_secs_f64();
            if t >= secs {
                break;
            }
            if n > 0 && t >= warm {
                if from.is_none() {
                    from = Some(now);
                } else {
                    bytes += n as u64;
                    to = Some(now);
                }
            }
        }
        match (from, to) {
            (Some(f), Some(t)) if t > f => {
                Ok(bytes as f64 * 8.0 / t.duration_since(f).as_secs_f64())
            }
            _ => Err("no data arrived after the warm-up".into()),
        }
    });
    rx.recv().map_err(|_| "receiver died".to_string())??;
    let addr = SocketAddrV4::new(p.addr, port);
    let sender = in_netns(&p.from, move || {
        if urgent {
            crate::clock::prefer_cpu();
        }
        let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        if let Some(cc) = congestion {
            // Before any data: the connection runs on it from the start.
            nix::sys::socket::setsockopt(
                &s,
                nix::sys::socket::sockopt::TcpCongestion,
                &std::ffi::OsString::from(cc),
            )
            .map_err(|e| format!("congestion control {cc}: {e}"))?;
        }
        s.set_write_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let buf = vec![0x5au8; 1 << 17];
        let start = Instant::now();
        // Until the receiver closes (the write fails), with a limit in case it never does.
        while start.elapsed().as_secs_f64() < secs + 30.0 {
            match s.write(&buf) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        Ok(())
    });
    let goodput = join(receiver);
    join(sender)?;
    goodput
}

/// Round-trip times of `count` ICMP echo requests with `payload` bytes of
/// data, sent from namespace `ns` to `addr` every `interval` (a raw
/// socket; the far end's kernel answers, so no program's scheduling is in
/// the loop). Each time runs from just before the request is sent to the
/// kernel's receive timestamp of the reply (`SO_TIMESTAMPNS`), so the
/// prober's own wake-up is not counted either. Lost echoes are missing;
/// times are in the order the replies came.
pub fn icmp_rtts(
    ns: &str,
    addr: Ipv4Addr,
    count: u16,
    interval: Duration,
    payload: usize,
) -> Result<Vec<Duration>, String> {
    let h = in_netns(ns, move || icmp_probe(addr, count, interval, payload));
    join(h)
}

fn icmp_probe(
    addr: Ipv4Addr,
    count: u16,
    interval: Duration,
    payload: usize,
) -> Result<Vec<Duration>, String> {
    use nix::sys::socket::{self as so, sockopt, AddressFamily, MsgFlags, SockFlag, SockType};
    use nix::sys::time::TimeSpec;
    use nix::time::{clock_gettime, ClockId};
    let sock = so::socket(
        AddressFamily::Inet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        so::SockProtocol::Icmp,
    )
    .map_err(|e| format!("raw ICMP socket: {e}"))?;
    so::setsockopt(&sock, sockopt::ReceiveTimestampns, &true).map_err(|e| e.to_string())?;
    let dest = so::SockaddrIn::from(SocketAddrV4::new(addr, 0));
    static PROBES: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let ident = (std::process::id() as u16)
        ^ PROBES.fetch_add(0x9e37, std::sync::atomic::Ordering::Relaxed);
    let clock = |id| clock_gettime(id).map_err(|e| e.to_string());
    let monotonic = || clock(ClockId::CLOCK_MONOTONIC);
    let mut sent_at: Vec<Option<TimeSpec>> = vec![None; count as usize];
    let mut rtts = Vec::with_capacity(count as usize);
    let start = Instant::now();
    let mut next = 0u16;
    let mut last_sent = None;
    let mut buf = [0u8; 2048];
    let mut cmsg = nix::cmsg_space!(TimeSpec);
    loop {
        let due = start + interval * next as u32;
        if next < count && Instant::now() >= due {
            let mut req = vec![0u8; 8 + payload];
            req[0] = 8; // echo request
            req[4..6].copy_from_slice(&ident.to_be_bytes());
            req[6..8].copy_from_slice(&next.to_be_bytes());
            let c = !fold16(&req);
            req[2..4].copy_from_slice(&c.to_be_bytes());
            sent_at[next as usize] = Some(monotonic()?);
            so::sendto(sock.as_raw_fd(), &req, &dest, MsgFlags::empty())
                .map_err(|e| format!("send echo: {e}"))?;
            next += 1;
            last_sent = Some(Instant::now());
            continue;
        }
        // After the last request, wait for stragglers up to a second.
        if next == count
            && (rtts.len() == count as usize
                || last_sent.is_some_and(|t: Instant| t.elapsed() > Duration::from_secs(1)))
        {
            break;
        }
        let wait = if next < count {
            due.saturating_duration_since(Instant::now())
        } else {
            Duration::from_millis(10)
        };
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&sock),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = wait.as_micros().div_ceil(1000).min(1000) as u16;
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
        loop {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = match so::recvmsg::<()>(
                sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) => m,
                Err(_) => break,
            };
            let ts = msg.cmsgs().ok().and_then(|mut c| {
                c.find_map(|m| match m {
                    so::ControlMessageOwned::ScmTimestampns(t) => Some(t),
                    _ => None,
                })
            });
            let n = msg.bytes;
            let pkt = &buf[..n];
            let ihl = (pkt.first().copied().unwrap_or(0) & 0xf) as usize * 4;
            let Some(icmp) = pkt.get(ihl..ihl + 8) else {
                continue;
            };
            let (kind, id) = (icmp[0], u16::from_be_bytes([icmp[4], icmp[5]]));
            let seq = u16::from_be_bytes([icmp[6], icmp[7]]) as usize;
            if kind != 0 || id != ident {
                continue;
            }
            if let (Some(Some(t0)), Some(t1)) = (sent_at.get_mut(seq).map(Option::take), ts) {
                // The realtime stamp on the monotonic clock, by their offset now.
                let offset = clock(ClockId::CLOCK_REALTIME)? - monotonic()?;
                let d = t1 - offset - t0;
                let ns = nix::sys::time::TimeValLike::num_nanoseconds(&d);
                rtts.push(Duration::from_nanos(ns.max(0) as u64));
            }
        }
    }
    Ok(rtts)
}

/// The Internet checksum's folded sum of `b`.
fn fold16(b: &[u8]) -> u16 {
    sluice_core::gso::fold(sluice_core::gso::sum(b, 0))
}

/// A TCP listener on `port`, with `SO_RCVBUF` set before it listens (so
/// the window scale fits it).
fn listen_tcp(port: u16, rcvbuf: Option<usize>) -> Result<TcpListener, String> {
    use nix::sys::socket::{self as so, sockopt, AddressFamily, SockFlag, SockType};
    let fd = so::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| format!("socket: {e}"))?;
    so::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(|e| e.to_string())?;
    if let Some(n) = rcvbuf {
        // Beyond `net.core.rmem_max` (212 kB by default) only with the force
        // variant, which needs CAP_NET_ADMIN.
        so::setsockopt(&fd, sockopt::RcvBufForce, &n)
            .or_else(|_| so::setsockopt(&fd, sockopt::RcvBuf, &n))
            .map_err(|e| e.to_string())?;
    }
    let addr = so::SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
    so::bind(fd.as_raw_fd(), &addr).map_err(|e| format!("bind: {e}"))?;
    so::listen(&fd, so::Backlog::new(4).map_err(|e| e.to_string())?)
        .map_err(|e| format!("listen: {e}"))?;
    Ok(TcpListener::from(fd))
}

/// Bulk TCP with iperf3 (`iperf3 -s -1` in `p.to`, `iperf3 -c` in
/// `p.from`); the receiver's goodput in bit/s, the first `omit` seconds
/// left out (`-O`). `urgent` runs both under `chrt -f 1` (see
/// [`TcpRun::urgent`]).
pub fn iperf3_goodput(
    p: &Endpoints,
    port: u16,
    (secs, omit): (u32, u32),
    urgent: bool,
) -> Result<f64, String> {
    let port_s = port.to_string();
    let cmd = || {
        let mut c = Command::new(if urgent { "chrt" } else { "ip" });
        if urgent {
            c.args(["-f", "1", "ip"]);
        }
        c
    };
    let mut server = cmd()
        .args(["netns", "exec", &p.to, "iperf3", "-s", "-1", "-p", &port_s])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 -s: {e}"))?;
    // The server listens within a few milliseconds; the client retries a refused connect.
    let mut out = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(40));
        let o = cmd()
            .args(["netns", "exec", &p.from, "iperf3", "-J", "-c"])
            .arg(p.addr.to_string())
            .args([
                "-p",
                &port_s,
                "-t",
                &secs.to_string(),
                "-O",
                &omit.to_string(),
            ])
            .output()
            .map_err(|e| format!("iperf3 -c: {e}"))?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() {
            out = Some(text);
            break;
        }
        if !text.contains("refused") {
            let _ = server.kill();
            let _ = server.wait();
            return Err(format!("iperf3 -c failed: {}", text.trim()));
        }
    }
    let _ = server.wait();
    let text = out.ok_or("iperf3 -s did not start")?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("iperf3 -J output: {e}"))?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| "iperf3 -J output has no end.sum_received".into())
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Is `cmd` on PATH?
pub fn have(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(cmd).is_file()))
}

/// What a UDP flood measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpRate {
    /// Datagrams per second the sender got out of its socket.
    pub sent_pps: f64,
    /// Datagrams per second that arrived, after the warm-up.
    pub received_pps: f64,
}

/// Datagrams per `sendmmsg`/`recvmmsg` call.
const MMSG: usize = 64;

/// Flood `p.to` with UDP datagrams of `payload` bytes from `p.from` for
/// `secs` seconds, as fast as the sender's socket takes them (`sendmmsg`,
/// 64 at a time); count what arrives after `warm` seconds. `urgent` as in
/// [`TcpRun::urgent`].
pub fn udp_flood(
    p: &Endpoints,
    port: u16,
    payload: usize,
    (secs, warm): (f64, f64),
    urgent: bool,
) -> Result<UdpRate, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop_r = stop.clone();
    let receiver = in_netns(&p.to, move || {
        if urgent {
            // Above the daemon, which never blocks while the sender floods
            // it: the receiver takes its datagrams when it wakes up.
            crate::clock::prefer_cpu_at(crate::clock::RT_PRIORITY + 1);
        }
        let sock = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| format!("bind: {e}"));
        let _ = tx.send(sock.as_ref().map(|_| ()).map_err(Clone::clone));
        let sock = sock?;
        {
            use nix::sys::socket::{setsockopt, sockopt};
            let n = 8usize << 20;
            let _ = setsockopt(&sock, sockopt::RcvBufForce, &n)
                .or_else(|_| setsockopt(&sock, sockopt::RcvBuf, &n));
        }
        let mut bufs = vec![[0u8; 2048]; MMSG];
        let mut hdrs = nix::sys::socket::MultiHeaders::<()>::preallocate(MMSG, None);
        let start = Instant::now();
        // Drain the socket, then sleep half a millisecond: one wake-up per
        // batch rather than per datagram, which would take the CPU from
        // the path being measured (the 8 MB buffer holds the meantime).
        let (mut count, mut from, mut to) = (0u64, None, None);
        while !stop_r.load(Ordering::Relaxed) {
            let mut iovs: Vec<[IoSliceMut<'_>; 1]> =
                bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
            let n = nix::sys::socket::recvmmsg(
                sock.as_raw_fd(),
                &mut hdrs,
                iovs.iter_mut(),
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                None,
            )
            .map_or(0, |r| r.count());
            if n == 0 {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            let now = Instant::now();
            if now.duration_since(start).as_secs_f64() >= warm {
                // The window runs from the first batch after the warm-up
                // to the last, counting the datagrams after the first.
                if from.is_none() {
                    from = Some(now);
                } else {
                    count += n as u64;
                    to = Some(now);
                }
            }
        }
        match (from, to) {
            (Some(f), Some(t)) if t > f => Ok(count as f64 / t.duration_since(f).as_secs_f64()),
            _ => Ok(0.0),
        }
    });
    rx.recv().map_err(|_| "receiver died".to_string())??;
    let addr = SocketAddrV4::new(p.addr, port);
    let sender = in_netns(&p.from, move || {
        if urgent {
            crate::clock::prefer_cpu();
        }
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("bind: {e}"))?;
        sock.connect(addr)
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let data = vec![0x5au8; payload];
        let iovs: Vec<[IoSlice<'_>; 1]> = (0..MMSG).map(|_| [IoSlice::new(&data)]).collect();
        let addrs: Vec<Option<nix::sys::socket::SockaddrIn>> = vec![None; MMSG];
        let mut hdrs = nix::sys::socket::MultiHeaders::preallocate(MMSG, None);
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            if let Ok(r) = nix::sys::socket::sendmmsg(
                sock.as_raw_fd(),
                &mut hdrs,
                &iovs,
                &addrs,
                [],
                nix::sys::socket::MsgFlags::empty(),
            ) {
                sent += r.count() as u64;
            }
        }
        Ok(sent as f64 / start.elapsed().as_secs_f64())
    });
    let sent_pps = join(sender);
    // Whatever is still on its way arrives within a few milliseconds.
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let received_pps = join(receiver)?;
    Ok(UdpRate {
        sent_pps: sent_pps?,
        received_pps,
    })
}

/// Two network namespaces `NAME-a` and `NAME-b` joined by a kernel veth
/// pair (`va` 10.78.X.1/24, `vb` 10.78.X.2/24): the kernel's own path, to
/// measure a sluice link against. Removed when dropped.
pub struct VethPair {
    /// The namespaces' common prefix.
    pub name: String,
    /// Side b's address.
    pub addr_b: Ipv4Addr,
}

impl VethPair {
    /// Make the pair; `x` picks the subnet 10.78.X.0/24.
    pub fn new(name: &str, x: u8) -> Result<VethPair, String> {
        let pair = VethPair {
            name: name.into(),
            addr_b: Ipv4Addr::new(10, 78, x, 2),
        };
        let (a, b) = (pair.ns('a'), pair.ns('b'));
        for ns in [&a, &b] {
            link::run("ip", &["netns", "add", ns])?;
            link::run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        link::run(
            "ip",
            &[
                "-n", &a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &b,
            ],
        )?;
        for (ns, dev, host) in [(&a, "va", 1), (&b, "vb", 2)] {
            let addr = format!("10.78.{x}.{host}/24");
            link::run("ip", &["-n", ns, "addr", "add", &addr, "dev", dev])?;
            link::run("ip", &["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// The namespace of side `side` ('a' or 'b').
    pub fn ns(&self, side: char) -> String {
        format!("{}-{side}", self.name)
    }

    /// The path from side a to side b.
    pub fn path(&self) -> Endpoints {
        Endpoints {
            from: self.ns('a'),
            to: self.ns('b'),
            addr: self.addr_b,
        }
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for side in ['a', 'b'] {
            let ns = self.ns(side);
            if link::netns_exists(&ns) {
                let _ = link::run("ip", &["netns", "del", &ns]);
            }
        }
    }
}
