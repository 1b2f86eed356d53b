//! `sluice replay`: run a packet capture through a tc script's qdiscs and a
//! wire, and write what comes out the far end as another capture.
//!
//! The setup is one Ethernet device `eth0` in a fresh in-memory namespace
//! (`ip link add dev eth0 type ether`, `txqueuelen 1000`, up — as the
//! simulator builds its links), the tc script applied to it in-process, and a
//! [`Port`] behind it: a transmit buffer of `--buffer` packets or bytes and a
//! wire of `--rate` with `--delay` of propagation. Each captured packet is
//! handed to the port at its capture timestamp; everything the port has to
//! do before then (a packet finishing serialization, a shaper's watchdog) is
//! done first, in time order, so the run is the discrete-event simulation of
//! that one device. A departure is written with the time its last bit reaches
//! the far end (end of serialization + delay) and its original frame bytes
//! (link-layer header as captured, network bytes as the qdiscs left them);
//! drops are counted, not written.
//!
//! What a qdisc sees of a captured frame: the bytes from the network header
//! on, the EtherType, and an accounted length (`qdisc_pkt_len`) of the frame
//! as it would leave an Ethernet `eth0`: the captured frame length for
//! Ethernet captures (VLAN tags included), the IP length + 14 for raw-IP and
//! Linux cooked (SLL, SLL2) captures. Captures may be pcap or pcapng; the
//! output is a nanosecond pcap with the input's link type.
//!
//! The wire may change over time: `--trace` gives its capacity from a
//! Mahimahi delivery-opportunity trace instead of `--rate` (each
//! opportunity 1504 bytes, a packet costing its IP length + 4, as
//! Mahimahi's `mm-link` counts; the transmit ring is then none unless
//! `--buffer` is given, the opportunities taking packets from the qdisc),
//! `--schedule` steps its rate, delay and loss, `--delay-trace` gives each
//! packet's delay. They start with the capture's first packet, and their
//! files are read whole, at most 64 MiB, errors naming file, line and
//! reason (sluice-net's `wire::read_bounded` and `WireSettings`, as
//! `sluice link up` reads them).
//!
//! Virtual time starts at 1 s at the first packet's timestamp (qdiscs never
//! see a time 0 or epoch-sized numbers); timestamps that go backwards, as a
//! multi-queue capture's can, are taken as the latest time seen so far.

use clap::Parser;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use sluice_core::device::Device;
use sluice_core::packet::{EthAddrs, Packet, ETH_P_IP, ETH_P_IPV6};
use sluice_core::port::{Port, PortConfig, TxBuffer, WireChange};
use sluice_core::time::{Duration, Time};
use sluice_core::units::{parse_link_rate, parse_size, parse_time_ns};
use sluice_net::wire::{read_bounded, WireSettings};
use sluice_tc::net::Net;
use sluice_tc::{ip, tc};
use std::fs::File;
use std::io::{BufWriter, Cursor, Read, Write};
use std::path::{Path, PathBuf};

const AFTER_HELP: &str = "\
The script holds tc commands, one per line, as a shell script would run them
(`tc qdisc add dev eth0 root ...`); blank lines, `#` comments and lines
continued with a trailing backslash are fine. It is not run by a shell:
variables ($VAR), quotes and other commands are refused, so substitute
values first. The device is eth0 (Ethernet, txqueuelen from --txqueuelen).

Packets enter at their capture timestamps; OUT gets each departure with its
arrival time at the far end of the wire, as a nanosecond pcap. Then the
final `tc -s qdisc show dev eth0` and `tc -s class show dev eth0` are printed,
with a summary line: packets in, out and dropped.

A wire that changes over time: --trace FILE (a Mahimahi trace: integer ms per
line, each line one opportunity of 1504 bytes, the trace repeating shifted by
its last timestamp unless --once) replaces --rate; --schedule FILE (CSV rows
at,rate,delay,loss[,ramp], a last row AT,loop) changes the wire at its times;
--delay-trace FILE (one delay in ms per line, each for --delay-trace-step,
default 1ms) gives each packet's delay. All start with the first packet.

Examples:
  sluice replay --tc shape.tc --rate 10mbit --delay 5ms in.pcap out.pcap
  sluice replay --tc shape.tc --trace Verizon-LTE-short.down --delay 20ms in.pcap out.pcap";

