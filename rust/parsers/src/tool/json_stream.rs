//! Incremental compact JSON for streamed tool-call arguments.
//!
//! A client wants argument fragments as the model writes them, and their concatenation must
//! be exactly the final arguments: nothing emitted may ever be taken back. `JsonStream` reads
//! the arguments object a piece at a time and writes its compact form as soon as each byte of
//! it is certain: whitespace outside strings goes, string contents pass through re-escaped the
//! way `serde_json` writes them, numbers and literals are written once they end (so `1.50`
//! comes out as serde writes it), and a `,` or an object key waits for what follows it so a
//! dangling one is never emitted. For well-formed input the output is byte-identical to
//! `serde_json::to_string` of the parsed object (key order kept), except that a repeated key
//! is kept twice instead of the last one winning.
//!
//! Malformed input stops the stream where the valid text stopped (`Fed::Failed`); nothing is
//! written to mend it, because the call is then abandoned (see `super::Abandoned`). `close`
//! still completes what was emitted into valid JSON (it closes an open string, gives a key
//! without a value `null`, and closes every open container) for callers that want it.

/// Where the reader is in the JSON grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the opening `{` of the arguments object.
    Start,
    /// A value must come (after `:`, or after `,` inside an array).
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` inside an object: a key.
    Key,
    /// Inside an object key string (held in `pending`).
    KeyText,
    /// After a key: `:`.
    Colon,
    /// Inside a value string (written through).
    Text,
    /// Inside a number or literal (held in `token`).
    Scalar,
    /// After a value: `,` or a closing bracket.
    After,
    /// The arguments object closed.
    Done,
    /// Malformed input; `close` was called.
    Failed,
}

/// Streams one JSON object as compact JSON; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct JsonStream {
    state: State,
    /// Open containers, `b'{'` or `b'['`.
    stack: Vec<u8>,
    /// Output held until the next byte decides it: a `,` and/or an object key.
    pending: String,
    /// The number or literal being read.
    token: String,
    /// An escape sequence being read inside a string, from its backslash.
    escape: String,
    /// A decoded high surrogate waiting for its low half.
    high: Option<u16>,
    /// Whether the state before a string was a key (so the escape goes to `pending`).
    in_key: bool,
    /// `"key":` was written and its value has not started.
    awaiting_value: bool,
}

/// Result of one `feed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fed {
    /// Everything given was consumed; more is needed.
    More,
    /// The object closed; this many bytes of the input were consumed.
    Done(usize),
    /// The byte at this offset is not valid JSON here; the stream was closed.
    Failed(usize),
}

impl JsonStream {
    pub(crate) fn new() -> Self {
        Self {
            state: State::Start,
            stack: Vec::new(),
            pending: String::new(),
            token: String::new(),
            escape: String::new(),
            high: None,
            in_key: false,
            awaiting_value: false,
        }
    }

    /// Start over for another object, keeping the buffers.
    pub(crate) fn reset(&mut self) {
        self.state = State::Start;
        self.stack.clear();
        self.pending.clear();
        self.token.clear();
        self.escape.clear();
        self.high = None;
        self.in_key = false;
        self.awaiting_value = false;
    }

    /// Whether the object has closed (normally or by `close`).
    #[cfg(test)]
    pub(crate) fn finished(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
    }

    /// Inside a string (a key or a value).
    pub(crate) fn in_string(&self) -> bool {
        matches!(self.state, State::Text | State::KeyText)
    }

    /// Inside a value string with no escape under way: plain characters would be written
    /// through unchanged.
    pub(crate) fn in_plain_value(&self) -> bool {
        self.state == State::Text && !self.in_key && self.escape.is_empty() && self.high.is_none()
    }

