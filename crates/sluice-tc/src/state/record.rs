//! The on-disk formats: a snapshot and a journal, both text.
//!
//! A command is one line: the time it ran (nanoseconds, decimal), then each
//! word after a tab, with `\`, tab and newline escaped as `\\`, `\t`, `\n`.
//! Parsing it is a scan for tabs — no JSON, no intermediate values.
//!
//! The snapshot (`NAME.snap`) is a header line, then its commands as one
//! checksummed block:
//!
//! ```text
//! sluice-state 1 gen=G autohandle=H ifindex=I commands=N bytes=B crc=C
//! <B bytes: N command lines>
//! ```
//!
//! The journal (`NAME.journal`) is a header line naming the snapshot
//! generation it extends, then transactions appended one `write` each:
//!
//! ```text
//! sluice-journal 1 gen=G
//! tx commands=N bytes=B crc=C
//! <B bytes: N command lines>
//! ```
//!
//! `crc` is the CRC-32 (IEEE) of the block, in hex. A transaction cut short
//! by a crash (its header line or block incomplete, or its checksum wrong
//! with nothing after it) is a torn tail: it was never committed, so it is
//! ignored, and the next writer cuts it off before appending. Anything else
//! that does not parse is corruption and an error.

use super::StateError;
use std::path::Path;

/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

/// One logged command: when it ran (ns on the namespace's clock) and its
/// words, the tool first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// When it ran.
    pub at: u64,
    /// Its words, tool name first.
    pub words: Vec<String>,
}

/// Append `c` as one command line.
pub(crate) fn encode_command(out: &mut String, c: &Command) {
    use std::fmt::Write;
    let _ = write!(out, "{}", c.at);
    for w in &c.words {
        out.push('\t');
        for ch in w.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    }
    out.push('\n');
}

/// Encode commands as a block.
pub(crate) fn encode_block(cmds: &[Command]) -> String {
    let mut s = String::with_capacity(cmds.len() * 64);
    for c in cmds {
        encode_command(&mut s, c);
    }
    s
}

/// Decode one command line (without its newline) into `words`, reusing
/// their buffers; returns its time, `None` if the line is malformed. One
/// pass over the bytes: the delimiters are ASCII, so every cut falls on a
/// character boundary.
pub(crate) fn decode_line_into(line: &str, words: &mut Vec<String>) -> Option<u64> {
    let b = line.as_bytes();
    let mut i = b.iter().position(|&c| c == b'\t').unwrap_or(b.len());
    let digits = &b[..i];
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let at = digits.iter().try_fold(0u64, |a, d| {
        a.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    let mut n = 0;
    while i < b.len() {
        i += 1; // the tab before this word
        if n == words.len() {
            words.push(String::new());
        }
        let w = &mut words[n];
        w.clear();
        n += 1;
        let mut start = i;
        loop {
            while i < b.len() && b[i] != b'\t' && b[i] != b'\\' {
                i += 1;
            }
            w.push_str(&line[start..i]);
            if i < b.len() && b[i] == b'\\' {
                w.push(match b.get(i + 1)? {
                    b'\\' => '\\',
                    b't' => '\t',
                    b'n' => '\n',
                    _ => return None,
                });
                i += 2;
                start = i;
            } else {
                break;
            }
        }
    }
    words.truncate(n);
    Some(at)
}

/// Decode a whole block of command lines.
pub(crate) fn decode_block(block: &str) -> Result<Vec<Command>, String> {
    let mut cmds = vec![];
    for (i, line) in block.split_terminator('\n').enumerate() {
        let mut words = vec![];
        let at = decode_line_into(line, &mut words)
            .ok_or_else(|| format!("command line {} is malformed", i + 1))?;
        cmds.push(Command { at, words });
    }
    Ok(cmds)
}

/// `key=value` fields of a header line, in order.
fn field<'a>(fields: &mut impl Iterator<Item = &'a str>, key: &str) -> Option<&'a str> {
    fields.next()?.strip_prefix(key)?.strip_prefix('=')
}

fn num(v: Option<&str>) -> Option<u64> {
    v?.parse().ok()
}

fn hex(v: Option<&str>) -> Option<u32> {
    u32::from_str_radix(v?, 16).ok()
}

