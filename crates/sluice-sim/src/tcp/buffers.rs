//! Socket buffers as Linux 6.18 sizes them: what `SO_RCVBUF`/`SO_SNDBUF`
//! store, how much window a receive buffer is worth, and how both buffers
//! grow when a program sets neither (`sock_setsockopt()`,
//! `tcp_select_initial_window()`, `tcp_init_buffer_space()`,
//! `tcp_measure_rcv_mss()`, `tcp_grow_window()`, `tcp_rcv_rtt_update()`,
//! `tcp_rcv_space_adjust()`, `tcp_rcvbuf_grow()`, `tcp_sndbuf_expand()`).
//!
//! **Buffers are memory, windows are payload.** A receive buffer
//! (`sk_rcvbuf`) is charged the `truesize` of every packet it holds — the
//! payload plus its headers, the padding of its allocation and the
//! `sk_buff` — so it is worth less window than its size. Since 6.6 the
//! kernel measures the exchange rate instead of assuming one (the old
//! `tcp_adv_win_scale = 1` said "half"): `scaling_ratio` is payload per
//! byte of memory in 1/256ths, 128 until the first full segment arrives,
//! then `len × 256 / truesize` of that segment — 160 for a 1448-byte
//! payload in a 1514-byte frame, whose `truesize` is 2304. The window a
//! buffer is worth is `space × ratio / 256` (`tcp_win_from_space`); the
//! memory held data costs is charged at the same rate.
//!
//! **Set by the program.** `SO_RCVBUF = v` stores `2 × min(v, rmem_max)`
//! and locks the buffer: no autotuning, and the window clamp is what that
//! buffer is worth (`iperf3 -w 128K` gets 256 KiB of memory, worth 160 KiB
//! of window once the ratio is measured, not the 128 KiB the old rule
//! gave). `SO_SNDBUF` likewise doubles and locks.
//!
//! **Set by nobody.** The receive buffer starts at `tcp_rmem[1]` (128 KiB)
//! and the offered window at what it is worth (64 KiB, rounded to whole
//! segments). Two mechanisms open it. Per packet, `rcv_ssthresh` — the
//! window actually offered — grows by two segments for every in-order
//! segment whose `truesize` the buffer can afford (`tcp_grow_window`), up
//! to the clamp. Per round trip (Dynamic Right-Sizing), when the
//! application has read more in one receiver-measured RTT than ever
//! before, the buffer grows to be worth twice that, plus twice the growth
//! since the last round (a sender in slow start doubles), plus the
//! out-of-order extent, never above `tcp_rmem[2]`; the clamp follows. The
//! receiver's RTT smooths the timestamps echoed on full-sized segments
//! (`now − TSecr`, millisecond clock, zero samples ignored; 1/8 per
//! sample) and drops to the time one advertised window took to arrive
//! when that is shorter. Because it includes queueing delay, a queue that
//! grows makes each round read more, so the buffer keeps growing until
//! the queue overflows or `tcp_rmem[2]` is reached: on Linux 6.18 a lone
//! CUBIC flow without buffer settings fills a 1000-packet queue at
//! 10 Mbit/s (`ss -tmi` shows `rcv_rtt` following the RTT from 130 to
//! 900 ms while `rb` grows from 0.5 to 4.5 MB). The send buffer
//! starts at `tcp_wmem[1]` and, once established and whenever ACKs free
//! space with cwnd not full, grows to `2 × max(10, cwnd, reordering + 1)`
//! segments of 4352 bytes each (a 1460-byte segment's worst-case memory:
//! its power-of-two head plus the `sk_buff`), three for BBR, never above
//! `tcp_wmem[2]`.
//!
//! Simplifications: send-queue memory is charged at one byte per payload
//! byte (the kernel's 64 KiB GSO buffers cost ~2 % more); no memory
//! pressure; held data is charged at the ratio measured on full segments,
//! each received segment's `truesize` that of a linear buffer of its frame
//! (no GRO coalescing, no per-driver page fragments).

use super::config::TcpConfig;
use sluice_core::qdisc::fq_codel::truesize;
use sluice_core::time::{Duration, Time};

