//! u32 syntax (iproute2 tc/f_u32.c): selectors (`match ip src 10.0.0.0/8`,
//! `match u16 0x0050 0xffff at 22`, ...), `classid`/`flowid`, hash tables
//! (`divisor`, `ht`, `link`, `hashkey`, `sample`), `offset`, `order`,
//! `indev`, `skip_hw`/`skip_sw`, `action` and the old `police`.
//!
//! Every selector packs into 32-bit keys at offsets that are multiples of 4
//! (`pack_key`): an 8- or 16-bit match is shifted into place inside its word,
//! and keys at the same offset merge (a contradiction is an error). Keys are
//! kept as the packet's four bytes read big-endian, as they print.
//!
//! Printing follows `u32_print_opt`. The reference kernel of the golden
//! captures is built without `CONFIG_CLS_U32_PERF` and `CONFIG_CLS_U32_MARK`,
//! so it dumps neither counters nor the mark; sluice's dump has both, and the
//! printer leaves them out to print what that kernel prints.

use super::{FPrintCx, Parsed};
use crate::args::{get_integer, matches, Args, CmdResult, Fail};
use crate::m::{self, argc, next_arg, soft, then};
use crate::out::{Out, To, J};
use sluice_core::cls::u32::{
    bucket, htid, node, user_htid, U32Key, U32KnodeDump, U32Mark, U32Opts, U32Sel, TC_U32_EAT,
    TC_U32_OFFSET, TC_U32_TERMINAL, TC_U32_VAROFFSET,
};
use sluice_core::cls::{
    FilterOpts, TCA_CLS_FLAGS_IN_HW, TCA_CLS_FLAGS_NOT_IN_HW, TCA_CLS_FLAGS_SKIP_HW,
    TCA_CLS_FLAGS_SKIP_SW,
};
use sluice_core::handle::Handle;
use std::net::{Ipv4Addr, Ipv6Addr};

const USAGE: &str = "Usage: ... u32 [ match SELECTOR ... ] [ link HTID ] [ classid CLASSID ]
               [ action ACTION_SPEC ] [ offset OFFSET_SPEC ]
               [ ht HTID ] [ hashkey HASHKEY_SPEC ]
               [ sample SAMPLE ] [skip_hw | skip_sw]
or         u32 divisor DIVISOR

Where: SELECTOR := SAMPLE SAMPLE ...
       SAMPLE := { ip | ip6 | udp | tcp | icmp | u{32|16|8} | mark }
                 SAMPLE_ARGS [ divisor DIVISOR ]
       FILTERID := X:Y:Z

NOTE: CLASSID is parsed at hexadecimal input.";

/// A selector parser's outcome: `Ok(true)` parsed, `Ok(false)` its
/// `return -1` (the caller then says what was illegal), `Err` a failure that
/// ends tc at once (an incomplete command line).
type Step = CmdResult<bool>;

/// C `strtoul(s, &end, base)`: the value and the rest; no digits is `(0, s)`.
fn c_strtoul(s: &str, base: u32) -> (u64, &str) {
    sluice_core::units::strtoul(s, base).unwrap_or((0, s))
}

/// `get_u32_handle`: `HT:BKT:NODE` in hex (parts may be empty), or `0x...`.
pub(crate) fn get_u32_handle(s: &str) -> Option<u32> {
    if !s.contains(':') {
        return if s.starts_with("0x") {
            m::get_u32(s, 16)
        } else {
            None
        };
    }
    let no_digits = |from: &str, rest: &str, colon_ok: bool| {
        rest.len() == from.len() && !(colon_ok && from.starts_with(':')) && !from.is_empty()
    };
    let (ht, rest) = c_strtoul(s, 16);
    if no_digits(s, rest, true) || ht >= 0x1000 {
        return None;
    }
    let (mut hash, mut nodeid) = (0, 0);
    if !rest.is_empty() {
        // C skips one byte; inside a multi-byte character the next byte is
        // no digit, ':' or NUL, so C fails there too.
        let s2 = rest.get(1..)?;
        let (h, rest2) = c_strtoul(s2, 16);
        if no_digits(s2, rest2, true) || h >= 0x100 {
            return None;
        }
        hash = h;
        if !rest2.is_empty() {
            let s3 = rest2.get(1..)?;
            let (n, rest3) = c_strtoul(s3, 16);
            if no_digits(s3, rest3, false) || n >= 0x1000 {
                return None;
            }
            nodeid = n;
        }
    }
    Some(((ht as u32) << 20) | ((hash as u32) << 12) | nodeid as u32)
}

/// `sprint_u32_handle`.
fn sprint_handle(h: u32) -> String {
    if h == 0 {
        return "none".into();
    }
    let mut s = String::new();
    if htid(h) != 0 {
        s += &format!("{:x}:", user_htid(h));
    }
    if bucket(h) != 0 {
        s += &format!("{:x}", bucket(h));
    }
    if node(h) != 0 {
        s += &format!(":{:x}", node(h));
    }
    s
}

/// `struct tc_u32_sel` while it is being built.
#[derive(Default)]
struct Sel {
    sel: U32Sel,
}