/// `sluice replay` options.
#[derive(Parser, Debug)]
#[command(
    name = "sluice replay",
    about = "Run a packet capture through a tc script's qdiscs and a wire of a given rate",
    after_help = AFTER_HELP
)]
pub(crate) struct ReplayArgs {
    /// A file of tc commands for eth0 (without it: the default pfifo_fast).
    #[arg(long = "tc", value_name = "SCRIPT")]
    script: Option<PathBuf>,
    /// Wire rate, as tc writes rates (10mbit, 1gbit, 125kbps).
    #[arg(long, value_name = "RATE", required_unless_present = "trace")]
    rate: Option<String>,
    /// The wire's capacity from a Mahimahi delivery-opportunity trace (integer ms per line, 1504 bytes each) instead of --rate.
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    trace: Option<String>,
    /// Play the trace once, then carry nothing (Mahimahi's --once); default: repeat.
    #[arg(long, requires = "trace")]
    once: bool,
    /// A schedule of the wire's rate, delay and loss (CSV rows at,rate,delay,loss[,ramp]; last row AT,loop).
    #[arg(long, value_name = "FILE")]
    schedule: Option<String>,
    /// Each packet's one-way delay from a delay trace (ms per line) instead of --delay.
    #[arg(long, value_name = "FILE", conflicts_with = "delay")]
    delay_trace: Option<String>,
    /// How long each line of the delay trace holds (tc time units; default 1ms).
    #[arg(long, value_name = "TIME", requires = "delay_trace")]
    delay_trace_step: Option<String>,
    /// One-way propagation delay (5ms, 100us, 0).
    #[arg(long, value_name = "TIME")]
    delay: Option<String>,
    /// Transmit buffer after the qdisc (NIC ring): N or Np packets, or a size in bytes (64kb); default 1, none on a trace.
    #[arg(long, value_name = "N")]
    buffer: Option<String>,
    /// eth0's txqueuelen (the default limit of fifos).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    txqueuelen: u32,
    /// The capture to replay (pcap or pcapng; Ethernet, raw IP or Linux cooked).
    input: PathBuf,
    /// Where to write the departures (pcap).
    output: PathBuf,
}

/// An error with the exit status it ends the command with.
struct Failure {
    msg: String,
    code: i32,
}

fn fail<T>(code: i32, msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure {
        msg: msg.into(),
        code,
    })
}

/// Run `sluice replay`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let argv = std::iter::once("sluice replay".to_string()).chain(args.iter().cloned());
    let a = match ReplayArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(&a) {
        Ok(()) => 0,
        Err(f) => {
            eprintln!("sluice replay: {}", f.msg);
            f.code
        }
    }
}

fn run(a: &ReplayArgs) -> Result<(), Failure> {
    let wire = wire_config(a)?;
    let change = wire_change(a)?;
    let mut net = build_net(a.txqueuelen)?;
    if let Some(path) = &a.script {
        let text = std::fs::read_to_string(path)
            .or_else(|e| fail(1, format!("{}: {e}", path.display())))?;
        // The script runs as the capture starts (actions' ages count from there).
        net.now = START;
        apply_script(&mut net, &text).or_else(|m| fail(1, format!("{}: {m}", path.display())))?;
    }
    let mut capture =
        Capture::open(&a.input).or_else(|m| fail(1, format!("{}: {m}", a.input.display())))?;
    let out = Output::create(
        &a.output,
        &[&a.input, a.script.as_deref().unwrap_or(&a.input)],
    )
    .or_else(|m| fail(1, format!("{}: {m}", a.output.display())))?;
    let header = PcapHeader {
        snaplen: capture.snaplen,
        datalink: capture.link,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::native(),
        ..Default::default()
    };
    let sink: Box<dyn Write> = Box::new(BufWriter::new(out.file()?));
    let writer = PcapWriter::with_header(sink, header)
        .or_else(|e| fail(1, format!("{}: {e}", a.output.display())))?;
    let dev = net
        .devices
        .iter()
        .position(|d| d.info.name == "eth0")
        .expect("eth0 was created");
    let mut port = Port::new(wire);
    if let Some(change) = change {
        // The files' wire starts with the capture's first packet.
        port.change(&mut net.devices[dev], START, change);
    }
    let on_wire = match (&a.trace, port.trace()) {
        (Some(f), Some(t)) => format!("trace {f} ({} mean)", fmt_bps(t.mean_bps() as u64)),
        _ => fmt_bps(wire.rate_bps),
    };
    let mut r = Replayer::new(port, writer);
    let res = r.replay(&mut capture, &mut net.devices[dev]);
    let flushed = r.writer.into_writer().flush();
    res.or_else(|m| fail(1, m))?;
    flushed.or_else(|e| fail(1, format!("{}: {e}", a.output.display())))?;
    out.commit()
        .or_else(|e| fail(1, format!("{}: {e}", a.output.display())))?;
    let opts = tc::Opts {
        stats: true,
        ..Default::default()
    };
    net.now = r.count.last_departure.max(START);
    for obj in ["qdisc", "class"] {
        let words: Vec<String> = [obj, "show", "dev", "eth0"].map(String::from).to_vec();
        print!("{}", tc::run(&mut net, &opts, &words).stdout);
    }
    let c = r.count;
    println!(
        "replay: packets in {} out {} dropped {} (bytes in {} out {}; {} on the wire, last departure at +{:.6} s)",
        c.in_packets,
        c.out_packets,
        c.in_packets - c.out_packets,
        c.in_bytes,
        c.out_bytes,
        on_wire,
        c.last_departure.0.saturating_sub(START.0) as f64 / 1e9,
    );
    Ok(())
}

