//! One direction of a proxied connection, without I/O: bytes in, the
//! toxics' stages, bytes out in order.
//!
//! The bytes read from one socket are cut into segments of at most
//! [`MSS`] bytes, each a sluice-core [`Packet`] with a synthesized IPv4/TCP
//! header in front (so a `tc` toxic's classifiers see the connection's
//! addresses and ports) and its stream offset as its id. The segments go
//! through the direction's stages, one per active toxic in the order the
//! toxics were added (Toxiproxy's chain): a qdisc stage is a device whose
//! root qdisc the toxic built (netem for `latency`, tbf for `bandwidth`,
//! anything for `tc`), dequeued whenever it is due; the other stages act on
//! the stream itself (see [`crate::toxic`]). What leaves the last stage is
//! put back in stream order, as the receiving end of a TCP connection
//! would: a segment that overtook another (netem's jitter reorders) waits
//! for it, so a latency toxic delays each chunk by its own draw but never
//! lets it pass the one before — which is what Toxiproxy's sequential
//! sleeps do too.
//!
//! A byte stream cannot lose bytes, so a segment a qdisc drops (netem's
//! `loss`, a full queue, a policer) is sent into that stage again after
//! [`RTO`], TCP's minimum retransmission timeout: on a real path the loss
//! shows up as that delay. Refused segments come straight back; segments
//! an AQM sheds from inside a queue are found when the stage runs empty
//! while still holding some (the stage keeps the offsets it holds), and
//! re-sent from the copy the pipe keeps of every byte not yet delivered.
//! That copy is bounded by [`WINDOW`]: the connection stops reading its
//! source while that much is inside, so a slow toxic slows the sender down
//! through TCP's own flow control, as a slow network does.
//!
//! A corrupted segment is a lost one too. A program over TCP never sees a
//! flipped bit: the receiver's checksum fails and the segment is dropped,
//! to be sent again after the retransmission timeout. So a segment entering
//! a `tc` stage (the only kind whose qdiscs can corrupt: `netem corrupt`)
//! is given a real IPv4 header checksum and TCP checksum over its header
//! and payload, as it would carry on the wire, and a segment leaving it
//! whose checksums fail is treated as lost: sent into that stage again
//! after [`RTO`] from the copy kept. (A `tc` tree whose actions rewrite the
//! header without fixing the checksum, as `pedit` without `csum`, loses
//! every segment, as it would on a network.)
//!
//! A direction without stages and with nothing inside passes each chunk
//! read straight through as one piece, without cutting it into segments:
//! nothing could delay, drop or reorder them.
//!
//! Time and randomness come in: `now` with every call, a seed at creation.

use crate::toxic::{Kind, Toxic, Varying};
use crate::wire::WireStage;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::device::DevKind;
use sluice_core::gso::{fold, sum};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::qdisc::{Cx, Dequeue, DevInfo};
use sluice_core::time::{Duration, Time};
use sluice_tc::net::Net;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

/// The most payload a segment carries (Ethernet's TCP MSS).
pub const MSS: usize = 1460;
/// Bytes inside a direction (read and not yet written) before it stops reading.
pub const WINDOW: u64 = 256 * 1024;
/// How long a dropped segment takes to be sent again.
pub const RTO: Duration = Duration(200_000_000);
/// Length of the synthesized IPv4 + TCP header.
const HEADER: usize = 40;

/// What the stages ask of the connection besides bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The source closed and everything it sent was written: close the
    /// destination's sending side.
    Eof,
    /// Close the connection (both sockets).
    Close,
    /// Reset the connection (both sockets, RST).
    Reset,
}

/// The stream bytes a segment carries.
fn payload_len(p: &Packet) -> u32 {
    p.data.len().saturating_sub(HEADER) as u32
}

/// The qdisc spec a toxic builds, if it is a qdisc stage.
pub(crate) fn qdisc_spec(kind: &Kind) -> Option<String> {
    match kind {
        // Changing over time: a stage of its own (`crate::wire`).
        Kind::Latency { wire, .. } | Kind::Bandwidth { wire, .. } if wire.any() => None,
        Kind::Latency {
            latency, jitter, ..
        } => {
            // netem takes no negative delay; Toxiproxy's never waits less than nothing.
            let (l, j) = ((*latency).max(0), (*jitter).max(0));
            Some(format!("netem delay {l}ms {j}ms limit 1000000"))
        }
        Kind::Bandwidth { rate, .. } if *rate > 0 => {
            // A bucket of one full segment, so the rate holds from the first
            // byte, as Toxiproxy's sleeps do; a queue the window never fills.
            Some(format!(
                "tbf rate {}bit burst {} limit {}",
                rate.saturating_mul(8000),
                MSS + HEADER,
                2 * WINDOW
            ))
        }
        Kind::Tc { qdisc } => Some(qdisc.clone()),
        _ => None,
    }
}

/// Build the device of a qdisc stage: a namespace holding one device whose
/// root is the first command of `spec`; the commands after it (separated
/// by `;` or new lines: `class add parent 1: classid 1:1 htb rate 1mbit`)
/// are tc commands on that device, `dev` inserted after their first two
/// words. The error is what `tc` said.
pub(crate) fn qdisc_device(spec: &str, seed: u64) -> Result<Net, String> {
    let mut net = Net::new();
    net.seed = seed;
    let info = DevInfo {
        name: "tox".into(),
        mtu: 65535,
        txqueuelen: 1000,
        hard_header_len: 0,
        seed,
        // A TUN device reports 10 Mbit/s to ethtool.
        speed: 10,
        num_tx_queues: 1,
    };
    net.add_device(info, DevKind::Tun);
    if let Some(d) = net.dev_mut("tox") {
        d.set_up(true);
    }
    let commands = spec.split([';', '\n']).filter(|c| !c.trim().is_empty());
    for (i, cmd) in commands.enumerate() {
        let given: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        let words: Vec<String> = if i == 0 {
            ["qdisc", "replace", "dev", "tox", "root"]
                .into_iter()
                .map(String::from)
                .chain(given)
                .collect()
        } else {
            let split = given.len().min(2);
            let mut w = given[..split].to_vec();
            w.extend(["dev".to_string(), "tox".to_string()]);
            w.extend_from_slice(&given[split..]);
            w
        };
        let out = sluice_tc::tc::run(&mut net, &sluice_tc::tc::Opts::default(), &words);
        if out.code != 0 {
            let what = if i == 0 { "qdisc" } else { cmd.trim() };
            return Err(format!("{what}: {}", out.stderr.trim_end()));
        }
    }
    Ok(net)
}

