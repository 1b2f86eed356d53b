//! The state directory through the binary: a private directory or none, a
//! loud refusal of a history that no longer replays, crash safety under
//! `kill -9`, and `tc -batch` lines split exactly as iproute2's tc splits
//! them (compared side by side with /usr/sbin/tc in a scratch namespace).

mod common;

use common::{is_root, private_dir, EXE};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Ran {
    out: String,
    err: String,
    code: i32,
}

fn sluice_in(state: &Path, args: &[&str]) -> Ran {
    let o = Command::new(EXE)
        .args(args)
        .env("SLUICE_STATE_DIR", state)
        .env_remove("SLUICE_NETNS")
        .stdin(Stdio::null())
        .output()
        .expect("run sluice");
    Ran {
        out: String::from_utf8_lossy(&o.stdout).into(),
        err: String::from_utf8_lossy(&o.stderr).into(),
        code: o.status.code().unwrap_or(-1),
    }
}

fn listing(dir: &Path) -> Vec<(PathBuf, u32, Vec<u8>)> {
    let mut v = vec![];
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = fs::symlink_metadata(&p).unwrap();
        let body = if m.is_file() {
            fs::read(&p).unwrap()
        } else {
            vec![]
        };
        v.push((p.clone(), m.mode(), body));
        if m.is_dir() {
            v.extend(listing(&p));
        }
    }
    v.sort();
    v
}

/// Finding: the default directory was `/tmp/sluice-$USER`, which another
/// user could create first, planting a log for root to replay and a `lock`
/// symlink for root to create a file through. A directory owned by another
/// user is now refused with a message naming it, exit 1, and nothing in it
/// is read, followed or changed.
#[test]
fn another_users_directory_is_refused_and_left_alone() {
    if !is_root() {
        panic!("this test plants another user's directory and needs root");
    }
    let d = private_dir();
    let planted = d.path().join("sluice-user");
    fs::create_dir_all(planted.join("netns")).unwrap();
    fs::write(
        planted.join("netns/default.log"),
        "[\"tc\",\"qdisc\",\"add\",\"dev\",\"lo\",\"root\",\"handle\",\"9:\",\"htb\"]\n",
    )
    .unwrap();
    let target = d.path().join("root-owned-file");
    std::os::unix::fs::symlink(&target, planted.join("lock")).unwrap();
    std::os::unix::fs::symlink(&target, planted.join("netns/default.lock")).unwrap();
    for p in [planted.clone(), planted.join("netns")] {
        fs::set_permissions(&p, fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
    }
    let before = listing(&planted);
    let r = sluice_in(&planted, &["tc", "qdisc", "show", "dev", "lo"]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains(&planted.display().to_string()), "{}", r.err);
    assert!(r.err.contains("owned by uid 65534"), "{}", r.err);
    assert!(
        !r.out.contains("htb"),
        "the planted log was replayed: {}",
        r.out
    );
    assert!(!target.exists(), "a planted symlink was followed");
    assert_eq!(listing(&planted), before);
}

#[test]
fn a_directory_others_can_enter_or_a_symlink_is_refused() {
    let d = private_dir();
    let loose = d.path().join("loose");
    fs::create_dir(&loose).unwrap();
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o750)).unwrap();
    let r = sluice_in(
        &loose,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(
        r.err.contains(&format!("{}", loose.display())) && r.err.contains("0750"),
        "{}",
        r.err
    );
    assert!(
        fs::read_dir(&loose).unwrap().next().is_none(),
        "nothing created"
    );
    let private = d.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    let r = sluice_in(&link, &["tc", "qdisc", "show"]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("symbolic link"), "{}", r.err);
    assert!(
        fs::read_dir(&private).unwrap().next().is_none(),
        "nothing created"
    );
}

