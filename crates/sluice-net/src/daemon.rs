//! The link daemon: makes a link's namespaces and TUN devices, then carries
//! packets between them until SIGINT, SIGTERM or SIGHUP, and removes
//! everything on the way out.
//!
//! One packet thread, one epoll set: the two TUN devices, the timer, a
//! signalfd and the eventfd of the control socket's own thread
//! ([`crate::control_thread`], which reads requests and hands over whole
//! ones, so no control client can hold up a packet). Each turn polls the [`Plane`] at the clock's
//! `now` (everything due is delivered), reads up to [`crate::io::BATCH`]
//! packets from each readable side, answers control requests, and sleeps
//! until the plane's next wake-up less [`crate::clock::SPIN`], busy-waiting
//! the last stretch. Signals are blocked and read from the signalfd, so a
//! signal never interrupts a half-done operation.

use crate::awake::KeepAwake;
use crate::clock::{self, Timer, SPIN};
use crate::control;
use crate::control_thread::{Inbox, Limits};
use crate::io::{deliver, read_batch, Buffers, IoStats};
use crate::link::{self, LinkSpec, Record, Side};
use crate::mmlog::MmLog;
use crate::plane::{Dir, Plane};
use crate::tun::Tun;
use nix::poll::PollTimeout;
use nix::sched::{setns, CloneFlags};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use sluice_core::time::Time;
use std::fs::File;
use std::io::Write;
use std::path::Path;

const TOK_A: u64 = 0;
const TOK_B: u64 = 1;
const TOK_TIMER: u64 = 2;
const TOK_SIGNAL: u64 = 3;
const TOK_CONTROL: u64 = 4;

/// What a made link runs on.
pub struct Running {
    /// Side a's TUN.
    pub a: Tun,
    /// Side b's TUN.
    pub b: Tun,
    /// The forwarding engine.
    pub plane: Plane,
    /// The control socket's thread, whose requests the packet thread runs.
    pub control: Inbox,
    /// Counters of the TUN I/O.
    pub io: IoStats,
    /// Receive buffers, recycled.
    pub bufs: Buffers,
    /// A rootless link's network namespaces of sides a and b, held open
    /// (nothing else names them); empty for a root link.
    pub netns: Vec<File>,
    /// Mahimahi logs: the direction and its open file.
    pub logs: Vec<(Dir, MmLog)>,
}

impl Running {
    /// Write the logged directions' events up to `now`.
    fn write_logs(&mut self, now: Time) {
        for (dir, log) in &mut self.logs {
            let events = self.plane.take_log(*dir, now);
            log.write(&events);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let now = clock::now();
        self.write_logs(now);
        for (_, log) in &mut self.logs {
            log.flush();
        }
    }
}

/// `sluice link __daemon SPEC-JSON`: run a link; the exit status of the
/// process. A description `-` is read from standard input.
pub fn main(json: &str) -> i32 {
    let read;
    let json = if json == "-" {
        read = std::io::read_to_string(std::io::stdin()).unwrap_or_default();
        read.as_str()
    } else {
        json
    };
    let spec: LinkSpec = match serde_json::from_str(json) {
        Ok(s) => s,
        Err(e) => {
            println!("error: bad link description: {e}");
            return 2;
        }
    };
    let mut mask = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(s);
    }
    // SAFETY: ignoring SIGPIPE installs no handler code.
    unsafe {
        let _ = nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn);
    }
    let signals = mask
        .thread_block()
        .and_then(|_| SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC));
    let signals = match signals {
        Ok(s) => s,
        Err(e) => {
            println!("error: signalfd: {e}");
            return 1;
        }
    };
    let dir = match link::links_dir() {
        Ok(d) => d,
        Err(e) => {
            println!("error: links directory: {e}");
            return 1;
        }
    };
    let pid = std::process::id() as i32;
    let rec = Record {
        spec: spec.for_record(),
        pid,
        starttime: link::proc_starttime(pid).unwrap_or(0),
        netns_fds: None,
    };
    if let Err(e) = link::write_record(&dir, &rec) {
        println!("error: cannot write {}: {e}", dir.display());
        return 1;
    }
    let mut running = match setup(&spec, &dir) {
        Ok(r) => r,
        Err(msg) => {
            println!("error: {msg}");
            link::remove_leftovers(&dir, &spec);
            return 1;
        }
    };
    if let [a, b] = &running.netns[..] {
        use std::os::fd::AsRawFd;
        let rec = Record {
            netns_fds: Some([a.as_raw_fd(), b.as_raw_fd()]),
            ..rec
        };
        if let Err(e) = link::write_record(&dir, &rec) {
            println!("error: cannot write {}: {e}", dir.display());
            drop(running);
            link::remove_leftovers(&dir, &spec);
            return 1;
        }
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    // Before prefer_cpu: the pollers must not start at real-time priority.
    let keep = spec
        .keep_awake
        .wanted()
        .then(KeepAwake::start)
        .and_then(Result::ok);
    eprintln!(
        "sluice link {}: carrying packets, with {}{}",
        spec.name,
        clock::prefer_cpu(),
        if keep.is_some() {
            ", CPUs kept awake while it carries traffic"
        } else {
            ""
        }
    );
    // Nobody reads our stdout any more.
    if let Ok(null) = File::options().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }
    let code = match run_loop(&mut running, &signals, keep.as_ref()) {
        Ok(sig) => {
            eprintln!("sluice link {}: {sig}, cleaning up", spec.name);
            0
        }
        Err(e) => {
            eprintln!("sluice link {}: {e}, cleaning up", spec.name);
            1
        }
    };
    drop(running);
    link::remove_leftovers(&dir, &spec);
    code
}

