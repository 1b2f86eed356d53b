//! `sluice sweep`: the same tables whatever `--jobs`, shards that merge into
//! the whole, `--resume` that runs only what is missing, and errors that
//! name the file and what is wrong.

use std::path::Path;
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

/// The scenario the sweep tests share: a 1 % lossy wire of rate `${rate}`.
fn scenario() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/sweep/lossy.toml");
    std::fs::read_to_string(path).expect("tests/sweep/lossy.toml")
}

const SWEEP: &str = r#"
scenario = "lossy.toml"
seeds = "1..=3"
metrics = ["goodput_mbps", "flow.bulk.goodput_mbps"]

[grid]
rate = ["2mbit", "5mbit", "10mbit"]
"#;

fn sweep(dir: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .arg("sweep")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sluice runs")
}

fn ok(o: Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

fn read(dir: &Path, out: &str, file: &str) -> String {
    std::fs::read_to_string(dir.join(out).join(file)).unwrap()
}

#[test]
fn jobs_shards_and_resume_give_the_same_tables() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("lossy.toml"), scenario()).unwrap();
    std::fs::write(dir.join("sweep.toml"), SWEEP).unwrap();
    ok(sweep(dir, &["sweep.toml", "--jobs", "1", "--out", "one"]));
    ok(sweep(dir, &["sweep.toml", "--jobs", "2", "--out", "two"]));
    let runs = read(dir, "one", "runs.csv");
    assert_eq!(runs, read(dir, "two", "runs.csv"));
    assert_eq!(
        runs.lines().next(),
        Some("point,rate,seed,variant,metric,value,error")
    );
    // 3 points x 3 seeds x 1 variant x 2 metrics.
    assert_eq!(runs.lines().count(), 1 + 18);
    ok(sweep(dir, &["sweep.toml", "--shard", "1/2", "--out", "s1"]));
    ok(sweep(dir, &["sweep.toml", "--shard", "2/2", "--out", "s2"]));
    ok(sweep(dir, &["merge", "merged", "s1", "s2"]));
    assert_eq!(read(dir, "merged", "runs.csv"), runs);
    // A slower wire carries less: the summary's means go up with the rate.
    let summary = read(dir, "one", "summary.csv");
    let means: Vec<f64> = summary
        .lines()
        .skip(1)
        .filter(|l| l.contains(",goodput_mbps,"))
        .map(|l| l.split(',').nth(5).unwrap().parse().unwrap())
        .collect();
    assert_eq!(means.len(), 3);
    assert!(
        means[0] < 2.0 && means[0] < means[1] && means[1] < means[2],
        "{means:?}"
    );
    // Resuming a finished sweep runs nothing and keeps the table.
    let text = ok(sweep(dir, &["sweep.toml", "--resume", "--out", "one"]));
    assert!(text.contains("0 runs, 0 failed"), "{text}");
    assert_eq!(read(dir, "one", "runs.csv"), runs);
}

#[test]
fn bad_sweeps_are_refused_naming_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("lossy.toml"), scenario()).unwrap();
    let cases = [
        ("grid]\n", "sweep.toml"),
        (
            "scenario = \"lossy.toml\"\nmetrics = [\"goodput_mbps\"]\n[grid]\nqdisc = [\"fq\"]\n",
            "qdisc",
        ),
        ("scenario = \"lossy.toml\"\nmetrics = []\n", "metrics"),
        (
            "scenario = \"lossy.toml\"\nmetrics = [\"x\"]\nseeds = \"9..=1\"\n",
            "seeds",
        ),
        ("scenario = \"nope.toml\"\nmetrics = [\"x\"]\n", "nope.toml"),
    ];
    for (text, word) in cases {
        std::fs::write(dir.join("sweep.toml"), text).unwrap();
        let o = sweep(dir, &["sweep.toml", "--out", "x"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(word), "{text}: {err}");
        assert!(
            !dir.join("x").exists(),
            "nothing is written for a bad sweep"
        );
    }
    let o = sweep(dir, &["sweep.toml", "--shard", "3/2"]);
    assert_eq!(o.status.code(), Some(2));
}
