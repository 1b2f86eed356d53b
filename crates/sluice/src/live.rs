//! `sluice link ...` and `sluice shell ...`: the command lines of the live
//! data plane (crates/sluice-net).

use clap::{Args, Parser, Subcommand};
use sluice_net::link::{self, LinkSpec, Side, Wire};
use sluice_net::shell::{self, ShellOpts};
use sluice_net::wire::{read_bounded, Buffer, WireSettings};

#[derive(Parser)]
#[command(
    name = "sluice link",
    about = "Two network namespaces joined through sluice's qdiscs"
)]
pub(crate) struct LinkCli {
    #[command(subcommand)]
    cmd: LinkCmd,
}

#[derive(Subcommand)]
// Parsed once per run: the size of `Up` costs nothing.
#[allow(clippy::large_enum_variant)]
enum LinkCmd {
    /// Create namespaces NAME-a and NAME-b joined by TUN devices a0 and b0, and start the daemon.
    Up(UpArgs),
    /// Stop link NAME and remove everything it made.
    Down {
        /// The link.
        name: String,
    },
    /// Show the running links (and remove the leftovers of dead ones).
    List,
    /// Run a command in side a's or b's namespace (for a root link, as `ip netns exec NAME-a`;
    /// for a rootless one, inside the link's user namespace).
    Exec {
        /// The link.
        name: String,
        /// The side: a or b.
        #[arg(value_parser = ["a", "b"])]
        side: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Change a running link's wires at once: rate, delay, loss, buffer,
    /// carrier, a trace, a schedule or a delay trace.
    Set(SetArgs),
    /// The link's own counters (TUN I/O, malformed packets, wires), as JSON.
    Status {
        /// The link.
        name: String,
    },
    #[command(name = "__daemon", hide = true)]
    Daemon { spec: String },
}

/// One direction's wire, both directions unless the -ab/-ba form is given.
#[derive(Args, Default)]
struct WireArgs {
    /// Wire rate (tc units: 10mbit, 1gbit, 500kbit); default unlimited.
    #[arg(long)]
    rate: Option<String>,
    /// Wire rate a->b.
    #[arg(long)]
    rate_ab: Option<String>,
    /// Wire rate b->a.
    #[arg(long)]
    rate_ba: Option<String>,
    /// One-way propagation delay (tc units: 50ms, 200us).
    #[arg(long)]
    delay: Option<String>,
    /// Delay a->b.
    #[arg(long)]
    delay_ab: Option<String>,
    /// Delay b->a.
    #[arg(long)]
    delay_ba: Option<String>,
    /// Transmit buffer after the qdisc: N packets (100p) or bytes (64000b); default 1p.
    #[arg(long)]
    buffer: Option<String>,
    /// Buffer a->b.
    #[arg(long)]
    buffer_ab: Option<String>,
    /// Buffer b->a.
    #[arg(long)]
    buffer_ba: Option<String>,
    /// Random loss on the wire, percent (1 or 1%).
    #[arg(long)]
    loss: Option<String>,
    /// Loss a->b.
    #[arg(long)]
    loss_ab: Option<String>,
    /// Loss b->a.
    #[arg(long)]
    loss_ba: Option<String>,
    /// Keep the CPUs out of their idle halt while the link carries traffic,
    /// for wake-ups within microseconds: auto (in a virtual machine), on, off.
    #[arg(long, default_value = "auto")]
    keep_awake: sluice_net::awake::Mode,
}

#[derive(Args)]
struct UpArgs {
    /// The link's name (namespaces NAME-a and NAME-b; `sluice tc -n NAME`).
    name: String,
    #[command(flatten)]
    wire: WireArgs,
    /// Side a's address (default 10.77.X.1/24, X a free subnet).
    #[arg(long)]
    addr_a: Option<String>,
    /// Side b's address (default 10.77.X.2/24).
    #[arg(long)]
    addr_b: Option<String>,
    /// MTU of a0 and b0.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// A tc command for the link before it carries traffic, e.g. 'qdisc add dev a0 root netem delay 50ms' (repeatable).
    #[arg(long = "tc")]
    tc: Vec<String>,
    #[command(flatten)]
    files: FileArgs,
}

/// Wires that follow files: traces, schedules, delay traces.
#[derive(Args, Default)]
struct FileArgs {
    /// A Mahimahi delivery-opportunity trace (integer ms per line, 1504 bytes each) giving the a->b capacity.
    #[arg(long)]
    trace_ab: Option<String>,
    /// A trace for the b->a capacity.
    #[arg(long)]
    trace_ba: Option<String>,
    /// Play the traces once, then carry nothing (Mahimahi's --once); default: repeat.
    #[arg(long)]
    once: bool,
    /// A schedule (CSV rows at,rate,delay,loss[,ramp]; last row AT,loop) for the a->b wire.
    #[arg(long)]
    schedule_ab: Option<String>,
    /// A schedule for the b->a wire.
    #[arg(long)]
    schedule_ba: Option<String>,
    /// A per-packet delay trace (ms per line) for the a->b wire.
    #[arg(long)]
    delay_trace_ab: Option<String>,
    /// A per-packet delay trace for the b->a wire.
    #[arg(long)]
    delay_trace_ba: Option<String>,
    /// How long each line of a delay trace holds (tc time units; default 1ms).
    #[arg(long)]
    delay_trace_step: Option<String>,
}

impl FileArgs {
    /// The files of the a->b and b->a wires, read and checked (errors name
    /// the file and line); a wire on a trace gets no transmit ring unless
    /// `ring_given` (its opportunities take packets from the qdisc, as
    /// Mahimahi's link takes them from its queue).
    fn starts(&self, ring_given: [bool; 2]) -> Result<[WireSettings; 2], String> {
        let step = match &self.delay_trace_step {
            Some(s) => match wire_delay("--delay-trace-step", s)? {
                0 => return Err(illegal("--delay-trace-step", s, "must be more than 0")),
                ns => Some(ns),
            },
            None => None,
        };
        let read = |f: &Option<String>| f.as_deref().map(read_bounded).transpose();
        let mut out = [WireSettings::default(), WireSettings::default()];
        let per_dir = [
            (&self.trace_ab, &self.schedule_ab, &self.delay_trace_ab),
            (&self.trace_ba, &self.schedule_ba, &self.delay_trace_ba),
        ];
        for (i, (trace, schedule, delay_trace)) in per_dir.into_iter().enumerate() {
            let w = &mut out[i];
            w.trace = read(trace)?;
            w.once = self.once && w.trace.is_some();
            w.schedule = read(schedule)?;
            w.delay_trace = read(delay_trace)?;
            w.delay_trace_step_ns = step.filter(|_| w.delay_trace.is_some());
            if w.trace.is_some() && !ring_given[i] {
                w.buffer = Some(Buffer::Packets(0));
            }
            w.change()?;
        }
        Ok(out)
    }
}

#[derive(Args)]
struct SetArgs {
    /// The link.
    name: String,
    /// Which wires --rate, --delay, --loss, --buffer, --up and --down change.
    #[arg(long, default_value = "both", value_parser = ["ab", "ba", "both"])]
    dir: String,
    /// A fixed rate (tc units; 0 is an outage); ends a trace.
    #[arg(long)]
    rate: Option<String>,
    /// A fixed one-way delay (tc units); ends a delay trace.
    #[arg(long)]
    delay: Option<String>,
    /// Random loss on the wire, percent.
    #[arg(long)]
    loss: Option<String>,
    /// The transmit buffer: N packets (100p) or bytes (64000b).
    #[arg(long)]
    buffer: Option<String>,
    /// Carrier up.
    #[arg(long, conflicts_with = "down")]
    up: bool,
    /// Carrier down: the wire loses what crosses it.
    #[arg(long)]
    down: bool,
    #[command(flatten)]
    files: FileArgs,
}

impl SetArgs {
    /// The settings of the a->b and b->a wires (`None`: left alone).
    fn wires(&self) -> Result<[Option<WireSettings>; 2], String> {
        let mut common = WireSettings::default();
        if let Some(r) = &self.rate {
            common.rate_bps = Some(if r == "0" { 0 } else { wire_rate("--rate", r)? });
        }
        if let Some(d) = &self.delay {
            common.delay_ns = Some(wire_delay("--delay", d)?);
        }
        if let Some(l) = &self.loss {
            common.loss = Some(wire_loss("--loss", l)?);
        }
        if let Some(b) = &self.buffer {
            let mut w = Wire::default();
            wire_buffer("--buffer", b, &mut w)?;
            common.buffer = Some(match (w.buffer_packets, w.buffer_bytes) {
                (Some(p), _) => Buffer::Packets(p),
                (None, b) => Buffer::Bytes(b.unwrap_or(1)),
            });
        }
        common.up = (self.up || self.down).then_some(self.up);
        let given = common.buffer.is_some();
        let files = self.files.starts([given, given])?;
        let mut out = [None, None];
        for (i, mut f) in files.into_iter().enumerate() {
            let wanted = self.dir == "both" || self.dir == ["ab", "ba"][i];
            if wanted {
                f = merge(common.clone(), f);
            }
            if !f.is_empty() {
                out[i] = Some(f);
            }
        }
        if out.iter().all(Option::is_none) {
            return Err(
                "nothing to set: give --rate, --delay, --loss, --buffer, --up, --down, \
                        --trace-ab/ba, --schedule-ab/ba or --delay-trace-ab/ba"
                    .into(),
            );
        }
        Ok(out)
    }
}

/// `files`' settings over `common`'s (a trace's ring of 0 over none given).
fn merge(common: WireSettings, files: WireSettings) -> WireSettings {
    WireSettings {
        buffer: common.buffer.or(files.buffer),
        trace: files.trace,
        once: files.once,
        schedule: files.schedule,
        delay_trace: files.delay_trace,
        delay_trace_step_ns: files.delay_trace_step_ns,
        ..common
    }
}

/// A flag's value: its name (`--rate-ab`) and the text given, if any.
type Flag<'a> = (&'static str, Option<&'a String>);

/// `illegal value for "--rate": "7bit"`, tbf's wording, and why.
fn illegal(flag: &str, value: &str, why: &str) -> String {
    format!("illegal value for \"{flag}\": \"{value}\": {why}")
}

/// A wire rate in bits/s ([`sluice_core::units::parse_link_rate`]): one
/// that rounds to 0 is refused rather than taken for an unlimited wire.
fn wire_rate(flag: &str, r: &str) -> Result<u64, String> {
    use sluice_core::units::LinkRateError;
    sluice_core::units::parse_link_rate(r).map_err(|e| match e {
        LinkRateError::RoundsToZero => illegal(
            flag,
            r,
            &format!("{e}; leave the flag out for an unlimited wire"),
        ),
        e => illegal(flag, r, &e.to_string()),
    })
}

/// A one-way delay in ns: tc's units; 0 is none.
fn wire_delay(flag: &str, d: &str) -> Result<u64, String> {
    let ns = sluice_core::units::parse_time_ns(d)
        .map_err(|_| illegal(flag, d, "a time in tc's units: 50ms, 200us, 1s"))?;
    match ns {
        // parse_time_ns's mark of a time beyond the 64-bit nanosecond range.
        i64::MIN => Err(illegal(flag, d, "out of range (up to 292 years)")),
        ns if ns < 0 => Err(illegal(flag, d, "a delay cannot be negative")),
        ns => Ok(ns as u64),
    }
}

/// A transmit buffer: N packets (`100p`) or bytes (`64000b`, tc's size
/// units); at least one packet or byte, since an empty one would hold the
/// packet being sent anyway.
fn wire_buffer(flag: &str, b: &str, w: &mut Wire) -> Result<(), String> {
    let bad = |why: &str| illegal(flag, b, why);
    let units = "N packets (100p) or bytes (64000b, 64kb)";
    if let Some(p) = b.strip_suffix('p') {
        let n: u32 = p.parse().map_err(|_| bad(units))?;
        if n == 0 {
            return Err(bad("a buffer holds at least 1 packet"));
        }
        w.buffer_packets = Some(n);
        w.buffer_bytes = None;
    } else {
        let n = sluice_core::units::parse_size(b.strip_suffix('b').unwrap_or(b))
            .map_err(|_| bad(units))?;
        if n == 0 {
            return Err(bad("a buffer holds at least 1 byte"));
        }
        w.buffer_packets = None;
        w.buffer_bytes = Some(u64::from(n));
    }
    Ok(())
}

/// Random loss: a percentage, 0 to 100, with or without `%`.
fn wire_loss(flag: &str, l: &str) -> Result<f64, String> {
    let p: f64 = l
        .strip_suffix('%')
        .unwrap_or(l)
        .parse()
        .map_err(|_| illegal(flag, l, "a percentage, 0 to 100"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(illegal(flag, l, "a percentage, 0 to 100"));
    }
    Ok(p / 100.0)
}

fn one_wire(rate: Flag, delay: Flag, buffer: Flag, loss: Flag) -> Result<Wire, String> {
    let mut w = Wire::default();
    if let (flag, Some(r)) = rate {
        w.rate_bps = wire_rate(flag, r)?;
    }
    if let (flag, Some(d)) = delay {
        w.delay_ns = wire_delay(flag, d)?;
    }
    if let (flag, Some(b)) = buffer {
        wire_buffer(flag, b, &mut w)?;
    }
    if let (flag, Some(l)) = loss {
        w.loss = wire_loss(flag, l)?;
    }
    Ok(w)
}

impl WireArgs {
    /// The a->b and b->a wires.
    fn wires(&self) -> Result<(Wire, Wire), String> {
        // The one-direction flag if given, else the both-directions one.
        fn pick<'a>(
            one: (&'static str, &'a Option<String>),
            both: (&'static str, &'a Option<String>),
        ) -> Flag<'a> {
            match one {
                (flag, Some(v)) => (flag, Some(v)),
                _ => (both.0, both.1.as_ref()),
            }
        }
        let ab = one_wire(
            pick(("--rate-ab", &self.rate_ab), ("--rate", &self.rate)),
            pick(("--delay-ab", &self.delay_ab), ("--delay", &self.delay)),
            pick(("--buffer-ab", &self.buffer_ab), ("--buffer", &self.buffer)),
            pick(("--loss-ab", &self.loss_ab), ("--loss", &self.loss)),
        )?;
        let ba = one_wire(
            pick(("--rate-ba", &self.rate_ba), ("--rate", &self.rate)),
            pick(("--delay-ba", &self.delay_ba), ("--delay", &self.delay)),
            pick(("--buffer-ba", &self.buffer_ba), ("--buffer", &self.buffer)),
            pick(("--loss-ba", &self.loss_ba), ("--loss", &self.loss)),
        )?;
        Ok((ab, ba))
    }
}

