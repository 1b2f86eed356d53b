//! Ematch expressions (iproute2 tc/m_ematch.c, emp_ematch.l/.y and the
//! modules em_cmp.c, em_u32.c, em_nbyte.c, em_meta.c, em_canid.c).
//!
//! `match EXPR` reads the rest of the command line as one stream of tokens —
//! the words joined by spaces — with the grammar
//!
//! ```text
//! EXPR  := TERM [ { and | or } EXPR ]
//! TERM  := [ not ] { MODULE '(' ARGS ')' | '(' EXPR ')' }
//! ```
//!
//! (`and`/`or`/`not` in any case). The expression ends at the first token
//! after a complete top-level term that is not `and`/`or`; iproute2's parser
//! has read that token's word by then and steps back one word, so the
//! filter's own options continue from there. That step back is taken even at
//! the end of the line, which makes `basic match 'cmp(...)'` with nothing
//! after it read the match word again as an option ("What is ...?"), as
//! iproute2 6.1 does.
//!
//! The tree is flattened as iproute2 does (top-level sequence, then each
//! container's sequence, depth first) and every module parses its words.
//! Errors print iproute2's messages: the words read so far with the last
//! one marked `>>word<<`, the module call with the faulty argument marked,
//! and the module's usage. Modules sluice does not have (`ipset`, `ipt`,
//! `text`) are "Unknown ematch". `meta` knows the integer ids sluice can
//! evaluate (see sluice-core's ematch module); device and socket ids are
//! unknown meta ids here.

use crate::args::{Args, CmdResult, Fail};
use crate::out::Out;
use sluice_core::cls::ematch::*;

/// One token of the expression and the word that ends it.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    And,
    Or,
    Not,
    Open,
    Close,
    Attr(Bstr),
}

/// An argument word (iproute2's `struct bstr`).
#[derive(Clone, Debug, PartialEq)]
struct Bstr {
    data: Vec<u8>,
    quoted: bool,
}

impl Bstr {
    fn is(&self, s: &str) -> bool {
        self.data == s.as_bytes()
    }
    fn text(&self) -> String {
        self.data
            .iter()
            .map(|&c| {
                if (0x20..0x7f).contains(&c) {
                    c as char
                } else {
                    '.'
                }
            })
            .collect()
    }
    /// `bstrtoul`: C strtoul with base 0; `None` without digits or when it saturates.
    fn to_ul(&self) -> Option<u64> {
        let s = String::from_utf8_lossy(&self.data).into_owned();
        match sluice_core::units::strtoul(s.trim_start(), 0) {
            Some((v, _)) if v != u64::MAX => Some(v),
            _ => None,
        }
    }
}

/// The lexer (emp_ematch.l): tokens with the index of the word each ends in.
fn lex(words: &[String]) -> Vec<(Tok, usize)> {
    // The stream: every word followed by a space; remember each byte's word.
    let mut s = Vec::new();
    let mut wi = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for &b in w.as_bytes() {
            s.push(b);
            wi.push(i);
        }
        if !w.is_empty() {
            s.push(b' ');
            wi.push(i);
        }
    }
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if ws(c) {
            i += 1;
            continue;
        }
        if c == b'(' || c == b')' {
            out.push((if c == b'(' { Tok::Open } else { Tok::Close }, wi[i]));
            i += 1;
            continue;
        }
        let end = (i..s.len())
            .find(|&j| ws(s[j]) || s[j] == b'(' || s[j] == b')')
            .unwrap_or(s.len());
        if c == b'"' && end == i + 1 {
            // A quoted string: only when the quote alone is the longest match.
            let (b, next) = lex_string(&s, i + 1);
            let last = wi[next.saturating_sub(1).min(s.len() - 1)];
            out.push((
                Tok::Attr(Bstr {
                    data: b,
                    quoted: true,
                }),
                last,
            ));
            i = next;
            continue;
        }
        let word = &s[i..end];
        let t = match word.to_ascii_lowercase().as_slice() {
            b"and" => Tok::And,
            b"or" => Tok::Or,
            b"not" => Tok::Not,
            _ => Tok::Attr(Bstr {
                data: word.to_vec(),
                quoted: false,
            }),
        };
        out.push((t, wi[end - 1]));
        i = end;
    }
    out
}