    /// Read `text`, appending certain output to `out`.
    pub(crate) fn feed(&mut self, text: &str, out: &mut String) -> Fed {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Done => return Fed::Done(i),
                State::Failed => return Fed::Failed(i),
                State::Text | State::KeyText => {
                    i = self.string_run(text, i, out);
                    continue;
                }
                _ => {}
            }
            let c = bytes[i];
            if self.state == State::Scalar {
                if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.') {
                    self.token.push(c as char);
                    i += 1;
                    continue;
                }
                if !self.end_scalar(out) {
                    self.fail(out);
                    return Fed::Failed(i);
                }
            }
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
                continue;
            }
            if c == b'"' && matches!(self.state, State::ObjectFirst | State::Key) {
                if let Some(next) = self.whole_key(text, i, out) {
                    i = next;
                    continue;
                }
            }
            if !self.structural(c, out) {
                self.fail(out);
                return Fed::Failed(i);
            }
            i += 1;
        }
        match self.state {
            State::Done => Fed::Done(i),
            _ => Fed::More,
        }
    }

    /// An object key whose text, closing quote and `:` are all in `text` from the opening quote
    /// at `i`, written at once with what was held before it (the `,`): what the byte steps would
    /// write on reaching the `:`, and the same state after it. A complete parse meets most keys
    /// this way. Returns the offset after the `:`; `None` (nothing done) when the key is not
    /// all there or holds an escape.
    fn whole_key(&mut self, text: &str, i: usize, out: &mut String) -> Option<usize> {
        let bytes = text.as_bytes();
        let start = i + 1;
        // Keys are short: a look at the next 15 bytes (a table lookup each) usually settles it.
        let rest = bytes.get(start..)?;
        let end = start + special(&rest[..rest.len().min(15)]).or_else(|| special(rest))?;
        if bytes[end] != b'"' {
            return None;
        }
        let colon = end
            + 1
            + bytes[end + 1..]
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .count();
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        out.push_str(&self.pending);
        self.pending.clear();
        out.push('"');
        out.push_str(&text[start..end]);
        out.push_str("\":");
        self.in_key = true;
        self.awaiting_value = true;
        self.state = State::Value;
        Some(colon + 1)
    }

    /// One byte outside strings and scalars; false when it is not valid here.
    fn structural(&mut self, c: u8, out: &mut String) -> bool {
        use State as S;
        match (self.state, c) {
            (S::Start, b'{') => {
                out.push('{');
                self.stack.push(b'{');
                self.state = S::ObjectFirst;
            }
            (S::ObjectFirst, b'}') | (S::ArrayFirst, b']') => self.pop(out),
            (S::Value | S::ArrayFirst, _) => return self.value_start(c, out),
            (S::ObjectFirst | S::Key, b'"') => {
                self.pending.push('"');
                self.in_key = true;
                self.state = S::KeyText;
            }
            (S::Colon, b':') => {
                self.pending.push(':');
                out.push_str(&self.pending);
                self.pending.clear();
                self.awaiting_value = true;
                self.state = S::Value;
            }
            (S::After, b'}' | b']') if self.stack.last() == Some(&if c == b'}' { b'{' } else { b'[' }) => self.pop(out),
            (S::After, b',') => {
                self.pending.push(',');
                self.state = if self.stack.last() == Some(&b'{') {
                    S::Key
                } else {
                    S::Value
                };
            }
            _ => return false,
        }
        true
    }

    /// Start of a value; false when `c` cannot start one.
    fn value_start(&mut self, c: u8, out: &mut String) -> bool {
        match c {
            b'{' | b'[' => {
                self.flush(out);
                out.push(c as char);
                self.stack.push(c);
                self.state = if c == b'{' {
                    State::ObjectFirst
                } else {
                    State::ArrayFirst
                };
            }
            b'"' => {
                self.flush(out);
                out.push('"');
                self.in_key = false;
                self.state = State::Text;
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                self.token.clear();
                self.token.push(c as char);
                self.state = State::Scalar;
            }
            _ => return false,
        }
        true
    }

    /// Write held output before a value starts.
    fn flush(&mut self, out: &mut String) {
        out.push_str(&self.pending);
        self.pending.clear();
        self.awaiting_value = false;
    }

    fn pop(&mut self, out: &mut String) {
        if let Some(open) = self.stack.pop() {
            out.push(if open == b'{' { '}' } else { ']' });
        }
        self.state = if self.stack.is_empty() {
            State::Done
        } else {
            State::After
        };
    }

    /// A number or literal ended: write it as serde would. False when it is not valid JSON.
    fn end_scalar(&mut self, out: &mut String) -> bool {
        let t = self.token.as_str();
        let number = match t {
            "true" | "false" | "null" => None,
            // A plain integer of up to 18 digits is an `i64` that serde writes back unchanged.
            _ if plain_integer(t) => None,
            _ if t.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) => {
                match serde_json::from_str::<serde_json::Number>(t) {
                    Ok(n) => Some(n),
                    Err(_) => return false,
                }
            }
            _ => return false,
        };
        self.flush(out);
        match number {
            Some(n) => {
                use std::fmt::Write as _;
                // Writing into a `String` cannot fail.
                let _ = write!(out, "{n}");
            }
            None => out.push_str(&self.token),
        }
        self.token.clear();
        self.state = State::After;
        true
    }

    /// Inside a string from byte `i`: copy the run of plain characters, handle one escape or
    /// the closing quote. Returns the next offset.
    fn string_run(&mut self, text: &str, mut i: usize, out: &mut String) -> usize {
        let bytes = text.as_bytes();
        if !self.escape.is_empty() {
            // An escape sequence, one ASCII byte at a time (it may be split across feeds).
            if !bytes[i].is_ascii() {
                self.fail(out);
                return i;
            }
            self.escape.push(bytes[i] as char);
            self.escape_step(out);
            return if self.state == State::Failed { i } else { i + 1 };
        }
        let start = i;
        // The run ends at a quote, a backslash or a control byte.
        i = special(&bytes[i..]).map_or(bytes.len(), |o| i + o);
        if i > start {
            if self.high.is_some() {
                self.fail(out);
                return start;
            }
            self.sink(out).push_str(&text[start..i]);
        }
        if i == bytes.len() {
            return i;
        }
        match bytes[i] {
            b'"' if self.high.is_none() => {
                self.sink(out).push('"');
                self.state = if self.in_key { State::Colon } else { State::After };
                if !self.in_key {
                    self.awaiting_value = false;
                }
            }
            b'\\' => self.escape.push('\\'),
            _ => {
                self.fail(out);
                return i;
            }
        }
        i + 1
    }

    /// Where string output goes: keys are held, values written through.
    fn sink<'a>(&'a mut self, out: &'a mut String) -> &'a mut String {
        if self.in_key {
            &mut self.pending
        } else {
            self.awaiting_value = false;
            out
        }
    }

    /// Decode the escape in `self.escape` once it is complete.
    fn escape_step(&mut self, out: &mut String) {
        let esc = self.escape.as_bytes();
        let simple = match esc.get(1) {
            Some(b'"') => Some('"'),
            Some(b'\\') => Some('\\'),
            Some(b'/') => Some('/'),
            Some(b'b') => Some('\u{8}'),
            Some(b'f') => Some('\u{c}'),
            Some(b'n') => Some('\n'),
            Some(b'r') => Some('\r'),
            Some(b't') => Some('\t'),
            Some(b'u') => None,
            _ => return self.fail(out),
        };
        let ch = match simple {
            Some(c) if self.high.is_none() => c,
            Some(_) => return self.fail(out),
            None => {
                if esc.len() < 6 {
                    return;
                }
                let Some(unit) = std::str::from_utf8(&esc[2..6])
                    .ok()
                    .and_then(|h| u16::from_str_radix(h, 16).ok())
                else {
                    return self.fail(out);
                };
                match (self.high.take(), unit) {
                    (None, 0xD800..=0xDBFF) => {
                        self.high = Some(unit);
                        self.escape.clear();
                        return;
                    }
                    (Some(h), 0xDC00..=0xDFFF) => {
                        let code = 0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                        match char::from_u32(code) {
                            Some(c) => c,
                            None => return self.fail(out),
                        }
                    }
                    (None, u) => match char::from_u32(u32::from(u)) {
                        Some(c) => c,
                        None => return self.fail(out),
                    },
                    (Some(_), _) => return self.fail(out),
                }
            }
        };
        self.escape.clear();
        write_escaped(ch, self.sink(out));
    }

    /// Malformed input: stop, writing nothing more (the call is abandoned; what was written is
    /// as far as the input was certain).
    fn fail(&mut self, _out: &mut String) {
        self.pending.clear();
        self.state = State::Failed;
    }

    /// Finish the output as valid JSON, whatever state the input left it in.
    #[cfg(test)]
    pub(crate) fn close(&mut self, out: &mut String) {
        if self.finished() {
            return;
        }
        if self.state == State::Start {
            out.push_str("{}");
            self.state = State::Failed;
            return;
        }
        if self.state == State::Scalar && self.end_scalar(out) {
            // A complete number or literal at the very end is kept.
        }
        if self.state == State::Text {
            out.push('"');
        }
        if self.awaiting_value {
            out.push_str("null");
        }
        self.pending.clear();
        while let Some(open) = self.stack.pop() {
            out.push(if open == b'{' { '}' } else { ']' });
        }
        self.state = State::Failed;
    }
}

