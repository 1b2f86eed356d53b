//! `sluice._sluice`: the simulator's entry points for the Python package
//! (`python/sluice/__init__.py` wraps them in pandas). Every function that
//! runs takes the scenario's text and the directory its relative file names
//! are read from, runs with the GIL released, and answers JSON, so the
//! Python side owns the data frames and the executors. The bundled
//! scenarios' names and texts come from `sluice_sim::bundled`, as the
//! command line's do.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sluice_sim::report::check;
use sluice_sim::run::run_all;
use sluice_sim::scenario::Scenario;
use sluice_sim::sweep::{Sweep, SweepFile};
use std::collections::BTreeMap;

create_exception!(_sluice, ScenarioError, PyValueError, "A scenario or sweep sluice refuses, with the reason.");

/// A scenario from its text, refused if a node runs a shell script: those
/// run with bash and the `sluice` binary's `tc`, which this package lacks.
fn scenario(text: &str, dir: Option<String>) -> PyResult<Scenario> {
    let mut sc = Scenario::parse(text).map_err(ScenarioError::new_err)?;
    if let Some(n) = sc.nodes.iter().find(|n| n.script.is_some()) {
        return Err(ScenarioError::new_err(format!(
            "node {}: runs a shell script, which needs bash and the sluice binary: run this scenario with `sluice sim` or `sluice sweep`",
            n.name
        )));
    }
    sc.dir = dir.map(Into::into);
    Ok(sc)
}

fn sweep(spec: &str, text: &str, dir: Option<String>) -> PyResult<Sweep> {
    let mut v: serde_json::Value =
        serde_json::from_str(spec).map_err(|e| ScenarioError::new_err(format!("sweep: {e}")))?;
    v["scenario"] = serde_json::Value::String("<scenario>".into());
    let f: SweepFile = serde_json::from_value(v).map_err(|e| ScenarioError::new_err(format!("sweep: {e}")))?;
    Sweep::new(&f, scenario(text, dir)?).map_err(ScenarioError::new_err)
}

/// Run a scenario: `{"runs": [...], "check": [[ok, line], ...]}` as JSON.
#[pyfunction]
#[pyo3(signature = (text, dir=None, vars=None, seed=None, variant=None, tc_stats=false))]
fn run(
    py: Python<'_>,
    text: &str,
    dir: Option<String>,
    vars: Option<BTreeMap<String, String>>,
    seed: Option<u64>,
    variant: Option<String>,
    tc_stats: bool,
) -> PyResult<String> {
    let mut sc = scenario(text, dir)?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    let vars = vars.unwrap_or_default();
    let runs = py
        .allow_threads(|| run_all(&sc, &vars, variant.as_deref(), tc_stats, None))
        .map_err(ScenarioError::new_err)?;
    let (lines, _) = check(&sc.expects, &runs);
    let checks: Vec<(bool, String)> = lines.into_iter().map(|l| (l.starts_with("ok"), l)).collect();
    let out = serde_json::json!({ "runs": runs, "check": checks });
    Ok(out.to_string())
}

/// A sweep's jobs, `(point, seed)`, in their fixed order.
#[pyfunction]
#[pyo3(signature = (spec, text, dir=None))]
fn sweep_jobs(spec: &str, text: &str, dir: Option<String>) -> PyResult<Vec<(usize, u64)>> {
    Ok(sweep(spec, text, dir)?.jobs())
}

/// Run one job of a sweep: its rows as JSON.
#[pyfunction]
#[pyo3(signature = (spec, text, point, seed, dir=None))]
fn sweep_job(py: Python<'_>, spec: &str, text: &str, point: usize, seed: u64, dir: Option<String>) -> PyResult<String> {
    let s = sweep(spec, text, dir)?;
    if point >= s.points.len() {
        return Err(ScenarioError::new_err(format!("point {point}: the sweep has {}", s.points.len())));
    }
    let rows = py.allow_threads(|| s.run_job(point, seed, None));
    serde_json::to_string(&rows).map_err(|e| ScenarioError::new_err(e.to_string()))
}

/// The bundled scenarios' names, as `sluice sim --list` shows them.
#[pyfunction]
fn bundled() -> Vec<&'static str> {
    sluice_sim::bundled::names().collect()
}

/// The text of the bundled scenario `name`, or `None`.
#[pyfunction]
fn bundled_scenario(name: &str) -> Option<&'static str> {
    sluice_sim::bundled::scenario(name)
}

#[pymodule]
fn _sluice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_job, m)?)?;
    m.add_function(wrap_pyfunction!(bundled, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_scenario, m)?)?;
    Ok(())
}
