//! Shared fixtures and the streaming check for the tool-call tests.
#![allow(dead_code)]

use smgpy_parsers::tool::{
    parse_complete, parse_complete_forced, CallDelta, Forced, ToolCall, ToolCallParser, ToolDef, ToolFormat,
    ToolParseResult,
};

mod cases;
mod peers;

/// Every fixture: smgpy's own (`cases.rs`), then real outputs from peers' tests (`peers.rs`).
pub static CASES: std::sync::LazyLock<Vec<Case>> =
    std::sync::LazyLock::new(|| cases::CASES.iter().chain(peers::CASES).copied().collect());

/// `(id, name, arguments)` of an expected call.
pub type Expected = (Option<&'static str>, &'static str, &'static str);

/// One fixture: a raw model output and what it must parse to.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub format: &'static str,
    pub input: &'static str,
    pub text: &'static str,
    pub calls: &'static [Expected],
    /// Declared tools: name and optional JSON schema of the parameters.
    pub tools: Option<Tools>,
}

/// Declared tools of a fixture: name and optional JSON schema of the parameters.
pub type Tools = &'static [(&'static str, Option<&'static str>)];

/// A fixture without declared tools.
pub const fn c(format: &'static str, input: &'static str, text: &'static str, calls: &'static [Expected]) -> Case {
    Case {
        format,
        input,
        text,
        calls,
        tools: None,
    }
}

/// Not calls (malformed, or no calls at all): the whole input comes back as text.
pub const fn bad(format: &'static str, input: &'static str) -> Case {
    c(format, input, input, &[])
}

/// A fixture with declared tools.
pub const fn t(
    format: &'static str,
    input: &'static str,
    text: &'static str,
    calls: &'static [Expected],
    tools: Tools,
) -> Case {
    Case {
        tools: Some(tools),
        ..c(format, input, text, calls)
    }
}

/// Stream `chunks` through a parser and assemble the result like a client would.
pub fn stream(chunks: &[&str], format: ToolFormat, tools: Option<Vec<ToolDef>>) -> ToolParseResult {
    stream_through(ToolCallParser::new(format, tools), chunks)
}

/// Stream `chunks` through `p` and assemble the result like a client would, partial calls
/// included: what a complete parse must equal.
pub fn stream_through(mut p: ToolCallParser, chunks: &[&str]) -> ToolParseResult {
    stream_raw(&mut p, chunks)
}

/// What a client assembles from the deltas alone: abandoned calls included, their arguments as
/// far as they were streamed.
pub fn stream_raw(p: &mut ToolCallParser, chunks: &[&str]) -> ToolParseResult {
    let mut out = ToolParseResult::default();
    let mut deltas = Vec::new();
    for c in chunks {
        deltas.push(p.push(c));
    }
    deltas.push(p.finish());
    for d in deltas {
        out.normal_text.push_str(&d.normal_text);
        for c in d.calls().map(CallDelta::owned) {
            if c.index == out.calls.len() {
                let name = c.name.clone().expect("first delta of a call carries its name");
                out.calls.push(ToolCall {
                    id: c.id,
                    name,
                    arguments: c.arguments,
                });
            } else {
                assert!(c.index < out.calls.len(), "call index skipped");
                assert!(c.name.is_none(), "name sent twice");
                out.calls[c.index].arguments.push_str(&c.arguments);
            }
        }
    }
    out
}

/// Char boundaries of `s`, including 0 and `len`.
pub fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect()
}

/// Every two-way split and a char-by-char feed equal the complete parse.
pub fn check_streaming(input: &str, format: ToolFormat, tools: Option<Vec<ToolDef>>) {
    let complete = parse_complete(input, format, tools.clone());
    for &i in &boundaries(input) {
        let got = stream(&[&input[..i], &input[i..]], format, tools.clone());
        assert_eq!(got, complete, "split at {i} of {input:?} ({})", format.name());
    }
    let chars: Vec<String> = input.chars().map(String::from).collect();
    let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(
        stream(&refs, format, tools),
        complete,
        "char by char {input:?} ({})",
        format.name()
    );
}

/// Every two-way split of a forced (Hermes) output streams to its complete parse.
pub fn check_streaming_forced(input: &str, forced: Forced) {
    let complete = parse_complete_forced(input, ToolFormat::Hermes, None, forced.clone());
    for &i in &boundaries(input) {
        let got = stream_through(
            ToolCallParser::forced(ToolFormat::Hermes, None, forced.clone()),
            &[&input[..i], &input[i..]],
        );
        assert_eq!(got, complete, "split at {i} of {input:?}");
    }
}