/// Whether `t` is `-?(0|[1-9][0-9]{0,17})`: an integer serde reads and writes back as is (`-0`
/// is excluded: serde reads it as a float and writes `-0.0`).
fn plain_integer(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t).as_bytes();
    match digits {
        [b'0'] => t.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.len() < 18 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Bytes a JSON string cannot hold as is: quote, backslash and the control bytes.
static SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Offset of the first byte a JSON string cannot hold as is: a quote, a backslash or a control
/// byte. String runs are mostly long plain text, so 16 bytes are tested at a time (a loop the
/// compiler turns into vector compares), and only a block that has one is searched byte by byte;
/// a streamed piece (a few bytes) is looked up byte by byte in a table.
pub(crate) fn special(bytes: &[u8]) -> Option<usize> {
    let is = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    if bytes.len() < 16 {
        return bytes.iter().position(|&b| SPECIAL[usize::from(b)]);
    }
    let mut blocks = bytes.chunks_exact(16);
    let mut base = 0;
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | is(b)) {
            return block.iter().position(|&b| is(b)).map(|o| base + o);
        }
        base += 16;
    }
    blocks
        .remainder()
        .iter()
        .position(|&b| SPECIAL[usize::from(b)])
        .map(|o| base + o)
}

/// Write `text` inside a JSON string the way `serde_json` does. Most text needs no escape, so
/// runs between bytes that do are copied whole instead of pushed a character at a time.
pub(crate) fn write_escaped_str(text: &str, out: &mut String) {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(off) = special(&bytes[start..]) {
        let i = start + off;
        out.push_str(&text[start..i]);
        // An ASCII byte is a whole character.
        write_escaped(char::from(bytes[i]), out);
        start = i + 1;
    }
    out.push_str(&text[start..]);
}

