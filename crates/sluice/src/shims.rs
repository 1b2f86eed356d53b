//! `sluice shims DIR`: put `tc`, `ip` and `iptables` (and Mahimahi's
//! `mm-link`, `mm-delay`, `mm-loss`) in DIR as tiny shell scripts that run
//! this binary, so DIR first on PATH makes existing scripts and tools use
//! sluice.
//!
//! Symbolic links named `tc` would do for a shell, but some tools resolve
//! the program they call to its real path first (tcconfig does, through
//! `shutil.which` and `os.path.realpath`) and then run `sluice qdisc add
//! ...`, which the binary accepts as `sluice tc qdisc add ...` for that
//! reason; a script survives such resolution whole. An existing file of
//! that name is replaced only if it is one of these scripts.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The tools a shim is made for.
const TOOLS: [&str; 6] = ["tc", "ip", "iptables", "mm-link", "mm-delay", "mm-loss"];

/// The second line of every shim, by which it is recognized.
const MARK: &str = "# sluice shim";

/// Run `sluice shims ARGS`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let [dir] = args else {
        eprintln!(
            "usage: sluice shims DIR   (writes DIR/tc, DIR/ip, DIR/iptables, DIR/mm-link, \
             DIR/mm-delay and DIR/mm-loss)"
        );
        return 2;
    };
    match install(Path::new(dir)) {
        Ok(written) => {
            for p in written {
                println!("{}", p.display());
            }
            0
        }
        Err(e) => {
            eprintln!("sluice shims: {e}");
            1
        }
    }
}

/// The text of the shim that runs `exe TOOL ARGS...`.
fn script(exe: &Path, tool: &str) -> String {
    // Single-quoted for the shell: a quote in the path closes, escapes, reopens.
    let quoted = exe.to_string_lossy().replace('\'', r"'\''");
    format!("#!/bin/sh\n{MARK}: `sluice shims` wrote this\nexec '{quoted}' {tool} \"$@\"\n")
}

/// Write the shims into `dir` (created if need be); the paths written.
fn install(dir: &Path) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Check every name before writing any, so a refusal changes nothing.
    for tool in TOOLS {
        let path = dir.join(tool);
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            let ours = m.is_file()
                && std::fs::read_to_string(&path)
                    .is_ok_and(|t| t.lines().nth(1).is_some_and(|l| l.starts_with(MARK)));
            if !ours {
                return Err(format!(
                    "{} exists and is not a sluice shim: remove it first",
                    path.display()
                ));
            }
        }
    }
    let mut written = vec![];
    for tool in TOOLS {
        let path = dir.join(tool);
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        tmp.write_all(script(&exe, tool).as_bytes())
            .and_then(|()| {
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("{}: {e}", path.display()))?;
        tmp.persist(&path)
            .map_err(|e| format!("{}: {}", path.display(), e.error))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_quote_stays_one_word() {
        let s = script(Path::new("/opt/it's/sluice"), "tc");
        assert!(s.contains(r#"exec '/opt/it'\''s/sluice' tc "$@""#), "{s}");
        assert_eq!(s.lines().nth(1).map(|l| l.starts_with(MARK)), Some(true));
    }
}
