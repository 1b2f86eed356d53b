//! `sluice link up|down|list`: a link's description, its namespaces and
//! addresses, and the links directory that says what runs.
//!
//! A link `NAME` is two network namespaces `NAME-a` and `NAME-b` (made with
//! `ip netns add`, so `ip netns exec NAME-a CMD` works), each with a TUN
//! device (`a0`, `b0`) that one daemon process bridges. The daemon is this
//! binary re-executed (`sluice link __daemon`), detached in its own session;
//! `up` waits until it reports ready (or the reason it failed) on a pipe.
//!
//! The links directory is `$SLUICE_STATE_DIR/links` (mode 0700): per link a
//! record `NAME.json` (the description, the daemon's pid and its start time
//! in `/proc`), the control socket `NAME.sock` and the daemon's log
//! `NAME.log`. The daemon writes the record before it creates anything and
//! removes it last, so a record whose daemon is gone (killed with SIGKILL,
//! or the machine's pid reused) marks leftovers; `up`, `down` and `list`
//! remove them: the namespaces, NAT rules, socket and record. (TUN devices
//! vanish with the daemon's file descriptors.) An exclusive lock on
//! `links/lock` serializes these commands; `up` holds it until its daemon is
//! ready, so nobody cleans up a link that is still being made.
//!
//! Without root (no CAP_NET_ADMIN) the link is *rootless*
//! ([`LinkSpec::rootless`], [`crate::rootless`]): its namespaces live in a
//! user namespace the daemon creates and are held by the daemon's file
//! descriptors, which the record names ([`Record::netns_fds`]) so that
//! [`exec`] can enter them; they go with the daemon, so clean-up is only the
//! socket and record.

use serde::{Deserialize, Serialize};
use sluice_core::port::{PortConfig, TxBuffer};
use sluice_core::time::Duration;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One side of a link.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Side {
    /// The namespace the side's TUN lives in; `None`: the daemon's own (the host's, for `shell`).
    pub netns: Option<String>,
    /// The TUN device's name in that namespace.
    pub ifname: String,
    /// Its address, `A.B.C.D/LEN`.
    pub addr: String,
    /// Route everything (a default route) through the link, via this gateway.
    pub default_via: Option<String>,
}

/// One direction's emulated wire.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Wire {
    /// Bits per second; 0 is unlimited.
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    /// Transmit buffer after the qdisc: packets, or bytes.
    pub buffer_packets: Option<u32>,
    /// Transmit buffer in bytes (when `buffer_packets` is `None`).
    pub buffer_bytes: Option<u64>,
    /// Probability of losing a packet on the wire.
    pub loss: f64,
}

impl Default for Wire {
    fn default() -> Self {
        Wire {
            rate_bps: 0,
            delay_ns: 0,
            buffer_packets: Some(1),
            buffer_bytes: None,
            loss: 0.0,
        }
    }
}

impl Wire {
    /// The port configuration of this wire.
    pub fn port_config(&self, seed: u64) -> PortConfig {
        PortConfig {
            rate_bps: self.rate_bps,
            delay: Duration(self.delay_ns),
            buffer: match (self.buffer_packets, self.buffer_bytes) {
                (Some(p), _) => TxBuffer::Packets(p),
                (None, Some(b)) => TxBuffer::Bytes(b),
                (None, None) => TxBuffer::Packets(1),
            },
            overhead: 0,
            loss: self.loss,
            seed,
        }
    }
}

