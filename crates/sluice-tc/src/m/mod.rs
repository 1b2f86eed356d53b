//! Actions: the generic action-list syntax of iproute2's m_action.c and
//! tc_util.c (`action KIND ... [cookie HEX] [hw_stats ...]`, control
//! verdicts such as `drop` or `goto chain 5`), and one file per kind, like
//! iproute2's m_*.c: [`police`], [`gact`], [`mirred`], [`skbedit`], [`connmark`],
//! [`ctinfo`], [`simple`], [`csum`], [`pedit`], [`nat`], [`vlan`], [`mpls`], [`skbmod`] and
//! [`gate`].
//!
//! # Parser conventions
//!
//! iproute2's parsers either `return -1`, after which every caller on the
//! way up adds its own line ("bad action parsing", `Illegal "action"`), or
//! `exit(-1)` at once (`invarg`, an incomplete command line, a usage text).
//! Here the first is a [`Fail`] with status 1 ([`soft`]), the second one with
//! status 255; [`then`] appends a caller's line to soft failures only. The
//! command decides the final status of a soft failure (`tc filter`: 1,
//! `tc actions`: 255).
//!
//! The parsers read the words the way the C code walks `argv`: the current
//! word is [`Args::peek`], `argc` is the number of words left including it,
//! and [`next_arg`] is `NEXT_ARG()`.
//!
//! Kinds other than these are unknown to sluice. iproute2
//! falls back to gact for kinds it cannot load, and so do we: `action bogus`
//! reads as gact and fails with "Bad action type bogus" and gact's usage.

pub(crate) mod connmark;
pub(crate) mod csum;
pub(crate) mod ctinfo;
pub(crate) mod gact;
pub(crate) mod gate;
pub(crate) mod mirred;
pub(crate) mod mpls;
pub(crate) mod nat;
pub(crate) mod pedit;
pub(crate) mod police;
pub(crate) mod simple;
pub(crate) mod skbedit;
pub(crate) mod skbmod;
pub(crate) mod vlan;

use crate::args::{incomplete, matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::act::{ActionDump, ActionSpec, ActionStats, TC_ACT_EXT_VAL_MASK};
use sluice_core::cls::{Verdict, TCA_CLS_FLAGS_SKIP_HW, TCA_CLS_FLAGS_SKIP_SW};
use sluice_core::time::Time;

/// `TC_ACT_OK`, the default control action of csum, nat and pedit.
pub(crate) const TC_ACT_OK: i32 = 0;
/// `TC_ACT_PIPE`, the default control action of most other actions.
pub(crate) const TC_ACT_PIPE: i32 = 3;

/// A parser's `return -1`: `msg` (if any) is what it printed on the way.
pub(crate) fn soft(msg: impl Into<String>) -> Fail {
    Fail::new(1, msg)
}

/// A caller's line after a failed call: added to soft failures only.
pub(crate) fn then(mut f: Fail, line: &str) -> Fail {
    if f.code == 1 {
        f.stderr.push_str(line);
        f.stderr.push('\n');
    }
    f
}

/// `NEXT_ARG()`: step to the next word, which must exist.
pub(crate) fn next_arg<'a>(a: &mut Args<'a>) -> CmdResult<&'a str> {
    a.next();
    a.peek().ok_or_else(incomplete)
}

/// `argc`: the words left, the current one included.
pub(crate) fn argc(a: &Args) -> usize {
    a.rest().len()
}

pub(crate) use crate::args::get_u32;

/// `index N` after an action's options (base 10), if there: the index,
/// or the soft failure with the line `illegal` makes of the value.
pub(crate) fn parse_index(
    a: &mut Args,
    illegal: impl FnOnce(&str) -> String,
) -> CmdResult<Option<u32>> {
    if !a.peek().is_some_and(|w| matches(w, "index")) {
        return Ok(None);
    }
    let v = next_arg(a)?;
    let index = get_u32(v, 10).ok_or_else(|| soft(illegal(v)))?;
    a.next();
    Ok(Some(index))
}