fn tc_words(cmd: &str) -> Vec<String> {
    let mut w: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    if w.first().map(String::as_str) == Some("tc") {
        w.remove(0);
    }
    w
}

fn exe() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "sluice".into())
}

/// `sluice link ...`
pub fn link_main(args: &[String]) -> i32 {
    let cli = match LinkCli::try_parse_from(
        std::iter::once("sluice link".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match cli.cmd {
        LinkCmd::Daemon { spec } => sluice_net::daemon::main(&spec),
        LinkCmd::Up(a) => {
            let (ab, ba) = match a.wire.wires() {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("sluice link: {e}");
                    return 2;
                }
            };
            let w = &a.wire;
            let ring = [
                w.buffer.is_some() || w.buffer_ab.is_some(),
                w.buffer.is_some() || w.buffer_ba.is_some(),
            ];
            let [ab_start, ba_start] = match a.files.starts(ring) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("sluice link: {e}");
                    return 2;
                }
            };
            let side_a = Side {
                netns: Some(format!("{}-a", a.name)),
                ifname: "a0".into(),
                addr: a.addr_a.unwrap_or_else(|| "10.77.{X}.1/24".into()),
                default_via: None,
            };
            let side_b = Side {
                netns: Some(format!("{}-b", a.name)),
                ifname: "b0".into(),
                addr: a.addr_b.unwrap_or_else(|| "10.77.{X}.2/24".into()),
                default_via: None,
            };
            let spec = LinkSpec {
                ab,
                ba,
                tc: a.tc.iter().map(|c| tc_words(c)).collect(),
                mtu: a.mtu,
                keep_awake: a.wire.keep_awake,
                // Without root, the link lives in a user namespace (sluice-net's rootless.rs).
                rootless: !sluice_net::rootless::privileged(),
                ab_start,
                ba_start,
                ..LinkSpec::new(a.name, side_a, side_b)
            };
            match link::up(&exe(), spec) {
                Ok(rec) => {
                    println!("{}", link::describe(&rec));
                    0
                }
                Err(e) => {
                    eprintln!("sluice link: {e}");
                    1
                }
            }
        }
        LinkCmd::Down { name } => match link::down(&name) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sluice link: {e}");
                1
            }
        },
        LinkCmd::Exec {
            name,
            side,
            command,
        } => {
            let e = link::exec(&name, &side, &command);
            eprintln!("sluice link: {e}");
            if matches!(e, link::LinkError::Invalid(ref m) if m.contains("No such file")) {
                127
            } else {
                1
            }
        }
        LinkCmd::List => match link::list() {
            Ok(recs) => {
                for r in recs {
                    println!("{}", link::describe(&r));
                }
                0
            }
            Err(e) => {
                eprintln!("sluice link: {e}");
                1
            }
        },
        LinkCmd::Set(a) => link_set(&a),
        LinkCmd::Status { name } => {
            match sluice_net::control::request(&name, &sluice_net::control::Request::Status) {
                Ok(r) => {
                    print!("{}", r.stdout);
                    eprint!("{}", r.stderr);
                    r.code
                }
                Err(e) => {
                    eprintln!("sluice link: {e}");
                    1
                }
            }
        }
    }
}