/// Make the namespaces, TUN devices, addresses, NAT, initial policy and control socket.
pub fn setup(spec: &LinkSpec, dir: &Path) -> Result<Running, String> {
    let (a, b, netns) = if spec.rootless {
        make_rootless(spec)?
    } else {
        for side in [&spec.a, &spec.b]
            .into_iter()
            .filter(|_| !spec.shared_netns)
        {
            if let Some(ns) = &side.netns {
                link::run("ip", &["netns", "add", ns])?;
            }
        }
        let home =
            File::open("/proc/thread-self/ns/net").map_err(|e| format!("own namespace: {e}"))?;
        let a = open_tun(&spec.a, &home)?;
        let b = open_tun(&spec.b, &home)?;
        for side in [&spec.a, &spec.b] {
            configure(side, side.netns.as_deref(), spec.mtu)?;
        }
        (a, b, vec![])
    };
    if let (Some(subnet), Some(host)) = (
        &spec.nat_subnet,
        [&spec.a, &spec.b].iter().find(|s| s.netns.is_none()),
    ) {
        crate::shell::add_nat(&spec.name, subnet, &host.ifname)?;
    }
    let seed = std::process::id() as u64;
    let mut plane = Plane::new(
        spec.ab.port_config(seed),
        spec.ba.port_config(seed ^ 0x5eed),
        spec.mtu,
    );
    plane.net.now = crate::clock::now();
    for words in &spec.ip {
        let o = sluice_tc::ip::run(&mut plane.net, words);
        if o.code != 0 {
            return Err(format!("ip {}: {}", words.join(" "), o.stderr.trim()));
        }
    }
    for words in &spec.tc {
        let o = sluice_tc::tc::run(&mut plane.net, &Default::default(), words);
        if o.code != 0 {
            return Err(format!("tc {}: {}", words.join(" "), o.stderr.trim()));
        }
    }
    let mut logs = vec![];
    for l in &spec.logs {
        let dir = if l.ab { Dir::AB } else { Dir::BA };
        plane.start_log(dir);
        logs.push((dir, l));
    }
    // The wires' traces and schedules start now, with the logs.
    let now = crate::clock::now();
    plane.net.now = now;
    for (dir, start) in [(Dir::AB, &spec.ab_start), (Dir::BA, &spec.ba_start)] {
        if !start.is_empty() {
            plane.change(dir, now, start.change()?);
        }
    }
    let logs = logs
        .into_iter()
        .map(|(dir, l)| MmLog::open(l, now).map(|log| (dir, log)))
        .collect::<Result<Vec<_>, _>>()?;
    // The thread starts here, after the namespaces (a user namespace is
    // entered single-threaded) and before the packet thread takes a
    // real-time priority (which a new thread would inherit).
    let listener = control::listen(&link::socket_path(dir, &spec.name))
        .map_err(|e| format!("control socket: {e}"))?;
    let control =
        Inbox::start(listener, Limits::default()).map_err(|e| format!("control thread: {e}"))?;
    Ok(Running {
        a,
        b,
        plane,
        control,
        io: IoStats::default(),
        bufs: Buffers::default(),
        netns,
        logs,
    })
}

