//! Toxics: what a Toxiproxy client asks a proxy to do to a connection.
//!
//! A toxic has a name (unique within its proxy), a type with its
//! attributes, the direction it acts on (`upstream`: client to server;
//! `downstream`: server to client) and a toxicity, the probability that it
//! acts on a given connection (drawn once per connection and toxic). The
//! JSON form, the defaults and the error messages are Toxiproxy 2.x's, so
//! its clients work unchanged.
//!
//! Each type maps onto one stage of a direction's pipeline ([`crate::pipe`]):
//! `latency` is a netem qdisc (`delay L jitter J`: uniform jitter, as
//! Toxiproxy draws it), `bandwidth` a tbf, `tc` any qdisc spec the `tc`
//! language accepts (sluice's own type), and the types that act on the
//! byte stream or the connection (`slicer`, `limit_data`, `timeout`,
//! `reset_peer`, `slow_close`) are stages of their own.
//!
//! sluice's own attributes make `bandwidth` and `latency` change over time
//! ([`Varying`]): `bandwidth` takes a Mahimahi delivery-opportunity
//! `trace` (with `trace_once`) or a `schedule` whose rate column it
//! follows; `latency` a `schedule` whose delay column it follows or a
//! `delay_trace` (with `delay_trace_step`). Such a toxic is a stage of its
//! own ([`crate::wire`]): sluice-core's [`Port`](sluice_core::port::Port)
//! with the wire the attributes describe.

use serde_json::{Map, Value};
use sluice_core::port::WireChange;
use sluice_core::schedule::Schedule;
use sluice_core::time::Duration;
use sluice_core::trace::{DelayTrace, Trace};
use std::sync::Arc;

/// The largest `latency` and `jitter`, in ms. A latency toxic is a netem
/// qdisc, whose delay `tc` takes as a count of 64 ns psched ticks in 32
/// bits (iproute2's `get_ticks` refuses more): 274 877 906 µs. Toxiproxy
/// takes any int64; larger values are refused rather than wrapped.
pub const NETEM_MAX_MS: i64 = 274_877;

/// The largest time in ms (`slow_close`'s delay, `timeout`, `reset_peer`):
/// nanoseconds in an i64, ~292 years (Go's `time.Duration`, which
/// Toxiproxy's own multiplication would wrap beyond).
pub const MAX_MS: i64 = i64::MAX / 1_000_000;

/// The largest time in µs (the slicer's `delay`), for the same reason.
pub const MAX_US: i64 = i64::MAX / 1_000;

/// The largest `bandwidth` rate in KB/s: bit/s in an i64 (9.2 Ebit/s), the
/// tbf rate it becomes.
pub const MAX_RATE: i64 = i64::MAX / 8_000;

/// The longest `delay_trace_step`, in ms: a year, as a trace's timestamps.
pub const MAX_STEP_MS: i64 = sluice_core::trace::MAX_TRACE_MS as i64;

/// A text attribute with what it parsed into; two are equal when their
/// texts are (so an unchanged toxic keeps its stages).
#[derive(Clone, Debug)]
pub struct Parsed<T> {
    /// The attribute as the client sent it.
    pub text: Arc<str>,
    /// What it describes.
    pub value: T,
}

impl<T> PartialEq for Parsed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// sluice's own attributes of `bandwidth` and `latency`: a wire that
/// changes over time. Every one unset (the default) is Toxiproxy's toxic.
#[derive(Clone, Debug, PartialEq)]
pub struct Varying {
    /// `bandwidth`: the stream's capacity from a Mahimahi trace (its text).
    pub trace: Option<Parsed<Trace>>,
    /// `bandwidth`: play the trace once, then carry nothing (Mahimahi's `--once`).
    pub trace_once: bool,
    /// `bandwidth` (rate column) or `latency` (delay column): a schedule's CSV text.
    pub schedule: Option<Parsed<Schedule>>,
    /// `latency`: per-packet delays from a delay trace (its text).
    pub delay_trace: Option<Parsed<DelayTrace>>,
    /// `latency`: how long each line of the delay trace holds, ms.
    pub delay_trace_step: i64,
}

impl Default for Varying {
    fn default() -> Self {
        Varying {
            trace: None,
            trace_once: false,
            schedule: None,
            delay_trace: None,
            delay_trace_step: 1,
        }
    }
}

impl Varying {
    /// Does the toxic change over time (a stage of [`crate::wire`])?
    pub fn any(&self) -> bool {
        self.trace.is_some() || self.schedule.is_some() || self.delay_trace.is_some()
    }

