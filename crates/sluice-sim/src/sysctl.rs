//! A node's sysctls: the kernel settings a scenario may give a node
//! (`sysctl = { "net.ipv4.tcp_congestion_control" = "bbr" }`), checked and
//! turned into the TCP configuration every connection of that node starts
//! from. A node that sets none behaves as a stock Linux 6.18 kernel (its
//! defaults are [`TcpConfig::default`]'s); a workload's own keys (`cc`,
//! `ecn`, `sndbuf`, `rcvbuf`) then override its node's, as a program's
//! `setsockopt` overrides a sysctl.
//!
//! Only the settings the TCP model has are accepted: any other name is an
//! error naming the ones there are, and a value is checked as the kernel's
//! `proc_dointvec_minmax` would (whole numbers in range; `tcp_rmem` and
//! `tcp_wmem` three of them, min ≤ default ≤ max, as the kernel requires
//! of nothing but documents). `--live` applies them with `sysctl -w` in the
//! node's namespace.

use crate::scenario::{substitute, value_text, NodeSpec};
use crate::tcp::config::{CongestionAlgorithm, EcnMode, TcpConfig};
use std::collections::BTreeMap;

/// The names accepted, each with what it sets.
pub const KNOWN: &[(&str, &str)] = &[
    ("net.ipv4.tcp_congestion_control", "cubic, reno or bbr"),
    (
        "net.ipv4.tcp_ecn",
        "0 never, 1 ask and accept, 2 accept (default)",
    ),
    ("net.ipv4.tcp_rmem", "min default max receive buffer, bytes"),
    ("net.ipv4.tcp_wmem", "min default max send buffer, bytes"),
    ("net.core.rmem_max", "largest SO_RCVBUF, bytes"),
    ("net.core.wmem_max", "largest SO_SNDBUF, bytes"),
    (
        "net.ipv4.tcp_moderate_rcvbuf",
        "receive-buffer autotuning, 0 or 1",
    ),
    ("net.ipv4.tcp_sack", "0 or 1"),
    ("net.ipv4.tcp_timestamps", "0 or 1"),
    ("net.ipv4.tcp_window_scaling", "0 or 1"),
    ("net.ipv4.tcp_slow_start_after_idle", "0 or 1"),
    (
        "net.ipv4.tcp_early_retrans",
        "0 to 4; 3 and 4 send tail loss probes",
    ),
    ("net.ipv4.tcp_syn_retries", "1 to 127"),
    ("net.ipv4.tcp_synack_retries", "0 to 255"),
    ("net.ipv4.tcp_retries2", "0 to 255"),
];

/// The largest buffer size accepted (`INT_MAX`, as the kernel's).
const MAX_BYTES: u64 = i32::MAX as u64;

/// Node `n`'s TCP configuration, its sysctls' `${}`s substituted.
pub fn of_node(n: &NodeSpec, vars: &BTreeMap<String, String>) -> Result<TcpConfig, String> {
    let mut m = BTreeMap::new();
    for (k, v) in &n.sysctl {
        m.insert(k.clone(), substitute(&value_text(v), vars)?);
    }
    let cfg = tcp_config(&m, &format!("node {}", n.name))?;
    Ok(TcpConfig { gso: n.gso, ..cfg })
}

/// Every setting of [`KNOWN`] as `cfg` has it, as `sysctl -w` takes it: what
/// a live node's namespace is given, so that it runs the configuration
/// the simulator models whatever the host's own settings are.
pub fn settings(cfg: &TcpConfig) -> Vec<(&'static str, String)> {
    let b = &cfg.buffers;
    let three = |t: [u64; 3]| format!("{} {} {}", t[0], t[1], t[2]);
    let bit = |on: bool| u8::from(on).to_string();
    vec![
        (KNOWN[0].0, cfg.congestion.name().into()),
        (
            KNOWN[1].0,
            match cfg.ecn {
                EcnMode::Off => "0",
                EcnMode::On => "1",
                EcnMode::Passive => "2",
            }
            .into(),
        ),
        (KNOWN[2].0, three(b.tcp_rmem)),
        (KNOWN[3].0, three(b.tcp_wmem)),
        (KNOWN[4].0, b.rmem_max.to_string()),
        (KNOWN[5].0, b.wmem_max.to_string()),
        (KNOWN[6].0, bit(b.moderate_rcvbuf)),
        (KNOWN[7].0, bit(cfg.sack)),
        (KNOWN[8].0, bit(cfg.timestamps)),
        (KNOWN[9].0, bit(cfg.window_scaling)),
        (KNOWN[10].0, bit(cfg.slow_start_after_idle)),
        (KNOWN[11].0, if cfg.tlp { "3" } else { "2" }.into()),
        (KNOWN[12].0, cfg.syn_retries.to_string()),
        (KNOWN[13].0, cfg.synack_retries.to_string()),
        (KNOWN[14].0, cfg.max_retransmits.to_string()),
    ]
}

/// The TCP configuration of a node with `sysctls`; `what` names the node
/// in errors.
pub fn tcp_config(sysctls: &BTreeMap<String, String>, what: &str) -> Result<TcpConfig, String> {
    let mut cfg = TcpConfig::default();
    for (k, v) in sysctls {
        set(&mut cfg, k, v.trim()).map_err(|e| format!("{what}: sysctl {k}: {e}"))?;
    }
    Ok(cfg)
}

