//! Table-driven tests of every tool-call format: real-looking outputs parsed complete and
//! streamed (every two-way split and char by char), plus malformed inputs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod tool_common;

use smgpy_parsers::tool::{parse_complete, ToolDef, ToolFormat};
use tool_common::{check_streaming, Case, CASES};

fn run(case: &Case) {
    let format: ToolFormat = case.format.parse().unwrap();
    let tools = case.tools.map(|names| {
        names
            .iter()
            .map(|(n, schema)| ToolDef {
                name: (*n).to_string(),
                parameters: schema.map(|s| serde_json::from_str(s).unwrap()),
            })
            .collect::<Vec<_>>()
    });
    let got = parse_complete(case.input, format, tools.clone());
    let calls: Vec<(Option<&str>, &str, &str)> = got
        .calls
        .iter()
        .map(|c| (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        got.normal_text, case.text,
        "normal text of {} / {:?}",
        case.format, case.input
    );
    assert_eq!(calls, case.calls, "calls of {} / {:?}", case.format, case.input);
    check_streaming(case.input, format, tools);
}

#[test]
fn every_case_complete_and_streaming() {
    for case in CASES {
        run(case);
    }
}

#[test]
fn every_format_has_cases() {
    for f in ToolFormat::ALL {
        let n = CASES
            .iter()
            .filter(|c| c.format.parse::<ToolFormat>().ok() == Some(*f))
            .count();
        assert!(n >= 2, "format {} has only {n} cases", f.name());
    }
}