/// Check that a toxic can be built (a `tc` toxic's spec parses).
pub fn validate(kind: &Kind) -> Result<(), String> {
    match qdisc_spec(kind) {
        Some(spec) if spec.split([';', '\n']).all(|c| c.trim().is_empty()) => {
            Err("tc toxic: attribute qdisc is empty".into())
        }
        Some(spec) => qdisc_device(&spec, 0).map(|_| ()),
        None => Ok(()),
    }
}

/// The slicer's cut points of a chunk of `len` bytes (Toxiproxy's: halve
/// at a varied midpoint until a piece is within the variation of the average).
fn slice_points(
    start: usize,
    end: usize,
    avg: usize,
    var: usize,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut Vec<usize>,
) {
    if end - start <= avg + var || end - start < 2 {
        out.push(end);
        return;
    }
    let jitter = if var > 0 {
        rng.gen_range(0..2 * var) as isize - var as isize
    } else {
        0
    };
    let mid = (start + (end - start) / 2) as isize + jitter;
    let mid = (mid.max(start as isize + 1) as usize).min(end - 1);
    slice_points(start, mid, avg, var, rng, out);
    slice_points(mid, end, avg, var, rng, out);
}

/// A stage that holds packets in a queue and lets them go as the toxic
/// says: a `latency`, `bandwidth` or `tc` toxic's, for TCP's pipes and
/// UDP's alike.
pub(crate) enum Shaper {
    /// A device whose root qdisc is the toxic's; `wake` is when its last
    /// dequeue said to come back. `wire`: the qdisc counts a packet's
    /// header in its length, as on a network (`tc` toxics); Toxiproxy's
    /// own types count the bytes of the stream only.
    Qdisc {
        net: Box<Net>,
        wake: Option<Time>,
        wire: bool,
    },
    /// A wire that changes over time (`crate::wire`).
    Wire(Box<WireStage>),
}

impl Shaper {
    /// The shaper of `kind` from `now`, if it is a shaping toxic that acts
    /// (a `bandwidth` of 0 does not).
    pub(crate) fn new(kind: &Kind, now: Time, seed: u64) -> Result<Option<Shaper>, String> {
        if kind.varying().is_some_and(Varying::any) {
            return Ok(WireStage::new(kind, now, seed)?.map(|w| Shaper::Wire(Box::new(w))));
        }
        let Some(spec) = qdisc_spec(kind) else {
            return Ok(None);
        };
        Ok(Some(Shaper::Qdisc {
            net: Box::new(qdisc_device(&spec, seed)?),
            wake: None,
            wire: matches!(kind, Kind::Tc { .. }),
        }))
    }

    /// Offer a packet carrying `payload` bytes of stream at `now` (a `tc`
    /// stage's sealed with real checksums first); whether it was taken.
    pub(crate) fn send(&mut self, mut pkt: Packet, payload: u32, now: Time) -> bool {
        match self {
            Shaper::Qdisc { net, wake, wire } => {
                if *wire {
                    seal(&mut pkt.data);
                }
                pkt.len = if *wire {
                    pkt.data.len() as u32
                } else {
                    payload
                };
                offer(net, wake, pkt, now)
            }
            Shaper::Wire(w) => w.send(pkt, payload, now).is_ok(),
        }
    }

    /// What leaves by `now` goes to `leaving`, with the time it left, but
    /// for the packets a `tc` stage corrupted (their checksums fail: a
    /// receiver drops them), which go to `corrupted`. Whether a qdisc
    /// stage ran and now holds nothing.
    pub(crate) fn poll(
        &mut self,
        now: Time,
        leaving: &mut Vec<(Time, Packet)>,
        corrupted: &mut Vec<(Time, Packet)>,
    ) -> bool {
        match self {
            Shaper::Qdisc { net, wake, wire } => {
                if !wake.is_some_and(|w| w <= now) {
                    return false;
                }
                let Some(dev) = net.devices.last_mut() else {
                    return false;
                };
                let from = leaving.len();
                drain_due(dev, wake, now, leaving);
                if *wire {
                    for (t, p) in leaving.split_off(from) {
                        if intact(&p.data) {
                            leaving.push((t, p));
                        } else {
                            corrupted.push((t, p));
                        }
                    }
                }
                dev.root.stats.qlen == 0
            }
            Shaper::Wire(w) => {
                w.poll(now, leaving);
                false
            }
        }
    }

    /// When [`Shaper::poll`] next has something to do.
    pub(crate) fn next_wake(&self) -> Option<Time> {
        match self {
            Shaper::Qdisc { wake, .. } => *wake,
            Shaper::Wire(w) => w.next_wake(),
        }
    }

    /// Everything the stage holds, dequeued as if time had run on.
    pub(crate) fn drain(&mut self) -> Vec<Packet> {
        let mut out = Vec::new();
        match self {
            Shaper::Wire(w) => return w.drain(),
            Shaper::Qdisc { net, .. } => {
                let Some(dev) = net.devices.last_mut() else {
                    return out;
                };
                let mut t = Time(u64::MAX / 4);
                for _ in 0..1_000_000 {
                    let mut cx = Cx::new(t);
                    match dev.root.dequeue(&mut cx) {
                        Dequeue::Packet(p) => out.push(p),
                        Dequeue::Wait(w) if w > t => t = w,
                        _ => break,
                    }
                }
            }
        }
        out
    }
}

enum Body {
    /// A queue that shapes (`latency`, `bandwidth`, `tc`).
    Shaper(Shaper),
    /// Pieces with their departure times; the next piece may leave at `free`.
    Slicer {
        avg: usize,
        var: usize,
        gap: Duration,
        free: Time,
        queue: VecDeque<(Time, Packet)>,
        rng: Box<Xoshiro256PlusPlus>,
    },
    /// Nothing goes through; the connection closes `after` the last chunk
    /// (or the toxic's start) if no other came (never for zero).
    Timeout {
        after: Option<Duration>,
        close_at: Option<Time>,
    },
    /// The first chunk (dropped, as all after it) or the source's end starts
    /// the clock; the connection ends `after` it: reset if the toxic was
    /// there when the connection opened (`rst`), else closed (Toxiproxy sets
    /// the sockets' linger to 0 only for toxics present at the start).
    ResetPeer {
        after: Duration,
        at: Option<Time>,
        rst: bool,
    },
    /// `left` bytes may still go through, then the connection closes.
    LimitData { left: u64, closed: bool },
    /// Everything goes through; the close waits `delay`.
    SlowClose { delay: Duration },
    /// Everything goes through (a bandwidth of 0: no limit).
    Pass,
}