/// The output capture, written to a temporary file beside it and renamed
/// over it only when the replay succeeds: a failed replay leaves an existing
/// output as it was. An output that is not a regular file (`/dev/stdout`, a
/// FIFO) is written directly.
struct Output {
    path: PathBuf,
    to: Target,
}

enum Target {
    Temporary {
        tmp: tempfile::NamedTempFile,
        mode: u32,
    },
    Direct(File),
}

impl Output {
    /// Refuses a path that names the same file as one of `inputs` (by
    /// device and inode, so a hard link or `./in.pcap` is caught too).
    fn create(path: &Path, inputs: &[&Path]) -> Result<Output, String> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let existing = std::fs::metadata(path).ok();
        if let Some(m) = &existing {
            for input in inputs {
                if std::fs::metadata(input).is_ok_and(|i| (i.dev(), i.ino()) == (m.dev(), m.ino()))
                {
                    return Err(format!(
                        "is the same file as {}: refusing to overwrite an input",
                        input.display()
                    ));
                }
            }
        }
        let to = match &existing {
            Some(m) if !m.is_file() => Target::Direct(
                File::options()
                    .write(true)
                    .open(path)
                    .map_err(|e| e.to_string())?,
            ),
            _ => {
                let dir = match path.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let tmp = tempfile::Builder::new()
                    .prefix(".sluice-replay-")
                    .tempfile_in(dir)
                    .map_err(|e| e.to_string())?;
                // An existing output keeps its permissions; a new one gets
                // the umask's, as File::create would give it.
                let mode = existing.map_or_else(|| 0o666 & !umask(), |m| m.permissions().mode());
                Target::Temporary { tmp, mode }
            }
        };
        Ok(Output {
            path: path.to_path_buf(),
            to,
        })
    }

    fn file(&self) -> Result<File, Failure> {
        match &self.to {
            Target::Temporary { tmp, .. } => tmp.as_file().try_clone(),
            Target::Direct(f) => f.try_clone(),
        }
        .or_else(|e| fail(1, format!("{}: {e}", self.path.display())))
    }

    fn commit(self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Target::Temporary { tmp, mode } = self.to {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))?;
            tmp.persist(&self.path).map_err(|e| e.error)?;
        }
        Ok(())
    }
}

/// The process's file-creation mask.
fn umask() -> u32 {
    // SAFETY: umask only swaps the mask; it is put back at once, and
    // replay creates no files from other threads meanwhile.
    let mask = unsafe { libc::umask(0o022) };
    unsafe { libc::umask(mask) };
    mask as u32
}

fn fmt_bps(bps: u64) -> String {
    sluice_core::units::fmt_rate(bps / 8)
}

/// The wire from the command line (on a trace: no fixed rate).
fn wire_config(a: &ReplayArgs) -> Result<PortConfig, Failure> {
    let usage = |msg: String| Failure { msg, code: 2 };
    let rate = match &a.rate {
        Some(r) => parse_link_rate(r).map_err(|e| usage(format!("--rate {r:?}: {e}")))?,
        None => 0,
    };
    let delay_text = a.delay.as_deref().unwrap_or("0");
    let delay = parse_time_ns(delay_text)
        .ok()
        .filter(|d| *d >= 0)
        .ok_or_else(|| usage(format!("--delay {delay_text:?}: not a time (e.g. 5ms)")))?;
    // On a trace the opportunities take packets from the qdisc (no ring),
    // as Mahimahi's link takes them from its queue.
    let default_buffer = if a.trace.is_some() { "0" } else { "1" };
    let buffer_text = a.buffer.as_deref().unwrap_or(default_buffer);
    let buffer = match buffer_text {
        "0" if a.buffer.is_none() => Some(TxBuffer::Packets(0)),
        b => parse_buffer(b),
    }
    .ok_or_else(|| {
        usage(format!(
            "--buffer {buffer_text:?}: expected N or Np packets, or a size such as 64kb"
        ))
    })?;
    Ok(PortConfig {
        rate_bps: rate,
        delay: Duration(delay as u64),
        buffer,
        ..Default::default()
    })
}