/// The directory is created 0700 and its files 0600 whatever the umask;
/// without `$SLUICE_STATE_DIR` it is `$XDG_RUNTIME_DIR/sluice` when that
/// is a private directory of the user.
#[test]
fn directories_are_made_private_whatever_the_umask() {
    let d = private_dir();
    let state = d.path().join("a/b/state");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000; exec {EXE} tc qdisc add dev lo root handle 1: htb"
        ))
        .env("SLUICE_STATE_DIR", &state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
    assert_eq!(
        fs::metadata(state.join("netns")).unwrap().mode() & 0o777,
        0o700
    );
    for e in fs::read_dir(state.join("netns")).unwrap() {
        let e = e.unwrap();
        assert_eq!(
            e.metadata().unwrap().mode() & 0o777,
            0o600,
            "{:?}",
            e.path()
        );
    }
    let xdg = private_dir();
    let o = Command::new(EXE)
        .args([
            "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb",
        ])
        .env_remove("SLUICE_STATE_DIR")
        .env("XDG_RUNTIME_DIR", xdg.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = fs::metadata(xdg.path().join("sluice")).unwrap();
    assert_eq!(m.mode() & 0o777, 0o700);
    assert!(xdg.path().join("sluice/netns/default.journal").exists());
}

/// Finding: a logged command that no longer replayed was dropped silently
/// (exit 0), with whatever followed it, and the next write made the loss
/// permanent. Now the command fails loudly, naming the state file, the
/// command and tc's message, and changes nothing.
#[test]
fn a_history_that_no_longer_replays_fails_loudly_and_changes_nothing() {
    let d = private_dir();
    let state = d.path().join("state");
    fs::create_dir_all(state.join("netns")).unwrap();
    for p in [state.clone(), state.join("netns")] {
        fs::set_permissions(&p, fs::Permissions::from_mode(0o700)).unwrap();
    }
    // An earlier version's log in which the second command cannot succeed.
    let add = "[\"tc\",\"qdisc\",\"add\",\"dev\",\"lo\",\"root\",\"handle\",\"1:\",\"htb\"]\n";
    let log = state.join("netns/default.log");
    fs::write(&log, format!("{add}{add}")).unwrap();
    let before = listing(&state);
    let r = sluice_in(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "handle", "2:", "htb",
        ],
    );
    assert_eq!(r.code, 1, "stdout {} stderr {}", r.out, r.err);
    assert!(r.err.contains(&log.display().to_string()), "{}", r.err);
    assert!(
        r.err.contains("`tc qdisc add dev lo root handle 1: htb`"),
        "{}",
        r.err
    );
    assert!(
        r.err.contains("Exclusivity flag on, cannot modify."),
        "{}",
        r.err
    );
    let after = listing(&state);
    // Only the lock file may have appeared.
    let without_lock: Vec<_> = after
        .into_iter()
        .filter(|(p, _, _)| !p.ends_with("default.lock"))
        .collect();
    assert_eq!(without_lock, before);
}

/// `-force` batches commit the lines that succeeded, as the kernel keeps
/// them, and report the failed one by its line number.
#[test]
fn a_forced_batch_commits_the_lines_that_succeeded() {
    let d = private_dir();
    let state = d.path().join("state");
    let f = d.path().join("b.tc");
    fs::write(
        &f,
        "qdisc add dev lo root handle 1: htb\nclass add dev lo parent 9: classid 9:1 htb rate 1mbit\nclass add dev lo parent 1: classid 1:1 htb rate 1mbit\n",
    )
    .unwrap();
    let r = sluice_in(&state, &["tc", "-force", "-batch", f.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.err
            .ends_with(&format!("Command failed {}:2\n", f.display())),
        "{}",
        r.err
    );
    let r = sluice_in(&state, &["tc", "class", "show", "dev", "lo"]);
    assert!(r.out.contains("class htb 1:1 root"), "{}", r.out);
}

/// A small deterministic generator (xorshift64*), seeded per run and
/// printed, for kill delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The classes 1:N listed by `tc class show dev lo`, and class 1:1's rate
/// in Kbit.
fn committed(state: &Path) -> (Vec<u32>, Option<u32>) {
    let r = sluice_in(state, &["tc", "class", "show", "dev", "lo"]);
    assert_eq!(r.code, 0, "the state must load after a kill: {}", r.err);
    let mut ids: Vec<u32> = r
        .out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|id| u32::from_str_radix(id.strip_prefix("1:")?, 16).ok())
        .collect();
    ids.sort();
    let rate = r
        .out
        .lines()
        .find(|l| l.starts_with("class htb 1:1 "))
        .and_then(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| *x == "rate")?;
            w.get(at + 1)?.strip_suffix("Kbit")?.parse().ok()
        });
    (ids, rate)
}

