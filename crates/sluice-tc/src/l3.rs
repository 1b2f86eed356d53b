//! A namespace's IP addresses and routes, kept as the kernel keeps them for
//! `ip address` and `ip route` (net/ipv4/devinet.c, fib_frontend.c,
//! net/ipv6/addrconf.c).
//!
//! Nothing here carries packets: sluice's qdiscs never route. The state is
//! what a script that configures addresses around its tc lines expects to
//! find, with the kernel's side effects of each change, because those are
//! what `ip address show` and `ip route show` print:
//!
//! - **IPv4 addresses** stay on a device whatever its state. The first on a
//!   subnet is *primary*; another on the same subnet (same prefix length) is
//!   *secondary*, listed after all primaries; deleting a primary deletes its
//!   secondaries (`promote_secondaries` is off by default). A primary inserts
//!   after the last primary of equal or wider scope. `lo` gets `127.0.0.1/8`
//!   each time it comes up (it stays when `lo` goes down).
//! - **IPv4 routes** live in the main table. A primary address on an up
//!   device brings its subnet's route (`proto kernel scope link src ADDR`);
//!   a device going down takes every route through it, an address going
//!   takes the routes that name it as their source. The local table (the
//!   `local` and `broadcast` routes) follows from the addresses and is
//!   derived when listed.
//! - **IPv6** (enabled, as in a fresh namespace; [`L3::ipv6`] off models
//!   `disable_ipv6`): `::1` on `lo` when it comes up, a link-local address
//!   (`fe80::` + EUI-64 of the MAC) on a device once it is up with a carrier,
//!   every IPv6 address dropped when the device goes down. A new address is
//!   `tentative` while duplicate address detection runs: in the kernel from
//!   when the link is ready for a random delay below `rtr_solicit_delay` (1 s)
//!   plus one `retrans_time` (1 s); here for a delay drawn from the
//!   namespace's seed, so a script sees what it would see within 1-2 s of
//!   bringing a link up. `nodad` addresses and `lo`'s are never tentative.
//!   Addresses of a scope are listed before those of narrower scope, the
//!   newest first. The prefix routes (`proto kernel metric 256`) follow from
//!   the addresses of up devices and are derived when listed; routes a user
//!   adds are kept, and go with their device when it goes down.

use sluice_core::device::{DevKind, Device};
use sluice_core::time::{Duration, Time};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `RT_SCOPE_UNIVERSE` (printed `global`).
pub const SCOPE_GLOBAL: u8 = 0;
/// `RT_SCOPE_LINK`.
pub const SCOPE_LINK: u8 = 253;
/// `RT_SCOPE_HOST`.
pub const SCOPE_HOST: u8 = 254;
/// `RTPROT_KERNEL`: routes the kernel made from an address.
pub const PROTO_KERNEL: u8 = 2;
/// `RTPROT_BOOT`: what `ip route add` sets unless told otherwise.
pub const PROTO_BOOT: u8 = 3;

/// One address on a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// The device's index.
    pub ifindex: u32,
    /// The local address.
    pub addr: IpAddr,
    /// Prefix length.
    pub plen: u8,
    /// IPv4 broadcast address, if one was given (`brd`).
    pub brd: Option<Ipv4Addr>,
    /// Scope (`RT_SCOPE_*`).
    pub scope: u8,
    /// IPv4 label (the device's name unless given).
    pub label: String,
    /// `IFA_F_SECONDARY` (IPv4).
    pub secondary: bool,
    /// `IFA_F_NODAD` (IPv6).
    pub nodad: bool,
    /// `IFA_F_NOPREFIXROUTE`: no subnet route for it.
    pub noprefixroute: bool,
    /// IPv6 duplicate address detection.
    pub dad: Dad,
}

/// Where an IPv6 address's duplicate address detection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dad {
    /// Finished, or never done (IPv4, `nodad`, `lo`).
    Done,
    /// Waiting for the link to be ready (up, with a carrier).
    Waiting,
    /// Running: tentative until then.
    Until(Time),
}

impl IfAddr {
    /// An address with no flags, its detection done.
    pub fn new(ifindex: u32, addr: IpAddr, plen: u8, scope: u8) -> Self {
        IfAddr {
            ifindex,
            addr,
            plen,
            brd: None,
            scope,
            label: String::new(),
            secondary: false,
            nodad: false,
            noprefixroute: false,
            dad: Dad::Done,
        }
    }

