//! flow syntax (iproute2 tc/f_flow.c): `map key KEY [ OPS ]` or
//! `hash keys KEY,... [ perturb SECS ]`, with `divisor`, `baseclass`,
//! `match EMATCH_TREE`, `action` and the old `police`. The handle is a
//! number.

use super::{ematch, FPrintCx, Parsed};
use crate::args::{matches, Args, CmdResult};
use crate::m::{self, next_arg, soft, then};
use crate::out::Out;
use sluice_core::cls::flow::{FlowDump, FlowOpts, FLOW_MODE_HASH, FLOW_MODE_MAP, KEY_NAMES};
use sluice_core::cls::FilterOpts;
use sluice_core::handle::Handle;

const USAGE: &str = "Usage: ... flow ...

 [mapping mode]: map key KEY [ OPS ] ...
 [hashing mode]: hash keys KEY-LIST ... [ perturb SECS ]

                 [ divisor NUM ] [ baseclass ID ] [ match EMATCH_TREE ]
                 [ action ACTION_SPEC ]

KEY-LIST := [ KEY-LIST , ] KEY
KEY      := [ src | dst | proto | proto-src | proto-dst | iif | priority |
              mark | nfct | nfct-src | nfct-dst | nfct-proto-src |
              nfct-proto-dst | rt-classid | sk-uid | sk-gid |
              vlan-tag | rxhash ]
OPS      := [ or NUM | and NUM | xor NUM | rshift NUM | addend NUM ]
ID       := X:Y";

/// `flow_parse_keys`: comma-separated key names, each by prefix.
fn parse_keys(s: &str) -> CmdResult<(u32, u32)> {
    let (mut keys, mut n) = (0u32, 0u32);
    for k in s.split(',') {
        let Some(i) = KEY_NAMES.iter().position(|name| matches(k, name)) else {
            return Err(soft(format!("Unknown flow key \"{k}\"")));
        };
        keys |= 1 << i;
        n += 1;
    }
    Ok((keys, n))
}

/// `get_addend`: a number (with an optional minus), or an address when the
/// keys include src/dst/nfct-src/nfct-dst. (iproute2 tests the key numbers
/// as bits here, so only `dst` and `proto` enable addresses; kept.)
fn get_addend(arg: &str, keys: u32) -> Option<u32> {
    let (neg, s) = match arg.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, arg),
    };
    let v = m::get_u32(s, 0).or_else(|| {
        // FLOW_KEY_SRC | FLOW_KEY_DST | FLOW_KEY_NFCT_SRC | FLOW_KEY_NFCT_DST = 0 | 1 | 9 | 10.
        if keys & (1 | 9 | 10) == 0 {
            return None;
        }
        if let Ok(a) = s.parse::<std::net::Ipv4Addr>() {
            return Some(u32::from(a));
        }
        s.parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|a| u32::from_be_bytes(a.octets()[12..16].try_into().unwrap_or([0; 4])))
    })?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `flow_parse_opt`.