/// `TCP_RMEM_TO_WIN_SCALE`: `scaling_ratio` is in 1/256ths.
const RATIO_SHIFT: u32 = 8;
/// `TCP_DEFAULT_SCALING_RATIO`: half, until a full segment is measured.
pub const DEFAULT_SCALING_RATIO: u64 = 1 << (RATIO_SHIFT - 1);
/// Ethernet, IPv4 and TCP headers with the timestamp option.
const FRAME_HEADERS: u32 = 14 + 20 + 20 + 12;
/// `SOCK_MIN_RCVBUF` / `SOCK_MIN_SNDBUF`: twice `TCP_SKB_MIN_TRUESIZE`.
pub const SOCK_MIN_BUF: u64 = 2 * (2048 + 256);
/// Memory of one segment in the send queue at worst (`tcp_sndbuf_expand`):
/// a 1460-byte MSS plus `MAX_TCP_HEADER` (320) and `skb_shared_info`
/// (320) rounded up to a power of two, plus the `sk_buff` (256).
pub const SND_PER_MSS: u64 = 4096 + 256;
/// `TCP_INIT_CWND`.
const INIT_CWND: u64 = 10;
/// `TCP_MAX_WSCALE`.
const MAX_WSCALE: u32 = 14;

/// The sysctls that size socket buffers, with a stock 6.18 kernel's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSysctls {
    /// `net.ipv4.tcp_rmem`: min, default, max.
    pub tcp_rmem: [u64; 3],
    /// `net.ipv4.tcp_wmem`: min, default, max.
    pub tcp_wmem: [u64; 3],
    /// `net.core.rmem_max`: the largest `SO_RCVBUF` a program may ask for.
    pub rmem_max: u64,
    /// `net.core.wmem_max`: the largest `SO_SNDBUF`.
    pub wmem_max: u64,
    /// `net.ipv4.tcp_moderate_rcvbuf`: receive-buffer autotuning.
    pub moderate_rcvbuf: bool,
}

impl Default for BufferSysctls {
    fn default() -> Self {
        BufferSysctls {
            tcp_rmem: [4096, 131_072, 32 << 20],
            tcp_wmem: [4096, 16_384, 4 << 20],
            rmem_max: 4 << 20,
            wmem_max: 4 << 20,
            moderate_rcvbuf: true,
        }
    }
}

/// What `setsockopt(SO_RCVBUF/SO_SNDBUF, v)` stores: `v` clamped to the
/// sysctl maximum, doubled for bookkeeping, at least `SOCK_MIN_*BUF`.
pub fn setsockopt_buffer(v: u64, max: u64) -> u64 {
    v.min(max).saturating_mul(2).max(SOCK_MIN_BUF)
}

/// The most payload a connection with `cfg` can have in flight: the
/// smaller of the largest send buffer and the largest receive buffer it
/// can reach (memory, an upper bound on what either is worth).
pub fn max_window(cfg: &TcpConfig) -> u64 {
    let s = &cfg.buffers;
    let snd = cfg
        .send_buffer
        .map_or(s.tcp_wmem[2], |v| setsockopt_buffer(v, s.wmem_max));
    let rcv = cfg
        .recv_buffer
        .map_or(s.tcp_rmem[2], |v| setsockopt_buffer(v, s.rmem_max));
    snd.min(rcv)
}

/// `truesize` of a received segment carrying `len` payload bytes.
pub fn segment_truesize(len: u32) -> u64 {
    u64::from(truesize(len.saturating_add(FRAME_HEADERS)))
}

/// The receive buffer and the window it is worth.
#[derive(Clone, Debug)]
pub struct RecvBuffer {
    /// `sk_rcvbuf`, bytes of memory.
    rcvbuf: u64,
    /// Set by `SO_RCVBUF`: no autotuning.
    locked: bool,
    /// `scaling_ratio`: payload per 256 bytes of memory.
    ratio: u64,
    /// `window_clamp`: the largest window ever offered.
    pub window_clamp: u64,
    /// `rcv_ssthresh`: the window offered now, at most.
    pub rcv_ssthresh: u64,
    /// `tcp_rmem[2]` and `rmem_max`.
    rmem2: u64,
    rmem_max: u64,
    /// `tcp_window_scaling`.
    scaling: bool,
    moderate: bool,
    /// `rcvq_space`: bytes read in the best round so far, and where and
    /// when the current round began (bytes read, time).
    space: u64,
    space_seq: u64,
    space_time: Time,
    /// `rcv_rtt_est.rtt_us` × 8; zero before the first sample.
    rtt_us8: u64,
    /// The window-based RTT estimate: the round ends when `rcv_nxt`
    /// passes `est_seq`.
    est: Option<(u64, Time)>,
    last_tsecr: Option<u32>,
}