/// Batch k (from 1) adds classes 1:(40(k-1)+1) to 1:(40k) and changes
/// class 1:1's rate to 1000+k kbit, so the state after k committed batches
/// is known from arithmetic: classes 1..=40k, 1:1 at 1000+k Kbit. A `tc
/// -batch` killed (SIGKILL) at a random moment — mid-replay, mid-append,
/// mid-compaction — must leave exactly the state after k-1 or k batches,
/// which must load; the next batches then continue from it. The journal
/// passes its compaction bound every few batches, and each compaction has
/// superseded `class change`s to prove away.
#[test]
fn kill_9_at_random_points_leaves_a_committed_prefix() {
    let d = private_dir();
    let state = d.path().join("state");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill delays seeded with {seed}");
    let mut rng = Rng(seed);
    let r = sluice_in(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let mut done = 0u32; // batches known committed
    let mut kills = 0;
    for _ in 0..60 {
        let k = done + 1;
        let mut text = String::new();
        for i in 40 * (k - 1) + 1..=40 * k {
            text.push_str(&format!(
                "class add dev lo parent 1: classid 1:{i:x} htb rate {i}kbit\n"
            ));
        }
        text.push_str(&format!(
            "class change dev lo parent 1: classid 1:1 htb rate {}kbit\n",
            1000 + k
        ));
        let f = d.path().join("batch.tc");
        fs::write(&f, text).unwrap();
        let mut child = Command::new(EXE)
            .args(["tc", "-batch", f.to_str().unwrap()])
            .env("SLUICE_STATE_DIR", &state)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = rng.next() % 30_000;
        std::thread::sleep(std::time::Duration::from_micros(delay));
        // SAFETY: signalling our own child.
        if unsafe { libc::kill(child.id() as i32, libc::SIGKILL) } == 0 {
            kills += 1;
        }
        let status = child.wait().unwrap();
        let (ids, rate) = committed(&state);
        let n = ids.len() as u32;
        assert!(
            n == 40 * done || n == 40 * k,
            "after batch {k} ({status}, kill after {delay} us): {n} classes"
        );
        assert_eq!(
            ids,
            (1..=n).collect::<Vec<_>>(),
            "classes of whole batches only"
        );
        let expect_rate = (n > 0).then_some(1000 + n / 40);
        assert_eq!(
            rate, expect_rate,
            "class 1:1 as the last committed batch left it"
        );
        if status.success() {
            assert_eq!(n, 40 * k, "a batch that exited 0 is committed");
        }
        done = n / 40;
    }
    eprintln!("{kills} of 60 batches killed; {done} committed");
    assert!(
        done > 3,
        "too few batches committed to have compacted: {done}"
    );
}

// ---- tc -batch line splitting, side by side with iproute2 ----

fn real_tc() -> Option<String> {
    let tc = "/usr/sbin/tc";
    if !is_root() || !Path::new(tc).exists() {
        return None;
    }
    Some(tc.into())
}

/// A scratch network namespace, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Option<Netns> {
        let name = format!("sluice-state-{tag}-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .ok()?
            .success();
        ok.then_some(Netns(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Run one batch through /usr/sbin/tc in a fresh namespace and through
/// sluice in a fresh state; both must print the same and exit alike.
fn same_as_iproute2(tag: &str, batch: &str) {
    let Some(tc) = real_tc() else {
        eprintln!("SKIPPED {tag}: needs root and /usr/sbin/tc to compare against");
        return;
    };
    let Some(ns) = Netns::new(tag) else {
        eprintln!("SKIPPED {tag}: `ip netns add` failed");
        return;
    };
    let d = private_dir();
    let f = d.path().join(format!("{tag}.tc"));
    fs::write(&f, batch).unwrap();
    let k = Command::new("ip")
        .args(["netns", "exec", &ns.0, &tc, "-batch", f.to_str().unwrap()])
        .output()
        .unwrap();
    let s = sluice_in(
        &d.path().join("state"),
        &["tc", "-batch", f.to_str().unwrap()],
    );
    let kernel = (
        String::from_utf8_lossy(&k.stdout).to_string(),
        String::from_utf8_lossy(&k.stderr).to_string(),
        k.status.code().unwrap_or(-1),
    );
    assert_eq!((s.out, s.err, s.code), kernel, "batch {tag}:\n{batch}");
}

#[test]
fn batch_quotes_as_iproute2() {
    same_as_iproute2(
        "quotes",
        "qdisc add dev lo root handle 1: htb\n\
         class add dev lo parent 1: classid 1:1 htb rate \"10mbit\"\n\
         class add dev 'lo' parent 1: classid 1:2 htb rate '20mbit' ceil \"30mbit\"\n\
         class show dev lo\n\
         class add dev lo parent 1: classid 1:3 htb rate \"1mbit\"burst\n",
    );
}

#[test]
fn batch_comments_as_iproute2() {
    same_as_iproute2(
        "comments",
        "# a comment\n\
         \x20  # an indented one\n\
         qdisc add dev lo root handle 1: htb # trailing\n\
         \n\
         class add dev lo parent 1: classid 1:1 htb rate 1mbit#glued\n\
         class show dev lo\n\
         class add dev lo parent 1: classid 1:1 htb rate 1mbit\n",
    );
}

#[test]
fn batch_continuation_lines_as_iproute2() {
    // A trailing backslash joins the next line in its place (no blank is
    // added: `rate 10\` + `mbit` is `rate 10mbit`); a comment cuts the
    // backslash off; "Command failed" names the last physical line.
    same_as_iproute2(
        "continued",
        "qdisc add dev lo root \\\n\
         handle 1: htb\n\
         class add dev lo parent 1: classid 1:1 htb rate 10\\\n\
         mbit\n\
         class show dev lo\n\
         class add dev lo parent 1: # not continued \\\n\
         class add dev lo parent 1: \\\n\
         \\\n\
         classid 1:1 htb rate 1mbit\n\
         qdisc show dev lo\n",
    );
}

#[test]
fn batch_unterminated_quote_as_iproute2() {
    // A `#` cuts the line even inside quotes, leaving the quote open.
    same_as_iproute2(
        "unterminated",
        "qdisc add dev lo root handle 1: htb\n\
         class add dev lo parent 1: classid 1:1 htb rate \"1mbit # x\"\n\
         class add dev lo parent 1: classid 1:2 htb rate 1mbit\n",
    );
}

#[test]
fn batch_missing_continuation_as_iproute2() {
    same_as_iproute2(
        "missing",
        "qdisc add dev lo root handle 1: htb\nqdisc show dev lo \\\n",
    );
}

#[test]
fn batch_too_many_words_as_iproute2() {
    let mut many = String::from("qdisc add dev lo root handle 1: htb\nqdisc show dev lo");
    many.push_str(&" x".repeat(600));
    many.push('\n');
    same_as_iproute2("many", &many);
}

#[test]
fn batch_lines_where_tc_exits_as_iproute2() {
    // incomplete_command() and duparg() exit(-1): tc stops at once, status
    // 255, no "Command failed" line.
    same_as_iproute2(
        "incomplete",
        "qdisc add dev lo root handle 1: htb\nclass add dev lo parent 1: classid\nqdisc show dev lo\n",
    );
    same_as_iproute2(
        "duplicate",
        "qdisc add dev lo root handle 1: handle 2: htb\nqdisc show dev lo\n",
    );
}
