//! `sluice bench proxy`: what `sluice proxy` costs and how exactly it
//! shapes, measured on the loopback: bulk TCP through a proxy
//! without toxics against the same without the proxy, the round-trip time a
//! proxy adds to small echoes, and a bandwidth and a latency toxic against
//! their settings, and many connections at once through one proxy. One
//! machine-readable line per case; cases named on the command line run
//! alone.

use sluice_proxy::api::Api;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: sluice bench proxy [--quick] [--conns N] [CASE...]
  bulk       one TCP stream for 2 s, direct and through a proxy without toxics
  rtt        1000 echoes of 64 bytes, direct and through the proxy (p50, p99)
  bandwidth  a `bandwidth` toxic of 10000 KB/s: the rate a bulk stream gets
  latency    a `latency` toxic of 10 ms: p50 echo time less the proxied p50
  conns      N connections (10000; --quick 1000) opened at once through one
             proxy, each echoing 4 KiB checked byte for byte, all held open
             together: the process's threads and RSS then, connections that
             failed, SYNs the kernel dropped for a full accept queue, and the
             time from the first connect to the last byte
             (clients and echo server run as processes of their own:
             `--load-clients ADDR N` and `--load-echo N`)
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

/// A line of /proc/self/status (`Threads`, `VmRSS`, `VmHWM`): its number.
fn status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A counter of the kernel's `TcpExt` statistics (/proc/net/netstat),
/// system-wide.
fn tcp_ext(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Raise the open-file limit to at least `want` (soft and, as root, hard).
fn raise_nofile(want: u64) -> Result<(), String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if lim.rlim_cur >= want {
        return Ok(());
    }
    let hard = lim.rlim_max;
    lim.rlim_cur = want;
    lim.rlim_max = hard.max(want);
    // SAFETY: a valid pointer to an rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        return Ok(());
    }
    // Raising the hard limit takes CAP_SYS_RESOURCE: take what it allows.
    let e = std::io::Error::last_os_error();
    lim.rlim_cur = hard;
    lim.rlim_max = hard;
    // SAFETY: a valid pointer to an rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    Err(format!("cannot raise the open-file limit to {want}: {e}"))
}

/// The open-file limit in force.
fn nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid pointer to an rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    lim.rlim_cur
}

/// An echo server on one thread (epoll), so that the process's thread count
/// is the proxy's plus a known few: returns its address.
fn epoll_echo() -> String {
    use std::collections::HashMap;
    use std::os::fd::{AsRawFd, RawFd};
    let l = TcpListener::bind("127.0.0.1:0").expect("bind the loopback");
    let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = l.set_nonblocking(true);
    // SAFETY: listen(2) on a listening socket sets its backlog anew.
    unsafe { libc::listen(l.as_raw_fd(), 65535) };
    thread::spawn(move || {
        // SAFETY: plain system calls on descriptors this thread owns.
        let ep = unsafe { libc::epoll_create1(0) };
        let add = |fd: RawFd, events: u32| {
            let mut ev = libc::epoll_event {
                events,
                u64: fd as u64,
            };
            // SAFETY: as above.
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        };
        add(l.as_raw_fd(), libc::EPOLLIN as u32);
        let mut conns: HashMap<RawFd, TcpStream> = HashMap::new();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: as above; `events` has room for its length.
            let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 1024, -1) };
            for ev in events.iter().take(n.max(0) as usize) {
                let fd = ev.u64 as RawFd;
                if fd == l.as_raw_fd() {
                    while let Ok((c, _)) = l.accept() {
                        let _ = c.set_nodelay(true);
                        add(c.as_raw_fd(), libc::EPOLLIN as u32);
                        conns.insert(c.as_raw_fd(), c);
                    }
                    continue;
                }
                let Some(c) = conns.get_mut(&fd) else {
                    continue;
                };
                // (Echoes of a few KiB: the socket buffer always takes them,
                // so a blocking write of what was read never waits long.)
                let done = match c.read(&mut buf) {
                    Ok(0) => true,
                    Ok(n) => {
                        let _ = c.set_nonblocking(false);
                        let failed = c.write_all(&buf[..n]).is_err();
                        let _ = c.set_nonblocking(true);
                        failed
                    }
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                };
                if done {
                    conns.remove(&fd);
                }
            }
        }
    });
    addr
}

