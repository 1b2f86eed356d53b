//! The state directory: how `sluice tc`, `ip` and `iptables` remember
//! between invocations.
//!
//! # What is kept
//!
//! A namespace (`-n NAME`, or `default`) is its history: the commands that
//! succeeded and changed something, each with the time it ran (nanoseconds
//! on the wall clock). Loading replays them into a fresh [`Net`], each at its
//! own time, so everything the kernel derives from history — automatic
//! handles, the order qdiscs and classes are listed in, how long ago an
//! action was installed — comes out as it did. Serializing every qdisc's
//! internal state instead would be a second, larger format to keep right.
//!
//! # Layout
//!
//! In `<dir>/netns/` (the directory is private: [`dir`] says how and why):
//!
//! - `NAME.snap` — a snapshot: a format version, a generation number, the
//!   counters history determines (`Net::autohandle`, the next ifindex: a
//!   check that replay still gives them) and the (compacted) commands;
//! - `NAME.journal` — the transactions committed since, against that
//!   generation: one record per invocation or per `tc -batch`, appended
//!   with one `write` and one `fsync`, each with its length and checksum
//!   (the formats are in [`record`]);
//! - `NAME.lock` — `flock`ed shared by commands that only read, exclusive
//!   by writers, so readers run side by side and a writer runs alone.
//!
//! # Crashes
//!
//! A crash mid-append leaves a torn last record, which readers ignore and
//! the next writer cuts off. When the journal outgrows a bound relative to
//! the snapshot, the writer compacts ([`compact`]): it writes snapshot
//! generation G+1 (a temporary file, synced, renamed, directory synced),
//! then an empty journal of generation G+1 the same way. A journal whose
//! generation is older than the snapshot's is already in it and is ignored,
//! so a crash between the two steps neither loses the journal nor applies
//! it twice. A `.tmp` left by a killed writer is removed by the next one.
//!
//! # Failures are loud
//!
//! A logged command that no longer replays (its exit status is not 0) stops
//! the load with an error naming the file, the command and tc's message;
//! nothing is written. The same for a snapshot of an unknown format version,
//! corruption other than a torn tail, or counters that replay no longer
//! reproduces. The way out is to remove the namespace's files, which the
//! message says.
//!
//! Logs of earlier versions (`NAME.log`, JSON lines `{"at":NS,"cmd":[...]}`
//! or bare arrays of words, which replay as if just run) are read once and
//! migrated into a snapshot by the first writer. `$SLUICE_NETNS` names the
//! namespace when `-n` is not given (the simulator runs scripts that way).

pub mod compact;
pub mod dir;
pub mod record;

pub use dir::{check_private_dir, ensure_private_dir, private_state_dir, state_dir, DirProblem};
use dir::{open_existing, remove_if_exists, sync_dir, tmp_path, write_atomic, Lock};
use record::{Command, Journal, Snapshot};

use crate::net::Net;
use crate::Outcome;
use sluice_core::time::Time;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Which tool a logged command belongs to.
pub const TOOLS: [&str; 3] = ["tc", "ip", "iptables"];

/// The largest state file read (a namespace of a million commands is a few
/// tens of MiB): a bigger one is refused rather than read into memory.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The journal is compacted when it holds more than this many commands and
/// more than a quarter of the snapshot's.
pub const COMPACT_MIN_COMMANDS: usize = 64;