    /// The attributes set, after Toxiproxy's own (nothing when none is:
    /// a Toxiproxy toxic's JSON stays Toxiproxy's).
    fn attributes(&self, out: &mut Vec<(&'static str, Value)>) {
        if let Some(t) = &self.trace {
            out.push(("trace", t.text.to_string().into()));
            out.push(("trace_once", self.trace_once.into()));
        }
        if let Some(s) = &self.schedule {
            out.push(("schedule", s.text.to_string().into()));
        }
        if let Some(d) = &self.delay_trace {
            out.push(("delay_trace", d.text.to_string().into()));
            out.push(("delay_trace_step", self.delay_trace_step.into()));
        }
    }

    /// The attributes `type_name` takes from `attrs` (a bandwidth toxic's
    /// `trace`, `trace_once`, `schedule`; a latency toxic's `schedule`,
    /// `delay_trace`, `delay_trace_step`), each parsed, errors naming the
    /// attribute and the line.
    fn parse(type_name: &str, attrs: &Map<String, Value>) -> Result<Varying, String> {
        if attrs.get("trace_file").is_some_and(|f| !f.is_null()) {
            return Err(format!(
                "{type_name}: attribute trace_file is not taken (the API would read any file \
                 the proxy can); send the trace's text as attribute trace"
            ));
        }
        let v = Varying {
            schedule: Self::schedule(type_name, attrs)?,
            ..Default::default()
        };
        if type_name == "bandwidth" {
            Self::bandwidth(v, attrs)
        } else {
            Self::latency(v, attrs)
        }
    }

    /// A text attribute, if given.
    fn text(attrs: &Map<String, Value>, name: &str) -> Result<Option<Arc<str>>, String> {
        match attrs.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str().into())),
            Some(v) => Err(format!("json: cannot unmarshal {v} into attribute {name}")),
        }
    }

    /// `schedule`: it must set the column `type_name` follows.
    fn schedule(
        type_name: &str,
        attrs: &Map<String, Value>,
    ) -> Result<Option<Parsed<Schedule>>, String> {
        let Some(text) = Self::text(attrs, "schedule")? else {
            return Ok(None);
        };
        let value =
            Schedule::parse(&text).map_err(|e| format!("{type_name}: attribute schedule: {e}"))?;
        let (column, sets): (&str, fn(&WireChange) -> bool) = if type_name == "bandwidth" {
            ("rate", |c| c.rate_bps.is_some())
        } else {
            ("delay", |c| c.delay.is_some())
        };
        if !value.steps().iter().any(|(_, c)| sets(c)) {
            return Err(format!(
                "{type_name}: attribute schedule: no row sets a {column} \
                 (a {type_name} toxic follows the {column} column)"
            ));
        }
        Ok(Some(Parsed { text, value }))
    }

    /// A bandwidth toxic's `trace` and `trace_once`.
    fn bandwidth(mut v: Varying, attrs: &Map<String, Value>) -> Result<Varying, String> {
        if let Some(text) = Self::text(attrs, "trace")? {
            let value =
                Trace::parse(&text).map_err(|e| format!("bandwidth: attribute trace: {e}"))?;
            v.trace = Some(Parsed { text, value });
        }
        v.trace_once = match attrs.get("trace_once") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(x) => {
                return Err(format!(
                    "json: cannot unmarshal {x} into attribute trace_once"
                ))
            }
        };
        if v.trace.is_some() && v.schedule.is_some() {
            return Err(
                "bandwidth: attributes trace and schedule exclude each other \
                 (a schedule's rate would end the trace)"
                    .into(),
            );
        }
        Ok(v)
    }

    /// A latency toxic's `delay_trace` and `delay_trace_step`.
    fn latency(mut v: Varying, attrs: &Map<String, Value>) -> Result<Varying, String> {
        v.delay_trace_step = match attrs.get("delay_trace_step") {
            None | Some(Value::Null) => 1,
            Some(x) => x.as_i64().ok_or_else(|| {
                format!("json: cannot unmarshal {x} into attribute delay_trace_step")
            })?,
        };
        if !(1..=MAX_STEP_MS).contains(&v.delay_trace_step) {
            return Err(format!(
                "latency: attribute delay_trace_step is {} ms, from 1 to {MAX_STEP_MS} ms",
                v.delay_trace_step
            ));
        }
        if let Some(text) = Self::text(attrs, "delay_trace")? {
            let step = Duration::from_millis(v.delay_trace_step as u64);
            let value = DelayTrace::parse(&text, step)
                .map_err(|e| format!("latency: attribute delay_trace: {e}"))?;
            v.delay_trace = Some(Parsed { text, value });
        }
        if v.delay_trace.is_some() && v.schedule.is_some() {
            return Err(
                "latency: attributes delay_trace and schedule exclude each other \
                 (a schedule's delay would end the delay trace)"
                    .into(),
            );
        }
        Ok(v)
    }
}

