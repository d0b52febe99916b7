//! Property tests over every tool-call format: any chunking of any input (fixtures, their
//! mixtures and truncations, marker soup, arbitrary strings, splits inside multibyte markers)
//! streams to exactly the complete parse, nothing panics, and in documents of plain text and
//! well-formed calls all text and every call is accounted for. `PROPTEST_CASES` scales the run
//! (default 512 per property).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod tool_common;

use proptest::prelude::*;
use smgpy_parsers::tool::{
    parse_complete, Forced, ToolCall, ToolCallParser, ToolDef, ToolDelta, ToolFormat, ToolParseResult,
};
use std::collections::HashMap;
use std::sync::OnceLock;
use tool_common::{boundaries, stream, stream_through, Case, CASES};

/// Marker pieces of all formats, so random soup hits real markers and their prefixes.
const PIECES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    "<tool_",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "\"",
    "'",
    "\\",
    ":",
    ",",
    ";",
    "\n",
    " ",
    "\"name\"",
    "\"arguments\"",
    "\"f\"",
    "f(a=1)",
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "<parameter=x>\n",
    "\n</parameter>",
    "<function=f>\n",
    "<arg_key>a</arg_key>",
    "<tool_call>f\n",
    "<｜DSML｜parameter name=\"a\" string=\"true\">",
    "</｜DSML｜parameter>",
    "&amp;",
    "&lt",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<｜end▁of▁sentence｜>",
    "｜",
    "▁",
    "<｜DSML｜invoke name=\"f\">",
    "</｜DSML｜invoke>",
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<|eom_id|>",
    "<|channel|>",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    "<|start|>",
    " to=functions.f",
    "<minimax:tool_call>",
    "<invoke name=\"f\">",
    "</invoke>",
    "<parameter name=\"a\">",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|\"|>",
    "call:f",
    ">>>",
    "all",
    "<|open|>tools<|sep|>",
    "<|close|>",
    "<|sep|>",
    "```json",
    "```",
    "functools",
    "é",
    "日本",
    "😀",
];

/// The markers of every format (as its parser declares them) plus `PIECES`, deduplicated.
fn all_markers() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<&'static str> = ToolFormat::ALL.iter().flat_map(|f| f.markers()).collect();
        v.extend_from_slice(PIECES);
        v.sort_unstable();
        v.dedup();
        v
    })
}

/// A marker of any format, whole or cut short (at a char boundary).
fn marker_piece() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(all_markers()),
        any::<proptest::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(m, cut, whole)| {
            if whole {
                m.to_string()
            } else {
                let b = boundaries(m);
                m[..b[cut.index(b.len())]].to_string()
            }
        })
}

fn soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => marker_piece(),
        1 => "\\PC{0,6}",
        2 => proptest::sample::select(CASES.as_slice()).prop_map(|c| c.input.to_string()),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

/// An input plus a random truncation point.
fn input() -> impl Strategy<Value = String> {
    (soup(), any::<proptest::sample::Index>()).prop_map(|(s, cut)| {
        let b = boundaries(&s);
        let end = b[cut.index(b.len())];
        if end * 3 > s.len() * 2 {
            s
        } else {
            s[..end].to_string()
        }
    })
}

/// `s` cut at the char boundaries that `cuts` pick.
fn chunked<'a>(s: &'a str, cuts: &[proptest::sample::Index]) -> Vec<&'a str> {
    let b = boundaries(s);
    let mut points: Vec<usize> = cuts.iter().map(|c| b[c.index(b.len())]).collect();
    points.push(0);
    points.push(s.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &s[w[0]..w[1]]).collect()
}

/// The characters of plain text for the accounting property: none that markers are made of
/// (`<`, `>`, brackets, bars, quotes, backticks) and no `f` or `l`, so no segment can spell or
/// begin a word marker (`functools`, `function call<|role_sep|>`, Gemma's `call:`) either.
const PLAIN_CHARS: &str = "abcdeghijkmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,!?:;-\n\té日😀";

fn plain() -> impl Strategy<Value = String> {
    let chars: Vec<char> = PLAIN_CHARS.chars().collect();
    proptest::collection::vec(proptest::sample::select(chars), 0..12).prop_map(String::from_iter)
}

/// Text a format needs in front of plain text: Functionary v3.2 reads the first line as a
/// recipient, and `all` is its recipient for plain text.
fn text_header(format: ToolFormat) -> &'static str {
    match format {
        ToolFormat::FunctionaryV32 => "all\n",
        _ => "",
    }
}

/// The well-formed call blocks of a format: fixture inputs that are calls only. `inner` ones
/// read the same between any text; `initial` ones only at the start of output (a bare JSON
/// array, a leading header), where nothing but a block may precede them.
#[derive(Debug, Default)]
struct Blocks {
    inner: Vec<&'static Case>,
    initial: Vec<&'static Case>,
}

