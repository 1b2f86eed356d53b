//! Criterion benches of enqueue + dequeue per qdisc: the same cases as
//! `sluice bench qdisc` (built from `src/bench.rs`, compiled in here), each
//! iteration one round of a batch through the tree. Run with
//! `cargo bench -p sluice`; throughput is reported in packets (elements).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[allow(dead_code)]
#[path = "../src/bench.rs"]
mod bench;

fn qdiscs(c: &mut Criterion) {
    let mut g = c.benchmark_group("qdisc");
    for spec in bench::specs() {
        let Ok(mut case) = bench::QdiscCase::build(&spec) else {
            eprintln!("{} skipped=not-implemented", spec.label);
            continue;
        };
        if case.round() == 0 {
            eprintln!("{} skipped=no-output", spec.label);
            continue;
        }
        g.throughput(Throughput::Elements(spec.batch as u64));
        g.bench_function(spec.label.replace(' ', ","), |b| b.iter(|| case.round()));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = qdiscs
}
criterion_main!(benches);
