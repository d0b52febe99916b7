//! Tool-call parsing for every major model family, complete and streaming.
//!
//! One streaming engine (`engine`) is driven by a declarative spec per format (`spec`): the
//! markers that open a tool region, how the region ends and the grammar of its body (`body`,
//! `xml`, `literal`). A complete parse is `push(whole); finish()`, so streaming equals complete
//! by construction; calls cut off or broken after they went live are partial in both
//! (`Abandoned` lists them).
//!
//! When `tools` are given, a region whose calls name an undeclared tool is kept as normal text,
//! verbatim. Arguments are compact JSON in the model's key order. Where a format gives a call's
//! name before its arguments, the call goes live as soon as both are seen and its arguments
//! stream as fragments (`live`, with `json_stream` for JSON objects and `xml_stream` for Qwen-XML
//! parameters); other shapes (other XML dialects, Python literals) are reported in one call
//! delta (`CallDelta`) once their region is complete.
mod body;
mod ctx;
mod ends;
mod engine;
mod format;
mod generic;
mod header;
mod heads;
mod json_raw;
#[cfg(test)]
mod json_strategy;
mod json_stream;
mod literal;
mod live;
mod probe;
mod spec;
mod string_run;
mod value;
mod xml;
mod xml_stream;

pub use format::ToolFormat;

/// What a parser needs to know of a declared tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    /// The JSON schema of its parameters (used to type XML-style parameters), if given.
    pub parameters: Option<serde_json::Value>,
}

/// One complete tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Id given by the model's format (Kimi, Mistral), if any.
    pub id: Option<String>,
    pub name: String,
    /// Compact JSON object text.
    pub arguments: String,
}

/// Result of a complete parse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolParseResult {
    pub normal_text: String,
    pub calls: Vec<ToolCall>,
}

/// One piece of a streamed tool call, owned (`CallDelta::owned`). The first delta of a call
/// carries `name` (and `id` when the format gives one); later ones only `arguments` fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// One piece of a streamed tool call, borrowed from the `ToolDelta` that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDelta<'a> {
    pub index: usize,
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}

impl CallDelta<'_> {
    pub fn owned(self) -> ToolCallDelta {
        ToolCallDelta {
            index: self.index,
            id: self.id.map(str::to_owned),
            name: self.name.map(str::to_owned),
            arguments: self.arguments.to_owned(),
        }
    }
}

/// What a request's `tool_choice` forced the output to be (see `ToolCallParser::forced`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// The arguments object of a call to this function (`tool_choice` named it).
    Call(String),
    /// A JSON list of `{"name": ..., "parameters": ...}` calls (`tool_choice: "required"`).
    List,
}

/// What one `push` / `finish` produced: normal text, and call deltas in order (`calls`).
///
/// The call deltas' ids, names and arguments fragments lie back to back in one string. A stream
/// that clears and reuses one delta (`push_into`) so allocates nothing per piece, and a live
/// call's reader writes its fragment straight into that string: a piece inside a long string
/// argument costs a copy, not a record of three strings.
#[derive(Debug, Clone, Default)]
pub struct ToolDelta {
    pub normal_text: String,
    /// The parts of every call delta, in order.
    text: String,
    spans: Vec<CallSpan>,
}

/// Where one call delta's parts lie in `ToolDelta::text`: the id from `start` to `name_at`, the
/// name to `args_at`, then the arguments fragment up to the next span's `start` (the last
/// span's up to the end of the text, so writing to the text extends the last fragment).
#[derive(Debug, Clone, Copy)]
struct CallSpan {
    index: usize,
    start: usize,
    name_at: usize,
    args_at: usize,
    has_id: bool,
    has_name: bool,
}

impl PartialEq for ToolDelta {
    fn eq(&self, other: &Self) -> bool {
        self.normal_text == other.normal_text && self.calls().eq(other.calls())
    }
}

impl Eq for ToolDelta {}

impl ToolDelta {
    /// Empty the delta for the next `push_into`, keeping its buffers.
    pub fn clear(&mut self) {
        self.normal_text.clear();
        self.text.clear();
        self.spans.clear();
    }