impl Sel {
    /// `pack_key`: add or merge a key; `false` on a contradiction, a
    /// misaligned offset or too many keys.
    fn pack(&mut self, key: u32, mask: u32, off: i32, offmask: i32) -> bool {
        let key = key & mask;
        if let Some(k) = self
            .sel
            .keys
            .iter_mut()
            .find(|k| k.off == off && k.offmask == offmask)
        {
            if (key ^ k.val) & (mask & k.mask) != 0 {
                return false;
            }
            k.val |= key;
            k.mask |= mask;
            return true;
        }
        if self.sel.keys.len() >= 128 || off % 4 != 0 {
            return false;
        }
        self.sel.keys.push(U32Key {
            val: key,
            mask,
            off,
            offmask,
        });
        true
    }

    /// `pack_key16`.
    fn pack16(&mut self, key: u32, mask: u32, off: i32, offmask: i32) -> bool {
        if key > 0xFFFF || mask > 0xFFFF {
            return false;
        }
        let (key, mask) = if off & 3 == 0 {
            (key << 16, mask << 16)
        } else {
            (key, mask)
        };
        self.pack(key, mask, off & !3, offmask)
    }

    /// `pack_key8`.
    fn pack8(&mut self, key: u32, mask: u32, off: i32, offmask: i32) -> bool {
        if key > 0xFF || mask > 0xFF {
            return false;
        }
        let shift = match off & 3 {
            0 => 24,
            1 => 16,
            2 => 8,
            _ => 0,
        };
        self.pack(key << shift, mask << shift, off & !3, offmask)
    }
}

/// `parse_at`: `at [nexthdr+]N`, the current word after `at`.
fn parse_at(a: &mut Args, off: &mut i32, offmask: &mut i32) -> Step {
    let Some(w) = a.peek() else { return Ok(false) };
    let p = if w.len() > "nexthdr+".len() && w.starts_with("nexthdr+") {
        *offmask = -1;
        &w["nexthdr+".len()..]
    } else if matches(w, "nexthdr+") {
        *offmask = -1;
        next_arg(a)?
    } else {
        w
    };
    let Some(v) = get_integer(p) else {
        return Ok(false);
    };
    *off = v;
    a.next();
    Ok(true)
}

/// `KEY MASK [at OFF]`, the common start of `parse_u32/u16/u8`.
fn parse_key_mask(
    a: &mut Args,
    off: &mut i32,
    offmask: &mut i32,
    max: u32,
) -> CmdResult<Option<(u32, u32)>> {
    if argc(a) < 2 {
        return Ok(None);
    }
    let Some(key) = m::get_u32(a.peek().unwrap_or(""), 0) else {
        return Ok(None);
    };
    a.next();
    let Some(mask) = m::get_u32(a.peek().unwrap_or(""), 16) else {
        return Ok(None);
    };
    a.next();
    if max != u32::MAX && (key > max || mask > max) {
        return Ok(None);
    }
    if a.peek() == Some("at") {
        next_arg(a)?;
        if !parse_at(a, off, offmask)? {
            return Ok(None);
        }
    }
    Ok(Some((key, mask)))
}

fn parse_u32(a: &mut Args, s: &mut Sel, mut off: i32, mut offmask: i32) -> Step {
    Ok(match parse_key_mask(a, &mut off, &mut offmask, u32::MAX)? {
        Some((k, m)) => s.pack(k, m, off, offmask),
        None => false,
    })
}

fn parse_u16(a: &mut Args, s: &mut Sel, mut off: i32, mut offmask: i32) -> Step {
    Ok(match parse_key_mask(a, &mut off, &mut offmask, u32::MAX)? {
        Some((k, m)) => s.pack16(k, m, off, offmask),
        None => false,
    })
}

fn parse_u8(a: &mut Args, s: &mut Sel, mut off: i32, mut offmask: i32) -> Step {
    Ok(match parse_key_mask(a, &mut off, &mut offmask, 0xFF)? {
        Some((k, m)) => s.pack8(k, m, off, offmask),
        None => false,
    })
}

/// iproute2 `get_addr_ipv4`: up to four parts, each `strtoul(.., 0)`.
fn get_addr_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut ap = [0u8; 4];
    let mut cp = s;
    for (i, b) in ap.iter_mut().enumerate() {
        let (n, end) = sluice_core::units::strtoul(cp, 0)?;
        if n > 255 {
            return None;
        }
        *b = n as u8;
        if end.is_empty() {
            break;
        }
        if i == 3 || !end.starts_with('.') {
            return None;
        }
        cp = &end[1..];
    }
    Some(ap)
}

/// `get_prefix_1`: `ADDR[/PLEN]` (a mask in dotted form too); `any`/`all`
/// are `/0`. The address as bytes and the prefix length.
pub(crate) fn get_prefix(s: &str, v6: bool) -> Option<(Vec<u8>, u32)> {
    let (addr, plen) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let bits = if v6 { 128 } else { 32 };
    let bytes: Vec<u8> = match addr {
        "any" | "all" => {
            return plen.is_none().then(|| (vec![0; bits as usize / 8], 0));
        }
        // `default` takes no prefix length either (its bit length is "unset").
        "default" => return plen.is_none().then(|| (vec![0; bits as usize / 8], 0)),
        _ if v6 => addr.parse::<Ipv6Addr>().ok()?.octets().to_vec(),
        _ => get_addr_ipv4(addr)?.to_vec(),
    };
    let Some(p) = plen else {
        return Some((bytes, bits));
    };
    let n = match m::get_u32(p, 0) {
        Some(n) => n,
        None => {
            let mask = u32::from_be_bytes(get_addr_ipv4(p)?);
            mask2bits(mask)?
        }
    };
    (n <= bits).then_some((bytes, n))
}

