//! Property tests over every tool-call format: any chunking of any input (fixtures, their
//! mixtures and truncations, marker soup, arbitrary text, splits inside multibyte markers)
//! streams to exactly the complete parse, and nothing panics. `PROPTEST_CASES` scales the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod tool_common;

use proptest::prelude::*;
use smgpy_parsers::tool::{parse_complete, ToolDef, ToolFormat};
use tool_common::{boundaries, stream, CASES};

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

fn soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => proptest::sample::select(PIECES).prop_map(str::to_string),
        1 => "\\PC{0,6}",
        2 => proptest::sample::select(CASES).prop_map(|c| c.input.to_string()),
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

fn chunked(s: &str, cuts: &[proptest::sample::Index]) -> Vec<String> {
    let b = boundaries(s);
    let mut points: Vec<usize> = cuts.iter().map(|c| b[c.index(b.len())]).collect();
    points.push(0);
    points.push(s.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| s[w[0]..w[1]].to_string()).collect()
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
        let chunks = chunked(&text, &cuts);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        prop_assert_eq!(stream(&refs, format, None), complete);
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
        let chunks = chunked(&text, &cuts);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        prop_assert_eq!(stream(&refs, format, tools), complete);
    }

    #[test]
    fn fixtures_under_any_chunking(
        case in proptest::sample::select(CASES),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..24),
    ) {
        let format: ToolFormat = case.format.parse().unwrap();
        let chunks = chunked(case.input, &cuts);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        prop_assert_eq!(stream(&refs, format, None), parse_complete(case.input, format, None));
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
