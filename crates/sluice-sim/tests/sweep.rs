//! Sweeps: the same table whatever the number of threads, seeds that
//! change what random loss does, failures kept as rows, shards that add up
//! to the whole.

use sluice_sim::scenario::Scenario;
use sluice_sim::sweep::{summarize, Sweep, SweepFile};

/// The scenario the sweep tests share: a 1 % lossy wire of rate `${rate}`.
fn scenario() -> Scenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/sweep/lossy.toml");
    Scenario::parse(&std::fs::read_to_string(path).expect("tests/sweep/lossy.toml"))
        .expect("scenario")
}

fn sweep(extra: &str) -> Sweep {
    let text = format!("scenario = \"lossy\"\nmetrics = [\"goodput_mbps\"]\n{extra}");
    let f: SweepFile = toml::from_str(&text).expect("sweep file");
    Sweep::new(&f, scenario()).expect("sweep")
}

#[test]
fn threads_and_shards_do_not_change_the_table() {
    let s = sweep("seeds = \"1..=4\"\n[grid]\nrate = [\"10mbit\", \"2mbit\"]\n");
    let jobs = s.jobs();
    assert_eq!(jobs.len(), 8);
    let one = s.run(&jobs, 1, None, &|_| {});
    let two = s.run(&jobs, 2, None, &|_| {});
    assert_eq!(one, two);
    // Two shards, K = 1 and 2 of 2, are the whole.
    let shard = |k: usize| -> Vec<(usize, u64)> {
        jobs.iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == k)
            .map(|(_, j)| *j)
            .collect()
    };
    let mut both = s.run(&shard(0), 2, None, &|_| {});
    both.extend(s.run(&shard(1), 2, None, &|_| {}));
    both.sort_by_key(|r| (r.point, r.seed));
    assert_eq!(both, one);
    // Loss is drawn from the seed: seeds differ; a slower wire carries less.
    let sums = summarize(&one);
    let (fast, slow) = (&sums[0], &sums[1]);
    assert_eq!((fast.n, slow.n), (4, 4));
    assert!(
        fast.sd > 0.0 && fast.ci95 > 0.0,
        "seeds make the same run: {one:?}"
    );
    assert!(
        slow.mean < 2.0 && slow.mean < fast.mean,
        "2 Mbit/s {} vs 10 Mbit/s {}",
        slow.mean,
        fast.mean
    );
}

#[test]
fn a_bad_point_is_a_row_with_its_error_and_the_others_run() {
    let s = sweep("[grid]\nbuf = [\"64KiB\", \"-1\"]\n");
    let rows = s.run(&s.jobs(), 2, None, &|_| {});
    assert!(rows.iter().any(|r| r.point == 0 && r.value.is_some()));
    let bad = rows
        .iter()
        .find(|r| r.point == 1)
        .expect("a row for the bad point");
    let err = bad.error.as_deref().expect("its error");
    assert!(err.contains("sndbuf") || err.contains("buf"), "{err}");
}

#[test]
fn unknown_variables_and_variants_are_refused_naming_what_exists() {
    let f: SweepFile =
        toml::from_str("scenario = \"x\"\nmetrics = [\"goodput_mbps\"]\n[grid]\nqdisc = [1]\n")
            .unwrap();
    let e = Sweep::new(&f, scenario()).unwrap_err();
    assert!(e.contains("qdisc") && e.contains("rate"), "{e}");
    let f: SweepFile =
        toml::from_str("scenario = \"x\"\nmetrics = [\"goodput_mbps\"]\nvariants = [\"codel\"]\n")
            .unwrap();
    let e = Sweep::new(&f, scenario()).unwrap_err();
    assert!(e.contains("codel") && e.contains("fifo"), "{e}");
}