/// A toxicity from JSON: a float32, as Toxiproxy's field is (a number
/// beyond its range is refused, as Go's decoder does, rather than becoming
/// an infinity, which JSON cannot carry back).
fn toxicity(v: &Value) -> Result<f32, ApiError> {
    v.as_f64()
        .map(|f| f as f32)
        .filter(|f| f.is_finite())
        .ok_or_else(|| {
            ApiError::body(format!(
                "json: cannot unmarshal {v} into toxicity of type float32"
            ))
        })
}

/// The direction a toxic acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Client to server.
    Upstream,
    /// Server to client.
    Downstream,
}

impl Stream {
    /// The name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }

    /// Toxiproxy's parse: either name, in any case.
    fn parse(s: &str) -> Option<Stream> {
        match s.to_ascii_lowercase().as_str() {
            "upstream" => Some(Stream::Upstream),
            "downstream" => Some(Stream::Downstream),
            _ => None,
        }
    }
}

/// A toxic's type and attributes. Times are in the units of Toxiproxy's
/// attributes: milliseconds, except the slicer's `delay` (microseconds);
/// `rate` is in KB/s (1000 bytes).
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Delay every chunk by `latency` ± `jitter` ms (the delay a
    /// `schedule` or `delay_trace` in `wire` gives instead, once it does).
    Latency {
        latency: i64,
        jitter: i64,
        wire: Box<Varying>,
    },
    /// At most `rate` KB/s (0: no limit), or what `wire`'s trace or
    /// schedule carries.
    Bandwidth { rate: i64, wire: Box<Varying> },
    /// Hold the close back for `delay` ms.
    SlowClose { delay: i64 },
    /// Let no data through; close the connection after `timeout` ms (0: never).
    Timeout { timeout: i64 },
    /// Reset the connection after `timeout` ms.
    ResetPeer { timeout: i64 },
    /// Cut data into pieces of `average_size` ± `size_variation` bytes,
    /// `delay` µs apart.
    Slicer {
        average_size: i64,
        size_variation: i64,
        delay: i64,
    },
    /// Close the connection once `bytes` bytes have gone through.
    LimitData { bytes: i64 },
    /// Any qdisc, as `tc qdisc add ... root` takes it, optionally followed
    /// by more tc commands on the same device (classes, child qdiscs,
    /// filters; `;` or new lines between them, no `dev`): sluice's own type.
    Tc { qdisc: String },
}