/// Everything the daemon needs to make and run a link.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LinkSpec {
    /// The link's name (`sluice tc -n NAME`).
    pub name: String,
    /// Side a: `dev a0` in tc.
    pub a: Side,
    /// Side b: `dev b0` in tc.
    pub b: Side,
    /// The a→b wire.
    pub ab: Wire,
    /// The b→a wire.
    pub ba: Wire,
    /// ip commands (words after `ip`: `link set dev a0 txqueuelen 3`)
    /// applied to the link's devices before the tc commands.
    #[serde(default)]
    pub ip: Vec<Vec<String>>,
    /// tc commands (words after `tc`) applied before the link carries traffic.
    pub tc: Vec<Vec<String>>,
    /// Masquerade the subnet out of the host (shell): iptables rules tagged `sluice:NAME`.
    pub nat_subnet: Option<String>,
    /// The TUN devices' MTU.
    pub mtu: u32,
    /// The third octet of the 10.77.X.0/24 subnet the link took, if it took one.
    pub subnet: Option<u8>,
    /// Keep the CPUs out of their idle halt while traffic flows ([`crate::awake`]).
    #[serde(default)]
    pub keep_awake: crate::awake::Mode,
    /// Made without root, inside a user namespace the daemon creates
    /// ([`crate::rootless`]); the namespaces are not named in `/run/netns`.
    #[serde(default)]
    pub rootless: bool,
    /// What the a→b wire starts with beyond `ab` (a trace, a schedule, a
    /// delay trace; [`crate::wire`]), applied with `Port::change` at start.
    #[serde(default)]
    pub ab_start: crate::wire::WireSettings,
    /// The same for the b→a wire.
    #[serde(default)]
    pub ba_start: crate::wire::WireSettings,
    /// Mahimahi logs of the wires ([`crate::mmlog`]).
    #[serde(default)]
    pub logs: Vec<crate::mmlog::LogSpec>,
    /// The sides' namespaces exist already and outlive the link (a
    /// scenario run live, whose nodes have several links): the link
    /// neither makes nor removes them.
    #[serde(default)]
    pub shared_netns: bool,
}

impl LinkSpec {
    /// A link `name` between sides `a` and `b`: unlimited wires with a
    /// 1-packet buffer, MTU 1500, no tc commands, NAT, traces or logs.
    pub fn new(name: String, a: Side, b: Side) -> LinkSpec {
        LinkSpec {
            name,
            a,
            b,
            ab: Wire::default(),
            ba: Wire::default(),
            ip: vec![],
            tc: vec![],
            nat_subnet: None,
            mtu: 1500,
            subnet: None,
            keep_awake: Default::default(),
            rootless: false,
            ab_start: Default::default(),
            ba_start: Default::default(),
            logs: vec![],
            shared_netns: false,
        }
    }

    /// The description without the files' texts, as the link's record keeps it.
    pub fn for_record(&self) -> LinkSpec {
        LinkSpec {
            ab_start: self.ab_start.without_texts(),
            ba_start: self.ba_start.without_texts(),
            ..self.clone()
        }
    }
}

/// A running (or crashed) link as its record says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// What was asked for.
    pub spec: LinkSpec,
    /// The daemon's pid.
    pub pid: i32,
    /// The daemon's start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub starttime: u64,
    /// A rootless link's namespaces of sides a and b: the daemon's file
    /// descriptors that hold them (`/proc/PID/fd/N`).
    #[serde(default)]
    pub netns_fds: Option<[i32; 2]>,
}

/// Errors of the link commands, with the message the user sees.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The name is taken by a running link.
    #[error("link {0} is already up (daemon pid {1}); `sluice link down {0}` first")]
    Taken(String, i32),
    /// A namespace of that name exists but sluice did not make it.
    #[error("network namespace {0} already exists and is not a sluice link's; remove it with `ip netns del {0}` or choose another name")]
    ForeignNamespace(String),
    /// No such link.
    #[error("no link named {0}")]
    NoSuchLink(String),
    /// A bad name or option.
    #[error("{0}")]
    Invalid(String),
    /// The daemon could not make the link.
    #[error("{0}")]
    Daemon(String),
    /// A system call or a file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The links directory, `links/` in the private state directory: both made
/// 0700 if need be and checked as the state store checks its own (a real
/// directory of this user that no one else may enter), so no other user can
/// plant a record or a socket that a link's commands would then trust.
pub fn links_dir() -> std::io::Result<PathBuf> {
    let state = sluice_tc::state::private_state_dir().map_err(std::io::Error::other)?;
    let dir = state.join("links");
    sluice_tc::state::ensure_private_dir(&dir).map_err(std::io::Error::other)?;
    Ok(dir)
}

/// The links directory if it exists and passes that check (nothing is
/// created): where `tc -n NAME` looks for a running link.
pub fn existing_links_dir() -> Option<PathBuf> {
    use sluice_tc::state::check_private_dir;
    let state = sluice_tc::state::state_dir();
    let dir = state.join("links");
    (check_private_dir(&state).is_ok() && check_private_dir(&dir).is_ok()).then_some(dir)
}

