//! The control socket: `sluice tc -n LINK ...`, `sluice iptables -n LINK
//! ...` and `sluice ip -n LINK link show` against a running link.
//!
//! # How `-n` fits the state directory
//!
//! Offline, `sluice tc -n NAME` replays namespace NAME's snapshot and
//! journal in the state directory and appends to the journal
//! (sluice-tc's `state`). A running link is different: its qdiscs hold
//! queued packets and live counters, which no journal can replay, and two
//! writers (a journal and a daemon) would drift apart. So while link
//! NAME runs, its daemon's in-memory namespace is the only truth: `-n NAME`
//! is sent to the daemon, which runs it with sluice-tc's own `tc::run` (same
//! parser, same errors, same printer, `-s` showing the live counters) and
//! answers with the command's stdout, stderr and exit status. Nothing is
//! written to the journal; when the link goes down its policy goes with it, as a
//! deleted network namespace's does. With no link of that name running,
//! `-n NAME` is the ordinary offline namespace, untouched.
//!
//! `sluice iptables -n NAME` goes the same way and runs sluice-tc's own
//! `iptables::run` against the same namespace, whose tables the plane's
//! OUTPUT and POSTROUTING hooks apply to live packets (plane.rs says which
//! hooks and why); `-L -v` shows live counters. `sluice ip -n NAME` is
//! forwarded too: `ip link show` lists `a0` and `b0` with their MTU, qdisc,
//! state and queue length; changing them is refused, because they are the
//! daemon's TUN devices, whose MTU and addresses `sluice link up` set in the
//! real namespaces. ifb devices are the exception: `ip link add NAME type
//! ifb`, `set` and `delete` work on a running link, so the usual ingress
//! shaping (an ingress filter's `mirred egress redirect dev ifb0`, a shaper
//! on `ifb0`) runs live (plane.rs carries what mirred sends).
//!
//! # Protocol
//!
//! One request per connection: a JSON [`Request`] on one line, answered by
//! a JSON [`Response`] on one line. The socket is created with mode 0600 in
//! the owner-only links directory, and the daemon also checks the peer's
//! uid (`SO_PEERCRED`): only its owner and root may talk to it. The socket
//! is served by a thread of its own ([`crate::control_thread`]), never by
//! the packet thread: a request is read whole there (at most 16 MiB, within
//! 5 s of connecting) and only then run by the packet thread, between two
//! turns of its loop, so no client, however slow, holds up a packet.

use crate::io::IoStats;
use crate::link;
use crate::plane::{Dir, Plane};
use serde::{Deserialize, Serialize};
use sluice_core::time::Time;
use sluice_tc::{ip, iptables, tc, Outcome};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// A control request.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// A tc command line (global options included, `-n` ignored); for
    /// `-b FILE` the client sends the file's text along.
    Tc {
        /// The words after `tc`.
        argv: Vec<String>,
        /// The batch file's contents, for `-b`.
        batch: Option<String>,
    },
    /// An iptables command line (the words after `iptables`, without
    /// sluice's leading `-n LINK`).
    Iptables {
        /// The words after `iptables`.
        argv: Vec<String>,
    },
    /// An `ip` command line that only reads (the words after `ip`, `-n LINK` removed).
    Ip {
        /// The words after `ip`.
        argv: Vec<String>,
    },
    /// The link's own counters (TUN I/O, wires, delay lines).
    Status,
    /// `sluice link set`: change the a→b wire, the b→a wire or both at
    /// once (`Port::change` when the packet thread takes the request).
    Wire {
        /// What to set on the a→b wire.
        ab: Option<Box<crate::wire::WireSettings>>,
        /// What to set on the b→a wire.
        ba: Option<Box<crate::wire::WireSettings>>,
    },
}

/// A control answer: what the command printed and its exit status.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Response {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit status.
    pub code: i32,
}

impl From<Outcome> for Response {
    fn from(o: Outcome) -> Self {
        Response {
            stdout: o.stdout,
            stderr: o.stderr,
            code: o.code,
        }
    }
}

/// Bind the control socket owner-only (mode 0600 from the start, through the umask).
pub fn listen(path: &Path) -> std::io::Result<UnixListener> {
    use nix::sys::stat::{umask, Mode};
    let _ = std::fs::remove_file(path);
    let old = umask(Mode::from_bits_truncate(0o177));
    let l = UnixListener::bind(path);
    umask(old);
    let l = l?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Only the socket's owner (the daemon's user) and root may talk to it.
pub(crate) fn peer_allowed(stream: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    match getsockopt(stream, PeerCredentials) {
        Ok(c) => c.uid() == 0 || c.uid() == nix::unistd::geteuid().as_raw(),
        Err(_) => false,
    }
}

