//! A scenario node, run live: its `tc`, `ip` and `iptables` commands (its
//! `tc = [...]` lines, its events', its script's) go to the link daemons
//! that own the devices they name.
//!
//! `sim --live` runs a node's lines through [`run`], and its script with
//! bash, this binary's `tc`, `ip` and `iptables` first on PATH, and
//! `$SLUICE_LIVE_NODE` listing the node's devices as
//! `eth0=LINK:a0,eth1=LINK:b0` ([`route`]): each device is side a
//! or b of a running link, whose daemon holds its qdiscs and netfilter
//! (the simulator runs the same script against the node's own state). A
//! command goes to the link of the device it names (`dev X` for tc and
//! ip, `-o X`/`-i X` for iptables) with the name changed to `a0` or `b0`;
//! one that names none (`tc qdisc show`, an iptables rule for every
//! interface) goes to each of the node's links in turn, their outputs one
//! after the other, and fails if one does.

use sluice_net::control::{forward_ip, forward_iptables, forward_tc};
use sluice_tc::Outcome;

/// The variable that makes this binary's tools a live node's.
pub const ENV: &str = "SLUICE_LIVE_NODE";

/// `$SLUICE_LIVE_NODE` for a node whose devices are `(device, link, side)`.
pub fn encode(devices: &[(String, String, &str)]) -> String {
    devices
        .iter()
        .map(|(dev, link, side)| format!("{dev}={link}:{side}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The devices of `$SLUICE_LIVE_NODE`: `(device, link, side)`.
fn devices(env: &str) -> Vec<(&str, &str, &str)> {
    env.split(',')
        .filter_map(|d| {
            let (dev, rest) = d.split_once('=')?;
            let (link, side) = rest.split_once(':')?;
            Some((dev, link, side))
        })
        .collect()
}

/// Run `tool`'s command line `argv` on the live node `$SLUICE_LIVE_NODE`
/// names, or `None` when it names none.
pub fn route(tool: &str, argv: &[String]) -> Option<Outcome> {
    let env = std::env::var(ENV).ok()?;
    Some(run(&env, tool, argv))
}

/// Run `tool`'s (`tc`, `ip`, `iptables`) command line `argv` on the live
/// node whose devices are `env` ([`encode`]).
pub fn run(env: &str, tool: &str, argv: &[String]) -> Outcome {
    let devs = devices(env);
    let flags: &[&str] = if tool == "iptables" {
        &["-o", "--out-interface", "-i", "--in-interface"]
    } else {
        &["dev"]
    };
    let named = argv
        .iter()
        .position(|w| flags.contains(&w.as_str()))
        .map(|i| i + 1)
        .filter(|&i| i < argv.len());
    let send = |link: &str, argv: &[String]| {
        let o = match tool {
            "tc" => forward_tc(Some(link), argv),
            "ip" => forward_ip(Some(link), argv),
            _ => forward_iptables(Some(link), argv),
        };
        o.unwrap_or_else(|| Outcome {
            stderr: format!("sluice: link {link} is not running\n"),
            code: 1,
            ..Default::default()
        })
    };
    if let Some(i) = named {
        let Some(&(_, link, side)) = devs.iter().find(|d| d.0 == argv[i]) else {
            return Outcome {
                stderr: format!(
                    "Cannot find device \"{}\" (a live node has {})\n",
                    argv[i],
                    devs.iter().map(|d| d.0).collect::<Vec<_>>().join(", ")
                ),
                code: 1,
                ..Default::default()
            };
        };
        let mut argv = argv.to_vec();
        argv[i] = side.to_string();
        return send(link, &argv);
    }
    let mut all = Outcome::default();
    for (_, link, _) in devs {
        let o = send(link, argv);
        all.stdout += &o.stdout;
        all.stderr += &o.stderr;
        all.code = all.code.max(o.code);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_read_back_as_written() {
        let env = encode(&[
            ("eth0".into(), "ss1l0".into(), "a0"),
            ("wan0".into(), "ss1l3".into(), "b0"),
        ]);
        assert_eq!(env, "eth0=ss1l0:a0,wan0=ss1l3:b0");
        assert_eq!(
            devices(&env),
            [("eth0", "ss1l0", "a0"), ("wan0", "ss1l3", "b0")]
        );
    }
}