impl RecvBuffer {
    /// A socket's receive buffer: `SO_RCVBUF` if set, else `tcp_rmem[1]`.
    pub fn new(cfg: &TcpConfig) -> Self {
        let s = &cfg.buffers;
        let (rcvbuf, locked) = match cfg.recv_buffer {
            Some(v) => (setsockopt_buffer(v, s.rmem_max), true),
            None => (s.tcp_rmem[1], false),
        };
        RecvBuffer {
            rcvbuf,
            locked,
            ratio: DEFAULT_SCALING_RATIO,
            window_clamp: 0,
            rcv_ssthresh: 0,
            rmem2: s.tcp_rmem[2],
            rmem_max: s.rmem_max,
            scaling: cfg.window_scaling,
            moderate: s.moderate_rcvbuf,
            space: 0,
            space_seq: 0,
            space_time: Time::ZERO,
            rtt_us8: 0,
            est: None,
            last_tsecr: None,
        }
    }

    /// `sk_rcvbuf` in bytes.
    pub fn rcvbuf(&self) -> u64 {
        self.rcvbuf
    }

    /// `scaling_ratio` in 1/256ths.
    pub fn scaling_ratio(&self) -> u64 {
        self.ratio
    }

    /// The receiver's RTT estimate, once it has one.
    pub fn rtt(&self) -> Option<Duration> {
        (self.rtt_us8 > 0).then(|| Duration::from_micros(self.rtt_us8 / 8))
    }

    /// `tcp_win_from_space`: the payload `space` bytes of memory can hold.
    fn win_from_space(&self, space: u64) -> u64 {
        (space * self.ratio) >> RATIO_SHIFT
    }

    /// `tcp_space_from_win`: the memory `win` bytes of payload need.
    fn space_from_win(&self, win: u64) -> u64 {
        (win << RATIO_SHIFT) / self.ratio
    }

    /// `tcp_full_space`: the window the whole buffer is worth.
    pub fn full_space(&self) -> u64 {
        self.win_from_space(self.rcvbuf)
    }

    /// `tcp_space`: the window still free with `held` payload bytes queued
    /// (their memory charged at the measured ratio).
    pub fn free_space(&self, held: u64) -> u64 {
        self.full_space().saturating_sub(held)
    }

    /// The window clamp a SYN starts from (`tcp_connect_init`): a locked
    /// buffer limits it to what the buffer is worth.
    fn initial_clamp(&self) -> u64 {
        if self.locked {
            self.full_space()
        } else {
            u64::from(u16::MAX) << MAX_WSCALE
        }
    }

    /// The window scale our SYN offers (`tcp_select_initial_window`):
    /// sized for the largest buffer this socket may reach.
    pub fn offered_wscale(&self) -> u8 {
        if !self.scaling {
            return 0;
        }
        let s = self.full_space().max(self.rmem2).max(self.rmem_max);
        let s = s.min(self.initial_clamp()).max(1);
        (63 - s.leading_zeros()).saturating_sub(15).min(MAX_WSCALE) as u8
    }

    /// `tcp_select_initial_window`: the window of our SYN (unscaled: the
    /// buffer's worth in whole segments of `mss`, at most 65535). Sets
    /// the clamp and `rcv_ssthresh`.
    pub fn initial_window(&mut self, mss: u32) -> u64 {
        let full = self.full_space();
        let mss = u64::from(mss.max(1));
        let space = if full > mss { full - full % mss } else { full };
        let rcv_wnd = space.min(u64::from(u16::MAX));
        let scaled_max = u64::from(u16::MAX) << self.offered_wscale();
        self.window_clamp = self.initial_clamp().min(scaled_max);
        self.rcv_ssthresh = rcv_wnd;
        rcv_wnd
    }

    /// The peer does not scale windows: neither do we.
    pub fn no_scaling(&mut self) {
        self.window_clamp = self.window_clamp.min(u64::from(u16::MAX));
    }

