"""The Python API against the physics of its scenarios and against the CLI.

Run by ``cargo test --release -p sluice --test python_api``, which builds
this package into a venv and passes the ``sluice`` binary as $SLUICE_BIN.
"""

import os
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

import sluice

ROOT = Path(__file__).resolve().parents[2]
DUMBBELL = str(ROOT / "examples" / "dumbbell.toml")

LOSSY = (ROOT / "tests" / "sweep" / "lossy.toml").read_text()

GRID = {"rate": ["2mbit", "5mbit", "10mbit"]}
SEEDS = [1, 2, 3]
METRICS = ["goodput_mbps", "flow.bulk.goodput_mbps"]


def test_a_run_gives_the_tables_and_meets_the_scenarios_expectations():
    r = sluice.run(DUMBBELL, variant="fq_codel")
    s = r.summary
    median = s[(s.kind == "ping") & (s.metric == "median_ms")].value.iloc[0]
    # fq_codel serves the ping ahead of the bulk flows: the 22 ms path plus
    # a few ms, where pfifo_fast queues it behind 4 x 128 KiB (~440 ms).
    assert 22.0 <= median <= 30.0
    goodput = s[s.metric == "goodput_mbps"].value.sum()
    assert 9.0 <= goodput <= 10.0
    assert r.check(), r.checks
    rtt = r.series["rtt"]
    assert len(rtt) > 250 and rtt.t.min() >= 1.0
    assert set(r.series["goodput"].name) == {"bulk.0", "bulk.1", "bulk.2", "bulk.3"}


def test_scenario_errors_are_exceptions_with_the_reason():
    with pytest.raises(sluice.ScenarioError, match="no variable .nope.*buf, flows, qdisc"):
        sluice.run(DUMBBELL, vars={"nope": 1})
    with pytest.raises(sluice.ScenarioError, match="no-such.toml"):
        sluice.run("no-such.toml")
    with pytest.raises(sluice.ScenarioError, match="variants"):
        sluice.sweep(LOSSY, GRID, variants=["codel"])


def test_a_failing_point_is_a_row_with_its_parameters_and_error():
    t = sluice.sweep(LOSSY, {"rate": ["10mbit", "-1mbit"]}, metrics=["goodput_mbps"])
    bad = t[t.rate == "-1mbit"]
    assert len(bad) == 1 and "negative" in bad.error.iloc[0]
    assert t[t.rate == "10mbit"].value.notna().all()


def serial():
    return sluice.sweep(LOSSY, GRID, seeds=SEEDS, metrics=METRICS)


def test_executors_give_exactly_the_serial_table():
    base = serial()
    assert len(base) == 3 * 3 * 2
    with ProcessPoolExecutor(max_workers=2) as ex:
        pd.testing.assert_frame_equal(sluice.sweep(LOSSY, GRID, seeds=SEEDS, metrics=METRICS, executor=ex), base)
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            dask = sluice.sweep(LOSSY, GRID, seeds=SEEDS, metrics=METRICS, executor=client.get_executor())
    pd.testing.assert_frame_equal(dask, base)
    # Loss is drawn from the seed, and a slower wire carries less.
    g = base[base.metric == "goodput_mbps"]
    assert g.groupby("rate").value.std().min() > 0
    means = g.groupby("rate").value.mean()
    assert means["2mbit"] < means["5mbit"] < means["10mbit"] and means["2mbit"] < 2.0


def test_ray_gives_exactly_the_serial_table():
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        table = sluice.sweep(LOSSY, GRID, seeds=SEEDS, metrics=METRICS, executor=sluice.RayExecutor())
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(table, serial())


def test_the_cli_writes_the_same_table(tmp_path):
    exe = os.environ.get("SLUICE_BIN")
    assert exe, "SLUICE_BIN names the sluice binary (the cargo test that runs this suite sets it)"
    (tmp_path / "lossy.toml").write_text(LOSSY)
    (tmp_path / "sweep.toml").write_text(
        'scenario = "lossy.toml"\nseeds = [1, 2, 3]\nmetrics = ["goodput_mbps", "flow.bulk.goodput_mbps"]\n'
        '[grid]\nrate = ["2mbit", "5mbit", "10mbit"]\n'
    )
    subprocess.run([exe, "sweep", "sweep.toml", "--out", "out"], cwd=tmp_path, check=True, capture_output=True)
    cli = pd.read_csv(tmp_path / "out" / "runs.csv", dtype={"rate": str, "variant": str, "error": object})
    py = serial()
    assert list(cli.columns) == list(py.columns)
    assert cli.rate.tolist() == py.rate.tolist() and cli.seed.tolist() == py.seed.tolist()
    assert cli.metric.tolist() == py.metric.tolist()
    assert cli.value.tolist() == py.value.tolist()


def test_a_bundled_name_runs_as_on_the_command_line(tmp_path):
    names = sluice.bundled()
    assert {"dumbbell", "lan-bufferbloat", "per-host-fairness"} <= set(names)
    by_name = sluice.run("dumbbell", variant="fq_codel")
    pd.testing.assert_frame_equal(by_name.summary, sluice.run(DUMBBELL, variant="fq_codel").summary)
    assert by_name.check(), by_name.checks
    # At 10 Mbit/s a bulk flow with a 4 MiB window fills the laptop's 1000
    # packets of txqueuelen and its ring: (1000 + 32) x 1514 bytes drain in
    # 1.25 s, (1000 + 511) x 1514 in 1.83 s, and the slowest ping waits that long.
    grid = {"ring": ["32p", "511p"]}
    t = sluice.sweep("lan-bufferbloat", grid, seeds=[4], variants=["10mbit"], metrics=["ping.max_ms"])
    worst = t.set_index("ring").value
    assert 1150 < worst["32p"] < 1300 and 1750 < worst["511p"] < 1900, t
    exe = os.environ.get("SLUICE_BIN")
    assert exe, "SLUICE_BIN names the sluice binary"
    (tmp_path / "sweep.toml").write_text(
        'scenario = "lan-bufferbloat"\nseeds = [4]\nvariants = ["10mbit"]\nmetrics = ["ping.max_ms"]\n'
        '[grid]\nring = ["32p", "511p"]\n'
    )
    subprocess.run([exe, "sweep", "sweep.toml", "--out", "out"], cwd=tmp_path, check=True, capture_output=True)
    cli = pd.read_csv(tmp_path / "out" / "runs.csv", dtype={"ring": str, "variant": str, "error": object})
    assert cli.ring.tolist() == t.ring.tolist() and cli.value.tolist() == t.value.tolist()


def test_a_scenario_whose_nodes_run_scripts_is_refused_with_the_reason():
    # Its scripts run with bash and the sluice binary's tc: `sluice sim` runs it.
    for call in (
        lambda: sluice.run("per-host-fairness"),
        lambda: sluice.sweep("ultimate-traffic-conditioner", {"upload": ["true"]}),
    ):
        with pytest.raises(sluice.ScenarioError, match="node .*shell script.*sluice sim"):
            call()
    with pytest.raises(sluice.ScenarioError, match="no-such-name: not a bundled scenario"):
        sluice.run("no-such-name")
