//! Streaming arguments of XML-style calls, written as compact JSON while the model writes them.
//! Three dialects share the reader: Qwen XML (`<parameter=K>\nV\n</parameter>`), GLM
//! (`<arg_key>K</arg_key><arg_value>V</arg_value>`) and `<invoke>` blocks (MiniMax M2, DeepSeek
//! DSML, Step-3: `<parameter name="K" string="true">V</parameter>`).
//!
//! Each parameter is written as `"K":` as soon as its name is complete. A value whose schema type
//! is `string` streams character by character as a JSON string; any other value (or a parameter
//! of a tool without a schema) is typed like `xml::typed_value` once it is complete, and written
//! then. What a client may see only ever grows: a newline that could be the one the template put
//! before `</parameter>`, or text that could begin a closing tag, is held until the next piece
//! settles it. For the same text the result is what `xml::qwen_xml`, `xml::glm` and `xml::invoke`
//! build, except that a repeated parameter is kept twice instead of the last one winning.
use super::ctx::Ctx;
use super::json_stream::write_escaped_str;
use super::value::{self, loose_json, marked_value, Trim, Typing};
use super::xml::{attr, decode_entities};
use crate::scan::{self, find};
use serde_json::Value;
use std::borrow::Cow;

/// The tags of one XML dialect.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// Opens a parameter.
    param: &'static str,
    /// How the parameter's name is written after `param`.
    key: KeyForm,
    /// What ends a value: its own closing tag first, then tags that end it when that is missing.
    value_ends: &'static [&'static str],
    /// Ends the function; consumed unless the enclosing item owns it.
    pub(crate) function_end: &'static str,
    consume_function_end: bool,
    /// What surrounds a value that is not part of it.
    trim: Trim,
    /// How a value that is not text is typed.
    typing: Typing,
    /// Values carry XML entities (`&lt;`) unless marked `string="true"`.
    entities: bool,
}

#[derive(Debug, Clone, Copy)]
enum KeyForm {
    /// `K>`.
    Tag,
    /// ` name="K" [string="true|false"]>`.
    Attribute,
    /// `K</arg_key>` then `<arg_value>`.
    ArgKey,
}

pub(crate) static QWEN: Dialect = Dialect {
    param: "<parameter=",
    key: KeyForm::Tag,
    value_ends: &["</parameter>", "<parameter=", "</function>"],
    function_end: "</function>",
    consume_function_end: true,
    trim: Trim::Newline,
    typing: Typing::Schema,
    entities: false,
};

/// GLM: a function ends with its item (`</tool_call>`, which the enclosing region or item consumes).
pub(crate) static GLM: Dialect = Dialect {
    param: "<arg_key>",
    key: KeyForm::ArgKey,
    value_ends: &["</arg_value>"],
    function_end: "</tool_call>",
    consume_function_end: false,
    trim: Trim::All,
    typing: Typing::Loose,
    entities: false,
};

macro_rules! invoke_dialect {
    ($name:ident, $p:literal, $entities:expr, $trim:expr, $typing:expr) => {
        pub(crate) static $name: Dialect = Dialect {
            param: concat!("<", $p, "parameter"),
            key: KeyForm::Attribute,
            value_ends: &[concat!("</", $p, "parameter>"), concat!("</", $p, "invoke>")],
            function_end: concat!("</", $p, "invoke>"),
            consume_function_end: true,
            trim: $trim,
            typing: $typing,
            entities: $entities,
        };
    };
}
invoke_dialect!(MINIMAX, "", true, Trim::All, Typing::Schema);
invoke_dialect!(DSML, "｜DSML｜", false, Trim::Newline, Typing::Loose);
invoke_dialect!(STEPTML, "steptml:", false, Trim::Newline, Typing::Loose);

/// The `<invoke>` dialect of a prefix, if it is one of the known ones.
pub(crate) fn invoke_dialect(prefix: &str) -> Option<&'static Dialect> {
    match prefix {
        "" => Some(&MINIMAX),
        "｜DSML｜" => Some(&DSML),
        "steptml:" => Some(&STEPTML),
        _ => None,
    }
}

