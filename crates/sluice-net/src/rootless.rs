//! Rootless links: a link made by a user without CAP_NET_ADMIN, inside a
//! user namespace of its own.
//!
//! Where unprivileged user namespaces are allowed
//! (`/proc/sys/user/max_user_namespaces` above 0), any user may create a
//! user namespace in which it is root (its uid mapped to 0), and network
//! namespaces owned by that user namespace, in which it may create TUN
//! devices and set addresses and routes. So a rootless link's daemon first
//! moves into a fresh user namespace ([`enter_user_namespace`]), then makes
//! an empty network namespace to live in and one per side ([`new_netns`]),
//! each with its TUN device, configured by `ip` run inside it.
//!
//! Nothing of this can be named under `/run/netns` (that needs root), so
//! the namespaces are held by the daemon's own file descriptors, whose
//! numbers the link's record keeps. When the daemon exits, however it
//! exits, the descriptors close and the namespaces and their TUN devices go
//! with them (unless a command run in one still holds it): a killed rootless
//! daemon leaves nothing but its files in the links directory.
//! `sluice link exec NAME a|b -- CMD` ([`enter`]) reaches a side through
//! `/proc/PID/ns/user` and `/proc/PID/fd/N` of the daemon, which the kernel
//! allows to the same user.
//!
//! Two things stay out of reach without root: a TUN device needs
//! `/dev/net/tun` to be readable and writable by the user (mode 0666, as most
//! distributions ship it; [`check_tun`] says so clearly when it is not), and
//! `sluice shell`'s host-side device and NAT live in the host's namespace,
//! where only root may make them.

use nix::sched::{setns, unshare, CloneFlags};
use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (linux/capability.h): a root link
/// needs both (TUN devices and addresses; `ip netns add` mounts).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Does this process hold CAP_NET_ADMIN and CAP_SYS_ADMIN in its effective
/// set, so that it makes root links (named namespaces under `/run/netns`)?
pub fn privileged() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_NET_ADMIN) != 0 && eff & (1 << CAP_SYS_ADMIN) != 0
}

/// Can this user open `/dev/net/tun` for reading and writing? The error
/// names the cause and the fix.
pub fn check_tun() -> Result<(), String> {
    use nix::unistd::{access, AccessFlags};
    let path = "/dev/net/tun";
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("{path}: {e}: this kernel has no TUN driver (modprobe tun)"))?;
    match access(path, AccessFlags::R_OK | AccessFlags::W_OK) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!(
            "{path} is not accessible to this user (mode {:04o}, owner uid {}): {e}; \
             a rootless link needs it readable and writable by everyone, as most \
             distributions ship it (as root: chmod 0666 {path}), or run sluice link as root",
            meta.mode() & 0o7777,
            meta.uid()
        )),
    }
}

/// Move this (single-threaded) process into a new user namespace in which
/// its uid and gid are 0, with every capability there.
pub fn enter_user_namespace() -> Result<(), String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| {
        let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unreadable".into());
        format!(
            "cannot create a user namespace: {e}; a rootless link needs unprivileged \
             user namespaces (/proc/sys/user/max_user_namespaces is {max}; some \
             distributions also restrict them by sysctl or AppArmor), or run it as root"
        )
    })?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("user namespace: writing /proc/self/{file}: {e}"))
    };
    write("uid_map", format!("0 {uid} 1"))?;
    // An unprivileged gid_map is only allowed once setgroups(2) is off.
    write("setgroups", "deny".into())?;
    write("gid_map", format!("0 {gid} 1"))?;
    Ok(())
}

/// Move the calling thread into a new network namespace (owned by the
/// current user namespace) and return a descriptor that holds it.
pub fn new_netns() -> Result<File, String> {
    unshare(CloneFlags::CLONE_NEWNET).map_err(|e| format!("new network namespace: {e}"))?;
    File::open("/proc/thread-self/ns/net").map_err(|e| format!("own network namespace: {e}"))
}

/// Enter the user namespace of daemon `pid` (unless already in it) and the
/// network namespace its descriptor `fd` holds; a single-threaded process only.
pub fn enter(pid: i32, fd: i32) -> Result<(), String> {
    let user_path = format!("/proc/{pid}/ns/user");
    let user = File::open(&user_path).map_err(|e| format!("{user_path}: {e}"))?;
    let net_path = format!("/proc/{pid}/fd/{fd}");
    let net = File::open(&net_path).map_err(|e| format!("{net_path}: {e}"))?;
    let same = |a: &File, b: &str| {
        let (Ok(x), Ok(y)) = (a.metadata(), std::fs::metadata(b)) else {
            return false;
        };
        (x.dev(), x.ino()) == (y.dev(), y.ino())
    };
    if !same(&user, "/proc/self/ns/user") {
        setns(&user, CloneFlags::CLONE_NEWUSER)
            .map_err(|e| format!("entering the link's user namespace: {e}"))?;
    }
    setns(&net, CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("entering the link's network namespace: {e}"))
}
