//! `tc`: global options, objects (`qdisc`, `class`), commands, and printing.
//!
//! Follows iproute2's tc.c, tc_qdisc.c and tc_class.c: the same keyword
//! matching, the same order of checks (options are parsed before the device is
//! looked up), the same messages and exit statuses (`return -1` is 255, a
//! kernel refusal is 2, an unknown device 1).

use crate::args::{duparg, get_u32, invarg, matches, Args, CmdResult, Fail};
use crate::net::{alloc_handle, Net};
use crate::out::{Out, To};
use crate::q;
use crate::Outcome;
use sluice_core::act::EstimatorSpec;
use sluice_core::device::{Device, NlFlags, QdiscRequest};
use sluice_core::error::TcError;
use sluice_core::handle::Handle;
use sluice_core::qdisc::{ClassInfo, DevInfo, QdiscNode, QdiscOpts, XStats};
use sluice_core::rate::LinkLayer;
use sluice_core::stab::{SizeSpec, SizeTable, MAX_TSIZE};
use sluice_core::stats::{RateEstimator, Stats};
use sluice_core::time::Time;
use sluice_core::units::{fmt_size, parse_time_us};

/// tc's global options.
#[derive(Debug, Default, Clone)]
pub struct Opts {
    /// `-s`
    pub stats: bool,
    /// `-d`
    pub details: bool,
    /// `-j`
    pub json: bool,
    /// `-p`
    pub pretty: bool,
    /// `-force` (batch: go on after errors)
    pub force: bool,
    /// `-b FILE`
    pub batch: Option<String>,
    /// `-n NAME`
    pub netns: Option<String>,
    /// `-iec`: rates in powers of 1024.
    pub iec: bool,
    /// `-raw`: hex handles and ticks beside the decoded values.
    pub raw: bool,
    /// `-g`: classes drawn as a tree.
    pub graph: bool,
    /// `-o`: each object on one line.
    pub oneline: bool,
}

const USAGE: &str = "Usage:\ttc [ OPTIONS ] OBJECT { COMMAND | help }
\ttc [-force] -batch filename
where  OBJECT := { qdisc | class | filter | chain |
\t\t    action | monitor | exec }
       OPTIONS := { -V[ersion] | -s[tatistics] | -d[etails] | -r[aw] |
\t\t    -o[neline] | -j[son] | -p[retty] | -c[olor]
\t\t    -b[atch] [filename] | -n[etns] name | -N[umeric] |
\t\t     -nm | -nam[es] | { -cf | -conf } path
\t\t     -br[ief] }
";

/// Split tc's global options from the command words.
pub fn parse_global(argv: &[String]) -> Result<(Opts, Vec<String>), Outcome> {
    let mut o = Opts::default();
    let mut i = 0;
    while i < argv.len() && argv[i].starts_with('-') && argv[i].len() > 1 {
        let a = argv[i].trim_start_matches('-');
        let next = |i: &mut usize| -> Result<String, Outcome> {
            *i += 1;
            argv.get(*i)
                .cloned()
                .ok_or_else(|| fail_outcome(&crate::args::incomplete()))
        };
        if matches(a, "stats") || matches(a, "statistics") {
            o.stats = true;
        } else if matches(a, "details") {
            o.details = true;
        } else if matches(a, "json") {
            o.json = true;
        } else if matches(a, "pretty") {
            o.pretty = true;
        } else if matches(a, "Version") {
            return Err(Outcome {
                stdout: "tc utility, iproute2-6.1.0, libbpf 1.1.2\n".into(),
                ..Default::default()
            });
        } else if matches(a, "help") {
            return Err(Outcome {
                stderr: USAGE.into(),
                ..Default::default()
            });
        } else if matches(a, "force") {
            o.force = true;
        } else if matches(a, "batch") {
            o.batch = Some(next(&mut i)?);
        } else if matches(a, "netns") {
            o.netns = Some(next(&mut i)?);
        } else if matches(a, "iec") {
            o.iec = true;
        } else if matches(a, "raw") {
            o.raw = true;
        } else if matches(a, "graph") {
            o.graph = true;
        } else if matches(a, "oneline") {
            o.oneline = true;
        } else if matches(a, "color")
            || a.starts_with("color=")
            || matches(a, "Numeric")
            || matches(a, "brief")
            || a == "nm"
            || matches(a, "names")
        {
            // Accepted and (for now) without effect on sluice's output.
        } else {
            return Err(Outcome {
                stderr: format!("Option \"{}\" is unknown, try \"tc -help\".\n", argv[i]),
                code: 255,
                ..Default::default()
            });
        }
        i += 1;
    }
    Ok((o, argv[i..].to_vec()))
}

fn fail_outcome(f: &Fail) -> Outcome {
    Outcome {
        stderr: f.stderr.clone(),
        code: f.code,
        ..Default::default()
    }
}