/// Run one request against the plane.
pub fn handle(req: Request, plane: &mut Plane, io: &IoStats, now: Time) -> Response {
    // Commands run on the packets' clock (actions' ages count on it).
    plane.net.now = now;
    match req {
        Request::Tc { argv, batch } => {
            let (opts, words) = match tc::parse_global(&argv) {
                Ok(x) => x,
                Err(o) => return o.into(),
            };
            let o = match (&opts.batch, batch) {
                (Some(file), Some(text)) => run_batch(plane, &opts, file, &text),
                _ => tc::run(&mut plane.net, &opts, &words),
            };
            // A new qdisc may hold packets, or no longer be throttled.
            plane.kick(now);
            o.into()
        }
        Request::Iptables { argv } => {
            let o = iptables::run(&mut plane.net, &argv);
            // A first rule switches the hooks on, the last one off.
            plane.kick(now);
            o.into()
        }
        Request::Ip { argv } if ip::object(&argv).is_some_and(|o| o != "link") => Response {
            stderr: "sluice: a running link's addresses and routes are those of its two \
                     namespaces: `sluice link exec NAME a|b -- ip ...` shows and changes them\n"
                .into(),
            code: 2,
            ..Default::default()
        },
        Request::Ip { argv } if ip::mutates(&argv) && !ip::changes_only_ifb(&plane.net, &argv) => {
            Response {
                stderr: "sluice: a running link's a0, b0 and lo cannot be changed with ip \
                         (sluice link up sets their MTU and addresses); \
                         ifb devices can be added, set and deleted\n"
                    .into(),
                code: 2,
                ..Default::default()
            }
        }
        Request::Ip { argv } => {
            let o = ip::run(&mut plane.net, &argv);
            plane.kick(now);
            o.into()
        }
        Request::Status => Response {
            stdout: status(plane, io),
            ..Default::default()
        },
        Request::Wire { ab, ba } => set_wire(plane, now, [ab, ba]),
    }
}

/// Apply `link set` to the wires asked for, all or nothing; the answer's
/// stdout says when, on the link's monotonic clock (`applied at NS`).
fn set_wire(
    plane: &mut Plane,
    now: Time,
    wires: [Option<Box<crate::wire::WireSettings>>; 2],
) -> Response {
    let mut changes = vec![];
    for (dir, settings) in Dir::BOTH.into_iter().zip(wires) {
        let Some(settings) = settings else { continue };
        match settings.change() {
            Ok(c) => changes.push((dir, c)),
            Err(e) => {
                return Response {
                    stderr: format!("sluice link set: {e}\n"),
                    code: 1,
                    ..Default::default()
                }
            }
        }
    }
    for (dir, change) in changes {
        plane.change(dir, now, change);
    }
    Response {
        stdout: format!("applied at {}\n", now.0),
        ..Default::default()
    }
}

/// `tc -b`: one command per line; stop at the first failure unless `-force`
/// (as `sluice tc -b` does offline).
fn run_batch(plane: &mut Plane, opts: &tc::Opts, file: &str, text: &str) -> Outcome {
    let mut all = Outcome::default();
    for (lineno, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        if words.is_empty() {
            continue;
        }
        let o = tc::run(&mut plane.net, opts, &words);
        all.stdout.push_str(&o.stdout);
        all.stderr.push_str(&o.stderr);
        if o.code != 0 {
            all.stderr
                .push_str(&format!("Command failed {}:{}\n", file, lineno + 1));
            all.code = 1;
            if !opts.force {
                break;
            }
        }
    }
    all
}

/// The link's own counters as JSON.
pub fn status(plane: &Plane, io: &IoStats) -> String {
    let dir = |d: Dir| {
        let p = plane.port(d).stats;
        let st = plane.stats(d);
        serde_json::json!({
            "plane": st,
            "lateness_us": {"p50": st.lateness_quantile(0.5) as f64 / 1e3,
                            "p99": st.lateness_quantile(0.99) as f64 / 1e3,
                            "max": st.lateness_quantile(1.0) as f64 / 1e3},
            "wire": {"tx_packets": p.tx_packets, "tx_bytes": p.tx_bytes,
                     "ring_drops": p.ring_drops, "wire_losses": p.wire_losses},
        })
    };
    let v = serde_json::json!({"a_to_b": dir(Dir::AB), "b_to_a": dir(Dir::BA),
                               "mirred_drops": plane.mirred_drops(),
                               "vlan_drops": plane.vlan_drops(), "mpls_drops": plane.mpls_drops(), "io": io});
    format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
}

