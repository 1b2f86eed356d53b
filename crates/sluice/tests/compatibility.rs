//! The summary table of docs/tc-compatibility.md is generated, so it cannot
//! drift: which of iproute2 6.1's qdiscs, classifiers and actions sluice
//! has comes from the code's own lists, and how many of the kernel's
//! tc-testing cases pass comes from `tests/conformance/passing.txt`, which
//! the conformance test holds true (every listed case must pass).
//!
//! This test regenerates the table and fails if the book's differs;
//! `SLUICE_BLESS=1 cargo test --release -p sluice --test compatibility`
//! writes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- generated: crates/sluice/tests/compatibility.rs -->";
const END: &str = "<!-- end of generated table -->";

/// What iproute2 6.1 builds in (its tc/q_*.c, f_*.c, m_*.c), plus the
/// qdiscs only the kernel makes (pfifo_fast, mq, noqueue, noop).
const QDISCS: &[&str] = &[
    "atm",
    "bfifo",
    "cake",
    "cbq",
    "cbs",
    "choke",
    "clsact",
    "codel",
    "drr",
    "dsmark",
    "etf",
    "ets",
    "fq",
    "fq_codel",
    "fq_pie",
    "gred",
    "hfsc",
    "hhf",
    "htb",
    "ingress",
    "mq",
    "mqprio",
    "multiq",
    "netem",
    "noqueue",
    "pfifo",
    "pfifo_fast",
    "pfifo_head_drop",
    "pie",
    "plug",
    "prio",
    "qfq",
    "red",
    "rr",
    "sfb",
    "sfq",
    "skbprio",
    "taprio",
    "tbf",
];
const FILTERS: &[&str] = &[
    "basic", "bpf", "cgroup", "flow", "flower", "fw", "matchall", "route", "rsvp", "tcindex", "u32",
];
const ACTIONS: &[&str] = &sluice_tc::action::IPROUTE2_KINDS;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tdc_dir() -> PathBuf {
    std::env::var_os("SLUICE_TDC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/conformance/tc-testing"))
}

/// Cases per tc-testing file (`qdiscs/htb.json` → 12).
fn case_counts() -> BTreeMap<String, usize> {
    let dir = tdc_dir();
    let mut counts = BTreeMap::new();
    for sub in ["qdiscs", "filters", "actions"] {
        let d = dir.join(sub);
        let entries = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{}: {e} (the tc-testing cases are needed)", d.display()));
        for e in entries {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                let text = std::fs::read_to_string(&p).unwrap();
                let cases: Vec<serde_json::Value> =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                let name = format!("{sub}/{}", p.file_name().unwrap().to_string_lossy());
                counts.insert(name, cases.len());
            }
        }
    }
    counts
}

/// Lines `FILE ID ...` of a list in tests/conformance, counted per file.
fn listed(name: &str) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(root().join("tests/conformance").join(name)).unwrap();
    let mut per_file: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for l in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut w = l.split_whitespace();
        if let (Some(f), Some(id)) = (w.next(), w.next()) {
            per_file
                .entry(f.to_string())
                .or_default()
                .insert(id.to_string());
        }
    }
    per_file
        .into_iter()
        .map(|(f, ids)| (f, ids.len()))
        .collect()
}

/// A kind of object: its word, iproute2's kinds, "does sluice have it",
/// and its tc-testing file.
type Group<'a> = (
    &'a str,
    &'a [&'a str],
    &'a dyn Fn(&str) -> bool,
    &'a dyn Fn(&str) -> String,
);

fn generate() -> String {
    let cases = case_counts();
    let passing = listed("passing.txt");
    let unsupported = listed("unsupported.txt");
    let tests = |file: &str| match cases.get(file) {
        None => "–".to_string(),
        Some(&n) => {
            let p = passing.get(file).copied().unwrap_or(0);
            let u = unsupported.get(file).copied().unwrap_or(0);
            let out = if u > 0 {
                format!(" ({u} out of reach here)")
            } else {
                String::new()
            };
            format!("{p} of {n}{out} (`{file}`)")
        }
    };
    let mut t = String::from(
        "| kind | type | in sluice | kernel tc-testing cases passing |\n|---|---|---|---|\n",
    );
    let has_qdisc = |k: &str| sluice_core::qdisc::KINDS.contains(&k);
    let has_filter = |k: &str| sluice_tc::filter::KINDS.contains(&k);
    let has_action = |k: &str| sluice_core::act::KNOWN_KINDS.contains(&k);
    let qdisc_file = |k: &str| {
        let file = if ["pfifo", "bfifo", "pfifo_head_drop"].contains(&k) {
            "fifo"
        } else {
            k
        };
        format!("qdiscs/{file}.json")
    };
    let filter_file = |k: &str| format!("filters/{k}.json");
    let action_file = |k: &str| format!("actions/{k}.json");
    let groups: [Group; 3] = [
        ("qdisc", QDISCS, &has_qdisc, &qdisc_file),
        ("classifier", FILTERS, &has_filter, &filter_file),
        ("action", ACTIONS, &has_action, &action_file),
    ];
    for (what, kinds, has, file) in groups {
        for k in kinds {
            let yes = if has(k) { "yes" } else { "no" };
            t += &format!("| {k} | {what} | {yes} | {} |\n", tests(&file(k)));
        }
    }
    let (p, n): (usize, usize) = (passing.values().sum(), cases.values().sum());
    t += &format!("\nIn all {p} of the {n} tc-testing cases in the shared set pass.\n");
    t
}

#[test]
fn the_compatibility_table_is_what_the_code_and_the_tests_say() {
    let path = root().join("docs/tc-compatibility.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (a, b) = match (doc.find(BEGIN), doc.find(END)) {
        (Some(a), Some(b)) if a < b => (a + BEGIN.len(), b),
        _ => panic!("docs/tc-compatibility.md lacks the markers {BEGIN} ... {END}"),
    };
    let want = format!("\n{}", generate());
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    assert!(
        doc[a..b] == want,
        "docs/tc-compatibility.md's table is stale; regenerate it with\n  SLUICE_BLESS=1 cargo test --release -p sluice --test compatibility\nwant:\n{want}"
    );
}

#[test]
fn every_kind_sluice_has_is_one_iproute2_knows() {
    for k in sluice_core::qdisc::KINDS {
        assert!(
            QDISCS.contains(k),
            "qdisc {k} missing from the table's list"
        );
    }
    for k in sluice_tc::filter::KINDS {
        assert!(
            FILTERS.contains(&k),
            "classifier {k} missing from the table's list"
        );
    }
    for k in sluice_core::act::KNOWN_KINDS {
        assert!(
            ACTIONS.contains(&k),
            "action {k} missing from the table's list"
        );
    }
}