/// The body of a quoted string from `i`; answers the bytes and where the lexer goes on.
fn lex_string(s: &[u8], mut i: usize) -> (Vec<u8>, usize) {
    let mut b = Vec::new();
    while i < s.len() {
        match s[i] {
            b'"' => return (b, i + 1),
            b'\\' if i + 1 < s.len() => {
                let e = s[i + 1];
                i += 2;
                match e {
                    b'n' => b.push(b'\n'),
                    b'r' => b.push(b'\r'),
                    b't' => b.push(b'\t'),
                    b'v' => b.push(0x0b),
                    b'b' => b.push(0x08),
                    b'f' => b.push(0x0c),
                    b'a' => b.push(0x07),
                    b'x' => {
                        let n = s[i..]
                            .iter()
                            .take(2)
                            .take_while(|c| c.is_ascii_hexdigit())
                            .count();
                        let v = std::str::from_utf8(&s[i..i + n])
                            .ok()
                            .and_then(|t| u8::from_str_radix(t, 16).ok());
                        match v {
                            Some(v) => b.push(v),
                            None => b.push(b'x'),
                        }
                        i += n;
                    }
                    b'0'..=b'7' => {
                        let n = 1 + s[i..]
                            .iter()
                            .take(2)
                            .take_while(|c| (b'0'..=b'7').contains(c))
                            .count();
                        let t = std::str::from_utf8(&s[i - 1..i - 1 + n]).unwrap_or("0");
                        b.push(u32::from_str_radix(t, 8).unwrap_or(0) as u8);
                        i += n - 1;
                    }
                    other => b.push(other),
                }
            }
            c => {
                b.push(c);
                i += 1;
            }
        }
    }
    (b, i)
}

/// A parsed term.
#[derive(Clone, Debug)]
struct Node {
    inverted: bool,
    /// `TCF_EM_REL_*` to the next term of the sequence.
    relation: u16,
    what: NodeKind,
}

#[derive(Clone, Debug)]
enum NodeKind {
    /// Module name and arguments.
    Module(Bstr, Vec<Bstr>),
    Group(Vec<Node>),
}

/// The recursive-descent equivalent of the bison grammar.
struct Parser<'t> {
    toks: &'t [(Tok, usize)],
    pos: usize,
    /// Words the lexer has read (the last fetched token's word + 1; all at the end).
    read: usize,
    nwords: usize,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<&Tok> {
        match self.toks.get(self.pos) {
            Some((t, w)) => {
                self.read = self.read.max(w + 1);
                Some(t)
            }
            None => {
                self.read = self.nwords;
                None
            }
        }
    }
    fn take(&mut self) -> Option<Tok> {
        let t = self.peek().cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// EXPR; `Err(())` is bison's syntax error.
    fn expr(&mut self) -> Result<Vec<Node>, ()> {
        let mut seq = Vec::new();
        loop {
            let mut n = self.term()?;
            match self.peek() {
                Some(Tok::And) => n.relation = TCF_EM_REL_AND,
                Some(Tok::Or) => n.relation = TCF_EM_REL_OR,
                _ => {
                    seq.push(n);
                    return Ok(seq);
                }
            }
            self.take();
            seq.push(n);
        }
    }

    fn term(&mut self) -> Result<Node, ()> {
        let inverted = if self.peek() == Some(&Tok::Not) {
            self.take();
            true
        } else {
            false
        };
        let what = match self.take() {
            Some(Tok::Attr(name)) => {
                if self.take() != Some(Tok::Open) {
                    return Err(());
                }
                let mut args = Vec::new();
                loop {
                    match self.take() {
                        Some(Tok::Attr(a)) => args.push(a),
                        Some(Tok::Close) if !args.is_empty() => break,
                        _ => return Err(()),
                    }
                }
                NodeKind::Module(name, args)
            }
            Some(Tok::Open) => {
                let inner = self.expr()?;
                if self.take() != Some(Tok::Close) {
                    return Err(());
                }
                NodeKind::Group(inner)
            }
            _ => return Err(()),
        };
        Ok(Node {
            inverted,
            relation: TCF_EM_REL_END,
            what,
        })
    }
}

/// A flattened element before its module has parsed its arguments.
enum Flat {
    Container(u32),
    Module(Bstr, Vec<Bstr>),
}

/// `flatten_tree`: the sequence, then each group's sequence, depth first.
fn flatten(seq: &[Node], out: &mut Vec<(u16, Flat)>) {
    let base = out.len();
    for n in seq {
        let flags = n.relation | if n.inverted { TCF_EM_INVERT } else { 0 };
        let f = match &n.what {
            NodeKind::Module(name, args) => Flat::Module(name.clone(), args.clone()),
            NodeKind::Group(_) => Flat::Container(0),
        };
        out.push((flags, f));
    }
    for (i, n) in seq.iter().enumerate() {
        if let NodeKind::Group(inner) = &n.what {
            let start = out.len() as u32;
            out[base + i].1 = Flat::Container(start);
            flatten(inner, out);
        }
    }
}

/// What `em_parse_error` needs to point at the words read.
struct ErrCx<'w> {
    words: &'w [String],
    read: usize,
}