    /// The call deltas, in order.
    pub fn calls(&self) -> impl ExactSizeIterator<Item = CallDelta<'_>> + DoubleEndedIterator + '_ {
        self.spans.iter().enumerate().map(|(i, s)| {
            let end = self.spans.get(i + 1).map_or(self.text.len(), |next| next.start);
            CallDelta {
                index: s.index,
                id: s.has_id.then(|| &self.text[s.start..s.name_at]),
                name: s.has_name.then(|| &self.text[s.name_at..s.args_at]),
                arguments: &self.text[s.args_at..end],
            }
        })
    }

    /// Whether this delta has any call delta.
    pub fn has_calls(&self) -> bool {
        !self.spans.is_empty()
    }

    /// Append `other`'s normal text and call deltas.
    pub fn append(&mut self, other: &ToolDelta) {
        self.normal_text.push_str(&other.normal_text);
        let shift = self.text.len();
        self.text.push_str(&other.text);
        self.spans.extend(other.spans.iter().map(|s| CallSpan {
            start: s.start + shift,
            name_at: s.name_at + shift,
            args_at: s.args_at + shift,
            ..*s
        }));
    }

    /// Start call `index`'s first delta: its id, name and the first `arguments`.
    pub(crate) fn push_call(&mut self, index: usize, id: Option<&str>, name: &str, arguments: &str) {
        let start = self.text.len();
        self.text.push_str(id.unwrap_or_default());
        let name_at = self.text.len();
        self.text.push_str(name);
        self.spans.push(CallSpan {
            index,
            start,
            name_at,
            args_at: self.text.len(),
            has_id: id.is_some(),
            has_name: true,
        });
        self.text.push_str(arguments);
    }

    /// The string call `index`'s fragment ends, for appending to: this delta's last call delta
    /// when it is that call's, else a new one (`settle` drops it if nothing was written).
    pub(crate) fn fragment(&mut self, index: usize) -> &mut String {
        if self.spans.last().is_none_or(|last| last.index != index) {
            let at = self.text.len();
            self.spans.push(CallSpan {
                index,
                start: at,
                name_at: at,
                args_at: at,
                has_id: false,
                has_name: false,
            });
        }
        &mut self.text
    }

    /// Drop a last call delta that `fragment` opened and nothing was written to.
    pub(crate) fn settle(&mut self) {
        if let Some(last) = self.spans.last() {
            if !last.has_name && last.args_at == self.text.len() {
                self.spans.pop();
            }
        }
    }

    /// Append `text` to call `index`'s fragment in this delta, starting one unless the last call
    /// delta is already that call's.
    pub(crate) fn push_fragment(&mut self, index: usize, text: &str) {
        if !text.is_empty() {
            self.fragment(index).push_str(text);
        }
    }
}

/// Calls that went live and never completed: partial calls, in a stream and in a complete parse
/// alike (the crate docs' policy on calls that never complete), and the text of their regions.
///
/// A call goes live as soon as its name and the start of its arguments are seen, and a stream
/// cannot take back what it sent. When its arguments then break (invalid JSON, a malformed
/// parameter), or the output ends before they close (`max_tokens`), the call is abandoned: its
/// arguments fragments simply stop, never closed up into valid JSON. The server marks such calls
/// incomplete. `apply` gives a caller that prefers it the other reading: the abandoned calls
/// removed and, where no call of their region completed, the region's text put back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Abandoned {
    /// Indexes of the abandoned calls, ascending.
    pub calls: Vec<usize>,
    /// Text a complete parse has instead: `(offset, text)`, the offset in bytes of the normal
    /// text streamed before it; ascending.
    pub text: Vec<(usize, String)>,
}

impl Abandoned {
    /// Nothing was abandoned.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.text.is_empty()
    }

    /// Remove the abandoned calls from a result and put their regions' text back (the text
    /// reading of a cut-off call; neither a stream nor a complete parse reports it so).
    pub fn apply(&self, result: &mut ToolParseResult) {
        for &i in self.calls.iter().rev() {
            if i < result.calls.len() {
                result.calls.remove(i);
            }
        }
        for (at, text) in self.text.iter().rev() {
            if result.normal_text.is_char_boundary(*at) {
                result.normal_text.insert_str(*at, text);
            }
        }
    }
}

