//! pedit syntax (iproute2 tc/m_pedit.c and its field tables p_ip.c,
//! p_ip6.c, p_tcp.c, p_udp.c, p_icmp.c, p_eth.c):
//! `pedit [ex] munge MUNGE [munge MUNGE]... [CONTROL] [index N]`.
//!
//! A MUNGE is raw — `offset OFF u8|u16|u32 [at AT OFFMASK SHIFT] CMD` —
//! or layered: `ip src|dst|tos|dsfield|ihl|ttl|protocol|precedence|nofrag|
//! firstfrag|ce|df|mf CMD` (and, without `ex` only, `ip sport|dport|
//! icmp_type|icmp_code`, read at fixed offsets past a 20-byte header);
//! with `ex` also `ip6 src|dst|flow_lbl|payload_len|nexthdr|hoplimit|
//! traffic_class`, `tcp sport|dport|flags`, `udp sport|dport` and `eth
//! src|dst|type` (`icmp` has no fields). CMD is `set V`, `add V` (`ex`
//! only), `decrement` (TTL and hop limit, `ex` only), `invert`, `clear` or
//! `preserve`, optionally followed by `retain MASK` (the bits of the field
//! the command touches). Every field becomes one or more 32-bit keys as tc
//! packs them: a one- or two-byte field at an unaligned offset is the word
//! around it with a mask keeping the other bytes; a MAC address is two
//! keys, an IPv6 address four. At most 128 keys.
//!
//! Printed as `pedit action pass keys N`, ` \t index I ref R bind B`, then
//! one line per key: `\t key #K  at OFF: val VVVVVVVV mask MMMMMMMM`, the
//! offset prefixed by the header's name for typed keys (`ipv4+8: add ...`).
//! The variable part of an offset (`at`) is not printed, so a printed
//! action does not always read back as the same one.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{get_integer, matches, Args, CmdResult, Fail};
use crate::f::u32::get_prefix;
use crate::out::{Out, To};
use sluice_core::act::pedit::{cmd, htype, PeditKey, PeditKeyEx, PeditOpts};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

const USAGE: &str = "Usage: ... pedit munge [ex] <MUNGE> [CONTROL]
Where: MUNGE := <RAW>|<LAYERED>
\t<RAW>:= <OFFSETC>[ATC]<CMD>
 \t\tOFFSETC:= offset <offval> <u8|u16|u32>
\t\tATC:= at <atval> offmask <maskval> shift <shiftval>
\t\tNOTE: offval is byte offset, must be multiple of 4
\t\tNOTE: maskval is a 32 bit hex number
 \t\tNOTE: shiftval is a shift value
\t\tCMD:= clear | invert | set <setval> | add <addval> | decrement | retain
\t<LAYERED>:= ip <ipdata> | ip6 <ip6data>
 \t\t| udp <udpdata> | tcp <tcpdata> | icmp <icmpdata>
\tCONTROL:= reclassify | pipe | drop | continue | pass |
\t          goto chain <CHAIN_INDEX>
\tNOTE: if 'ex' is set, extended functionality will be supported (kernel >= 4.11)
For Example usage look at the examples directory";

/// Keys tc packs at most (`MAX_OFFS`).
const MAX_OFFS: usize = 128;

/// `PEDIT_ALLOW_DEC`: the field takes `decrement`.
const ALLOW_DEC: bool = true;

/// How a field's value is read (`TU32`, `TIPV4`, `TIPV6`, `TMAC`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    U32,
    Ipv4,
    Ipv6,
    Mac,
}

/// The keys packed so far (`struct m_pedit_sel`).
#[derive(Default)]
struct Sel {
    extended: bool,
    keys: Vec<PeditKey>,
    ex: Vec<PeditKeyEx>,
}

/// The key being built (`struct m_pedit_key`): `val` and `mask` are
/// numbers, the word as read in network order once packed.
#[derive(Clone, Copy, Default)]
struct TKey {
    mask: u32,
    val: u32,
    off: u32,
    at: u32,
    offmask: u32,
    shift: u32,
    htype: u16,
    cmd: u16,
}