/// Send a request to link `name`'s daemon.
pub fn request(name: &str, req: &Request) -> Result<Response, String> {
    let dir = link::existing_links_dir()
        .ok_or_else(|| format!("cannot reach link {name}: no private links directory"))?;
    let path = link::socket_path(&dir, name);
    let mut s = UnixStream::connect(&path)
        .map_err(|e| format!("cannot reach link {name} at {}: {e}", path.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut text = serde_json::to_string(req).map_err(|e| e.to_string())?;
    text.push('\n');
    s.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .map_err(|e| format!("link {name}: {e}"))?;
    serde_json::from_str(&line).map_err(|e| format!("link {name}: bad answer: {e}"))
}

/// The running link `netns` names, or `None` (then the command goes to the
/// offline state directory); a link whose daemon died is an error.
fn running(netns: Option<&str>) -> Option<Result<&str, Outcome>> {
    let name = netns?;
    let dir = link::existing_links_dir()?;
    let rec = link::read_record(&dir, name)?;
    if !link::alive(&rec) {
        return Some(Err(fail(format!(
            "link {name}'s daemon is gone; `sluice link down {name}` removes its leftovers"
        ))));
    }
    Some(Ok(name))
}

fn fail(msg: String) -> Outcome {
    Outcome {
        stderr: format!("sluice: {msg}\n"),
        code: 1,
        ..Default::default()
    }
}

/// Send `req` to link `name` and turn its answer into what the command prints.
fn forward(name: &str, req: &Request) -> Outcome {
    match request(name, req) {
        Ok(r) => Outcome {
            stdout: r.stdout,
            stderr: r.stderr,
            code: r.code,
        },
        Err(e) => fail(e),
    }
}

/// If `netns` names a running link, run the tc command line `argv` there
/// and return what it printed; `None` when no link of that name runs (the
/// command then goes to the offline state directory).
pub fn forward_tc(netns: Option<&str>, argv: &[String]) -> Option<Outcome> {
    let name = match running(netns)? {
        Ok(n) => n,
        Err(o) => return Some(o),
    };
    let batch = match tc::parse_global(argv) {
        Ok((opts, _)) => match opts.batch.as_deref() {
            Some("-") => Some(std::io::read_to_string(std::io::stdin()).unwrap_or_default()),
            Some(file) => match std::fs::read_to_string(file) {
                Ok(t) => Some(t),
                Err(_) => {
                    return Some(Outcome {
                        stderr: format!(
                            "Cannot open file \"{file}\" for reading: No such file or directory\n"
                        ),
                        code: 1,
                        ..Default::default()
                    })
                }
            },
            None => None,
        },
        Err(o) => return Some(o),
    };
    let req = Request::Tc {
        argv: argv.to_vec(),
        batch,
    };
    Some(forward(name, &req))
}

/// [`forward_tc`] for an iptables command line (`argv` without `-n LINK`).
pub fn forward_iptables(netns: Option<&str>, argv: &[String]) -> Option<Outcome> {
    let name = match running(netns)? {
        Ok(n) => n,
        Err(o) => return Some(o),
    };
    let req = Request::Iptables {
        argv: argv.to_vec(),
    };
    Some(forward(name, &req))
}

/// [`forward_tc`] for an `ip` command line (`argv` without `-n LINK`).
pub fn forward_ip(netns: Option<&str>, argv: &[String]) -> Option<Outcome> {
    let name = match running(netns)? {
        Ok(n) => n,
        Err(o) => return Some(o),
    };
    let req = Request::Ip {
        argv: argv.to_vec(),
    };
    Some(forward(name, &req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::port::PortConfig;

    fn tc(plane: &mut Plane, line: &str, batch: Option<&str>) -> Response {
        let req = Request::Tc {
            argv: line.split_whitespace().map(String::from).collect(),
            batch: batch.map(String::from),
        };
        // Through JSON, as on the socket.
        let req: Request = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        handle(req, plane, &IoStats::default(), Time(0))
    }

    #[test]
    fn tc_commands_change_and_show_the_live_devices_with_tc_errors() {
        let mut plane = Plane::new(PortConfig::default(), PortConfig::default(), 1500);
        let r = tc(
            &mut plane,
            "-n x qdisc add dev a0 root netem delay 50ms",
            None,
        );
        assert_eq!((r.code, r.stderr.as_str()), (0, ""));
        let r = tc(&mut plane, "-n x qdisc show dev a0", None);
        assert_eq!(
            r.stdout,
            "qdisc netem 8001: root refcnt 2 limit 1000 delay 50ms\n"
        );
        let r = tc(&mut plane, "-n x qdisc add dev c0 root pfifo", None);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains("Cannot find device \"c0\""),
            "{}",
            r.stderr
        );
        let r = tc(&mut plane, "-s qdisc show dev b0", None);
        assert!(r.stdout.contains("Sent 0 bytes 0 pkt"), "{}", r.stdout);
    }

    #[test]
    fn batches_stop_at_the_first_failure_unless_forced() {
        let mut plane = Plane::new(PortConfig::default(), PortConfig::default(), 1500);
        let text = "qdisc add dev a0 root foo\nqdisc add dev b0 root pfifo\n";
        let r = tc(&mut plane, "-b f.tc", Some(text));
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.ends_with("Command failed f.tc:1\n"),
            "{}",
            r.stderr
        );
        assert!(!tc(&mut plane, "qdisc show dev b0", None)
            .stdout
            .contains("pfifo "));
        let r = tc(&mut plane, "-force -b f.tc", Some(text));
        assert_eq!(r.code, 1);
        assert!(tc(&mut plane, "qdisc show dev b0", None)
            .stdout
            .contains("qdisc pfifo 8001: root"));
    }

    #[test]
    fn status_is_json_with_both_directions() {
        let plane = Plane::new(PortConfig::default(), PortConfig::default(), 1500);
        let v: serde_json::Value =
            serde_json::from_str(&status(&plane, &IoStats::default())).unwrap();
        assert_eq!(v["a_to_b"]["plane"]["malformed"], 0);
        assert_eq!(v["b_to_a"]["wire"]["tx_packets"], 0);
    }

    fn send(plane: &mut Plane, req: Request) -> Response {
        let req: Request = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        handle(req, plane, &IoStats::default(), Time(0))
    }

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn iptables_commands_change_the_live_tables_with_iptables_errors_and_codes() {
        let mut plane = Plane::new(PortConfig::default(), PortConfig::default(), 1500);
        let ipt =
            |plane: &mut Plane, line: &str| send(plane, Request::Iptables { argv: words(line) });
        let r = ipt(&mut plane, "-A OUTPUT -p icmp -j DROP");
        assert_eq!((r.code, r.stderr.as_str()), (0, ""));
        assert!(plane.netfilter_active());
        let r = ipt(&mut plane, "-S OUTPUT");
        assert_eq!(r.stdout, "-P OUTPUT ACCEPT\n-A OUTPUT -p icmp -j DROP\n");
        let r = ipt(&mut plane, "-A NOSUCH -j DROP");
        assert_eq!(r.code, 1);
        assert_eq!(r.stderr, "iptables: No chain/target/match by that name.\n");
        let r = ipt(&mut plane, "-t nat -L");
        assert_eq!(r.code, 3);
        let r = ipt(&mut plane, "-t mangle -A OUTPUT -j MARK");
        assert_eq!(r.code, 2);
        let r = ipt(&mut plane, "-D OUTPUT 1");
        assert_eq!(r.code, 0);
        assert!(!plane.netfilter_active());
    }

    #[test]
    fn ip_link_show_lists_the_live_devices_and_changes_are_refused() {
        let mut plane = Plane::new(PortConfig::default(), PortConfig::default(), 1400);
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link show dev a0"),
            },
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("a0: "), "{}", r.stdout);
        assert_eq!(
            r.stdout,
            "2: a0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast \
             state UNKNOWN mode DEFAULT group default qlen 1000\n    link/none \n"
        );
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link show"),
            },
        );
        assert!(
            r.stdout.contains("b0: ") && r.stdout.contains("lo: "),
            "{}",
            r.stdout
        );
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link set dev a0 mtu 9000"),
            },
        );
        assert_eq!(r.code, 2);
        assert!(
            r.stderr.contains("a0, b0 and lo cannot be changed"),
            "{}",
            r.stderr
        );
        // ifb devices come and go (ingress shaping); nothing else does.
        for (cmd, code) in [
            ("link add ifb0 type ifb", 0),
            ("link set dev ifb0 up", 0),
            ("link set ifb0 txqueuelen 100", 0),
            ("link add v0 type veth peer name v1", 2),
            ("link add d0 type dummy", 2),
            ("link set lo down", 2),
            ("link del b0", 2),
            ("link set dev nosuch up", 1),
            ("addr show", 2),
            ("route add default dev a0", 2),
        ] {
            let r = send(&mut plane, Request::Ip { argv: words(cmd) });
            assert_eq!(r.code, code, "{cmd}: {}", r.stderr);
        }
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link show ifb0"),
            },
        );
        assert!(
            r.stdout.contains("state UNKNOWN") && r.stdout.contains("qlen 100"),
            "{}",
            r.stdout
        );
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link del ifb0"),
            },
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link show"),
            },
        );
        assert!(!r.stdout.contains("ifb0"), "{}", r.stdout);
        let r = send(
            &mut plane,
            Request::Ip {
                argv: words("link show dev a0"),
            },
        );
        assert!(r.stdout.contains("mtu 1400 "), "{}", r.stdout);
    }
}