fn corrupt(path: &Path, detail: impl Into<String>) -> StateError {
    StateError::Corrupt {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Check a header's magic word and version.
fn check_version(
    path: &Path,
    head: &mut std::str::SplitAsciiWhitespace,
    magic: &str,
) -> Result<(), StateError> {
    if head.next() != Some(magic) {
        return Err(corrupt(
            path,
            format!("not a sluice state file (no `{magic}` header)"),
        ));
    }
    let v = head.next().unwrap_or("");
    if v.parse::<u32>().ok() != Some(VERSION) {
        return Err(StateError::Version {
            path: path.to_path_buf(),
            found: v.chars().take(20).collect(),
        });
    }
    Ok(())
}

/// A snapshot: a generation, the namespace counters, the commands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Its generation (1 for the first; 0 stands for "none yet").
    pub gen: u64,
    /// `Net::autohandle` after replaying the commands.
    pub autohandle: u32,
    /// The next interface index after replaying the commands.
    pub ifindex: u32,
    /// How many commands `block` holds.
    pub count: usize,
    /// The commands, in order, encoded (checksummed when read, decoded as
    /// they replay).
    pub block: String,
}

impl Snapshot {
    /// Generation `gen` of `commands`, with the counters `net` holds after
    /// replaying them.
    pub(crate) fn of(gen: u64, net: &crate::net::Net, commands: &[Command]) -> Snapshot {
        Snapshot {
            gen,
            autohandle: net.autohandle,
            ifindex: net.next_ifindex(),
            count: commands.len(),
            block: encode_block(commands),
        }
    }
}

/// Encode a snapshot file.
pub(crate) fn encode_snapshot(s: &Snapshot) -> String {
    let block = &s.block;
    let mut out = format!(
        "sluice-state {VERSION} gen={} autohandle={} ifindex={} commands={} bytes={} crc={:08x}\n",
        s.gen,
        s.autohandle,
        s.ifindex,
        s.count,
        block.len(),
        crc32fast::hash(block.as_bytes())
    );
    out.push_str(block);
    out
}

/// Parse a snapshot file. A snapshot is renamed into place whole, so
/// anything short or wrong is corruption.
pub(crate) fn decode_snapshot(path: &Path, text: &str) -> Result<Snapshot, StateError> {
    let (head, rest) = text
        .split_once('\n')
        .ok_or_else(|| corrupt(path, "no header line"))?;
    let mut h = head.split_ascii_whitespace();
    check_version(path, &mut h, "sluice-state")?;
    let bad = || {
        corrupt(
            path,
            format!(
                "bad header `{}`",
                head.chars().take(200).collect::<String>()
            ),
        )
    };
    let gen = num(field(&mut h, "gen")).ok_or_else(bad)?;
    let autohandle = num(field(&mut h, "autohandle")).ok_or_else(bad)?;
    let ifindex = num(field(&mut h, "ifindex")).ok_or_else(bad)?;
    let n = num(field(&mut h, "commands")).ok_or_else(bad)?;
    let bytes = num(field(&mut h, "bytes")).ok_or_else(bad)?;
    let crc = hex(field(&mut h, "crc")).ok_or_else(bad)?;
    if bytes != rest.len() as u64 || crc32fast::hash(rest.as_bytes()) != crc {
        return Err(corrupt(
            path,
            "its checksum or length does not match its header",
        ));
    }
    Ok(Snapshot {
        gen,
        autohandle: u32::try_from(autohandle).map_err(|_| bad())?,
        ifindex: u32::try_from(ifindex).map_err(|_| bad())?,
        count: usize::try_from(n).map_err(|_| bad())?,
        block: rest.to_string(),
    })
}

/// A journal as read: its generation, its committed transactions' commands
/// (in order), and how many of its bytes are committed (the rest is a torn
/// tail).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Journal {
    /// The snapshot generation it extends.
    pub gen: u64,
    /// How many commands `block` holds.
    pub count: usize,
    /// The committed transactions' command lines, in order.
    pub block: String,
    /// Committed transactions.
    pub transactions: usize,
    /// Bytes up to the end of the last committed transaction.
    pub valid_len: u64,
    /// Bytes in the file.
    pub file_len: u64,
}

/// The header line of a journal extending generation `gen`.
pub(crate) fn journal_header(gen: u64) -> String {
    format!("sluice-journal {VERSION} gen={gen}\n")
}

/// One transaction record.
pub(crate) fn encode_tx(cmds: &[Command]) -> String {
    let block = encode_block(cmds);
    let mut out = format!(
        "tx commands={} bytes={} crc={:08x}\n",
        cmds.len(),
        block.len(),
        crc32fast::hash(block.as_bytes())
    );
    out.push_str(&block);
    out
}

