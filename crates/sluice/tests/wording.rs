//! The repository speaks of the software only, not of how or where it was
//! made: no numbered stretches of its making, no tracker numbers, no unnamed "this"
//! host. A figure names the hardware it was measured on, the date and the
//! command instead. This test reads every file git tracks and fails on
//! such words; the phrases it looks for are put together at run time, so
//! this file does not hold them either.

use std::path::Path;
use std::process::Command;

/// What a line may not say, and why.
fn offence(line: &str) -> Option<&'static str> {
    let l = line.to_ascii_lowercase();
    let host = ["this", "machine"].join(" ");
    if l.contains(&host) {
        return Some("an unnamed host: name the hardware (CPU model, cores) and the date");
    }
    if l.contains(&["work", "period"].join(" ")) {
        return Some("a stretch of the project's making");
    }
    let (period, tracked) = (["sess", "ion "].concat(), ["iss", "ue "].concat());
    for word in [period.as_str(), tracked.as_str(), &format!("{}#", tracked)] {
        let mut from = 0;
        while let Some(i) = l[from..].find(word) {
            let at = from + i;
            from = at + word.len();
            // A word boundary before, a whole number after ("rsvp session
            // 10.0.0.1" is an address, not a period).
            if at > 0 && l.as_bytes()[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = &l[from..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let next = rest.as_bytes().get(digits).copied();
            if digits > 0 && !matches!(next, Some(b'.') | Some(b'/')) {
                return Some("a numbered session or issue of the project's history");
            }
        }
    }
    None
}

#[test]
fn no_file_speaks_of_how_the_project_was_built() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("git ls-files runs");
    assert!(
        out.status.success(),
        "git ls-files failed: the test must read the tree"
    );
    let files: Vec<&[u8]> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .collect();
    assert!(
        files.len() > 100,
        "only {} tracked files: not the repository",
        files.len()
    );
    let mut found = vec![];
    for f in files {
        let name = String::from_utf8_lossy(f).into_owned();
        // The lock file's hashes and fuzz inputs are not prose.
        if name == "Cargo.lock" || name.starts_with("fuzz/seeds/") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(&name)) else {
            continue; // binary
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(why) = offence(line) {
                found.push(format!("{name}:{}: {why}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_catches_what_it_should_and_not_addresses() {
    let period = ["measured in sess", "ion 12 on a host"].concat();
    let host = ["as found on This", " Machine"].concat();
    let hash = ["see iss", "ue #19"].concat();
    let number = ["fixed for iss", "ue 20,"].concat();
    for bad in [&period, &host, &hash, &number] {
        assert!(offence(bad).is_some(), "{bad}");
    }
    let address = ["rsvp sess", "ion 10.0.0.1 ipproto tcp"].concat();
    let counts = ["a tcp sess", "ion 8/8"].concat();
    let inside = ["obsess", "ion 3"].concat();
    for fine in [
        &address,
        &counts,
        &inside,
        "Intel Xeon, 2 cores, 2026-12-07",
    ] {
        assert!(offence(fine).is_none(), "{fine}");
    }
}