/// What can go wrong keeping a namespace's state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state directory is not a private directory of this user.
    #[error("refusing state directory {path}: {problem}; remove it, or `chmod 700` it if it is yours and holds only sluice state, or set $SLUICE_STATE_DIR to a private directory")]
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        problem: DirProblem,
    },
    /// An I/O error on a file or directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A state file that does not parse (other than a torn journal tail).
    #[error("{path}: corrupt state file: {detail}; remove it to start the namespace afresh")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A state file of a format version this sluice does not read.
    #[error("{path}: state format version `{found}` is not supported (this sluice reads version {}); use the sluice that wrote it, or remove the file to start the namespace afresh", record::VERSION)]
    Version {
        /// The file.
        path: PathBuf,
        /// The version it claims.
        found: String,
    },
    /// A state file larger than [`MAX_FILE_BYTES`].
    #[error("{path}: {len} bytes is more than a state file may hold ({MAX_FILE_BYTES}); remove it to start the namespace afresh")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A logged command that no longer replays.
    #[error("{path}: logged command `{command}` no longer replays (exit {code}): {message}; nothing was changed; remove {path} (and the namespace's other files beside it) to start the namespace afresh")]
    Replay {
        /// The file it came from.
        path: PathBuf,
        /// The command, words joined by spaces.
        command: String,
        /// Its exit status.
        code: i32,
        /// What it printed on stderr.
        message: String,
    },
    /// A namespace name that cannot be a file name.
    #[error("Invalid netns name \"{0}\"")]
    BadName(String),
    /// A commit on a session opened for reading.
    #[error("state was opened for reading only; cannot record `{0}`")]
    ReadOnly(String),
}

impl StateError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StateError {
        StateError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<StateError> for std::io::Error {
    fn from(e: StateError) -> std::io::Error {
        match e {
            StateError::Io { source, .. } => source,
            e => std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// How a session locks the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A shared lock: the command only reads.
    Read,
    /// An exclusive lock: the command may change the namespace.
    Write,
}

/// Replays one logged command into `net`, returning what it printed and
/// its exit status.
pub type Replay = fn(&mut Net, &[String]) -> Outcome;

/// Replay a logged command (its first word names the tool) into `net`.
pub fn replay(net: &mut Net, words: &[String]) -> Outcome {
    match words.first().map(String::as_str) {
        Some("tc") => crate::tc::run(net, &crate::tc::Opts::default(), &words[1..]),
        Some("ip") => crate::ip::run(net, &words[1..]),
        Some("iptables") => crate::iptables::run(net, &words[1..]),
        other => Outcome {
            stderr: format!("unknown tool {other:?}"),
            code: 1,
            ..Default::default()
        },
    }
}

/// The namespace a command works in: `-n NAME`, else `$SLUICE_NETNS`.
pub fn netns_or_env(netns: Option<String>) -> Option<String> {
    netns.or_else(|| std::env::var("SLUICE_NETNS").ok().filter(|s| !s.is_empty()))
}

/// The files of one namespace.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    snap: PathBuf,
    journal: PathBuf,
    log: PathBuf,
    lock: PathBuf,
}

/// Check a namespace name as `ip netns add` does, and name its files.
fn paths(dir: &Path, netns: Option<&str>) -> Result<Paths, StateError> {
    let name = netns.unwrap_or("default");
    if name.is_empty()
        || name.len() >= 255
        || name.contains('/')
        || name.contains('\0')
        || name == "."
        || name == ".."
    {
        return Err(StateError::BadName(name.into()));
    }
    let d = dir.join("netns");
    Ok(Paths {
        snap: d.join(format!("{name}.snap")),
        journal: d.join(format!("{name}.journal")),
        log: d.join(format!("{name}.log")),
        lock: d.join(format!("{name}.lock")),
        dir: d,
    })
}

/// The whole of a state file, at most [`MAX_FILE_BYTES`]; `None` if absent.
fn read_file(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    let Some(f) = open_existing(path)? else {
        return Ok(None);
    };
    let len = f.metadata().map_err(|e| StateError::io(path, e))?.len();
    if len > MAX_FILE_BYTES {
        return Err(StateError::TooLarge {
            path: path.to_path_buf(),
            len,
        });
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| StateError::io(path, e))?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(StateError::TooLarge {
            path: path.to_path_buf(),
            len: buf.len() as u64,
        });
    }
    Ok(Some(buf))
}

/// Parse an earlier version's log: `{"at":NS,"cmd":[...]}` lines, or bare
/// arrays of words (which count as run at `now`).
fn decode_old_log(path: &Path, bytes: &[u8], now: u64) -> Result<Vec<Command>, StateError> {
    #[derive(serde::Deserialize)]
    struct Entry {
        at: u64,
        cmd: Vec<String>,
    }
    let text = std::str::from_utf8(bytes).map_err(|_| StateError::Corrupt {
        path: path.to_path_buf(),
        detail: "not UTF-8 text".into(),
    })?;
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let c = if line.starts_with('[') {
            serde_json::from_str::<Vec<String>>(line).map(|words| Command { at: now, words })
        } else {
            serde_json::from_str::<Entry>(line).map(|e| Command {
                at: e.at,
                words: e.cmd,
            })
        };
        out.push(c.map_err(|e| StateError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("line {}: {e}", i + 1),
        })?);
    }
    Ok(out)
}