/// `mask2bits`: the prefix length of a contiguous mask.
fn mask2bits(mask: u32) -> Option<u32> {
    let host = !mask;
    if host & host.wrapping_add(1) != 0 {
        return None;
    }
    Some(mask.leading_ones())
}

fn word_of(bytes: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]])
}

fn parse_ip_addr(a: &mut Args, s: &mut Sel, mut off: i32) -> Step {
    let mut offmask = 0;
    let Some((bytes, bitlen)) = a.peek().and_then(|w| get_prefix(w, false)) else {
        return Ok(false);
    };
    a.next();
    if a.peek() == Some("at") {
        next_arg(a)?;
        if !parse_at(a, &mut off, &mut offmask)? {
            return Ok(false);
        }
    }
    let mask = if bitlen == 0 {
        0
    } else {
        u32::MAX << (32 - bitlen)
    };
    Ok(s.pack(word_of(&bytes, 0), mask, off, offmask))
}

fn parse_ip6_addr(a: &mut Args, s: &mut Sel, mut off: i32) -> Step {
    let mut offmask = 0;
    let Some((bytes, plen)) = a.peek().and_then(|w| get_prefix(w, true)) else {
        return Ok(false);
    };
    a.next();
    if a.peek() == Some("at") {
        next_arg(a)?;
        if !parse_at(a, &mut off, &mut offmask)? {
            return Ok(false);
        }
    }
    let mut i = 0;
    while i < plen {
        let w = i as usize / 32;
        let mask = if i + 31 < plen {
            u32::MAX
        } else {
            u32::MAX << (32 - (plen - i))
        };
        if !s.pack(word_of(&bytes, 4 * w), mask, off + 4 * w as i32, offmask) {
            return Ok(false);
        }
        i += 32;
    }
    Ok(true)
}

/// `parse_ip6_class`: `priority KEY MASK`, the traffic class at bit 20.
fn parse_ip6_class(a: &mut Args, s: &mut Sel) -> Step {
    Ok(match parse_key_mask_no_at(a)? {
        Some((k, m)) if k <= 0xFF && m <= 0xFF => s.pack(k << 20, m << 20, 0, 0),
        _ => false,
    })
}

/// `KEY MASK` without `at` (ip6 priority).
fn parse_key_mask_no_at(a: &mut Args) -> CmdResult<Option<(u32, u32)>> {
    if argc(a) < 2 {
        return Ok(None);
    }
    let Some(key) = m::get_u32(a.peek().unwrap_or(""), 0) else {
        return Ok(None);
    };
    a.next();
    let Some(mask) = m::get_u32(a.peek().unwrap_or(""), 16) else {
        return Ok(None);
    };
    a.next();
    Ok(Some((key, mask)))
}

/// `sscanf("%hhx:%hhx:%hhx:%hhx:%hhx:%hhx")`.
fn scan_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut rest = s;
    for (i, b) in out.iter_mut().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(':')?;
        }
        let (v, r) = sluice_core::units::strtoul(rest, 16)?;
        *b = v as u8;
        rest = r;
    }
    Some(out)
}

fn parse_ether_addr(a: &mut Args, s: &mut Sel, mut off: i32) -> CmdResult<Result<bool, String>> {
    let mut offmask = 0;
    let Some(w) = a.peek() else {
        return Ok(Ok(false));
    };
    let Some(mac) = scan_mac(w) else {
        return Ok(Err(format!(
            "parse_ether_addr: improperly formed address '{w}'"
        )));
    };
    a.next();
    if a.peek() == Some("at") {
        next_arg(a)?;
        if !parse_at(a, &mut off, &mut offmask)? {
            return Ok(Ok(false));
        }
    }
    for (i, b) in mac.iter().enumerate() {
        if !s.pack8(*b as u32, 0xFF, off + i as i32, offmask) {
            return Ok(Ok(false));
        }
    }
    Ok(Ok(true))
}

