//! Table-driven tests of every tool-call format: real-looking outputs parsed complete and
//! streamed (every two-way split and char by char), plus malformed inputs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod tool_common;

use smgpy_parsers::tool::{parse_complete, CallDelta, Forced, ToolCallDelta, ToolCallParser, ToolDef, ToolFormat};
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
    // Run every case and report all failures at once.
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|case| {
            std::panic::catch_unwind(|| run(case))
                .err()
                .map(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
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

/// Pushes `text` char by char up to the middle of `long` (an argument value) and returns the
/// call deltas: the arguments they carry must be a prefix of the complete parse's, `want`,
/// longer than `min_len` bytes and sent in more than `min_fragments` pieces.
fn stream_partway(
    format: &str,
    text: &str,
    long: &str,
    tools: Option<Vec<ToolDef>>,
    want: &str,
    min_fragments: usize,
    min_len: usize,
) -> Vec<ToolCallDelta> {
    let cut = text.find(long).unwrap() + long.len() / 2;
    let mut p = ToolCallParser::new(format.parse().unwrap(), tools);
    let mut deltas = Vec::new();
    for ch in text[..cut].chars() {
        deltas.extend(p.push(&ch.to_string()).calls().map(CallDelta::owned));
    }
    let streamed: String = deltas.iter().map(|c| c.arguments.as_str()).collect();
    let fragments = deltas.iter().filter(|c| !c.arguments.is_empty()).count();
    assert!(
        fragments > min_fragments,
        "{format}: only {fragments} argument fragments"
    );
    assert!(
        want.starts_with(&streamed) && streamed.len() > min_len,
        "{format}: {streamed:?} vs {want:?}"
    );
    deltas
}

/// Arguments stream while the model writes them: before the call's closing text arrives, the
/// name has been reported and a prefix of the final arguments sent.
#[test]
fn arguments_stream_before_the_call_ends() {
    let long = "x".repeat(200);
    let cases = [
        ("hermes", format!(r#"<tool_call>{{"name": "w", "arguments": {{"text": "{long}"}}}}</tool_call>"#)),
        ("llama3_json", format!(r#"{{"name": "w", "parameters": {{"text": "{long}"}}}}<|eot_id|>"#)),
        ("mistral", format!(r#"[TOOL_CALLS]w[ARGS]{{"text": "{long}"}}"#)),
        ("mistral", format!(r#"[TOOL_CALLS]w[CALL_ID]a1B2c3D4e[ARGS]{{"text": "{long}"}}"#)),
        ("deepseek_v31", format!(r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>w<｜tool▁sep｜>{{"text": "{long}"}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#)),
        ("deepseek_v3", format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>w\n```json\n{{\"text\": \"{long}\"}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")),
        ("kimi_k2", format!(r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.w:0<|tool_call_argument_begin|>{{"text": "{long}"}}<|tool_call_end|><|tool_calls_section_end|>"#)),
        ("openai", format!(r#"<|channel|>commentary to=functions.w <|constrain|>json<|message|>{{"text": "{long}"}}<|call|>"#)),
        ("functionary_v3_1", format!(r#"<function=w>{{"text": "{long}"}}</function>"#)),
        ("solar_open", format!(r#"<|tool_call:begin|>c1<|tool_call:name|>w<|tool_call:args|>{{"text": "{long}"}}<|tool_call:end|>"#)),
        ("granite", format!(r#"<|tool_call|>[{{"name": "w", "arguments": {{"text": "{long}"}}}}]"#)),
        ("json", format!(r#"[{{"name": "w", "arguments": {{"text": "{long}"}}}}, {{"name": "v", "arguments": {{}}}}]"#)),
    ];
    for (format, text) in cases {
        let f: ToolFormat = format.parse().unwrap();
        let complete = parse_complete(&text, f, None);
        assert_eq!(complete.calls[0].name, "w", "{format}");
        let want = &complete.calls[0].arguments;
        let deltas = stream_partway(format, &text, &long, None, want, 50, 50);
        for c in &deltas {
            assert_eq!(c.index, 0, "{format}");
        }
        assert!(
            deltas.iter().any(|c| c.name.as_deref() == Some("w")),
            "{format}: name not reported before the arguments end"
        );
    }
}

/// Qwen-XML parameters: a `string` parameter (per the tool's schema) streams character by
/// character; others are written when complete. The result equals the complete parse.
#[test]
fn qwen_xml_parameters_stream() {
    let long = "line one\nline \"two\" é\n".repeat(10);
    let tools = vec![ToolDef {
        name: "write".into(),
        parameters: Some(
            serde_json::json!({"properties": {"path": {"type": "string"}, "n": {"type": "integer"}, "text": {"type": "string"}}}),
        ),
    }];
    for (format, open, close) in [
        ("qwen3_coder", "<tool_call>\n", "\n</tool_call>"),
        ("qwen3_coder", "", ""),
        ("seed_oss", "<seed:tool_call>\n", "\n</seed:tool_call>"),
    ] {
        let text = format!(
            "{open}<function=write>\n<parameter=path>\na.txt\n</parameter>\n<parameter=n>\n3\n</parameter>\n<parameter=text>\n{long}\n</parameter>\n</function>{close}"
        );
        let f: ToolFormat = format.parse().unwrap();
        let complete = parse_complete(&text, f, Some(tools.clone()));
        assert_eq!(complete.calls.len(), 1, "{format}");
        let want = &complete.calls[0].arguments;
        let v: serde_json::Value = serde_json::from_str(want).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"path": "a.txt", "n": 3, "text": long.strip_suffix('\n').unwrap().to_owned() + "\n"})
        );
        stream_partway(format, &text, &long, Some(tools.clone()), want, 50, 100);
        check_streaming(&text, f, Some(tools.clone()));
    }
}

/// The other XML dialects stream the same way: GLM, Hy3, MiniMax M2 (entities decoded), DeepSeek
/// DSML (and its `string="true"` attribute), Step-3.
#[test]
fn xml_dialects_stream() {
    let long = "some <b>text</b> &amp; more\n".repeat(8);
    let tools = vec![ToolDef {
        name: "write".into(),
        parameters: Some(serde_json::json!({"properties": {"n": {"type": "integer"}, "text": {"type": "string"}}})),
    }];
    let cases = [
        ("glm45", format!("<tool_call>write\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n<arg_key>text</arg_key>\n<arg_value>{long}</arg_value>\n</tool_call>"), long.clone()),
        ("glm47", format!("<tool_call>write<arg_key>n</arg_key><arg_value>3</arg_value><arg_key>text</arg_key><arg_value>{long}</arg_value></tool_call>"), long.clone()),
        ("hy_v3", format!("<tool_calls>\n<tool_call>write<tool_sep>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n<arg_key>text</arg_key>\n<arg_value>{long}</arg_value>\n</tool_call>\n</tool_calls>"), long.clone()),
        ("minimax_m2", format!("<minimax:tool_call>\n<invoke name=\"write\">\n<parameter name=\"n\">3</parameter>\n<parameter name=\"text\">{long}</parameter>\n</invoke>\n</minimax:tool_call>"), long.replace("&amp;", "&")),
        ("deepseek_v32", format!("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"write\">\n<｜DSML｜parameter name=\"n\" string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"text\" string=\"true\">{long}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"), long.clone()),
        ("step3", format!("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"write\"><steptml:parameter name=\"n\">3</steptml:parameter><steptml:parameter name=\"text\">{long}</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"), long.clone()),
    ];
    for (format, text, want_text) in cases {
        let f: ToolFormat = format.parse().unwrap();
        let complete = parse_complete(&text, f, Some(tools.clone()));
        assert_eq!(complete.calls.len(), 1, "{format}: {complete:?}");
        let want = &complete.calls[0].arguments;
        let v: serde_json::Value = serde_json::from_str(want).unwrap();
        // GLM's reference parser strips a value's whitespace, the others one newline.
        let want_text = want_text.strip_suffix('\n').unwrap().to_string();
        assert_eq!(v, serde_json::json!({"n": 3, "text": want_text}), "{format}");
        stream_partway(format, &text, &long, Some(tools.clone()), want, 30, 60);
        check_streaming(&text, f, Some(tools.clone()));
    }
}

/// Pushes inside a value typed when complete skip the step machinery (`Engine::idle_push`)
/// until a `<` arrives: values holding `<`, a false start of the closing tag, or the tag split
/// across pushes must read the same as a complete parse.
#[test]
fn typed_xml_values_with_angle_brackets_stream() {
    for (format, input) in [
        (
            "glm47",
            "<tool_call>f<arg_key>a</arg_key><arg_value>x < y </arg_valu z</arg_value>\
             <arg_key>b</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
        ),
        (
            "qwen3_coder",
            "<tool_call>\n<function=f>\n<parameter=a>\nx < y </paramete z\n</parameter>\n\
             <parameter=b>\n3\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "minimax_m2",
            "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">x &lt; y </param z</parameter>\n\
             <parameter name=\"b\">true</parameter>\n</invoke>\n</minimax:tool_call>",
        ),
    ] {
        let format: ToolFormat = format.parse().unwrap();
        let got = parse_complete(input, format, None);
        assert_eq!(got.calls.len(), 1, "{input}");
        let args: serde_json::Value = serde_json::from_str(&got.calls[0].arguments).unwrap();
        assert!(args["a"].as_str().unwrap().starts_with("x < y </"), "{args}");
        check_streaming(input, format, None);
    }
}

/// Formats that write one call per turn: a parallel-call case cannot be written for them.
const ONE_CALL_PER_TURN: &[&str] = &["internlm", "gigachat3"];

/// The fixture matrix: every format has each kind of real-looking output it can express (single
/// and parallel calls, calls next to text, non-ASCII and escaped strings, nested JSON, empty
/// arguments, malformed input that stays text), so a new format cannot slip in half-tested.
#[test]
fn every_format_has_every_kind_of_case() {
    type Kind = (&'static str, fn(&Case) -> bool);
    let kinds: &[Kind] = &[
        ("single call", |c| c.calls.len() == 1),
        ("parallel calls", |c| c.calls.len() >= 2),
        ("calls with text", |c| !c.calls.is_empty() && !c.text.trim().is_empty()),
        ("non-ASCII argument", |c| c.calls.iter().any(|(_, _, a)| !a.is_ascii())),
        ("escaped string", |c| {
            c.calls.iter().any(|(_, _, a)| a.contains(r#"\""#))
        }),
        ("nested JSON", |c| {
            c.calls.iter().any(|(_, _, a)| a[1..].contains(['{', '[']))
        }),
        ("empty arguments", |c| c.calls.iter().any(|(_, _, a)| *a == "{}")),
        ("malformed", |c| {
            c.calls.is_empty() && c.text == c.input && !c.input.is_empty()
        }),
    ];
    let mut missing = Vec::new();
    for f in ToolFormat::ALL {
        let cases: Vec<&Case> = CASES
            .iter()
            .filter(|c| c.format.parse::<ToolFormat>().ok() == Some(*f))
            .collect();
        for (kind, has) in kinds {
            let exempt = *kind == "parallel calls" && ONE_CALL_PER_TURN.contains(&f.name());
            if !exempt && !cases.iter().any(|c| has(c)) {
                missing.push(format!("{}: {kind}", f.name()));
            }
        }
    }
    assert!(missing.is_empty(), "missing fixture kinds:\n{}", missing.join("\n"));
}

/// `pieces` streamed through a Hermes parser for forced output, as (normal text, calls as
/// (name, arguments)).
fn stream_forced(forced: Forced, pieces: &[&str]) -> (String, Vec<(String, String)>) {
    let mut p = ToolCallParser::forced(ToolFormat::Hermes, None, forced);
    let mut normal = String::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut deltas: Vec<_> = pieces.iter().map(|piece| p.push(piece)).collect();
    deltas.push(p.finish());
    for d in deltas {
        normal.push_str(&d.normal_text);
        for c in d.calls().map(CallDelta::owned) {
            match calls.get_mut(c.index) {
                Some(call) => call.1.push_str(&c.arguments),
                None => calls.push((c.name.unwrap_or_default(), c.arguments)),
            }
        }
    }
    (normal, calls)
}

/// Streamed results of a parser forced to call `get_weather`, as (normal text, calls).
fn forced(text: &str, pieces: &[&str]) -> (String, Vec<(String, String)>) {
    assert_eq!(pieces.concat(), text);
    stream_forced(Forced::Call("get_weather".into()), pieces)
}

#[test]
fn forced_call_reads_the_whole_output_as_arguments() {
    let text = " {\"city\": \"Paris\",\n \"days\": [1, 2.50]} \n";
    // The whitespace around the forced JSON is not content (docs/parsers.md).
    let want = (
        String::new(),
        vec![(
            "get_weather".to_string(),
            r#"{"city":"Paris","days":[1,2.5]}"#.to_string(),
        )],
    );
    assert_eq!(forced(text, &[text]), want);
    // Every two-way split and char by char give the same.
    for cut in (1..text.len()).filter(|&i| text.is_char_boundary(i)) {
        assert_eq!(forced(text, &[&text[..cut], &text[cut..]]), want, "cut at {cut}");
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(forced(text, &chars), want);
    // The call is reported before its arguments end.
    let mut p = ToolCallParser::forced(ToolFormat::Hermes, None, Forced::Call("get_weather".into()));
    let first = p.push("{\"city\": \"Par");
    assert_eq!(first.calls().next().and_then(|c| c.name), Some("get_weather"));
    assert_eq!(first.calls().next().map(|c| c.arguments), Some("{\"city\":\"Par"));
}

#[test]
fn forced_list_of_calls() {
    let text = "\n[{\"name\": \"a\", \"parameters\": {\"x\": 1}}, {\"name\": \"b\", \"parameters\": {}}]";
    let run = |pieces: &[&str]| stream_forced(Forced::List, pieces);
    let want = (
        String::new(),
        vec![
            ("a".to_string(), r#"{"x":1}"#.to_string()),
            ("b".to_string(), "{}".to_string()),
        ],
    );
    assert_eq!(run(&[text]), want);
    for cut in 1..text.len() {
        assert_eq!(run(&[&text[..cut], &text[cut..]]), want, "cut at {cut}");
    }
}

#[test]
fn forced_call_output_that_is_not_an_object_stays_text() {
    assert_eq!(
        forced("Sure, here it is.", &["Sure, here it is."]),
        ("Sure, here it is.".into(), vec![])
    );
    assert_eq!(forced("", &[]), (String::new(), vec![]));
    // Output in the model's own format (an engine that did not enforce the schema) is read so.
    let hermes = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    assert_eq!(
        forced(hermes, &[hermes]),
        (
            String::new(),
            vec![("get_weather".to_string(), r#"{"city":"Oslo"}"#.to_string())]
        )
    );
    // Cut off inside the arguments: the call stops where the output did (never closed into
    // valid JSON as if whole), in the stream and the complete parse alike.
    let (text, calls) = forced("{\"city\": \"Par", &["{\"city\": \"Par"]);
    assert_eq!(text, "");
    assert_eq!(calls, vec![("get_weather".to_string(), r#"{"city":"Par"#.to_string())]);
    let complete = smgpy_parsers::tool::parse_complete_forced(
        "{\"city\": \"Par",
        ToolFormat::Hermes,
        None,
        smgpy_parsers::tool::Forced::Call("get_weather".into()),
    );
    assert_eq!(complete.normal_text, "");
    assert_eq!(complete.calls.len(), 1);
}

/// `tool_choice: "required"` output cut by `max_tokens` before a call's name and arguments
/// began: the forced list is the server's wrapper, never content, at any chunking.
#[test]
fn forced_list_cut_off_leaks_no_wrapper() {
    use smgpy_parsers::tool::{parse_complete_forced, Forced};
    for text in [
        "[",
        "[\n{\n    \"name\": \"get_we",
        "[\n{\n    \"name\": \"get_weather\",\n    \"parameters\"",
    ] {
        let complete = parse_complete_forced(text, ToolFormat::Hermes, None, Forced::List);
        assert_eq!(complete.normal_text, "", "{text:?}");
        assert!(complete.calls.is_empty(), "{text:?}");
        tool_common::check_streaming_forced(text, Forced::List);
    }
    // Cut inside the arguments: the partial call, nothing in the content.
    let text = "[\n{\n    \"name\": \"get_weather\",\n    \"parameters\": {\"city\": \"Pa";
    let complete = parse_complete_forced(text, ToolFormat::Hermes, None, Forced::List);
    assert_eq!(complete.normal_text, "");
    assert_eq!(complete.calls.len(), 1);
    assert_eq!(complete.calls[0].name, "get_weather");
    tool_common::check_streaming_forced(text, Forced::List);
}
