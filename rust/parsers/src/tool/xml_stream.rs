//! Streaming arguments of Qwen-XML calls (`<parameter=K>\nV\n</parameter>`), written as compact
//! JSON while the model writes them.
//!
//! Each parameter is written as `"K":` as soon as its name is complete. A value whose schema type
//! is `string` streams character by character as a JSON string; any other value (or a parameter
//! of a tool without a schema) is typed like `xml::typed_value` once it is complete, and written
//! then. What a client may see only ever grows: a newline that could be the one the template put
//! before `</parameter>`, or text that could begin a closing tag, is held until the next piece
//! settles it. For the same text the result is what `xml::qwen_xml` builds, except that a repeated
//! parameter is kept twice instead of the last one winning.
use super::engine::Ctx;
use super::json_stream::write_escaped;
use super::xml::{trim_newlines, typed_value};
use crate::scan::partial_suffix_len;

const PARAM: &str = "<parameter=";
const PARAM_END: &str = "</parameter>";
const FUNCTION_END: &str = "</function>";
/// What ends a value: its own closing tag, or (a missing one) the next parameter or the function end.
const VALUE_ENDS: &[&str] = &[PARAM_END, PARAM, FUNCTION_END];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between parameters: the next `<parameter=` or `</function>`.
    Between,
    /// Reading a parameter name up to `>`.
    Key,
    /// Reading a value; `string`: it streams as a JSON string, else it is written when complete.
    Value {
        string: bool,
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
    tool: String,
    state: State,
    /// Whether a parameter was written (the next one needs a `,`).
    wrote_param: bool,
    key: String,
    /// Offset within the unconsumed value text already searched for an end (non-string values).
    searched: usize,
}

impl XmlArgs {
    pub(crate) fn new(tool: &str) -> Self {
        Self {
            tool: tool.to_string(),
            state: State::Between,
            wrote_param: false,
            key: String::new(),
            searched: 0,
        }
    }

    /// The opening of the arguments object, written when the call starts.
    pub(crate) fn open(out: &mut String) {
        out.push('{');
    }

    /// Read `text` (everything after the last consumed byte). `ended`: the function's text ends at
    /// `text.len()`.
    pub(crate) fn feed(&mut self, text: &str, ended: bool, ctx: &Ctx, out: &mut String) -> XmlFed {
        let mut i = 0;
        loop {
            let rest = &text[i..];
            match self.state {
                State::Done => return XmlFed::Done(i),
                State::Between => {
                    let ws = rest.len() - rest.trim_start().len();
                    let t = &rest[ws..];
                    if t.starts_with(PARAM) {
                        i += ws + PARAM.len();
                        self.state = State::Key;
                    } else if t.starts_with(FUNCTION_END) {
                        out.push('}');
                        self.state = State::Done;
                        return XmlFed::Done(i + ws + FUNCTION_END.len());
                    } else if t.is_empty() || (!ended && (PARAM.starts_with(t) || FUNCTION_END.starts_with(t))) {
                        if ended {
                            out.push('}');
                            self.state = State::Done;
                            return XmlFed::Done(text.len());
                        }
                        return XmlFed::More(i);
                    } else {
                        self.close(out);
                        return XmlFed::Failed(i + ws);
                    }
                }
                State::Key => {
                    let Some(p) = rest.find('>') else {
                        if ended {
                            self.close(out);
                            return XmlFed::Failed(i);
                        }
                        return XmlFed::More(i);
                    };
                    self.key = rest[..p].trim().to_string();
                    if self.wrote_param {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(&self.key).unwrap_or_default());
                    out.push(':');
                    self.wrote_param = true;
                    let string = ctx.param_type(&self.tool, &self.key) == Some("string");
                    if string {
                        out.push('"');
                    }
                    self.state = State::Value { string, started: false };
                    self.searched = 0;
                    i += p + 1;
                }
                State::Value { string: true, started } => {
                    if !started {
                        if rest.is_empty() && !ended {
                            return XmlFed::More(i);
                        }
                        if rest.starts_with('\n') {
                            i += 1;
                        }
                        self.state = State::Value {
                            string: true,
                            started: true,
                        };
                        continue;
                    }
                    match first_end(rest) {
                        Some((p, end)) => {
                            let value = rest[..p].strip_suffix('\n').unwrap_or(&rest[..p]);
                            escape_into(value, out);
                            out.push('"');
                            i += p + if end == PARAM_END { end.len() } else { 0 };
                            self.state = State::Between;
                        }
                        None if ended => {
                            escape_into(rest.strip_suffix('\n').unwrap_or(rest), out);
                            out.push_str("\"}");
                            self.state = State::Done;
                            return XmlFed::Done(text.len());
                        }
                        None => {
                            // Hold a possible closing tag, and the newline that may precede one.
                            let mut keep = rest.len() - partial_suffix_len(rest, VALUE_ENDS);
                            if rest[..keep].ends_with('\n') {
                                keep -= 1;
                            }
                            escape_into(&rest[..keep], out);
                            return XmlFed::More(i + keep);
                        }
                    }
                }
                State::Value { string: false, .. } => {
                    let from = self.searched.min(rest.len());
                    let found = first_end(&rest[from..]).map(|(p, end)| (from + p, end));
                    let (p, consumed) = match found {
                        Some((p, end)) => (p, p + if end == PARAM_END { end.len() } else { 0 }),
                        None if ended => (rest.len(), rest.len()),
                        None => {
                            self.searched = rest.len() - partial_suffix_len(rest, VALUE_ENDS);
                            return XmlFed::More(i);
                        }
                    };
                    let value = typed_value(ctx, &self.tool, &self.key, trim_newlines(&rest[..p]));
                    out.push_str(&serde_json::to_string(&value).unwrap_or_default());
                    i += consumed;
                    self.state = State::Between;
                }
            }
        }
    }

    /// Finish the object as valid JSON (malformed or cut-off input).
    pub(crate) fn close(&mut self, out: &mut String) {
        match self.state {
            State::Done => return,
            State::Value { string: true, .. } => out.push('"'),
            State::Value { string: false, .. } => out.push_str("null"),
            State::Between | State::Key => {}
        }
        out.push('}');
        self.state = State::Done;
    }
}

/// The earliest value end in `text`: offset and which one.
fn first_end(text: &str) -> Option<(usize, &'static str)> {
    crate::scan::find_first(text, VALUE_ENDS).map(|(p, i)| (p, VALUE_ENDS[i]))
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        write_escaped(c, out);
    }
}