impl Sel {
    /// `pack_key`.
    fn pack(&mut self, t: &TKey) -> CmdResult {
        if self.keys.len() >= MAX_OFFS {
            return Err(soft(""));
        }
        if !t.off.is_multiple_of(4) {
            return Err(soft("offsets MUST be in 32 bit boundaries"));
        }
        if self.extended {
            self.ex.push(PeditKeyEx {
                htype: t.htype,
                cmd: t.cmd,
            });
        } else if t.htype != htype::NETWORK || t.cmd != cmd::SET {
            return Err(soft(
                "Munge parameters not supported. Use 'pedit ex munge ...'.",
            ));
        }
        self.keys.push(PeditKey {
            mask: t.mask,
            val: t.val,
            off: t.off,
            at: t.at,
            offmask: t.offmask,
            shift: t.shift,
        });
        Ok(())
    }

    /// `pack_key32`.
    fn pack32(&mut self, retain: u32, t: &mut TKey) -> CmdResult {
        if t.off & 3 != 0 {
            return Err(soft(
                "pack_key32: 32 bit offsets must begin in 32bit boundaries",
            ));
        }
        t.val &= retain;
        t.mask |= !retain;
        self.pack(t)
    }

    /// `pack_key16`: the field's two bytes within their word.
    fn pack16(&mut self, retain: u32, t: &mut TKey) -> CmdResult {
        const KEEP: [u32; 3] = [0x0000_FFFF, 0xFF00_00FF, 0xFFFF_0000];
        if t.val > 0xFFFF || t.mask > 0xFFFF {
            return Err(soft("pack_key16 bad value"));
        }
        let ind = (t.off & 3) as usize;
        if ind == 3 {
            return Err(soft("pack_key16 bad index value 3"));
        }
        let stride = 8 * (2 - ind as u32);
        t.val = (t.val & retain) << stride;
        t.mask = ((t.mask | !retain) << stride) | KEEP[ind];
        t.off &= !3;
        self.pack(t)
    }

    /// `pack_key8`: the field's byte within its word.
    fn pack8(&mut self, retain: u32, t: &mut TKey) -> CmdResult {
        const KEEP: [u32; 4] = [0x00FF_FFFF, 0xFF00_FFFF, 0xFFFF_00FF, 0xFFFF_FF00];
        if t.val > 0xFF || t.mask > 0xFF {
            return Err(soft(format!(
                "pack_key8 bad value (val {:x} mask {:x}",
                t.val, t.mask
            )));
        }
        let ind = (t.off & 3) as usize;
        let stride = 8 * (3 - ind as u32);
        t.val = (t.val & retain) << stride;
        t.mask = ((t.mask | !retain) << stride) | KEEP[ind];
        t.off &= !3;
        self.pack(t)
    }

    /// `pack_mac`: six bytes as a word and a half-word (or the reverse).
    /// Both halves are packed even when the first fails, as tc does.
    fn pack_mac(&mut self, t: &mut TKey, mac: &[u8]) -> CmdResult {
        let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let half = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]) as u32;
        let (first, second) = if t.off & 3 == 0 {
            t.mask = 0;
            t.val = word(&mac[0..4]);
            let first = self.pack32(!0, t);
            t.off += 4;
            t.mask = 0;
            t.val = half(&mac[4..6]);
            (first, self.pack16(!0, t))
        } else if t.off & 1 == 0 {
            t.mask = 0;
            t.val = half(&mac[0..2]);
            let first = self.pack16(!0, t);
            t.off += 4;
            t.mask = 0;
            t.val = word(&mac[2..6]);
            (first, self.pack32(!0, t))
        } else {
            return Err(soft(
                "pack_mac: mac offsets must begin in 32bit or 16bit boundaries",
            ));
        };
        match (first, second) {
            (Ok(()), r) | (r, Ok(())) => r,
            (Err(a), Err(b)) => Err(join(a, b)),
        }
    }

    /// `pack_ipv6`: four words.
    fn pack_ipv6(&mut self, t: &mut TKey, addr: &[u8]) -> CmdResult {
        if t.off & 3 != 0 {
            return Err(soft(
                "pack_ipv6: IPv6 offsets must begin in 32bit boundaries",
            ));
        }
        for w in addr.chunks(4) {
            t.mask = 0;
            t.val = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
            self.pack32(!0, t)?;
            t.off += 4;
        }
        Ok(())
    }
}

