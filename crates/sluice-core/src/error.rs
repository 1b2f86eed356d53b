//! Errors the core returns, shaped like the kernel's answers to netlink.
//!
//! The kernel answers a bad request with an errno and, usually, an extended-ack
//! message ("Error: Specified qdisc kind is unknown."). iproute2 prints the
//! message when there is one and `RTNETLINK answers: <strerror>` otherwise. The
//! core keeps both so that the front end can print exactly that.

use thiserror::Error;

/// The errno values the scheduler uses, with the text `strerror` gives.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    EPERM,
    ENOENT,
    EINTR,
    E2BIG,
    ENOMEM,
    EBUSY,
    EEXIST,
    ENODEV,
    EINVAL,
    ENOSPC,
    ERANGE,
    ENOBUFS,
    EOPNOTSUPP,
    ELOOP,
    ENOTSUPP,
    EAGAIN,
    ENOSYS,
    EPROTONOSUPPORT,
    EBADMSG,
}

impl Errno {
    /// What glibc's `strerror` says for this errno.
    pub fn strerror(self) -> &'static str {
        match self {
            Errno::EPERM => "Operation not permitted",
            Errno::ENOENT => "No such file or directory",
            Errno::EINTR => "Interrupted system call",
            Errno::E2BIG => "Argument list too long",
            Errno::ENOMEM => "Cannot allocate memory",
            Errno::EBUSY => "Device or resource busy",
            Errno::EEXIST => "File exists",
            Errno::ENODEV => "No such device",
            Errno::EINVAL => "Invalid argument",
            Errno::ENOSPC => "No space left on device",
            Errno::ERANGE => "Numerical result out of range",
            Errno::ENOBUFS => "No buffer space available",
            Errno::EOPNOTSUPP => "Operation not supported",
            Errno::ELOOP => "Too many levels of symbolic links",
            Errno::ENOTSUPP => "Unknown error 524",
            Errno::EAGAIN => "Resource temporarily unavailable",
            Errno::ENOSYS => "Function not implemented",
            Errno::EPROTONOSUPPORT => "Protocol not supported",
            Errno::EBADMSG => "Bad message",
        }
    }
}

/// A refused configuration request: what the kernel would answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}", self.describe())]
pub struct TcError {
    /// The errno the request fails with.
    pub errno: Errno,
    /// The extended-ack text, if the kernel gives one.
    pub extack: Option<String>,
}

impl TcError {
    /// An error with an extended-ack message.
    pub fn msg(errno: Errno, extack: impl Into<String>) -> Self {
        TcError {
            errno,
            extack: Some(extack.into()),
        }
    }
    /// A bare errno, as older kernel paths answer.
    pub fn errno(errno: Errno) -> Self {
        TcError {
            errno,
            extack: None,
        }
    }
    /// `EINVAL` with a message: the most common refusal.
    pub fn inval(extack: impl Into<String>) -> Self {
        Self::msg(Errno::EINVAL, extack)
    }
    /// The text iproute2 prints for this error (without the trailing newline).
    pub fn describe(&self) -> String {
        match &self.extack {
            Some(m) if m.ends_with('.') => format!("Error: {m}"),
            Some(m) => format!("Error: {m}."),
            None => format!("RTNETLINK answers: {}", self.errno.strerror()),
        }
    }
}

/// Shorthand for results of configuration requests.
pub type TcResult<T> = Result<T, TcError>;