/// Write `c` inside a JSON string the way `serde_json` does.
pub(crate) fn write_escaped(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::json_strategy;
    use proptest::prelude::*;

    fn run(text: &str) -> (String, Fed) {
        let mut s = JsonStream::new();
        let mut out = String::new();
        let fed = s.feed(text, &mut out);
        if !s.finished() {
            s.close(&mut out);
        }
        (out, fed)
    }

    fn special_naive(bytes: &[u8]) -> Option<usize> {
        bytes.iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\')
    }

    #[test]
    fn special_finds_every_byte_at_every_offset() {
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(special(&bytes), special_naive(&bytes), "byte {b:#x} at {at} of {len}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn special_equals_a_byte_loop(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(special(&bytes), special_naive(&bytes));
        }
    }

    fn serde_compact(text: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn matches_serde_on_valid_objects() {
        for t in [
            r#"{}"#,
            r#"{ "a" : 1 , "b": [1, 2.50, -0.0, 1e5, true, null, {"c": "x"}] }"#,
            r#"{"s": "a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0001", "n": 12345678901234567890123}"#,
            r#"{"k": {"nested": {"deep": []}}, "z": "end"}"#,
        ] {
            let (out, fed) = run(t);
            assert_eq!(out, serde_compact(t), "{t}");
            assert_eq!(fed, Fed::Done(t.len()));
        }
    }

    #[test]
    fn stops_at_the_closing_brace() {
        let (out, fed) = run(r#"{"a": 1}} tail"#);
        assert_eq!(out, r#"{"a":1}"#);
        assert_eq!(fed, Fed::Done(8));
    }

    #[test]
    fn whole_keys_read_at_once_as_byte_by_byte() {
        for (t, want) in [
            ("{\"a\" : 1, \"b\"\n:\"x\", \"c\":{}}", r#"{"a":1,"b":"x","c":{}}"#),
            (r#"{"k\"q": 1, "é": 2}"#, r#"{"k\"q":1,"é":2}"#),
            (r#"{"a": 1, "b" "#, r#"{"a":1}"#),
            (r#"{"a" 1}"#, "{"),
        ] {
            let (out, _) = run(t);
            assert_eq!(out, want, "{t}");
            // The same text a byte at a time never sees a whole key.
            let mut s = JsonStream::new();
            let mut bytewise = String::new();
            for ch in t.chars() {
                s.feed(&ch.to_string(), &mut bytewise);
            }
            s.close(&mut bytewise);
            assert_eq!(bytewise, out, "{t}");
        }
    }

    #[test]
    fn truncated_input_closes_to_valid_json() {
        for (t, want) in [
            (r#"{"a": "hel"#, r#"{"a":"hel"}"#),
            (r#"{"a": 12"#, r#"{"a":12}"#),
            (r#"{"a": "#, r#"{"a":null}"#),
            (r#"{"a": 1, "b"#, r#"{"a":1}"#),
            (r#"{"a": [1, "#, r#"{"a":[1]}"#),
            (r#"{"a": tr"#, r#"{"a":null}"#),
            (r#"{"a": "x\u00"#, r#"{"a":"x"}"#),
            ("{", "{}"),
        ] {
            let (out, _) = run(t);
            assert_eq!(out, want, "{t}");
            serde_json::from_str::<serde_json::Value>(&out).unwrap();
        }
    }

    #[test]
    fn malformed_input_fails_at_the_bad_byte_and_writes_nothing_more() {
        let (out, fed) = run(r#"{"a": 1 x}"#);
        assert_eq!(out, r#"{"a":1"#);
        assert_eq!(fed, Fed::Failed(8));
        let (out, fed) = run(r#"{'a': 1}"#);
        assert_eq!((out.as_str(), fed), ("{", Fed::Failed(1)));
        let (out, _) = run(r#"{"a": [1,]}"#);
        assert_eq!(out, r#"{"a":[1"#);
    }

    proptest! {
        /// Any chunking gives the same output, and it always parses.
        #[test]
        fn chunking_does_not_matter(
            v in any_json(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
            pretty in any::<bool>(),
        ) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { serde_json::to_string(&v).unwrap() };
            let text = format!("{{\"v\": {text}}}");
            let (whole, _) = run(&text);
            let mut cut: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).filter(|c| text.is_char_boundary(*c)).collect();
            cut.sort_unstable();
            let mut s = JsonStream::new();
            let mut out = String::new();
            let mut from = 0;
            for c in cut.into_iter().chain([text.len()]) {
                s.feed(&text[from..c], &mut out);
                from = c;
            }
            s.close(&mut out);
            prop_assert_eq!(&out, &whole);
            prop_assert_eq!(out, serde_compact(&text));
        }

        /// Any prefix closes to valid JSON.
        #[test]
        fn any_prefix_closes_valid(v in any_json(), cut in any::<usize>()) {
            let text = format!("{{\"v\": {}}}", serde_json::to_string_pretty(&v).unwrap());
            let mut c = cut % (text.len() + 1);
            while !text.is_char_boundary(c) { c -= 1; }
            let (out, _) = run(&text[..c]);
            prop_assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "{}", out);
        }
    }

    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = json_strategy::scalar("[a-z\"\\\\/\n\t\u{1}é😀 ]{0,12}");
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[a-z\"é]{1,5}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