pub(super) fn parse(handle: Option<&str>, a: &mut Args) -> CmdResult<Parsed> {
    let mut tcm_handle = 0;
    if let Some(h) = handle {
        tcm_handle = m::get_u32(h, 0).ok_or_else(|| soft("Illegal \"handle\""))?;
    }
    let mut o = FlowOpts::default();
    let (mut mask, mut xor) = (u32::MAX, 0u32);
    let (mut keys, mut nkeys) = (0u32, 0u32);
    let mut mode = FLOW_MODE_MAP;
    let num = |a: &mut Args, what: &str| -> CmdResult<u32> {
        let v = next_arg(a)?;
        m::get_u32(v, 0).ok_or_else(|| soft(format!("Illegal \"{what}\"")))
    };
    while let Some(w) = a.peek() {
        if matches(w, "map") {
            mode = FLOW_MODE_MAP;
        } else if matches(w, "hash") {
            mode = FLOW_MODE_HASH;
        } else if matches(w, "keys") {
            let v = next_arg(a)?;
            (keys, nkeys) = parse_keys(v)?;
            o.keys = Some(keys);
        } else if matches(w, "and") {
            let v = num(a, "mask")?;
            xor &= v;
            mask &= v;
        } else if matches(w, "or") {
            let v = num(a, "or")?;
            xor = v ^ (xor & !v);
            mask &= !v;
        } else if matches(w, "xor") {
            xor ^= num(a, "xor")?;
        } else if matches(w, "rshift") {
            o.rshift = Some(num(a, "rshift")?);
        } else if matches(w, "addend") {
            let v = next_arg(a)?;
            o.addend = Some(get_addend(v, keys).ok_or_else(|| soft("Illegal \"addend\""))?);
        } else if matches(w, "divisor") {
            o.divisor = Some(num(a, "divisor")?);
        } else if matches(w, "baseclass") {
            let v = next_arg(a)?;
            let b = Handle::parse_classid(v)
                .filter(|b| b.minor() != 0)
                .ok_or_else(|| soft("Illegal \"baseclass\""))?;
            o.baseclass = Some(b);
        } else if matches(w, "perturb") {
            o.perturb = Some(num(a, "perturb")?);
        } else if matches(w, "police") {
            next_arg(a)?;
            o.police = Some(m::police::parse_old(a).map_err(|f| then(f, "Illegal \"police\""))?);
            continue;
        } else if matches(w, "action") {
            next_arg(a)?;
            o.actions = m::parse_actions(a).map_err(|f| then(f, "Illegal \"action\""))?;
            continue;
        } else if matches(w, "match") {
            next_arg(a)?;
            o.ematches = Some(ematch::parse(a).map_err(|f| then(f, "Illegal \"ematch\""))?);
            continue;
        } else if matches(w, "help") {
            return Err(soft(USAGE));
        } else {
            return Err(soft(format!("What is \"{w}\"?\n{USAGE}")));
        }
        a.next();
    }
    if nkeys > 1 && mode != FLOW_MODE_HASH {
        return Err(soft("Invalid mode \"map\" for multiple keys"));
    }
    o.mode = Some(mode);
    if mask != u32::MAX || xor != 0 {
        o.mask = Some(mask);
        o.xor = Some(xor);
    }
    Ok(Parsed {
        handle: tcm_handle,
        opts: Some(FilterOpts::Flow(o)),
    })
}

