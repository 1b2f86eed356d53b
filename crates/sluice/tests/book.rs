//! The book in docs/ builds with mdBook, every chapter is in its summary,
//! and no relative link in it or in the README points at nothing.
//!
//! mdBook is a tool, not a dependency: `.ci/run` installs it (`cargo install
//! mdbook`); without it the build test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("docs/ is readable") {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The targets of `[text](target)` links in `text`.
fn links(text: &str) -> Vec<&str> {
    let mut found = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            found.push(rest[..end].trim());
            rest = &rest[end..];
        }
    }
    found
}

#[test]
fn the_book_builds() {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("mdbook")
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output();
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            panic!("mdbook cannot run ({e}): install it with `cargo install mdbook` (.ci/run does)")
        }
    };
    assert!(
        run.status.success(),
        "mdbook build docs failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        out.path().join("index.html").exists(),
        "no index.html in the built book"
    );
    assert!(out.path().join("tc-compatibility.html").exists());
}

#[test]
fn every_chapter_is_in_the_summary_and_every_link_lands() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).expect("docs/SUMMARY.md");
    let listed: Vec<&str> = links(&summary);
    let mut files = vec![];
    markdown_files(&docs, &mut files);
    let mut problems = vec![];
    for f in &files {
        let rel = f
            .strip_prefix(&docs)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel != "SUMMARY.md" && !listed.contains(&rel.as_str()) {
            problems.push(format!("docs/{rel} is not in docs/SUMMARY.md"));
        }
    }
    files.push(root().join("README.md"));
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or(target);
            if path.is_empty() || path.contains(' ') {
                continue; // not a link (code in brackets)
            }
            if !f.parent().unwrap().join(path).exists() {
                problems.push(format!(
                    "{}: a link to {target}, which does not exist",
                    f.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
