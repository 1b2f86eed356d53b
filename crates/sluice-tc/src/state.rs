//! The state directory: how `sluice tc` remembers between invocations.
//!
//! Each namespace (`-n NAME`, or the default one) is a log of the commands
//! that succeeded, one JSON object per line (`{"at":NS,"cmd":[WORDS]}`: when
//! it ran, in nanoseconds of the wall clock, and its words), in
//! `$SLUICE_STATE_DIR/netns/<name>.log`. Loading replays the log into a fresh
//! [`Net`], each command at its own time, so everything the kernel derives
//! from history — automatic handles, the order classes and qdiscs are listed
//! in, how long ago an action was installed — comes out as it did. (Logs
//! of earlier versions hold bare arrays of words; those commands replay as
//! if they had just run.) A command
//! that succeeds and changes something is appended by writing a new file and
//! renaming it over the old one, so a crash mid-write leaves the old log
//! whole. Invocations are serialized by an exclusive lock on `lock` in the
//! directory. `$SLUICE_NETNS` names the namespace when `-n` is not given
//! (the simulator runs scripts that way, one namespace per node).

use crate::net::Net;
use serde::{Deserialize, Serialize};
use sluice_core::time::Time;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which tool a logged command belongs to.
pub const TOOLS: [&str; 3] = ["tc", "ip", "iptables"];

/// The state directory: `$SLUICE_STATE_DIR`, else a per-user directory.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SLUICE_STATE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("sluice");
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
    std::env::temp_dir().join(format!("sluice-{user}"))
}

fn log_path(dir: &Path, netns: Option<&str>) -> PathBuf {
    dir.join("netns")
        .join(format!("{}.log", netns.unwrap_or("default")))
}

/// One logged command: when it ran and its words (tool name first).
#[derive(Serialize, Deserialize)]
struct Entry {
    at: u64,
    cmd: Vec<String>,
}

/// A log line: an [`Entry`], or the bare words of an earlier version's log.
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Timed(Entry),
    Bare(Vec<String>),
}

/// A namespace loaded under the directory lock; dropped, it releases the lock.
pub struct Session {
    _lock: fd_lock::RwLockWriteGuard<'static, fs::File>,
    path: PathBuf,
    log: Vec<Entry>,
    /// The namespace, replayed from the log.
    pub net: Net,
}

/// Replays one logged command into `net`.
pub type Replay = fn(&mut Net, &[String]);

/// Replay a logged command (its first word names the tool) into `net`.
pub fn replay(net: &mut Net, words: &[String]) {
    match words.first().map(String::as_str) {
        Some("tc") => {
            let _ = crate::tc::run(net, &crate::tc::Opts::default(), &words[1..]);
        }
        Some("ip") => {
            let _ = crate::ip::run(net, &words[1..]);
        }
        Some("iptables") => {
            let _ = crate::iptables::run(net, &words[1..]);
        }
        _ => {}
    }
}

/// The namespace a command works in: `-n NAME`, else `$SLUICE_NETNS`.
pub fn netns_or_env(netns: Option<String>) -> Option<String> {
    netns.or_else(|| std::env::var("SLUICE_NETNS").ok().filter(|s| !s.is_empty()))
}

/// Write a namespace's log afresh, every command at time 0 (used to
/// prepare a namespace that a script then changes through the `tc`/`ip`
/// links).
pub fn write_log(dir: &Path, netns: &str, log: &[Vec<String>]) -> std::io::Result<()> {
    fs::create_dir_all(dir.join("netns"))?;
    let mut text = String::new();
    for cmd in log {
        let e = Entry {
            at: 0,
            cmd: cmd.clone(),
        };
        text.push_str(&serde_json::to_string(&e).unwrap_or_default());
        text.push('\n');
    }
    fs::write(log_path(dir, Some(netns)), text)
}