/// A fresh namespace, seeded from `$SLUICE_SEED` when set.
fn fresh_net() -> Net {
    let mut net = Net::new();
    if let Some(seed) = std::env::var("SLUICE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        net.seed = seed;
    }
    net
}

/// Replay the command lines of `block` (which should hold `count`) into
/// `net`; `clock` says whether commands run at their own times (else at 0).
/// The first failure is an error naming `path`.
fn replay_block(
    net: &mut Net,
    block: &str,
    count: usize,
    replay: Replay,
    clock: bool,
    path: &Path,
) -> Result<(), StateError> {
    let mut words = Vec::new();
    let mut n = 0;
    for line in block.split_terminator('\n') {
        n += 1;
        let at = record::decode_line_into(line, &mut words).ok_or_else(|| StateError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("command line {n} is malformed"),
        })?;
        net.now = Time(if clock { at } else { 0 });
        let o = replay(net, &words);
        if o.code != 0 {
            return Err(StateError::Replay {
                path: path.to_path_buf(),
                command: words.join(" "),
                code: o.code,
                message: o.stderr.trim().to_string(),
            });
        }
    }
    if n != count {
        return Err(StateError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("{n} commands where its header says {count}"),
        });
    }
    Ok(())
}

/// Replay `cmds` as [`replay_block`] does.
fn replay_all(
    net: &mut Net,
    cmds: &[Command],
    replay: Replay,
    clock: bool,
    path: &Path,
) -> Result<(), StateError> {
    replay_block(
        net,
        &record::encode_block(cmds),
        cmds.len(),
        replay,
        clock,
        path,
    )
}

/// Sizes of a namespace's store, for tests and `sluice bench state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    /// The snapshot's generation (0: none yet).
    pub generation: u64,
    /// Commands in the snapshot.
    pub snapshot_commands: usize,
    /// Committed commands in the journal.
    pub journal_commands: usize,
}

/// A namespace loaded under its lock; dropped, it releases the lock (and
/// forgets commands staged but not committed).
#[derive(Debug)]
pub struct Session {
    lock: Lock,
    paths: Paths,
    replay: Replay,
    clock: bool,
    snapshot: Snapshot,
    /// The journal as loaded and appended to; `None` if there is none of
    /// the snapshot's generation (absent, or stale).
    journal: Option<Journal>,
    pending: Vec<Command>,
    /// The namespace, replayed from its history.
    pub net: Net,
}