/// Two failures' messages, in order.
fn join(a: Fail, b: Fail) -> Fail {
    let both = format!("{}{}", a.stderr, b.stderr);
    soft(both.trim_end_matches('\n'))
}

/// `parse_val` for `set`/`add` and `retain`: the value as the 16 bytes tc
/// keeps it in (`__u32 val[4]` on a little-endian machine).
fn parse_val(w: &str, ty: Ty) -> CmdResult<[u32; 4]> {
    let mut v = [0u32; 4];
    match ty {
        Ty::U32 => v[0] = super::get_u32(w, 0).ok_or_else(|| soft(""))?,
        Ty::Ipv4 => {
            let (b, _) = get_prefix(w, false).ok_or_else(|| soft(""))?;
            v[0] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ty::Ipv6 => {
            let (b, _) = get_prefix(w, true).ok_or_else(|| soft(""))?;
            for (i, c) in b.chunks(4).enumerate() {
                v[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        Ty::Mac => {
            // tc wants all six bytes.
            let (m, n) = super::ll_addr(w).map_err(soft)?;
            if n != 6 {
                return Err(soft(""));
            }
            v[0] = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
            v[1] = u32::from_le_bytes([m[4], m[5], 0, 0]);
        }
    }
    Ok(v)
}

/// `parse_cmd`: the command for a field of `len` bytes, with the current
/// word at the command. Like tc's, it moves the caller's cursor only once
/// it got as far as packing (the word "Bad pedit construct" names).
fn parse_cmd(
    caller: &mut Args,
    sel: &mut Sel,
    t: &mut TKey,
    len: u32,
    ty: Ty,
    mut retain: u32,
    allow_dec: bool,
) -> CmdResult {
    let mut a = caller.clone();
    let a = &mut a;
    let w = a.peek().ok_or_else(|| soft(""))?;
    let o: u32 = match len {
        2 => 0xFFFF,
        4 => 0xFFFF_FFFF,
        _ => 0xFF,
    };
    let (mut v, mut m) = ([0u32; 4], 0u32);
    let non_ext = || soft("Non extended mode. only 'set' command is supported");
    if matches(w, "invert") {
        v[0] = o;
        m = o;
    } else if matches(w, "set") || matches(w, "add") {
        if matches(w, "add") {
            t.cmd = cmd::ADD;
        }
        if !sel.extended && t.cmd != cmd::SET {
            return Err(non_ext());
        }
        v = parse_val(next_arg(a)?, ty)?;
    } else if matches(w, "decrement") {
        if !allow_dec {
            return Err(soft("decrement command is not supported for this field"));
        }
        if !sel.extended {
            return Err(non_ext());
        }
        t.cmd = cmd::ADD;
        v[0] = retain; // decrement by overflow
    } else if matches(w, "preserve") {
        retain = 0;
    } else if !matches(w, "clear") {
        return Err(soft(""));
    }
    a.next();
    if a.peek().is_some_and(|w| matches(w, "retain")) {
        retain = parse_val(next_arg(a)?, Ty::U32)?[0];
        a.next();
    }
    if len > 4 && retain != !0 {
        return Err(soft(
            "retain is not supported for fields longer the 32 bits",
        ));
    }
    *caller = a.clone();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    match ty {
        Ty::Mac => return sel.pack_mac(t, &bytes[..6]),
        Ty::Ipv6 => return sel.pack_ipv6(t, &bytes),
        _ => {}
    }
    t.val = v[0];
    t.mask = m;
    if ty == Ty::Ipv4 {
        t.val = t.val.swap_bytes();
    }
    match len {
        1 => sel.pack8(retain, t),
        2 => sel.pack16(retain, t),
        _ => sel.pack32(retain, t),
    }
}

/// `parse_offset`, with the current word at the offset's value; the
/// caller's cursor moves only once the command was tried.
fn parse_offset(caller: &mut Args, sel: &mut Sel, t: &mut TKey) -> CmdResult {
    let mut a = caller.clone();
    let a = &mut a;
    let w = a.peek().ok_or_else(|| soft(""))?;
    t.off = get_integer(w).ok_or_else(|| soft(""))? as u32;
    a.next();
    let size = a.peek().ok_or_else(|| soft(""))?;
    let (len, retain) = if matches(size, "u32") {
        (4, 0xFFFF_FFFF)
    } else if matches(size, "u16") {
        (2, 0xFFFF)
    } else if matches(size, "u8") {
        (1, 0xFF)
    } else {
        return Err(soft(""));
    };
    if matches(next_arg(a)?, "at") {
        t.at = super::get_u32(next_arg(a)?, 0).ok_or_else(|| soft(""))?;
        t.offmask = super::get_u32(next_arg(a)?, 16).ok_or_else(|| soft(""))?;
        t.shift = super::get_u32(next_arg(a)?, 0).ok_or_else(|| soft(""))?;
        next_arg(a)?;
    }
    let r = parse_cmd(a, sel, t, len, Ty::U32, retain, false);
    *caller = a.clone();
    r
}

/// A layered field: its header type, offset, length, value type, the bits
/// it covers (`retain`) and whether it takes `decrement`.
type Field = (u16, u32, u32, Ty, u32, bool);

/// The fields of `ip` (`parse_ip`), by the word naming them.
fn ip_field(w: &str, extended: bool) -> Option<Field> {
    let h = if extended { htype::IP4 } else { htype::NETWORK };
    let f = |off, len, ty, retain| Some((h, off, len, ty, retain, false));
    match w {
        "src" => f(12, 4, Ty::Ipv4, !0),
        "dst" => f(16, 4, Ty::Ipv4, !0),
        _ if w == "tos" || matches(w, "dsfield") => f(1, 1, Ty::U32, 0xFF),
        "ihl" => f(0, 1, Ty::U32, 0x0F),
        "ttl" => Some((h, 8, 1, Ty::U32, 0xFF, ALLOW_DEC)),
        "protocol" => f(9, 1, Ty::U32, 0xFF),
        _ if matches(w, "precedence") => f(1, 1, Ty::U32, 0xFF),
        "nofrag" => f(6, 1, Ty::U32, 0x3F),
        "firstfrag" => f(6, 1, Ty::U32, 0x1F),
        "ce" => f(6, 1, Ty::U32, 0x80),
        "df" => f(6, 1, Ty::U32, 0x40),
        "mf" => f(6, 1, Ty::U32, 0x20),
        // Fields past the IP header need their own header type with `ex`.
        _ if extended => None,
        "dport" => f(22, 2, Ty::U32, 0xFFFF),
        "sport" => f(20, 2, Ty::U32, 0xFFFF),
        "icmp_type" | "icmp_code" => f(20, 1, Ty::U32, 0xFF),
        _ => None,
    }
}

/// The fields of `ip6`, `tcp`, `udp` and `eth` (`ex` only).
fn ex_field(kind: &str, w: &str) -> Option<Field> {
    let (h, off, len, ty, retain) = match (kind, w) {
        ("ip6", "src") => (htype::IP6, 8, 16, Ty::Ipv6, !0),
        ("ip6", "dst") => (htype::IP6, 24, 16, Ty::Ipv6, !0),
        ("ip6", "flow_lbl") => (htype::IP6, 0, 4, Ty::U32, 0x0007_FFFF),
        ("ip6", "payload_len") => (htype::IP6, 4, 2, Ty::U32, 0xFFFF),
        ("ip6", "nexthdr") => (htype::IP6, 6, 1, Ty::U32, 0xFF),
        ("ip6", "hoplimit") => return Some((htype::IP6, 7, 1, Ty::U32, 0xFF, ALLOW_DEC)),
        ("ip6", "traffic_class") => (htype::IP6, 1, 1, Ty::U32, 0xFF),
        ("tcp", "sport") => (htype::TCP, 0, 2, Ty::U32, 0xFFFF),
        ("tcp", "dport") => (htype::TCP, 2, 2, Ty::U32, 0xFFFF),
        ("tcp", "flags") => (htype::TCP, 13, 1, Ty::U32, 0xFF),
        ("udp", "sport") => (htype::UDP, 0, 2, Ty::U32, 0xFFFF),
        ("udp", "dport") => (htype::UDP, 2, 2, Ty::U32, 0xFFFF),
        ("eth", "type") => (htype::ETH, 12, 2, Ty::U32, 0xFFFF),
        ("eth", "dst") => (htype::ETH, 0, 6, Ty::Mac, !0),
        ("eth", "src") => (htype::ETH, 6, 6, Ty::Mac, !0),
        _ => return None,
    };
    Some((h, off, len, ty, retain, false))
}

/// A layered munge (`p->parse_peopt`), with the current word at the field.
fn parse_layered(a: &mut Args, sel: &mut Sel, kind: &str, t: &mut TKey) -> CmdResult {
    if super::argc(a) < 2 {
        return Err(soft(""));
    }
    let w = a.peek().unwrap_or_default();
    let field = match kind {
        "ip" => ip_field(w, sel.extended),
        "ip6" | "tcp" | "udp" | "eth" if sel.extended => ex_field(kind, w),
        _ => None,
    };
    let Some((h, off, len, ty, retain, dec)) = field else {
        return Err(soft(""));
    };
    t.htype = h;
    t.off = off;
    a.next();
    parse_cmd(a, sel, t, len, ty, retain, dec)?;
    if kind == "ip6" && w == "traffic_class" {
        // The class straddles the version and flow label: shift it by 4 bits.
        let k = sel.keys.last_mut().expect("just packed");
        k.mask = (k.mask << 4) | 0xf;
        k.val <<= 4;
    }
    Ok(())
}

/// `parse_munge`, with the current word after `munge`. A raw munge moves
/// the caller's cursor as far as `parse_offset` got; a layered one only
/// when it succeeds.
fn parse_munge(caller: &mut Args, sel: &mut Sel) -> CmdResult {
    let mut t = TKey::default();
    let mut a = caller.clone();
    let a = &mut a;
    let w = a.peek().ok_or_else(|| soft(""))?;
    if matches(w, "offset") {
        next_arg(a)?;
        let r = parse_offset(a, sel, &mut t);
        *caller = a.clone();
        return r;
    }
    // tc keeps 15 characters of the name.
    let kind: String = w.chars().take(15).collect();
    next_arg(a)?;
    match kind.as_str() {
        "ip" | "ip6" | "tcp" | "udp" | "eth" | "icmp" => parse_layered(a, sel, &kind, &mut t),
        _ => Err(soft(format!(
            "Unknown action  hence option \"{}\" is unparsable",
            a.peek().unwrap_or_default()
        ))),
    }
    .map_err(|f| super::then(f, "bad pedit parsing"))?;
    *caller = a.clone();
    Ok(())
}

/// `parse_pedit`, with the current word at `pedit`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut sel = Sel::default();
    let mut ok = 0;
    while let Some(w) = a.peek() {
        if matches(w, "pedit") {
            let n = next_arg(a)?;
            ok += 1;
            if matches(n, "ex") {
                if ok > 1 {
                    return Err(soft(format!("'ex' must be before first 'munge'\n{USAGE}")));
                }
                sel.extended = true;
                next_arg(a)?;
            }
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else if matches(w, "munge") {
            if ok == 0 {
                return Err(soft(format!("Bad pedit construct ({w})\n{USAGE}")));
            }
            next_arg(a)?;
            if let Err(f) = parse_munge(a, &mut sel) {
                let at = a.peek().unwrap_or("(null)");
                return Err(super::then(
                    f,
                    &format!("Bad pedit construct ({at})\n{USAGE}"),
                ));
            }
            ok += 1;
        } else {
            break;
        }
    }
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_OK)?)?;
    let index = super::parse_index(a, |_| "Pedit: Illegal \"index\"".into())?.unwrap_or(0);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Pedit(PeditOpts {
            action,
            flags: 0,
            keys: sel.keys,
            keys_ex: sel.extended.then_some(sel.ex),
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// Header names as tc prints them (`pedit_htype_str`).
const HTYPE_NAMES: [&str; 6] = ["", "eth", "ipv4", "ipv6", "tcp", "udp"];

/// `print_pedit`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Pedit(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", " pedit ", "pedit");
    print_action_control(out, "action ", o.action, " ");
    let n = o.keys.len() as u64;
    out.uint(To::Any, "nkeys", &format!("keys {n}\n"), n);
    let i = d.index as u64;
    out.uint(To::Any, "index", &format!(" \t index {i}"), i);
    out.int(
        To::Any,
        "ref",
        &format!(" ref {}", d.refcnt),
        d.refcnt as i64,
    );
    out.int(
        To::Any,
        "bind",
        &format!(" bind {}", d.bindcnt),
        d.bindcnt as i64,
    );
    if cx.stats {
        super::print_tm(d, cx.now, out);
    }
    out.open_arr("keys");
    for (i, k) in o.keys.iter().enumerate() {
        let ex = o.keys_ex.as_ref().map_or(PeditKeyEx::default(), |e| e[i]);
        out.open("");
        out.text(&format!("\n\t key #{i}  at "));
        let off = k.off as i32;
        if ex.htype != htype::NETWORK {
            let name = match HTYPE_NAMES.get(ex.htype as usize) {
                Some(n) => n.to_string(),
                None => format!("unknown({})", ex.htype),
            };
            out.str(To::Any, "htype", &name, &name);
            out.int(To::Any, "offset", &format!("{off:+}"), off as i64);
        } else {
            out.str(To::Json, "htype", "", "network");
            out.int(To::Any, "offset", &off.to_string(), off as i64);
        }
        let add = ex.cmd == cmd::ADD;
        out.text(if add { ": add" } else { ": val" });
        out.str(To::Json, "cmd", "", if add { "add" } else { "set" });
        out.str(
            To::Any,
            "val",
            &format!(" {:08x}", k.val),
            &format!("{:x}", k.val),
        );
        out.str(
            To::Any,
            "mask",
            &format!(" mask {:08x}", k.mask),
            &format!("{:x}", k.mask),
        );
        out.close();
    }
    out.close();
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::USAGE;
    use crate::f::testutil::tc;
    use crate::net::Net;

    /// What iproute2 6.1 printed for `tc actions add action pedit ARGS`
    /// (every one exits 255): the parser's lines, the usage when it printed
    /// it, and m_action.c's lines naming `left` words from `pedit` on.
    fn failed(lines: &str, usage: bool, left: usize) -> String {
        let usage = if usage {
            format!("{USAGE}\n")
        } else {
            String::new()
        };
        format!(
            "{lines}\n{usage}bad action parsing\nparse_action: bad value ({left}:pedit)!\nIllegal \"action\"\n"
        )
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        let construct = |msg: &str, at: &str, left| {
            let pre = if msg.is_empty() {
                String::new()
            } else {
                format!("{msg}\n")
            };
            failed(&format!("{pre}Bad pedit construct ({at})"), true, left)
        };
        let layered = |msg: &str, at: &str, left| {
            let pre = if msg.is_empty() {
                String::new()
            } else {
                format!("{msg}\n")
            };
            failed(
                &format!("{pre}bad pedit parsing\nBad pedit construct ({at})"),
                true,
                left,
            )
        };
        for (args, err) in [
            ("munge", incomplete.clone()),
            ("ex", incomplete.clone()),
            ("munge offset 0 u32", incomplete.clone()),
            ("munge offset 0 u32 set", incomplete.clone()),
            ("munge offset 0 u32 at 1 0xf 2", incomplete.clone()),
            ("munge ip", incomplete.clone()),
            (
                "munge offset 2 u32 set 1",
                construct(
                    "pack_key32: 32 bit offsets must begin in 32bit boundaries",
                    "(null)",
                    7,
                ),
            ),
            (
                "munge offset 3 u16 set 1",
                construct("pack_key16 bad index value 3", "(null)", 7),
            ),
            (
                "munge offset 0 u8 set 0x100",
                construct("pack_key8 bad value (val 100 mask 0", "(null)", 7),
            ),
            (
                "munge offset 0 u16 set 0x10000",
                construct("pack_key16 bad value", "(null)", 7),
            ),
            // Where tc's cursor stopped is the word it names.
            ("munge offset x u32 set 1", construct("", "x", 7)),
            ("munge offset 0 u64 set 1", construct("", "0", 7)),
            ("munge offset 0 u32 bogus", construct("", "bogus", 6)),
            ("munge offset 0 u32 set x", construct("", "set", 7)),
            ("munge offset 0 u32 at x", construct("", "0", 7)),
            ("munge ip bogus set 1", layered("", "ip", 6)),
            (
                "munge ip ttl decrement",
                layered(
                    "Non extended mode. only 'set' command is supported",
                    "ip",
                    5,
                ),
            ),
            (
                "munge ip ttl add 1",
                layered(
                    "Non extended mode. only 'set' command is supported",
                    "ip",
                    6,
                ),
            ),
            ("munge tcp sport set 1", layered("", "tcp", 6)),
            (
                "munge foo bar set 1",
                layered(
                    "Unknown action  hence option \"bar\" is unparsable",
                    "foo",
                    6,
                ),
            ),
            ("munge ip ttl", layered("", "ip", 4)),
            (
                "ex munge ip tos decrement",
                layered("decrement command is not supported for this field", "ip", 6),
            ),
            (
                "ex munge eth dst set zz:00:00:00:00:00",
                layered("\"zz\" is invalid lladdr.", "eth", 7),
            ),
            ("ex munge eth dst set 00:11:22:33:44", layered("", "eth", 7)),
            (
                "ex munge eth dst preserve",
                layered(
                    "retain is not supported for fields longer the 32 bits",
                    "eth",
                    6,
                ),
            ),
            ("ex munge ip dport set 1", layered("", "ip", 7)),
            ("ex munge icmp type set 1", layered("", "icmp", 7)),
            ("munge ip src set 300.1.1.1", layered("", "ip", 6)),
            ("munge ip ttl set 1 retain", incomplete.clone()),
            ("munge ip ttl set 1 retain x", layered("", "ip", 8)),
            (
                "munge ip ttl set 1 index x",
                failed("Pedit: Illegal \"index\"", false, 8),
            ),
            (
                "munge ip ttl set 1 pedit ex",
                failed(
                    &format!("'ex' must be before first 'munge'\n{USAGE}"),
                    false,
                    8,
                ),
            ),
            ("help", format!("{USAGE}\n")),
        ] {
            let mut n = Net::new();
            let o = tc(&mut n, &format!("actions add action pedit {args}"));
            assert_eq!((o.code, o.stderr.as_str()), (255, err.as_str()), "{args}");
            assert!(tc(&mut n, "actions ls action pedit").stdout.is_empty());
        }
    }

    /// The pedit part of iproute2 6.1's print of these actions, as its
    /// printer showed kernel-style dumps of them (docs/research/pedit.md §3).
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = Net::new();
        let add = "actions add action pedit ex munge eth src set 11:22:33:44:55:66 \
            munge ip ttl set 0xff munge tcp flags clear munge offset 15 u8 add 40 retain 0xf0 \
            munge udp dport add 1 pipe index 2";
        assert_eq!(tc(&mut n, add).code, 0);
        let o = tc(&mut n, "actions ls action pedit").stdout;
        let want = "\taction order 0:  pedit action pipe keys 6\n \t index 2 ref 1 bind 0\n\
            \t key #0  at eth+4: val 00001122 mask ffff0000\n\
            \t key #1  at eth+8: val 33445566 mask 00000000\n\
            \t key #2  at ipv4+8: val ff000000 mask 00ffffff\n\
            \t key #3  at tcp+12: val 00000000 mask ff00ffff\n\
            \t key #4  at 12: add 00000020 mask ffffff0f\n\
            \t key #5  at udp+0: add 00000001 mask ffff0000\n\tnot_in_hw\n";
        assert!(o.starts_with(&format!("total acts 1\n\n{want}")), "{o}");
        let j = tc(&mut n, "-j actions ls action pedit").stdout;
        let want = r#"{"order":0,"kind":"pedit","control_action":{"type":"pipe"},"nkeys":6,"index":2,"ref":1,"bind":0,"keys":[{"htype":"eth","offset":4,"cmd":"set","val":"1122","mask":"ffff0000"},{"htype":"eth","offset":8,"cmd":"set","val":"33445566","mask":"0"},{"htype":"ipv4","offset":8,"cmd":"set","val":"ff000000","mask":"ffffff"},{"htype":"tcp","offset":12,"cmd":"set","val":"0","mask":"ff00ffff"},{"htype":"network","offset":12,"cmd":"add","val":"20","mask":"ffffff0f"},{"htype":"udp","offset":0,"cmd":"add","val":"1","mask":"ffff0000"}],"not_in_hw":true"#;
        assert!(j.contains(want), "{j}");
        // Raw keys: negative offsets signed, `at` not shown; with -s the
        // statistics after the keys.
        let add = "actions add action pedit munge offset 12 u16 at 12 ffff 1 set 0xaaaa \
            munge offset -14 u16 set 0 munge offset -12 u32 set 0x100 continue index 3";
        assert_eq!(tc(&mut n, add).code, 0);
        let o = tc(&mut n, "-s actions get action pedit index 3").stdout;
        let want = "\taction order 1:  pedit action continue keys 3\n \t index 3 ref 1 bind 0\n\
            \t key #0  at 12: val aaaa0000 mask 0000ffff\n\
            \t key #1  at -16: val 00000000 mask ffff0000\n\
            \t key #2  at -12: val 00000100 mask 00000000\n\
            \tAction statistics:\n\tSent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n";
        assert!(o.contains(want), "{o}");
    }

    #[test]
    fn printed_in_a_filter_as_iproute2_6_1_prints_it() {
        let mut n = crate::f::testutil::ingress();
        let add = "filter add dev DEV parent ffff: protocol ip matchall \
            action pedit ex munge eth src set 11:22:33:44:55:66 munge ip ttl set 0xff pipe \
            action pedit munge ip ttl set 10";
        let o = tc(&mut n, add);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        let want = "\taction order 1:  pedit action pipe keys 3\n \t index 1 ref 1 bind 1\n\
            \t key #0  at eth+4: val 00001122 mask ffff0000\n\
            \t key #1  at eth+8: val 33445566 mask 00000000\n\
            \t key #2  at ipv4+8: val ff000000 mask 00ffffff\n\n\
            \taction order 2:  pedit action pass keys 1\n \t index 2 ref 1 bind 1\n\
            \t key #0  at 8: val 0a000000 mask 00ffffff\n\n";
        assert!(out.ends_with(want), "{out}");
        let j = tc(&mut n, "-j filter show dev DEV parent ffff:").stdout;
        let want = r#""actions":[{"order":1,"kind":"pedit","control_action":{"type":"pipe"},"nkeys":3,"index":1,"ref":1,"bind":1,"keys":[{"htype":"eth","offset":4,"cmd":"set","val":"1122","mask":"ffff0000"},{"htype":"eth","offset":8,"cmd":"set","val":"33445566","mask":"0"},{"htype":"ipv4","offset":8,"cmd":"set","val":"ff000000","mask":"ffffff"}]},{"order":2,"kind":"pedit","control_action":{"type":"pass"},"nkeys":1,"index":2,"ref":1,"bind":1,"keys":[{"htype":"network","offset":8,"cmd":"set","val":"a000000","mask":"ffffff"}]}]"#;
        assert!(j.contains(want), "{j}");
    }
}
