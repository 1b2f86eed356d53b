//! skbmod syntax (iproute2 6.1 tc/m_skbmod.c; notes in
//! docs/research/skbmod.md): `skbmod { set [dmac MAC] [smac MAC] [etype
//! TYPE] | swap mac | ecn } [CONTROL] [index N]`. The words are read in a
//! loop, each as a prefix in a fixed order, so `set`, `swap` and `skbmod`
//! are decoration (`set mac` swaps, `e` is `etype`), and each value given
//! is echoed to stderr. The control action is `pipe` when none is given;
//! `index` counts as an option. tc sends the flags of every word it saw,
//! the addresses given and a non-zero type; the kernel decides from them.
//!
//! Printed with plain `fprintf`s around the control action, as m_skbmod.c
//! does, so that `-j` output is not valid JSON: it is tc 6.1's, byte for
//! byte.

use super::{
    get_u32, next_arg, parse_action_control_dflt, print_action_control, print_tm, scan_hex_prefix,
    soft, verdict, PrintCx,
};
use crate::args::{invarg, matches, Args, CmdResult, Fail};
use crate::out::Out;
use sluice_core::act::skbmod::{
    SkbmodOpts, SKBMOD_F_DMAC, SKBMOD_F_ECN, SKBMOD_F_ETYPE, SKBMOD_F_SMAC, SKBMOD_F_SWAPMAC,
};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

const USAGE: &str =
    "Usage:... skbmod { set <SETTABLE> | swap <SWAPPABLE> | ecn } [CONTROL] [index INDEX]
where SETTABLE is: [dmac DMAC] [smac SMAC] [etype ETYPE]
where SWAPPABLE is: \"mac\" to swap mac addresses
\tDMAC := 6 byte Destination MAC address
\tSMAC := optional 6 byte Source MAC address
\tETYPE := optional 16 bit ethertype
\tCONTROL := reclassify | pipe | drop | continue | ok |
\t           goto chain <CHAIN_INDEX>
\tINDEX := skbmod index value to use";

/// `sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx") == 6`: six hex numbers
/// (each cut to its low byte) joined by colons; text after the sixth is
/// ignored.
fn scan_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut rest = s;
    for (i, b) in mac.iter_mut().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(':')?;
        }
        let (v, used) = scan_hex_prefix(rest)?;
        *b = v as u8;
        rest = &rest[used..];
    }
    Some(mac)
}

