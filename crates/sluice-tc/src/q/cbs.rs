//! cbs syntax (iproute2 tc/q_cbs.c): `hicredit BYTES locredit BYTES
//! sendslope KBPS idleslope KBPS [offload 0|1]`, in any order, each at most
//! once — though tc notices a repeat only when the first value was not 0.
//! Every option defaults to 0 and the whole set is always sent. Printed
//! `hicredit H locredit L sendslope S idleslope I offload O `.

use crate::args::{Args, CmdResult, Fail};
use crate::m::get_u32;
use crate::out::{Out, To};
use sluice_core::qdisc::cbs::CbsOpts;
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::strtoul;

const USAGE: &str = "Usage: ... cbs hicredit BYTES locredit BYTES sendslope BPS idleslope BPS
\t   [offload 0|1]";

/// `get_s32` (base 0): the whole word a number that fits 32 signed bits.
fn get_s32(arg: &str) -> Option<i32> {
    let t = arg.trim_start_matches([' ', '\t', '\n']);
    let (neg, u) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if u.starts_with(['-', '+', ' ', '\t', '\n']) {
        return None;
    }
    let (v, rest) = strtoul(u, 0)?;
    if !rest.is_empty() {
        return None;
    }
    let v = if neg { -(v as i128) } else { v as i128 };
    i32::try_from(v).ok()
}

/// `cbs_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = CbsOpts::default();
    let soft = |m: String| Fail::new(1, m);
    while let Some(w) = a.next() {
        let key = ["offload", "hicredit", "locredit", "sendslope", "idleslope"]
            .into_iter()
            .find(|k| crate::args::matches(w, k));
        let Some(key) = key else {
            if w == "help" {
                return Err(soft(USAGE.into()));
            }
            return Err(soft(format!("cbs: unknown parameter \"{w}\"\n{USAGE}")));
        };
        let v = a.value()?;
        let slot: &mut i32 = match key {
            "hicredit" => &mut o.hicredit,
            "locredit" => &mut o.locredit,
            "sendslope" => &mut o.sendslope,
            "idleslope" => &mut o.idleslope,
            _ => {
                if o.offload != 0 {
                    return Err(soft("cbs: duplicate \"offload\" specification".into()));
                }
                let x = get_u32(v, 0).and_then(|x| u8::try_from(x).ok());
                o.offload =
                    x.ok_or_else(|| soft(format!("cbs: illegal value for \"offload\": \"{v}\"")))?;
                continue;
            }
        };
        if *slot != 0 {
            return Err(soft(format!("cbs: duplicate \"{key}\" specification")));
        }
        *slot =
            get_s32(v).ok_or_else(|| soft(format!("cbs: illegal value for \"{key}\": \"{v}\"")))?;
    }
    Ok(QdiscOpts::Cbs(o))
}

/// `cbs_print_opt`.
pub(super) fn print(o: &CbsOpts, out: &mut Out) {
    for (key, v) in [
        ("hicredit", o.hicredit),
        ("locredit", o.locredit),
        ("sendslope", o.sendslope),
        ("idleslope", o.idleslope),
        ("offload", o.offload as i32),
    ] {
        out.int(To::Any, key, &format!("{key} {v} "), v as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};
    use super::USAGE;

    /// Compared with iproute2 6.1's tc on Linux 6.18 (its kernel lacks
    /// sch_cbs, but tc's parser answers first); each exits 1 but the
    /// missing value (255).
    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let mut n = net();
        for (args, err) in [
            ("help", format!("{USAGE}\n")),
            ("foo", format!("cbs: unknown parameter \"foo\"\n{USAGE}\n")),
            (
                "hicredit x",
                "cbs: illegal value for \"hicredit\": \"x\"\n".into(),
            ),
            (
                "hicredit 5 hicredit 6",
                "cbs: duplicate \"hicredit\" specification\n".into(),
            ),
            // A repeat after 0 goes unnoticed.
            (
                "hicredit 0 hicredit 6 offload 1 offload 1",
                "cbs: duplicate \"offload\" specification\n".into(),
            ),
            (
                "offload 256",
                "cbs: illegal value for \"offload\": \"256\"\n".into(),
            ),
            (
                "idleslope 2147483648",
                "cbs: illegal value for \"idleslope\": \"2147483648\"\n".into(),
            ),
            (
                "idleslope -2147483648 sendslope -2147483649",
                "cbs: illegal value for \"sendslope\": \"-2147483649\"\n".into(),
            ),
            (
                "locredit 99999999999999999999",
                "cbs: illegal value for \"locredit\": \"99999999999999999999\"\n".into(),
            ),
            (
                "h 1 l 2 s 3 i 4 o 0 x",
                format!("cbs: unknown parameter \"x\"\n{USAGE}\n"),
            ),
        ] {
            let (code, _, stderr) = tc(&mut n, &format!("qdisc add dev d0 root cbs {args}"));
            assert_eq!((code, stderr.as_str()), (1, err.as_str()), "{args}");
        }
        let (code, _, stderr) = tc(&mut n, "qdisc add dev d0 root cbs hicredit");
        assert_eq!(
            (code, stderr.as_str()),
            (255, "Command line is not complete. Try option \"help\"\n")
        );
        assert_eq!(tc(&mut n, "qdisc show dev d0").1, "");
    }

    /// tc-testing cbs.json's patterns, and the child's life: listed while
    /// it is the first default, hidden once a deleted qdisc made way for
    /// another.
    #[test]
    fn printed_with_its_listed_default_child() {
        let mut n = net();
        let add = "qdisc add dev d0 root handle 1: cbs idleslope 20000 sendslope -80000 hicredit 30 locredit -1470";
        assert_eq!(tc(&mut n, add).0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc cbs 1: root refcnt 2 hicredit 30 locredit -1470 sendslope -80000 idleslope 20000 offload 0 \n\
             qdisc pfifo 0: parent 1: limit 1000p\n"
        );
        assert!(tc(&mut n, "-j qdisc show dev d0").1.contains(
            r#"{"kind":"cbs","handle":"1:","root":true,"refcnt":2,"options":{"hicredit":30,"locredit":-1470,"sendslope":-80000,"idleslope":20000,"offload":0}},{"kind":"pfifo","handle":"0:","parent":"1:","options":{"limit":1000}}"#
        ));
        assert_eq!(
            tc(&mut n, "class show dev d0").1,
            "class cbs 1:1 parent 1: \n"
        );
        assert_eq!(
            tc(
                &mut n,
                "qdisc add dev d0 parent 1:1 handle 10: pfifo limit 5"
            )
            .0,
            0
        );
        assert_eq!(
            tc(&mut n, "class show dev d0").1,
            "class cbs 1:1 parent 1: leaf 10: \n"
        );
        assert_eq!(tc(&mut n, "qdisc del dev d0 parent 1:1 handle 10:").0, 0);
        assert_eq!(tc(&mut n, "qdisc show dev d0").1.lines().count(), 1);
        let (code, _, stderr) = tc(&mut n, "qdisc change dev d0 root handle 1: cbs offload 1");
        assert_eq!(
            (code, stderr.as_str()),
            (2, "Error: Specified device does not support cbs offload.\n")
        );
    }
}