/// `parse_ip`.
fn parse_ip(a: &mut Args, s: &mut Sel) -> Step {
    if argc(a) < 2 {
        return Ok(false);
    }
    let w = a.peek().unwrap_or("");
    match w {
        "src" => {
            next_arg(a)?;
            parse_ip_addr(a, s, 12)
        }
        "dst" => {
            next_arg(a)?;
            parse_ip_addr(a, s, 16)
        }
        w if w == "tos" || matches(w, "dsfield") || matches(w, "precedence") => {
            next_arg(a)?;
            parse_u8(a, s, 1, 0)
        }
        "ihl" => {
            next_arg(a)?;
            parse_u8(a, s, 0, 0)
        }
        "protocol" => {
            next_arg(a)?;
            parse_u8(a, s, 9, 0)
        }
        "nofrag" | "firstfrag" | "df" | "mf" => {
            a.next();
            let (key, mask) = match w {
                "nofrag" => (0, 0x3FFF),
                "firstfrag" => (0x2000, 0x3FFF),
                "df" => (0x4000, 0x4000),
                _ => (0x2000, 0x2000),
            };
            Ok(s.pack16(key, mask, 6, 0))
        }
        "dport" => {
            next_arg(a)?;
            parse_u16(a, s, 22, 0)
        }
        "sport" => {
            next_arg(a)?;
            parse_u16(a, s, 20, 0)
        }
        "icmp_type" => {
            next_arg(a)?;
            parse_u8(a, s, 20, 0)
        }
        "icmp_code" => {
            next_arg(a)?;
            parse_u8(a, s, 21, 0)
        }
        _ => Ok(false),
    }
}

/// `parse_ip6`.
fn parse_ip6(a: &mut Args, s: &mut Sel) -> Step {
    if argc(a) < 2 {
        return Ok(false);
    }
    let w = a.peek().unwrap_or("");
    let known = [
        "src",
        "dst",
        "priority",
        "protocol",
        "flowlabel",
        "dport",
        "sport",
        "icmp_type",
        "icmp_code",
    ];
    if !known.contains(&w) {
        return Ok(false);
    }
    next_arg(a)?;
    match w {
        "src" => parse_ip6_addr(a, s, 8),
        "dst" => parse_ip6_addr(a, s, 24),
        "priority" => parse_ip6_class(a, s),
        "protocol" => parse_u8(a, s, 6, 0),
        "flowlabel" => parse_u32(a, s, 0, 0),
        "dport" => parse_u16(a, s, 42, 0),
        "sport" => parse_u16(a, s, 40, 0),
        "icmp_type" => parse_u8(a, s, 40, 0),
        _ => parse_u8(a, s, 41, 1),
    }
}

/// `parse_udp` (also tcp): ports relative to the next header.
fn parse_l4(a: &mut Args, s: &mut Sel, names: [&str; 2], u8s: bool) -> Step {
    if argc(a) < 2 {
        return Ok(false);
    }
    let w = a.peek().unwrap_or("");
    let off = if w == names[0] {
        0
    } else if w == names[1] {
        if u8s {
            1
        } else {
            2
        }
    } else {
        return Ok(false);
    };
    next_arg(a)?;
    if u8s {
        parse_u8(a, s, off, -1)
    } else {
        parse_u16(a, s, off, -1)
    }
}

/// `parse_mark`: `mark VAL MASK`.
fn parse_mark(a: &mut Args, mark: &mut Option<U32Mark>) -> CmdResult<Result<bool, String>> {
    if argc(a) <= 1 {
        return Err(Fail::new(255, "Error: argument \"mark\" is required"));
    }
    let Some(val) = m::get_u32(a.peek().unwrap_or(""), 0) else {
        return Ok(Err("Illegal \"mark\" value".into()));
    };
    let w = next_arg(a)?;
    let Some(mask) = m::get_u32(w, 0) else {
        return Ok(Err("Illegal \"mark\" mask".into()));
    };
    next_arg(a)?;
    if val & mask != val {
        return Ok(Err("Illegal \"mark\" (impossible combination)".into()));
    }
    *mark = Some(U32Mark { val, mask });
    Ok(Ok(true))
}

/// `parse_selector`; a refusal carries what the parser printed.
fn parse_selector(
    a: &mut Args,
    s: &mut Sel,
    mark: &mut Option<U32Mark>,
) -> CmdResult<Result<(), String>> {
    let Some(w) = a.peek() else {
        return Ok(Err(String::new()));
    };
    let ok = |b: bool| if b { Ok(()) } else { Err(String::new()) };
    let r = if matches(w, "u32") {
        next_arg(a)?;
        ok(parse_u32(a, s, 0, 0)?)
    } else if matches(w, "u16") {
        next_arg(a)?;
        ok(parse_u16(a, s, 0, 0)?)
    } else if matches(w, "u8") {
        next_arg(a)?;
        ok(parse_u8(a, s, 0, 0)?)
    } else if matches(w, "ip") {
        next_arg(a)?;
        ok(parse_ip(a, s)?)
    } else if matches(w, "ip6") {
        next_arg(a)?;
        ok(parse_ip6(a, s)?)
    } else if matches(w, "udp") || matches(w, "tcp") {
        next_arg(a)?;
        ok(parse_l4(a, s, ["src", "dst"], false)?)
    } else if matches(w, "icmp") {
        next_arg(a)?;
        ok(parse_l4(a, s, ["type", "code"], true)?)
    } else if matches(w, "mark") {
        next_arg(a)?;
        parse_mark(a, mark)?.map(|_| ())
    } else if matches(w, "ether") {
        next_arg(a)?;
        if argc(a) < 2 {
            Err(String::new())
        } else {
            match a.peek().unwrap_or("") {
                "src" => {
                    next_arg(a)?;
                    parse_ether_addr(a, s, -8)?.and_then(ok)
                }
                "dst" => {
                    next_arg(a)?;
                    parse_ether_addr(a, s, -14)?.and_then(ok)
                }
                x => Err(format!("Unknown match: ether {x}")),
            }
        }
    } else {
        Err(String::new())
    };
    Ok(r)
}

