//! Tool-call parsing for every major model family, complete and streaming.
//!
//! One streaming engine (`engine`) is driven by a declarative spec per format (`spec`): the
//! markers that open a tool region, how the region ends and the grammar of its body (`body`,
//! `xml`, `literal`). A complete parse is `push(whole); finish()`, so streaming equals complete
//! by construction.
//!
//! When `tools` are given, a region whose calls name an undeclared tool is kept as normal text,
//! verbatim. Arguments are compact JSON in the model's key order. Where a format gives a call's
//! name before its arguments, the call goes live as soon as both are seen and its arguments
//! stream as fragments (`live`, with `json_stream` for JSON objects and `xml_stream` for Qwen-XML
//! parameters); other shapes (other XML dialects, Python literals) are reported in one
//! `ToolCallDelta` once their region is complete.
mod body;
mod engine;
mod format;
mod json_stream;
mod literal;
mod live;
mod spec;
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

/// One piece of a streamed tool call. The first delta of a call carries `name` (and `id`
/// when the format gives one); later ones only `arguments` fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// What a request's `tool_choice` forced the output to be (see `ToolCallParser::forced`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// The arguments object of a call to this function (`tool_choice` named it).
    Call(String),
    /// A JSON list of `{"name": ..., "parameters": ...}` calls (`tool_choice: "required"`).
    List,
}

/// What one `push` / `finish` produced.
#[derive(Debug, Clone, Default)]
pub struct ToolDelta {
    pub normal_text: String,
    pub calls: Vec<ToolCallDelta>,
    /// Argument buffers of cleared calls, handed to the next fragments: a stream that clears and
    /// reuses one delta allocates no fragment string per piece.
    spare: Vec<String>,
}

impl PartialEq for ToolDelta {
    fn eq(&self, other: &Self) -> bool {
        self.normal_text == other.normal_text && self.calls == other.calls
    }
}

impl Eq for ToolDelta {}

impl ToolDelta {
    /// At most this many argument buffers are kept for reuse.
    const SPARE: usize = 8;

    /// Empty the delta for the next `push_into`, keeping its buffers (the text's, the call
    /// list's and the argument strings').
    pub fn clear(&mut self) {
        self.normal_text.clear();
        for call in &mut self.calls {
            if self.spare.len() < Self::SPARE && call.arguments.capacity() > 0 {
                let mut arguments = std::mem::take(&mut call.arguments);
                arguments.clear();
                self.spare.push(arguments);
            }
        }
        self.calls.clear();
    }

    /// Append `text` to call `index`'s fragment in this delta, starting one (with a recycled
    /// buffer when there is one) unless the last call delta is already that call's.
    pub(crate) fn push_fragment(&mut self, index: usize, text: &str) {
        if let Some(last) = self.calls.last_mut().filter(|last| last.index == index) {
            last.arguments.push_str(text);
            return;
        }
        let mut arguments = self.spare.pop().unwrap_or_default();
        arguments.push_str(text);
        self.calls.push(ToolCallDelta {
            index,
            id: None,
            name: None,
            arguments,
        });
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
            engine: engine::Engine::new(spec::spec(format), spec::text_markers(format), engine::Ctx::new(tools)),
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
                engine::Ctx::new(tools),
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
    /// delta with `ToolDelta::clear` and reuses it for the whole stream allocates no text buffer,
    /// call list or argument string per piece.
    pub fn push_into(&mut self, text: &str, out: &mut ToolDelta) {
        self.engine.push(text, out);
    }

    /// End of output: flush held text; an unfinished region is parsed if it can be, else
    /// returned as text.
    pub fn finish(&mut self) -> ToolDelta {
        let mut out = ToolDelta::default();
        self.engine.finish(&mut out);
        out
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ToolFormat, tools: Option<Vec<ToolDef>>) -> ToolParseResult {
    collect(ToolCallParser::new(format, tools), text)
}

/// Parse a complete output that a request's `tool_choice` forced (see `ToolCallParser::forced`).
pub fn parse_complete_forced(
    text: &str,
    format: ToolFormat,
    tools: Option<Vec<ToolDef>>,
    forced: Forced,
) -> ToolParseResult {
    collect(ToolCallParser::forced(format, tools, forced), text)
}

/// `text` pushed whole through `p`, its deltas assembled into calls.
fn collect(mut p: ToolCallParser, text: &str) -> ToolParseResult {
    let mut d = p.push(text);
    let e = p.finish();
    d.normal_text.push_str(&e.normal_text);
    d.calls.extend(e.calls);
    let mut calls: Vec<ToolCall> = Vec::new();
    for c in d.calls {
        if let Some(call) = calls.get_mut(c.index) {
            call.arguments.push_str(&c.arguments);
        } else {
            calls.push(ToolCall {
                id: c.id,
                name: c.name.unwrap_or_default(),
                arguments: c.arguments,
            });
        }
    }
    ToolParseResult {
        normal_text: d.normal_text,
        calls,
    }
}