struct Stage {
    toxic: Toxic,
    body: Body,
    /// Segments inside a qdisc stage: offset -> length.
    inside: HashMap<u64, u32>,
}

impl Stage {
    /// The stage of `toxic` from `now`; `at_start`: as the connection opens.
    fn new(toxic: &Toxic, now: Time, seed: u64, at_start: bool) -> Result<Stage, String> {
        let ms = |v: i64| Duration(v.max(0) as u64 * 1_000_000);
        let body = match &toxic.kind {
            k @ (Kind::Latency { .. } | Kind::Bandwidth { .. } | Kind::Tc { .. }) => {
                match Shaper::new(k, now, seed)? {
                    Some(shaper) => Body::Shaper(shaper),
                    None => Body::Pass,
                }
            }
            Kind::Slicer {
                average_size,
                size_variation,
                delay,
            } => Body::Slicer {
                avg: (*average_size).max(1) as usize,
                var: (*size_variation).max(0) as usize,
                gap: Duration((*delay).max(0) as u64 * 1000),
                free: now,
                queue: VecDeque::new(),
                rng: Box::new(Xoshiro256PlusPlus::seed_from_u64(seed)),
            },
            Kind::Timeout { timeout } => {
                let after = (*timeout > 0).then(|| ms(*timeout));
                Body::Timeout {
                    after,
                    close_at: after.map(|a| now + a),
                }
            }
            Kind::ResetPeer { timeout } => Body::ResetPeer {
                after: ms(*timeout),
                at: None,
                rst: at_start,
            },
            Kind::LimitData { bytes } => Body::LimitData {
                left: (*bytes).max(0) as u64,
                closed: false,
            },
            Kind::SlowClose { delay } => Body::SlowClose { delay: ms(*delay) },
        };
        Ok(Stage {
            toxic: toxic.clone(),
            body,
            inside: HashMap::new(),
        })
    }
}

/// One direction of a connection.
pub struct Pipe {
    stages: Vec<Stage>,
    header: [u8; HEADER],
    seed: u64,
    /// Offset of the next byte read from the source.
    read: u64,
    /// Offset of the next byte to write to the destination.
    written: u64,
    /// Every byte read and not yet written, by the offset of the segment it came in.
    unsent: BTreeMap<u64, Vec<u8>>,
    /// Segments out of the last stage ahead of `written`, by offset: their
    /// end and bytes (none: bytes a toxic dropped for good, skipped).
    arrived: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Segments to send into a stage again: (when, stage, offset, length).
    retry: Vec<(Time, usize, u64, u32)>,
    /// The source's end, once read.
    eof: Option<u64>,
    /// When the destination is closed for sending, once everything was written.
    eof_at: Option<Time>,
    /// A signal was given that ends the direction.
    done: bool,
    /// A timeout toxic was removed: Toxiproxy closes its connections.
    close_pending: bool,
    /// The connection has opened: later toxics are added to an open one.
    opened: bool,
}

/// Write the IPv4 header and the ports of a synthesized `protocol` packet
/// from `from` to `to` into the first 24 bytes of `h` (no checksums:
/// nothing in a qdisc reads them). An IPv6 endpoint is given its address's
/// low 32 bits, so classifiers still see the ports.
pub(crate) fn ipv4_ports(h: &mut [u8], protocol: u8, from: SocketAddr, to: SocketAddr) {
    let v4 = |a: IpAddr| match a {
        IpAddr::V4(v) => v.octets(),
        IpAddr::V6(v) => {
            let o = v.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    h[0] = 0x45;
    h[8] = 64;
    h[9] = protocol;
    h[12..16].copy_from_slice(&v4(from.ip()));
    h[16..20].copy_from_slice(&v4(to.ip()));
    h[20..22].copy_from_slice(&from.port().to_be_bytes());
    h[22..24].copy_from_slice(&to.port().to_be_bytes());
}

/// Offer a packet to a qdisc stage's device at `now` (and netem's
/// duplicates after it: the kernel enqueues them at the root too; a stream
/// takes their bytes once); whether the qdisc took it. The stage is to be
/// dequeued at `now`.
fn offer(net: &mut Net, wake: &mut Option<Time>, mut pkt: Packet, now: Time) -> bool {
    let Some(dev) = net.devices.last_mut() else {
        return false;
    };
    let mut cx = Cx::new(now);
    pkt.tstamp = now;
    let taken = dev.root.offer(pkt, &mut cx).is_ok();
    for dup in std::mem::take(&mut cx.to_root) {
        let _ = dev.root.offer(dup, &mut cx);
    }
    *wake = Some(now);
    taken
}

/// Dequeue what a qdisc stage lets go by `now`, each packet at the time it
/// was due (`wake`, then each `Wait` the qdisc answers up to `now`), not
/// when the pump woke: a late wake-up does not slow a shaper down (the
/// bucket would have capped the tokens of the late time), it lets the
/// packets that were due go together. `wake` becomes the next due time.
fn drain_due(
    dev: &mut sluice_core::device::Device,
    wake: &mut Option<Time>,
    now: Time,
    out: &mut Vec<(Time, Packet)>,
) {
    for _ in 0..1_000_000 {
        let Some(t) = wake.filter(|w| *w <= now) else {
            return;
        };
        *wake = None;
        let mut cx = Cx::new(t);
        loop {
            match dev.root.dequeue(&mut cx) {
                Dequeue::Packet(p) => out.push((t, p)),
                Dequeue::Wait(w) => {
                    // (Always later than `t`, so the loop moves on.)
                    *wake = Some(w.max(t + Duration(1)));
                    break;
                }
                Dequeue::Empty => break,
            }
        }
    }
}

/// Where the checksum of the transport header of `protocol` lies, from
/// the start of that header (TCP, UDP; none for others).
fn l4_checksum_at(protocol: u8) -> Option<usize> {
    match protocol {
        6 => Some(16),
        17 => Some(6),
        _ => None,
    }
}

/// The running sum of the pseudo-header and transport bytes of a
/// synthesized IPv4 packet (20-byte header, no options).
fn l4_sum(data: &[u8]) -> u64 {
    let l4 = &data[20..];
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&data[12..20]);
    pseudo[9] = data[9];
    pseudo[10..].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    sum(l4, sum(&pseudo, 0))
}

/// Give a synthesized IPv4 packet (TCP or UDP) the lengths and checksums
/// it would carry on the wire, so that a bit flipped on the way shows.
fn seal(data: &mut [u8]) {
    if data.len() < 20 || data.len() > 65535 {
        return;
    }
    let total = data.len() as u16;
    data[2..4].copy_from_slice(&total.to_be_bytes());
    data[10..12].fill(0);
    let ip = !fold(sum(&data[..20], 0));
    data[10..12].copy_from_slice(&ip.to_be_bytes());
    let Some(at) = l4_checksum_at(data[9]).map(|a| 20 + a) else {
        return;
    };
    if data.len() < at + 2 {
        return;
    }
    if data[9] == 17 {
        data[24..26].copy_from_slice(&(total - 20).to_be_bytes());
    }
    data[at..at + 2].fill(0);
    // (UDP sends a sum of 0 as 0xffff: 0 means none.)
    let l4 = match !fold(l4_sum(data)) {
        0 => 0xffff,
        c => c,
    };
    data[at..at + 2].copy_from_slice(&l4.to_be_bytes());
}

/// Do a sealed packet's checksums still hold (a receiver would take it)?
fn intact(data: &[u8]) -> bool {
    if data.len() < 20 || data.len() > 65535 || fold(sum(&data[..20], 0)) != 0xffff {
        return false;
    }
    match l4_checksum_at(data[9]) {
        Some(at) if data.len() >= 20 + at + 2 => fold(l4_sum(data)) == 0xffff,
        _ => true,
    }
}

/// The seed of the stage at `i` of a direction seeded with `seed`.
pub(crate) fn stage_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_add(i as u64).wrapping_mul(0x9E37_79B9)
}