/// `parse_offset`: `plus N`, `at N`, `mask M`, `shift S`, `eat`.
fn parse_offset(a: &mut Args, s: &mut Sel) -> CmdResult<Result<(), String>> {
    while let Some(w) = a.peek() {
        if matches(w, "plus") {
            let v = next_arg(a)?;
            let Some(off) = get_integer(v) else {
                return Ok(Err(String::new()));
            };
            s.sel.off = off as u16;
            s.sel.flags |= TC_U32_OFFSET;
        } else if matches(w, "at") {
            let v = next_arg(a)?;
            let Some(off) = get_integer(v) else {
                return Ok(Err(String::new()));
            };
            s.sel.offoff = off as i16;
            if off % 2 != 0 {
                return Ok(Err("offset \"at\" must be even".into()));
            }
            s.sel.flags |= TC_U32_VAROFFSET;
        } else if matches(w, "mask") {
            let v = next_arg(a)?;
            let Some(mask) = m::get_u16(v, 16) else {
                return Ok(Err(String::new()));
            };
            s.sel.offmask = mask;
            s.sel.flags |= TC_U32_VAROFFSET;
        } else if matches(w, "shift") {
            let v = next_arg(a)?;
            let Some(shift) = get_integer(v) else {
                return Ok(Err(String::new()));
            };
            s.sel.offshift = shift as u8;
            s.sel.flags |= TC_U32_VAROFFSET;
        } else if matches(w, "eat") {
            s.sel.flags |= TC_U32_EAT;
        } else {
            break;
        }
        a.next();
    }
    Ok(Ok(()))
}

/// `parse_hashkey`: `mask M`, `at N`.
fn parse_hashkey(a: &mut Args, s: &mut Sel) -> CmdResult<bool> {
    while let Some(w) = a.peek() {
        if matches(w, "mask") {
            let v = next_arg(a)?;
            let Some(mask) = m::get_u32(v, 16) else {
                return Ok(false);
            };
            s.sel.hmask = mask;
        } else if matches(w, "at") {
            let v = next_arg(a)?;
            match get_integer(v) {
                Some(n) if n % 4 == 0 => s.sel.hoff = n as i16,
                _ => return Ok(false),
            }
        } else {
            break;
        }
        a.next();
    }
    Ok(true)
}

fn illegal(printed: String, what: &str) -> Fail {
    let mut msg = printed;
    if !msg.is_empty() {
        msg.push('\n');
    }
    msg.push_str(&format!("Illegal \"{what}\""));
    soft(msg)
}

/// `get_unsigned` for a divisor: a power of two, 1..=256.
fn divisor(v: &str) -> Option<u32> {
    m::get_u32(v, 0).filter(|&d| d != 0 && d <= 0x100 && (d - 1) & d == 0)
}