/// Does this command change state (so it must be logged when it succeeds)?
pub fn mutates(words: &[String]) -> bool {
    let (Some(obj), Some(cmd)) = (words.first(), words.get(1)) else {
        return false;
    };
    let obj_ok = ["qdisc", "class", "filter", "chain", "actions"]
        .iter()
        .any(|o| matches(obj, o));
    obj_ok
        && ["add", "change", "replace", "link", "delete", "flush"]
            .iter()
            .any(|c| matches(cmd, c))
}

/// Run one tc command (global options already taken off) against `net`.
pub fn run(net: &mut Net, opts: &Opts, words: &[String]) -> Outcome {
    let mut out = Out::new(opts.json, opts.pretty);
    out.iec = opts.iec;
    out.raw = opts.raw;
    out.oneline = opts.oneline;
    crate::net::cache_ifnames(net);
    for d in &mut net.devices {
        d.settle(net.now);
    }
    let r = dispatch(net, opts, words, &mut out);
    let warnings = std::mem::take(&mut out.warnings);
    let stdout = out.finish();
    match r {
        Ok(()) => Outcome {
            stdout,
            stderr: warnings,
            code: 0,
        },
        Err(f) => Outcome {
            stdout: if opts.json { String::new() } else { stdout },
            stderr: f.stderr,
            code: f.code,
        },
    }
}

fn dispatch(net: &mut Net, opts: &Opts, words: &[String], out: &mut Out) -> CmdResult {
    let mut a = Args::new(words);
    let Some(obj) = a.next() else {
        return Err(Fail::new(0, USAGE.trim_end()));
    };
    if matches(obj, "qdisc") {
        qdisc_cmd(net, opts, &mut a, out)
    } else if matches(obj, "class") {
        class_cmd(net, opts, &mut a, out)
    } else if matches(obj, "filter") {
        let r = crate::filter::filter_cmd(net, opts, &mut a, out);
        with_notes(r, &mut a, out)
    } else if matches(obj, "chain") {
        crate::filter::chain_cmd(net, opts, &mut a, out)
    } else if matches(obj, "actions") {
        let r = crate::action::actions_cmd(net, opts, &mut a, out);
        with_notes(r, &mut a, out)
    } else if matches(obj, "monitor") {
        monitor_cmd(&mut a)
    } else if matches(obj, "exec") {
        exec_cmd(&mut a)
    } else if matches(obj, "help") {
        Err(Fail::new(0, USAGE.trim_end()))
    } else {
        Err(Fail::new(
            255,
            format!("Object \"{obj}\" is unknown, try \"tc help\"."),
        ))
    }
}

/// `tc monitor [file FILE]`: the arguments as tc_monitor.c checks them.
/// The event stream itself is not there: sluice's state changes by whole
/// commands in other processes, with no netlink multicast to listen to.
fn monitor_cmd(a: &mut Args) -> CmdResult {
    while let Some(w) = a.next() {
        if matches(w, "file") {
            a.value()?;
        } else if matches(w, "help") {
            return Err(Fail::new(255, "Usage: tc [-timestamp [-tshort] monitor"));
        } else {
            return Err(Fail::new(
                255,
                format!("Argument \"{w}\" is unknown, try \"tc monitor help\"."),
            ));
        }
    }
    Err(Fail::new(
        1,
        "sluice: tc monitor is not supported (no event stream)",
    ))
}

/// `tc exec KIND ...` (tc_exec.c): only its usage; the one exec kind
/// iproute2 has, bpf, is not supported. Other kinds do nothing, as there.
fn exec_cmd(a: &mut Args) -> CmdResult {
    let Some(kind) = a.next() else {
        return Err(Fail::new(255, "No command given, try \"tc exec help\"."));
    };
    if matches(kind, "help") {
        return Err(Fail::new(
            0,
            "Usage: tc exec [ EXEC_TYPE ] [ help | OPTIONS ]
Where:
EXEC_TYPE := { bpf | etc. }
OPTIONS := ... try tc exec <desired EXEC_KIND> help",
        ));
    }
    if kind == "bpf" {
        return Err(Fail::new(1, "sluice: tc exec bpf is not supported"));
    }
    Ok(())
}

const QDISC_USAGE: &str = "Usage: tc qdisc [ add | del | replace | change | show ] dev STRING
       [ handle QHANDLE ] [ root | ingress | clsact | parent CLASSID ]
       [ estimator INTERVAL TIME_CONSTANT ]
       [ stab [ help | STAB_OPTIONS] ]
       [ ingress_block BLOCK_INDEX ] [ egress_block BLOCK_INDEX ]
       [ [ QDISC_KIND ] [ help | OPTIONS ] ]

       tc qdisc { show | list } [ dev STRING ] [ QDISC_ID ] [ invisible ]
Where:
QDISC_KIND := { [p|b]fifo | tbf | prio | cbq | red | etc. }
OPTIONS := ... try tc qdisc add <desired QDISC_KIND> help
STAB_OPTIONS := ... try tc qdisc add stab help
QDISC_ID := { root | ingress | handle QHANDLE | parent CLASSID }";