/// Per-request streaming tool-call parser.
#[derive(Debug)]
pub struct ToolCallParser {
    format: ToolFormat,
    engine: engine::Engine,
}

impl ToolCallParser {
    /// `tools`: when given, calls to undeclared names stay text, and parameter schemas type
    /// XML-style values.
    pub fn new(format: ToolFormat, tools: Option<Vec<ToolDef>>) -> Self {
        Self {
            format,
            engine: engine::Engine::new(spec::spec(format), spec::text_markers(format), ctx::Ctx::new(tools)),
        }
    }

    /// A parser for output that a request's `tool_choice` forced, as vLLM and SGLang force it:
    /// with an engine that holds the output to a JSON Schema, a named function's output is its
    /// arguments object and `required` output is a JSON list of `{"name", "parameters"}` calls.
    /// Output that opens (after whitespace) with that object or list is read as such: the calls
    /// go live at once and their arguments stream as compact JSON fragments; text after them is
    /// normal text. Output that opens otherwise (an engine that does not enforce schemas) is
    /// read in `format`, as `new` would.
    pub fn forced(format: ToolFormat, tools: Option<Vec<ToolDef>>, forced: Forced) -> Self {
        Self {
            format,
            engine: engine::Engine::forced(
                spec::spec(format),
                spec::text_markers(format),
                ctx::Ctx::new(tools),
                forced,
            ),
        }
    }

    /// The format this parser reads.
    pub fn format(&self) -> ToolFormat {
        self.format
    }

    /// Feed a text delta; returns what can be emitted now. Text that could begin a marker is
    /// held back until the next delta settles it.
    pub fn push(&mut self, text: &str) -> ToolDelta {
        let mut out = ToolDelta::default();
        self.engine.push(text, &mut out);
        out
    }

    /// `push`, appending to `out` instead of returning a new delta: a caller that empties one
    /// delta with `ToolDelta::clear` and reuses it for the whole stream allocates nothing per
    /// piece.
    pub fn push_into(&mut self, text: &str, out: &mut ToolDelta) {
        self.engine.push(text, out);
    }

    /// End of output: flush held text. In a region the output ended inside, calls that went live
    /// and did not complete stay partial and are abandoned (see [`Abandoned`] and the crate's
    /// `policy` docs); a region with no live call is calls only if it reads whole.
    pub fn finish(&mut self) -> ToolDelta {
        let mut out = ToolDelta::default();
        self.engine.finish(&mut out);
        out
    }