/// The change the wire starts with from `--trace`, `--schedule` and
/// `--delay-trace`: their files read (bounded) and parsed, an error naming
/// the file, the line and the reason.
fn wire_change(a: &ReplayArgs) -> Result<Option<WireChange>, Failure> {
    let step = match &a.delay_trace_step {
        None => None,
        Some(s) => match parse_time_ns(s) {
            Ok(ns) if ns > 0 => Some(ns as u64),
            _ => {
                return fail(
                    2,
                    format!("--delay-trace-step {s:?}: not a time more than 0 (e.g. 10ms)"),
                )
            }
        },
    };
    let read = |f: &Option<String>| {
        f.as_deref()
            .map(read_bounded)
            .transpose()
            .or_else(|m| fail(1, m))
    };
    let settings = WireSettings {
        trace: read(&a.trace)?,
        once: a.once,
        schedule: read(&a.schedule)?,
        delay_trace: read(&a.delay_trace)?,
        delay_trace_step_ns: step,
        ..Default::default()
    };
    if settings.is_empty() {
        return Ok(None);
    }
    settings.change().map(Some).or_else(|m| fail(1, m))
}

fn parse_buffer(s: &str) -> Option<TxBuffer> {
    let n = s.strip_suffix('p').unwrap_or(s);
    if let Ok(n) = n.parse::<u32>() {
        return (n > 0).then_some(TxBuffer::Packets(n));
    }
    parse_size(s)
        .ok()
        .filter(|b| *b > 0)
        .map(|b| TxBuffer::Bytes(b as u64))
}

/// A namespace with `eth0`, set up as the simulator sets up a link's device.
fn build_net(txqueuelen: u32) -> Result<Net, Failure> {
    let mut net = Net::new();
    for cmd in [
        "link add dev eth0 type ether".to_string(),
        format!("link set dev eth0 txqueuelen {txqueuelen}"),
        "link set dev eth0 up".to_string(),
    ] {
        let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        let o = ip::run(&mut net, &words);
        if o.code != 0 {
            return fail(1, format!("ip {cmd}: {}", o.stderr.trim()));
        }
    }
    Ok(net)
}

/// Apply a script of tc commands (see `AFTER_HELP`), stopping at the first
/// line that is not one or that fails.
fn apply_script(net: &mut Net, text: &str) -> Result<(), String> {
    for (lineno, words) in script_lines(text) {
        let at = |m: String| format!("line {lineno}: {m}");
        let line = words.join(" ");
        if let Some(w) = words
            .iter()
            .find(|w| w.contains(['$', '`', '\'', '"', ';', '|', '&', '<', '>']))
        {
            return Err(at(format!(
                "{w:?}: shell syntax (variables, quotes, pipes) is not supported; write the values out"
            )));
        }
        let first = words[0].as_str();
        if first != "tc" && !first.ends_with("/tc") {
            return Err(at(format!("`{line}`: only tc commands are supported")));
        }
        let (opts, rest) = match tc::parse_global(&words[1..]) {
            Ok(x) => x,
            Err(o) => return Err(at(format!("`{line}`: {}", (o.stderr + &o.stdout).trim()))),
        };
        if opts.batch.is_some() || opts.netns.is_some() {
            return Err(at(format!(
                "`{line}`: -batch and -netns are not supported here"
            )));
        }
        let o = tc::run(net, &opts, &rest);
        print!("{}", o.stdout);
        if o.code != 0 {
            return Err(at(format!("`{line}` failed: {}", o.stderr.trim())));
        }
        eprint!("{}", o.stderr);
    }
    Ok(())
}

/// The script's commands as words, with their first line number: comments
/// removed, backslash continuations joined.
fn script_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = vec![];
    let mut pending: Option<(usize, Vec<String>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let (body, continued) = match raw.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (raw, false),
        };
        let entry = pending.get_or_insert_with(|| (i + 1, vec![]));
        for w in body.split_whitespace() {
            if w.starts_with('#') {
                break;
            }
            entry.1.push(w.to_string());
        }
        if !continued {
            if let Some(e) = pending.take().filter(|e| !e.1.is_empty()) {
                out.push(e);
            }
        }
    }
    out.extend(pending.filter(|e| !e.1.is_empty()));
    out
}

/// One captured frame.
struct Frame {
    /// Capture timestamp since the Unix epoch, in nanoseconds.
    ts_ns: u128,
    /// Length on the wire (`orig_len`).
    orig_len: u32,
    /// The captured bytes (possibly fewer than `orig_len`).
    data: Vec<u8>,
}

/// What a capture is read from: a file, or bytes (the fuzz target).
type Input = Box<dyn Read>;

enum Source {
    Pcap(PcapReader<Input>),
    /// pcapng: the reader, and per interface what [`describe`] says.
    PcapNg(PcapNgReader<Input>, Vec<(DataLink, u128, u128)>),
}

/// A capture being read: pcap or pcapng, one link type.
struct Capture {
    src: Source,
    link: DataLink,
    snaplen: u32,
}

fn pcap_error(e: PcapError) -> String {
    match e {
        PcapError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the file ends in the middle of a record (truncated capture)".into()
        }
        PcapError::IoError(e) => e.to_string(),
        PcapError::InvalidField(f) => format!("not a valid capture ({f})"),
        e => format!("not a valid capture ({e})"),
    }
}