/// Path of the record of link `name`.
pub fn record_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Path of the control socket of link `name`.
pub fn socket_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.sock"))
}

/// Path of the daemon log of link `name`.
pub fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

/// A link name: what a namespace and file name can hold.
pub fn check_name(name: &str) -> Result<(), LinkError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(LinkError::Invalid(format!(
            "invalid link name {name:?}: use up to 32 letters, digits, '-', '_' or '.'"
        )))
    }
}

/// The daemon's start time, to tell it from a later process with the same pid.
pub fn proc_starttime(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 is "(comm)" and may hold spaces; count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Is the daemon of this record still running? (A killed daemon whose
/// parent has not reaped it yet is a zombie: gone.)
pub fn alive(rec: &Record) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{}/stat", rec.pid)) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("X");
    !matches!(state, "Z" | "X" | "x") && proc_starttime(rec.pid) == Some(rec.starttime)
}

/// Read a record.
pub fn read_record(dir: &Path, name: &str) -> Option<Record> {
    serde_json::from_str(&fs::read_to_string(record_path(dir, name)).ok()?).ok()
}

/// Write a record atomically.
pub fn write_record(dir: &Path, rec: &Record) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{}.json.tmp", rec.spec.name));
    fs::write(&tmp, serde_json::to_string_pretty(rec).unwrap_or_default())?;
    fs::rename(tmp, record_path(dir, &rec.spec.name))
}

/// All records in the directory, by name.
pub fn records(dir: &Path) -> Vec<Record> {
    let mut v: Vec<Record> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".json")?;
            if name.starts_with('.') {
                return None;
            }
            read_record(dir, name)
        })
        .collect();
    v.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    v
}

/// Hold the links directory's lock.
pub fn lock(dir: &Path) -> std::io::Result<fd_lock::RwLockWriteGuard<'static, fs::File>> {
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))?;
    let lock: &'static mut fd_lock::RwLock<fs::File> = Box::leak(Box::new(fd_lock::RwLock::new(f)));
    lock.write()
}

/// Run a command quietly; Err carries its stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(cmd).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{cmd}: {e}")),
    }
}

/// Does the named network namespace exist (in `/run/netns`)?
pub fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// Remove everything a link made, whether or not its daemon still runs:
/// namespaces, NAT rules, socket and record. Safe to repeat.
pub fn remove_leftovers(dir: &Path, spec: &LinkSpec) {
    // A rootless link's namespaces are nobody's names: they went with its
    // daemon; shared ones are their owner's to remove.
    let owned = !spec.rootless && !spec.shared_netns;
    for side in [&spec.a, &spec.b].into_iter().filter(|_| owned) {
        if let Some(ns) = &side.netns {
            if netns_exists(ns) {
                let _ = run("ip", &["netns", "del", ns]);
            }
        }
    }
    if spec.nat_subnet.is_some() {
        crate::shell::remove_nat(&spec.name);
    }
    let _ = fs::remove_file(socket_path(dir, &spec.name));
    let _ = fs::remove_file(log_path(dir, &spec.name));
    let _ = fs::remove_file(record_path(dir, &spec.name));
}

/// Remove the leftovers of every link whose daemon is gone; returns their names.
pub fn reap(dir: &Path) -> Vec<String> {
    let mut gone = vec![];
    for rec in records(dir) {
        if !alive(&rec) {
            remove_leftovers(dir, &rec.spec);
            gone.push(rec.spec.name);
        }
    }
    gone
}

/// The lowest 10.77.X.0/24 subnet no running link uses (in this links
/// directory, nor a shell's host device `sluiceX` of another one).
pub fn free_subnet(dir: &Path) -> Option<u8> {
    let used: Vec<u8> = records(dir).iter().filter_map(|r| r.spec.subnet).collect();
    (1..=254u8)
        .find(|x| !used.contains(x) && !Path::new(&format!("/sys/class/net/sluice{x}")).exists())
}

