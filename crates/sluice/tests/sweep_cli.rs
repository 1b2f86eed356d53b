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

/// A bulk flow and a ping under a fifo and fq_codel (tests/sweep/ping.toml).
fn ping_scenario() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/sweep/ping.toml");
    std::fs::read_to_string(path).expect("tests/sweep/ping.toml")
}

const PING_SWEEP: &str = r#"
scenario = "ping.toml"
seeds = "1..=2"
metrics = ["goodput_mbps", "ping.median_ms", "web.load_ms"]

[grid]
rate = ["5mbit", "10mbit"]
"#;

fn svg(dir: &Path, plots: &str, stem: &str) -> String {
    let text = read(dir, plots, &format!("{stem}.svg"));
    assert!(
        text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
        "{stem}.svg is not an SVG document"
    );
    let png = std::fs::read(dir.join(plots).join(format!("{stem}.png"))).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png");
    text
}

#[test]
fn plots_show_each_metric_against_the_grid_and_its_distribution() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("ping.toml"), ping_scenario()).unwrap();
    std::fs::write(dir.join("sweep.toml"), PING_SWEEP).unwrap();
    let a = sweep(dir, &["sweep.toml", "--out", "a", "--plot", "pa"]);
    let err = String::from_utf8_lossy(&a.stderr).to_string();
    // No run has a web workload: that metric is left out, and said so.
    assert!(
        err.contains("web.load_ms: no run produced a value"),
        "{err}"
    );
    assert!(!dir.join("pa/web.load_ms-vs-rate.svg").exists());
    assert!(!dir.join("pa/cdf-web.load_ms.svg").exists());
    ok(a);
    for stem in ["goodput_mbps-vs-rate", "ping.median_ms-vs-rate"] {
        let text = svg(dir, "pa", stem);
        assert!(text.contains("rate (Mbit/s)"), "{stem}: the x axis");
        assert!(text.contains("fifo") && text.contains("fq_codel"), "{stem}");
        // A dot at each mean: 2 rates x 2 variants.
        assert_eq!(text.matches("<circle").count(), 4, "{stem}");
    }
    for stem in ["cdf-goodput_mbps", "cdf-ping.median_ms", "cdf-ping-rtt"] {
        let text = svg(dir, "pa", stem);
        assert!(text.contains("fifo") && text.contains("fq_codel"), "{stem}");
    }
    assert!(svg(dir, "pa", "cdf-ping-rtt").contains("RTT (ms)"));
    // The same sweep on one thread: the same tables and the same drawings.
    ok(sweep(
        dir,
        &["sweep.toml", "--jobs", "1", "--out", "b", "--plot", "pb"],
    ));
    assert_eq!(read(dir, "a", "runs.csv"), read(dir, "b", "runs.csv"));
    for stem in ["goodput_mbps-vs-rate", "cdf-ping-rtt"] {
        assert_eq!(svg(dir, "pa", stem), svg(dir, "pb", stem), "{stem}");
    }
    // merge draws from the tables alone: no RTT samples, so no RTT CDF.
    ok(sweep(dir, &["merge", "m", "a", "--plot", "pm"]));
    assert!(svg(dir, "pm", "ping.median_ms-vs-rate").contains("fq_codel"));
    assert!(!dir.join("pm/cdf-ping-rtt.svg").exists());
}

#[test]
fn a_plot_directory_that_cannot_be_made_fails_after_the_tables() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("lossy.toml"), scenario()).unwrap();
    std::fs::write(
        dir.join("sweep.toml"),
        "scenario = \"lossy.toml\"\nmetrics = [\"goodput_mbps\"]\n",
    )
    .unwrap();
    // A directory inside a file cannot be made.
    let o = sweep(
        dir,
        &["sweep.toml", "--out", "t", "--plot", "lossy.toml/plots"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--plot") && err.contains("lossy.toml/plots"),
        "{err}"
    );
    assert!(read(dir, "t", "summary.csv").contains("goodput_mbps"));
}