/// How a value is typed and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Streams as a JSON string (a text type in the schema, or `string="true"` without one).
    Text { entities: bool },
    /// Written when complete, typed as `value::typed` types it, or as `value::marked_value` for
    /// a DSML `string="..."` mark.
    Typed { entities: bool, marked: Option<bool> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between parameters: the next parameter or the function's end.
    Between,
    /// Reading a parameter's name.
    Key,
    /// Reading a value.
    Value {
        kind: Kind,
        started: bool,
    },
    Done,
}

/// Result of one `feed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XmlFed {
    /// This many bytes were consumed; more text is needed.
    More(usize),
    /// The function closed after this many bytes.
    Done(usize),
    /// The text at this offset is not a parameter; the object was closed.
    Failed(usize),
}

/// Reads one function's parameters; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct XmlArgs {
    dialect: &'static Dialect,
    tool: String,
    /// The parameter being read.
    key: String,
    state: State,
    /// Whether a parameter was written (the next one needs a `,`).
    wrote_param: bool,
    /// Offset within the unconsumed value text already searched for an end (non-string values).
    searched: usize,
}

impl XmlArgs {
    pub(crate) fn new(dialect: &'static Dialect, tool: &str) -> Self {
        Self {
            dialect,
            tool: tool.to_string(),
            key: String::new(),
            state: State::Between,
            wrote_param: false,
            searched: 0,
        }
    }

    /// Start over for another call, keeping the buffers.
    pub(crate) fn reset(&mut self, dialect: &'static Dialect, tool: &str) {
        self.dialect = dialect;
        self.tool.clear();
        self.tool.push_str(tool);
        self.state = State::Between;
        self.wrote_param = false;
        self.searched = 0;
    }

    /// Whether, given the `unread` bytes after the cursor, only a `<` can move this reader on: it
    /// is in a value typed when complete and has searched all of it for an end tag.
    pub(crate) fn waits_for_tag(&self, unread: usize) -> bool {
        matches!(
            self.state,
            State::Value {
                kind: Kind::Typed { .. },
                ..
            }
        ) && self.searched == unread
    }

    /// `n` more bytes, none of them a `<`, arrived after a value `waits_for_tag` said was searched
    /// through: they are searched too (no end tag can start in them, and none was held partly).
    pub(crate) fn searched_more(&mut self, n: usize) {
        self.searched += n;
    }

    /// The opening of the arguments object, written when the call starts.
    pub(crate) fn open(out: &mut String) {
        out.push('{');
    }