/// Words left where a kind's options would be: iproute2's "Garbage" error.
fn no_garbage<T>(a: &Args, object: &str) -> CmdResult<Option<T>> {
    match a.peek() {
        Some(w) => Err(Fail::new(
            255,
            format!("Garbage instead of arguments \"{w} ...\". Try \"tc {object} help\"."),
        )),
        None => Ok(None),
    }
}

/// A request without `dev`: the kernel finds no device 0.
fn no_device() -> Fail {
    Fail::new(2, "RTNETLINK answers: No such device")
}

fn kernel_err(e: TcError) -> Fail {
    Fail::new(2, e.describe())
}

/// iproute2 copies the name into an IFNAMSIZ buffer, so longer names are cut
/// to 15 bytes. An empty name is not looked up (`if (d[0])`): the request
/// goes out for ifindex 0, which the kernel does not find.
pub(crate) fn nodev(name: &str) -> Fail {
    if name.is_empty() {
        return Fail::new(2, "RTNETLINK answers: No such device");
    }
    let shown: String = name.chars().take(15).collect();
    Fail::new(1, format!("Cannot find device \"{shown}\""))
}

fn qdisc_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let Some(cmd) = a.next() else {
        return qdisc_list(net, opts, a, out);
    };
    let flags = if matches(cmd, "add") {
        NlFlags::ADD
    } else if matches(cmd, "change") {
        NlFlags::CHANGE
    } else if matches(cmd, "replace") {
        NlFlags::REPLACE
    } else if matches(cmd, "link") {
        NlFlags::LINK
    } else if matches(cmd, "delete") {
        return with_notes(qdisc_modify(net, a, None), a, out);
    } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        return qdisc_list(net, opts, a, out);
    } else if matches(cmd, "help") {
        return Err(Fail::new(0, QDISC_USAGE));
    } else {
        return Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"tc qdisc help\"."),
        ));
    };
    with_notes(qdisc_modify(net, a, Some(flags)), a, out)
}

/// What the option parser printed on stderr comes before the outcome.
fn with_notes(r: CmdResult, a: &mut Args, out: &mut Out) -> CmdResult {
    let notes = std::mem::take(&mut a.notes);
    match r {
        Ok(()) => {
            out.warnings.insert_str(0, &notes);
            Ok(())
        }
        Err(mut f) => {
            f.stderr.insert_str(0, &notes);
            Err(f)
        }
    }
}

/// `tc_qdisc_modify`; `flags == None` is `delete`.
/// The index after `ingress_block`/`egress_block` (`which`): not 0.
fn block_index(a: &mut Args, which: &str) -> CmdResult<u32> {
    let v = a.value()?;
    get_u32(v, 0)
        .filter(|&b| b != 0)
        .ok_or_else(|| invarg(&format!("invalid {which} block index value"), v))
}