impl Kind {
    /// The type's name in JSON.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kind::Latency { .. } => "latency",
            Kind::Bandwidth { .. } => "bandwidth",
            Kind::SlowClose { .. } => "slow_close",
            Kind::Timeout { .. } => "timeout",
            Kind::ResetPeer { .. } => "reset_peer",
            Kind::Slicer { .. } => "slicer",
            Kind::LimitData { .. } => "limit_data",
            Kind::Tc { .. } => "tc",
        }
    }

    /// The attributes, in the order Toxiproxy's structs declare them.
    pub fn attributes(&self) -> Vec<(&'static str, Value)> {
        match self {
            Kind::Latency {
                latency,
                jitter,
                wire,
            } => {
                let mut v = vec![("latency", (*latency).into()), ("jitter", (*jitter).into())];
                wire.attributes(&mut v);
                v
            }
            Kind::Bandwidth { rate, wire } => {
                let mut v = vec![("rate", (*rate).into())];
                wire.attributes(&mut v);
                v
            }
            Kind::SlowClose { delay } => vec![("delay", (*delay).into())],
            Kind::Timeout { timeout } | Kind::ResetPeer { timeout } => {
                vec![("timeout", (*timeout).into())]
            }
            Kind::Slicer {
                average_size,
                size_variation,
                delay,
            } => vec![
                ("average_size", (*average_size).into()),
                ("size_variation", (*size_variation).into()),
                ("delay", (*delay).into()),
            ],
            Kind::LimitData { bytes } => vec![("bytes", (*bytes).into())],
            Kind::Tc { qdisc } => vec![("qdisc", qdisc.clone().into())],
        }
    }

    /// Is `type_name` a type of toxic?
    pub fn known(type_name: &str) -> bool {
        matches!(
            type_name,
            "latency"
                | "bandwidth"
                | "slow_close"
                | "timeout"
                | "reset_peer"
                | "slicer"
                | "limit_data"
                | "tc"
        )
    }

    /// Each bounded attribute: its name, value, largest value and unit
    /// (the others take any i64: a negative time or size acts as zero, a
    /// negative rate as no limit, as in Toxiproxy).
    fn range(&self) -> Vec<(&'static str, i64, i64, &'static str)> {
        match self {
            Kind::Latency {
                latency, jitter, ..
            } => vec![
                ("latency", *latency, NETEM_MAX_MS, "ms"),
                ("jitter", *jitter, NETEM_MAX_MS, "ms"),
            ],
            Kind::Bandwidth { rate, .. } => vec![("rate", *rate, MAX_RATE, "KB/s")],
            Kind::SlowClose { delay } => vec![("delay", *delay, MAX_MS, "ms")],
            Kind::Timeout { timeout } | Kind::ResetPeer { timeout } => {
                vec![("timeout", *timeout, MAX_MS, "ms")]
            }
            Kind::Slicer { delay, .. } => vec![("delay", *delay, MAX_US, "us")],
            Kind::LimitData { .. } | Kind::Tc { .. } => vec![],
        }
    }

    /// Every attribute within what sluice can carry out (never wrapped),
    /// Toxiproxy 2.13's checks (a slicer that would never stop cutting),
    /// and that a `tc` toxic's qdisc is one `tc` accepts.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value, max, unit) in self.range() {
            if value > max {
                return Err(format!(
                    "{}: attribute {name} is {value} {unit}, at most {max} {unit}",
                    self.type_name()
                ));
            }
        }
        match self {
            Kind::Slicer {
                average_size,
                size_variation,
                ..
            } => {
                if *average_size <= 0 {
                    return Err("slicer: average_size must be greater than 0".into());
                }
                if *size_variation < 0 || size_variation > average_size {
                    return Err("slicer: size_variation must be between 0 and average_size".into());
                }
                Ok(())
            }
            _ => crate::pipe::validate(self),
        }
    }

    /// A latency toxic as Toxiproxy has it.
    pub fn latency(latency: i64, jitter: i64) -> Kind {
        Kind::Latency {
            latency,
            jitter,
            wire: Box::default(),
        }
    }

    /// A bandwidth toxic as Toxiproxy has it.
    pub fn bandwidth(rate: i64) -> Kind {
        Kind::Bandwidth {
            rate,
            wire: Box::default(),
        }
    }

    /// sluice's own time-varying attributes, if the type has them.
    pub fn varying(&self) -> Option<&Varying> {
        match self {
            Kind::Latency { wire, .. } | Kind::Bandwidth { wire, .. } => Some(wire),
            _ => None,
        }
    }

    /// A type from its name and attributes; missing attributes take their
    /// zero value (an empty spec for `tc`), unknown ones are ignored.
    pub fn parse(type_name: &str, attrs: &Map<String, Value>) -> Result<Kind, String> {
        let int = |name: &str| -> Result<i64, String> {
            match attrs.get(name) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => v
                    .as_i64()
                    .ok_or_else(|| format!("json: cannot unmarshal {v} into attribute {name}")),
            }
        };
        Ok(match type_name {
            "latency" => Kind::Latency {
                latency: int("latency")?,
                jitter: int("jitter")?,
                wire: Box::new(Varying::parse(type_name, attrs)?),
            },
            "bandwidth" => Kind::Bandwidth {
                rate: int("rate")?,
                wire: Box::new(Varying::parse(type_name, attrs)?),
            },
            "slow_close" => Kind::SlowClose {
                delay: int("delay")?,
            },
            "timeout" => Kind::Timeout {
                timeout: int("timeout")?,
            },
            "reset_peer" => Kind::ResetPeer {
                timeout: int("timeout")?,
            },
            "slicer" => Kind::Slicer {
                average_size: int("average_size")?,
                size_variation: int("size_variation")?,
                delay: int("delay")?,
            },
            "limit_data" => Kind::LimitData {
                bytes: int("bytes")?,
            },
            "tc" => Kind::Tc {
                qdisc: match attrs.get("qdisc") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => {
                        return Err(format!("json: cannot unmarshal {v} into attribute qdisc"))
                    }
                },
            },
            _ => return Err("invalid toxic type".into()),
        })
    }

    /// These attributes updated by those given (the others kept).
    pub fn merged(&self, attrs: &Map<String, Value>) -> Result<Kind, String> {
        let mut all: Map<String, Value> = self
            .attributes()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        for (k, v) in attrs {
            all.insert(k.clone(), v.clone());
        }
        Kind::parse(self.type_name(), &all)
    }
}