/// `ll_addr_n2a` of a 6-byte address: `aa:bb:cc:dd:ee:ff`.
pub(crate) fn ll_addr_n2a(a: &[u8; 6]) -> String {
    a.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `ll_addr_a2n` into a 6-byte buffer: the bytes (zero-filled) and how
/// many parts were read — four for an IPv4-style dotted address, else
/// colon-separated parts read as `sscanf("%x")` (6 parts and more count
/// one past the sixth). The error is the line tc prints.
pub(crate) fn ll_addr(arg: &str) -> Result<([u8; 6], usize), String> {
    let bad = |w: &str| format!("\"{w}\" is invalid lladdr.");
    let mut mac = [0u8; 6];
    if arg.contains('.') {
        let (b, _) = Some(arg)
            .filter(|a| !a.contains('/'))
            .and_then(|a| crate::f::u32::get_prefix(a, false))
            .ok_or_else(|| bad(arg))?;
        mac[..4].copy_from_slice(&b[..4]);
        return Ok((mac, 4));
    }
    let parts: Vec<&str> = arg.split(':').collect();
    for (i, part) in parts.iter().take(6).enumerate() {
        let v = scan_hex(part)
            .filter(|v| (0..=255).contains(v))
            .ok_or_else(|| bad(part))?;
        mac[i] = v as u8;
    }
    Ok((mac, parts.len().min(7)))
}

/// `sscanf(s, "%x")`: blanks, a sign, `0x`, then hex digits up to the
/// first other character (at least one).
fn scan_hex(s: &str) -> Option<i64> {
    scan_hex_prefix(s).map(|(v, _)| v)
}

/// [`scan_hex`], also answering how many bytes of `s` the conversion took
/// (the rest is left for the format's next directive).
pub(crate) fn scan_hex_prefix(whole: &str) -> Option<(i64, usize)> {
    let s = whole.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_hexdigit).count();
    let s = match s.get(..2) {
        Some("0x" | "0X") if digits(&s[2..]) > 0 => &s[2..],
        _ => s,
    };
    let n = digits(s);
    if n == 0 {
        return None;
    }
    let mut v: i64 = 0;
    for b in s[..n].bytes() {
        v = v
            .saturating_mul(16)
            .saturating_add((b as char).to_digit(16)? as i64);
    }
    let used = whole.len() - s.len() + n;
    Some((if neg { -v } else { v }, used))
}

/// iproute2 `get_u64(val, arg, base)`.
pub(crate) fn get_u64(arg: &str, base: u32) -> Option<u64> {
    match sluice_core::units::strtoul(arg, base) {
        Some((v, "")) => Some(v),
        _ => None,
    }
}

/// iproute2 `get_u16(val, arg, base)`.
pub(crate) fn get_u16(arg: &str, base: u32) -> Option<u16> {
    get_u32(arg, base).and_then(|v| u16::try_from(v).ok())
}

const TC_ACT_JUMP: i32 = 1 << 28;
const TC_ACT_GOTO_CHAIN: i32 = 2 << 28;

fn ext_opcode(raw: i32) -> i32 {
    raw & !(TC_ACT_EXT_VAL_MASK as i32)
}

/// `action_a2n`: a verdict name (any prefix) or, with `allow_num`, a number.
pub(crate) fn action_a2n(arg: &str, allow_num: bool) -> Option<i32> {
    const A2N: [(&str, i32); 10] = [
        ("continue", -1),
        ("drop", 2),
        ("shot", 2),
        ("pass", 0),
        ("ok", 0),
        ("reclassify", 1),
        ("pipe", 3),
        ("goto", TC_ACT_GOTO_CHAIN),
        ("jump", TC_ACT_JUMP),
        ("trap", 8),
    ];
    if let Some((_, n)) = A2N.iter().find(|(name, _)| matches(arg, name)) {
        return Some(*n);
    }
    if !allow_num {
        return None;
    }
    // sscanf("%d%c") == 1: one integer and nothing after it.
    let t = arg.trim_start();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<i64>().ok().map(|v| v as i32)
}

/// `action_n2a`.
pub(crate) fn action_n2a(raw: i32) -> String {
    match (ext_opcode(raw), raw) {
        (TC_ACT_GOTO_CHAIN, _) => "goto".into(),
        (TC_ACT_JUMP, _) => "jump".into(),
        (_, -1) => "continue".into(),
        (_, 0) => "pass".into(),
        (_, 2) => "drop".into(),
        (_, 1) => "reclassify".into(),
        (_, 3) => "pipe".into(),
        (_, 4) => "stolen".into(),
        (_, 8) => "trap".into(),
        (_, n) => n.to_string(),
    }
}

