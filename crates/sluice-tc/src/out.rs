//! Output exactly as iproute2 prints it, in text or JSON, from one set of calls.
//!
//! iproute2's printers (`json_print.c`) take each value once with a text
//! format and a JSON key: `PRINT_ANY` goes to both, `PRINT_FP` only to text,
//! `PRINT_JSON` only to JSON. [`Out`] does the same: callers pass the text
//! already formatted and the JSON value beside it. JSON is written the way
//! iproute2's `json_writer.c` writes it, compact or pretty (`-p`): four spaces
//! per level, members on their own lines, array elements inline (`[ {`, `},{`,
//! `} ]`).

/// A JSON value under construction.
#[derive(Clone, Debug, PartialEq)]
pub enum J {
    /// An object with members in insertion order.
    Obj(Vec<(String, J)>),
    /// An array.
    Arr(Vec<J>),
    /// A string.
    Str(String),
    /// A number, already formatted.
    Num(String),
    /// A boolean.
    Bool(bool),
    /// null.
    Null,
    /// Text written verbatim into the JSON stream, with no separator: what a
    /// printer using plain `fprintf` (iproute2 6.1's q_hfsc.c) leaves there.
    Raw(String),
}

/// Where a printed item goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// Text and JSON (`PRINT_ANY`).
    Any,
    /// Text only (`PRINT_FP`).
    Text,
    /// JSON only (`PRINT_JSON`).
    Json,
}

/// The printer: accumulates text, or a JSON document.
#[derive(Debug)]
pub struct Out {
    /// JSON mode (`-j`).
    pub json: bool,
    /// Pretty JSON (`-p`).
    pub pretty: bool,
    /// Rates in powers of 1024 (`-iec`).
    pub iec: bool,
    /// Raw values too (`-raw`): handles and ticks in hex.
    pub raw: bool,
    /// `-oneline`: line breaks between an object's lines become `\`.
    pub oneline: bool,
    text: String,
    stack: Vec<(Option<String>, J)>,
    /// Warnings for stderr on success (the kernel's extended-ack warnings).
    pub warnings: String,
}

impl Out {
    /// A printer; in JSON mode the document is an array of objects.
    pub fn new(json: bool, pretty: bool) -> Self {
        Out {
            json,
            pretty,
            iec: false,
            raw: false,
            oneline: false,
            text: String::new(),
            stack: vec![(None, J::Arr(vec![]))],
            warnings: String::new(),
        }
    }

    fn push(&mut self, key: Option<&str>, v: J) {
        let (_, top) = self.stack.last_mut().expect("printer stack");
        match top {
            J::Obj(m) => m.push((key.unwrap_or("").to_string(), v)),
            J::Arr(a) => a.push(v),
            _ => {}
        }
    }

    /// A rate as `print_rate` writes it (SI, or IEC under `-iec`).
    pub fn rate(&self, bytes_per_sec: u64) -> String {
        if self.iec {
            sluice_core::units::fmt_rate_iec(bytes_per_sec)
        } else {
            sluice_core::units::fmt_rate(bytes_per_sec)
        }
    }

    /// A kernel warning: `Warning: MSG` on stderr.
    pub fn warn(&mut self, msg: &str) {
        self.warnings.push_str(&format!("Warning: {msg}\n"));
    }

    /// Text only.
    pub fn text(&mut self, s: &str) {
        if !self.json {
            self.text.push_str(s);
        }
    }

    /// A newline in text mode (`print_nl`: `_SL_`, a backslash under `-oneline`).
    pub fn nl(&mut self) {
        self.text(if self.oneline { "\\" } else { "\n" });
    }

    /// A string value: `text` in text mode, `key: value` in JSON.
    pub fn str(&mut self, to: To, key: &str, text: &str, value: &str) {
        self.item(to, key, text, J::Str(value.to_string()));
    }

    /// An unsigned number.
    pub fn uint(&mut self, to: To, key: &str, text: &str, value: u64) {
        self.item(to, key, text, J::Num(value.to_string()));
    }

    /// A signed number.
    pub fn int(&mut self, to: To, key: &str, text: &str, value: i64) {
        self.item(to, key, text, J::Num(value.to_string()));
    }

    /// A boolean.
    pub fn bool(&mut self, to: To, key: &str, text: &str, value: bool) {
        self.item(to, key, text, J::Bool(value));
    }

    /// A value already shaped as JSON.
    pub fn item(&mut self, to: To, key: &str, text: &str, value: J) {
        if self.json {
            if to != To::Text {
                self.push(Some(key), value);
            }
        } else if to != To::Json {
            self.text.push_str(text);
        }
    }

    /// Plain `fprintf(stdout, ...)`: the text in text mode, and the same text
    /// verbatim inside the JSON document in JSON mode (where it breaks the
    /// JSON, as iproute2's does).
    pub fn raw(&mut self, s: &str) {
        if self.json {
            self.push(Some(""), J::Raw(s.to_string()));
        } else {
            self.text.push_str(s);
        }
    }

