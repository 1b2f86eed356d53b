//! iproute2's argument conventions: prefix matching and its stock errors.
//!
//! iproute2 accepts any non-empty prefix of a keyword where it uses
//! `matches()` (`tc q s` is `tc qdisc show`) and an exact word where it uses
//! `strcmp`; the front end follows it keyword by keyword. A failure is a
//! [`Fail`]: the text iproute2 writes to stderr and its exit status.

/// A failed command: what goes to stderr and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    /// Text for stderr, newline included.
    pub stderr: String,
    /// Exit status (iproute2's `return -1` is 255).
    pub code: i32,
}

/// Result of a command.
pub type CmdResult<T = ()> = Result<T, Fail>;

impl Fail {
    /// A failure with a message line and an exit status.
    pub fn new(code: i32, msg: impl Into<String>) -> Self {
        let mut s = msg.into();
        if !s.is_empty() && !s.ends_with('\n') {
            s.push('\n');
        }
        Fail { stderr: s, code }
    }
}

/// iproute2 `matches(arg, keyword)`: `arg` is a non-empty prefix of `keyword`.
pub fn matches(arg: &str, keyword: &str) -> bool {
    !arg.is_empty() && keyword.starts_with(arg)
}

/// `incomplete_command()`.
pub fn incomplete() -> Fail {
    Fail::new(255, "Command line is not complete. Try option \"help\"")
}

/// `invarg(msg, arg)`.
pub fn invarg(msg: &str, arg: &str) -> Fail {
    Fail::new(255, format!("Error: argument \"{arg}\" is wrong: {msg}"))
}

/// `duparg(key, arg)`.
pub fn duparg(key: &str, arg: &str) -> Fail {
    Fail::new(
        255,
        format!("Error: duplicate \"{key}\": \"{arg}\" is the second value."),
    )
}

/// A cursor over the words of a command.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    words: &'a [String],
    pos: usize,
    /// What a parser wrote to stderr on its way (tc's "RED: set bandwidth
    /// to 10Mbit"): shown whether the command then succeeds or fails.
    pub notes: String,
}

impl<'a> Args<'a> {
    /// A cursor at the first word.
    pub fn new(words: &'a [String]) -> Self {
        Args {
            words,
            pos: 0,
            notes: String::new(),
        }
    }
    /// The current word, if any.
    pub fn peek(&self) -> Option<&'a str> {
        self.words.get(self.pos).map(|s| s.as_str())
    }
    /// Take the current word. (A cursor that can also peek and step back,
    /// not an `Iterator`.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a str> {
        let w = self.peek();
        if w.is_some() {
            self.pos += 1;
        }
        w
    }
    /// `NEXT_ARG()`: the next word, or "Command line is not complete".
    pub fn value(&mut self) -> CmdResult<&'a str> {
        self.next().ok_or_else(incomplete)
    }
    /// No words left?
    pub fn is_empty(&self) -> bool {
        self.pos >= self.words.len()
    }
    /// The words not yet taken.
    pub fn rest(&self) -> &'a [String] {
        &self.words[self.pos.min(self.words.len())..]
    }
}

/// iproute2 `get_integer(val, arg, 0)`: a C `int` in any base C accepts.
pub fn get_integer(arg: &str) -> Option<i32> {
    let (v, rest) = sluice_core::units::strtoul(arg, 0)?;
    if !rest.is_empty() {
        return None;
    }
    let v = v as i64;
    i32::try_from(v).ok()
}

/// C's `strtol(s, &p, 10)` over the whole word: blanks and a sign may lead,
/// every other character a digit, else `None`. The value is exact; callers
/// saturate or refuse what does not fit, as their C does.
pub fn strtol10(s: &str) -> Option<i128> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i128 = digits.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// iproute2 `get_u32(val, arg, base)`: the whole word a number that fits
/// 32 bits (strtoul wraps a leading minus as C's does).
pub fn get_u32(arg: &str, base: u32) -> Option<u32> {
    match sluice_core::units::strtoul(arg, base) {
        Some((v, "")) if v <= u32::MAX as u64 => Some(v as u32),
        _ => None,
    }
}

/// `parse_percent_rate` (tc_util.c): a rate given as `R%` of the device's
/// link speed, returned as the text tc then hands to `get_rate`/`get_rate64`
/// (bits per second, `%lf`). tc reads the speed from
/// `/sys/class/net/DEV/speed`, which is unknown for a device without one
/// (`lo`) and for one that is down; `dev` carries sluice's
/// [`DevInfo::speed`](sluice_core::qdisc::DevInfo), 0 when unknown. `Err`
/// holds the lines tc prints before its caller's own "Illegal" message.
pub fn percent_rate(v: &str, dev: Option<&sluice_core::qdisc::DevInfo>) -> Result<String, String> {
    let Some(dev) = dev else {
        return Err("No device specified; specify device to rate limit by percentage\n".into());
    };
    if dev.speed == 0 {
        let f = format!("/sys/class/net/{}/speed", dev.name);
        return Err(format!(
            "property \"speed\" in file {f} is currently unknown\nFailed to parse {f}\n"
        ));
    }
    let malformed = || "Specified rate value could not be read or is malformed\n".to_string();
    // sscanf("%m[0-9.%]"), then parse_percent: a number, then nothing or "%".
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '%'))
        .unwrap_or(v.len());
    if end == 0 {
        return Err(malformed());
    }
    let (num, rest) = sluice_core::units::strtod(&v[..end]).unwrap_or((0.0, &v[..end]));
    if !rest.is_empty() && rest != "%" {
        return Err(malformed());
    }
    let perc = num / 100.0;
    if !(0.0..=1.0).contains(&perc) {
        return Err(format!(
            "Invalid rate specified; should be between [0,100]% but is {v}\n"
        ));
    }
    let text = format!("{:.6}", perc * dev.speed as f64 * 1e6);
    // tc formats it into a 20-byte buffer.
    if text.len() >= 20 {
        return Err("Unable to parse calculated rate\n".into());
    }
    Ok(text)
}

/// `get_rate64`, or `get_percent_rate64` for a word with a `%`; `Err` holds
/// what tc prints before the caller's own "Illegal" line.
pub fn rate_or_percent(v: &str, dev: Option<&sluice_core::qdisc::DevInfo>) -> Result<u64, String> {
    let text = if v.contains('%') {
        percent_rate(v, dev)?
    } else {
        v.to_string()
    };
    sluice_core::units::parse_rate(&text).map_err(|_| String::new())
}

/// `fail` with the lines `before` printed ahead of its message.
pub fn after(before: String, fail: Fail) -> Fail {
    Fail {
        stderr: before + &fail.stderr,
        ..fail
    }
}