    /// Read `text` (everything after the last consumed byte). `ended`: the function's text ends at
    /// `text.len()`.
    pub(crate) fn feed<'a>(&mut self, text: &'a str, ended: bool, ctx: &Ctx, out: &mut String) -> XmlFed {
        let mut i = 0;
        loop {
            let rest = &text[i..];
            match self.state {
                State::Done => return XmlFed::Done(i),
                State::Between => {
                    let d = self.dialect;
                    let ws = rest.len() - rest.trim_start().len();
                    let t = &rest[ws..];
                    if t.starts_with(d.param) {
                        i += ws + d.param.len();
                        self.state = State::Key;
                    } else if t.starts_with(d.function_end) {
                        out.push('}');
                        self.state = State::Done;
                        let end = if d.consume_function_end {
                            d.function_end.len()
                        } else {
                            0
                        };
                        return XmlFed::Done(i + ws + end);
                    } else if t.is_empty() || (!ended && (d.param.starts_with(t) || d.function_end.starts_with(t))) {
                        if ended {
                            out.push('}');
                            self.state = State::Done;
                            return XmlFed::Done(text.len());
                        }
                        return XmlFed::More(i);
                    } else {
                        // Not a parameter: the call is abandoned, its object left as written.
                        return XmlFed::Failed(i + ws);
                    }
                }
                State::Key => {
                    let (key, string_attr, used) = match self.read_key(rest) {
                        KeyRead::Key(key, string_attr, used) => (key, string_attr, used),
                        KeyRead::Pending if !ended => return XmlFed::More(i),
                        KeyRead::Pending | KeyRead::Bad => return XmlFed::Failed(i),
                    };
                    if self.wrote_param {
                        out.push(',');
                    }
                    write_string(&key, out);
                    out.push(':');
                    self.wrote_param = true;
                    let entities = self.dialect.entities;
                    self.key.clear();
                    self.key.push_str(&key);
                    let ty = ctx.param_type(&self.tool, &key);
                    let kind = match string_attr.as_deref() {
                        // `string="false"` is JSON even for a `string` parameter (a quoted literal
                        // is decoded), so only `string="true"` text streams as it is written.
                        Some("true") if ty.is_none() || ty == Some("string") => Kind::Text { entities: false },
                        Some(mark) => Kind::Typed {
                            entities: false,
                            marked: Some(mark == "true"),
                        },
                        None if value::is_text(ctx, &self.tool, &key, self.dialect.typing) => Kind::Text { entities },
                        None => Kind::Typed { entities, marked: None },
                    };
                    if matches!(kind, Kind::Text { .. }) {
                        out.push('"');
                    }
                    self.state = State::Value { kind, started: false };
                    self.searched = 0;
                    i += used;
                }
                State::Value {
                    kind: Kind::Text { entities },
                    started,
                } => {
                    let d = self.dialect;
                    if !started {
                        let skip = match d.trim {
                            Trim::Newline => usize::from(rest.starts_with('\n')),
                            Trim::All => rest.len() - rest.trim_start().len(),
                        };
                        // Until text that is not leading space arrives, nothing is settled.
                        if rest.len() == skip && !ended && (skip == 0 || d.trim == Trim::All) {
                            return XmlFed::More(i);
                        }
                        i += skip;
                        self.state = State::Value {
                            kind: Kind::Text { entities },
                            started: true,
                        };
                        continue;
                    }
                    let trim = |v: &'a str| match d.trim {
                        Trim::Newline => v.strip_suffix('\n').unwrap_or(v),
                        Trim::All => v.trim_end(),
                    };
                    match first_end(rest, d.value_ends) {
                        Ok((p, end)) => {
                            write_text(trim(&rest[..p]), entities, out);
                            out.push('"');
                            i += p + if end == d.value_ends[0] { end.len() } else { 0 };
                            self.state = State::Between;
                        }
                        Err(_) if ended => {
                            write_text(trim(rest), entities, out);
                            out.push_str("\"}");
                            self.state = State::Done;
                            return XmlFed::Done(text.len());
                        }
                        Err(held) => {
                            // Hold a possible closing tag, the space that may precede one, and an
                            // entity not yet complete.
                            let mut keep = rest.len() - held;
                            keep = match d.trim {
                                Trim::Newline if rest[..keep].ends_with('\n') => keep - 1,
                                Trim::Newline => keep,
                                Trim::All => rest[..keep].trim_end().len(),
                            };
                            if entities {
                                if let Some(amp) = rest[..keep].rfind('&') {
                                    if !rest[amp..keep].contains(';') && keep - amp < 8 {
                                        keep = amp;
                                    }
                                }
                            }
                            write_text(&rest[..keep], entities, out);
                            return XmlFed::More(i + keep);
                        }
                    }
                }
                State::Value {
                    kind: Kind::Typed { entities, marked },
                    ..
                } => {
                    let d = self.dialect;
                    let from = self.searched.min(rest.len());
                    // Text before `searched` was already found not to begin an end tag.
                    let found = first_end(&rest[from..], d.value_ends).map(|(p, end)| (from + p, end));
                    let (p, consumed) = match found {
                        Ok((p, end)) => (p, p + if end == d.value_ends[0] { end.len() } else { 0 }),
                        Err(_) if ended => (rest.len(), rest.len()),
                        Err(held) => {
                            self.searched = rest.len() - held;
                            return XmlFed::More(i);
                        }
                    };
                    let raw = value::trim(&rest[..p], d.trim);
                    let raw = if entities {
                        decode_entities(raw)
                    } else {
                        Cow::Borrowed(raw)
                    };
                    let raw = raw.as_ref();
                    match (marked, d.typing) {
                        (Some(mark), _) => write_value(&marked_value(ctx, &self.tool, &self.key, raw, mark), out),
                        (None, Typing::Schema) => {
                            write_value(&value::typed(ctx, &self.tool, &self.key, raw, Typing::Schema), out)
                        }
                        (None, Typing::Loose) => write_loose(raw, out),
                    }
                    i += consumed;
                    self.state = State::Between;
                }
            }
        }
    }

    /// A parameter's name (and `string` attribute) at the start of `rest`, after `param`.
    fn read_key<'a>(&self, rest: &'a str) -> KeyRead<'a> {
        match self.dialect.key {
            KeyForm::Tag => match scan::byte(b'>', rest.as_bytes()) {
                Some(p) => KeyRead::Key(Cow::Borrowed(rest[..p].trim()), None, p + 1),
                None => KeyRead::Pending,
            },
            KeyForm::Attribute => match scan::byte(b'>', rest.as_bytes()) {
                Some(p) => match attr(&rest[..p], "name") {
                    Some(key) => KeyRead::Key(Cow::Owned(key), attr(&rest[..p], "string"), p + 1),
                    None => KeyRead::Bad,
                },
                None => KeyRead::Pending,
            },
            KeyForm::ArgKey => {
                const KEY_END: &str = "</arg_key>";
                const VALUE: &str = "<arg_value>";
                let Some(p) = find(rest, KEY_END) else {
                    return KeyRead::Pending;
                };
                let after = &rest[p + KEY_END.len()..];
                let t = after.trim_start();
                if t.starts_with(VALUE) {
                    let used = p + KEY_END.len() + (after.len() - t.len()) + VALUE.len();
                    KeyRead::Key(Cow::Borrowed(rest[..p].trim()), None, used)
                } else if VALUE.starts_with(t) {
                    KeyRead::Pending
                } else {
                    KeyRead::Bad
                }
            }
        }
    }
}