    /// The calls this stream started that never completed (so far): see [`Abandoned`].
    pub fn abandoned(&self) -> &Abandoned {
        self.engine.abandoned()
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ToolFormat, tools: Option<Vec<ToolDef>>) -> ToolParseResult {
    collect(text, format, tools, None)
}

/// Parse a complete output that a request's `tool_choice` forced (see `ToolCallParser::forced`).
pub fn parse_complete_forced(
    text: &str,
    format: ToolFormat,
    tools: Option<Vec<ToolDef>>,
    forced: Forced,
) -> ToolParseResult {
    collect(text, format, tools, Some(forced))
}

/// A complete parse's working buffers, kept for the next complete parse on the same thread:
/// a parse then allocates only its results, not the engine's text buffer, its arguments
/// readers' buffers and the delta it assembles from.
struct Scratch {
    engine: engine::Engine,
    delta: ToolDelta,
}

impl Scratch {
    /// Buffers grown past this many bytes are not kept (one huge output should not pin its
    /// memory to the thread).
    const KEEP: usize = 1 << 16;
}

thread_local! {
    // Boxed: taking it out and putting it back moves a pointer, not the engine.
    static SCRATCH: std::cell::RefCell<Option<Box<Scratch>>> = const { std::cell::RefCell::new(None) };
}

/// `text` pushed whole through a parser for `format`, its deltas assembled into calls.
fn collect(text: &str, format: ToolFormat, tools: Option<Vec<ToolDef>>, forced: Option<Forced>) -> ToolParseResult {
    let (spec, markers, ctx) = (spec::spec(format), spec::text_markers(format), ctx::Ctx::new(tools));
    let mut scratch = SCRATCH.with(|s| s.borrow_mut().take()).unwrap_or_else(|| {
        Box::new(Scratch {
            engine: engine::Engine::new(spec, markers, ctx::Ctx::default()),
            delta: ToolDelta::default(),
        })
    });
    scratch.engine.renew(spec, markers, ctx, forced);
    let d = &mut scratch.delta;
    d.clear();
    // The calls' parts come from `text`, so its length is room for them in all but odd cases.
    d.text.reserve(text.len());
    scratch.engine.push(text, d);
    scratch.engine.finish(d);
    let mut calls: Vec<ToolCall> = Vec::new();
    for c in d.calls() {
        if let Some(call) = calls.get_mut(c.index) {
            call.arguments.push_str(c.arguments);
        } else {
            calls.push(ToolCall {
                id: c.id.map(str::to_owned),
                name: c.name.unwrap_or_default().to_owned(),
                arguments: c.arguments.to_owned(),
            });
        }
    }
    let normal_text = std::mem::take(&mut d.normal_text);
    // Calls the engine abandoned stay as the partial calls the deltas built: exactly what any
    // chunking of the same output streams (the crate's `policy` on calls that never complete).
    let result = ToolParseResult { normal_text, calls };
    if scratch.engine.buffered_capacity().max(d.text.capacity()) <= Scratch::KEEP {
        scratch.engine.forget_tools();
        SCRATCH.with(|s| *s.borrow_mut() = Some(scratch));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(d: &ToolDelta) -> Vec<ToolCallDelta> {
        d.calls().map(CallDelta::owned).collect()
    }

    fn delta(index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn call_deltas_share_one_buffer() {
        let mut d = ToolDelta::default();
        d.push_call(0, Some("functions.a:0"), "a", "{\"x\":");
        d.push_fragment(0, "1}");
        d.push_call(1, None, "b", "");
        d.push_fragment(1, "");
        // A fragment opened and left empty is dropped.
        d.fragment(2);
        d.settle();
        d.push_fragment(1, "{}");
        assert_eq!(
            owned(&d),
            [
                delta(0, Some("functions.a:0"), Some("a"), "{\"x\":1}"),
                delta(1, None, Some("b"), "{}"),
            ]
        );
        let mut e = ToolDelta::default();
        e.normal_text.push_str("text");
        e.push_fragment(1, "more");
        d.append(&e);
        assert_eq!(d.normal_text, "text");
        assert_eq!(owned(&d)[2], delta(1, None, None, "more"));
        assert_eq!(d.calls().len(), 3);
        d.clear();
        assert!(!d.has_calls());
        assert_eq!(d, ToolDelta::default());
    }

    #[test]
    fn complete_parses_on_one_thread_do_not_leak_into_each_other() {
        let big = format!(
            "<tool_call>{{\"name\": \"a\", \"arguments\": {{\"s\": \"{}\"}}}}</tool_call>",
            "x".repeat(100_000)
        );
        let first = parse_complete(&big, ToolFormat::Hermes, None);
        assert_eq!(first.calls.len(), 1);
        let forced = parse_complete_forced("{\"q\": 1}", ToolFormat::Hermes, None, Forced::Call("f".into()));
        assert_eq!(
            forced.calls,
            [ToolCall {
                id: None,
                name: "f".into(),
                arguments: "{\"q\":1}".into()
            }]
        );
        let text = "hi <tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
        for _ in 0..2 {
            let r = parse_complete(text, ToolFormat::Hermes, None);
            assert_eq!((r.normal_text.as_str(), r.calls.len()), ("hi ", 1));
            let undeclared = parse_complete(text, ToolFormat::Hermes, Some(vec![]));
            assert_eq!((undeclared.normal_text.as_str(), undeclared.calls.len()), (text, 0));
        }
    }
}
