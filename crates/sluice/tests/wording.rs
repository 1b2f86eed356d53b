//! The repository speaks of the project only: not of the periods it was
//! built in, the tracker's issue numbers or "this machine". A figure names
//! the hardware it was measured on, the date and the command instead.
//! This test reads every file git tracks and fails on such words.

use std::path::Path;
use std::process::Command;

/// What a line may not say, and why.
fn offence(line: &str) -> Option<&'static str> {
    let l = line.to_ascii_lowercase();
    if l.contains("this machine") {
        return Some("\"this machine\": name the hardware (CPU model, cores) and the date");
    }
    if l.contains("work period") {
        return Some("a work period of the project's history");
    }
    for word in ["session ", "issue ", "issue #"] {
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
        // The lock file's hashes, fuzz inputs, and this file's own examples.
        if name == "Cargo.lock"
            || name.starts_with("fuzz/seeds/")
            || name.ends_with("tests/wording.rs")
        {
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
    assert!(offence("measured in session 12 on this host").is_some());
    assert!(offence("as found on This Machine").is_some());
    assert!(offence("see issue #19").is_some());
    assert!(offence("fixed for issue 20,").is_some());
    assert!(offence("rsvp session 10.0.0.1 ipproto tcp").is_none());
    assert!(offence("a tcp session 8/8").is_none());
    assert!(offence("obsession 3").is_none());
    assert!(offence("Intel Xeon, 2 cores, 2026-12-07").is_none());
}