    /// `IFA_F_TENTATIVE` at `now`.
    pub fn tentative(&self, now: Time) -> bool {
        match self.dad {
            Dad::Done => false,
            Dad::Waiting => true,
            Dad::Until(t) => now < t,
        }
    }

    /// The subnet (address with the host bits cleared).
    pub fn subnet(&self) -> IpAddr {
        network(self.addr, self.plen)
    }
}

/// A route someone added (or, for IPv4, the kernel's subnet route).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination network (host bits clear).
    pub dst: IpAddr,
    /// Prefix length.
    pub plen: u8,
    /// Gateway.
    pub via: Option<IpAddr>,
    /// Output device.
    pub ifindex: u32,
    /// `rtm_protocol`.
    pub proto: u8,
    /// `rtm_scope`.
    pub scope: u8,
    /// Preferred source address.
    pub src: Option<IpAddr>,
    /// Metric (`priority`).
    pub metric: u32,
}

/// The addresses and routes of a namespace.
#[derive(Clone, Debug)]
pub struct L3 {
    /// Addresses, each device's IPv4 ones in the kernel's list order, then
    /// IPv6 ones in theirs.
    pub addrs: Vec<IfAddr>,
    /// Main-table routes, in the order the kernel lists them
    /// ([`L3::insert_route`]).
    pub routes: Vec<Route>,
    /// IPv6 enabled (`net.ipv6.conf.*.disable_ipv6=0`, the default).
    pub ipv6: bool,
    /// Devices that were ready (up with a carrier) after the last change.
    ready: Vec<u32>,
    /// Devices that were up after the last change.
    up: Vec<u32>,
}

impl Default for L3 {
    fn default() -> Self {
        L3 {
            addrs: vec![],
            routes: vec![],
            ipv6: true,
            ready: vec![],
            up: vec![],
        }
    }
}