impl Session {
    /// Lock the directory and load namespace `netns`, replaying its log with
    /// `replay`. `now` is the wall-clock time of this invocation: each
    /// command replays at the time it ran and the namespace is left at
    /// `now` (its `net.now`), which [`Session::record`] stamps on what it
    /// logs. `None` replays every command at time 0, for a front end whose
    /// clock starts there (the simulator).
    pub fn open(
        dir: &Path,
        netns: Option<&str>,
        replay: Replay,
        now: Option<Time>,
    ) -> std::io::Result<Session> {
        fs::create_dir_all(dir.join("netns"))?;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        // The guard borrows the lock; leak one small lock object per process invocation.
        let lock: &'static mut fd_lock::RwLock<fs::File> =
            Box::leak(Box::new(fd_lock::RwLock::new(f)));
        let guard = lock.write()?;
        let path = log_path(dir, netns);
        let mut log = vec![];
        if let Ok(text) = fs::read_to_string(&path) {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<Line>(line) {
                    Ok(Line::Timed(e)) => log.push(e),
                    Ok(Line::Bare(cmd)) => log.push(Entry {
                        at: now.unwrap_or(Time(0)).0,
                        cmd,
                    }),
                    Err(e) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{}: corrupt state line: {e}", path.display()),
                        ))
                    }
                }
            }
        }
        let mut net = Net::new();
        if let Some(seed) = std::env::var("SLUICE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            net.seed = seed;
        }
        for e in &log {
            net.now = now.map_or(Time(0), |_| Time(e.at));
            replay(&mut net, &e.cmd);
        }
        net.now = now.unwrap_or(Time(0));
        Ok(Session {
            _lock: guard,
            path,
            log,
            net,
        })
    }

    /// The namespace, releasing the lock.
    pub fn into_net(self) -> Net {
        self.net
    }

    /// Record a successful state-changing command (tool name first) durably,
    /// as run at the namespace's `now`.
    pub fn record(&mut self, words: Vec<String>) -> std::io::Result<()> {
        self.log.push(Entry {
            at: self.net.now.0,
            cmd: words,
        });
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        for e in &self.log {
            writeln!(tmp, "{}", serde_json::to_string(e).unwrap_or_default())?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Run `tc WORDS` in a session and log it if it changed something.
    fn tc(s: &mut Session, cmd: &str) -> String {
        let (opts, rest) = crate::tc::parse_global(&words(cmd)).expect("options");
        let o = crate::tc::run(&mut s.net, &opts, &rest);
        assert_eq!(o.code, 0, "tc {cmd}: {}", o.stderr);
        if crate::tc::mutates(&rest) {
            s.record(std::iter::once("tc".to_string()).chain(rest).collect())
                .expect("record");
        }
        o.stdout
    }

    const T0: Time = Time(1_700_000_000_000_000_000);

    fn at(secs: f64) -> Option<Time> {
        Some(Time(T0.0 + (secs * 1e9) as u64))
    }

    /// The kernel prints an action's ages in whole seconds once a clock tick
    /// (10 ms) has passed since it was installed: `tc actions add` at T0 and
    /// `tc -s actions ls` 2.5 s later in another invocation print
    /// `installed 2 sec used 2 sec` (as tc 6.1 printed on this machine for a
    /// mirred action 2.3 s old), and nothing right after installing it.
    #[test]
    fn each_command_replays_at_the_time_it_ran() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::open(dir.path(), None, replay, at(0.0)).unwrap();
        tc(&mut s, "actions add action pass index 7");
        let fresh = tc(&mut s, "-s actions ls action gact");
        assert!(fresh.contains("index 7 ref 1 bind 0\n"), "{fresh}");
        drop(s);
        let mut s = Session::open(dir.path(), None, replay, at(2.5)).unwrap();
        let later = tc(&mut s, "-s actions ls action gact");
        assert!(
            later.contains("index 7 ref 1 bind 0 installed 2 sec used 2 sec\n"),
            "{later}"
        );
        // Added 2.5 s on, a second action's age counts from then.
        tc(&mut s, "actions add action drop index 8");
        drop(s);
        let mut s = Session::open(dir.path(), None, replay, at(4.0)).unwrap();
        let both = tc(&mut s, "-s actions ls action gact");
        assert!(
            both.contains("index 7 ref 1 bind 0 installed 4 sec used 4 sec\n"),
            "{both}"
        );
        assert!(
            both.contains("index 8 ref 1 bind 0 installed 1 sec used 1 sec\n"),
            "{both}"
        );
        // Without a clock (the simulator), every command ran at time 0.
        drop(s);
        let s = Session::open(dir.path(), None, replay, None).unwrap();
        assert_eq!(s.net.now, Time(0));
    }

    /// A log written by an earlier version (bare arrays of words) still
    /// loads; its commands count as just run.
    #[test]
    fn a_log_of_bare_words_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("netns")).unwrap();
        fs::write(
            log_path(dir.path(), None),
            "[\"tc\",\"actions\",\"add\",\"action\",\"pass\",\"index\",\"3\"]\n",
        )
        .unwrap();
        let mut s = Session::open(dir.path(), None, replay, at(9.0)).unwrap();
        let out = tc(&mut s, "-s actions ls action gact");
        assert!(out.contains("index 3 ref 1 bind 0\n"), "{out}");
        fs::write(log_path(dir.path(), None), "{\"at\":1}\n").unwrap();
        drop(s);
        assert!(Session::open(dir.path(), None, replay, at(9.0)).is_err());
    }
}