    /// `open_json_object(key)` (anonymous inside arrays).
    pub fn open(&mut self, key: &str) {
        if self.json {
            self.stack.push((Some(key.to_string()), J::Obj(vec![])));
        }
    }

    /// `open_json_array(key)`.
    pub fn open_arr(&mut self, key: &str) {
        if self.json {
            self.stack.push((Some(key.to_string()), J::Arr(vec![])));
        }
    }

    /// Close the innermost object or array.
    pub fn close(&mut self) {
        if self.json && self.stack.len() > 1 {
            let (key, v) = self.stack.pop().expect("printer stack");
            self.push(key.as_deref(), v);
        }
    }

    /// The finished output: text, or the JSON document with its newline.
    pub fn finish(mut self) -> String {
        if !self.json {
            return self.text;
        }
        while self.stack.len() > 1 {
            self.close();
        }
        let (_, root) = self.stack.pop().expect("printer stack");
        let mut w = JsonWriter {
            out: String::new(),
            pretty: self.pretty,
            depth: 0,
            first: true,
        };
        w.value(&root);
        w.out.push('\n');
        w.out
    }
}

struct JsonWriter {
    out: String,
    pretty: bool,
    depth: usize,
    first: bool,
}

impl JsonWriter {
    fn eor(&mut self) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
    }
    fn eol(&mut self) {
        if self.pretty {
            self.out.push('\n');
            for _ in 0..self.depth {
                self.out.push_str("    ");
            }
        }
    }
    fn value(&mut self, v: &J) {
        match v {
            J::Obj(members) => {
                self.eor();
                self.out.push('{');
                self.depth += 1;
                self.first = true;
                for (k, m) in members {
                    if k.is_empty() {
                        // iproute2 prints a value with a NULL key inside an
                        // object as a bare value.
                        self.value(m);
                        continue;
                    }
                    self.eor();
                    self.eol();
                    self.first = true;
                    self.string(k);
                    self.out.push(':');
                    if self.pretty {
                        self.out.push(' ');
                    }
                    self.value(m);
                }
                self.depth -= 1;
                if !self.first {
                    self.eol();
                }
                self.first = false;
                self.out.push('}');
            }
            J::Arr(items) if items.is_empty() && self.pretty => {
                self.eor();
                self.out.push_str("[ ]");
            }
            J::Arr(items) => {
                self.eor();
                self.out.push('[');
                if self.pretty {
                    self.out.push(' ');
                }
                self.depth += 1;
                self.first = true;
                for i in items {
                    self.value(i);
                }
                self.depth -= 1;
                if self.pretty {
                    self.out.push(' ');
                }
                self.first = false;
                self.out.push(']');
            }
            J::Str(s) => {
                self.eor();
                self.string(s);
            }
            J::Num(n) => {
                self.eor();
                self.out.push_str(n);
            }
            J::Bool(b) => {
                self.eor();
                self.out.push_str(if *b { "true" } else { "false" });
            }
            J::Null => {
                self.eor();
                self.out.push_str("null");
            }
            J::Raw(s) => self.out.push_str(s),
        }
    }
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '\t' => self.out.push_str("\\t"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\x0c' => self.out.push_str("\\f"),
                '\x08' => self.out.push_str("\\b"),
                '\\' => self.out.push_str("\\\\"),
                '"' => self.out.push_str("\\\""),
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(pretty: bool) -> String {
        let mut o = Out::new(true, pretty);
        o.open("");
        o.str(To::Any, "kind", "qdisc pfifo", "pfifo");
        o.bool(To::Any, "root", " root", true);
        o.open("options");
        o.uint(To::Any, "limit", " limit 1000p", 1000);
        o.close();
        o.open("empty");
        o.close();
        o.open_arr("used_hw_stats");
        o.str(To::Any, "", "", "disabled");
        o.close();
        o.close();
        o.finish()
    }

    #[test]
    fn compact_json_as_iproute2() {
        assert_eq!(
            sample(false),
            "[{\"kind\":\"pfifo\",\"root\":true,\"options\":{\"limit\":1000},\"empty\":{},\"used_hw_stats\":[\"disabled\"]}]\n"
        );
    }

    #[test]
    fn pretty_json_as_iproute2() {
        let want = "[ {\n        \"kind\": \"pfifo\",\n        \"root\": true,\n        \"options\": {\n            \"limit\": 1000\n        },\n        \"empty\": {},\n        \"used_hw_stats\": [ \"disabled\" ]\n    } ]\n";
        assert_eq!(sample(true), want);
    }

    #[test]
    fn text_mode_prints_only_text() {
        let mut o = Out::new(false, false);
        o.str(To::Any, "kind", "qdisc pfifo", "pfifo");
        o.uint(To::Json, "x", "never", 1);
        o.text(" tail");
        assert_eq!(o.finish(), "qdisc pfifo tail");
    }
}