    /// `tcp_init_buffer_space`: the connection is established; `advmss`
    /// is the MSS we advertised, `rcv_wnd` the window offered so far.
    pub fn establish(&mut self, advmss: u32, rcv_wnd: u64, now: Time, read: u64) {
        let advmss = u64::from(advmss);
        let maxwin = self.full_space();
        self.window_clamp = self.window_clamp.min(maxwin);
        // Keep one segment of the buffer for the application.
        if self.window_clamp > 2 * advmss && self.window_clamp + advmss > maxwin {
            self.window_clamp = (2 * advmss).max(maxwin.saturating_sub(advmss));
        }
        self.rcv_ssthresh = self.rcv_ssthresh.min(self.window_clamp);
        self.space = self.rcv_ssthresh.min(rcv_wnd).min(INIT_CWND * advmss);
        self.space_seq = read;
        self.space_time = now;
    }

    /// `tcp_measure_rcv_mss` saw a full segment of a new size: measure the
    /// ratio from it, and let the clamp follow (`tcp_set_window_clamp`).
    pub fn measure_ratio(&mut self, len: u32, rcv_wnd: u64) {
        let val = (u64::from(len) << RATIO_SHIFT) / segment_truesize(len);
        let old = self.ratio;
        self.ratio = val.max(1);
        if self.ratio == old {
            return;
        }
        let clamp = self.full_space().max(SOCK_MIN_BUF / 2);
        if clamp < self.window_clamp {
            self.rcv_ssthresh = self.rcv_ssthresh.min(clamp);
        } else {
            self.rcv_ssthresh = self.rcv_ssthresh.max(rcv_wnd.min(clamp));
        }
        self.window_clamp = clamp;
        self.space = self.space.min(self.window_clamp);
    }

    /// `tcp_grow_window` for an in-order segment of `len` payload bytes
    /// with `held` bytes queued: returns true if it grew (the kernel then
    /// asks for one quick ACK).
    pub fn grow_window(&mut self, len: u32, held: u64, advmss: u32) -> bool {
        let limit = self.window_clamp.min(self.free_space(held));
        if len < 128 || limit <= self.rcv_ssthresh {
            return false;
        }
        let room = limit - self.rcv_ssthresh;
        let len = u64::from(len);
        let ts = segment_truesize(len as u32);
        let incr = if self.win_from_space(ts) <= len {
            2 * u64::from(advmss)
        } else {
            self.grow_window_slow(ts, len)
        };
        if incr == 0 {
            return false;
        }
        self.rcv_ssthresh += room.min(incr.max(2 * len));
        true
    }

    /// `__tcp_grow_window`: a segment with a poor payload-to-memory ratio
    /// still opens the window while the window is small.
    fn grow_window_slow(&self, ts: u64, len: u64) -> u64 {
        let mut truesize = self.win_from_space(ts) >> 1;
        let mut window = self.win_from_space(self.rmem2) >> 1;
        while self.rcv_ssthresh <= window {
            if truesize <= len {
                return 2 * len; // 2 × rcv_mss, which a full segment's length is
            }
            truesize >>= 1;
            window >>= 1;
        }
        0
    }

    /// `tcp_rcv_rtt_update`: a timestamp sample moves the estimate 1/8 of
    /// the way (it follows the queueing delay too); a window sample only
    /// ever lowers it. Fixed point ×8.
    fn rtt_update(&mut self, us: u64, win_dep: bool) {
        let m = us.max(1);
        if self.rtt_us8 == 0 {
            self.rtt_us8 = m << 3;
        } else if !win_dep {
            self.rtt_us8 = (self.rtt_us8 - (self.rtt_us8 >> 3) + m).max(1);
        } else if m << 3 < self.rtt_us8 {
            self.rtt_us8 = m << 3;
        }
    }

    /// `tcp_rcv_rtt_measure_ts`: an in-order segment of `len` bytes echoed
    /// `tsecr` when our timestamp clock read `ts_now` (milliseconds).
    pub fn rtt_sample_ts(&mut self, tsecr: u32, ts_now: u32, len: u32, rcv_mss: u32) {
        if self.last_tsecr == Some(tsecr) {
            return;
        }
        self.last_tsecr = Some(tsecr);
        let delta = ts_now.wrapping_sub(tsecr);
        if len >= rcv_mss && delta > 0 && delta < i32::MAX as u32 / 1000 {
            self.rtt_update(u64::from(delta) * 1000, false);
        }
    }