impl ErrCx<'_> {
    /// `em_parse_error` without a module call to show (its `args` is NULL).
    fn fail_usage(&self, msg: &str, usage: &str) -> Fail {
        let mut f = self.fail(msg, None);
        let cut = f.stderr.len() - EXPR_USAGE.len();
        f.stderr.truncate(cut);
        f.stderr += usage;
        f
    }

    /// `em_parse_error`: the message, the words read with the last marked,
    /// the module call with `carg` marked, and the usage.
    fn fail(&self, msg: &str, module: Option<(&str, &[Bstr], Option<usize>, &str)>) -> Fail {
        let mut s = format!("{msg}\n... ");
        for (i, w) in self.words[..self.read].iter().enumerate() {
            if i + 1 == self.read {
                s += &format!(">>{w}<< ");
            } else {
                s += &format!("{w} ");
            }
        }
        s += "...\n";
        match module {
            Some((kind, args, carg, usage)) => {
                s += &format!("... {kind}(");
                for (i, a) in args.iter().enumerate() {
                    let mark = carg == Some(i);
                    s += &format!(
                        "{}{}{}{}",
                        if mark { ">>" } else { "" },
                        a.text(),
                        if mark { "<<" } else { "" },
                        if i + 1 < args.len() { " " } else { "" }
                    );
                }
                s += ")...\n";
                s += usage;
            }
            None => s += EXPR_USAGE,
        }
        Fail::new(1, s)
    }
}

const EXPR_USAGE: &str = "Usage: EXPR
where: EXPR  := TERM [ { and | or } EXPR ]
       TERM  := [ not ] { MATCH | '(' EXPR ')' }
       MATCH := module '(' ARGS ')'
       ARGS := ARG1 ARG2 ...

Example: a(x y) and not (b(x) or c(x y z))
";

/// `parse_ematch`: the expression at the cursor. The cursor ends where the
/// filter's parser goes on; a failure carries iproute2's messages (the
/// caller adds its `Illegal "ematch"` line).
pub(crate) fn parse(a: &mut Args) -> CmdResult<EmatchTree> {
    let words = a.rest();
    let toks = lex(words);
    let mut p = Parser {
        toks: &toks,
        pos: 0,
        read: 0,
        nwords: words.len(),
    };
    let seq = match p.expr() {
        Ok(seq) => seq,
        Err(()) => {
            let cx = ErrCx {
                words,
                read: p.read,
            };
            return Err(cx.fail("Parse error: syntax error", None));
        }
    };
    // The lookahead after the expression has been read: step back one word.
    p.peek();
    let read = p.read.saturating_sub(1);
    let cx = ErrCx { words, read };
    let mut flat = Vec::new();
    flatten(&seq, &mut flat);
    let mut tree = EmatchTree::default();
    for (flags, f) in flat {
        let kind = match f {
            Flat::Container(start) => EmatchKind::Container { start },
            Flat::Module(name, args) => module(&name, &args, &cx)?,
        };
        tree.matches.push(Ematch { flags, kind });
    }
    for _ in 0..read {
        a.next();
    }
    Ok(tree)
}

fn module(name: &Bstr, args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    let n = String::from_utf8_lossy(&name.data).into_owned();
    match n.as_str() {
        "cmp" => cmp(args, cx),
        "u32" => u32_match(args, cx),
        "nbyte" => nbyte(args, cx),
        "meta" => meta(args, cx),
        "canid" => canid(args, cx),
        _ => Err(Fail::new(1, format!("Unknown ematch \"{}\"", n))),
    }
}

const CMP_USAGE: &str = "Usage: cmp(ALIGN at OFFSET [ ATTRS ] { eq | lt | gt } VALUE)
where: ALIGN  := { u8 | u16 | u32 }
       ATTRS  := [ layer LAYER ] [ mask MASK ] [ trans ]
       LAYER  := { link | network | transport | 0..2 }

Example: cmp(u16 at 3 layer 2 mask 0xff00 gt 20)
";

/// `parse_layer`: by the first letter.
fn layer_name(b: &Bstr) -> Option<u64> {
    match b.data.first() {
        Some(b'l') => Some(0),
        Some(b'n') => Some(1),
        Some(b't') => Some(2),
        _ => None,
    }
}

