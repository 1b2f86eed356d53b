//! The `trace_parser` fuzz target's body (`fuzz/src/trace_body.rs`) over
//! its committed seeds and variants of them cut and spliced: a no-panic
//! smoke run on a stable compiler (cargo-fuzz explores further,
//! `fuzz/README.md`).

#[path = "../../../fuzz/src/trace_body.rs"]
mod trace_body;

#[test]
fn fuzz_body_survives_its_seeds_and_their_variants() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/trace_parser");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 5, "seeds in {dir}");
    for s in &seeds {
        trace_body::trace_parser(s);
        for cut in [1, s.len() / 2, s.len().saturating_sub(1)] {
            trace_body::trace_parser(&s[..cut.min(s.len())]);
            trace_body::trace_parser(&s[cut.min(s.len())..]);
        }
        for other in &seeds {
            trace_body::trace_parser(&[s.as_slice(), other].concat());
        }
    }
    for edge in [
        "",
        "\n",
        "0\n",
        "1\n31536000000\n",
        "18446744073709551616\n",
        "0s,0,,\n",
    ] {
        trace_body::trace_parser(edge.as_bytes());
    }
}