/// `sluice link set NAME ...`: one control request; nothing printed.
fn link_set(a: &SetArgs) -> i32 {
    let [ab, ba] = match a.wires() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("sluice link set: {e}");
            return 2;
        }
    };
    if let Err(e) = link::check_name(&a.name) {
        eprintln!("sluice link set: {e}");
        return 2;
    }
    let req = sluice_net::control::Request::Wire {
        ab: ab.map(Box::new),
        ba: ba.map(Box::new),
    };
    match sluice_net::control::request(&a.name, &req) {
        Ok(r) => {
            eprint!("{}", r.stderr);
            r.code
        }
        Err(e) => {
            eprintln!("sluice link set: {e}");
            1
        }
    }
}

#[derive(Parser)]
#[command(
    name = "sluice shell",
    about = "Run a command in a fresh namespace whose traffic goes through sluice's qdiscs (NAT to the host)"
)]
pub(crate) struct ShellCli {
    /// The uplink's root qdisc, e.g. 'tbf rate 1mbit burst 10k latency 50ms' (dev a0).
    #[arg(long)]
    uplink: Option<String>,
    /// The downlink's root qdisc (dev b0).
    #[arg(long)]
    downlink: Option<String>,
    /// A file of tc commands for the link (dev a0: uplink, dev b0: downlink), one per line.
    #[arg(long)]
    script: Option<String>,
    #[command(flatten)]
    wire: WireArgs,
    /// A Mahimahi trace for the uplink's capacity (from the command outward).
    #[arg(long)]
    uplink_trace: Option<String>,
    /// A Mahimahi trace for the downlink's capacity (towards the command).
    #[arg(long)]
    downlink_trace: Option<String>,
    /// Play the traces once, then carry nothing; default: repeat.
    #[arg(long)]
    once: bool,
    /// The command (default: $SHELL).
    #[arg(last = true)]
    command: Vec<String>,
}