fn cmp(args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    let err = |i: Option<usize>, m: &str| cx.fail(m, Some(("cmp", args, i, CMP_USAGE)));
    let Some(first) = args.first() else {
        return Err(err(None, "cmp: missing arguments"));
    };
    let align = match () {
        _ if first.is("u8") => TCF_EM_ALIGN_U8,
        _ if first.is("u16") => TCF_EM_ALIGN_U16,
        _ if first.is("u32") => TCF_EM_ALIGN_U32,
        _ => return Err(err(Some(0), "cmp: invalid alignment")),
    };
    let mut c = EmCmp {
        val: 0,
        mask: 0,
        off: 0,
        align,
        flags: 0,
        layer: TCF_LAYER_NETWORK,
        opnd: TCF_EM_OPND_EQ,
    };
    let (mut have_off, mut have_val) = (false, false);
    let mut i = 1;
    while i < args.len() {
        let w = &args[i];
        let value = |i: usize| -> CmdResult<usize> {
            if i + 1 >= args.len() {
                Err(err(Some(i), "cmp: missing argument"))
            } else {
                Ok(i + 1)
            }
        };
        if w.is("at") {
            i = value(i)?;
            let v = args[i]
                .to_ul()
                .ok_or_else(|| err(Some(i), "cmp: invalid offset, must be numeric"))?;
            c.off = v as u16;
            have_off = true;
        } else if w.is("layer") {
            i = value(i)?;
            let l = match layer_name(&args[i]) {
                Some(l) => l,
                None => args[i]
                    .to_ul()
                    .ok_or_else(|| err(Some(i), "cmp: invalid layer"))?,
            };
            if l > TCF_LAYER_TRANSPORT as u64 {
                return Err(err(Some(i), "cmp: illegal layer, must be in 0..2"));
            }
            c.layer = l as u8;
        } else if w.is("mask") {
            i = value(i)?;
            c.mask = args[i]
                .to_ul()
                .ok_or_else(|| err(Some(i), "cmp: invalid mask"))? as u32;
        } else if w.is("trans") {
            c.flags |= TCF_EM_CMP_TRANS;
        } else if w.is("eq") || w.is("gt") || w.is("lt") {
            c.opnd = match w.data.as_slice() {
                b"eq" => TCF_EM_OPND_EQ,
                b"gt" => TCF_EM_OPND_GT,
                _ => TCF_EM_OPND_LT,
            };
            i = value(i)?;
            c.val = args[i]
                .to_ul()
                .ok_or_else(|| err(Some(i), "cmp: invalid value"))? as u32;
            have_val = true;
        } else {
            // em_cmp.c says "nbyte" here.
            return Err(err(Some(i), "nbyte: unknown parameter"));
        }
        i += 1;
    }
    if !have_off || !have_val {
        return Err(err(None, "cmp: offset and value required"));
    }
    Ok(EmatchKind::Cmp(c))
}

const U32_USAGE: &str = "Usage: u32(ALIGN VALUE MASK at [ nexthdr+ ] OFFSET)
where: ALIGN  := { u8 | u16 | u32 }

Example: u32(u16 0x1122 0xffff at nexthdr+4)
";

fn u32_match(args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    let err = |i: Option<usize>, m: &str| cx.fail(m, Some(("u32", args, i, U32_USAGE)));
    let Some(first) = args.first() else {
        return Err(err(None, "u32: missing arguments"));
    };
    let align = match () {
        _ if first.is("u8") => 1,
        _ if first.is("u16") => 2,
        _ if first.is("u32") => 4,
        _ => return Err(err(Some(0), "u32: invalid alignment")),
    };
    let Some(k) = args.get(1) else {
        return Err(err(None, "u32: missing key"));
    };
    let mut key = k
        .to_ul()
        .ok_or_else(|| err(Some(1), "u32: invalid key, must be numeric"))?;
    let Some(m) = args.get(2) else {
        return Err(err(None, "u32: missing mask"));
    };
    let mut mask = m
        .to_ul()
        .ok_or_else(|| err(Some(2), "u32: invalid mask, must be numeric"))?;
    match args.get(3) {
        Some(a) if a.is("at") => {}
        Some(_) => return Err(err(Some(3), "u32: missing \"at\"")),
        None => return Err(err(None, "u32: missing \"at\"")),
    }
    let Some(o) = args.get(4) else {
        return Err(err(None, "u32: missing offset"));
    };
    let mut at = 4;
    let mut offmask = 0;
    let prefix = b"nexthdr+";
    let offset = if o.data.len() > prefix.len() && o.data.starts_with(prefix) {
        offmask = -1;
        let rest = String::from_utf8_lossy(&o.data[prefix.len()..]).into_owned();
        // Plain strtoul here: no digits gives 0.
        sluice_core::units::strtoul(rest.trim_start(), 0)
            .map_or(Some(0), |(v, _)| (v != u64::MAX).then_some(v))
    } else if o.is("nexthdr+") {
        at = 5;
        let Some(o2) = args.get(5) else {
            return Err(err(None, "u32: missing offset"));
        };
        o2.to_ul()
    } else {
        o.to_ul()
    };
    let mut offset = offset.ok_or_else(|| err(Some(at), "u32: invalid offset"))?;
    if at + 1 < args.len() {
        return Err(err(Some(at + 1), "u32: unexpected trailer"));
    }
    match align {
        1 => {
            if key > 0xff {
                return Err(err(Some(at), "Illegal key (>0xFF)"));
            }
            if mask > 0xff {
                return Err(err(Some(at), "Illegal mask (>0xFF)"));
            }
            let shift = 24 - (offset & 3) * 8;
            key <<= shift;
            mask <<= shift;
            offset &= !3;
        }
        2 => {
            if key > 0xffff {
                return Err(err(Some(at), "Illegal key (>0xFFFF)"));
            }
            if mask > 0xffff {
                return Err(err(Some(at), "Illegal mask (>0xFFFF)"));
            }
            if offset & 3 == 0 {
                key <<= 16;
                mask <<= 16;
            }
            offset &= !3;
        }
        _ => {}
    }
    if offset % 4 != 0 {
        return Err(err(
            Some(at),
            "u32: invalid offset alignment, must be aligned to 4.",
        ));
    }
    let (key, mask) = (key as u32, mask as u32);
    Ok(EmatchKind::U32(EmU32 {
        mask,
        val: key & mask,
        off: offset as i32,
        offmask,
    }))
}

