//! Qdisc and class handles: the kernel's 32-bit `major:minor`.
//!
//! A qdisc is named `major:` (minor 0), a class `major:minor`; both halves are
//! hexadecimal in tc's syntax. `TC_H_ROOT` (ffff:ffff) means "root" and
//! `TC_H_UNSPEC` (0) "none"; `ffff:fff1` is the ingress/clsact parent.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 32-bit traffic-control handle or class id.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Handle(pub u32);

impl Handle {
    /// `TC_H_ROOT`: the root of the egress tree.
    pub const ROOT: Handle = Handle(0xffff_ffff);
    /// `TC_H_UNSPEC`: no handle.
    pub const UNSPEC: Handle = Handle(0);
    /// `TC_H_INGRESS`: the parent id of the ingress and clsact qdiscs.
    pub const INGRESS: Handle = Handle(0xffff_fff1);
    /// `TC_H_CLSACT` (same value as ingress).
    pub const CLSACT: Handle = Handle::INGRESS;
    /// Minor of the clsact ingress hook (`ffff:fff2`).
    pub const MIN_INGRESS: u16 = 0xfff2;
    /// Minor of the clsact egress hook (`ffff:fff3`).
    pub const MIN_EGRESS: u16 = 0xfff3;

    /// `major:minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        Handle(((major as u32) << 16) | minor as u32)
    }
    /// The major number (qdisc id).
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }
    /// The minor number (class id within the qdisc).
    pub const fn minor(self) -> u16 {
        self.0 as u16
    }
    /// `major:0`: the qdisc this class belongs to.
    pub const fn qdisc(self) -> Handle {
        Handle(self.0 & 0xffff_0000)
    }
    /// True for `TC_H_UNSPEC`.
    pub const fn is_unspec(self) -> bool {
        self.0 == 0
    }
    /// True for `TC_H_ROOT`.
    pub const fn is_root(self) -> bool {
        self.0 == 0xffff_ffff
    }

    /// `get_qdisc_handle`: `1:`, `1`, `none`; a minor part is refused.
    pub fn parse_qdisc(s: &str) -> Option<Handle> {
        if s == "none" {
            return Some(Handle::UNSPEC);
        }
        let (maj, rest) = crate::units::strtoul(s, 16)?;
        if maj >= 1 << 16 || !(rest.is_empty() || rest.starts_with(':')) {
            return None;
        }
        // iproute2 accepts "1:" and ignores anything after ':'.
        Some(Handle((maj as u32) << 16))
    }

    /// `get_tc_classid`: `root`, `none`, `1:10`, `:10`, `1:`, `10` (a bare number is the whole id).
    ///
    /// As in iproute2, the major part is `strtoul`'s result stored in a
    /// `__u32`: only its last eight hex digits count (the minor part's too) (`98765fedcb` is
    /// `765f:edcb`), and the 16-bit check before a `:` sees that truncation.
    pub fn parse_classid(s: &str) -> Option<Handle> {
        match s {
            "root" => return Some(Handle::ROOT),
            "none" => return Some(Handle::UNSPEC),
            _ => {}
        }
        let (maj, rest) = match crate::units::strtoul(s, 16) {
            Some((v, r)) => (v as u32, r),
            None if s.starts_with(':') => (0, s),
            None => return None,
        };
        if let Some(min_s) = rest.strip_prefix(':') {
            if maj >= 1 << 16 {
                return None;
            }
            let (min, tail) = if min_s.is_empty() {
                (0, "")
            } else {
                crate::units::strtoul(min_s, 16)?
            };
            let min = min as u32; // a __u32 too
            if !tail.is_empty() || min >= 1 << 16 {
                return None;
            }
            Some(Handle((maj << 16) | min))
        } else if rest.is_empty() {
            Some(Handle(maj))
        } else {
            None
        }
    }
}

impl fmt::Display for Handle {
    /// `print_tc_classid`: `root`, `none`, `:a`, `1:`, `1:a`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            write!(f, "root")
        } else if self.is_unspec() {
            write!(f, "none")
        } else if self.major() == 0 {
            write!(f, ":{:x}", self.minor())
        } else if self.minor() == 0 {
            write!(f, "{:x}:", self.major())
        } else {
            write!(f, "{:x}:{:x}", self.major(), self.minor())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_like_iproute2() {
        assert_eq!(Handle::parse_classid("1:10"), Some(Handle::new(1, 0x10)));
        assert_eq!(Handle::parse_classid(":1"), Some(Handle::new(0, 1)));
        assert_eq!(Handle::parse_classid("ffff:"), Some(Handle::new(0xffff, 0)));
        assert_eq!(Handle::parse_classid("root"), Some(Handle::ROOT));
        assert_eq!(Handle::parse_classid("1:10000"), None);
        assert_eq!(Handle::parse_classid("x"), None);
        // A __u32 keeps strtoul's last eight hex digits (tdc fw b7ff).
        assert_eq!(
            Handle::parse_classid("98765fedcb"),
            Some(Handle::new(0x765f, 0xedcb))
        );
        assert_eq!(
            Handle::parse_classid("100000001:2"),
            Some(Handle::new(1, 2))
        );
        assert_eq!(Handle::parse_qdisc("10:"), Some(Handle::new(0x10, 0)));
        assert_eq!(Handle::new(1, 0x10).to_string(), "1:10");
        assert_eq!(Handle::new(0x8001, 0).to_string(), "8001:");
        assert_eq!(Handle::new(0, 1).to_string(), ":1");
    }
}