/// `parse_action_control`: a verdict, `goto chain N` or `jump N`; the raw value.
pub(crate) fn parse_action_control(a: &mut Args, allow_num: bool) -> CmdResult<i32> {
    let Some(w) = a.peek() else {
        return Err(soft(""));
    };
    let Some(mut result) = action_a2n(w, allow_num) else {
        return Err(soft(format!("Bad action type {w}")));
    };
    if result == TC_ACT_GOTO_CHAIN {
        let w = next_arg(a)?;
        if !matches(w, "chain") {
            return Err(soft("\"chain index\" expected"));
        }
        let w = next_arg(a)?;
        match get_u32(w, 10) {
            Some(n) if n <= TC_ACT_EXT_VAL_MASK => result |= n as i32,
            _ => return Err(soft("Illegal \"chain index\"")),
        }
    } else if result == TC_ACT_JUMP {
        let w = next_arg(a)?;
        match get_u32(w, 10) {
            Some(n) if n <= TC_ACT_EXT_VAL_MASK => result |= n as i32,
            _ => return Err(soft(format!("Invalid \"jump count\" ({w})"))),
        }
    }
    a.next();
    Ok(result)
}

/// `parse_action_control_dflt`: the verdict at the current word, or `dflt`
/// with the words untouched when the word names none. A verdict that names
/// one but fails to parse (`goto chain x`) also gives `dflt`: iproute2 prints
/// its complaint and goes on, so it becomes a note. A command line that ends
/// too early still exits.
pub(crate) fn parse_action_control_dflt(
    a: &mut Args,
    allow_num: bool,
    dflt: i32,
) -> CmdResult<i32> {
    if a.peek().is_none_or(|w| action_a2n(w, allow_num).is_none()) {
        return Ok(dflt);
    }
    let mut b = a.clone();
    match parse_action_control(&mut b, allow_num) {
        Ok(r) => {
            *a = b;
            Ok(r)
        }
        Err(f) if f.code == 1 => {
            a.notes.push_str(&f.stderr);
            Ok(dflt)
        }
        Err(f) => Err(f),
    }
}

/// `parse_action_control_slash`: `EXCEED[/CONFORM]`, in one word or as
/// `EXCEED / CONFORM`. The second value is `None` when not given.
pub(crate) fn parse_action_control_slash(
    a: &mut Args,
    allow_num: bool,
) -> CmdResult<(i32, Option<i32>)> {
    let w = a.peek().unwrap_or("");
    if let Some((x, y)) = w.split_once('/') {
        let r1 = action_a2n(x, allow_num).ok_or_else(|| soft(""))?;
        let r2 = action_a2n(y, allow_num).ok_or_else(|| soft(""))?;
        a.next();
        return Ok((r1, Some(r2)));
    }
    // parse_action_control_slash_spaces, whose third round parses into
    // the second value again and then drops it, as iproute2 does.
    let (mut r1, mut r2, mut ok) = (-1, 0, 0);
    while let Some(w) = a.peek() {
        match ok {
            0 => r1 = parse_action_control(a, allow_num)?,
            1 if w == "/" => {
                next_arg(a)?;
                r2 = parse_action_control(a, allow_num)?;
            }
            2 => r2 = parse_action_control(a, allow_num)?,
            _ => break,
        }
        ok += 1;
    }
    Ok((r1, (ok == 2).then_some(r2)))
}

/// The kernel's verdict for a raw control value; an invalid one is refused
/// as `tcf_action_check_ctrlact` does (status 2; `tc actions` makes it 255).
pub(crate) fn verdict(raw: i32) -> CmdResult<Verdict> {
    Verdict::from_raw(raw).ok_or_else(|| {
        Fail::new(
            2,
            "Error: invalid control action.\nWe have an error talking to the kernel",
        )
    })
}

/// `print_action_control(f, prefix, action, suffix)`.
pub(crate) fn print_action_control(out: &mut Out, prefix: &str, v: Verdict, suffix: &str) {
    let raw = v.to_raw();
    out.text(prefix);
    out.open("control_action");
    let name = action_n2a(raw);
    out.str(To::Any, "type", &name, &name);
    let n = (raw as u32 & TC_ACT_EXT_VAL_MASK) as u64;
    match ext_opcode(raw) {
        TC_ACT_GOTO_CHAIN => out.uint(To::Any, "chain", &format!(" chain {n}"), n),
        TC_ACT_JUMP => out.uint(To::Any, "jump", &format!(" {n}"), n),
        _ => {}
    }
    out.close();
    out.text(suffix);
}