const NBYTE_USAGE: &str = "Usage: nbyte(NEEDLE at OFFSET [layer LAYER])
where: NEEDLE := { string | \"c-escape-sequence\" }
       OFFSET := int
       LAYER  := { link | network | transport | 0..2 }

Example: nbyte(\"ababa\" at 12 layer 1)
";

fn nbyte(args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    let err = |i: Option<usize>, m: &str| cx.fail(m, Some(("nbyte", args, i, NBYTE_USAGE)));
    let Some(needle) = args.first() else {
        return Err(err(None, "nbyte: missing arguments"));
    };
    if needle.data.is_empty() {
        return Err(err(Some(0), "nbyte: needle length is 0"));
    }
    let mut b = EmNbyte {
        off: 0,
        layer: TCF_LAYER_NETWORK,
        needle: needle.data.clone(),
    };
    let mut have_off = false;
    let mut i = 1;
    while i < args.len() {
        let w = &args[i];
        if w.is("at") {
            if i + 1 >= args.len() {
                return Err(err(Some(i), "nbyte: missing argument"));
            }
            i += 1;
            b.off = args[i]
                .to_ul()
                .ok_or_else(|| err(Some(i), "nbyte: invalid offset, must be numeric"))?
                as u16;
            have_off = true;
        } else if w.is("layer") {
            if i + 1 >= args.len() {
                return Err(err(Some(i), "nbyte: missing argument"));
            }
            i += 1;
            let l = match layer_name(&args[i]) {
                Some(l) => l,
                None => args[i]
                    .to_ul()
                    .ok_or_else(|| err(Some(i), "nbyte: invalid layer"))?,
            };
            if l > TCF_LAYER_TRANSPORT as u64 {
                return Err(err(Some(i), "nbyte: illegal layer, must be in 0..2"));
            }
            b.layer = l as u8;
        } else {
            return Err(err(Some(i), "nbyte: unknown parameter"));
        }
        i += 1;
    }
    if !have_off {
        return Err(err(None, "nbyte: offset required"));
    }
    Ok(EmatchKind::Nbyte(b))
}

const META_USAGE: &str = "Usage: meta(OBJECT { eq | lt | gt } OBJECT)
where: OBJECT  := { META_ID | VALUE }
       META_ID := id [ shift SHIFT ] [ mask MASK ]

Example: meta(nf_mark gt 24)
         meta(indev shift 1 eq \"ppp\")
         meta(tcindex mask 0xf0 eq 0xf0)

For a list of meta identifiers, use meta(list).
";

/// The integer meta ids sluice evaluates, by iproute2's names.
const META_IDS: [(&str, u16); 15] = [
    ("random", meta_id::RANDOM),
    ("loadavg_1", meta_id::LOADAVG_0),
    ("loadavg_5", meta_id::LOADAVG_1),
    ("loadavg_15", meta_id::LOADAVG_2),
    ("priority", meta_id::PRIORITY),
    ("protocol", meta_id::PROTOCOL),
    ("pkt_type", meta_id::PKTTYPE),
    ("pkt_len", meta_id::PKTLEN),
    ("data_len", meta_id::DATALEN),
    ("mac_len", meta_id::MACLEN),
    ("nf_mark", meta_id::NFMARK),
    ("fwmark", meta_id::NFMARK),
    ("tc_index", meta_id::TCINDEX),
    ("rt_classid", meta_id::RTCLASSID),
    ("vlan", meta_id::VLAN_TAG),
];

/// One side of a meta comparison; answers the index after it.
fn meta_object(
    args: &[Bstr],
    at: usize,
    err: &dyn Fn(Option<usize>, &str) -> Fail,
) -> CmdResult<(MetaVal, usize)> {
    let a = &args[at];
    let mut v = MetaVal {
        kind: 0,
        shift: 0,
        op: 0,
        int: None,
        var: None,
    };
    if a.quoted {
        v.kind = TCF_META_TYPE_VAR << 12;
        v.var = Some(a.data.clone());
        return Ok((v, at + 1));
    }
    if let Some(n) = a.to_ul() {
        v.kind = TCF_META_TYPE_INT << 12;
        v.int = (n != 0).then_some(n as u32);
        return Ok((v, at + 1));
    }
    let Some(&(_, id)) = META_IDS.iter().find(|(name, _)| a.is(name)) else {
        return Err(err(Some(at), "meta: unknown meta id\n"));
    };
    v.kind = TCF_META_TYPE_INT << 12 | id;
    let mut i = at + 1;
    while i < args.len() {
        if args[i].is("shift") || args[i].is("mask") {
            if i + 1 >= args.len() {
                return Err(err(Some(i), "meta: missing argument"));
            }
            let x = args[i + 1].to_ul();
            if args[i].is("shift") {
                let x =
                    x.ok_or_else(|| err(Some(i + 1), "meta: invalid shift, must be numeric"))?;
                v.shift = x as u8;
            } else {
                let x = x.ok_or_else(|| err(Some(i + 1), "meta: invalid mask, must be numeric"))?;
                v.int = (x != 0).then_some(x as u32);
            }
            i += 2;
        } else {
            break;
        }
    }
    Ok((v, i))
}

fn meta(args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    let err = |i: Option<usize>, m: &str| cx.fail(m, Some(("meta", args, i, META_USAGE)));
    if args.is_empty() {
        return Err(err(None, "meta: missing arguments"));
    }
    let (mut left, i) = meta_object(args, 0, &err)?;
    let Some(op) = args.get(i) else {
        return Err(err(Some(0), "meta: missing operand"));
    };
    left.op = match op.data.as_slice() {
        b"eq" => TCF_EM_OPND_EQ,
        b"gt" => TCF_EM_OPND_GT,
        b"lt" => TCF_EM_OPND_LT,
        _ => return Err(err(Some(i), "meta: invalid operand")),
    };
    if i + 1 >= args.len() {
        return Err(err(Some(0), "meta: missing rvalue"));
    }
    let (right, j) = meta_object(args, i + 1, &err)?;
    if (left.kind >> 12) != (right.kind >> 12) {
        return Err(err(Some(i + 1), "lvalue and rvalue are not compatible."));
    }
    if j < args.len() {
        return Err(err(Some(j), "meta: unexpected trailer"));
    }
    Ok(EmatchKind::Meta(EmMeta { left, right }))
}

const CANID_USAGE: &str = "Usage: canid(IDLIST)
where: IDLIST := IDSPEC [ IDLIST ]
       IDSPEC := { \u{2019}sff\u{2019} CANID | \u{2019}eff\u{2019} CANID }
       CANID := ID[:MASK]
       ID, MASK := hexadecimal number (i.e. 0x123)
Example: canid(sff 0x123 sff 0x124 sff 0x125:0xf)
";

/// `sscanf("%x")`: optional 0x, hex digits; answers the value and the rest.
fn scan_hex(s: &str) -> Option<(u32, &str)> {
    let t = s.trim_start();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit()))
        .unwrap_or(t);
    let n = t.chars().take_while(|c| c.is_ascii_hexdigit()).count();
    if n == 0 {
        return None;
    }
    let v = t[..n].chars().fold(0u32, |v, c| {
        v.wrapping_mul(16).wrapping_add(c.to_digit(16).unwrap_or(0))
    });
    Some((v, &t[n..]))
}

fn canid(args: &[Bstr], cx: &ErrCx) -> CmdResult<EmatchKind> {
    // em_canid walks its own `args` pointer, so its error shows the call
    // from the current word on (and no call once past the end).
    let err = |i: Option<usize>, m: &str| match i {
        Some(i) => cx.fail(m, Some(("canid", &args[i..], Some(0), CANID_USAGE))),
        None => cx.fail_usage(m, CANID_USAGE),
    };
    if args.is_empty() {
        return Err(err(None, "canid: missing arguments"));
    }
    let mut rules = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let eff = if args[i].is("sff") {
            false
        } else if args[i].is("eff") {
            true
        } else {
            return Err(err(Some(i), "canid: invalid key"));
        };
        i += 1;
        let Some(spec) = args.get(i) else {
            return Err(err(None, "canid: missing argument"));
        };
        let s = String::from_utf8_lossy(&spec.data).into_owned();
        let (id, mask) = match scan_hex(&s) {
            Some((id, rest)) => {
                let m = rest.strip_prefix(':').and_then(scan_hex).map(|(m, _)| m);
                (
                    id,
                    m.unwrap_or(if eff { CAN_EFF_MASK } else { CAN_SFF_MASK }),
                )
            }
            None => return Err(err(Some(i), "canid: Improperly formed CAN ID & mask\n")),
        };
        if rules.len() == 500 {
            return Err(err(Some(i), "canid: Too many arguments on input\n"));
        }
        rules.push((id | if eff { CAN_EFF_FLAG } else { 0 }, mask | CAN_EFF_FLAG));
        i += 1;
    }
    Ok(EmatchKind::Canid(EmCanid { rules }))
}