/// Start a link's daemon and wait until it carries traffic.
/// `exe` is the sluice binary (the daemon is `exe link __daemon`).
pub fn up(exe: &Path, spec: LinkSpec) -> Result<Record, LinkError> {
    up_tied(exe, spec, false)
}

/// [`up`]; with `tied`, the daemon also stops (and cleans up) when the
/// calling thread's process dies (`PR_SET_PDEATHSIG`), as `sluice shell` needs.
pub fn up_tied(exe: &Path, mut spec: LinkSpec, tied: bool) -> Result<Record, LinkError> {
    check_name(&spec.name)?;
    let dir = links_dir()?;
    let _guard = lock(&dir)?;
    for name in reap(&dir) {
        eprintln!("sluice: removed the leftovers of link {name} (its daemon was gone)");
    }
    if let Some(rec) = read_record(&dir, &spec.name) {
        return Err(LinkError::Taken(spec.name, rec.pid));
    }
    if spec.rootless {
        if spec.nat_subnet.is_some() || [&spec.a, &spec.b].iter().any(|s| s.netns.is_none()) {
            return Err(LinkError::Invalid(
                "a device in the host's namespace (and NAT) needs root".into(),
            ));
        }
        crate::rootless::check_tun().map_err(LinkError::Invalid)?;
    }
    for side in [&spec.a, &spec.b].into_iter().filter(|_| !spec.rootless) {
        if let Some(ns) = &side.netns {
            if netns_exists(ns) != spec.shared_netns {
                return Err(if spec.shared_netns {
                    LinkError::Invalid(format!("namespace {ns} does not exist"))
                } else {
                    LinkError::ForeignNamespace(ns.clone())
                });
            }
        }
    }
    // Every link takes a subnet of its own; "{X}" in addresses and device names is its number.
    let x = free_subnet(&dir)
        .ok_or_else(|| LinkError::Invalid("all 254 link subnets are in use".into()))?;
    spec.subnet = Some(x);
    let fill = |s: &mut String| *s = s.replace("{X}", &x.to_string());
    for side in [&mut spec.a, &mut spec.b] {
        fill(&mut side.addr);
        fill(&mut side.ifname);
        if let Some(g) = &mut side.default_via {
            fill(g);
        }
    }
    if let Some(n) = &mut spec.nat_subnet {
        fill(n);
    }
    spawn_daemon(exe, &dir, &spec, tied)?;
    read_record(&dir, &spec.name)
        .ok_or_else(|| LinkError::Daemon("the daemon reported ready but left no record".into()))
}

fn spawn_daemon(exe: &Path, dir: &Path, spec: &LinkSpec, tied: bool) -> Result<(), LinkError> {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let log = fs::File::create(log_path(dir, &spec.name))?;
    let json = serde_json::to_string(spec).map_err(|e| LinkError::Invalid(e.to_string()))?;
    let mut cmd = Command::new(exe);
    // On its standard input: a trace's text can be far longer than an argument may be.
    cmd.args(["link", "__daemon", "-"])
        .env("SLUICE_STATE_DIR", sluice_tc::state::state_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log);
    // A new session: the terminal's ^C and hang-up do not reach the daemon.
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            if tied {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write;
        // A daemon that died early is reported below, from its log.
        let _ = input.write_all(json.as_bytes());
    }
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    if line.trim() == "ready" {
        // The daemon lives on; reap it if it exits while we still run (shell).
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        return Ok(());
    }
    let _ = child.wait();
    let why = line.trim().strip_prefix("error: ").unwrap_or(line.trim());
    let why = if why.is_empty() {
        let log = fs::read_to_string(log_path(dir, &spec.name)).unwrap_or_default();
        format!("the link daemon died while starting: {}", log.trim())
    } else {
        why.to_string()
    };
    // Whatever it made before failing goes.
    remove_leftovers(dir, spec);
    Err(LinkError::Daemon(why))
}

/// Stop link `name` and remove everything it made.
pub fn down(name: &str) -> Result<(), LinkError> {
    check_name(name)?;
    let dir = links_dir()?;
    let _guard = lock(&dir)?;
    let Some(rec) = read_record(&dir, name) else {
        reap(&dir);
        return Err(LinkError::NoSuchLink(name.into()));
    };
    if alive(&rec) {
        stop_daemon(&rec);
    }
    remove_leftovers(&dir, &rec.spec);
    reap(&dir);
    Ok(())
}