/// Rebuild a direction's chain of stages for `toxics`: a stage whose toxic
/// is unchanged is kept with what it holds, the others are built by `make`
/// (from their position and toxic). Returns the stages no longer in the
/// chain, with their old positions; if a stage cannot be built, the chain
/// is left as it was.
pub(crate) fn rechain<S>(
    chain: &mut Vec<S>,
    toxics: &[Toxic],
    toxic_of: impl Fn(&S) -> &Toxic,
    mut make: impl FnMut(usize, &Toxic) -> Result<S, String>,
) -> Result<Vec<(usize, S)>, String> {
    let mut used = vec![false; chain.len()];
    let plan: Vec<Option<usize>> = toxics
        .iter()
        .map(|t| {
            let j = (0..chain.len()).find(|&j| !used[j] && toxic_of(&chain[j]) == t);
            if let Some(j) = j {
                used[j] = true;
            }
            j
        })
        .collect();
    // The new stages first, so that a failure changes nothing.
    let mut fresh = Vec::new();
    for (i, t) in toxics.iter().enumerate() {
        if plan[i].is_none() {
            fresh.push(make(i, t)?);
        }
    }
    let mut fresh = fresh.into_iter();
    let mut old: Vec<Option<S>> = std::mem::take(chain).into_iter().map(Some).collect();
    *chain = plan
        .iter()
        .filter_map(|p| match p {
            Some(j) => old[*j].take(),
            None => fresh.next(),
        })
        .collect();
    Ok(old
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| (i, s)))
        .collect())
}

/// The IPv4 + TCP header of segments from `from` to `to`.
fn header(from: SocketAddr, to: SocketAddr) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    ipv4_ports(&mut h, 6, from, to);
    h[32] = 5 << 4;
    h[33] = 0x18; // PSH, ACK
    h
}

impl Pipe {
    /// A direction carrying bytes from `from` to `to` through `toxics` (the
    /// ones active on this connection, in order).
    pub fn new(
        toxics: &[Toxic],
        from: SocketAddr,
        to: SocketAddr,
        seed: u64,
        now: Time,
    ) -> Result<Pipe, String> {
        let mut p = Pipe {
            stages: Vec::new(),
            header: header(from, to),
            seed,
            read: 0,
            written: 0,
            unsent: BTreeMap::new(),
            arrived: BTreeMap::new(),
            retry: Vec::new(),
            eof: None,
            eof_at: None,
            done: false,
            close_pending: false,
            opened: false,
        };
        p.set_toxics(toxics, now)?;
        p.opened = true;
        Ok(p)
    }

    /// Replace the stages by those of `toxics`. A stage whose toxic is
    /// unchanged is kept with what it holds; what a removed or changed
    /// stage held goes on to the stage now at its place at once (Toxiproxy
    /// flushes a removed toxic's buffer the same way).
    pub fn set_toxics(&mut self, toxics: &[Toxic], now: Time) -> Result<(), String> {
        let (seed, at_start) = (self.seed, !self.opened);
        let old = rechain(
            &mut self.stages,
            toxics,
            |s| &s.toxic,
            |i, t| Stage::new(t, now, stage_seed(seed, i), at_start),
        )?;
        // What the old stages held, by where it now enters.
        for (i, s) in old {
            if matches!(s.body, Body::Timeout { .. }) {
                self.close_pending = true;
            }
            let at = i.min(self.stages.len());
            let mut held: Vec<(u64, u32)> = s.inside.into_iter().collect();
            if let Body::Slicer { queue, .. } = s.body {
                held.extend(queue.iter().map(|(_, p)| (p.id, payload_len(p))));
            }
            held.sort_unstable();
            for (off, len) in held {
                self.retry.push((now, at, off, len));
            }
        }
        Ok(())
    }

    /// May the connection read more from the source?
    pub fn has_room(&self) -> bool {
        !self.done && self.eof.is_none() && self.read - self.written < WINDOW
    }

    /// How many bytes the connection may read from the source now.
    pub fn room(&self) -> usize {
        if self.has_room() {
            (WINDOW - (self.read - self.written)) as usize
        } else {
            0
        }
    }

