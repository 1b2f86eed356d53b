//! The private state directory and the files in it.
//!
//! `sluice tc` runs as root as often as not, and its state directory is a
//! path anyone could guess. So it is per effective uid and private: the
//! directory is created mode 0700 whatever the umask, and every time it is
//! opened it is checked with `lstat` — a real directory (not a symlink to
//! one), owned by the effective uid, with no group or other permissions.
//! A directory that fails is refused, not repaired: another user planted it,
//! or the owner loosened it on purpose, and either way sluice must not
//! replay what is in it. Inside, every file is opened with `O_NOFOLLOW`
//! (a planted symlink fails to open instead of redirecting a root-owned
//! write) and created mode 0600, so no other user can even hold a lock on
//! it (`flock` works on a read-only descriptor, which a 0644 lock file
//! would have handed out).

use super::StateError;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// What is wrong with a state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirProblem {
    /// It is a symbolic link (to whatever it points at).
    Symlink,
    /// It exists but is not a directory.
    NotADirectory,
    /// It belongs to another user.
    Owner {
        /// The directory's owner.
        uid: u32,
        /// This process's effective uid.
        euid: u32,
    },
    /// Its group or other permission bits are set.
    Mode(u32),
}

impl std::fmt::Display for DirProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirProblem::Symlink => write!(f, "it is a symbolic link"),
            DirProblem::NotADirectory => write!(f, "it is not a directory"),
            DirProblem::Owner { uid, euid } => {
                write!(f, "it is owned by uid {uid}, not by uid {euid} (this user)")
            }
            DirProblem::Mode(m) => write!(
                f,
                "its mode is {:04o}: group and others have access (it must be 0700)",
                m & 0o7777
            ),
        }
    }
}

/// The state directory: `$SLUICE_STATE_DIR` when set; else
/// `$XDG_RUNTIME_DIR/sluice` when `$XDG_RUNTIME_DIR` is a directory of this
/// user that no one else may write; else `/tmp/sluice-<euid>`. Only the
/// path: [`ensure_private_dir`] creates and checks it.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SLUICE_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    default_dir(
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        euid(),
    )
}

/// The default directory for user `uid`, given `$XDG_RUNTIME_DIR`.
pub(crate) fn default_dir(xdg: Option<PathBuf>, uid: u32) -> PathBuf {
    if let Some(x) = xdg.filter(|x| x.is_absolute()) {
        let usable = fs::symlink_metadata(&x)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0);
        if usable {
            return x.join("sluice");
        }
    }
    PathBuf::from(format!("/tmp/sluice-{uid}"))
}

/// Check that `dir` is a private directory of this user: `lstat` says a
/// directory (not a symlink), owned by the effective uid, no group or other
/// permissions. The live plane checks its `links` directory with this too.
pub fn check_private_dir(dir: &Path) -> Result<(), StateError> {
    let m = fs::symlink_metadata(dir).map_err(|e| StateError::io(dir, e))?;
    let problem = if m.file_type().is_symlink() {
        Some(DirProblem::Symlink)
    } else if !m.is_dir() {
        Some(DirProblem::NotADirectory)
    } else if m.uid() != euid() {
        Some(DirProblem::Owner {
            uid: m.uid(),
            euid: euid(),
        })
    } else if m.mode() & 0o077 != 0 {
        Some(DirProblem::Mode(m.mode()))
    } else {
        None
    };
    match problem {
        Some(problem) => Err(StateError::UnsafeDir {
            path: dir.to_path_buf(),
            problem,
        }),
        None => Ok(()),
    }
}

/// Create `dir` mode 0700 if it does not exist (its parents as usual), then
/// [`check_private_dir`] it. A directory this call creates gets exactly
/// 0700, whatever the umask; an existing one is checked, never changed.
pub fn ensure_private_dir(dir: &Path) -> Result<(), StateError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            fs::create_dir_all(parent).map_err(|e| StateError::io(parent, e))?;
        }
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // The umask may have taken bits off 0700 (never added any).
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| StateError::io(dir, e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(StateError::io(dir, e)),
    }
    check_private_dir(dir)
}

/// The state directory, created if need be and checked ([`state_dir`],
/// [`ensure_private_dir`]).
pub fn private_state_dir() -> Result<PathBuf, StateError> {
    let d = state_dir();
    ensure_private_dir(&d)?;
    Ok(d)
}

/// Open options for a file in the private directory: never through a
/// symlink, close-on-exec (Rust's default), created 0600.
pub(crate) fn options() -> fs::OpenOptions {
    let mut o = fs::OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW).mode(0o600);
    o
}

/// Open `path` for reading (no symlinks; a FIFO planted in its place must
/// not block the open); `None` when it does not exist.
pub(crate) fn open_existing(path: &Path) -> Result<Option<fs::File>, StateError> {
    let mut o = fs::OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    match o.open(path) {
        Ok(f) => {
            let m = f.metadata().map_err(|e| StateError::io(path, e))?;
            if !m.is_file() {
                return Err(StateError::Corrupt {
                    path: path.to_path_buf(),
                    detail: "not a regular file".into(),
                });
            }
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io(path, e)),
    }
}

/// Make a rename or unlink in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StateError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StateError::io(dir, e))
}

/// Remove `path` if it exists.
pub(crate) fn remove_if_exists(path: &Path) -> Result<bool, StateError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StateError::io(path, e)),
    }
}

/// Write `bytes` to `path` atomically: a temporary file beside it (a fixed
/// name: writers hold the exclusive lock), synced, renamed over `path`, and
/// the directory synced.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    use std::io::Write;
    let tmp = tmp_path(path);
    remove_if_exists(&tmp)?;
    let mut f = options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| StateError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| StateError::io(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| StateError::io(path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// `NAME.tmp` beside `NAME`.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// A lock on one namespace's files: `flock` on `NAME.lock` (0600, no
/// symlinks), shared for commands that only read, exclusive for writers.
/// Released when dropped (the descriptor closes).
#[derive(Debug)]
pub(crate) struct Lock {
    _file: fs::File,
    pub(crate) exclusive: bool,
}

impl Lock {
    pub(crate) fn take(path: &Path, exclusive: bool) -> Result<Lock, StateError> {
        use std::os::fd::AsRawFd;
        let f = options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StateError::io(path, e))?;
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(StateError::io(path, e));
            }
        }
        Ok(Lock {
            _file: f,
            exclusive,
        })
    }
}