impl Capture {
    fn open(path: &Path) -> Result<Capture, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        Capture::read(Box::new(file))
    }

    /// A capture read from `input`.
    fn read(mut input: Input) -> Result<Capture, String> {
        let mut magic = [0u8; 4];
        input.read_exact(&mut magic).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "not a pcap or pcapng file (too short)".into(),
            _ => e.to_string(),
        })?;
        // The readers read the magic number again.
        let file: Input = Box::new(Cursor::new(magic).chain(input));
        if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
            let mut r =
                PcapNgReader::new(file).map_err(|e| format!("pcapng: {}", pcap_error(e)))?;
            // The link type comes with the first interface description block.
            let first = loop {
                match r.next_block() {
                    None => {
                        return Err("pcapng: no interface description (an empty capture?)".into())
                    }
                    Some(Err(e)) => return Err(format!("pcapng: {}", pcap_error(e))),
                    Some(Ok(Block::InterfaceDescription(idb))) => break describe(&idb)?,
                    Some(Ok(
                        Block::EnhancedPacket(_) | Block::SimplePacket(_) | Block::Packet(_),
                    )) => return Err("pcapng: a packet before any interface description".into()),
                    Some(Ok(_)) => {}
                }
            };
            return Ok(Capture {
                link: first.0,
                src: Source::PcapNg(r, vec![first]),
                snaplen: 262_144,
            });
        }
        let known = [[0xa1, 0xb2, 0xc3, 0xd4], [0xa1, 0xb2, 0x3c, 0x4d]];
        if !known
            .iter()
            .any(|m| *m == magic || m.iter().rev().eq(magic.iter()))
        {
            return Err("not a pcap or pcapng file (unknown magic number)".into());
        }
        let r = PcapReader::new(file).map_err(pcap_error)?;
        let h = r.header();
        check_link(h.datalink)?;
        Ok(Capture {
            src: Source::Pcap(r),
            link: h.datalink,
            snaplen: h.snaplen.max(65_535),
        })
    }

    /// The next frame, or `None` at the end of the capture.
    fn next_frame(&mut self) -> Result<Option<Frame>, String> {
        match &mut self.src {
            Source::Pcap(r) => match r.next_packet() {
                None => Ok(None),
                Some(Err(e)) => Err(pcap_error(e)),
                Some(Ok(p)) => Ok(Some(Frame {
                    ts_ns: p.timestamp.as_nanos(),
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                })),
            },
            Source::PcapNg(r, ifaces) => {
                loop {
                    let block = match r.next_block() {
                        None => return Ok(None),
                        Some(Err(e)) => return Err(format!("pcapng: {}", pcap_error(e))),
                        Some(Ok(b)) => b,
                    };
                    match block {
                    Block::InterfaceDescription(idb) => {
                        let iface = describe(&idb)?;
                        if iface.0 != self.link {
                            return Err(format!(
                                "pcapng: interfaces of different link types ({:?}, {:?}); replay one at a time",
                                self.link, iface.0
                            ));
                        }
                        ifaces.push(iface);
                    }
                    Block::EnhancedPacket(p) => {
                        let Some(&(_, unit, offset)) = ifaces.get(p.interface_id as usize) else {
                            return Err(format!("pcapng: a packet names interface {}, which is not described", p.interface_id));
                        };
                        // pcap-file reads the raw timestamp as nanoseconds; it is in `unit`s.
                        let raw = p.timestamp.as_nanos();
                        return Ok(Some(Frame {
                            ts_ns: raw.saturating_mul(unit) / 1_000 + offset,
                            orig_len: p.original_len.max(p.data.len() as u32),
                            data: p.data.into_owned(),
                        }));
                    }
                    Block::SimplePacket(_) | Block::Packet(_) => {
                        return Err("pcapng: simple/obsolete packet blocks (no timestamp) are not supported".into())
                    }
                    _ => {}
                }
                }
            }
        }
    }
}

/// A pcapng interface: its link type, time unit (thousandths of a ns) and offset (ns).
fn describe(idb: &InterfaceDescriptionBlock) -> Result<(DataLink, u128, u128), String> {
    let (mut unit, mut offset) = (1_000_000u128, 0u128);
    for o in &idb.options {
        match o {
            InterfaceDescriptionOption::IfTsResol(r) => unit = ts_unit_ns(*r)?,
            InterfaceDescriptionOption::IfTsOffset(s) => offset = *s as u128 * 1_000_000_000,
            _ => {}
        }
    }
    check_link(idb.linktype)?;
    Ok((idb.linktype, unit, offset))
}