/// A parameter name read from its tag.
enum KeyRead<'a> {
    /// Name, `string` attribute, bytes used (through the opening of the value).
    Key(Cow<'a, str>, Option<String>, usize),
    Pending,
    Bad,
}

/// The earliest value end in `text`: offset and which one; else, as `Err`, the length of a suffix
/// that may begin one (from the last `<`, if what follows is a proper prefix of an end). Every end
/// tag starts with `<` and holds no other, so only the positions of `<` are tried, once each.
fn first_end(text: &str, ends: &'static [&'static str]) -> Result<(usize, &'static str), usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut last = None;
    while let Some(off) = scan::byte(b'<', &bytes[from..]) {
        let p = from + off;
        if let Some(end) = ends.iter().find(|e| bytes[p..].starts_with(e.as_bytes())) {
            return Ok((p, end));
        }
        last = Some(p);
        from = p + 1;
    }
    match last {
        Some(q)
            if ends
                .iter()
                .any(|e| e.len() > text.len() - q && e.starts_with(&text[q..])) =>
        {
            Err(text.len() - q)
        }
        _ => Err(0),
    }
}

/// Write string content as JSON string text, decoding XML entities first when asked.
fn write_text(text: &str, entities: bool, out: &mut String) {
    let text = if entities {
        decode_entities(text)
    } else {
        Cow::Borrowed(text)
    };
    write_escaped_str(&text, out);
}

/// `text` as a JSON string.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    write_escaped_str(text, out);
    out.push('"');
}

/// `v` as compact JSON.
fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => write_string(s, out),
        v => out.push_str(&serde_json::to_string(v).unwrap_or_default()),
    }
}

/// A value without a string schema, as `value::loose_json` reads it, written without building a
/// `Value` for the common plain-text case (`value::plain_text`).
fn write_loose(raw: &str, out: &mut String) {
    if value::plain_text(raw) {
        write_string(raw, out);
    } else {
        write_value(&loose_json(raw), out);
    }
}