fn blocks(format: ToolFormat) -> &'static Blocks {
    static ALL: OnceLock<HashMap<ToolFormat, Blocks>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let mut all: HashMap<ToolFormat, Blocks> = HashMap::new();
        let parses_to = |f: ToolFormat, doc: &str, text: &str, blocks: &[&Case]| {
            let calls = blocks.iter().flat_map(|b| expected_calls(b)).collect();
            parse_complete(doc, f, None)
                == ToolParseResult {
                    normal_text: text.to_string(),
                    calls,
                }
        };
        let candidates = CASES
            .iter()
            .filter(|c| c.tools.is_none() && !c.calls.is_empty() && c.text.is_empty());
        // A whole block reads the same with text after it, even text that could continue a
        // value (`0`), and twice in a row; an input cut off inside its call would swallow what
        // follows.
        for b in candidates.clone() {
            let f: ToolFormat = b.format.parse().unwrap();
            let (h, i) = (text_header(f), b.input);
            if parses_to(f, &format!("{h}zz{i}0 zz"), "zz0 zz", &[b])
                && parses_to(f, &format!("{h}zz{i}zz{i}zz"), "zzzzzz", &[b, b])
            {
                all.entry(f).or_default().inner.push(b);
            }
        }
        // An initial block is followed by text and then any inner block as it would be alone.
        for b in candidates {
            let f: ToolFormat = b.format.parse().unwrap();
            let entry = all.entry(f).or_default();
            if entry.inner.iter().any(|i| std::ptr::eq(*i, b)) {
                continue;
            }
            let whole = parses_to(f, &format!("{}0 zz", b.input), "0 zz", &[b])
                && entry
                    .inner
                    .iter()
                    .all(|i| parses_to(f, &format!("{}0 zz{}", b.input, i.input), "0 zz", &[b, i]));
            if whole {
                entry.initial.push(b);
            }
        }
        all
    });
    static NONE: Blocks = Blocks {
        inner: Vec::new(),
        initial: Vec::new(),
    };
    all.get(&format).unwrap_or(&NONE)
}

fn expected_calls(case: &Case) -> Vec<ToolCall> {
    case.calls
        .iter()
        .map(|(id, name, arguments)| ToolCall {
            id: id.map(str::to_string),
            name: (*name).to_string(),
            arguments: (*arguments).to_string(),
        })
        .collect()
}

/// Every format has call blocks to build documents from, so the accounting property covers it.
#[test]
fn every_format_has_call_blocks() {
    let empty: Vec<&str> = ToolFormat::ALL
        .iter()
        .filter(|f| blocks(**f).inner.is_empty() && blocks(**f).initial.is_empty())
        .map(|f| f.name())
        .collect();
    assert!(empty.is_empty(), "formats without call blocks: {empty:?}");
}

