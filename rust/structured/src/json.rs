//! A byte-level JSON recognizer small enough to copy.
//!
//! The mask of one decoding step tries every token of the vocabulary from the current state,
//! so the state is a few bytes and `Copy`: the open containers are a bit stack in a `u64` (one
//! bit per level, object or array), which bounds nesting at 64 levels. The grammar is RFC 8259
//! JSON with two limits a model needs and a parser does not: a run of whitespace outside strings
//! is capped (a model that may write whitespace forever sometimes does), and so is nesting.
//! Inside strings, bytes must form valid UTF-8 and control characters must be escaped.

/// What the output may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonOptions {
    /// The top-level value must be an object (`response_format: json_object`).
    pub object_only: bool,
    /// Longest run of whitespace allowed between tokens of the document.
    pub max_whitespace: u8,
}

impl Default for JsonOptions {
    fn default() -> Self {
        Self {
            object_only: true,
            max_whitespace: 64,
        }
    }
}

/// Deepest nesting of objects and arrays (the bit stack's width).
const MAX_DEPTH: u8 = 64;

const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Where a number is, after the bytes read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    /// Whether the number may end here.
    fn terminal(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }

    fn step(self, b: u8) -> Option<Num> {
        use Num::*;
        let digit = b.is_ascii_digit();
        Some(match (self, b) {
            (Minus, b'0') => Zero,
            (Minus, _) if digit => Int,
            (Zero | Int, b'.') => Dot,
            (Int, _) if digit => Int,
            (Dot | Frac, _) if digit => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, _) if digit => ExpDigits,
            _ => return None,
        })
    }
}

/// What the next byte may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A value must start (the document's start, after `:`, after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or a closing bracket; at the top level, nothing.
    After,
    /// Inside a string (a key's or a value's).
    Str {
        key: bool,
    },
    /// After a backslash in a string.
    Escape {
        key: bool,
    },
    /// Inside `\uXXXX`, `left` hex digits to go; `low`: this escape must be the low half of a
    /// surrogate pair.
    Unicode {
        key: bool,
        left: u8,
        low: bool,
    },
    /// After a high surrogate's escape: the low half's `\u` must follow (`slash`: its `\` read).
    LowEscape {
        key: bool,
        slash: bool,
    },
    Num(Num),
    /// Inside `true` / `false` / `null` (`which` indexes `LITERALS`), `pos` bytes read.
    Literal {
        which: u8,
        pos: u8,
    },
}

/// The recognizer's whole state; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonState {
    mode: Mode,
    /// Bit `i` set: level `i` is an object (else an array).
    stack: u64,
    depth: u8,
    /// Whitespace bytes in the current run outside strings.
    ws: u8,
    /// UTF-8 continuation bytes still expected inside a string.
    utf8: u8,
    /// The range the next continuation byte must be in (narrower than `80..=BF` right after
    /// some lead bytes: no overlong forms, no surrogates, nothing past U+10FFFF).
    cont: (u8, u8),
    /// The code unit of the `\uXXXX` escape being read.
    unit: u16,
    options: JsonOptions,
}

impl JsonState {
    /// The state before the first byte of a document.
    pub fn new(options: JsonOptions) -> Self {
        Self {
            mode: Mode::Value,
            stack: 0,
            depth: 0,
            ws: 0,
            utf8: 0,
            cont: (0x80, 0xBF),
            unit: 0,
            options,
        }
    }

    /// Whether the bytes read so far form a complete document (the output may end here).
    pub fn is_complete(&self) -> bool {
        self.depth == 0
            && match self.mode {
                Mode::After => true,
                Mode::Num(n) => n.terminal() && !self.options.object_only,
                _ => false,
            }
    }

    /// Inside a string, between characters: any run of plain text (see `plain_text`) may
    /// follow and leaves the state as it is.
    pub fn in_string(&self) -> bool {
        matches!(self.mode, Mode::Str { .. }) && self.utf8 == 0
    }

    /// The state after `bytes`, or `None` when they cannot continue a JSON document.
    pub fn feed(self, bytes: &[u8]) -> Option<Self> {
        bytes.iter().try_fold(self, |s, &b| s.step(b))
    }