fn set(cfg: &mut TcpConfig, key: &str, v: &str) -> Result<(), String> {
    let int = |lo: u64, hi: u64| -> Result<u64, String> {
        v.parse::<u64>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .ok_or_else(|| format!("{v:?}: expected a whole number from {lo} to {hi}"))
    };
    let flag = || int(0, 1).map(|n| n == 1);
    let b = &mut cfg.buffers;
    match key {
        "net.ipv4.tcp_congestion_control" => {
            cfg.congestion = CongestionAlgorithm::from_name(v)
                .ok_or_else(|| format!("{v:?}: cubic, reno or bbr"))?
        }
        "net.ipv4.tcp_ecn" => {
            cfg.ecn = match int(0, 2)? {
                0 => EcnMode::Off,
                1 => EcnMode::On,
                _ => EcnMode::Passive,
            }
        }
        "net.ipv4.tcp_rmem" => b.tcp_rmem = triple(v)?,
        "net.ipv4.tcp_wmem" => b.tcp_wmem = triple(v)?,
        "net.core.rmem_max" => b.rmem_max = int(1, MAX_BYTES)?,
        "net.core.wmem_max" => b.wmem_max = int(1, MAX_BYTES)?,
        "net.ipv4.tcp_moderate_rcvbuf" => b.moderate_rcvbuf = flag()?,
        "net.ipv4.tcp_sack" => cfg.sack = flag()?,
        "net.ipv4.tcp_timestamps" => cfg.timestamps = flag()?,
        "net.ipv4.tcp_window_scaling" => cfg.window_scaling = flag()?,
        "net.ipv4.tcp_slow_start_after_idle" => cfg.slow_start_after_idle = flag()?,
        "net.ipv4.tcp_early_retrans" => cfg.tlp = int(0, 4)? >= 3,
        "net.ipv4.tcp_syn_retries" => cfg.syn_retries = int(1, 127)? as u32,
        "net.ipv4.tcp_synack_retries" => cfg.synack_retries = int(0, 255)? as u32,
        "net.ipv4.tcp_retries2" => cfg.max_retransmits = int(0, 255)? as u32,
        _ => {
            let names: Vec<&str> = KNOWN.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "not a setting the simulator has (it has: {})",
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// `tcp_rmem`/`tcp_wmem`: three sizes, min ≤ default ≤ max, the min at
/// least a page (the kernel's floor is 1; below a page nothing works).
fn triple(v: &str) -> Result<[u64; 3], String> {
    let n: Vec<u64> = v
        .split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .ok()
                .filter(|n| (1..=MAX_BYTES).contains(n))
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            format!("{v:?}: expected three sizes in bytes, e.g. \"4096 131072 6291456\"")
        })?;
    match n[..] {
        [lo, def, hi] if lo <= def && def <= hi => Ok([lo, def, hi]),
        [_, _, _] => Err(format!("{v:?}: min, default and max must not decrease")),
        _ => Err(format!("{v:?}: expected three sizes in bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<TcpConfig, String> {
        let m = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tcp_config(&m, "node a")
    }

    #[test]
    fn none_is_a_stock_kernel() {
        assert_eq!(cfg(&[]).unwrap(), TcpConfig::default());
    }

    #[test]
    fn settings_read_back_as_the_same_configuration() {
        let c = cfg(&[
            ("net.ipv4.tcp_congestion_control", "reno"),
            ("net.ipv4.tcp_wmem", "4096 65536 1048576"),
            ("net.ipv4.tcp_early_retrans", "0"),
        ])
        .unwrap();
        let s = settings(&c);
        assert_eq!(s.len(), KNOWN.len());
        let pairs: Vec<(&str, &str)> = s.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(cfg(&pairs).unwrap(), c);
        // A stock kernel's values, as `sysctl` prints them on Linux 6.18.
        let stock = settings(&TcpConfig::default());
        assert!(stock.contains(&("net.ipv4.tcp_rmem", "4096 131072 33554432".into())));
        assert!(stock.contains(&("net.ipv4.tcp_wmem", "4096 16384 4194304".into())));
        assert!(stock.contains(&("net.ipv4.tcp_early_retrans", "3".into())));
    }

    #[test]
    fn settings_reach_the_configuration() {
        let c = cfg(&[
            ("net.ipv4.tcp_congestion_control", "bbr"),
            ("net.ipv4.tcp_ecn", "1"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.core.rmem_max", "212992"),
            ("net.ipv4.tcp_early_retrans", "2"),
        ])
        .unwrap();
        assert_eq!(c.congestion, CongestionAlgorithm::Bbr);
        assert_eq!(c.ecn, EcnMode::On);
        assert_eq!(c.buffers.tcp_rmem, [4096, 131_072, 6_291_456]);
        assert_eq!(c.buffers.rmem_max, 212_992);
        assert!(!c.tlp);
    }

    #[test]
    fn bad_names_and_values_are_errors_that_say_why() {
        let e = cfg(&[("net.ipv4.tcp_fastopen", "1")]).unwrap_err();
        assert!(
            e.contains("node a: sysctl net.ipv4.tcp_fastopen") && e.contains("tcp_rmem"),
            "{e}"
        );
        let e = cfg(&[("net.ipv4.tcp_congestion_control", "vegas")]).unwrap_err();
        assert!(e.contains("cubic, reno or bbr"), "{e}");
        let e = cfg(&[("net.ipv4.tcp_rmem", "4096 131072")]).unwrap_err();
        assert!(e.contains("three sizes"), "{e}");
        let e = cfg(&[("net.ipv4.tcp_wmem", "8192 4096 1000000")]).unwrap_err();
        assert!(e.contains("must not decrease"), "{e}");
        let e = cfg(&[("net.ipv4.tcp_sack", "2")]).unwrap_err();
        assert!(e.contains("0 to 1"), "{e}");
        assert!(cfg(&[("net.core.rmem_max", "-1")]).is_err());
    }
}