/// SIGTERM, wait up to 5 s for the daemon to clean up and exit, then SIGKILL.
fn stop_daemon(rec: &Record) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(rec.pid);
    let _ = kill(pid, Signal::SIGTERM);
    for _ in 0..500 {
        if !alive(rec) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if alive(rec) {
        let _ = kill(pid, Signal::SIGKILL);
        for _ in 0..100 {
            if !alive(rec) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The running links (after removing the leftovers of dead ones).
pub fn list() -> Result<Vec<Record>, LinkError> {
    let dir = links_dir()?;
    let _guard = lock(&dir)?;
    for name in reap(&dir) {
        eprintln!("sluice: removed the leftovers of link {name} (its daemon was gone)");
    }
    Ok(records(&dir))
}

/// `sluice link exec NAME a|b -- CMD ARGS...`: run CMD in side a's or b's
/// namespace, replacing this process; returns only on failure. A root
/// link's side is `ip netns exec NAME-x`; a rootless one's is entered
/// through its daemon ([`crate::rootless::enter`]), as root of the link's
/// user namespace. Call it before any thread starts.
pub fn exec(name: &str, side: &str, cmd: &[String]) -> LinkError {
    use std::os::unix::process::CommandExt;
    if let Err(e) = check_name(name) {
        return e;
    }
    let Some(prog) = cmd.first() else {
        return LinkError::Invalid("no command to run".into());
    };
    let dir = match links_dir() {
        Ok(d) => d,
        Err(e) => return e.into(),
    };
    let Some(rec) = read_record(&dir, name) else {
        return LinkError::NoSuchLink(name.into());
    };
    if !alive(&rec) {
        return LinkError::Daemon(format!(
            "link {name}'s daemon is gone; `sluice link down {name}` removes its leftovers"
        ));
    }
    let (s, i) = match side {
        "a" => (&rec.spec.a, 0),
        "b" => (&rec.spec.b, 1),
        _ => return LinkError::Invalid(format!("side {side:?}: a or b")),
    };
    let Some(ns) = &s.netns else {
        return LinkError::Invalid(format!(
            "side {side} of link {name} is the host's namespace: run the command directly"
        ));
    };
    if !rec.spec.rootless {
        let err = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(cmd)
            .exec();
        return LinkError::Invalid(format!("ip netns exec: {err}"));
    }
    let Some(fds) = rec.netns_fds else {
        return LinkError::Daemon(format!("link {name}'s record holds no namespaces"));
    };
    if let Err(e) = crate::rootless::enter(rec.pid, fds[i]) {
        return LinkError::Daemon(e);
    }
    let err = Command::new(prog).args(&cmd[1..]).exec();
    LinkError::Invalid(format!("{prog}: {err}"))
}

/// One line per link for `sluice link list`.
pub fn describe(rec: &Record) -> String {
    let side = |s: &Side| {
        format!(
            "{}:{} {}",
            s.netns.as_deref().unwrap_or("(host)"),
            s.ifname,
            s.addr
        )
    };
    let wire = |w: &Wire| {
        let mut s = String::new();
        if w.rate_bps > 0 {
            s += &format!(" rate {}", sluice_core::units::fmt_rate(w.rate_bps / 8));
        }
        if w.delay_ns > 0 {
            s += &format!(
                " delay {}",
                sluice_core::units::fmt_time_ns(w.delay_ns as i64)
            );
        }
        if w.loss > 0.0 {
            s += &format!(" loss {}%", w.loss * 100.0);
        }
        if s.is_empty() {
            s = " unlimited".into();
        }
        s
    };
    format!(
        "{} pid {}{}: {} <-> {}; a->b{}{}; b->a{}{}",
        rec.spec.name,
        rec.pid,
        if rec.spec.rootless { " (rootless)" } else { "" },
        side(&rec.spec.a),
        side(&rec.spec.b),
        wire(&rec.spec.ab),
        rec.spec.ab_start.describe(),
        wire(&rec.spec.ba),
        rec.spec.ba_start.describe()
    )
}