/// One toxic of a proxy.
#[derive(Clone, Debug, PartialEq)]
pub struct Toxic {
    pub name: String,
    pub kind: Kind,
    pub stream: Stream,
    /// The stream as the client spelled it (Toxiproxy echoes it back).
    pub stream_label: String,
    /// The probability that the toxic acts on a connection: 1 or more
    /// always, 0 or less never (not checked, as in Toxiproxy).
    pub toxicity: f32,
}

/// Why a request was refused: Toxiproxy's status and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 400 `bad request body: DETAIL`.
    pub fn body(detail: impl std::fmt::Display) -> ApiError {
        ApiError::new(400, format!("bad request body: {detail}"))
    }
}

impl Toxic {
    /// The toxic a create request's body asks for, checked in Toxiproxy's
    /// order (stream, type, attributes); `exists` says whether a name is taken.
    pub fn from_json(body: &Value, exists: impl Fn(&str) -> bool) -> Result<Toxic, ApiError> {
        let obj = body
            .as_object()
            .ok_or_else(|| ApiError::body("json: cannot unmarshal into a toxic"))?;
        let bad_stream = || {
            ApiError::new(
                400,
                "stream was invalid, can be either upstream or downstream",
            )
        };
        let (stream, stream_label) = match obj.get("stream") {
            None | Some(Value::Null) => (Stream::Downstream, "downstream".to_string()),
            Some(Value::String(s)) => (Stream::parse(s).ok_or_else(bad_stream)?, s.clone()),
            Some(_) => return Err(bad_stream()),
        };
        let type_name = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let name = match obj.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("{type_name}_{stream_label}"),
        };
        let empty = Map::new();
        let attrs = match obj.get("attributes") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(v) => {
                return Err(ApiError::body(format!(
                    "json: cannot unmarshal {v} into attributes"
                )))
            }
        };
        if !Kind::known(type_name) {
            return Err(ApiError::new(400, "invalid toxic type"));
        }
        if exists(&name) {
            return Err(ApiError::new(409, "toxic already exists"));
        }
        let kind = Kind::parse(type_name, attrs).map_err(ApiError::body)?;
        let toxicity = match obj.get("toxicity") {
            None | Some(Value::Null) => 1.0,
            Some(v) => toxicity(v)?,
        };
        kind.validate().map_err(ApiError::body)?;
        Ok(Toxic {
            name,
            kind,
            stream,
            stream_label,
            toxicity,
        })
    }

    /// This toxic updated by a request's body: attributes merged into the
    /// current ones, toxicity replaced if given; name, type and stream kept.
    pub fn updated(&self, body: &Value) -> Result<Toxic, ApiError> {
        let obj = body
            .as_object()
            .ok_or_else(|| ApiError::body("json: cannot unmarshal into a toxic"))?;
        let mut t = self.clone();
        if let Some(v) = obj.get("toxicity").filter(|v| !v.is_null()) {
            t.toxicity = toxicity(v)?;
        }
        match obj.get("attributes") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => t.kind = self.kind.merged(m).map_err(ApiError::body)?,
            Some(v) => {
                return Err(ApiError::body(format!(
                    "json: cannot unmarshal {v} into attributes"
                )))
            }
        }
        t.kind.validate().map_err(ApiError::body)?;
        Ok(t)
    }

    /// The JSON form, keys in Toxiproxy's order, the toxicity as Go prints
    /// a float32 (`1`, `0.5`).
    pub fn to_json(&self) -> String {
        let attrs: Vec<String> = self
            .kind
            .attributes()
            .into_iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!(
            "{{\"attributes\":{{{}}},\"name\":{},\"type\":\"{}\",\"stream\":{},\"toxicity\":{}}}",
            attrs.join(","),
            Value::String(self.name.clone()),
            self.kind.type_name(),
            Value::String(self.stream_label.clone()),
            self.toxicity
        )
    }
}