/// `print_ematch`: the tree after "\n  ", one match a line.
pub(crate) fn print(t: &EmatchTree, out: &mut Out) {
    if t.matches.is_empty() {
        return;
    }
    out.text("\n  ");
    print_seq(t, 0, 1, out);
}

fn print_seq(t: &EmatchTree, start: usize, prefix: usize, out: &mut Out) {
    let mut i = start;
    while let Some(m) = t.matches.get(i) {
        if m.flags & TCF_EM_INVERT != 0 {
            out.text("NOT ");
        }
        match &m.kind {
            EmatchKind::Container { start } => {
                out.text("(\n");
                out.text(&"  ".repeat(prefix + 1));
                print_seq(t, *start as usize, prefix + 1, out);
                out.text(&"  ".repeat(prefix));
                out.text(") ");
            }
            k => {
                out.text(&format!("{}({})\n", module_name(k), module_text(k)));
                if m.flags & TCF_EM_REL_MASK != 0 {
                    out.text(&"  ".repeat(prefix));
                }
            }
        }
        match m.flags & TCF_EM_REL_MASK {
            TCF_EM_REL_AND => out.text("AND "),
            TCF_EM_REL_OR => out.text("OR "),
            _ => return,
        }
        i += 1;
    }
}

fn module_name(k: &EmatchKind) -> &'static str {
    match k {
        EmatchKind::Cmp(_) => "cmp",
        EmatchKind::U32(_) => "u32",
        EmatchKind::Nbyte(_) => "nbyte",
        EmatchKind::Meta(_) => "meta",
        EmatchKind::Canid(_) => "canid",
        EmatchKind::Container { .. } => "",
    }
}