    /// The state after one more byte, or `None` when it cannot come next.
    pub fn step(mut self, b: u8) -> Option<Self> {
        match self.mode {
            Mode::Str { key } => self.string_byte(key, b),
            Mode::Escape { key } => {
                self.mode = match b {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Mode::Str { key },
                    b'u' => {
                        self.unit = 0;
                        Mode::Unicode {
                            key,
                            left: 4,
                            low: false,
                        }
                    }
                    _ => return None,
                };
                Some(self)
            }
            Mode::Unicode { key, left, low } => {
                let digit = char::from(b).to_digit(16)?;
                self.unit = (self.unit << 4) | digit as u16;
                if left > 1 {
                    self.mode = Mode::Unicode {
                        key,
                        left: left - 1,
                        low,
                    };
                    return Some(self);
                }
                // Surrogates only in pairs, high then low: a lone half is not a character
                // (strict parsers refuse it).
                let (high_half, low_half) = (
                    (0xD800..=0xDBFF).contains(&self.unit),
                    (0xDC00..=0xDFFF).contains(&self.unit),
                );
                self.mode = match (low, high_half, low_half) {
                    (false, false, false) | (true, false, true) => Mode::Str { key },
                    (false, true, false) => Mode::LowEscape { key, slash: false },
                    _ => return None,
                };
                Some(self)
            }
            Mode::LowEscape { key, slash } => {
                self.mode = match (slash, b) {
                    (false, b'\\') => Mode::LowEscape { key, slash: true },
                    (true, b'u') => {
                        self.unit = 0;
                        Mode::Unicode {
                            key,
                            left: 4,
                            low: true,
                        }
                    }
                    _ => return None,
                };
                Some(self)
            }
            Mode::Num(n) => match n.step(b) {
                Some(next) => {
                    self.mode = Mode::Num(next);
                    Some(self)
                }
                // The byte ends the number (if it may end) and is read after it.
                None if n.terminal() => {
                    self.mode = Mode::After;
                    self.step(b)
                }
                None => None,
            },
            Mode::Literal { which, pos } => {
                let lit = LITERALS[usize::from(which)];
                if lit.get(usize::from(pos)) != Some(&b) {
                    return None;
                }
                self.mode = if usize::from(pos) + 1 == lit.len() {
                    Mode::After
                } else {
                    Mode::Literal { which, pos: pos + 1 }
                };
                Some(self)
            }
            // Nothing after a complete document, not even whitespace: a model held to JSON
            // would otherwise pad its output up to the whitespace cap before it may stop.
            Mode::After if self.depth == 0 => None,
            _ if matches!(b, b' ' | b'\t' | b'\n' | b'\r') => {
                if self.ws >= self.options.max_whitespace {
                    return None;
                }
                self.ws += 1;
                Some(self)
            }
            mode => {
                self.ws = 0;
                self.structural(mode, b)
            }
        }
    }

    /// A byte inside a string.
    fn string_byte(mut self, key: bool, b: u8) -> Option<Self> {
        if self.utf8 > 0 {
            if !(self.cont.0..=self.cont.1).contains(&b) {
                return None;
            }
            self.utf8 -= 1;
            self.cont = (0x80, 0xBF);
            return Some(self);
        }
        match b {
            b'"' => {
                self.mode = if key { Mode::Colon } else { Mode::After };
            }
            b'\\' => self.mode = Mode::Escape { key },
            0x00..=0x1F => return None,
            0x80..=0xC1 | 0xF5..=0xFF => return None,
            0xC2..=0xF4 => {
                (self.utf8, self.cont) = match b {
                    0xC2..=0xDF => (1, (0x80, 0xBF)),
                    0xE0 => (2, (0xA0, 0xBF)),
                    0xED => (2, (0x80, 0x9F)),
                    0xE1..=0xEF => (2, (0x80, 0xBF)),
                    0xF0 => (3, (0x90, 0xBF)),
                    0xF4 => (3, (0x80, 0x8F)),
                    _ => (3, (0x80, 0xBF)),
                };
            }
            _ => {}
        }
        Some(self)
    }

