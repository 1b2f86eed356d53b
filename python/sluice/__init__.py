"""sluice's deterministic network simulator from Python.

>>> import sluice
>>> sluice.bundled()                # the scenarios sluice ships, as `sluice sim --list`
>>> r = sluice.run("dumbbell", variant="fq_codel")   # a bundled name, a file, or TOML text
>>> r.summary                       # one row per variant, workload and metric
>>> r.series["rtt"]                 # ping RTT samples over time
>>> table = sluice.sweep("examples/dumbbell.toml", {"flows": [1, 2, 4]}, seeds=range(1, 6),
...                      metrics=["ping.median_ms", "goodput_mbps"])

``sweep`` takes any ``concurrent.futures.Executor``: a ``ProcessPoolExecutor``
on one machine, or a Dask cluster's (``distributed.Client(...).get_executor()``)
for many; ``RayExecutor()`` runs it on Ray. Every run releases the GIL while
it simulates.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from . import _sluice
from ._sluice import ScenarioError

__all__ = ["run", "sweep", "bundled", "Result", "ScenarioError", "RayExecutor"]


def bundled() -> List[str]:
    """The names of the scenarios bundled with sluice (``sluice sim --list``).

    ``run`` and ``sweep`` take any of them where they take a file name.
    """
    return list(_sluice.bundled())


def _load(scenario: str) -> Tuple[str, Optional[str]]:
    """A scenario's text and the directory its relative file names are read from.

    As on the command line, a bundled name comes before a file of that name.
    """
    if "\n" in scenario:
        return scenario, None
    text = _sluice.bundled_scenario(scenario)
    if text is not None:
        return text, None
    try:
        with open(scenario, "r", encoding="utf-8") as f:
            text = f.read(1 << 20)
    except OSError as e:
        raise ScenarioError(
            f"{scenario}: not a bundled scenario (see sluice.bundled()) and not readable: {e.strerror}"
        ) from None
    return text, os.path.dirname(os.path.abspath(scenario))


@dataclass
class Result:
    """One scenario's runs, one per variant."""

    runs: List[Dict[str, Any]]
    checks: List[Tuple[bool, str]] = field(default_factory=list)

    @property
    def summary(self) -> pd.DataFrame:
        """Columns ``variant, kind, name, metric, value``: what ``sluice sim --csv`` prints."""
        rows = []
        for r in self.runs:
            v = r["variant"]
            for p in r["pings"]:
                for m in ("min_ms", "avg_ms", "median_ms", "max_ms", "loss_pct"):
                    rows.append((v, "ping", p["name"], m, p[m]))
            for f in r["flows"]:
                rows.append((v, f["kind"], f["name"], "goodput_mbps", f["goodput_mbps"]))
                rows.append((v, f["kind"], f["name"], "share", f["share"]))
            for w in r["webs"]:
                for m in ("load_ms", "min_ms", "max_ms", "loads"):
                    rows.append((v, "web", w["name"], m, w[m]))
        return pd.DataFrame(rows, columns=["variant", "kind", "name", "metric", "value"])

    @property
    def series(self) -> Dict[str, pd.DataFrame]:
        """Time series: ``rtt`` (ping samples, ms) and ``goodput`` (per flow, Mbit/s)."""
        rtt, goodput = [], []
        for r in self.runs:
            v = r["variant"]
            for p in r["pings"]:
                rtt += [(v, p["name"], t, ms) for t, ms in p["series"]]
            for f in r["flows"]:
                goodput += [(v, f["name"], t, m) for t, m in f["series"]]
        return {
            "rtt": pd.DataFrame(rtt, columns=["variant", "name", "t", "rtt_ms"]),
            "goodput": pd.DataFrame(goodput, columns=["variant", "name", "t", "mbps"]),
        }

    @property
    def tc_stats(self) -> Dict[str, str]:
        """Per variant, every device's ``tc -s`` output (``run(..., tc_stats=True)``)."""
        return {r["variant"]: r.get("tc_stats") or "" for r in self.runs}

    def check(self) -> bool:
        """Whether the scenario's ``[[expect]]`` ranges all hold (``self.checks`` has each line)."""
        return all(ok for ok, _ in self.checks)


def run(
    scenario: str,
    vars: Optional[Mapping[str, Any]] = None,
    seed: Optional[int] = None,
    variant: Optional[str] = None,
    tc_stats: bool = False,
) -> Result:
    """Run a scenario (a bundled name, a file name, or TOML text) and return its results.

    ``vars`` override the scenario's variables (as ``--set``), ``seed`` its
    seed, ``variant`` picks one variant (default: all). A scenario sluice
    refuses raises ``ScenarioError`` with the reason; so does one whose nodes
    run shell scripts, which need bash and the ``sluice`` binary
    (``sluice sim`` runs those).
    """
    text, base = _load(scenario)
    out = json.loads(
        _sluice.run(
            text,
            base,
            {k: str(v) for k, v in (vars or {}).items()},
            seed,
            variant,
            tc_stats,
        )
    )
    return Result(runs=out["runs"], checks=[(ok, line) for ok, line in out["check"]])


def _job(spec: str, text: str, base: Optional[str], point: int, seed: int) -> List[Dict[str, Any]]:
    return json.loads(_sluice.sweep_job(spec, text, point, seed, base))


class RayExecutor:
    """Runs a sweep's jobs as Ray tasks: ``sweep(..., executor=RayExecutor())``.

    Ray has no ``concurrent.futures`` executor; ``sweep`` needs only
    ``submit(fn, *args)`` returning a future, which a Ray task's
    ``ObjectRef.future()`` is. ``options`` go to ``ray.remote`` (e.g.
    ``num_cpus=1``); call ``ray.init`` (or connect to a cluster) first.
    """

    def __init__(self, **options: Any) -> None:
        import ray

        self._ray = ray
        self._options = options
        self._remote: dict = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> "concurrent.futures.Future[Any]":
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._ray.remote(**self._options)(fn) if self._options else self._ray.remote(fn)
            self._remote[fn] = remote
        return remote.remote(*args).future()


def sweep(
    scenario: str,
    grid: Mapping[str, Sequence[Any]],
    seeds: Iterable[int] = (1,),
    metrics: Sequence[str] = ("goodput_mbps",),
    variants: Optional[Sequence[str]] = None,
    combine: str = "product",
    executor: Optional[Any] = None,
) -> pd.DataFrame:
    """Run ``scenario`` (as ``run`` takes it) at every point of ``grid`` for every seed; the tidy table.

    Columns ``point, <grid variables>, seed, variant, metric, value, error``:
    the rows ``sluice sweep`` writes to ``runs.csv``, in the same order,
    whatever executor runs them.
    """
    text, base = _load(scenario)
    spec = json.dumps(
        {
            "seeds": [int(s) for s in seeds],
            "metrics": list(metrics),
            "variants": list(variants or []),
            "combine": combine,
            "grid": {k: [str(v) for v in vs] for k, vs in grid.items()},
        }
    )
    jobs = _sluice.sweep_jobs(spec, text, base)
    if executor is None:
        results = [_job(spec, text, base, p, s) for p, s in jobs]
    else:
        futures = [executor.submit(_job, spec, text, base, p, s) for p, s in jobs]
        results = [f.result() for f in futures]
    names = list(grid.keys())
    rows = []
    for r in itertools.chain.from_iterable(results):
        rows.append(
            [r["point"]]
            + [r["vars"].get(n, "") for n in names]
            + [r["seed"], r["variant"], r["metric"], r["value"], r.get("error")]
        )
    return pd.DataFrame(rows, columns=["point", *names, "seed", "variant", "metric", "value", "error"])