    /// Bytes read from the source at `now`.
    pub fn push(&mut self, bytes: &[u8], now: Time) {
        if bytes.is_empty() {
            return;
        }
        if self.stages.is_empty() && self.retry.is_empty() {
            // Nothing on the way: the chunk has arrived, in one piece.
            let off = self.read;
            self.read += bytes.len() as u64;
            self.arrived.insert(off, (self.read, bytes.to_vec()));
            return;
        }
        for chunk in bytes.chunks(MSS) {
            let off = self.read;
            self.read += chunk.len() as u64;
            self.unsent.insert(off, chunk.to_vec());
            let pkt = self.segment(off, chunk);
            self.enter(0, pkt, now);
        }
    }

    /// The source closed (after the bytes pushed so far).
    pub fn finish(&mut self) {
        self.eof.get_or_insert(self.read);
    }

    fn segment(&self, off: u64, payload: &[u8]) -> Packet {
        let mut data = Vec::with_capacity(HEADER + payload.len());
        data.extend_from_slice(&self.header);
        data.extend_from_slice(payload);
        let len = data.len() as u32;
        let mut p = Packet::new(data, len, ETH_P_IP);
        p.id = off;
        p.tstamp = Time(0);
        p
    }

    /// The bytes `[off, off + len)` as a segment again, from the copy kept.
    fn resend(&self, off: u64, len: u32) -> Option<Packet> {
        let (&start, bytes) = self.unsent.range(..=off).next_back()?;
        let from = (off - start) as usize;
        let piece = bytes.get(from..from + len as usize)?;
        Some(self.segment(off, piece))
    }

    /// Put a segment into stage `i` (past the last: it arrived).
    fn enter(&mut self, i: usize, pkt: Packet, now: Time) {
        let Some(stage) = self.stages.get_mut(i) else {
            let payload = pkt.data.get(HEADER..).unwrap_or_default().to_vec();
            let end = pkt.id + payload.len() as u64;
            if end > self.written {
                self.arrived.entry(pkt.id).or_insert((end, payload));
            }
            return;
        };
        let (off, plen) = (pkt.id, payload_len(&pkt));
        match &mut stage.body {
            Body::Shaper(shaper) => {
                if shaper.send(pkt, plen, now) {
                    stage.inside.insert(off, plen);
                } else {
                    self.retry.push((now + RTO, i, off, plen));
                }
            }
            Body::Slicer {
                avg,
                var,
                gap,
                free,
                queue,
                rng,
            } => {
                let payload = &pkt.data[HEADER.min(pkt.data.len())..];
                let mut cuts = Vec::new();
                slice_points(0, payload.len(), *avg, *var, rng, &mut cuts);
                let mut at = (*free).max(now);
                let mut start = 0;
                for end in cuts {
                    let mut piece = Vec::with_capacity(HEADER + end - start);
                    piece.extend_from_slice(&pkt.data[..HEADER.min(pkt.data.len())]);
                    piece.extend_from_slice(&payload[start..end]);
                    let len = piece.len() as u32;
                    let mut p = Packet::new(piece, len, ETH_P_IP);
                    p.id = off + start as u64;
                    queue.push_back((at, p));
                    at += *gap;
                    start = end;
                }
                *free = at;
            }
            Body::Timeout { after, close_at } => {
                // Dropped for good (as Toxiproxy's timeout drops them): the
                // stream goes on without these bytes. The clock restarts.
                *close_at = after.map(|a| now + a);
                if off + plen as u64 > self.written {
                    self.arrived.insert(off, (off + plen as u64, Vec::new()));
                }
            }
            Body::ResetPeer { after, at, .. } => {
                at.get_or_insert(now + *after);
            }
            Body::LimitData { left, closed } => {
                let take = (*left).min(plen as u64) as usize;
                *left -= take as u64;
                if *left == 0 {
                    *closed = true;
                }
                if take > 0 {
                    let mut p = pkt;
                    p.data.truncate(HEADER + take);
                    p.len = p.data.len() as u32;
                    self.enter(i + 1, p, now);
                }
            }
            Body::SlowClose { .. } | Body::Pass => self.enter(i + 1, pkt, now),
        }
    }

    /// Do everything due at `now`: move segments along the stages, write
    /// what is in order into `out`, and say what else the connection must do.
    pub fn poll(&mut self, now: Time, out: &mut Vec<u8>) -> Option<Signal> {
        if self.done {
            return None;
        }
        if self.close_pending {
            self.done = true;
            return Some(Signal::Close);
        }
        self.resend_due(now);
        for i in 0..self.stages.len() {
            let mut leaving = Vec::new();
            if let Some(signal) = self.poll_stage(i, now, &mut leaving) {
                self.done = true;
                return Some(signal);
            }
            for (t, p) in leaving {
                self.enter(i + 1, p, t);
            }
        }
        self.deliver(out);
        let signal = self.ending(now);
        self.done = signal.is_some();
        signal
    }

    /// Send the segments due to be sent again into their stages.
    fn resend_due(&mut self, now: Time) {
        let mut due = Vec::new();
        self.retry.retain(|r| {
            if r.0 <= now {
                due.push(*r);
                false
            } else {
                true
            }
        });
        for (_, i, off, len) in due {
            if off + len as u64 <= self.written {
                continue;
            }
            if let Some(p) = self.resend(off, len) {
                self.enter(i, p, now);
            }
        }
    }

    /// Do what stage `i` has due at `now`: what leaves it goes to
    /// `leaving`; a signal ends the direction.
    fn poll_stage(
        &mut self,
        i: usize,
        now: Time,
        leaving: &mut Vec<(Time, Packet)>,
    ) -> Option<Signal> {
        let stage = &mut self.stages[i];
        match &mut stage.body {
            Body::Shaper(shaper) => {
                let (from, mut corrupted) = (leaving.len(), Vec::new());
                let emptied = shaper.poll(now, leaving, &mut corrupted);
                for (_, p) in leaving[from..].iter().chain(&corrupted) {
                    stage.inside.remove(&p.id);
                }
                // Corrupted on the way: the receiver's checksum drops it,
                // and it is sent again after the RTO.
                for (t, p) in corrupted {
                    self.retry.push((t + RTO, i, p.id, payload_len(&p)));
                }
                // Shed from inside the queue: find them once it is empty.
                if emptied && !stage.inside.is_empty() {
                    for (off, len) in stage.inside.drain() {
                        self.retry.push((now + RTO, i, off, len));
                    }
                }
            }
            Body::Slicer { queue, .. } => {
                while let Some(piece) = queue.pop_front() {
                    if piece.0 > now {
                        queue.push_front(piece);
                        break;
                    }
                    leaving.push(piece);
                }
            }
            Body::Timeout { close_at, .. } => {
                // The source's end closes it at once.
                if self.eof.is_some() || close_at.is_some_and(|t| t <= now) {
                    return Some(Signal::Close);
                }
            }
            Body::ResetPeer { after, at, rst } => {
                if self.eof.is_some() {
                    at.get_or_insert(now + *after);
                }
                if at.is_some_and(|t| t <= now) {
                    return Some(if *rst { Signal::Reset } else { Signal::Close });
                }
            }
            Body::LimitData { .. } | Body::SlowClose { .. } | Body::Pass => {}
        }
        None
    }

