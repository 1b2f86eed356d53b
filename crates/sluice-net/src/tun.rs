//! TUN devices: a side's packets as the kernel routes them to an interface.
//!
//! A TUN device is created by `TUNSETIFF` on an open `/dev/net/tun` in the
//! network namespace the calling thread is in, and disappears when the file
//! is closed (it is not made persistent), so a daemon that dies, however it
//! dies, leaves no device behind. `IFF_NO_PI`: each read is exactly one IP
//! packet, each write one packet. The file is non-blocking; the daemon waits
//! for it with epoll and reads it in batches.
//!
//! Offloads: the device is opened with `IFF_VNET_HDR` and `TUNSETOFFLOAD`
//! enables checksum offload, TSO (IPv4, IPv6, ECN) and, where the kernel
//! has it (Linux 6.2 on), USO. The kernel then hands bulk TCP over as GSO
//! packets of up to 64 KiB behind a virtio-net header ([`crate::vnet`]) and
//! takes them back the same way: one read and one write move what the wire
//! carries as ~45 packets. A kernel without `IFF_VNET_HDR` gets a plain
//! device, and GSO packets written to it are segmented first.

use crate::io::PacketIo;
use crate::vnet::{VnetHdr, VNET_HDR_LEN};
use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use sluice_core::gso;
use sluice_core::packet::Packet;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const IFNAMSIZ: usize = 16;

/// `TUN_F_*` offloads (include/uapi/linux/if_tun.h).
const TUN_F_CSUM: u32 = 0x01;
const TUN_F_TSO4: u32 = 0x02;
const TUN_F_TSO6: u32 = 0x04;
const TUN_F_TSO_ECN: u32 = 0x08;
const TUN_F_USO4: u32 = 0x20;
const TUN_F_USO6: u32 = 0x40;

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
    // TUNSETOFFLOAD = _IOW('T', 208, unsigned int); the argument is the flags themselves.
    nix::ioctl_write_int_bad!(tunsetoffload, 0x400454d0);
}
use ioctl::{tunsetiff, tunsetoffload};

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    vnet: bool,
}

impl Tun {
    /// Create the TUN device `name` in the calling thread's network
    /// namespace, with offloads if the kernel has them.
    pub fn create(name: &str) -> std::io::Result<Tun> {
        match Tun::open(name, true) {
            Ok(t) => Ok(t),
            Err(e) if e.raw_os_error() == Some(Errno::EINVAL as i32) => Tun::open(name, false),
            Err(e) => Err(e),
        }
    }

    /// Create the TUN device `name` without offloads: one wire packet per read.
    pub fn create_plain(name: &str) -> std::io::Result<Tun> {
        Tun::open(name, false)
    }

    fn open(name: &str, vnet: bool) -> std::io::Result<Tun> {
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
            flags: IFF_TUN | IFF_NO_PI | if vnet { IFF_VNET_HDR } else { 0 },
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: `req` is a valid ifreq for the duration of the call and `fd` is open.
        unsafe { tunsetiff(fd.as_raw_fd(), &req) }?;
        if vnet {
            let tso = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            // SAFETY: an integer argument on an open TUN file.
            let with_uso =
                unsafe { tunsetoffload(fd.as_raw_fd(), (tso | TUN_F_USO4 | TUN_F_USO6) as _) };
            if with_uso.is_err() {
                // SAFETY: as above.
                unsafe { tunsetoffload(fd.as_raw_fd(), tso as _) }?;
            }
        }
        Ok(Tun {
            fd,
            name: name.into(),
            vnet,
        })
    }

    /// Does the device carry offloads (a virtio-net header on every packet)?
    pub fn offloads(&self) -> bool {
        self.vnet
    }

    fn write(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<bool> {
        match nix::sys::uio::writev(&self.fd, bufs) {
            Ok(_) => Ok(true),
            // The device is down or its queue to the stack is full: a drop, as on a wire.
            Err(Errno::EAGAIN) | Err(Errno::EIO) | Err(Errno::ENOBUFS) => Ok(false),
            Err(Errno::EINVAL) => Ok(false),
            Err(e) => Err(e.into()),
        }
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
    fn recv(
        &mut self,
        hdr: &mut [u8; VNET_HDR_LEN],
        buf: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        let r = if self.vnet {
            let mut iov = [IoSliceMut::new(hdr), IoSliceMut::new(buf)];
            nix::sys::uio::readv(&self.fd, &mut iov).map(|n| n.saturating_sub(VNET_HDR_LEN))
        } else {
            nix::unistd::read(&self.fd, buf)
        };
        match r {
            Ok(n) => Ok(Some(n)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn vnet_hdr(&self) -> bool {
        self.vnet
    }

    fn send(&mut self, pkt: &Packet) -> std::io::Result<bool> {
        if self.vnet {
            let hdr = VnetHdr::of(pkt).emit();
            return self.write(&[IoSlice::new(&hdr), IoSlice::new(&pkt.data)]);
        }
        if pkt.gso.is_none() && pkt.csum_partial.is_none() {
            return self.write(&[IoSlice::new(&pkt.data)]);
        }
        // A device without offloads takes finished wire packets only.
        let Ok(segs) = gso::segment(pkt) else {
            return Ok(false);
        };
        let mut all = true;
        for mut seg in segs {
            all &=
                gso::checksum_help(&mut seg).is_ok() && self.write(&[IoSlice::new(&seg.data)])?;
        }
        Ok(all)
    }
}