/// `flow_print_opt` (text only, as iproute2 6.1 prints it with fprintf).
pub(super) fn print(f: &FlowDump, handle: u32, cx: &FPrintCx, out: &mut Out) {
    out.text(&format!("handle 0x{handle:x} "));
    match f.mode {
        FLOW_MODE_MAP => out.text("map "),
        FLOW_MODE_HASH => out.text("hash "),
        _ => {}
    }
    let names: Vec<&str> = (0..KEY_NAMES.len())
        .filter(|i| f.keys & (1 << i) != 0)
        .map(|i| KEY_NAMES[i])
        .collect();
    out.text(&format!("keys {} ", names.join(",")));
    if let Some((mask, val)) = f.mask_xor {
        let or = (mask & val) ^ val;
        let xor = mask & val;
        if mask != u32::MAX {
            out.text(&format!("and 0x{mask:08x} "));
        }
        if xor != 0 {
            out.text(&format!("xor 0x{xor:08x} "));
        }
        if or != 0 {
            out.text(&format!("or 0x{or:08x} "));
        }
    }
    if let Some(r) = f.rshift {
        out.text(&format!("rshift {r} "));
    }
    if let Some(v) = f.addend {
        out.text(&format!("addend 0x{v:x} "));
    }
    if let Some(d) = f.divisor {
        out.text(&format!("divisor {d} "));
    }
    if let Some(b) = f.baseclass {
        out.text(&format!("baseclass {b} "));
    }
    if let Some(p) = f.perturb {
        out.text(&format!("perturb {p}sec "));
    }
    if let Some(t) = &f.ematches {
        ematch::print(t, out);
    }
    if let Some(p) = &f.police {
        m::police::print(p, &cx.act, out);
    }
    if !f.actions.is_empty() {
        out.nl();
        m::print_actions(&f.actions, true, &cx.act, out);
    }
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{dev, tc};

    #[test]
    fn flow_syntax_and_listing_as_f_flow() {
        let mut net = dev();
        assert_eq!(tc(&mut net, "qdisc add dev DEV ingress").code, 0);
        // tdc 3514: `or` becomes and/xor, printed as and + or.
        let r = tc(
            &mut net,
            "filter add dev DEV parent ffff: handle 1 prio 1 protocol ip flow map key dst or 0xff",
        );
        assert_eq!(r.code, 0, "{r:?}");
        let r = tc(
            &mut net,
            "filter get dev DEV parent ffff: handle 1 protocol ip prio 1 flow",
        );
        assert_eq!(
            r.stdout,
            "filter parent ffff: protocol ip pref 1 flow chain 0 handle 0x1 map keys dst and 0xffffff00 or 0x000000ff baseclass ffff:1 \n"
        );
        let r = tc(&mut net, "filter add dev DEV parent ffff: handle 2 prio 1 protocol ip flow hash keys src,dst,proto-dst divisor 1024 perturb 10 baseclass 1:1");
        assert_eq!(r.code, 0, "{r:?}");
        let r = tc(
            &mut net,
            "filter get dev DEV parent ffff: handle 2 protocol ip prio 1 flow",
        );
        assert_eq!(
            r.stdout,
            "filter parent ffff: protocol ip pref 1 flow chain 0 handle 0x2 hash keys src,dst,proto-dst divisor 1024 baseclass 1:1 perturb 10sec \n"
        );
        // Parser errors (checked against iproute2 6.1's tc).
        let r = tc(
            &mut net,
            "filter add dev DEV parent ffff: handle 3 prio 1 protocol ip flow map keys src,dst",
        );
        assert_eq!(
            (r.stderr.as_str(), r.code),
            ("Invalid mode \"map\" for multiple keys\n", 1)
        );
        let r = tc(
            &mut net,
            "filter add dev DEV parent ffff: handle 3 prio 1 protocol ip flow hash keys src,bogus",
        );
        assert_eq!(
            (r.stderr.as_str(), r.code),
            ("Unknown flow key \"bogus\"\n", 1)
        );
        let r = tc(&mut net, "filter add dev DEV parent ffff: handle 3 prio 1 protocol ip flow map key dst baseclass 1:0");
        assert_eq!((r.stderr.as_str(), r.code), ("Illegal \"baseclass\"\n", 1));
        // The kernel wants a handle.
        let r = tc(
            &mut net,
            "filter add dev DEV parent ffff: prio 1 protocol ip flow map key dst",
        );
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("Invalid argument"), "{r:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// What `tc filter show` prints parses back to the same filter.
        #[test]
        fn printed_options_parse_back(
            hash in proptest::bool::ANY,
            keys in proptest::sample::subsequence(sluice_core::cls::flow::KEY_NAMES.to_vec(), 1..4),
            and in proptest::option::of(proptest::num::u32::ANY),
            or in proptest::option::of(proptest::num::u32::ANY),
            rshift in 0u32..40,
            addend in proptest::num::u32::ANY,
            divisor in 0u32..5000,
            base in 1u16..0xffff,
        ) {
            let mut net = dev();
            assert_eq!(tc(&mut net, "qdisc add dev DEV root handle 1: htb").code, 0);
            let mut cmd = "filter add dev DEV parent 1: handle 5 prio 1 protocol ip flow ".to_string();
            if hash {
                cmd += &format!("hash keys {} divisor {divisor} perturb 3 ", keys.join(","));
            } else {
                cmd += &format!("map key {} rshift {rshift} addend {addend} ", keys[0]);
                if let Some(a) = and { cmd += &format!("and {a} "); }
                if let Some(o) = or { cmd += &format!("or {o} "); }
            }
            cmd += &format!("baseclass 1:{base:x}");
            let r = tc(&mut net, &cmd);
            proptest::prop_assert_eq!(r.code, 0, "{} {:?}", cmd, r);
            let shown = tc(&mut net, "filter get dev DEV parent 1: handle 5 prio 1 protocol ip flow").stdout;
            let opts = shown.split(" handle 0x5 ").nth(1).unwrap().trim().to_string();
            let mut net2 = dev();
            assert_eq!(tc(&mut net2, "qdisc add dev DEV root handle 1: htb").code, 0);
            // iproute2 prints `perturb 3sec` but reads only a number.
            let input = format!("{opts} ").replace("sec ", " ");
            let r = tc(&mut net2, &format!("filter add dev DEV parent 1: handle 5 prio 1 protocol ip flow {input}"));
            proptest::prop_assert_eq!(r.code, 0, "{} {:?}", opts, r);
            let again = tc(&mut net2, "filter get dev DEV parent 1: handle 5 prio 1 protocol ip flow").stdout;
            proptest::prop_assert_eq!(shown, again);
        }
    }
}