/// Parse a journal, stopping at a torn tail.
pub(crate) fn decode_journal(path: &Path, bytes: &[u8]) -> Result<Journal, StateError> {
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| corrupt(path, "no header line"))?;
    let head =
        std::str::from_utf8(&bytes[..nl]).map_err(|_| corrupt(path, "header is not text"))?;
    let mut h = head.split_ascii_whitespace();
    check_version(path, &mut h, "sluice-journal")?;
    let gen = num(field(&mut h, "gen")).ok_or_else(|| corrupt(path, "bad header"))?;
    let mut j = Journal {
        gen,
        file_len: bytes.len() as u64,
        ..Default::default()
    };
    let mut at = nl + 1;
    j.valid_len = at as u64;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            break; // torn: the header line never finished
        };
        let line = std::str::from_utf8(&rest[..nl]).ok();
        let bad = || corrupt(path, format!("bad transaction header at byte {at}"));
        let mut f = line.ok_or_else(bad)?.split_ascii_whitespace();
        if f.next() != Some("tx") {
            return Err(bad());
        }
        let n = num(field(&mut f, "commands")).ok_or_else(bad)?;
        let len = num(field(&mut f, "bytes")).ok_or_else(bad)?;
        let crc = hex(field(&mut f, "crc")).ok_or_else(bad)?;
        let start = nl + 1;
        let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l)) else {
            return Err(bad());
        };
        if end > rest.len() {
            break; // torn: the block never finished
        }
        let block = &rest[start..end];
        if crc32fast::hash(block) != crc {
            if end == rest.len() {
                break; // torn: the last block's bytes never all landed
            }
            return Err(corrupt(
                path,
                format!("transaction at byte {at} fails its checksum"),
            ));
        }
        let text = std::str::from_utf8(block).map_err(|_| bad())?;
        if text.matches('\n').count() as u64 != n || !text.is_empty() && !text.ends_with('\n') {
            return Err(corrupt(
                path,
                format!("transaction at byte {at} holds other than {n} commands"),
            ));
        }
        j.block.push_str(text);
        j.count += n as usize;
        j.transactions += 1;
        at += end;
        j.valid_len = at as u64;
    }
    Ok(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(at: u64, w: &[&str]) -> Command {
        Command {
            at,
            words: w.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn words_with_tabs_newlines_and_backslashes_round_trip() {
        let c = vec![
            cmd(5, &["tc", "a\tb", "c\nd", "e\\f", "", "\\t"]),
            cmd(u64::MAX, &[]),
        ];
        let s = Snapshot {
            gen: 3,
            autohandle: 0x8001_0000,
            ifindex: 7,
            count: c.len(),
            block: encode_block(&c),
        };
        let text = encode_snapshot(&s);
        let back = decode_snapshot(Path::new("x"), &text).unwrap();
        assert_eq!(back, s);
        assert_eq!(decode_block(&back.block).unwrap(), c);
    }

    #[test]
    fn malformed_command_lines_are_refused_not_guessed() {
        let mut w = vec![];
        for bad in [
            "",
            "x\ttc",
            "-1\ttc",
            "18446744073709551616\ttc",
            "1\ta\\",
            "1\ta\\q",
        ] {
            assert_eq!(decode_line_into(bad, &mut w), None, "{bad:?}");
        }
        assert_eq!(
            decode_line_into("18446744073709551615", &mut w),
            Some(u64::MAX)
        );
        assert!(w.is_empty());
        assert_eq!(decode_line_into("7\t\ta\\tb", &mut w), Some(7));
        assert_eq!(w, ["", "a\tb"]);
    }

    #[test]
    fn a_torn_tail_is_ignored_and_a_corrupt_middle_refused() {
        let mut j = journal_header(2);
        j.push_str(&encode_tx(&[cmd(1, &["tc", "a"])]));
        let committed = j.len();
        let tx2 = encode_tx(&[cmd(2, &["tc", "b"]), cmd(3, &["tc", "c"])]);
        for cut in 0..tx2.len() {
            let mut torn = j.clone().into_bytes();
            torn.extend_from_slice(&tx2.as_bytes()[..cut]);
            let r = decode_journal(Path::new("j"), &torn).unwrap();
            assert_eq!(r.transactions, 1, "cut at {cut}");
            assert_eq!(r.valid_len, committed as u64);
        }
        // The same block with a flipped byte, followed by more: corruption.
        let mut bad = j.clone().into_bytes();
        let mut t = tx2.clone().into_bytes();
        let last = t.len() - 2;
        t[last] ^= 1;
        bad.extend_from_slice(&t);
        bad.extend_from_slice(tx2.as_bytes());
        assert!(matches!(
            decode_journal(Path::new("j"), &bad),
            Err(StateError::Corrupt { .. })
        ));
        // A tail of zeros (a file extended but never written) is torn too.
        let mut zeros = j.into_bytes();
        zeros.extend_from_slice(&[0; 4096]);
        assert_eq!(
            decode_journal(Path::new("j"), &zeros).unwrap().transactions,
            1
        );
    }

    #[test]
    fn an_unknown_version_is_refused_by_name() {
        let e = decode_snapshot(Path::new("s"), "sluice-state 2 gen=1\n").unwrap_err();
        assert!(
            matches!(e, StateError::Version { ref found, .. } if found == "2"),
            "{e}"
        );
        let e = decode_journal(Path::new("j"), b"sluice-journal 9 gen=1\n").unwrap_err();
        assert!(matches!(e, StateError::Version { .. }), "{e}");
    }
}