    /// The signal that ends the direction now, if any: limit_data's close
    /// once what it let through was written, or the source's end once
    /// everything was written (and slow_close's delay passed).
    fn ending(&mut self, now: Time) -> Option<Signal> {
        let limit_reached = self
            .stages
            .iter()
            .any(|s| matches!(s.body, Body::LimitData { closed: true, .. }));
        if limit_reached && self.arrived.is_empty() && self.nothing_inside() {
            return Some(Signal::Close);
        }
        if self.eof == Some(self.written) {
            let at = *self.eof_at.get_or_insert_with(|| {
                let hold: Duration = self
                    .stages
                    .iter()
                    .map(|s| match s.body {
                        Body::SlowClose { delay } => delay,
                        _ => Duration::ZERO,
                    })
                    .fold(Duration::ZERO, |a, b| a + b);
                now + hold
            });
            if at <= now {
                self.done = true;
                return Some(Signal::Eof);
            }
        }
        None
    }

    /// Nothing is held in any stage or waiting to be sent again.
    fn nothing_inside(&self) -> bool {
        self.retry.is_empty()
            && self.stages.iter().all(|s| match &s.body {
                Body::Shaper(_) => s.inside.is_empty(),
                Body::Slicer { queue, .. } => queue.is_empty(),
                _ => true,
            })
    }

    /// Write the bytes that are now in order.
    fn deliver(&mut self, out: &mut Vec<u8>) {
        while let Some(entry) = self.arrived.first_entry() {
            let off = *entry.key();
            if off > self.written {
                break;
            }
            let (end, bytes) = entry.remove();
            if end > self.written {
                let from = (self.written - off) as usize;
                if out.is_empty() && from == 0 && bytes.len() as u64 == end - off {
                    // The whole piece, moved rather than copied.
                    *out = bytes;
                } else {
                    out.extend_from_slice(bytes.get(from..).unwrap_or_default());
                }
                self.written = end;
            }
        }
        // Forget the copies of what was written.
        while let Some(entry) = self.unsent.first_entry() {
            if *entry.key() + entry.get().len() as u64 > self.written {
                break;
            }
            entry.remove();
        }
    }