    /// `tcp_rcv_rtt_measure`: one advertised window's worth received.
    pub fn rtt_sample_window(&mut self, rcv_nxt: u64, rcv_wnd: u64, now: Time) {
        if let Some((seq, t)) = self.est {
            if rcv_nxt < seq {
                return;
            }
            self.rtt_update(now.saturating_since(t).as_nanos() / 1000, true);
        }
        self.est = Some((rcv_nxt + rcv_wnd, now));
    }

    /// `tcp_rcv_space_adjust`, after a read: `read` bytes read in all,
    /// `inq` still queued, `ooo` the out-of-order extent past `rcv_nxt`.
    pub fn space_adjust(&mut self, now: Time, read: u64, inq: u64, ooo: u64) {
        if self.rtt_us8 == 0 {
            return;
        }
        let elapsed = now.saturating_since(self.space_time).as_nanos() / 1000;
        if elapsed < self.rtt_us8 >> 3 {
            return;
        }
        let copied = (read - self.space_seq).saturating_sub(inq);
        if copied > self.space {
            self.rcvbuf_grow(copied, ooo);
        }
        self.space_seq = read;
        self.space_time = now;
    }

    /// `tcp_rcvbuf_grow`: a round read `newval` bytes, more than any before.
    fn rcvbuf_grow(&mut self, newval: u64, ooo: u64) {
        let old = self.space.max(1);
        self.space = newval;
        if !self.moderate || self.locked {
            return;
        }
        let mut rcvwin = newval << 1;
        let grow = rcvwin * (newval - old.min(newval)) / old;
        rcvwin += grow << 1;
        rcvwin += ooo;
        let rcvbuf = self.space_from_win(rcvwin).min(self.rmem2);
        if rcvbuf > self.rcvbuf {
            self.rcvbuf = rcvbuf;
            self.window_clamp = self.full_space();
        }
    }
}

/// The send buffer: `SO_SNDBUF` if set, else grown with cwnd.
#[derive(Clone, Copy, Debug)]
pub struct SendBuffer {
    /// `sk_sndbuf`, bytes (payload, see the module doc).
    pub sndbuf: u64,
    locked: bool,
    wmem_max: u64,
}

impl SendBuffer {
    /// A socket's send buffer: `SO_SNDBUF` if set, else `tcp_wmem[1]`.
    pub fn new(cfg: &TcpConfig) -> Self {
        let s = &cfg.buffers;
        match cfg.send_buffer {
            Some(v) => SendBuffer {
                sndbuf: setsockopt_buffer(v, s.wmem_max),
                locked: true,
                wmem_max: s.tcp_wmem[2],
            },
            None => SendBuffer {
                sndbuf: s.tcp_wmem[1],
                locked: false,
                wmem_max: s.tcp_wmem[2],
            },
        }
    }