/// Write a namespace's history afresh, every command at time 0 (used to
/// prepare a namespace that a script then changes through the `tc`/`ip`
/// links). Commands that fail are kept; loading reports them.
pub fn write_log(dir: &Path, netns: &str, log: &[Vec<String>]) -> std::io::Result<()> {
    let p = paths(dir, Some(netns))?;
    ensure_private_dir(dir)?;
    ensure_private_dir(&p.dir)?;
    let _lock = Lock::take(&p.lock, true)?;
    let old_gen = match read_file(&p.snap)? {
        Some(b) => record::decode_snapshot(&p.snap, &String::from_utf8_lossy(&b))
            .map(|s| s.gen)
            .unwrap_or(0),
        None => 0,
    };
    let commands: Vec<Command> = log
        .iter()
        .map(|w| Command {
            at: 0,
            words: w.clone(),
        })
        .collect();
    let mut net = fresh_net();
    for c in &commands {
        replay(&mut net, &c.words);
    }
    let snap = Snapshot::of(old_gen.saturating_add(1), &net, &commands);
    write_atomic(&p.snap, record::encode_snapshot(&snap).as_bytes())?;
    remove_if_exists(&p.journal)?;
    remove_if_exists(&p.log)?;
    Ok(())
}

impl Session {
    /// Lock the namespace exclusively and load it ([`Session::load`] with
    /// [`Access::Write`]), errors as `std::io::Error`.
    pub fn open(
        dir: &Path,
        netns: Option<&str>,
        replay: Replay,
        now: Option<Time>,
    ) -> std::io::Result<Session> {
        Session::load(dir, netns, replay, now, Access::Write).map_err(Into::into)
    }

    /// Check the directory, lock namespace `netns` (`None`: `default`) as
    /// `access` says, and load it: its snapshot and journal replayed with
    /// `replay`. `now` is the wall-clock time of this invocation: each
    /// command replays at the time it ran and the namespace is left at
    /// `now` (its `net.now`), which [`Session::stage`] stamps on what it
    /// logs. `None` replays every command at time 0, for a front end whose
    /// clock starts there (the simulator).
    pub fn load(
        dir: &Path,
        netns: Option<&str>,
        replay: Replay,
        now: Option<Time>,
        access: Access,
    ) -> Result<Session, StateError> {
        let p = paths(dir, netns)?;
        ensure_private_dir(dir)?;
        ensure_private_dir(&p.dir)?;
        // An old log is migrated by a writer, so its first reader writes.
        let exclusive = access == Access::Write || std::fs::symlink_metadata(&p.log).is_ok();
        let lock = Lock::take(&p.lock, exclusive)?;
        if exclusive {
            // A writer killed mid-compaction may have left these.
            remove_if_exists(&tmp_path(&p.snap))?;
            remove_if_exists(&tmp_path(&p.journal))?;
        }
        let mut net = fresh_net();
        let clock = now.is_some();
        let snap_bytes = read_file(&p.snap)?;
        let mut migrate = None;
        let snapshot = match &snap_bytes {
            Some(b) => {
                let text = std::str::from_utf8(b).map_err(|_| StateError::Corrupt {
                    path: p.snap.clone(),
                    detail: "not UTF-8 text".into(),
                })?;
                let s = record::decode_snapshot(&p.snap, text)?;
                replay_block(&mut net, &s.block, s.count, replay, clock, &p.snap)?;
                check_counters(&net, &s, &p.snap)?;
                s
            }
            None => match read_file(&p.log)? {
                Some(b) => {
                    let cmds = decode_old_log(&p.log, &b, now.unwrap_or(Time(0)).0)?;
                    replay_all(&mut net, &cmds, replay, clock, &p.log)?;
                    let s = Snapshot::of(1, &net, &cmds);
                    migrate = Some(s.clone());
                    s
                }
                None => Snapshot::default(),
            },
        };
        let journal = match read_file(&p.journal)? {
            Some(b) => {
                let j = record::decode_journal(&p.journal, &b)?;
                if j.gen > snapshot.gen {
                    return Err(StateError::Corrupt {
                        path: p.journal.clone(),
                        detail: format!(
                            "its generation {} is newer than its snapshot's ({})",
                            j.gen, snapshot.gen
                        ),
                    });
                }
                (j.gen == snapshot.gen && migrate.is_none()).then_some(j)
            }
            None => None,
        };
        if let Some(j) = &journal {
            replay_block(&mut net, &j.block, j.count, replay, clock, &p.journal)?;
        }
        net.now = now.unwrap_or(Time(0));
        // Replayed listings marked actions used; that is history, not a
        // change the command about to run makes.
        let _ = net.actions.take_listing_changed();
        let s = Session {
            lock,
            paths: p,
            replay,
            clock,
            snapshot,
            journal,
            pending: vec![],
            net,
        };
        if let Some(snap) = migrate {
            write_atomic(&s.paths.snap, record::encode_snapshot(&snap).as_bytes())?;
            remove_if_exists(&s.paths.journal)?;
            remove_if_exists(&s.paths.log)?;
            sync_dir(&s.paths.dir)?;
        } else if exclusive && snap_bytes.is_some() && remove_if_exists(&s.paths.log)? {
            // A migration that crashed after its snapshot.
            sync_dir(&s.paths.dir)?;
        }
        Ok(s)
    }

