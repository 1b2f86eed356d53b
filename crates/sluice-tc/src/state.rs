//! The state directory: how `sluice tc` remembers between invocations.
//!
//! Each namespace (`-n NAME`, or the default one) is a log of the commands
//! that succeeded, one JSON array of words per line, in
//! `$SLUICE_STATE_DIR/netns/<name>.log`. Loading replays the log into a fresh
//! [`Net`], so everything the kernel derives from history — automatic handles,
//! the order classes and qdiscs are listed in — comes out as it did. A command
//! that succeeds and changes something is appended by writing a new file and
//! renaming it over the old one, so a crash mid-write leaves the old log
//! whole. Invocations are serialized by an exclusive lock on `lock` in the
//! directory. `$SLUICE_NETNS` names the namespace when `-n` is not given
//! (the simulator runs scripts that way, one namespace per node).

use crate::net::Net;
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

/// A namespace loaded under the directory lock; dropped, it releases the lock.
pub struct Session {
    _lock: fd_lock::RwLockWriteGuard<'static, fs::File>,
    path: PathBuf,
    log: Vec<Vec<String>>,
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

/// Write a namespace's log afresh (used to prepare a namespace that a
/// script then changes through the `tc`/`ip` links).
pub fn write_log(dir: &Path, netns: &str, log: &[Vec<String>]) -> std::io::Result<()> {
    fs::create_dir_all(dir.join("netns"))?;
    let mut text = String::new();
    for w in log {
        text.push_str(&serde_json::to_string(w).unwrap_or_default());
        text.push('\n');
    }
    fs::write(log_path(dir, Some(netns)), text)
}

impl Session {
    /// Lock the directory and load namespace `netns`, replaying its log with `replay`.
    pub fn open(dir: &Path, netns: Option<&str>, replay: Replay) -> std::io::Result<Session> {
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
                match serde_json::from_str::<Vec<String>>(line) {
                    Ok(words) => log.push(words),
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
        for words in &log {
            replay(&mut net, words);
        }
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

    /// Record a successful state-changing command (tool name first) durably.
    pub fn record(&mut self, words: Vec<String>) -> std::io::Result<()> {
        self.log.push(words);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        for w in &self.log {
            writeln!(tmp, "{}", serde_json::to_string(w).unwrap_or_default())?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}