/// Action kinds compiled into iproute2 6.1.
pub(crate) const IPROUTE2_KINDS: [&str; 21] = [
    "bpf",
    "connmark",
    "csum",
    "ct",
    "ctinfo",
    "gact",
    "gate",
    "ife",
    "ipt",
    "mirred",
    "mpls",
    "nat",
    "pedit",
    "police",
    "sample",
    "simple",
    "skbedit",
    "skbmod",
    "tunnel_key",
    "vlan",
    "xt",
];

/// A kind iproute2 knows and sluice does not: its words are skipped up to
/// the next action or filter option, and the kernel's answer is that of a
/// kernel without the module (status 2; `tc actions` makes it 255).
fn foreign(a: &mut Args) -> Fail {
    a.next();
    if a.is_empty() {
        // Their parsers all want at least one word (NEXT_ARG).
        return incomplete();
    }
    while let Some(w) = a.peek() {
        if w == "action" || w == "flowid" || w == "classid" || GACT_WORDS.contains(&w) {
            break;
        }
        a.next();
    }
    Fail::new(
        2,
        "Error: Failed to load TC action module.\nWe have an error talking to the kernel",
    )
}

const GACT_WORDS: [&str; 4] = ["keys", "table", "preactions", "postactions"];

/// `new_cmd`: words that start another `tc actions` command.
fn new_cmd(w: &str) -> bool {
    ["change", "replace", "delete", "get", "add"]
        .iter()
        .any(|c| matches(w, c))
}

/// `parse_action`: `[action] KIND PARAMS [cookie HEX] [hw_stats T] ...`,
/// repeated. Stops at `flowid`, `classid` or a new command word.
pub(crate) fn parse_actions(a: &mut Args) -> CmdResult<Vec<ActionSpec>> {
    if argc(a) == 0 {
        return Err(soft(""));
    }
    let mut specs = Vec::new();
    let mut eap = 0;
    while let Some(w) = a.peek() {
        if GACT_WORDS.contains(&w) || w == "flowid" || w == "classid" {
            break;
        }
        if w == "action" {
            a.next();
            eap = 1;
            continue;
        }
        if w == "help" {
            return Err(soft(""));
        }
        if new_cmd(w) {
            if specs.is_empty() {
                return Ok(specs);
            }
            break;
        }
        let is_gact = action_a2n(w, false).is_some();
        eap = 0;
        let (left, word) = (argc(a), w);
        let parsed = match (is_gact, w) {
            (false, "police") => police::parse_action(a),
            (false, "mirred") => mirred::parse(a),
            (false, "skbedit") => skbedit::parse(a),
            (false, "connmark") => connmark::parse(a),
            (false, "ctinfo") => ctinfo::parse(a),
            (false, "simple") => simple::parse(a),
            (false, "csum") => csum::parse(a),
            (false, "pedit") => pedit::parse(a),
            (false, "nat") => nat::parse(a),
            (false, "vlan") => vlan::parse(a),
            (false, "mpls") => mpls::parse(a),
            (false, "skbmod") => skbmod::parse(a),
            (false, "gate") => gate::parse(a),
            (false, k) if k != "gact" && IPROUTE2_KINDS.contains(&k) => Err(foreign(a)),
            _ => gact::parse(a),
        };
        let mut spec = parsed.map_err(|f| {
            let f = then(f, "bad action parsing");
            then(f, &format!("parse_action: bad value ({left}:{word})!"))
        })?;
        spec.cookie = parse_cookie(a)?;
        (spec.no_percpu, spec.offload) = parse_action_flags(a)?;
        specs.push(spec);
    }
    if eap > 0 {
        let left = argc(a);
        let word = a.peek().unwrap_or("(null)");
        return Err(soft(format!(
            "bad action empty {eap}\nparse_action: bad value ({left}:{word})!"
        )));
    }
    Ok(specs)
}