/// `parse_skbmod`, with the current word at `skbmod`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let (mut flags, mut ok) = (0u64, 0);
    let (mut dmac, mut smac, mut etype) = (None, None, 0u16);
    while let Some(w) = a.peek() {
        if matches(w, "skbmod") || matches(w, "swap") || matches(w, "set") {
            next_arg(a)?;
            continue;
        } else if matches(w, "mac") {
            flags |= SKBMOD_F_SWAPMAC;
        } else if matches(w, "etype") {
            let v = next_arg(a)?;
            etype = super::get_u16(v, 0).ok_or_else(|| invarg("ethertype is invalid", v))?;
            a.notes.push_str(&format!("skbmod etype 0x{etype:x}\n"));
            flags |= SKBMOD_F_ETYPE;
        } else if matches(w, "dmac") || matches(w, "smac") {
            let dst = matches(w, "dmac");
            let v = next_arg(a)?;
            let Some(m) = scan_mac(v) else {
                let what = if dst { "dst mac" } else { "smac" };
                return Err(soft(format!("Invalid {what} address {v}")));
            };
            let what = if dst { "dst" } else { "src" };
            a.notes.push_str(&format!("{what} MAC address <{v}>\n"));
            if dst {
                (dmac, flags) = (Some(m), flags | SKBMOD_F_DMAC);
            } else {
                (smac, flags) = (Some(m), flags | SKBMOD_F_SMAC);
            }
        } else if matches(w, "ecn") {
            flags |= SKBMOD_F_ECN;
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        ok += 1;
        a.next();
    }
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let mut index = 0;
    if a.peek().is_some_and(|w| matches(w, "index")) {
        let v = next_arg(a)?;
        index = get_u32(v, 0).ok_or_else(|| soft("skbmod: Illegal \"index\""))?;
        ok += 1;
        a.next();
    }
    if ok == 0 {
        return Err(Fail::new(
            255,
            format!("skbmod requires at least one option\n{USAGE}"),
        ));
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Skbmod(SkbmodOpts {
            action,
            flags,
            dmac,
            smac,
            etype: (etype != 0).then_some(etype),
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_skbmod`: raw text around the control action, as 6.1 prints it.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Skbmod(o) = &d.opts else {
        return;
    };
    out.raw("skbmod ");
    print_action_control(out, "", o.action, " ");
    let mut s = String::new();
    if let Some(t) = o.etype {
        s.push_str(&format!("set etype 0x{t:X} \n\t "));
    }
    if let Some(m) = &o.dmac {
        s.push_str(&format!("set dmac {} ", super::ll_addr_n2a(m)));
    }
    if let Some(m) = &o.smac {
        s.push_str(&format!("set smac {} ", super::ll_addr_n2a(m)));
    }
    if o.flags & SKBMOD_F_SWAPMAC != 0 {
        s.push_str("swap mac ");
    }
    if o.flags & SKBMOD_F_ECN != 0 {
        s.push_str("ecn ");
    }
    s.push_str(&format!(
        "\n\t index {} ref {} bind {}",
        d.index, d.refcnt, d.bindcnt
    ));
    out.raw(&s);
    if cx.stats {
        print_tm(d, cx.now, out);
    }
    out.raw("\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::f::testutil::{ingress, tc};

    #[test]
    fn macs_read_as_sscanf_reads_them() {
        for (s, want) in [
            (
                "11:22:33:44:55:66",
                Some([0x11, 0x22, 0x33, 0x44, 0x55, 0x66]),
            ),
            ("1:2:3:4:5:6", Some([1, 2, 3, 4, 5, 6])),
            ("0x1:AA:-1:4:5:666", Some([1, 0xaa, 0xff, 4, 5, 0x66])),
            (
                "11:22:33:44:55:66:77",
                Some([0x11, 0x22, 0x33, 0x44, 0x55, 0x66]),
            ),
            (
                "11:22:33:44:55:66xyz",
                Some([0x11, 0x22, 0x33, 0x44, 0x55, 0x66]),
            ),
            ("11:22:33:44:55", None),
            ("11x:22:33:44:55:66", None),
            ("11-22-33-44-55-66", None),
            ("zz:22:33:44:55:66", None),
        ] {
            assert_eq!(scan_mac(s), want, "{s}");
        }
    }

    /// Errors and echoes as tc 6.1 prints them (docs/research/skbmod.md §2).
    #[test]
    fn parse_errors_and_echoes_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n";
        let tail = "bad action parsing\nparse_action: bad value (4:skbmod)!\nIllegal \"action\"\n";
        let required = format!("skbmod requires at least one option\n{USAGE}\n");
        let add = "actions add action skbmod";
        for (args, stderr, code) in [
            ("", incomplete.to_string(), 255),
            ("help", format!("{USAGE}\n"), 255),
            ("set", incomplete.into(), 255),
            ("set dmac", incomplete.into(), 255),
            (
                "set dmac 11:22:33:44:55:66 smac",
                format!("dst MAC address <11:22:33:44:55:66>\n{incomplete}"),
                255,
            ),
            (
                "set dmac 11:22:33:44:55",
                format!("Invalid dst mac address 11:22:33:44:55\n{tail}"),
                255,
            ),
            ("set smac garbage", format!("Invalid smac address garbage\n{tail}"), 255),
            (
                "set etype 0x10000",
                "Error: argument \"0x10000\" is wrong: ethertype is invalid\n".into(),
                255,
            ),
            ("foo", required.clone(), 255),
            ("pipe", required.clone(), 255),
            ("ecn index", incomplete.into(), 255),
            ("ecn index abc", format!("skbmod: Illegal \"index\"\n{tail}"), 255),
            // Parsed, then refused by act_skbmod: nothing to do.
            (
                "index 7",
                "RTNETLINK answers: Invalid argument\nWe have an error talking to the kernel\n".into(),
                255,
            ),
            (
                "set etype 0",
                "skbmod etype 0x0\nRTNETLINK answers: Invalid argument\nWe have an error talking to the kernel\n".into(),
                255,
            ),
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("{add} {args}"));
            assert_eq!((o.stderr.as_str(), o.code), (stderr.as_str(), code), "{args}");
        }
        // Echoes appear on success too, in command-line order.
        let mut n = ingress();
        let o = tc(
            &mut n,
            &format!("{add} set etype 0xbeef dmac 1:2:3:4:5:6 index 9"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            o.stderr,
            "skbmod etype 0xbeef\ndst MAC address <1:2:3:4:5:6>\n"
        );
        // In a filter a returned failure exits 1.
        let o = tc(
            &mut n,
            "filter add dev DEV parent ffff: protocol ip prio 1 u32 match u32 0 0 action skbmod set dmac 1:2",
        );
        assert_eq!(
            (o.stderr.as_str(), o.code),
            (format!("Invalid dst mac address 1:2\n{tail}").as_str(), 1)
        );
    }

    /// tc 6.1's print_skbmod fed the kernel's dumps (§4.2, §4.4, §4.5).
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = ingress();
        for c in [
            "actions add action skbmod set dmac 02:00:00:00:00:01 smac aa:bb:cc:dd:ee:ff etype 0x800 index 1",
            "actions add action skbmod swap mac index 2",
            "actions add action skbmod ecn goto chain 42 index 3",
            "actions add action skbmod set etype 0xfefe drop index 4",
            // swap overrides the address; ecn overrides everything.
            "actions add action skbmod swap mac set dmac 1:2:3:4:5:6 index 5",
            "actions add action skbmod ecn swap mac set etype 0x86dd reclassify index 6",
        ] {
            let o = tc(&mut n, c);
            // goto chain needs a filter: refused standalone.
            if c.contains("goto") {
                assert_eq!(o.stderr.lines().last(), Some("We have an error talking to the kernel"));
                continue;
            }
            assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        }
        let o = tc(&mut n, "actions ls action skbmod");
        assert_eq!(
            o.stdout,
            "total acts 5\n\n\
             \taction order 0: skbmod pipe set etype 0x800 \n\
             \t set dmac 02:00:00:00:00:01 set smac aa:bb:cc:dd:ee:ff \n\
             \t index 1 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n\n\
             \taction order 1: skbmod pipe swap mac \n\
             \t index 2 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n\n\
             \taction order 2: skbmod drop set etype 0xFEFE \n\t \n\
             \t index 4 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n\n\
             \taction order 3: skbmod pipe swap mac \n\
             \t index 5 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n\n\
             \taction order 4: skbmod reclassify ecn \n\
             \t index 6 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n"
        );
        // In a filter, with a cookie: no per-action hardware line.
        let o = tc(
            &mut n,
            "filter add dev DEV parent ffff: protocol all prio 2 matchall action skbmod ecn goto chain 42 cookie 1234",
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let o = tc(&mut n, "filter show dev DEV ingress");
        assert!(
            o.stdout.ends_with(
                "\taction order 1: skbmod goto chain 42 ecn \n\t index 3 ref 1 bind 1\n\tcookie 1234\n\n"
            ),
            "{}",
            o.stdout
        );
        // -j: the raw text breaks the JSON exactly where 6.1's does.
        let o = tc(&mut n, "-j actions get action skbmod index 1");
        assert_eq!(
            o.stdout,
            "[{\"total acts\":0},{\"actions\":[{\"order\":1skbmod ,\"control_action\":{\"type\":\"pipe\"}\
             set etype 0x800 \n\t set dmac 02:00:00:00:00:01 set smac aa:bb:cc:dd:ee:ff \n\
             \t index 1 ref 1 bind 0\n,\"not_in_hw\":true,\"used_hw_stats\":[\"disabled\"]}]}]\n"
        );
    }
}