    /// The namespace, releasing the lock.
    pub fn into_net(self) -> Net {
        self.net
    }

    /// Sizes of the store as loaded and committed so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            generation: self.snapshot.gen,
            snapshot_commands: self.snapshot.count,
            journal_commands: self.journal.as_ref().map_or(0, |j| j.count),
        }
    }

    /// Stage a successful state-changing command (tool name first), as run
    /// at the namespace's `now`, for the next [`Session::commit`].
    pub fn stage(&mut self, words: Vec<String>) {
        self.pending.push(Command {
            at: self.net.now.0,
            words,
        });
    }

    /// Record a command durably: [`Session::stage`] then
    /// [`Session::commit`].
    pub fn record(&mut self, words: Vec<String>) -> std::io::Result<()> {
        self.stage(words);
        self.commit().map_err(Into::into)
    }

    /// Commit the staged commands as one transaction: one append and one
    /// `fsync` of the journal (a new journal is written whole and renamed
    /// into place). Compacts when the journal has outgrown its bound.
    pub fn commit(&mut self) -> Result<(), StateError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if !self.lock.exclusive {
            let first = self.pending[0].words.join(" ");
            self.pending.clear();
            return Err(StateError::ReadOnly(first));
        }
        let tx = record::encode_tx(&self.pending);
        let path = self.paths.journal.clone();
        match &mut self.journal {
            Some(j) => {
                use std::os::unix::fs::FileExt;
                let f = dir::options()
                    .write(true)
                    .open(&path)
                    .map_err(|e| StateError::io(&path, e))?;
                if j.file_len != j.valid_len {
                    // Cut off a torn tail before appending after it.
                    f.set_len(j.valid_len)
                        .map_err(|e| StateError::io(&path, e))?;
                }
                f.write_all_at(tx.as_bytes(), j.valid_len)
                    .and_then(|()| f.sync_data())
                    .map_err(|e| StateError::io(&path, e))?;
                j.valid_len += tx.len() as u64;
                j.file_len = j.valid_len;
                j.transactions += 1;
                j.count += self.pending.len();
                j.block.push_str(&record::encode_block(&self.pending));
                self.pending.clear();
            }
            None => {
                let mut text = record::journal_header(self.snapshot.gen);
                text.push_str(&tx);
                write_atomic(&path, text.as_bytes())?;
                self.journal = Some(Journal {
                    gen: self.snapshot.gen,
                    count: self.pending.len(),
                    block: record::encode_block(&std::mem::take(&mut self.pending)),
                    transactions: 1,
                    valid_len: text.len() as u64,
                    file_len: text.len() as u64,
                });
            }
        }
        let journal = self.journal.as_ref().map_or(0, |j| j.count);
        if journal > COMPACT_MIN_COMMANDS.max(self.snapshot.count / 4) {
            self.compact()?;
        }
        Ok(())
    }

    /// Write the history as a new snapshot generation, without the commands
    /// later ones supersede when that provably changes nothing
    /// ([`compact`]), then start an empty journal of that generation.
    pub fn compact(&mut self) -> Result<(), StateError> {
        if !self.lock.exclusive {
            return Err(StateError::ReadOnly("compaction".into()));
        }
        let mut text = self.snapshot.block.clone();
        if let Some(j) = &self.journal {
            text.push_str(&j.block);
        }
        let all = record::decode_block(&text).map_err(|detail| StateError::Corrupt {
            path: self.paths.snap.clone(),
            detail,
        })?;
        // The counters the snapshot records are those its commands give on
        // replay (a command that failed in this run may have moved the
        // live namespace's, as a failed add moves the kernel's).
        let full = self.replay_fresh(&all, &self.paths.snap)?;
        let (mut autohandle, mut ifindex) = (full.autohandle, full.next_ifindex());
        let drop = compact::superseded(&all);
        let mut commands = all;
        if drop.iter().any(|d| *d) {
            let shorter: Vec<Command> = commands
                .iter()
                .zip(&drop)
                .filter(|(_, d)| !**d)
                .map(|(c, _)| c.clone())
                .collect();
            if let Some(net) = self.proven_equal(full, &shorter) {
                commands = shorter;
                (autohandle, ifindex) = (net.autohandle, net.next_ifindex());
            }
        }
        let gen = self
            .snapshot
            .gen
            .checked_add(1)
            .ok_or_else(|| StateError::Corrupt {
                path: self.paths.snap.clone(),
                detail: "its generation number is at its limit".into(),
            })?;
        let snap = Snapshot {
            gen,
            autohandle,
            ifindex,
            count: commands.len(),
            block: record::encode_block(&commands),
        };
        write_atomic(&self.paths.snap, record::encode_snapshot(&snap).as_bytes())?;
        self.snapshot = snap;
        // A crash here leaves the old journal, whose generation is now older
        // than the snapshot's: ignored, and replaced by the next writer.
        let header = record::journal_header(self.snapshot.gen);
        write_atomic(&self.paths.journal, header.as_bytes())?;
        self.journal = Some(Journal {
            gen: self.snapshot.gen,
            valid_len: header.len() as u64,
            file_len: header.len() as u64,
            ..Default::default()
        });
        Ok(())
    }

    /// `cmds` replayed into a fresh namespace at this session's times, left
    /// at its `now`.
    fn replay_fresh(&self, cmds: &[Command], path: &Path) -> Result<Net, StateError> {
        let mut net = fresh_net();
        replay_all(&mut net, cmds, self.replay, self.clock, path)?;
        net.now = self.net.now;
        let _ = net.actions.take_listing_changed();
        Ok(net)
    }

    /// `shorter` replayed into a fresh namespace, if it replays and its
    /// fingerprint equals that of `full` (the whole history, replayed).
    fn proven_equal(&self, mut full: Net, shorter: &[Command]) -> Option<Net> {
        let mut b = self.replay_fresh(shorter, &self.paths.snap).ok()?;
        let (fa, fb) = (
            compact::fingerprint(&mut full),
            compact::fingerprint(&mut b),
        );
        (fa == fb).then_some(b)
    }
}

/// After replaying a snapshot, its recorded counters must come out again.
fn check_counters(net: &Net, s: &Snapshot, path: &Path) -> Result<(), StateError> {
    if s.gen == 0 || (net.autohandle == s.autohandle && net.next_ifindex() == s.ifindex) {
        return Ok(());
    }
    Err(StateError::Corrupt {
        path: path.to_path_buf(),
        detail: format!(
            "replaying it gives automatic handle counter {:x} and next ifindex {} where it recorded {:x} and {}",
            net.autohandle,
            net.next_ifindex(),
            s.autohandle,
            s.ifindex
        ),
    })
}

#[cfg(test)]
mod tests;