/// Open `n` connections to `addr` at once (non-blocking connects, then
/// waiting for them all): the connected ones, and how many failed.
fn connect_burst(addr: std::net::SocketAddr, n: usize) -> (Vec<TcpStream>, usize) {
    use std::os::fd::{AsRawFd, FromRawFd};
    let std::net::SocketAddr::V4(v4) = addr else {
        return (Vec::new(), n);
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let mut pending = Vec::with_capacity(n);
    let mut failed = 0;
    for _ in 0..n {
        // SAFETY: a new socket, owned by the TcpStream made from it at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            failed += 1;
            continue;
        }
        // SAFETY: `fd` is a socket this function just opened.
        let s = unsafe { TcpStream::from_raw_fd(fd) };
        // SAFETY: a valid address of the right length.
        let r = unsafe {
            libc::connect(
                fd,
                &sin as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let err = std::io::Error::last_os_error().raw_os_error();
        if r == 0 || err == Some(libc::EINPROGRESS) {
            pending.push(s);
        } else {
            failed += 1;
        }
    }
    let mut open = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pending.is_empty() && Instant::now() < deadline {
        let mut fds: Vec<libc::pollfd> = pending
            .iter()
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of its length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        let mut still = Vec::with_capacity(pending.len());
        for (s, p) in pending.into_iter().zip(&fds) {
            if p.revents == 0 {
                still.push(s);
            } else if matches!(s.take_error(), Ok(None)) && s.peer_addr().is_ok() {
                let _ = s.set_nonblocking(false);
                open.push(s);
            } else {
                failed += 1;
            }
        }
        pending = still;
    }
    (open, failed + pending.len())
}

/// The 4 KiB connection `i` sends (and must get back).
fn payload(i: usize) -> Vec<u8> {
    (0..4096)
        .map(|k| (k as u32).wrapping_mul(31).wrapping_add(i as u32 * 7) as u8)
        .collect()
}

/// Descriptors the bench keeps for itself besides its connections.
const SPARE_FDS: u64 = 64;

/// The client threads of the `conns` case's load.
const CLIENTS: usize = 8;

/// A load process of the `conns` case: `sluice bench proxy` again with
/// `args`, its standard input and output piped to this one.
fn load(args: &[&str]) -> Option<std::process::Child> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().ok()?;
    Command::new(exe)
        .args(["bench", "proxy"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()
}

/// The first line a load process prints.
fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    if let Some(out) = child.stdout.as_mut() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    line.trim().to_string()
}

/// The end of a load process: close its input (it exits), wait for it.
fn finish(mut child: std::process::Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// Block until standard input ends (the parent let go), then exit.
fn exit_when_stdin_ends() -> ! {
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    std::process::exit(0)
}

/// `--load-echo`: the `conns` case's echo server, in a process of its own
/// (its descriptors count against its own limit): prints its address,
/// serves until standard input ends.
fn load_echo(n: u64) -> i32 {
    let _ = raise_nofile(n + SPARE_FDS);
    println!("{}", epoll_echo());
    exit_when_stdin_ends()
}

/// `--load-clients ADDR N`: the `conns` case's clients, in a process of
/// their own: open `n` connections to `addr` at once (from [`CLIENTS`]
/// threads), send each 4 KiB and check the echo byte for byte, then print
/// `failed=F garbled=G secs=S` with all of them still open, and hold them
/// until standard input ends.
fn load_clients(addr: &str, n: usize) -> i32 {
    let _ = raise_nofile(n as u64 + SPARE_FDS);
    let Ok(addr) = addr.parse::<std::net::SocketAddr>() else {
        println!("failed={n} garbled=0 secs=0");
        return 1;
    };
    let t0 = Instant::now();
    let (failed, garbled) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let all_open = Arc::new(std::sync::Barrier::new(CLIENTS + 1));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let (failed, garbled, all_open) = (failed.clone(), garbled.clone(), all_open.clone());
            let share = n / CLIENTS + usize::from(k < n % CLIENTS);
            thread::spawn(move || {
                let (mut open, f) = connect_burst(addr, share);
                failed.fetch_add(f as u64, Ordering::Relaxed);
                for (i, s) in open.iter_mut().enumerate() {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                    if s.write_all(&payload(k + i * CLIENTS)).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let mut got = vec![0u8; 4096];
                for (i, s) in open.iter_mut().enumerate() {
                    match s.read_exact(&mut got) {
                        Ok(()) if got == payload(k + i * CLIENTS) => {}
                        Ok(()) => {
                            garbled.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                all_open.wait();
                // Hold the connections until the process ends.
                std::mem::forget(open);
            })
        })
        .collect();
    all_open.wait();
    println!(
        "failed={} garbled={} secs={:.2}",
        failed.load(Ordering::Relaxed),
        garbled.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64()
    );
    drop(clients);
    exit_when_stdin_ends()
}

/// The `conns` case: `n` connections through one proxy at once, the
/// clients and the echo server in processes of their own, so that this
/// process's threads, memory and descriptors are the proxy's (and the
/// bench's main thread).
fn many(api: &Api, n: usize) {
    // The proxy holds two descriptors per connection.
    let want = 2 * n as u64 + SPARE_FDS;
    let mut n = n;
    if let Err(e) = raise_nofile(want) {
        let limit = nofile();
        let fits = (limit.saturating_sub(SPARE_FDS) / 2) as usize;
        eprintln!(
            "sluice bench proxy: {e}; the open-file limit {limit} holds {fits} proxied connections"
        );
        n = n.min(fits);
    }
    let Some(mut echo) = load(&["--load-echo", &n.to_string()]) else {
        println!("proxy=tcp case=conns conns={n} error=no_load_process");
        return;
    };
    let upstream = first_line(&mut echo);
    let before = status("Threads");
    let overflows = tcp_ext("ListenOverflows");
    let addr = proxy(api, "conns", &upstream, None);
    let Some(mut clients) = load(&["--load-clients", &addr, &n.to_string()]) else {
        println!("proxy=tcp case=conns conns={n} error=no_load_process");
        finish(echo);
        return;
    };
    // Every connection is open (or failed) and has echoed: measure now.
    let result = first_line(&mut clients);
    let (threads, rss, hwm) = (status("Threads"), status("VmRSS"), status("VmHWM"));
    // SYNs dropped for a full accept queue (the proxy's or the echo
    // server's; each is sent again after a second): they show in the time.
    let overflows = tcp_ext("ListenOverflows").saturating_sub(overflows);
    finish(clients);
    api.route("DELETE", "/proxies/conns", "");
    finish(echo);
    println!(
        "proxy=tcp case=conns conns={n} {result} listen_overflows={overflows} threads={threads} proxy_threads={} rss_mib={:.0} hwm_mib={:.0}",
        threads.saturating_sub(before),
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
    );
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
    let mut conns = 10_000;
    let mut cases: Vec<&str> = Vec::new();
    let mut args = args.iter();
    let count = |v: Option<&String>| v.and_then(|v| v.parse::<usize>().ok()).filter(|c| *c > 0);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" | "-q" => (secs, n, conns) = (0.5, 200, 1000),
            "--conns" => match count(args.next()) {
                Some(c) => conns = c,
                None => {
                    eprintln!("sluice bench proxy: --conns takes a positive count\n{USAGE}");
                    return 2;
                }
            },
            "--load-echo" => return load_echo(count(args.next()).unwrap_or(1) as u64),
            "--load-clients" => {
                let addr = args.next().cloned().unwrap_or_default();
                return load_clients(&addr, count(args.next()).unwrap_or(1));
            }
            "-h" | "--help" | "help" => {
                print!("{USAGE}");
                return 0;
            }
            c @ ("bulk" | "rtt" | "bandwidth" | "latency" | "conns") => cases.push(c),
            other => {
                eprintln!("sluice bench proxy: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    let run = |c: &str| cases.is_empty() || cases.contains(&c);
    if cfg!(debug_assertions) {
        eprintln!("sluice bench: this is a debug build; use --release for real figures");
    }
    let api = Api::default();
    // First, so that the threads it counts are the proxy's own, not the
    // other cases' servers'.
    if run("conns") {
        many(&api, conns);
    }
    let ((sink, received), (echo, _)) = (server(true), server(false));
    if run("bulk") {
        let direct = bulk(&sink, &received, secs);
        let proxied = bulk(&proxy(&api, "bulk", &sink, None), &received, secs);
        println!(
            "proxy=tcp case=bulk gbps={:.2} direct_gbps={:.2}",
            proxied * 8e-9,
            direct * 8e-9
        );
    }
    let mut p = Vec::new();
    if run("rtt") || run("latency") {
        let d = echoes(&echo, n);
        p = echoes(&proxy(&api, "rtt", &echo, None), n);
        println!(
            "proxy=tcp case=rtt p50_us={:.1} p99_us={:.1} direct_p50_us={:.1} direct_p99_us={:.1}",
            pct(&p, 0.5),
            pct(&p, 0.99),
            pct(&d, 0.5),
            pct(&d, 0.99)
        );
    }
    if run("bandwidth") {
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
    }
    if run("latency") {
        let toxic = r#"{"type":"latency","attributes":{"latency":10}}"#;
        let l = echoes(&proxy(&api, "lat", &echo, Some(toxic)), n / 10);
        println!(
            "proxy=tcp case=latency latency_ms=10 added_p50_ms={:.3} added_p99_ms={:.3}",
            (pct(&l, 0.5) - pct(&p, 0.5)) / 1000.0,
            (pct(&l, 0.99) - pct(&p, 0.5)) / 1000.0
        );
    }
    api.shutdown();
    0
}