/// `if_tsresol`: the unit of a pcapng timestamp, in thousandths of a nanosecond.
fn ts_unit_ns(resol: u8) -> Result<u128, String> {
    let exp = (resol & 0x7f) as u32;
    let bad = || format!("pcapng: timestamp resolution {resol:#x} is not supported");
    if resol & 0x80 == 0 {
        // 10^-exp s = 10^(12-exp) thousandths of a ns.
        (exp <= 12).then(|| 10u128.pow(12 - exp)).ok_or_else(bad)
    } else {
        // 2^-exp s.
        (exp <= 40)
            .then(|| 1_000_000_000_000u128 >> exp)
            .filter(|u| *u > 0)
            .ok_or_else(bad)
    }
}

fn check_link(link: DataLink) -> Result<(), String> {
    match link {
        DataLink::ETHERNET
        | DataLink::RAW
        | DataLink::IPV4
        | DataLink::IPV6
        | DataLink::LINUX_SLL
        | DataLink::LINUX_SLL2 => Ok(()),
        other => Err(format!(
            "link type {other:?} is not supported (Ethernet, raw IP and Linux cooked are)"
        )),
    }
}

/// Where the network header starts in a frame, and its EtherType.
fn network_header(link: DataLink, f: &[u8]) -> (usize, u16) {
    let be16 = |at: usize| {
        f.get(at..at + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    };
    match link {
        DataLink::ETHERNET => {
            let mut at = 12;
            let mut proto = be16(at);
            // 802.1Q / 802.1ad tags: the qdiscs see what is inside them.
            while matches!(proto, 0x8100 | 0x88a8) && f.len() >= at + 6 {
                at += 4;
                proto = be16(at);
            }
            ((at + 2).min(f.len()), proto)
        }
        DataLink::LINUX_SLL => (16.min(f.len()), be16(14)),
        DataLink::LINUX_SLL2 => (20.min(f.len()), be16(0)),
        _ => {
            let proto = match f.first().map(|b| b >> 4) {
                Some(4) => ETH_P_IP,
                Some(6) => ETH_P_IPV6,
                _ => 0,
            };
            (0, proto)
        }
    }
}

/// Bytes the link-layer header of `link` takes in the frame's `orig_len`,
/// and what replaces it on an Ethernet `eth0` (the accounted length is
/// `orig_len - captured + 14`).
fn captured_l2(link: DataLink) -> Option<u32> {
    match link {
        DataLink::ETHERNET => None,
        DataLink::LINUX_SLL => Some(16),
        DataLink::LINUX_SLL2 => Some(20),
        _ => Some(0),
    }
}

/// Replay the capture `bytes` (pcap or pcapng) through eth0's default
/// qdisc and a 10 Mbit/s wire, its departures written to nowhere; the
/// packets in and out. The body of the fuzz target `pcap_reader`
/// (`fuzz/src/pcap_body.rs` compiles this file as a module of its own, as
/// this binary has no library to link).
#[cfg_attr(not(test), allow(dead_code))]
pub fn replay_bytes(bytes: &[u8]) -> Result<(u64, u64), String> {
    let mut capture = Capture::read(Box::new(Cursor::new(bytes.to_vec())))?;
    let header = PcapHeader {
        snaplen: capture.snaplen,
        datalink: capture.link,
        ts_resolution: TsResolution::NanoSecond,
        ..Default::default()
    };
    let sink: Box<dyn Write> = Box::new(std::io::sink());
    let writer = PcapWriter::with_header(sink, header).map_err(|e| e.to_string())?;
    let mut net = build_net(1000).map_err(|f| f.msg)?;
    let port = Port::new(PortConfig {
        rate_bps: 10_000_000,
        ..Default::default()
    });
    let mut r = Replayer::new(port, writer);
    let dev = net
        .devices
        .iter()
        .position(|d| d.info.name == "eth0")
        .expect("eth0 was created");
    r.replay(&mut capture, &mut net.devices[dev])?;
    Ok((r.count.in_packets, r.count.out_packets))
}

/// The start of virtual time: the first packet enters at 1 s.
const START: Time = Time(1_000_000_000);

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    in_packets: u64,
    in_bytes: u64,
    out_packets: u64,
    out_bytes: u64,
    last_departure: Time,
}

/// What is kept of a frame while its packet is inside the port: the
/// link-layer header as captured and how many bytes the capture cut off.
struct Kept {
    l2: Vec<u8>,
    cut: u32,
    /// `l2` is an Ethernet header, whose addresses the actions may change.
    ethernet: bool,
}

struct Replayer {
    port: Port,
    writer: PcapWriter<Box<dyn Write>>,
    /// What is needed to write out packet `frames_base + i`. A qdisc may
    /// send one packet several times (netem's duplicates, a GSO packet cut
    /// into segments), so an entry stays until nothing is queued anywhere.
    frames: Vec<Kept>,
    /// The packet id of `frames[0]`.
    frames_base: u64,
    /// Capture time (ns since the Unix epoch) of virtual time [`START`].
    epoch: Option<u128>,
    /// The latest arrival so far.
    last: Time,
    delivered: Vec<(Time, Packet)>,
    count: Counts,
}

