//! The Python package (`python/`): built with maturin into a venv under
//! the target directory (its Rust build kept in `target/python`, so later
//! runs rebuild only what changed), then its pytest suite run with this
//! binary as `$SLUICE_BIN`: runs and sweeps against the scenarios' physics,
//! serial against process-pool and Dask `LocalCluster` executors, and the
//! Python table against `sluice sweep`'s.
//!
//! Needs python3 with venv and the package index (CI has both): without
//! them this test fails, saying what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_package_passes_its_suite() {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-venv");
    let py = venv.join("bin/python");
    if !py.exists() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
    }
    // Quick when they are there already.
    run(
        Command::new(&py).args([
            "-m",
            "pip",
            "install",
            "-q",
            "maturin>=1.4,<2",
            "pandas",
            "pytest",
            "dask[distributed]",
            "ray",
        ]),
        "pip install (maturin, pandas, pytest, dask, ray)",
    );
    let target = root().join("target/python");
    // maturin's build hook runs the `maturin` the venv installed.
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--force-reinstall",
                "--no-build-isolation",
            ])
            .arg(root().join("python"))
            .env("CARGO_TARGET_DIR", &target)
            .env("PATH", &path),
        "pip install ./python",
    );
    run(
        Command::new(&py)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(root().join("python/tests"))
            .env("SLUICE_BIN", EXE),
        "pytest python/tests",
    );
}