fn qdisc_modify(net: &mut Net, a: &mut Args, flags: Option<NlFlags>) -> CmdResult {
    let mut dev: Option<&str> = None;
    let mut handle = Handle::UNSPEC;
    let mut parent = Handle::UNSPEC;
    let mut kind: Option<String> = None;
    let mut estimator = None;
    let mut stab: Option<SizeSpec> = None;
    // TCA_INGRESS_BLOCK / TCA_EGRESS_BLOCK.
    let (mut ingress_block, mut egress_block) = (None, None);
    while let Some(w) = a.next() {
        match w {
            "dev" => {
                let v = a.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            w if w != "ingress" && matches(w, "ingress_block") => {
                ingress_block = Some(block_index(a, "ingress")?);
            }
            w if matches(w, "egress_block") => egress_block = Some(block_index(a, "egress")?),
            "handle" => {
                if !handle.is_unspec() {
                    return Err(duparg("handle", "handle"));
                }
                let v = a.value()?;
                handle = Handle::parse_qdisc(v).ok_or_else(|| invarg("invalid qdisc ID", v))?;
            }
            "root" => {
                if !parent.is_unspec() {
                    return Err(Fail::new(255, "Error: \"root\" is duplicate parent ID"));
                }
                parent = Handle::ROOT;
            }
            "ingress" | "clsact" => {
                if !parent.is_unspec() {
                    return Err(Fail::new(
                        255,
                        format!("Error: \"{w}\" is a duplicate parent ID"),
                    ));
                }
                parent = Handle::INGRESS;
                handle = Handle::new(0xffff, 0);
                kind = Some(w.to_string());
                break;
            }
            "parent" => {
                let v = a.value()?;
                if !parent.is_unspec() {
                    return Err(duparg("parent", v));
                }
                parent = Handle::parse_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?;
            }
            w if matches(w, "estimator") => {
                if estimator.is_some() {
                    return Err(duparg("estimator", a.peek().unwrap_or("")));
                }
                let e = parse_estimator(a)?;
                estimator = Some(RateEstimator::new(e.interval_log, e.ewma_log));
            }
            w if matches(w, "stab") => {
                if stab.is_some() {
                    return Err(duparg("stab", w));
                }
                stab = Some(parse_size_table(a)?);
            }
            w if matches(w, "help") => return Err(Fail::new(255, QDISC_USAGE)),
            w => {
                kind = Some(w.to_string());
                break;
            }
        }
    }
    let devinfo = parser_devinfo(net, dev);
    let qopts = match (&kind, flags) {
        (Some(k), Some(_)) if k == "ingress" || k == "clsact" => {
            parse_ingress_words(k, a)?;
            Some(if k == "ingress" {
                QdiscOpts::Ingress(Default::default())
            } else {
                QdiscOpts::Clsact(Default::default())
            })
        }
        (Some(k), Some(_)) => q::parse_qdisc(k, a, devinfo.as_ref())?,
        (Some(k), None) => {
            // `tc qdisc del ... KIND [opts]`: tc parses the options too.
            if k != "ingress" && k != "clsact" {
                q::parse_qdisc(k, a, devinfo.as_ref())?;
            }
            None
        }
        (None, _) => no_garbage(a, "qdisc")?,
    };
    let dname = dev.ok_or_else(no_device)?;
    // A block a new qdisc is to bind (made now if none exists; it goes
    // again if the qdisc is not made).
    let (seed, now) = (net.seed, net.now);
    let mut bind = |b: Option<u32>| b.map(|i| net.blocks.get_or_create(i, seed));
    let (ingress_block, egress_block) = (bind(ingress_block), bind(egress_block));
    let ah = &mut net.autohandle;
    let d: &mut Device = net
        .devices
        .iter_mut()
        .find(|d| d.info.name == dname)
        .ok_or_else(|| nodev(dname))?;
    match flags {
        None => d
            .delete_qdisc(parent, handle, kind.as_deref())
            .map_err(kernel_err),
        Some(mut fl) => {
            if let Some(QdiscOpts::Gred(g)) = &qopts {
                // q_gred.c's `setup` asks for creation whatever the verb.
                fl.create |= g.dps.is_some();
            }
            let req = QdiscRequest {
                parent,
                handle,
                kind,
                opts: qopts,
                estimator,
                stab,
                ingress_block,
                egress_block,
                now,
            };
            let r = d.modify_qdisc(&req, fl, &mut |dev| alloc_handle(ah, dev));
            // The kernel's warning on success, after what the parser wrote.
            r.map(|w| {
                if let Some(w) = w {
                    a.notes.push_str(&format!("Warning: {w}\n"));
                }
            })
            .map_err(|e| {
                let mut f = kernel_err(e);
                if stab.is_some_and(|s| s.tsize > MAX_TSIZE) {
                    // tc could not fit the table into its request.
                    f.stderr = format!(
                        "addattr_l ERROR: message exceeded bound of 65572\n{}",
                        f.stderr
                    );
                }
                f
            })
        }
    }
}

const STAB_USAGE: &str = "Usage: ... stab [ mtu BYTES ] [ tsize SLOTS ] [ mpu BYTES ]
                [ overhead BYTES ] [ linklayer TYPE ] ...
   mtu       : max packet size we create rate map for {2047}
   tsize     : how many slots should size table have {512}
   mpu       : minimum packet size used in rate computations
   overhead  : per-packet size overhead used in rate computations
   linklayer : adapting to a linklayer e.g. atm
Example: ... stab overhead 20 linklayer atm
";

/// `parse_size_table` (tc_stab.c): the words after `stab`, up to the first
/// it does not know. A spec that says nothing fails silently, as in tc.
fn parse_size_table(a: &mut Args) -> CmdResult<SizeSpec> {
    let mut s = SizeSpec::default();
    if a.peek().is_none() {
        a.value()?;
    }
    if a.peek().is_some_and(|w| matches(w, "help")) {
        return Err(Fail::new(255, STAB_USAGE.trim_end()));
    }
    let u32_of = |v: &str, what: &str| match q::get_u32(v, 10) {
        Some(n) => Ok(n),
        None => Err(invarg(what, &format!("invalid {what}"))),
    };
    while let Some(w) = a.peek() {
        if matches(w, "mtu") {
            a.next();
            let v = a.value()?;
            if s.mtu != 0 {
                return Err(duparg("mtu", v));
            }
            s.mtu = u32_of(v, "mtu")?;
        } else if matches(w, "mpu") {
            a.next();
            let v = a.value()?;
            if s.mpu != 0 {
                return Err(duparg("mpu", v));
            }
            s.mpu = u32_of(v, "mpu")?;
        } else if matches(w, "overhead") {
            a.next();
            let v = a.value()?;
            if s.overhead != 0 {
                return Err(duparg("overhead", v));
            }
            s.overhead = match sluice_core::units::strtoul(v, 10) {
                Some((n, "")) => i32::try_from(n as i64).ok(),
                _ => None,
            }
            .ok_or_else(|| invarg("overhead", "invalid overhead"))?;
        } else if matches(w, "tsize") {
            a.next();
            let v = a.value()?;
            if s.tsize != 0 {
                return Err(duparg("tsize", v));
            }
            s.tsize = q::get_u32(v, 10).ok_or_else(|| invarg("tsize", "invalid table size"))?;
        } else if matches(w, "linklayer") {
            a.next();
            let v = a.value()?;
            if s.linklayer != LinkLayer::Unspec {
                return Err(duparg("linklayer", v));
            }
            s.linklayer =
                q::get_linklayer(v).ok_or_else(|| invarg("linklayer", "invalid linklayer"))?;
        } else {
            break;
        }
    }
    if !s.says_something() {
        return Err(Fail::new(255, ""));
    }
    Ok(s)
}

/// `print_size_table` (tc_stab.c), shown with `-d`.
fn print_size_table(t: &SizeTable, out: &mut Out) {
    let s = &t.spec;
    out.open("stab");
    out.text(" ");
    match s.linklayer {
        LinkLayer::Unspec => {}
        l => {
            let name = if l == LinkLayer::Atm {
                "atm"
            } else {
                "ethernet"
            };
            out.str(To::Any, "linklayer", &format!("linklayer {name} "), name);
        }
    }
    if s.overhead != 0 {
        out.int(
            To::Any,
            "overhead",
            &format!("overhead {} ", s.overhead),
            s.overhead as i64,
        );
    }
    for (key, v) in [("mpu", s.mpu), ("mtu", s.mtu), ("tsize", s.tsize)] {
        if v != 0 {
            out.uint(To::Any, key, &format!("{key} {v} "), v as u64);
        }
    }
    out.close();
}

const EST_USAGE: &str = "Usage: ... estimator INTERVAL TIME-CONST
  INTERVAL is interval between measurements
  TIME-CONST is averaging time constant
Example: ... est 1sec 8sec
";

/// `parse_estimator` + `tc_setup_estimator` (tc_estimator.c).
pub(crate) fn parse_estimator(a: &mut Args) -> CmdResult<EstimatorSpec> {
    let help = |w: &str| matches(w, "help");
    let v = a.value()?;
    let bad_interval = || {
        let mut f = invarg("estimator", "invalid estimator interval");
        f.stderr = f.stderr.replace(
            "argument \"estimator\" is wrong: invalid estimator interval",
            "argument \"invalid estimator interval\" is wrong: estimator",
        );
        f
    };
    if help(v) {
        let mut f = bad_interval();
        f.stderr = format!("{EST_USAGE}{}", f.stderr);
        return Err(f);
    }
    let interval = parse_time_us(v).map_err(|_| bad_interval())?;
    let v = a.value()?;
    let bad_tc = Fail::new(
        255,
        "Error: argument \"invalid estimator time constant\" is wrong: estimator",
    );
    if help(v) {
        return Err(Fail::new(255, format!("{EST_USAGE}{}", bad_tc.stderr)));
    }
    let time_const = parse_time_us(v).map_err(|_| bad_tc)?;
    let out_of_range = || Fail::new(255, "Error: estimator parameters are out of range.");
    let mut ilog = 0i32;
    while ilog <= 5 && interval as u64 > (1u64 << ilog) * 250_000 {
        ilog += 1;
    }
    if ilog > 5 {
        return Err(out_of_range());
    }
    let mut ewma = 1u32;
    while ewma < 32 {
        let w = 1.0 - 1.0 / (1u64 << ewma) as f64;
        if interval as f64 / (-w.ln()) > time_const as f64 {
            break;
        }
        ewma += 1;
    }
    ewma -= 1;
    if ewma == 0 || ewma >= 31 {
        return Err(out_of_range());
    }
    Ok(EstimatorSpec {
        interval_log: (ilog - 2) as i8,
        ewma_log: ewma as u8,
    })
}

fn parse_ingress_words(kind: &str, a: &mut Args) -> CmdResult {
    while let Some(w) = a.next() {
        if w == "handle" {
            a.value()?;
        } else {
            let usage = format!("Usage: ... {kind}");
            return Err(Fail::new(1, format!("What is \"{w}\"?\n{usage}")));
        }
    }
    Ok(())
}

/// `tc qdisc show [dev D] [root|ingress|handle H|parent P]`.
fn qdisc_list(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let mut dev: Option<&str> = None;
    let mut filter_parent: Option<Handle> = None;
    let mut filter_handle: Option<Handle> = None;
    let mut invisible = false;
    while let Some(w) = a.next() {
        match w {
            "dev" => {
                let v = a.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            "root" => filter_parent = Some(Handle::ROOT),
            "ingress" | "clsact" => filter_parent = Some(Handle::INGRESS),
            "parent" => {
                let v = a.value()?;
                filter_parent =
                    Some(Handle::parse_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?);
            }
            "handle" => {
                let v = a.value()?;
                filter_handle =
                    Some(Handle::parse_qdisc(v).ok_or_else(|| invarg("invalid handle ID", v))?);
            }
            "invisible" => invisible = true,
            w if matches(w, "help") => return Err(Fail::new(255, QDISC_USAGE)),
            w => {
                return Err(Fail::new(
                    255,
                    format!("What is \"{w}\"? Try \"tc qdisc help\"."),
                ))
            }
        }
    }
    // tc lists every device for an empty name (`if (d[0])`).
    let dev = dev.filter(|d| !d.is_empty());
    if let Some(d) = dev {
        if net.dev(d).is_none() {
            return Err(nodev(d));
        }
    }
    for d in &net.devices {
        if dev.is_some_and(|n| n != d.info.name) {
            continue;
        }
        for q in d.qdiscs() {
            // Builtin noop and the default leaves classful qdiscs create
            // (handle 0 below the root) are not in the kernel's dump, but
            // for those hashed visibly (cbs's), and those hashed as
            // invisible when it is asked for them.
            let hidden = q.handle.is_unspec() && !q.parent.is_root() && !q.listed;
            let asked_for = invisible && q.invisible;
            if matches!(q.qdisc.dump(), QdiscOpts::Noop) || (hidden && !asked_for) {
                continue;
            }
            if filter_handle.is_some_and(|h| h.major() != q.handle.major()) {
                continue;
            }
            if let Some(p) = filter_parent {
                if q.parent != p {
                    continue;
                }
            }
            print_qdisc(d, q, dev.is_none(), opts, net.now, out);
        }
    }
    Ok(())
}

fn print_qdisc(d: &Device, q: &QdiscNode, show_dev: bool, opts: &Opts, now: Time, out: &mut Out) {
    let o = q.qdisc.dump();
    out.open("");
    out.str(To::Any, "kind", &format!("qdisc {} ", o.kind()), o.kind());
    let h = format!("{:x}:", q.handle.major());
    let raw = if out.raw {
        format!("[{:08x}] ", q.handle.0)
    } else {
        " ".to_string()
    };
    out.str(To::Any, "handle", &format!("{h}{raw}"), &h);
    if show_dev {
        out.str(
            To::Any,
            "dev",
            &format!("dev {} ", d.info.name),
            &d.info.name,
        );
    }
    if q.parent.is_root() {
        out.bool(To::Any, "root", "root ", true);
    } else if !q.parent.is_unspec() {
        let p = q.parent.to_string();
        out.str(To::Any, "parent", &format!("parent {p} "), &p);
    }
    // A root qdisc is held by the device and by each transmit queue it
    // serves; mq serves none itself, and each queue has a noqueue (or noop)
    // of its own. tc prints a count other than 1.
    if q.parent.is_root() && !matches!(o, QdiscOpts::Mq | QdiscOpts::Mqprio(_)) {
        let queues = match o {
            QdiscOpts::Noqueue | QdiscOpts::Noop => 1,
            _ => d.info.num_tx_queues as u64,
        };
        let refcnt = 1 + queues;
        out.uint(To::Any, "refcnt", &format!("refcnt {refcnt} "), refcnt);
    }
    if let QdiscOpts::Ingress(b) | QdiscOpts::Clsact(b) = &o {
        for (key, index) in [
            ("ingress_block", b.ingress_block),
            ("egress_block", b.egress_block),
        ] {
            if index != 0 {
                out.uint(To::Any, key, &format!("{key} {index} "), index as u64);
            }
        }
    }
    out.open("options");
    // q_ingress.c prints a rule; q_clsact.c prints nothing.
    if matches!(o, QdiscOpts::Ingress(_)) {
        out.text("---------------- ");
    }
    q::print_qdisc(&o, out, opts.details, opts.stats);
    out.close();
    out.nl();
    if let (true, Some(t)) = (opts.details, &q.stab) {
        print_size_table(t, out);
        out.nl();
    }
    if opts.stats {
        let stats = q.stats();
        let rate = q.estimator.as_ref().map(|e| e.read_at(now, &stats));
        print_stats(&stats, rate, " ", out);
        out.nl();
        q::print_xstats(&q.qdisc.xstats(), out);
    }
    out.close();
}

/// `print_tcstats2_attr`: the counters line, an estimator's rate if any,
/// and the queue line, each starting with `prefix` (" " for qdiscs and classes).
pub fn print_stats(s: &Stats, rate: Option<(u64, u64)>, prefix: &str, out: &mut Out) {
    out.text(prefix);
    out.uint(
        To::Any,
        "bytes",
        &format!("Sent {} bytes", s.bytes),
        s.bytes,
    );
    out.uint(
        To::Any,
        "packets",
        &format!(" {} pkt", s.packets),
        s.packets,
    );
    out.uint(To::Any, "drops", &format!(" (dropped {}", s.drops), s.drops);
    out.uint(
        To::Any,
        "overlimits",
        &format!(", overlimits {}", s.overlimits),
        s.overlimits,
    );
    out.uint(
        To::Any,
        "requeues",
        &format!(" requeues {}) ", s.requeues),
        s.requeues,
    );
    out.nl();
    out.text(prefix);
    if let Some((bits, pps)) = rate {
        out.uint(To::Json, "rate", "", bits / 8);
        out.text(&format!("rate {}", out.rate(bits / 8)));
        out.uint(To::Any, "pps", &format!(" {pps}pps"), pps);
        out.text(prefix);
    }
    out.uint(
        To::Any,
        "backlog",
        &format!("backlog {}", fmt_size(s.backlog as u32)),
        s.backlog,
    );
    out.uint(To::Any, "qlen", &format!(" {}p", s.qlen), s.qlen as u64);
    out.text(&format!(" requeues {}", s.requeues));
}

/// `print_tcstats2_attr` when the kernel sent queue counters but no basic
/// ones (skbprio's classes): no prefix and no "Sent" before "(dropped".
pub fn print_queue_stats(s: &Stats, prefix: &str, out: &mut Out) {
    out.uint(To::Any, "drops", &format!(" (dropped {}", s.drops), s.drops);
    out.uint(
        To::Any,
        "overlimits",
        &format!(", overlimits {}", s.overlimits),
        s.overlimits,
    );
    out.uint(
        To::Any,
        "requeues",
        &format!(" requeues {}) ", s.requeues),
        s.requeues,
    );
    out.nl();
    out.text(prefix);
    out.uint(
        To::Any,
        "backlog",
        &format!("backlog {}", fmt_size(s.backlog as u32)),
        s.backlog,
    );
    out.uint(To::Any, "qlen", &format!(" {}p", s.qlen), s.qlen as u64);
    out.text(&format!(" requeues {}", s.requeues));
}

const CLASS_USAGE: &str = "Usage: tc class [ add | del | change | replace | show ] dev STRING
       [ classid CLASSID ] [ root | parent CLASSID ]
       [ [ QDISC_KIND ] [ help | OPTIONS ] ]

       tc class show [ dev STRING ] [ root | parent CLASSID ]
Where:
QDISC_KIND := { prio | cbq | etc. }
OPTIONS := ... try tc class add <desired QDISC_KIND> help";

/// What tc's option parsers learn of device `dev`: its name and, from
/// `/sys/class/net/DEV/speed`, its link speed — which the kernel reports
/// only while the device is up (0 here: unknown).
fn parser_devinfo(net: &Net, dev: Option<&str>) -> Option<DevInfo> {
    let d = net.dev(dev?)?;
    let mut info = d.info.clone();
    if !d.up {
        info.speed = 0;
    }
    Some(info)
}

fn class_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let Some(cmd) = a.next() else {
        return class_list(net, opts, a, out);
    };
    let flags = if matches(cmd, "add") {
        Some(NlFlags::ADD)
    } else if matches(cmd, "change") {
        Some(NlFlags::CHANGE)
    } else if matches(cmd, "replace") {
        Some(NlFlags::REPLACE)
    } else if matches(cmd, "delete") {
        None
    } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        return class_list(net, opts, a, out);
    } else if matches(cmd, "help") {
        return Err(Fail::new(0, CLASS_USAGE));
    } else {
        return Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"tc class help\"."),
        ));
    };
    let mut dev: Option<&str> = None;
    let mut classid = Handle::UNSPEC;
    let mut parent = Handle::UNSPEC;
    let mut kind: Option<&str> = None;
    let mut estimator = None;
    while let Some(w) = a.next() {
        match w {
            "dev" => {
                let v = a.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            w if matches(w, "estimator") => {
                let e = parse_estimator(a)?;
                estimator = Some(RateEstimator::new(e.interval_log, e.ewma_log));
            }
            "classid" => {
                let v = a.value()?;
                if !classid.is_unspec() {
                    return Err(duparg("classid", v));
                }
                classid = Handle::parse_classid(v).ok_or_else(|| invarg("invalid class ID", v))?;
            }
            "handle" => {
                return Err(Fail::new(
                    255,
                    "Error: try \"classid\" instead of \"handle\"",
                ))
            }
            "root" => {
                if !parent.is_unspec() {
                    return Err(Fail::new(255, "Error: \"root\" is duplicate parent ID."));
                }
                parent = Handle::ROOT;
            }
            "parent" => {
                let v = a.value()?;
                if !parent.is_unspec() {
                    return Err(duparg("parent", v));
                }
                parent = Handle::parse_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?;
            }
            w if matches(w, "help") => return Err(Fail::new(255, CLASS_USAGE)),
            w => {
                kind = Some(w);
                break;
            }
        }
    }
    let copts = match kind {
        Some(k) => q::parse_class(
            k,
            a,
            flags.is_some_and(|f| f.excl),
            parser_devinfo(net, dev).as_ref(),
        )?,
        None => no_garbage(a, "class")?,
    };
    let dname = dev.ok_or_else(no_device)?;
    let now = net.now;
    let d = net.dev_mut(dname).ok_or_else(|| nodev(dname))?;
    match flags {
        None => {
            d.delete_class(parent, classid).map_err(kernel_err)?;
            d.set_class_estimator(classid, None, now);
            Ok(())
        }
        Some(fl) => {
            if let Some(w) = d
                .modify_class(parent, classid, copts.as_ref(), fl)
                .map_err(kernel_err)?
            {
                out.warn(&w);
            }
            // The kinds whose class change takes TCA_RATE.
            if matches!(kind, Some("htb" | "hfsc" | "drr" | "qfq" | "cbq")) && estimator.is_some() {
                d.set_class_estimator(classid, estimator, now);
            }
            Ok(())
        }
    }
}