/// How many times in a row the port may be advanced at one instant without
/// transmitting anything before the qdisc is taken to be stuck.
const STUCK_LIMIT: u32 = 10_000;

impl Replayer {
    /// A replayer sending through `port` and writing to `writer`.
    fn new(port: Port, writer: PcapWriter<Box<dyn Write>>) -> Self {
        Replayer {
            port,
            writer,
            frames: vec![],
            frames_base: 0,
            epoch: None,
            last: Time::ZERO,
            delivered: vec![],
            count: Counts::default(),
        }
    }

    fn replay(&mut self, cap: &mut Capture, dev: &mut Device) -> Result<(), String> {
        while let Some(f) = cap
            .next_frame()
            .map_err(|m| format!("packet {}: {m}", self.count.in_packets + 1))?
        {
            let epoch = *self.epoch.get_or_insert(f.ts_ns);
            let since = f.ts_ns.saturating_sub(epoch).min(u64::MAX as u128 / 2) as u64;
            let at = (START + Duration(since)).max(self.last);
            self.last = at;
            self.advance(dev, Some(at))?;
            let pkt = self.packet(cap.link, f, at);
            self.count.in_packets += 1;
            self.count.in_bytes += pkt.len as u64;
            // A refused packet is counted by the qdisc.
            let _ = self.port.send(dev, pkt, at);
            self.write_delivered()?;
            self.forget_if_idle(dev);
        }
        self.advance(dev, None)?;
        self.write_delivered()
    }

    /// Split a frame into the packet the qdiscs see and what is kept aside.
    fn packet(&mut self, link: DataLink, mut f: Frame, at: Time) -> Packet {
        let (net_at, proto) = network_header(link, &f.data);
        let cut = f.orig_len.saturating_sub(f.data.len() as u32);
        let len = match captured_l2(link) {
            None => f.orig_len,
            Some(l2) => f.orig_len.saturating_sub(l2) + 14,
        };
        let data = f.data.split_off(net_at);
        // The Ethernet addresses the qdiscs' filters see: the frame's, or
        // zeros on the Ethernet eth0 a frame of another link type crosses.
        let ethernet = link == DataLink::ETHERNET && f.data.len() >= 12;
        let mut eth = EthAddrs::default();
        if ethernet {
            eth.dst.copy_from_slice(&f.data[..6]);
            eth.src.copy_from_slice(&f.data[6..12]);
        }
        self.frames.push(Kept {
            l2: f.data,
            cut,
            ethernet,
        });
        let mut pkt = Packet::new(data, len, proto);
        pkt.eth = Some(eth);
        pkt.id = self.frames_base + self.frames.len() as u64 - 1;
        pkt.tstamp = at;
        pkt
    }

    /// Do everything the port has to do up to `until` (everything, if `None`).
    fn advance(&mut self, dev: &mut Device, until: Option<Time>) -> Result<(), String> {
        let mut idle_at: Option<(Time, u32)> = None;
        while let Some(t) = self.port.next_event() {
            if until.is_some_and(|u| t > u) {
                break;
            }
            let sent = self.port.stats.tx_packets;
            self.port.advance(dev, t, &mut self.delivered);
            if self.port.stats.tx_packets != sent {
                idle_at = None;
                continue;
            }
            let n = match idle_at {
                Some((t0, n)) if t0 == t => n + 1,
                _ => 1,
            };
            if n > STUCK_LIMIT {
                return Err(format!(
                    "the qdiscs make no progress at +{:.9} s (they keep asking to be woken at the same time)",
                    t.0.saturating_sub(START.0) as f64 / 1e9
                ));
            }
            idle_at = Some((t, n));
        }
        Ok(())
    }

    /// Forget the kept headers once no packet is queued in the qdiscs, the
    /// transmit buffer or on the wire: none of them can leave again.
    fn forget_if_idle(&mut self, dev: &Device) {
        if self.port.backlog_packets() == 0
            && dev.root.stats.qlen == 0
            && self.port.next_event().is_none()
        {
            self.frames_base += self.frames.len() as u64;
            self.frames.clear();
        }
    }

