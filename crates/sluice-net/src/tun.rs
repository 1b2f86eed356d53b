//! TUN devices: a side's packets as the kernel routes them to an interface.
//!
//! A TUN device is created by `TUNSETIFF` on an open `/dev/net/tun` in the
//! network namespace the calling thread is in, and disappears when the file
//! is closed (it is not made persistent), so a daemon that dies, however it
//! dies, leaves no device behind. `IFF_NO_PI`: each read is exactly one IP
//! packet, each write one packet. The file is non-blocking; the daemon waits
//! for it with epoll and reads it in batches.

use crate::io::PacketIo;
use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFNAMSIZ: usize = 16;

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (the rest
/// of the union is padding).
#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    flags: i16,
    _pad: [u8; 22],
}

#[allow(missing_docs)]
mod ioctl {
    // TUNSETIFF = _IOW('T', 202, int); the kernel reads a `struct ifreq` through it.
    nix::ioctl_write_ptr_bad!(tunsetiff, 0x400454ca, super::IfReq);
}
use ioctl::tunsetiff;

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Create the TUN device `name` in the calling thread's network namespace.
    pub fn create(name: &str) -> std::io::Result<Tun> {
        if name.is_empty() || name.len() >= IFNAMSIZ || name.contains(['/', ' ', '\0']) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("invalid interface name {name:?}"),
            ));
        }
        let fd = open(
            "/dev/net/tun",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut req = IfReq {
            name: [0; IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: `req` is a valid ifreq for the duration of the call and `fd` is open.
        unsafe { tunsetiff(fd.as_raw_fd(), &req) }?;
        Ok(Tun {
            fd,
            name: name.into(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl PacketIo for Tun {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match nix::unistd::read(&self.fd, buf) {
            Ok(n) => Ok(Some(n)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool> {
        match nix::unistd::write(&self.fd, pkt) {
            Ok(_) => Ok(true),
            // The device is down or its queue to the stack is full: a drop, as on a wire.
            Err(Errno::EAGAIN) | Err(Errno::EIO) | Err(Errno::ENOBUFS) => Ok(false),
            Err(Errno::EINVAL) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