/// `u32_parse_opt`.
pub(super) fn parse(handle: Option<&str>, a: &mut Args) -> CmdResult<Parsed> {
    let mut tcm_handle = match handle {
        Some(h) => get_u32_handle(h).ok_or_else(|| soft("Illegal filter ID"))?,
        None => 0,
    };
    if a.is_empty() {
        return Ok(Parsed {
            handle: tcm_handle,
            opts: None,
        });
    }
    let mut o = U32Opts::default();
    let mut s = Sel::default();
    let (mut sel_ok, mut terminal_ok, mut sample_ok) = (false, false, false);
    let (mut htid_v, mut order, mut flags) = (0u32, 0u32, 0u32);
    while let Some(w) = a.peek() {
        if matches(w, "match") {
            next_arg(a)?;
            if let Err(p) = parse_selector(a, &mut s, &mut o.mark)? {
                return Err(illegal(p, "match"));
            }
            sel_ok = true;
            continue;
        } else if matches(w, "offset") {
            next_arg(a)?;
            if let Err(p) = parse_offset(a, &mut s)? {
                return Err(illegal(p, "offset"));
            }
            continue;
        } else if matches(w, "hashkey") {
            next_arg(a)?;
            if !parse_hashkey(a, &mut s)? {
                return Err(illegal(String::new(), "hashkey"));
            }
            continue;
        } else if matches(w, "classid") || w == "flowid" {
            let v = next_arg(a)?;
            let c = Handle::parse_classid(v).ok_or_else(|| soft("Illegal \"classid\""))?;
            o.classid = Some(c);
            s.sel.flags |= TC_U32_TERMINAL;
        } else if matches(w, "divisor") {
            let v = next_arg(a)?;
            o.divisor = Some(divisor(v).ok_or_else(|| soft("Illegal \"divisor\""))?);
        } else if matches(w, "order") {
            let v = next_arg(a)?;
            order = m::get_u32(v, 0).ok_or_else(|| soft("Illegal \"order\""))?;
        } else if w == "link" {
            let v = next_arg(a)?;
            let l = get_u32_handle(v).ok_or_else(|| soft("Illegal \"link\""))?;
            if l != 0 && node(l) != 0 {
                return Err(soft("\"link\" must be a hash table."));
            }
            o.link = Some(l);
        } else if w == "ht" {
            let v = next_arg(a)?;
            let ht = get_u32_handle(v).ok_or_else(|| soft("Illegal \"ht\""))?;
            if handle.is_some() && node(ht) != 0 {
                return Err(soft("\"ht\" must be a hash table."));
            }
            htid_v = if sample_ok {
                (htid_v & 0xFF000) | (ht & 0xFFF0_0000)
            } else {
                ht & 0xFFFF_F000
            };
        } else if w == "sample" {
            htid_v = parse_sample(a, htid_v)?;
            sample_ok = true;
            continue;
        } else if w == "indev" {
            a.next();
            let v = a.peek().ok_or_else(|| soft("Illegal indev"))?;
            o.indev = Some(v.chars().take(16).collect());
        } else if matches(w, "action") {
            next_arg(a)?;
            o.actions = m::parse_actions(a).map_err(|f| then(f, "Illegal \"action\""))?;
            terminal_ok = true;
            continue;
        } else if matches(w, "police") {
            next_arg(a)?;
            o.police = Some(m::police::parse_old(a).map_err(|f| then(f, "Illegal \"police\""))?);
            terminal_ok = true;
            continue;
        } else if w == "skip_hw" {
            flags |= TCA_CLS_FLAGS_SKIP_HW;
        } else if w == "skip_sw" {
            flags |= TCA_CLS_FLAGS_SKIP_SW;
        } else if w == "help" {
            return Err(soft(USAGE));
        } else {
            return Err(soft(format!("What is \"{w}\"?\n{USAGE}")));
        }
        a.next();
    }
    if terminal_ok {
        s.sel.flags |= TC_U32_TERMINAL;
    }
    if order != 0 {
        if node(tcm_handle) != 0 && order != node(tcm_handle) {
            return Err(soft("\"order\" contradicts \"handle\""));
        }
        tcm_handle |= order;
    }
    if htid_v != 0 {
        o.hash = Some(htid_v);
    }
    if sel_ok {
        o.sel = Some(s.sel);
    }
    if flags != 0 {
        if flags == TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW {
            return Err(soft("skip_hw and skip_sw are mutually exclusive"));
        }
        o.flags = Some(flags);
    }
    Ok(Parsed {
        handle: tcm_handle,
        opts: Some(FilterOpts::U32(o)),
    })
}

/// `sample SELECTOR [divisor N]`: the bucket a key hashes to.
fn parse_sample(a: &mut Args, htid_v: u32) -> CmdResult<u32> {
    next_arg(a)?;
    let mut s2 = Sel::default();
    let mut mark = None;
    if let Err(p) = parse_selector(a, &mut s2, &mut mark)? {
        return Err(illegal(p, "sample"));
    }
    if s2.sel.keys.len() != 1 {
        return Err(soft("\"sample\" must contain exactly ONE key."));
    }
    let mut div = 0x100;
    if a.peek() == Some("divisor") {
        let v = next_arg(a)?;
        div = divisor(v).ok_or_else(|| soft("Illegal sample \"divisor\""))?;
        next_arg(a)?;
    }
    let k = s2.sel.keys[0];
    let fshift = if k.mask != 0 {
        k.mask.trailing_zeros()
    } else {
        0
    };
    let hash = (k.val & k.mask) >> fshift;
    Ok(((hash % div) << 12) | (htid_v & 0xFFF0_0000))
}

/// A table element: `fh 800: ht divisor 1 `.
pub(super) fn print_table(handle: u32, divisor: u32, out: &mut Out) {
    let fh = sprint_handle(handle);
    out.str(To::Any, "fh", &format!("fh {fh} "), &fh);
    out.int(
        To::Any,
        "ht_divisor",
        &format!("ht divisor {divisor} "),
        divisor as i64,
    );
}

/// `u32_print_opt` for a key node.
pub(super) fn print(k: &U32KnodeDump, handle: u32, cx: &FPrintCx, out: &mut Out) {
    let fh = sprint_handle(handle);
    out.str(To::Any, "fh", &format!("fh {fh} "), &fh);
    if node(handle) != 0 {
        let n = node(handle) as i64;
        out.int(To::Any, "order", &format!("order {n} "), n);
    }
    let (ht, bkt) = (user_htid(k.hash), bucket(k.hash));
    out.str(
        To::Any,
        "key_ht",
        &format!("key ht {ht:x} "),
        &format!("{ht:x}"),
    );
    out.str(
        To::Any,
        "bkt",
        &format!("bkt {bkt:x} "),
        &format!("{bkt:x}"),
    );
    let terminal = k.sel.flags & TC_U32_TERMINAL != 0;
    if let Some(c) = k.classid {
        // iproute2 6.1 inverted this test when it added JSON output: the
        // star marks a terminal key node (later releases mark the others).
        if terminal {
            out.text("*");
        }
        let c = c.to_string();
        out.str(To::Any, "flowid", &format!("flowid {c} "), &c);
    } else if terminal {
        out.text("terminal flowid ");
    }
    if let Some(l) = k.link {
        let l = sprint_handle(l);
        out.str(To::Any, "link", &format!("link {l} "), &l);
    }
    print_flags(k.flags, out);
    for key in &k.sel.keys {
        show_key(key, cx, out);
    }
    print_offsets(&k.sel, out);
    if let Some(p) = &k.police {
        out.nl();
        m::police::print(p, &cx.act, out);
    }
    if let Some(dev) = &k.indev {
        out.nl();
        out.str(To::Any, "input_dev", &format!("  input dev {dev}"), dev);
        out.nl();
    }
    if !k.actions.is_empty() {
        m::print_actions(&k.actions, true, &cx.act, out);
    }
}