    /// A byte outside strings, numbers and literals that is not whitespace.
    fn structural(mut self, mode: Mode, b: u8) -> Option<Self> {
        match mode {
            Mode::Value => self.value_start(b),
            Mode::ArrayFirst if b == b']' => self.close(),
            Mode::ArrayFirst => self.value_start(b),
            Mode::ObjectFirst if b == b'}' => self.close(),
            Mode::ObjectFirst | Mode::Key if b == b'"' => {
                self.mode = Mode::Str { key: true };
                Some(self)
            }
            Mode::Colon if b == b':' => {
                self.mode = Mode::Value;
                Some(self)
            }
            Mode::After if self.depth > 0 => {
                let in_object = self.top_is_object();
                match b {
                    b',' => {
                        self.mode = if in_object { Mode::Key } else { Mode::Value };
                        Some(self)
                    }
                    b'}' if in_object => self.close(),
                    b']' if !in_object => self.close(),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn value_start(mut self, b: u8) -> Option<Self> {
        if self.options.object_only && self.depth == 0 && b != b'{' {
            return None;
        }
        self.mode = match b {
            b'{' | b'[' => return self.open(b == b'{'),
            b'"' => Mode::Str { key: false },
            b'-' => Mode::Num(Num::Minus),
            b'0' => Mode::Num(Num::Zero),
            b'1'..=b'9' => Mode::Num(Num::Int),
            b't' => Mode::Literal { which: 0, pos: 1 },
            b'f' => Mode::Literal { which: 1, pos: 1 },
            b'n' => Mode::Literal { which: 2, pos: 1 },
            _ => return None,
        };
        Some(self)
    }

    fn open(mut self, object: bool) -> Option<Self> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        let bit = 1u64 << self.depth;
        if object {
            self.stack |= bit;
        } else {
            self.stack &= !bit;
        }
        self.depth += 1;
        self.mode = if object { Mode::ObjectFirst } else { Mode::ArrayFirst };
        Some(self)
    }

    fn close(mut self) -> Option<Self> {
        self.depth = self.depth.checked_sub(1)?;
        self.mode = Mode::After;
        Some(self)
    }

    fn top_is_object(&self) -> bool {
        self.depth > 0 && self.stack & (1u64 << (self.depth - 1)) != 0
    }
}

impl crate::Recognizer for JsonState {
    type Ctx = ();

    fn step(self, _: &(), b: u8) -> Option<Self> {
        JsonState::step(self, b)
    }

    fn is_complete(&self, _: &()) -> bool {
        JsonState::is_complete(self)
    }

    fn in_string(&self) -> bool {
        JsonState::in_string(self)
    }
}

/// Whether `bytes` are text a JSON string holds as is: whole UTF-8 characters, no quote, no
/// backslash, no control character. Inside a string, such bytes change nothing but the text.
pub fn plain_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok() && !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any() -> JsonOptions {
        JsonOptions {
            object_only: false,
            max_whitespace: 24,
        }
    }

    fn complete(text: &str, options: JsonOptions) -> bool {
        JsonState::new(options)
            .feed(text.as_bytes())
            .is_some_and(|s| s.is_complete())
    }

    #[test]
    fn documents() {
        for doc in [
            r#"{}"#,
            r#"{"a": 1, "b": [true, false, null, -0.5e+3, "x\u00e9\n\ud83d\ude00"], "c": {"d": []}}"#,
            "{\"é😀\": \"日本\"}",
            " {\n  \"a\": 0\n}",
        ] {
            assert!(complete(doc, JsonOptions::default()), "{doc}");
        }
        // Nothing follows a complete document, not even whitespace.
        assert!(JsonState::new(JsonOptions::default()).feed(b"{}\n").is_none());
        assert!(JsonState::new(any()).feed(b"12 ").is_none());
        for doc in ["[1, 2]", "\"s\"", "12", "-0", "true", "null", "1.5E-9"] {
            assert!(complete(doc, any()), "{doc}");
            assert!(!complete(doc, JsonOptions::default()), "object only: {doc}");
        }
    }

    #[test]
    fn prefixes_and_rejections() {
        let s = JsonState::new(JsonOptions::default());
        assert!(s.feed(b"{\"a\": [1, ").is_some_and(|s| !s.is_complete()));
        for bad in [
            &b"x"[..],
            b"{,",
            b"{\"a\" 1",
            b"{\"a\": 01",
            b"{\"a\": 1,}",
            b"{\"a\": tru }",
            b"{\"a\": \"\x01\"",
            b"{\"a\": \"\\x\"",
            b"{\"a\": \"\\ud800\"",
            b"{\"a\": \"\xed\xa0\x80\"",
            b"{\"a\": \"\xe0\x80\x80\"",
            b"{\"a\": \"\\udc00",
            b"{\"a\": \"\\ud800\\u0041",
            b"{\"a\": \"\xff\"",
            b"{\"a\": 1]",
            b"{} {}",
            b"```json",
        ] {
            assert!(s.feed(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn whitespace_and_depth_are_capped() {
        let s = JsonState::new(JsonOptions::default());
        assert!(s.feed(&[b' '; 64]).is_some());
        assert!(s.feed(&[b' '; 65]).is_none());
        // Inside a string, whitespace is content.
        assert!(s.feed(b"{\"a\": \"").and_then(|s| s.feed(&[b' '; 100])).is_some());
        let deep = "[".repeat(64);
        assert!(JsonState::new(any()).feed(deep.as_bytes()).is_some());
        assert!(JsonState::new(any()).feed(format!("{deep}[").as_bytes()).is_none());
    }
}