    fn write_delivered(&mut self) -> Result<(), String> {
        for (at, pkt) in self.delivered.drain(..) {
            let kept = pkt
                .id
                .checked_sub(self.frames_base)
                .and_then(|i| self.frames.get(i as usize));
            let Some(kept) = kept else {
                return Err(format!(
                    "packet {} left after its frame was forgotten (a bug: please report it)",
                    pkt.id + 1
                ));
            };
            let mut frame = kept.l2.clone();
            if let (true, Some(e)) = (kept.ethernet, pkt.eth) {
                frame[..6].copy_from_slice(&e.dst);
                frame[6..12].copy_from_slice(&e.src);
            }
            frame.extend_from_slice(&pkt.data);
            let orig_len = frame.len() as u32 + kept.cut;
            let epoch = self.epoch.unwrap_or(0);
            let ts = epoch + at.0.saturating_sub(START.0) as u128;
            let ts =
                std::time::Duration::new((ts / 1_000_000_000) as u64, (ts % 1_000_000_000) as u32);
            self.writer
                .write_packet(&PcapPacket::new(ts, orig_len, &frame))
                .map_err(|e| format!("writing the output: {e}"))?;
            self.count.out_packets += 1;
            self.count.out_bytes += pkt.len as u64;
            self.count.last_departure = at;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_join_continuations_and_drop_comments() {
        let text = "#!/bin/sh\n\n# shaping\ntc qdisc add dev eth0 root \\\n  handle 1: htb default 20 # root\n   \ntc class show dev eth0\n";
        let l = script_lines(text);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].0, 4);
        assert_eq!(
            l[0].1.join(" "),
            "tc qdisc add dev eth0 root handle 1: htb default 20"
        );
        assert_eq!(l[1].0, 7);
    }

    #[test]
    fn scripts_refuse_shell_syntax_and_other_commands() {
        let mut net = build_net(1000).ok().unwrap();
        assert!(apply_script(&mut net, "tc qdisc add dev $DEV root pfifo")
            .unwrap_err()
            .contains("line 1"));
        assert!(apply_script(&mut net, "\nip link set eth0 up")
            .unwrap_err()
            .contains("line 2"));
        assert!(
            apply_script(&mut net, "tc qdisc add dev eth0 root tbf rate")
                .unwrap_err()
                .contains("failed")
        );
        assert!(apply_script(&mut net, "/sbin/tc qdisc add dev eth0 root pfifo limit 5").is_ok());
    }

    #[test]
    fn network_headers_are_found_behind_each_link_type() {
        let mut eth = vec![0u8; 12];
        eth.extend([0x81, 0x00, 0, 5, 0x08, 0x00, 0x45]);
        assert_eq!(network_header(DataLink::ETHERNET, &eth), (18, ETH_P_IP));
        assert_eq!(network_header(DataLink::RAW, &[0x60, 0]), (0, ETH_P_IPV6));
        let mut sll = vec![0u8; 14];
        sll.extend([0x08, 0x00, 0x45]);
        assert_eq!(network_header(DataLink::LINUX_SLL, &sll), (16, ETH_P_IP));
        assert_eq!(network_header(DataLink::ETHERNET, &[1, 2, 3]), (3, 0));
    }

    #[test]
    fn captures_are_read_from_bytes_and_damage_is_an_error() {
        // A pcap header (µs, raw IP) and one 20-byte IPv4 packet.
        let mut cap = vec![];
        cap.extend(0xa1b2_c3d4u32.to_le_bytes());
        cap.extend([2, 0, 4, 0]);
        cap.extend([0u8; 8]);
        cap.extend(65535u32.to_le_bytes());
        cap.extend(101u32.to_le_bytes());
        cap.extend([0u8; 8]);
        cap.extend(20u32.to_le_bytes());
        cap.extend(20u32.to_le_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[3] = 20;
        cap.extend(ip);
        assert_eq!(replay_bytes(&cap), Ok((1, 1)));
        assert!(replay_bytes(&cap[..cap.len() - 3])
            .unwrap_err()
            .contains("truncated"));
        assert!(replay_bytes(&cap[..3]).unwrap_err().contains("too short"));
    }

    #[test]
    fn the_pcap_reader_fuzz_seeds_replay_or_are_refused() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/pcap_reader");
        let mut read = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let bytes = std::fs::read(e.unwrap().path()).unwrap();
            for cut in [bytes.len(), bytes.len() / 2, 30] {
                if let Ok((i, o)) = replay_bytes(&bytes[..cut.min(bytes.len())]) {
                    assert!(o <= i);
                    read += 1;
                }
            }
        }
        assert!(read >= 4, "{read} captures read");
    }

    #[test]
    fn buffers_and_time_units_parse() {
        assert_eq!(parse_buffer("1"), Some(TxBuffer::Packets(1)));
        assert_eq!(parse_buffer("32p"), Some(TxBuffer::Packets(32)));
        assert_eq!(parse_buffer("64kb"), Some(TxBuffer::Bytes(65536)));
        assert_eq!(parse_buffer("0"), None);
        assert_eq!(parse_buffer("lots"), None);
        assert_eq!(ts_unit_ns(6), Ok(1_000_000));
        assert_eq!(ts_unit_ns(9), Ok(1_000));
        assert_eq!(ts_unit_ns(0x80 | 10), Ok(1_000_000_000_000 >> 10));
    }
}