/// `cookie HEX` after an action (at most 16 bytes).
fn parse_cookie(a: &mut Args) -> CmdResult<Option<Vec<u8>>> {
    if a.peek() != Some("cookie") {
        return Ok(None);
    }
    let v = next_arg(a)?;
    if v.len() > 32 {
        let msg = format!(
            "Error: argument \"{v}\" is wrong: {} Max allowed size 32",
            v.len()
        );
        return Err(Fail::new(255, msg));
    }
    let not_hex = || {
        let msg = format!("Error: argument \"{v}\" is wrong: cookie must be a hex string\n\n");
        Fail::new(255, msg)
    };
    if v.len() % 2 != 0 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_hex());
    }
    let bytes: Option<Vec<u8>> = (0..v.len() / 2)
        .map(|i| u8::from_str_radix(v.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    let bytes = bytes.ok_or_else(not_hex)?;
    a.next();
    Ok(Some(bytes))
}

/// `hw_stats`, `no_percpu`, `skip_sw`, `skip_hw` after an action (sluice
/// models neither offload nor per-cpu counters, but the kernel keeps and
/// checks the flags): answers whether `no_percpu` was given, and the skip
/// flags as `TCA_CLS_FLAGS_*` bits.
fn parse_action_flags(a: &mut Args) -> CmdResult<(bool, u32)> {
    if a.peek().is_some_and(|w| matches(w, "hw_stats")) {
        let v = next_arg(a)?;
        if !["immediate", "delayed", "disabled"]
            .iter()
            .any(|s| matches(v, s))
        {
            return Err(Fail::new(
                255,
                format!("Error: argument \"{v}\" is wrong: value is invalid\n\n"),
            ));
        }
        a.next();
    }
    let no_percpu = a.peek() == Some("no_percpu");
    if no_percpu {
        a.next();
    }
    // Twice, so that either order is read.
    let mut skip = 0;
    for _ in 0..2 {
        match a.peek() {
            Some("skip_sw") => skip |= TCA_CLS_FLAGS_SKIP_SW,
            Some("skip_hw") => skip |= TCA_CLS_FLAGS_SKIP_HW,
            _ => continue,
        }
        a.next();
    }
    Ok((no_percpu, skip))
}

/// What printing an action needs besides the dump.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrintCx {
    /// `-s`.
    pub stats: bool,
    /// `-d`.
    pub details: bool,
    /// The clock the action times are measured against.
    pub now: Time,
}

/// `tc_dump_action`: an action list, each entry `\taction order N: ...`.
/// `bind` is true inside a filter's dump.
pub(crate) fn print_actions(acts: &[ActionDump], bind: bool, cx: &PrintCx, out: &mut Out) {
    out.open_arr("actions");
    for d in acts {
        out.open("");
        out.nl();
        let o = d.order as u64;
        out.uint(To::Any, "order", &format!("\taction order {o}: "), o);
        print_one(d, bind, cx, out);
        out.close();
    }
    out.close();
}

/// `tc_print_one_action`.
fn print_one(d: &ActionDump, bind: bool, cx: &PrintCx, out: &mut Out) {
    use sluice_core::act::ActionOpts;
    match &d.opts {
        ActionOpts::Police(_) => police::print(d, cx, out),
        ActionOpts::Gact(_) => gact::print(d, cx, out),
        ActionOpts::Mirred(_) => mirred::print(d, cx, out),
        ActionOpts::Skbedit(_) => skbedit::print(d, cx, out),
        ActionOpts::Connmark(_) => connmark::print(d, cx, out),
        ActionOpts::Ctinfo(_) => ctinfo::print(d, cx, out),
        ActionOpts::Simple(_) => simple::print(d, cx, out),
        ActionOpts::Csum(_) => csum::print(d, cx, out),
        ActionOpts::Pedit(_) => pedit::print(d, cx, out),
        ActionOpts::Nat(_) => nat::print(d, cx, out),
        ActionOpts::Vlan(_) => vlan::print(d, cx, out),
        ActionOpts::Mpls(_) => mpls::print(d, cx, out),
        ActionOpts::Skbmod(_) => skbmod::print(d, cx, out),
        ActionOpts::Gate(_) => gate::print(d, cx, out),
    }
    if cx.stats {
        out.text("\tAction statistics:");
        out.nl();
        out.open("stats");
        print_stats2(&d.stats, d.rate_est(cx.now), "\t", out);
        out.close();
        out.nl();
    }
    if let Some(c) = &d.cookie {
        let hex: String = c.iter().map(|b| format!("{b:02x}")).collect();
        out.str(To::Any, "cookie", &format!("\tcookie {hex}"), &hex);
        out.nl();
    }
    // TCA_ACT_FLAGS; inside a filter's dump only `no_percpu` of it.
    if d.no_percpu {
        out.bool(To::Any, "no_percpu", "\tno_percpu", true);
    }
    if !bind {
        let skip_hw = d.offload & TCA_CLS_FLAGS_SKIP_HW != 0;
        if skip_hw {
            out.bool(To::Any, "skip_hw", "\tskip_hw", true);
        }
        if d.offload & TCA_CLS_FLAGS_SKIP_SW != 0 {
            out.bool(To::Any, "skip_sw", "\tskip_sw", true);
        }
        // TCA_ACT_IN_HW_COUNT is always dumped; sluice offloads nothing.
        if !skip_hw {
            out.bool(To::Any, "not_in_hw", "\tnot_in_hw", true);
        }
    }
    if d.no_percpu || !bind {
        out.nl();
    }
    if d.used_hw_stats {
        // Filled in by the first `tc actions ls` that listed it.
        out.text("\t");
        out.open_arr("used_hw_stats");
        out.text("used_hw_stats");
        out.str(To::Any, "", " disabled", "disabled");
        out.close();
        out.nl();
    }
}

