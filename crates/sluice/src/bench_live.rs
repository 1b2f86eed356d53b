//! `sluice bench live`: how fast the live data plane carries real traffic,
//! measured in one run against the kernel's own path on the same machine.
//!
//! It brings up a sluice link (`sluice link up`, unshaped, offloads on) and
//! a kernel veth pair in two namespaces of its own, and measures on each:
//!
//! - `tcp`: one bulk TCP flow a→b, goodput at the receiver (iperf3 when it
//!   is installed, else a built-in sender and receiver);
//! - `udp64`: a flood of 64-byte UDP payloads (92-byte IP packets) a→b,
//!   sent with `sendmmsg` as fast as the sender's socket takes them; the
//!   rate that arrives;
//! - `htb1g`: a TCP flow (the built-in one) through `htb` with one class of
//!   `rate 1gbit ceil 1gbit` on the sending side, goodput against what the
//!   class allows: 1 Gbit/s less the headers it counts (on the TUN device IP
//!   and TCP, 52 bytes per 1500-byte packet; on the veth also Ethernet's 14).
//!
//! One line per measurement, `key=value` words, as `sluice bench` prints.
//! Everything it made is removed at the end (and by the next run, if this
//! one was killed).

use sluice_net::link::{self, LinkSpec, Side};
use sluice_net::traffic::{self, Endpoints, VethPair};
use std::net::Ipv4Addr;

const USAGE: &str = "usage: sluice bench live [--time SECS] [--urgent] [--only tcp|udp64|htb1g]...
  Bring up a sluice link and a kernel veth pair and measure on both:
  unshaped TCP goodput, 64-byte UDP packet rate, 1 Gbit/s HTB accuracy.
  Needs root (network namespaces, TUN devices); uses iperf3 for TCP if installed.
  --time SECS  length of each measurement (default 5; the first second is warm-up)
  --urgent     run the traffic's senders and receivers at real-time priority
               (as the link daemon runs), so other load on the machine does not
               limit them: the figures are then the paths', not the machine's
  --builtin    the built-in TCP sender and receiver even if iperf3 is installed
";

/// Prefix of the bench's namespaces and link: `sbench<PID>` (link) and `sbench<PID>v` (veth).
const PREFIX: &str = "sbench";

/// TCP's data per 1500-byte packet with timestamps (the Linux default): 1448.
const MSS: f64 = 1448.0;

/// One measurement's settings.
#[derive(Clone, Copy)]
struct Run {
    secs: u32,
    iperf3: bool,
    urgent: bool,
}

impl Run {
    fn tcp(&self, p: &Endpoints) -> Result<f64, String> {
        if self.iperf3 {
            traffic::iperf3_goodput(p, 5201, (self.secs, 1), self.urgent)
        } else {
            traffic::tcp_goodput(
                p,
                traffic::TcpRun {
                    secs: self.secs as f64,
                    urgent: self.urgent,
                    ..Default::default()
                },
            )
        }
    }

    fn tool(&self) -> &'static str {
        if self.iperf3 {
            "iperf3"
        } else {
            "builtin"
        }
    }
}

/// `sluice bench live ...`
pub fn main(args: &[String]) -> i32 {
    let mut secs = 5u32;
    let (mut urgent, mut builtin) = (false, false);
    let mut only: Vec<String> = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time" | "-t" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) if n >= 2 => secs = n,
                _ => {
                    eprintln!("sluice bench live: --time needs a number of seconds, at least 2");
                    return 2;
                }
            },
            "--only" => match it.next() {
                Some(w) if ["tcp", "udp64", "htb1g"].contains(&w.as_str()) => only.push(w.clone()),
                _ => {
                    eprintln!("sluice bench live: --only takes tcp, udp64 or htb1g");
                    return 2;
                }
            },
            "--urgent" => urgent = true,
            "--builtin" => builtin = true,
            "-h" | "--help" | "help" => {
                print!("{USAGE}");
                return 0;
            }
            other => {
                eprintln!("sluice bench live: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").map_or(1, |m| m.uid()) != 0 {
        eprintln!("sluice bench live: needs root (network namespaces and TUN devices)");
        return 1;
    }
    if cfg!(debug_assertions) {
        eprintln!("sluice bench live: this is a debug build; use --release for real figures");
    }
    reap_leftovers();
    let run = Run {
        secs,
        iperf3: !builtin && traffic::have("iperf3"),
        urgent: urgent && traffic::have("chrt"),
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "live=host cpus={} load1={} urgent={}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().next().unwrap_or("?"),
        run.urgent
    );
    let wants = |w: &str| only.is_empty() || only.iter().any(|o| o == w);
    match measure(&run, &wants) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice bench live: {e}");
            1
        }
    }
}