fn print_flags(flags: u32, out: &mut Out) {
    if flags & TCA_CLS_FLAGS_SKIP_HW != 0 {
        out.bool(To::Any, "skip_hw", "skip_hw ", true);
    }
    if flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
        out.bool(To::Any, "skip_sw", "skip_sw ", true);
    }
    if flags & TCA_CLS_FLAGS_IN_HW != 0 {
        out.bool(To::Any, "in_hw", "in_hw ", true);
    } else if flags & TCA_CLS_FLAGS_NOT_IN_HW != 0 {
        out.bool(To::Any, "not_in_hw", "not_in_hw ", true);
    }
}

/// The `offset` and `hashkey` lines of a selector.
fn print_offsets(sel: &U32Sel, out: &mut Out) {
    if sel.flags & (TC_U32_VAROFFSET | TC_U32_OFFSET) != 0 {
        out.nl();
        // iproute2 6.1 prints these words with PRINT_ANY and no key: in
        // JSON they are bare strings inside the object.
        out.item(To::Any, "", "    offset ", J::Str("    offset ".into()));
        if sel.flags & TC_U32_VAROFFSET != 0 {
            let m = sel.offmask;
            out.str(
                To::Any,
                "offset_mask",
                &format!("{m:04x}"),
                &format!("{m:x}"),
            );
            let sh = sel.offshift as i64;
            out.int(To::Any, "offset_shift", &format!(">>{sh} "), sh);
            let at = sel.offoff as i64;
            out.int(To::Any, "offset_off", &format!("at {at} "), at);
        }
        if sel.off != 0 {
            let p = sel.off as i16 as i64;
            out.int(To::Any, "plus", &format!("plus {p} "), p);
        }
    }
    if sel.flags & TC_U32_EAT != 0 {
        out.item(To::Any, "", " eat ", J::Str(" eat ".into()));
    }
    if sel.hmask != 0 {
        out.nl();
        let hm = sel.hmask;
        out.str(
            To::Any,
            "hash_mask",
            &format!("    hash mask {hm:08x} "),
            &format!("{hm:x}"),
        );
        let at = sel.hoff as i64;
        out.int(To::Any, "hash_off", &format!("at {at} "), at);
    }
}

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;

/// `show_keys`: raw, or decoded by protocol with `-p`.
fn show_key(k: &U32Key, cx: &FPrintCx, out: &mut Out) {
    out.open("match");
    match (cx.pretty, cx.protocol) {
        (true, ETH_P_IP) => print_ip_key(k, false, out),
        (true, ETH_P_IPV6) => print_ip_key(k, true, out),
        _ => print_raw(k, out),
    }
    out.close();
}

fn print_raw(k: &U32Key, out: &mut Out) {
    out.nl();
    out.str(
        To::Any,
        "value",
        &format!("  match {:08x}", k.val),
        &format!("{:x}", k.val),
    );
    out.str(
        To::Any,
        "mask",
        &format!("/{:08x} ", k.mask),
        &format!("{:x}", k.mask),
    );
    let om = if k.offmask != 0 { "nexthdr+" } else { "" };
    out.str(To::Any, "offmask", &format!("at {om}"), om);
    out.int(To::Any, "off", &k.off.to_string(), k.off as i64);
}

