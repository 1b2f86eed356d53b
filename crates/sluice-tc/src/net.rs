//! A network namespace as sluice keeps it: its devices, its iptables tables,
//! and the counters the kernel keeps per namespace (next interface index, next automatic qdisc handle).

use sluice_core::act::ActionTable;
use sluice_core::cls::shared::BlockTable;
use sluice_core::device::{DevKind, Device};
use sluice_core::handle::Handle;
use sluice_core::netfilter::Netfilter;
use sluice_core::qdisc::DevInfo;
use sluice_core::time::Time;

/// The devices of one namespace.
#[derive(Debug)]
pub struct Net {
    /// Devices in ifindex order.
    pub devices: Vec<Device>,
    next_ifindex: u32,
    /// The automatic-handle counter (`qdisc_alloc_handle`'s static).
    pub autohandle: u32,
    /// Seed given to each new device for its qdiscs' generators.
    pub seed: u64,
    /// The namespace's actions (`tc actions`, and those filters create).
    pub actions: ActionTable,
    /// The namespace's iptables tables and connection table.
    pub netfilter: Netfilter,
    /// When the command being run happens, on the clock the namespace's
    /// packets are stamped with (the front end sets it: the wall clock for
    /// `sluice tc`, the monotonic clock in a live link, virtual time in the
    /// simulator and replay). Actions record it as their installation time,
    /// and `tc -s` prints their ages against it (`installed N sec`).
    pub now: Time,
    /// The namespace's shared filter blocks (`ingress_block N`).
    pub blocks: BlockTable,
    /// The namespace's IP addresses and routes (`ip address`, `ip route`).
    pub l3: crate::l3::L3,
}

impl Default for Net {
    fn default() -> Self {
        Self::new()
    }
}

impl Net {
    /// A namespace holding only `lo`, down, as a fresh network namespace has.
    pub fn new() -> Self {
        let mut net = Net {
            devices: vec![],
            next_ifindex: 1,
            autohandle: 0x8000_0000,
            seed: 0,
            actions: ActionTable::new(0),
            netfilter: Netfilter::default(),
            now: Time(0),
            blocks: BlockTable::default(),
            l3: Default::default(),
        };
        let info = DevInfo {
            name: "lo".into(),
            mtu: 65536,
            txqueuelen: 1000,
            hard_header_len: 14,
            seed: 0,
            speed: 0,
            num_tx_queues: 1,
        };
        net.add_device(info, DevKind::Loopback);
        net
    }

    /// Add a device (down) and return its index.
    pub fn add_device(&mut self, mut info: DevInfo, kind: DevKind) -> u32 {
        let idx = self.next_ifindex;
        self.next_ifindex += 1;
        info.seed = self.seed.wrapping_add(idx as u64);
        self.devices.push(Device::new(idx, info, kind));
        idx
    }

    /// The index the next new device gets (the per-namespace counter the
    /// state directory records in its snapshots).
    pub fn next_ifindex(&self) -> u32 {
        self.next_ifindex
    }

    /// The device named `name`.
    pub fn dev(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.info.name == name)
    }

    /// The device named `name`, mutably.
    pub fn dev_mut(&mut self, name: &str) -> Option<&mut Device> {
        self.devices.iter_mut().find(|d| d.info.name == name)
    }
}

/// The next automatic qdisc handle not used on `dev` (`qdisc_alloc_handle`:
/// one counter for all devices, from `8001:` up, wrapping before `ffff:`).
pub fn alloc_handle(counter: &mut u32, dev: &Device) -> Option<Handle> {
    for _ in 0..0x8000 {
        *counter = counter.wrapping_add(0x1_0000);
        if *counter == 0xffff_0000 {
            *counter = 0x8000_0000;
        }
        let h = Handle(*counter);
        if dev.find(h).is_none() {
            return Some(h);
        }
    }
    None
}

// iproute2 keeps a cache of the namespace's interface names (`ll_map`) that
// parsers and printers consult (`ll_name_to_index`, `ll_index_to_name`), so
// options such as mirred's `dev NAME` need no device list passed down. This is
// that cache, refreshed by each command before it runs.
thread_local! {
    static IFNAMES: std::cell::RefCell<Vec<(u32, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Refresh the interface-name cache from `net` (`ll_init_map`).
pub(crate) fn cache_ifnames(net: &Net) {
    IFNAMES.with(|m| {
        *m.borrow_mut() = net
            .devices
            .iter()
            .map(|d| (d.ifindex, d.info.name.clone()))
            .collect();
    });
}

/// `ll_name_to_index`.
pub(crate) fn ifindex_of(name: &str) -> Option<u32> {
    IFNAMES.with(|m| m.borrow().iter().find(|(_, n)| n == name).map(|(i, _)| *i))
}

/// `ll_index_to_name` for a device that exists.
pub(crate) fn ifname_of(index: u32) -> Option<String> {
    IFNAMES.with(|m| {
        m.borrow()
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, n)| n.clone())
    })
}