/// `sluice shell ...`
pub fn shell_main(args: &[String]) -> i32 {
    let cli = match ShellCli::try_parse_from(
        std::iter::once("sluice shell".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // --rate-ab is the uplink (namespace -> host), --rate-ba the downlink.
    let (up, down) = match cli.wire.wires() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("sluice shell: {e}");
            return 2;
        }
    };
    let mut tc = vec![];
    for (dev, spec) in [("a0", &cli.uplink), ("b0", &cli.downlink)] {
        if let Some(s) = spec {
            let mut w: Vec<String> = ["qdisc", "replace", "dev", dev, "root"]
                .map(String::from)
                .to_vec();
            w.extend(s.split_whitespace().map(String::from));
            tc.push(w);
        }
    }
    if let Some(f) = &cli.script {
        match std::fs::read_to_string(f) {
            Ok(text) => tc.extend(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or(""))
                    .filter(|l| !l.trim().is_empty())
                    .map(tc_words),
            ),
            Err(e) => {
                eprintln!("sluice shell: {f}: {e}");
                return 2;
            }
        }
    }
    let files = FileArgs {
        trace_ab: cli.uplink_trace.clone(),
        trace_ba: cli.downlink_trace.clone(),
        once: cli.once,
        ..Default::default()
    };
    let w = &cli.wire;
    let ring = [
        w.buffer.is_some() || w.buffer_ab.is_some(),
        w.buffer.is_some() || w.buffer_ba.is_some(),
    ];
    let [up_start, down_start] = match files.starts(ring) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice shell: {e}");
            return 2;
        }
    };
    let opts = ShellOpts {
        tc,
        up,
        down,
        command: cli.command,
        keep_awake: cli.wire.keep_awake,
        up_start,
        down_start,
        ..Default::default()
    };
    shell::run(&exe(), &opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_round_down_to_whole_bytes_per_second_as_tc_does() {
        // get_rate64: bits / 8, truncated; back in bits for the wire.
        assert_eq!(wire_rate("--rate", "8bit"), Ok(8));
        assert_eq!(wire_rate("--rate", "15bit"), Ok(8));
        assert_eq!(wire_rate("--rate", "1Bps"), Ok(8));
        assert_eq!(wire_rate("--rate", "10mbit"), Ok(10_000_000));
        assert_eq!(wire_rate("--rate", "1kibit"), Ok(1024));
        for zero in ["7bit", "0", "0.9Bps", "-0"] {
            let e = wire_rate("--rate", zero).unwrap_err();
            assert!(e.contains("rounds to 0 bytes/s"), "{zero}: {e}");
        }
    }

    #[test]
    fn delays_buffers_and_losses_take_their_whole_ranges_and_nothing_past_them() {
        assert_eq!(wire_delay("--delay", "0"), Ok(0));
        assert_eq!(wire_delay("--delay", "0.5ns"), Ok(0));
        assert_eq!(wire_delay("--delay", "50ms"), Ok(50_000_000));
        assert_eq!(
            wire_delay("--delay", "9223372036s"),
            Ok(9_223_372_036_000_000_000)
        );
        assert!(wire_delay("--delay", "9223372037s").is_err());
        let mut w = Wire::default();
        wire_buffer("--buffer", "1p", &mut w).unwrap();
        assert_eq!((w.buffer_packets, w.buffer_bytes), (Some(1), None));
        wire_buffer("--buffer", "4294967295p", &mut w).unwrap();
        assert_eq!(w.buffer_packets, Some(u32::MAX));
        assert!(wire_buffer("--buffer", "4294967296p", &mut w).is_err());
        wire_buffer("--buffer", "64kb", &mut w).unwrap();
        assert_eq!((w.buffer_packets, w.buffer_bytes), (None, Some(65536)));
        // get_size: 4 GiB wraps a 32-bit size, so it is refused.
        assert!(wire_buffer("--buffer", "4gb", &mut w).is_err());
        assert_eq!(wire_loss("--loss", "100%"), Ok(1.0));
        assert_eq!(wire_loss("--loss", "0"), Ok(0.0));
        assert!(wire_loss("--loss", "100.1").is_err());
        assert!(wire_loss("--loss", "5%%").is_err());
        assert!(wire_loss("--loss", "inf").is_err());
    }
}