/// A module's `print_eopt`.
fn module_text(k: &EmatchKind) -> String {
    match k {
        EmatchKind::Cmp(c) => {
            let mut s = match c.align {
                TCF_EM_ALIGN_U8 => "u8 ".to_string(),
                TCF_EM_ALIGN_U16 => "u16 ".to_string(),
                TCF_EM_ALIGN_U32 => "u32 ".to_string(),
                _ => String::new(),
            };
            s += &format!("at {} layer {} ", c.off, c.layer);
            if c.mask != 0 {
                s += &format!("mask 0x{:x} ", c.mask);
            }
            if c.flags & TCF_EM_CMP_TRANS != 0 {
                s += "trans ";
            }
            s += match c.opnd {
                TCF_EM_OPND_EQ => "eq ",
                TCF_EM_OPND_LT => "lt ",
                TCF_EM_OPND_GT => "gt ",
                _ => "",
            };
            s + &(c.val as i32).to_string()
        }
        EmatchKind::U32(u) => format!(
            "{:08x}/{:08x} at {}{}",
            u.val,
            u.mask,
            if u.offmask != 0 { "nexthdr+" } else { "" },
            u.off
        ),
        EmatchKind::Nbyte(b) => {
            let text: String = b
                .needle
                .iter()
                .map(|&c| {
                    if (0x20..0x7f).contains(&c) {
                        c as char
                    } else {
                        '.'
                    }
                })
                .collect();
            let hex: String = b.needle.iter().map(|c| format!("{c:02x} ")).collect();
            format!("{hex}\"{}\" at {} layer {}", text, b.off, b.layer)
        }
        EmatchKind::Meta(m) => {
            let mut s = meta_side(&m.left);
            s += match m.left.op {
                TCF_EM_OPND_EQ => " eq ",
                TCF_EM_OPND_LT => " lt ",
                TCF_EM_OPND_GT => " gt ",
                _ => "",
            };
            s + &meta_side(&m.right)
        }
        EmatchKind::Canid(c) => c
            .rules
            .iter()
            .map(|&(id, mask)| {
                let (name, full) = if id & CAN_EFF_FLAG != 0 {
                    ("eff", CAN_EFF_MASK)
                } else {
                    ("sff", CAN_SFF_MASK)
                };
                if mask == CAN_EFF_FLAG | full {
                    format!("{name} 0x{:X}", id & full)
                } else {
                    format!("{name} 0x{:X}:0x{:X}", id & full, mask & full)
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        EmatchKind::Container { .. } => String::new(),
    }
}

/// `print_object` of meta.
fn meta_side(v: &MetaVal) -> String {
    let id = v.kind & 0x7ff;
    if id == meta_id::VALUE {
        return match &v.var {
            Some(b) => b
                .iter()
                .map(|&c| {
                    if (0x20..0x7f).contains(&c) {
                        c as char
                    } else {
                        '.'
                    }
                })
                .collect(),
            None => (v.int.unwrap_or(0) as i32).to_string(),
        };
    }
    let mut s = match META_IDS.iter().find(|(_, i)| *i == id) {
        Some((name, _)) => name.to_string(),
        None => format!("[unknown meta id {id}]"),
    };
    if v.shift != 0 {
        s += &format!(" shift {}", v.shift);
    }
    if let Some(m) = v.int {
        s += &format!(" mask 0x{m:08x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    fn text(t: &EmatchTree) -> String {
        let mut out = Out::new(false, false);
        print(t, &mut out);
        out.finish()
    }

    #[test]
    fn the_expression_ends_one_word_back() {
        let w = words(&["cmp(u8 at 0 layer link mask 0xff gt 10)", "classid", "1:1"]);
        let mut a = Args::new(&w);
        let t = parse(&mut a).unwrap();
        assert_eq!(a.peek(), Some("classid"));
        assert_eq!(text(&t), "\n  cmp(u8 at 0 layer 0 mask 0xff gt 10)\n");
        // At the end of the line the parser steps back onto the match word.
        let w = words(&["cmp(u8 at 0 layer link mask 0xff gt 10)"]);
        let mut a = Args::new(&w);
        parse(&mut a).unwrap();
        assert_eq!(a.peek(), Some("cmp(u8 at 0 layer link mask 0xff gt 10)"));
    }

    #[test]
    fn relations_flatten_and_print_as_iproute2() {
        // tdc bc59: a and b or not c.
        let w = words(&[
            "cmp(u8 at 0 layer link mask 0xff eq 3) and cmp(u16 at 8 layer link mask 0x00ff gt 7) or not cmp(u32 at 4 layer network mask 0xa0a0 lt 3)",
            "action",
        ]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(
            text(&t),
            "\n  cmp(u8 at 0 layer 0 mask 0xff eq 3)\n  AND cmp(u16 at 8 layer 0 mask 0xff gt 7)\n  OR NOT cmp(u32 at 4 layer 1 mask 0xa0a0 lt 3)\n"
        );
        // Groups become containers after the top-level sequence.
        let w = words(&[
            "not",
            "(",
            "u32(u8 1 0xff at 9)",
            "or",
            "u32(u8 6 0xff at 9)",
            ")",
            "and",
            "meta(priority eq 3)",
            "x",
        ]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(t.matches.len(), 4);
        assert_eq!(t.matches[0].kind, EmatchKind::Container { start: 2 });
        assert_eq!(t.matches[0].flags, TCF_EM_INVERT | TCF_EM_REL_AND);
        assert_eq!(
            text(&t),
            "\n  NOT (\n    u32(00010000/00ff0000 at 8)\n    OR u32(00060000/00ff0000 at 8)\n  ) AND meta(priority eq 3)\n"
        );
    }

    #[test]
    fn errors_point_at_the_words_as_iproute2_does() {
        // Captured from iproute2 6.1's tc.
        let w = words(&["u32(u8 0x1122 0x0f at 0)", "classid", "1:1"]);
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert_eq!(
            e.stderr,
            "Illegal key (>0xFF)\n... >>u32(u8 0x1122 0x0f at 0)<< ...\n... u32(u8 0x1122 0x0f at >>0<<)...\n".to_string()
                + U32_USAGE
        );
        let w = words(&["cmp(u8 at 0 layer link mask 0xff gt 10", "classid", "1:1"]);
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert_eq!(
            e.stderr,
            "Parse error: syntax error\n... cmp(u8 at 0 layer link mask 0xff gt 10 classid >>1:1<< ...\n".to_string()
                + EXPR_USAGE
        );
        let w = words(&["u32(u8 0x77 0xff at)", "classid", "1:1"]);
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert!(e.stderr.starts_with(
            "u32: missing offset\n... >>u32(u8 0x77 0xff at)<< ...\n... u32(u8 0x77 0xff at)...\n"
        ));
        let w = words(&["meta(nosuch eq 1)", "classid", "1:1"]);
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert!(e.stderr.starts_with(
            "meta: unknown meta id\n\n... >>meta(nosuch eq 1)<< ...\n... meta(>>nosuch<< eq 1)...\nUsage: meta("
        ));
        let w = words(&["foo(1)", "classid", "1:1"]);
        assert_eq!(
            parse(&mut Args::new(&w)).unwrap_err().stderr,
            "Unknown ematch \"foo\"\n"
        );
        for bad in [
            &[
                "cmp(u8 at 0 layer link mask 0xff gt 10)",
                "and",
                "classid",
                "1:1",
            ][..],
            &["classid", "1:1"],
        ] {
            let e = parse(&mut Args::new(&words(bad))).unwrap_err();
            assert!(
                e.stderr.starts_with("Parse error: syntax error\n"),
                "{}",
                e.stderr
            );
            assert_eq!(e.code, 1);
        }
    }

    #[test]
    fn u32_offsets_and_canid_rules() {
        let w = words(&["u32(u8 0xaa 0xf0 at -14)", "x"]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(text(&t), "\n  u32(0000a000/0000f000 at -16)\n");
        let w = words(&["u32(u16 0xaabb 0xf0f0 at nexthdr+0)", "x"]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(text(&t), "\n  u32(a0b00000/f0f00000 at nexthdr+0)\n");
        // em_canid shows the call from the faulty word on, or none past the end.
        let e = parse(&mut Args::new(&words(&["canid(sff 1 sff zz)", "x"]))).unwrap_err();
        assert!(e.stderr.starts_with(
            "canid: Improperly formed CAN ID & mask\n\n... >>canid(sff 1 sff zz)<< ...\n... canid(>>zz<<)...\nUsage: canid(IDLIST)\n"
        ), "{}", e.stderr);
        let e = parse(&mut Args::new(&words(&["canid(sff)", "x"]))).unwrap_err();
        assert_eq!(
            e.stderr,
            "canid: missing argument\n... >>canid(sff)<< ...\n".to_string() + CANID_USAGE
        );
        let w = words(&["nbyte(abc at 2 layer 2)", "x"]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(text(&t), "\n  nbyte(61 62 63 \"abc\" at 2 layer 2)\n");
        let w = words(&["canid(sff 0xaabb:0x00ff eff 1)", "x"]);
        let t = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(text(&t), "\n  canid(sff 0x2BB:0xFF eff 0x1)\n");
    }
}