/// A rootless link ([`crate::rootless`]): into a user namespace, then an
/// empty network namespace for the daemon and one per side, each with its
/// TUN device configured from inside (`ip` inherits the thread's namespace).
fn make_rootless(spec: &LinkSpec) -> Result<(Tun, Tun, Vec<File>), String> {
    crate::rootless::check_tun()?;
    crate::rootless::enter_user_namespace()?;
    let home = crate::rootless::new_netns()?;
    let mut made = vec![];
    for side in [&spec.a, &spec.b] {
        let ns = crate::rootless::new_netns()?;
        let tun = Tun::create(&side.ifname).map_err(|e| format!("TUN {}: {e}", side.ifname))?;
        configure(side, None, spec.mtu)?;
        setns(&home, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns back: {e}"))?;
        made.push((tun, ns));
    }
    let (b, b_ns) = made.pop().expect("two sides");
    let (a, a_ns) = made.pop().expect("two sides");
    Ok((a, b, vec![a_ns, b_ns]))
}

fn open_tun(side: &Side, home: &File) -> Result<Tun, String> {
    let Some(ns) = &side.netns else {
        return Tun::create(&side.ifname).map_err(|e| format!("TUN {}: {e}", side.ifname));
    };
    let target =
        File::open(Path::new("/run/netns").join(ns)).map_err(|e| format!("namespace {ns}: {e}"))?;
    setns(&target, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {ns}: {e}"))?;
    let tun = Tun::create(&side.ifname).map_err(|e| format!("TUN {} in {ns}: {e}", side.ifname));
    setns(home, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns back: {e}"))?;
    tun
}

/// Set a side's device up with its address and route, in the named
/// namespace `netns` (`ip -n`), or in the calling thread's.
fn configure(side: &Side, netns: Option<&str>, mtu: u32) -> Result<(), String> {
    let mut pre: Vec<&str> = vec![];
    if let Some(ns) = netns {
        pre.extend(["-n", ns]);
    }
    // A side of its own (not the host's) brings its loopback up.
    if side.netns.is_some() {
        link::run("ip", &[&pre[..], &["link", "set", "lo", "up"]].concat())?;
    }
    let mtu = mtu.to_string();
    let dev = side.ifname.as_str();
    link::run(
        "ip",
        &[&pre[..], &["link", "set", "dev", dev, "mtu", &mtu, "up"]].concat(),
    )?;
    link::run(
        "ip",
        &[&pre[..], &["addr", "add", &side.addr, "dev", dev]].concat(),
    )?;
    if let Some(gw) = &side.default_via {
        link::run(
            "ip",
            &[
                &pre[..],
                &["route", "add", "default", "via", gw, "dev", dev],
            ]
            .concat(),
        )?;
    }
    Ok(())
}

/// Carry packets until a signal; returns the signal's name. `keep` (if
/// any) hears of every turn of the loop.
pub fn run_loop(
    r: &mut Running,
    signals: &SignalFd,
    keep: Option<&KeepAwake>,
) -> Result<String, String> {
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| format!("epoll: {e}"))?;
    let mut timer = Timer::new().map_err(|e| format!("timerfd: {e}"))?;
    let add = |fd: std::os::fd::BorrowedFd<'_>, tok| {
        epoll
            .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, tok))
            .map_err(|e| format!("epoll add: {e}"))
    };
    use std::os::fd::AsFd;
    add(r.a.as_fd(), TOK_A)?;
    add(r.b.as_fd(), TOK_B)?;
    add(timer.as_fd(), TOK_TIMER)?;
    add(signals.as_fd(), TOK_SIGNAL)?;
    add(r.control.as_fd(), TOK_CONTROL)?;
    let mut events = [EpollEvent::empty(); 8];
    loop {
        let now = clock::now();
        deliver(
            &mut r.plane,
            now,
            &mut r.a,
            &mut r.b,
            &mut r.bufs,
            &mut r.io,
        );
        let timeout = match r.plane.next_wake() {
            None => PollTimeout::NONE,
            Some(t) if t.0 <= now.0 + SPIN.0 => PollTimeout::ZERO,
            Some(t) => {
                timer
                    .arm(Time(t.0 - SPIN.0))
                    .map_err(|e| format!("timerfd: {e}"))?;
                PollTimeout::NONE
            }
        };
        let n = match epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(format!("epoll: {e}")),
        };
        let now = clock::now();
        // Everything due before `now` goes first, so the plane's clock never runs backwards.
        deliver(
            &mut r.plane,
            now,
            &mut r.a,
            &mut r.b,
            &mut r.bufs,
            &mut r.io,
        );
        for ev in &events[..n] {
            match ev.data() {
                tok @ (TOK_A | TOK_B) => {
                    let dir = if tok == TOK_A { Dir::AB } else { Dir::BA };
                    let (a, b) = (&mut r.a, &mut r.b);
                    read_batch(&mut r.plane, dir, a, b, &mut r.bufs, now, &mut r.io);
                }
                TOK_TIMER => timer.ack(),
                TOK_SIGNAL => {
                    if let Ok(Some(si)) = signals.read_signal() {
                        let name = Signal::try_from(si.ssi_signo as i32)
                            .map(|s| s.as_str().to_string())
                            .unwrap_or_else(|_| format!("signal {}", si.ssi_signo));
                        return Ok(name);
                    }
                }
                TOK_CONTROL => r.control.serve(&mut r.plane, &r.io, now),
                _ => {}
            }
        }
        if !r.logs.is_empty() {
            r.write_logs(now);
        }
        if let Some(k) = keep {
            k.touch(now.0, r.plane.next_wake().map(|t| t.0));
        }
    }
}