fn class_list(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let mut dev: Option<&str> = None;
    let mut filter_parent: Option<Handle> = None;
    let mut filter_classid: Option<Handle> = None;
    let mut filter_qdisc: Option<Handle> = None;
    while let Some(w) = a.next() {
        match w {
            "dev" => {
                let v = a.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            "qdisc" => {
                let v = a.value()?;
                if filter_qdisc.is_some() {
                    return Err(duparg("qdisc", v));
                }
                filter_qdisc =
                    Some(Handle::parse_qdisc(v).ok_or_else(|| invarg("invalid qdisc ID", v))?);
            }
            "classid" => {
                let v = a.value()?;
                if filter_classid.is_some() {
                    return Err(duparg("classid", v));
                }
                filter_classid =
                    Some(Handle::parse_classid(v).ok_or_else(|| invarg("invalid class ID", v))?);
            }
            "root" => {
                if filter_parent.is_some() {
                    return Err(Fail::new(255, "Error: \"root\" is duplicate parent ID"));
                }
                filter_parent = Some(Handle::ROOT);
            }
            "parent" => {
                if filter_parent.is_some() {
                    return Err(duparg("parent", "parent"));
                }
                let v = a.value()?;
                filter_parent =
                    Some(Handle::parse_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?);
            }
            // tc_class_list prints the usage and goes on to list.
            w if matches(w, "help") => out.warnings.push_str(&format!("{CLASS_USAGE}\n")),
            w => {
                return Err(Fail::new(
                    255,
                    format!("What is \"{w}\"? Try \"tc class help\"."),
                ))
            }
        }
    }
    let dev = dev.filter(|d| !d.is_empty());
    // Without a device the dump asks for ifindex 0, and the kernel's
    // tc_dump_tclass answers with nothing.
    let Some(dname) = dev else {
        return Ok(());
    };
    let d = net.dev(dname).ok_or_else(|| nodev(dname))?;
    // iproute2 6.1 prints classes as text even with -j (its print_class
    // mixes text into JSON mode); the golden captures show exactly that.
    out.json = false;
    let mut graph = vec![];
    for q in d.qdiscs() {
        let Some(cls) = q.qdisc.classes_ref() else {
            continue;
        };
        // The kernel filters a class dump by the parent's major only.
        if filter_parent.is_some_and(|p| !p.is_unspec() && p.qdisc() != q.handle) {
            continue;
        }
        let kind = q.qdisc.dump().kind();
        if opts.graph {
            // print_class only collects in graph mode, before its filters.
            graph.extend(cls.list().into_iter().map(|c| {
                let rate = q.class_rate(c.classid, net.now, &c.stats);
                (kind, c, rate)
            }));
            continue;
        }
        for c in cls.list() {
            let rate = q.class_rate(c.classid, net.now, &c.stats);
            if filter_qdisc.is_some_and(|h| h.major() != c.classid.major())
                || filter_classid.is_some_and(|h| h != c.classid)
            {
                continue;
            }
            out.open("");
            out.str(To::Any, "class", &format!("class {kind} "), kind);
            let h = c.classid.to_string();
            out.str(To::Any, "handle", &format!("{h} "), &h);
            if c.parent.is_root() {
                out.bool(To::Any, "root", "root ", true);
            } else {
                let p = c.parent.to_string();
                out.str(To::Any, "parent", &format!("parent {p} "), &p);
            }
            if let Some(l) = c.leaf.filter(|l| !l.is_unspec()) {
                let s = format!("{:x}:", l.major());
                out.str(To::Any, "leaf", &format!("leaf {s} "), &s);
            }
            out.open("options");
            q::print_class(&c.opts, out, opts.details);
            out.close();
            // print_class ends its lines with "\n" even under -oneline.
            out.text("\n");
            // tc_class.c: a newline after the counters (the kernel sends
            // their attribute even empty), and one after the kind's extended
            // statistics where tc has a printer for them.
            if opts.stats {
                print_class_stats(&c, rate, " ", out);
                out.text("\n");
                if q::prints_xstats(&c.xstats) {
                    q::print_xstats(&c.xstats, out);
                    out.text("\n");
                }
            }
            out.close();
        }
    }
    if opts.graph {
        crate::graph::print(&graph, opts, out);
    }
    Ok(())
}

/// The statistics lines of a class, each line starting with `prefix`
/// (`print_tcstats_attr`); false when the kernel sends none.
/// `rate` is the class's estimate, if it has an estimator.
pub fn print_class_stats(
    c: &ClassInfo,
    rate: Option<(u64, u64)>,
    prefix: &str,
    out: &mut Out,
) -> bool {
    match c.xstats {
        XStats::Absent => return false,
        XStats::QueueOnly => print_queue_stats(&c.stats, prefix, out),
        _ => print_stats(&c.stats, rate, prefix, out),
    }
    true
}