/// A bench link, taken down when dropped.
struct BenchLink {
    name: String,
    addr_b: Ipv4Addr,
}

impl BenchLink {
    fn up() -> Result<BenchLink, String> {
        let name = format!("{PREFIX}{}", std::process::id());
        let side = |s: char, host: u8| Side {
            netns: Some(format!("{name}-{s}")),
            ifname: format!("{s}0"),
            addr: format!("10.77.{{X}}.{host}/24"),
            default_via: None,
        };
        let spec = LinkSpec::new(name.clone(), side('a', 1), side('b', 2));
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        // Tied: the daemon goes (and cleans up) if this process is killed.
        let rec = link::up_tied(&exe, spec, true).map_err(|e| e.to_string())?;
        let addr = rec.spec.b.addr.split('/').next().unwrap_or_default();
        Ok(BenchLink {
            addr_b: addr.parse().map_err(|e| format!("address {addr}: {e}"))?,
            name,
        })
    }

    fn path(&self) -> Endpoints {
        Endpoints {
            from: format!("{}-a", self.name),
            to: format!("{}-b", self.name),
            addr: self.addr_b,
        }
    }

    fn tc(&self, cmd: &str) -> Result<(), String> {
        let req = sluice_net::control::Request::Tc {
            argv: cmd.split(' ').map(String::from).collect(),
            batch: None,
        };
        let r = sluice_net::control::request(&self.name, &req)?;
        if r.code != 0 {
            return Err(format!("tc {cmd}: {}", r.stderr.trim()));
        }
        Ok(())
    }
}

impl Drop for BenchLink {
    fn drop(&mut self) {
        let _ = link::down(&self.name);
    }
}

/// Remove the namespaces of bench runs whose process is gone.
fn reap_leftovers() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if pid.is_empty() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if rest[pid.len()..].starts_with('v') {
            let _ = link::run("ip", &["netns", "del", &name]);
        } else {
            // A link's leftovers go through the link's own clean-up.
            let _ = link::list();
        }
    }
}

fn measure(run: &Run, wants: &dyn Fn(&str) -> bool) -> Result<(), String> {
    let x = (std::process::id() % 250 + 1) as u8;
    let veth = VethPair::new(&format!("{PREFIX}{}v", std::process::id()), x)?;
    let sluice = BenchLink::up()?;
    let paths = [("veth", veth.path()), ("sluice", sluice.path())];
    let secs = run.secs;
    if wants("tcp") {
        for (name, p) in &paths {
            let bps = run.tcp(p)?;
            println!(
                "live=tcp path={name} tool={} secs={secs} gbps={:.2}",
                run.tool(),
                bps / 1e9
            );
        }
    }
    if wants("udp64") {
        for (name, p) in &paths {
            let r = traffic::udp_flood(p, 5202, 64, (secs as f64, 1.0), run.urgent)?;
            println!(
                "live=udp64 path={name} secs={secs} sent_kpps={:.0} kpps={:.0}",
                r.sent_pps / 1e3,
                r.received_pps / 1e3
            );
        }
    }
    if wants("htb1g") {
        let htb = [
            "qdisc add dev {DEV} root handle 1: htb default 1",
            "class add dev {DEV} parent 1: classid 1:1 htb rate 1gbit ceil 1gbit",
        ];
        for cmd in htb {
            let words: Vec<&str> = cmd.split(' ').collect();
            let words: Vec<String> = words.iter().map(|w| w.replace("{DEV}", "va")).collect();
            let args = [&["-n".to_string(), veth.ns('a')][..], &words].concat();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            link::run("tc", &args)?;
            sluice.tc(&cmd.replace("{DEV}", "a0"))?;
        }
        // Each 1448 bytes of data cost a 1500-byte IP packet (and 14 bytes
        // of Ethernet header on the veth). The built-in receiver measures:
        // its window starts and ends with data (iperf3's summary also
        // counts the idle end of the test, about 1 % at 5 s).
        let builtin = Run {
            iperf3: false,
            ..*run
        };
        for ((name, p), wire) in paths.iter().zip([1514.0, 1500.0]) {
            let bps = builtin.tcp(p)?;
            let expect = 1e9 * MSS / wire;
            println!(
                "live=htb1g path={name} tool={} secs={secs} mbps={:.1} expect_mbps={:.1} error_pct={:+.2}",
                builtin.tool(),
                bps / 1e6,
                expect / 1e6,
                (bps / expect - 1.0) * 100.0
            );
        }
    }
    Ok(())
}