/// C's `%#x`.
fn hash_x(v: u32) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `print_ipv4` and `print_ipv6` (the latter a copy that labels its keys
/// "IP" too and swaps the port cases, as iproute2 does).
fn print_ip_key(k: &U32Key, v6: bool, out: &mut Out) {
    let (val, mask) = (k.val, k.mask);
    match k.off {
        0 => match mask {
            0x0f00_0000 => {
                out.nl();
                let v = (val >> 24) as u64;
                out.uint(To::Any, "ip_ihl", &format!("  match IP ihl {v}"), v);
            }
            0x00ff_0000 => {
                out.nl();
                let v = hash_x(val >> 16);
                out.str(
                    To::Any,
                    "ip_dsfield",
                    &format!("  match IP dsfield {v}"),
                    &v,
                );
            }
            _ => {}
        },
        8 if mask == 0x00ff_0000 => {
            out.nl();
            let v = (val >> 16) as i64;
            out.int(
                To::Any,
                "ip_protocol",
                &format!("  match IP protocol {v}"),
                v,
            );
        }
        12 | 16 => {
            if let Some(bits) = mask2bits(mask) {
                out.nl();
                let (label, key) = if k.off == 12 {
                    ("src", "src")
                } else {
                    ("dst", "dst")
                };
                out.text(&format!("  match IP {label} "));
                out.open(key);
                let addr = Ipv4Addr::from(val).to_string();
                out.str(To::Any, "address", &addr, &addr);
                out.int(To::Any, "prefixlen", &format!("/{bits}"), bits as i64);
                out.close();
            }
        }
        20 => {
            let (lo, hi) = ((val & 0xffff) as u64, (val >> 16) as u64);
            match (mask, v6) {
                (0x0000_ffff, false) => {
                    out.uint(To::Any, "dport", &format!("match dport {lo}"), lo)
                }
                (0xffff_0000, false) => {
                    out.nl();
                    out.uint(To::Any, "sport", &format!("  match sport {hi}"), hi);
                }
                (0xffff_ffff, false) => {
                    out.nl();
                    out.uint(To::Any, "dport", &format!("  match dport {lo}, "), lo);
                    out.uint(To::Any, "sport", &format!("match sport {hi}"), hi);
                }
                (0x0000_ffff, true) => {
                    out.nl();
                    out.uint(To::Any, "sport", &format!("  match sport {lo}"), lo);
                }
                (0xffff_0000, true) => out.uint(To::Any, "dport", &format!("match dport {hi}"), hi),
                (0xffff_ffff, true) => {
                    out.nl();
                    out.uint(To::Any, "sport", &format!("  match sport {lo}, "), lo);
                    out.uint(To::Any, "dport", &format!("match dport {hi}"), hi);
                }
                _ => {}
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_handle_with_a_multibyte_character_is_refused_without_panic() {
        // Found by the tc_parser fuzz target.
        assert_eq!(get_u32_handle("4\u{c4}:"), None);
        assert_eq!(get_u32_handle("8\u{ff}00::5"), None);
    }

    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn sel_of(cmd: &str) -> U32Opts {
        let w = words(cmd);
        let p = parse(None, &mut Args::new(&w)).unwrap();
        match p.opts {
            Some(FilterOpts::U32(o)) => o,
            o => panic!("{o:?}"),
        }
    }

    fn keys(o: &U32Opts) -> Vec<(u32, u32, i32)> {
        o.sel
            .as_ref()
            .unwrap()
            .keys
            .iter()
            .map(|k| (k.val, k.mask, k.off))
            .collect()
    }

    #[test]
    fn the_conditioner_selectors_pack_as_the_kernel_shows_them() {
        // tests/golden/conditioner.golden: `match 00060000/00ff0000 at 8`,
        // `05000000/0f00ffc0 at 0`, `00100000/00ff0000 at 32`.
        let o = sel_of(
            "match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 \
             match u8 0x10 0xff at 33 flowid 1:10",
        );
        assert_eq!(
            keys(&o),
            vec![
                (0x60000, 0xff0000, 8),
                (0x05000000, 0x0f00ffc0, 0),
                (0x100000, 0xff0000, 32)
            ]
        );
        assert_eq!(o.classid, Some(Handle::new(1, 0x10)));
        assert_eq!(o.sel.unwrap().flags, TC_U32_TERMINAL);
    }

    #[test]
    fn addresses_ports_and_ether_as_f_u32_packs_them() {
        // u32.golden: `match ip src 10.0.0` is 0a000000/ffffffff at 12.
        assert_eq!(
            keys(&sel_of("match ip src 10.0.0")),
            vec![(0x0a000000, u32::MAX, 12)]
        );
        // `match ether src 02:00:00:00:00:01`.
        assert_eq!(
            keys(&sel_of("match ether src 02:00:00:00:00:01")),
            vec![(0x02000000, u32::MAX, -8), (0x00010000, 0xffff0000, -4)]
        );
        // `match ip6 dst ::1/128`: four keys at 24..36.
        assert_eq!(keys(&sel_of("match ip6 dst ::1/128")).len(), 4);
        // `match u16 1 1 at 1` lands unshifted at 0.
        assert_eq!(keys(&sel_of("match u16 1 1 at 1")), vec![(1, 1, 0)]);
        assert_eq!(
            keys(&sel_of("match tcp dst 443 0xffff"))[0],
            (443, 0xffff, 0)
        );
    }

    #[test]
    fn handles_as_get_u32_handle_reads_them() {
        assert_eq!(get_u32_handle("800::10"), Some(0x8000_0010));
        assert_eq!(get_u32_handle("2:7b:"), Some(0x0027_b000));
        assert_eq!(get_u32_handle("800:0:0:0"), Some(0x8000_0000));
        assert_eq!(get_u32_handle("1000::"), None);
        assert_eq!(get_u32_handle("800::1000"), None);
        assert_eq!(get_u32_handle("1"), None);
        assert_eq!(sprint_handle(0x8000_0800), "800::800");
        assert_eq!(sprint_handle(0x0020_1800), "2:1:800");
    }

    #[test]
    fn refusals_say_what_was_illegal() {
        let w = words("match ip tos 0x10 flowid 1:10");
        let e = parse(None, &mut Args::new(&w)).unwrap_err();
        assert_eq!((e.code, e.stderr.as_str()), (1, "Illegal \"match\"\n"));
        let w = words("match ip src 10.0.0.0/8 classid");
        let e = parse(None, &mut Args::new(&w)).unwrap_err();
        assert_eq!(e.code, 255);
    }
}