/// `addr` with all but its first `plen` bits cleared.
pub fn network(addr: IpAddr, plen: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = if plen == 0 {
                0
            } else {
                u32::MAX << (32 - plen.min(32))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if plen == 0 {
                0
            } else {
                u128::MAX << (128 - plen.min(128))
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// Does `net/plen` contain `a`?
pub fn covers(net: IpAddr, plen: u8, a: IpAddr) -> bool {
    net.is_ipv4() == a.is_ipv4() && network(a, plen) == network(net, plen)
}

/// The IPv4 subnet broadcast address (`brd +`).
pub fn broadcast(a: Ipv4Addr, plen: u8) -> Ipv4Addr {
    let host = if plen >= 32 { 0 } else { u32::MAX >> plen };
    Ipv4Addr::from(u32::from(a) | host)
}

/// Has the device a carrier? A veth has one while its peer is up.
pub fn carrier(devices: &[Device], d: &Device) -> bool {
    match &d.kind {
        DevKind::Veth { peer } => devices.iter().any(|p| &p.info.name == peer && p.up),
        _ => true,
    }
}

/// Up with a carrier: `netif_running && netif_oper_up`, when IPv6 configures it.
fn ready(devices: &[Device], d: &Device) -> bool {
    d.up && carrier(devices, d)
}

/// The link-local address a device with MAC `mac` gets (EUI-64).
fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let mut b = [0u8; 16];
    b[0] = 0xfe;
    b[1] = 0x80;
    b[8] = mac[0] ^ 0x02;
    b[9] = mac[1];
    b[10] = mac[2];
    b[11] = 0xff;
    b[12] = 0xfe;
    b[13] = mac[3];
    b[14] = mac[4];
    b[15] = mac[5];
    Ipv6Addr::from(b)
}

/// The MAC address `ip link show` prints for a device (the one it was
/// given, else one derived from its index), if it has one.
pub fn mac_of(d: &Device) -> Option<[u8; 6]> {
    match d.kind {
        DevKind::Loopback => Some([0; 6]),
        DevKind::Tun => None,
        _ => Some(
            d.address
                .unwrap_or([2, 0, 0, 0, (d.ifindex >> 8) as u8, d.ifindex as u8]),
        ),
    }
}

impl L3 {
    /// The addresses of device `ifindex`.
    pub fn of(&self, ifindex: u32) -> impl Iterator<Item = &IfAddr> {
        self.addrs.iter().filter(move |a| a.ifindex == ifindex)
    }

    /// Insert an address where the kernel's list would have it: IPv4
    /// primaries after the last primary of equal or wider scope,
    /// secondaries last (`__inet_insert_ifa`); IPv6 before the first of
    /// equal or narrower scope (`ipv6_link_dev_addr`). The caller has
    /// checked it is new.
    pub fn insert(&mut self, a: IfAddr) {
        let mine: Vec<usize> = (0..self.addrs.len())
            .filter(|&i| {
                let x = &self.addrs[i];
                x.ifindex == a.ifindex && x.addr.is_ipv4() == a.addr.is_ipv4()
            })
            .collect();
        // The place among the device's addresses of the family: before
        // `mine[k]`, or after them all when k == mine.len().
        let k = if a.addr.is_ipv4() {
            let mut k = 0;
            for (j, &i) in mine.iter().enumerate() {
                let x = &self.addrs[i];
                if a.secondary || (!x.secondary && a.scope <= x.scope) {
                    k = j + 1;
                }
            }
            k
        } else {
            // Source scopes: global above link-local above host.
            let rank = |x: &IfAddr| match x.scope {
                SCOPE_GLOBAL => 2,
                SCOPE_LINK => 1,
                _ => 0,
            };
            mine.iter()
                .position(|&i| rank(&a) >= rank(&self.addrs[i]))
                .unwrap_or(mine.len())
        };
        let at = match (mine.get(k), mine.last()) {
            (Some(&i), _) => i,
            (None, Some(&last)) => last + 1,
            (None, None) => self.addrs.len(),
        };
        self.addrs.insert(at, a);
    }

    /// Remove address `i` with its consequences: an IPv4 primary takes its
    /// secondaries, and routes preferring a removed address as source go.
    pub fn remove(&mut self, i: usize) {
        let a = self.addrs.remove(i);
        let mut gone = vec![a.addr];
        if a.addr.is_ipv4() && !a.secondary {
            let subnet = a.subnet();
            self.addrs.retain(|x| {
                let drop = x.ifindex == a.ifindex
                    && x.secondary
                    && x.plen == a.plen
                    && x.subnet() == subnet;
                if drop {
                    gone.push(x.addr);
                }
                !drop
            });
        }
        self.routes
            .retain(|r| !r.src.is_some_and(|s| gone.contains(&s)));
        // The device's last IPv4 address: IP is off on it, its routes go
        // (`fib_disable_ip`).
        if a.addr.is_ipv4() && !self.of(a.ifindex).any(|x| x.addr.is_ipv4()) {
            self.routes
                .retain(|r| r.ifindex != a.ifindex || r.dst.is_ipv6());
        }
    }

    /// Add a route where the kernel's dump would list it: by family, then
    /// destination, longer prefixes first, then metric; among routes with
    /// all three the same, last (`append`) or first (`prepend`).
    pub fn insert_route(&mut self, r: Route, first: bool) {
        let key = |x: &Route| -> (bool, u128, u8, u32) {
            let d = match x.dst {
                IpAddr::V4(a) => u32::from(a) as u128,
                IpAddr::V6(a) => u128::from(a),
            };
            (x.dst.is_ipv6(), d, u8::MAX - x.plen, x.metric)
        };
        let k = key(&r);
        let at = if first {
            self.routes.iter().position(|x| key(x) >= k)
        } else {
            self.routes.iter().position(|x| key(x) > k)
        };
        self.routes.insert(at.unwrap_or(self.routes.len()), r);
    }

    /// The kernel's subnet route for an IPv4 primary on an up device
    /// (`fib_add_ifaddr`; on `lo` it is a `local` route, in the local table).
    pub fn add_subnet_route(&mut self, a: &IfAddr, d: &Device) {
        let main = d.up && d.kind != DevKind::Loopback;
        if main && a.addr.is_ipv4() && !a.secondary && a.plen < 32 && !a.noprefixroute {
            let r = Route {
                dst: a.subnet(),
                plen: a.plen,
                via: None,
                ifindex: a.ifindex,
                proto: PROTO_KERNEL,
                scope: SCOPE_LINK,
                src: Some(a.addr),
                metric: 0,
            };
            self.insert_route(r, false);
        }
    }

    /// Take up a change of the devices (up, down, added, deleted): what the
    /// kernel's NETDEV_UP/DOWN/CHANGE/UNREGISTER notifiers do to addresses
    /// and routes. `seed` and `now` time duplicate address detection.
    pub fn sync(&mut self, devices: &[Device], seed: u64, now: Time) {
        let exists = |i: u32| devices.iter().any(|d| d.ifindex == i);
        self.addrs.retain(|a| exists(a.ifindex));
        self.routes.retain(|r| exists(r.ifindex));
        for d in devices {
            let (was_up, was_ready) = (
                self.up.contains(&d.ifindex),
                self.ready.contains(&d.ifindex),
            );
            let is_ready = ready(devices, d);
            if was_up && !d.up {
                // NETDEV_DOWN: routes through it go, and all its IPv6 addresses.
                self.routes.retain(|r| r.ifindex != d.ifindex);
                self.addrs
                    .retain(|a| a.ifindex != d.ifindex || a.addr.is_ipv4());
            }
            if !was_up && d.up {
                if d.kind == DevKind::Loopback {
                    self.ensure_loopback(d.ifindex);
                }
                let mine: Vec<IfAddr> = self.of(d.ifindex).cloned().collect();
                for a in &mine {
                    self.add_subnet_route(a, d);
                }
            }
            if !was_ready && is_ready && self.ipv6 {
                self.link_ready(d, seed, now);
            }
        }
        self.up = devices.iter().filter(|d| d.up).map(|d| d.ifindex).collect();
        self.ready = devices
            .iter()
            .filter(|d| ready(devices, d))
            .map(|d| d.ifindex)
            .collect();
    }

    /// `lo` up: 127.0.0.1/8 (again, if it was deleted) and ::1.
    fn ensure_loopback(&mut self, ifindex: u32) {
        let v4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
        if !self.of(ifindex).any(|a| a.addr == v4) {
            self.insert(IfAddr {
                label: "lo".into(),
                ..IfAddr::new(ifindex, v4, 8, SCOPE_HOST)
            });
        }
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        if self.ipv6 && !self.of(ifindex).any(|a| a.addr == v6) {
            self.insert(IfAddr::new(ifindex, v6, 128, SCOPE_HOST));
        }
    }

    /// The link became ready: start duplicate address detection of the
    /// waiting addresses, and give an Ethernet-like device its link-local.
    fn link_ready(&mut self, d: &Device, seed: u64, now: Time) {
        if d.kind == DevKind::Loopback {
            return;
        }
        let until = |addr: IpAddr| Dad::Until(now + dad_time(seed, d.ifindex, addr));
        for a in self.addrs.iter_mut() {
            if a.ifindex == d.ifindex && a.dad == Dad::Waiting {
                a.dad = until(a.addr);
            }
        }
        let Some(mac) = mac_of(d).filter(|_| d.kind != DevKind::Tun) else {
            return;
        };
        let ll = IpAddr::V6(link_local(mac));
        if !self.of(d.ifindex).any(|a| a.addr == ll) {
            self.insert(IfAddr {
                dad: until(ll),
                ..IfAddr::new(d.ifindex, ll, 64, SCOPE_LINK)
            });
        }
    }

    /// Is `d` ready now (for an address added to it: DAD starts at once)?
    pub fn is_ready(&self, ifindex: u32) -> bool {
        self.ready.contains(&ifindex)
    }

    /// Is `a` one of the namespace's own addresses?
    pub fn is_local(&self, a: IpAddr) -> bool {
        self.addrs.iter().any(|x| x.addr == a)
    }
}

/// How long duplicate address detection of `addr` on device `ifindex`
/// takes: a delay below 1 s (`rtr_solicit_delay`) drawn from the namespace's
/// seed, plus one probe's 1 s wait (`retrans_time`).
pub fn dad_time(seed: u64, ifindex: u32, addr: IpAddr) -> Duration {
    let bits = match addr {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    };
    // splitmix64 over the inputs.
    let mut z = seed ^ (ifindex as u64).rotate_left(32) ^ (bits as u64) ^ ((bits >> 64) as u64);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    Duration(1_000_000_000 + z % 1_000_000_000)
}