    /// When [`Pipe::poll`] next has something to do.
    pub fn next_wake(&self) -> Option<Time> {
        let mut t: Option<Time> = None;
        let mut at = |x: Time| t = Some(t.map_or(x, |t| t.min(x)));
        for r in &self.retry {
            at(r.0);
        }
        for s in &self.stages {
            match &s.body {
                Body::Slicer { queue, .. } => {
                    if let Some((w, _)) = queue.front() {
                        at(*w)
                    }
                }
                Body::Timeout {
                    close_at: Some(c), ..
                } => at(*c),
                Body::ResetPeer { at: Some(r), .. } => at(*r),
                Body::Shaper(shaper) => {
                    if let Some(t) = shaper.next_wake() {
                        at(t)
                    }
                }
                _ => {}
            }
        }
        if let Some(e) = self.eof_at {
            at(e);
        }
        t
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::toxic::Stream;

    const MS: u64 = 1_000_000;

    /// A toxic of `kind`, acting on every connection (the stream is the
    /// connection's business, not the pipe's).
    pub(crate) fn toxic(kind: Kind) -> Toxic {
        Toxic {
            name: kind.type_name().into(),
            kind,
            stream: Stream::Downstream,
            stream_label: "downstream".into(),
            toxicity: 1.0,
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn pipe(toxics: &[Toxic]) -> Pipe {
        Pipe::new(
            toxics,
            addr("10.0.0.1:40000"),
            addr("10.0.0.2:80"),
            7,
            Time(0),
        )
        .unwrap()
    }

    /// What came out: (time, bytes) per write, and the signal with its time.
    struct Run {
        writes: Vec<(u64, Vec<u8>)>,
        signal: Option<(u64, Signal)>,
    }

    impl Run {
        fn bytes(&self) -> Vec<u8> {
            self.writes.iter().flat_map(|(_, b)| b.clone()).collect()
        }
    }

    /// Drive `p` in virtual time: `pushes` at their times (as room allows,
    /// like the connection), the source's end after the last, until `until`.
    fn run(p: &mut Pipe, pushes: Vec<(u64, Vec<u8>)>, eof: bool, until: u64) -> Run {
        let mut pushes: VecDeque<(u64, Vec<u8>)> = pushes.into();
        let mut r = Run {
            writes: Vec::new(),
            signal: None,
        };
        let mut now = 0;
        let mut finished = false;
        while now <= until {
            while p.has_room() && pushes.front().is_some_and(|(t, _)| *t <= now) {
                let (_, b) = pushes.pop_front().unwrap();
                p.push(&b, Time(now));
            }
            if eof && pushes.is_empty() && !finished {
                p.finish();
                finished = true;
            }
            let mut out = Vec::new();
            let sig = p.poll(Time(now), &mut out);
            if !out.is_empty() {
                r.writes.push((now, out));
            }
            if let Some(s) = sig {
                r.signal = Some((now, s));
                return r;
            }
            let next_push = pushes
                .front()
                .filter(|_| p.has_room())
                .map(|(t, _)| (*t).max(now + 1));
            let next = [next_push, p.next_wake().map(|t| t.0.max(now + 1))]
                .into_iter()
                .flatten()
                .min();
            now = match next {
                Some(t) => t,
                // Nothing pending: as a pump does, look again after a while.
                None => now + 50 * MS,
            };
        }
        r
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn without_toxics_bytes_pass_at_once_and_the_end_follows() {
        let mut p = pipe(&[]);
        let r = run(&mut p, vec![(0, data(5000))], true, 10 * MS);
        assert_eq!(r.bytes(), data(5000));
        assert_eq!(r.writes[0].0, 0);
        assert_eq!(r.signal, Some((0, Signal::Eof)));
    }

    #[test]
    fn latency_delays_every_byte_and_jitter_never_reorders() {
        let t = toxic(Kind::latency(50, 40));
        let mut p = pipe(&[t]);
        // 100 chunks of 100 bytes, 1 ms apart.
        let pushes: Vec<(u64, Vec<u8>)> = (0..100)
            .map(|i| {
                (
                    i * MS,
                    data(10_000)[i as usize * 100..(i as usize + 1) * 100].to_vec(),
                )
            })
            .collect();
        let r = run(&mut p, pushes, false, 1000 * MS);
        // In order and complete (a later chunk never overtakes).
        assert_eq!(r.bytes(), data(10_000));
        // Each byte left no earlier than its chunk's arrival + 10 ms (the
        // least draw) and no later than the last arrival + 90 ms.
        let mut off = 0;
        for (t, b) in &r.writes {
            let first_chunk = off / 100;
            assert!(*t >= first_chunk as u64 * MS + 10 * MS, "at {t}");
            assert!(*t < 99 * MS + 90 * MS);
            off += b.len();
        }
        // The jitter spread the deliveries: not all at a fixed delay.
        let delays: Vec<u64> = r.writes.iter().map(|(t, _)| *t).collect();
        assert!(delays.windows(2).any(|w| w[1] - w[0] > 2 * MS));
    }

    #[test]
    fn bandwidth_holds_the_stream_to_its_rate() {
        // 100 KB/s: 200 000 bytes take 2 s, less the bucket the stream
        // finds full at the start (one full segment: MSS + header bytes).
        let t = toxic(Kind::bandwidth(100));
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(200_000))], true, 10_000 * MS);
        assert_eq!(r.bytes(), data(200_000));
        let (end, sig) = r.signal.unwrap();
        assert_eq!(sig, Signal::Eof);
        let bucket = (MSS + HEADER) as u64;
        let expect = (200_000 - bucket) * 1_000_000_000 / 100_000;
        assert!(end >= expect, "{end} < {expect}");
        assert!(end <= expect + 20 * MS, "{end}");
        // And at every moment: no more than rate × time + one segment.
        let mut sent = 0u64;
        for (t, b) in &r.writes {
            sent += b.len() as u64;
            assert!(
                sent <= bucket + t * 100_000 / 1_000_000_000,
                "{sent} by {t}"
            );
        }
    }

    #[test]
    fn a_late_pump_still_gets_the_full_rate() {
        // 1000 KB/s, polled only every 10 ms (a busy machine's late wake-ups):
        // each poll lets go what was due by then, not one bucket's worth.
        let mut p = pipe(&[toxic(Kind::bandwidth(1000))]);
        p.push(&data(200_000), Time(0));
        let mut out = Vec::new();
        for k in 1..=10 {
            p.poll(Time(k * 10 * MS), &mut out);
        }
        let due = 100 * 1000;
        assert!(
            out.len() >= due - 1500 && out.len() <= due + 1500,
            "{}",
            out.len()
        );
        assert_eq!(out, data(out.len()));
    }

    #[test]
    fn a_lossy_tc_toxic_delays_bytes_but_the_stream_stays_whole() {
        let t = toxic(Kind::Tc {
            qdisc: "netem loss 30% delay 5ms".into(),
        });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(100_000))], true, 60_000 * MS);
        assert_eq!(r.bytes(), data(100_000));
        assert_eq!(r.signal.map(|s| s.1), Some(Signal::Eof));
        // With 69 segments at 30 % loss some were lost: the last byte came
        // at least one retransmission timeout late.
        let last = r.writes.last().unwrap().0;
        assert!(last >= 5 * MS + RTO.0, "{last}");
    }

    #[test]
    fn a_corrupting_tc_toxic_loses_segments_but_the_stream_stays_intact() {
        // netem corrupt flips one bit in half the segments; on a network the
        // receiver's checksum drops each, and TCP sends it again after the
        // RTO: the bytes come whole, and later.
        let t = toxic(Kind::Tc {
            qdisc: "netem corrupt 50%".into(),
        });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(100_000))], true, 60_000 * MS);
        assert_eq!(r.bytes(), data(100_000));
        assert_eq!(r.signal.map(|s| s.1), Some(Signal::Eof));
        // 69 segments, each corrupted with probability 1/2: some were.
        let last = r.writes.last().unwrap().0;
        assert!(last >= RTO.0, "{last}");
    }

    #[test]
    fn sealed_segments_show_any_flipped_bit() {
        let p = pipe(&[]);
        let mut seg = p.segment(1000, &data(MSS)).data.clone();
        seal(&mut seg);
        assert!(intact(&seg));
        // The checksums a receiver computes: the IPv4 header's sums to
        // 0xffff with its own field (RFC 791), the TCP one likewise over the
        // pseudo-header and segment (RFC 793).
        assert_eq!(fold(sum(&seg[..20], 0)), 0xffff);
        assert_eq!(u16::from_be_bytes([seg[2], seg[3]]) as usize, HEADER + MSS);
        for byte in [0, 9, 13, 21, 36, 40, 700, HEADER + MSS - 1] {
            for bit in 0..8 {
                let mut bad = seg.clone();
                bad[byte] ^= 1 << bit;
                assert!(!intact(&bad), "byte {byte} bit {bit}");
            }
        }
    }

    #[test]
    fn slicer_cuts_the_stream_into_spaced_pieces() {
        let t = toxic(Kind::Slicer {
            average_size: 100,
            size_variation: 20,
            delay: 1000,
        });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(1400))], false, 1000 * MS);
        assert_eq!(r.bytes(), data(1400));
        // Pieces of 80..=120 bytes (Toxiproxy's bound: within the variation
        // of the average), each 1 ms after the one before.
        assert!(r.writes.len() >= 1400 / 120);
        for (i, (t, b)) in r.writes.iter().enumerate() {
            assert!(b.len() <= 120, "{}", b.len());
            assert_eq!(*t, i as u64 * MS);
        }
    }

    #[test]
    fn limit_data_lets_that_many_bytes_through_then_closes() {
        let t = toxic(Kind::LimitData { bytes: 3000 });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(10_000))], false, 100 * MS);
        assert_eq!(r.bytes(), data(3000));
        assert_eq!(r.signal, Some((0, Signal::Close)));
    }

    #[test]
    fn timeout_drops_everything_and_closes_after_the_last_chunk() {
        let t = toxic(Kind::Timeout { timeout: 100 });
        let mut p = pipe(&[t]);
        let pushes = vec![(0, data(10)), (60 * MS, data(10))];
        let r = run(&mut p, pushes, false, 1000 * MS);
        assert!(r.bytes().is_empty());
        // The second chunk restarted the clock.
        assert_eq!(r.signal, Some((160 * MS, Signal::Close)));
    }

    #[test]
    fn a_zero_timeout_never_closes_and_its_removal_does() {
        let t = toxic(Kind::Timeout { timeout: 0 });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(10))], false, 500 * MS);
        assert!(r.bytes().is_empty() && r.signal.is_none());
        p.set_toxics(&[], Time(600 * MS)).unwrap();
        let mut out = Vec::new();
        assert_eq!(p.poll(Time(600 * MS), &mut out), Some(Signal::Close));
    }

    #[test]
    fn reset_peer_resets_its_timeout_after_the_first_chunk() {
        let t = toxic(Kind::ResetPeer { timeout: 30 });
        let mut p = pipe(std::slice::from_ref(&t));
        let r = run(&mut p, vec![(20 * MS, data(10))], false, 500 * MS);
        assert!(r.bytes().is_empty());
        assert_eq!(r.signal, Some((50 * MS, Signal::Reset)));
        // Added to an open connection: the same clock, but a plain close.
        let mut p = pipe(&[]);
        p.set_toxics(&[t], Time(0)).unwrap();
        let r = run(&mut p, vec![(20 * MS, data(10))], false, 500 * MS);
        assert_eq!(r.signal, Some((50 * MS, Signal::Close)));
    }

    #[test]
    fn slow_close_holds_the_end_back() {
        let t = toxic(Kind::SlowClose { delay: 250 });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(100))], true, 1000 * MS);
        assert_eq!(r.bytes(), data(100));
        assert_eq!(r.signal, Some((250 * MS, Signal::Eof)));
    }

    #[test]
    fn a_full_window_stops_reading_until_bytes_leave() {
        let t = toxic(Kind::bandwidth(1000));
        let mut p = pipe(&[t]);
        p.push(&data(WINDOW as usize), Time(0));
        assert!(!p.has_room());
        let mut out = Vec::new();
        // 1 MB/s: after 10 ms about 10 KB have left and there is room again.
        p.poll(Time(10 * MS), &mut out);
        assert!(!out.is_empty() && p.has_room());
    }

    #[test]
    fn toxics_changed_midway_keep_the_stream_whole_and_in_order() {
        let lat = toxic(Kind::latency(100, 0));
        let mut p = pipe(std::slice::from_ref(&lat));
        p.push(&data(50_000), Time(0));
        let mut out = Vec::new();
        p.poll(Time(10 * MS), &mut out);
        assert!(out.is_empty());
        // Removed: what it held goes on at once (Toxiproxy flushes it).
        p.set_toxics(&[], Time(20 * MS)).unwrap();
        p.poll(Time(20 * MS), &mut out);
        assert_eq!(out, data(50_000));
        // An unchanged toxic keeps what it holds.
        let mut p = pipe(std::slice::from_ref(&lat));
        p.push(&data(1000), Time(0));
        p.set_toxics(&[lat], Time(50 * MS)).unwrap();
        let mut out = Vec::new();
        p.poll(Time(99 * MS), &mut out);
        assert!(out.is_empty());
        p.poll(Time(100 * MS), &mut out);
        assert_eq!(out, data(1000));
    }

    #[test]
    fn a_tc_toxic_builds_a_tree_whose_filters_see_the_connections_ports() {
        // prio: band 1:2 for TOS 0 by the priomap, 30 ms; a u32 filter on
        // the destination port (80 here) sends the segments to 1:3, 60 ms.
        let spec = "handle 1: prio; qdisc add parent 1:2 handle 20: netem delay 30ms
            qdisc add parent 1:3 handle 30: netem delay 60ms;
            filter add parent 1: protocol ip prio 1 u32 match ip dport 80 0xffff flowid 1:3";
        let t = toxic(Kind::Tc { qdisc: spec.into() });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(3000))], false, 1000 * MS);
        assert_eq!(r.bytes(), data(3000));
        assert_eq!(r.writes[0].0, 60 * MS);
        // The same tree without the filter: the priomap's band, 30 ms.
        let t = toxic(Kind::Tc {
            qdisc: spec.rsplit_once(';').unwrap().0.into(),
        });
        let mut p = pipe(&[t]);
        let r = run(&mut p, vec![(0, data(3000))], false, 1000 * MS);
        assert_eq!(r.writes[0].0, 30 * MS);
    }

    #[test]
    fn a_change_that_cannot_be_built_leaves_the_stages_as_they_were() {
        let lat = toxic(Kind::latency(100, 0));
        let mut p = pipe(std::slice::from_ref(&lat));
        p.push(&data(1000), Time(0));
        let bad = toxic(Kind::Tc {
            qdisc: "netem delay".into(),
        });
        assert!(p.set_toxics(&[lat, bad], Time(10 * MS)).is_err());
        // The latency stage still holds the bytes, and lets them go at 100 ms.
        let mut out = Vec::new();
        p.poll(Time(99 * MS), &mut out);
        assert!(out.is_empty());
        p.poll(Time(100 * MS), &mut out);
        assert_eq!(out, data(1000));
    }

    #[test]
    fn a_bad_tc_spec_is_refused_with_tcs_message() {
        let e = validate(&Kind::Tc {
            qdisc: "netem delay".into(),
        })
        .unwrap_err();
        assert!(e.starts_with("qdisc: "), "{e}");
        let e = validate(&Kind::Tc {
            qdisc: "prio; class add parent 1: classid 1:9 htb rate 1mbit".into(),
        })
        .unwrap_err();
        assert!(
            e.starts_with("class add parent 1: classid 1:9 htb rate 1mbit: "),
            "{e}"
        );
        assert!(validate(&Kind::Tc { qdisc: "".into() }).is_err());
        assert!(validate(&Kind::Tc {
            qdisc: "tbf rate 1mbit burst 10k latency 50ms".into()
        })
        .is_ok());
    }
}