/// `print_tcstats2_attr` for an action's counters (no queue: zeros there).
pub(crate) fn print_stats2(s: &ActionStats, rate: Option<(u64, u64)>, prefix: &str, out: &mut Out) {
    let st = sluice_core::stats::Stats {
        bytes: s.bytes,
        packets: s.packets,
        drops: s.drops,
        overlimits: s.overlimits,
        ..Default::default()
    };
    crate::tc::print_stats(&st, rate, prefix, out);
}

/// The tail every action printer ends with: the index (after `lead`:
/// `"\t index "` for most kinds, `"\tindex "` for mirred, as iproute2
/// prints them), the reference and bind counts, the ages under `-s`.
pub(crate) fn print_index_tail(d: &ActionDump, cx: &PrintCx, lead: &str, out: &mut Out) {
    let i = d.index as u64;
    out.uint(To::Any, "index", &format!("{lead}{i}"), i);
    let r = d.refcnt;
    out.int(To::Any, "ref", &format!(" ref {r}"), r as i64);
    let b = d.bindcnt;
    out.int(To::Any, "bind", &format!(" bind {b}"), b as i64);
    if cx.stats {
        print_tm(d, cx.now, out);
    }
    out.nl();
}

/// `print_tm`: ages in seconds, each only when its raw tick count is non-zero.
pub(crate) fn print_tm(d: &ActionDump, now: Time, out: &mut Out) {
    let t = d.tm.at(now);
    let hz = sluice_core::act::USER_HZ;
    for (key, label, v) in [
        ("installed", "installed", t.install),
        ("last_used", "used", t.lastuse),
        ("first_used", "firstused", t.firstuse),
        ("expires", "expires", t.expires),
    ] {
        if v != 0 {
            out.uint(To::Any, key, &format!(" {label} {} sec", v / hz), v / hz);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn control_words_and_numbers_as_tc_util_reads_them() {
        assert_eq!(action_a2n("p", false), Some(0)); // "pass" comes before "pipe"
        assert_eq!(action_a2n("shot", false), Some(2));
        assert_eq!(action_a2n("3", false), None);
        assert_eq!(action_a2n("3", true), Some(3));
        let w = words("goto chain 42 rest");
        let mut a = Args::new(&w);
        assert_eq!(
            parse_action_control(&mut a, false),
            Ok(TC_ACT_GOTO_CHAIN | 42)
        );
        assert_eq!(a.peek(), Some("rest"));
        let w = words("pass / goto chain 42");
        let mut a = Args::new(&w);
        let r = parse_action_control_slash(&mut a, true).unwrap();
        assert_eq!(r, (0, Some(TC_ACT_GOTO_CHAIN | 42)));
        // tc-testing police 6aaf: `conform-exceed 0/3` is pass/pipe.
        let w = words("0/3");
        let mut a = Args::new(&w);
        assert_eq!(parse_action_control_slash(&mut a, true), Ok((0, Some(3))));
    }

    #[test]
    fn an_empty_action_list_is_refused_as_m_action_does() {
        // Golden actions.golden, "generic actions command errors".
        let w = words("action");
        let e = parse_actions(&mut Args::new(&w)).unwrap_err();
        assert_eq!(
            e.stderr,
            "bad action empty 1\nparse_action: bad value (0:(null))!\n"
        );
    }
}