/// No marker of any format can be spelled with `PLAIN_CHARS` (Functionary v3.2's header ends at
/// a newline; that format gets its `all` header in front of the text instead).
#[test]
fn plain_text_spells_no_marker() {
    for m in ToolFormat::ALL.iter().flat_map(|f| f.markers()).filter(|m| *m != "\n") {
        assert!(m.chars().any(|c| !PLAIN_CHARS.contains(c)), "{m:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_chunking_equals_complete(
        format in proptest::sample::select(ToolFormat::ALL),
        text in input(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let complete = parse_complete(&text, format, None);
        prop_assert_eq!(stream(&chunked(&text, &cuts), format, None), complete);
    }

    /// A parser for forced output (`tool_choice` named or `required`) gives the same under any
    /// chunking, whether the output opens with the forced JSON or with the format's own text.
    #[test]
    fn forced_any_chunking_equals_one_push(
        format in proptest::sample::select(ToolFormat::ALL),
        list in any::<bool>(),
        lead in proptest::sample::select(&["", " \n", "{", "{\"a\": [1, \"}\"], ", "[", "[{\"name\": \"f\", \"parameters\": {"][..]),
        text in input(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let text = format!("{lead}{text}");
        let forced = if list { Forced::List } else { Forced::Call("f".into()) };
        let whole = stream_through(ToolCallParser::forced(format, None, forced.clone()), &[&text]);
        prop_assert_eq!(stream_through(ToolCallParser::forced(format, None, forced), &chunked(&text, &cuts)), whole);
    }

    /// One delta cleared (`ToolDelta::clear`, which recycles argument buffers) and reused by
    /// `push_into` for every piece yields exactly the deltas of `push`.
    #[test]
    fn reused_delta_equals_fresh_deltas(
        format in proptest::sample::select(ToolFormat::ALL),
        text in input(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let chunks = chunked(&text, &cuts);
        let mut fresh = ToolCallParser::new(format, None);
        let mut reused = ToolCallParser::new(format, None);
        let mut delta = ToolDelta::default();
        for chunk in &chunks {
            delta.clear();
            reused.push_into(chunk, &mut delta);
            prop_assert_eq!(&delta, &fresh.push(chunk));
        }
    }

    /// With declared tools: undeclared names stay text, and `string` parameters of XML formats
    /// stream character by character.
    #[test]
    fn any_chunking_equals_complete_with_tools(
        format in proptest::sample::select(ToolFormat::ALL),
        text in input(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let tools = Some(vec![ToolDef {
            name: "f".into(),
            parameters: Some(serde_json::json!({"properties": {"a": {"type": "string"}, "x": {"type": "string"}}})),
        }]);
        let complete = parse_complete(&text, format, tools.clone());
        prop_assert_eq!(stream(&chunked(&text, &cuts), format, tools), complete);
    }

    #[test]
    fn fixtures_under_any_chunking(
        case in proptest::sample::select(CASES.as_slice()),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..24),
    ) {
        let format: ToolFormat = case.format.parse().unwrap();
        prop_assert_eq!(stream(&chunked(case.input, &cuts), format, None), parse_complete(case.input, format, None));
    }

    /// Truncated and malformed calls in every format: each fixture cut at any point (as
    /// `max_tokens` cuts it), with a marker piece or stray character inserted, or with one
    /// character deleted, streams under any chunking to exactly its complete parse (partial
    /// calls included; docs/parsers.md).
    #[test]
    fn truncated_and_malformed_calls_any_chunking(
        case in proptest::sample::select(CASES.as_slice()),
        edit in 0..4u8,
        at in any::<proptest::sample::Index>(),
        piece in marker_piece(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let format: ToolFormat = case.format.parse().unwrap();
        let b = boundaries(case.input);
        let i = at.index(b.len());
        let (head, tail) = case.input.split_at(b[i]);
        let text = match edit {
            0 => head.to_string(),
            1 => format!("{head}{piece}{tail}"),
            2 => format!("{head}{}", tail.chars().skip(1).collect::<String>()),
            _ => format!("{head}\"{tail}"),
        };
        let complete = parse_complete(&text, format, None);
        prop_assert_eq!(stream(&chunked(&text, &cuts), format, None), complete, "{} {:?}", format.name(), text);
    }

    /// All input text is accounted for: a document of plain-text segments and well-formed call
    /// blocks parses to exactly the segments' text and the blocks' calls, in order, and streams
    /// to the same under any chunking.
    #[test]
    fn all_text_and_calls_accounted_for(
        format in proptest::sample::select(ToolFormat::ALL),
        initial in any::<proptest::sample::Index>(),
        use_initial in any::<bool>(),
        parts in proptest::collection::vec((plain(), any::<proptest::sample::Index>()), 0..6),
        tail in plain(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let Blocks { inner, initial: leading } = blocks(format);
        // The text between blocks, stretch by stretch: a stretch of only whitespace next to a
        // call is not content (docs/parsers.md, text around calls).
        let (mut doc, mut stretches, mut calls) = (String::new(), vec![String::new()], Vec::new());
        if use_initial && !leading.is_empty() {
            let b = leading[initial.index(leading.len())];
            doc += b.input;
            calls.extend(expected_calls(b));
        } else {
            doc += text_header(format);
        }
        for (segment, pick) in &parts {
            doc += segment;
            if let Some(last) = stretches.last_mut() {
                last.push_str(segment);
            }
            if !inner.is_empty() {
                let b = inner[pick.index(inner.len())];
                doc += b.input;
                calls.extend(expected_calls(b));
                stretches.push(String::new());
            }
        }
        doc += &tail;
        if let Some(last) = stretches.last_mut() {
            last.push_str(&tail);
        }
        let text: String = stretches
            .iter()
            .filter(|s| calls.is_empty() || !s.trim().is_empty())
            .map(String::as_str)
            .collect();
        let complete = parse_complete(&doc, format, None);
        prop_assert_eq!(&complete, &ToolParseResult { normal_text: text, calls }, "{} {:?}", format.name(), doc);
        prop_assert_eq!(stream(&chunked(&doc, &cuts), format, None), complete);
    }

    /// Fuzz: arbitrary strings, arbitrary chunking, every format; must not panic and must agree.
    #[test]
    fn fuzz_arbitrary_strings(
        format in proptest::sample::select(ToolFormat::ALL),
        text in any::<String>(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..16),
    ) {
        let complete = parse_complete(&text, format, None);
        prop_assert_eq!(stream(&chunked(&text, &cuts), format, None), complete);
    }

    #[test]
    fn text_without_markers_passes_through(format in proptest::sample::select(ToolFormat::ALL), text in "[a-zA-Z0-9 .,!?é日😀\n]{0,64}") {
        // Formats that read a leading word as a header (Functionary v3.2) may take the first
        // line as a recipient; everything else must come back unchanged.
        let got = parse_complete(&text, format, None);
        if got.calls.is_empty() {
            prop_assert_eq!(got.normal_text, text);
        }
    }
}