    /// `tcp_sndbuf_expand`: room for `per_cwnd` windows of
    /// `max(10, cwnd, reordering + 1)` worst-case segments (reordering
    /// stays at its initial 3: the model does not adapt it).
    pub fn expand(&mut self, cwnd: u32, per_cwnd: u64) {
        if self.locked {
            return;
        }
        let segs = u64::from(cwnd).max(INIT_CWND);
        let want = (per_cwnd * segs * SND_PER_MSS).min(self.wmem_max);
        self.sndbuf = self.sndbuf.max(want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rcv: Option<u64>) -> TcpConfig {
        TcpConfig {
            recv_buffer: rcv,
            ..TcpConfig::default()
        }
    }

    #[test]
    fn a_full_segment_is_worth_160_of_256() {
        // 1448 + 66 = 1514 bytes: a 2048-byte head + sk_buff = 2304.
        assert_eq!(segment_truesize(1448), 2304);
        let mut b = RecvBuffer::new(&cfg(None));
        b.measure_ratio(1448, 65_160);
        assert_eq!(b.scaling_ratio(), 1448 * 256 / 2304);
        assert_eq!(b.scaling_ratio(), 160);
    }

    #[test]
    fn so_rcvbuf_doubles_and_clamps() {
        assert_eq!(setsockopt_buffer(128 << 10, 4 << 20), 256 << 10);
        assert_eq!(setsockopt_buffer(64 << 20, 4 << 20), 8 << 20);
        assert_eq!(setsockopt_buffer(1, 4 << 20), SOCK_MIN_BUF);
    }

    #[test]
    fn iperf3_w_128k_is_worth_160_kib_of_window() {
        // SO_RCVBUF = 128 KiB: 256 KiB of memory, half of it before the
        // first segment, 160/256 of it after.
        let c = cfg(Some(128 << 10));
        let mut b = RecvBuffer::new(&c);
        assert_eq!(b.offered_wscale(), 2); // clamp 128 KiB: log2 17 − 15
        let wnd = b.initial_window(1460);
        assert_eq!(wnd, 65_535); // 128 KiB is worth more than 16 bits
        b.establish(1460, wnd, Time::ZERO, 0);
        assert_eq!(b.window_clamp, (128 << 10) - 1460);
        b.measure_ratio(1448, wnd);
        assert_eq!(b.window_clamp, 160 << 10);
    }

    #[test]
    fn default_buffer_offers_64k_and_scale_10() {
        let c = cfg(None);
        let mut b = RecvBuffer::new(&c);
        assert_eq!(b.offered_wscale(), 10); // sized for tcp_rmem[2] = 32 MiB
        let wnd = b.initial_window(1460);
        assert_eq!(wnd, 64_240); // 44 segments of 1460, as Linux's SYN
        b.establish(1460, wnd, Time::ZERO, 0);
        assert_eq!(b.window_clamp, 65_536 - 1460);
        assert_eq!(b.rcv_ssthresh, 65_536 - 1460);
        b.measure_ratio(1448, wnd);
        assert_eq!(b.window_clamp, 81_920); // 128 KiB × 160/256
        assert_eq!(b.rcv_ssthresh, 64_240);
    }

    #[test]
    fn each_full_segment_opens_two_more() {
        let c = cfg(Some(1 << 20));
        let mut b = RecvBuffer::new(&c);
        let wnd = b.initial_window(1460);
        b.establish(1460, wnd, Time::ZERO, 0);
        b.measure_ratio(1448, wnd);
        let before = b.rcv_ssthresh;
        assert!(b.grow_window(1448, 0, 1460));
        assert_eq!(b.rcv_ssthresh, before + 2 * 1460);
        // A tiny segment does not.
        assert!(!b.grow_window(100, 0, 1460));
    }

    #[test]
    fn drs_grows_the_buffer_from_what_a_round_read() {
        let c = cfg(None);
        let mut b = RecvBuffer::new(&c);
        let wnd = b.initial_window(1460);
        b.establish(1460, wnd, Time::ZERO, 0);
        b.measure_ratio(1448, wnd);
        // The first round starts at 10 × advmss = 14600.
        assert_eq!(b.space, 14_600);
        // No RTT yet: nothing happens.
        b.space_adjust(Time::ZERO + Duration::from_millis(10), 40_000, 0, 0);
        assert_eq!(b.rcvbuf(), 131_072);
        b.rtt_sample_ts(100, 110, 1448, 536); // 10 ms
        assert_eq!(b.rtt(), Some(Duration::from_millis(10)));
        // 100 000 bytes read in the round: rcvwin = 2 × 100000 plus
        // twice the doubling (4 × 200000 × 85400 / 14600), in memory at
        // 256/160, capped at tcp_rmem[2].
        b.space_adjust(Time::ZERO + Duration::from_millis(20), 100_000, 0, 0);
        let rcvwin: u64 = 200_000 + 2 * (200_000 * (100_000 - 14_600) / 14_600);
        assert_eq!(b.rcvbuf(), (rcvwin << 8) / 160);
        assert_eq!(b.window_clamp, (b.rcvbuf() * 160) >> 8);
        // A locked buffer never grows.
        let c = cfg(Some(64 << 10));
        let mut l = RecvBuffer::new(&c);
        l.rtt_sample_ts(0, 5, 1448, 536);
        l.space_adjust(Time::ZERO + Duration::from_millis(20), 1 << 20, 0, 0);
        assert_eq!(l.rcvbuf(), 128 << 10);
    }

    #[test]
    fn sndbuf_follows_cwnd_unless_set() {
        let mut s = SendBuffer::new(&TcpConfig::default());
        assert_eq!(s.sndbuf, 16_384);
        s.expand(10, 2);
        assert_eq!(s.sndbuf, 2 * 10 * 4352);
        s.expand(2000, 2);
        assert_eq!(s.sndbuf, 4 << 20); // tcp_wmem[2]
        let mut l = SendBuffer::new(&TcpConfig {
            send_buffer: Some(128 << 10),
            ..TcpConfig::default()
        });
        l.expand(2000, 2);
        assert_eq!(l.sndbuf, 256 << 10);
    }
}
