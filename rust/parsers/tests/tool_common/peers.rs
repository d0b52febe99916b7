//! Fixtures from real model outputs as peers' parser tests record them (vLLM, SGLang, SMG,
//! llama.cpp, vllm-mlx, openai/harmony), each with its source. The expected result is smgpy's:
//! where a peer disagrees with a deliberate policy (the crate docs' table), the comment says so.
use super::{bad, c, t, Case};

const WEATHER_SCHEMA: &str = r#"{"type":"object","properties":{"city":{"type":"string"},"state":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}}}"#;

pub static CASES: &[Case] = &[
    // ======== class 2: an end marker inside a JSON string ends nothing ========
    // SMG crates/tool_parser/tests/tool_parser_cohere.rs::test_cohere_end_action_marker_inside_string_param
    c(
        "cohere_command3",
        r#"<|START_ACTION|>{"tool_name": "echo", "parameters": {"text": "say <|END_ACTION|> please"}}<|END_ACTION|>"#,
        "",
        &[(None, "echo", r#"{"text":"say <|END_ACTION|> please"}"#)],
    ),
    // SMG ::test_cohere_unclosed_string_does_not_false_terminate: the marker inside the open
    // string ends nothing; the output ends inside the call, which is partial (docs/parsers.md).
    c(
        "cohere_command4",
        r#"<|START_ACTION|>{"tool_name": "echo", "parameters": {"text": "say <|END_ACTION|> please}<|END_ACTION|>"#,
        "",
        &[(None, "echo", r#"{"text":"say <|END_ACTION|> please}<|END_ACTION|>"#)],
    ),
    // SMG tests/tool_parser_mixed_edge_cases.rs::test_format_markers_in_string_content
    c(
        "pythonic",
        r#"[echo(text="Use [TOOL_CALLS] and <tool_call> in text")]"#,
        "",
        &[(None, "echo", r#"{"text":"Use [TOOL_CALLS] and <tool_call> in text"}"#)],
    ),
    c(
        "hermes",
        r#"<tool_call>{"name": "log", "arguments": {"msg": "Found [function()] pattern"}}</tool_call>"#,
        "",
        &[(None, "log", r#"{"msg":"Found [function()] pattern"}"#)],
    ),
    // vLLM tests/tool_parsers/test_hermes_tool_parser.py output shape, with the end marker inside
    // an argument, as a model writing about its own format does (class 2).
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"doc.md\", \"text\": \"Close calls with </tool_call>.\"}}\n</tool_call>",
        "",
        &[(None, "write_file", r#"{"path":"doc.md","text":"Close calls with </tool_call>."}"#)],
    ),
    // vLLM tests/tool_parsers/test_kimi_k2_tool_parser.py output shape; the item and section end
    // markers inside an argument.
    c(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.note:0<|tool_call_argument_begin|>{"text": "ends with <|tool_call_end|><|tool_calls_section_end|>"}<|tool_call_end|><|tool_calls_section_end|>"#,
        "",
        &[(Some("functions.note:0"), "note", r#"{"text":"ends with <|tool_call_end|><|tool_calls_section_end|>"}"#)],
    ),
    // SMG tests/tool_parser_deepseek31.rs output shape, the end markers inside an argument.
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>note<｜tool▁sep｜>{"text": "a <｜tool▁call▁end｜><｜tool▁calls▁end｜> b"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "",
        &[(None, "note", r#"{"text":"a <｜tool▁call▁end｜><｜tool▁calls▁end｜> b"}"#)],
    ),
    // openai/harmony src/tests.rs output shape, `<|call|>` written inside an argument.
    c(
        "openai",
        r#"<|channel|>commentary to=functions.note <|constrain|>json<|message|>{"text": "a <|call|> b"}<|call|>"#,
        "",
        &[(None, "note", r#"{"text":"a <|call|> b"}"#)],
    ),
    // vllm-mlx tests/test_gemma4_tool_parser.py::test_braces_inside_string_value / ::test_string_with_colon
    c(
        "gemma4",
        r#"<|tool_call>call:run{code:<|"|>if (x) { return y; }<|"|>}<tool_call|>"#,
        "",
        &[(None, "run", r#"{"code":"if (x) { return y; }"}"#)],
    ),
    c(
        "gemma4",
        r#"<|tool_call>call:connect{url:<|"|>host:8080<|"|>}<tool_call|>"#,
        "",
        &[(None, "connect", r#"{"url":"host:8080"}"#)],
    ),
    // ======== class 3: one bad call does not swallow its siblings ========
    // SMG tests/tool_parser_deepseek.rs::test_deepseek_malformed_json_handling
    c(
        "deepseek_v3",
        "<｜tool▁calls▁begin｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>broken\n```json\n{invalid json}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>valid\n```json\n{\"key\": \"value\"}\n```<｜tool▁call▁end｜>\n<｜tool▁calls▁end｜>",
        "",
        &[(None, "valid", r#"{"key":"value"}"#)],
    ),
    // SMG tests/tool_parser_deepseek31.rs::test_deepseek31_complete_malformed_json
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{invalid json}<｜tool▁call▁end｜><｜tool▁call▁begin｜>translate<｜tool▁sep｜>{"text": "hello", "to": "ja"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "",
        &[(None, "translate", r#"{"text":"hello","to":"ja"}"#)],
    ),
    // SMG tests/tool_parser_deepseek_dsml.rs::test_deepseek32_complete_malformed_skips
    c(
        "deepseek_v32",
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"search\">not valid at all</｜DSML｜invoke>\n<｜DSML｜invoke name=\"translate\">\n<｜DSML｜parameter name=\"text\" string=\"true\">hello</｜DSML｜parameter>\n<｜DSML｜parameter name=\"to\" string=\"true\">ja</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "",
        &[(None, "translate", r#"{"text":"hello","to":"ja"}"#)],
    ),
    // SMG ::test_deepseek_dsml_streaming_malformed_empty_name_does_not_trap_buffer (V4 variant)
    c(
        "deepseek_v4",
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"\">junk</｜DSML｜invoke>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"query\" string=\"true\">foo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        "",
        &[(None, "search", r#"{"query":"foo"}"#)],
    ),
    // vLLM tests/tool_parsers/test_kimi_k2_tool_parser.py::test_invalid_funcall_id_skipped
    c(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.invalid.0<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_call_begin|>functions.valid:1<|tool_call_argument_begin|>{"city": "Shanghai"}<|tool_call_end|><|tool_calls_section_end|>"#,
        "",
        &[(Some("functions.valid:1"), "valid", r#"{"city":"Shanghai"}"#)],
    ),
    // vLLM ::test_invalid_json_still_extracted: vLLM keeps the broken call with its raw
    // arguments; smgpy keeps it as the partial call a stream sent (its arguments up to the
    // break) and keeps the good one.
    c(
        "kimi_k2",
        r#"Help. <|tool_calls_section_begin|><|tool_call_begin|>functions.bad:0<|tool_call_argument_begin|>{"city": "Beijing"<|tool_call_end|><|tool_call_begin|>functions.good:1<|tool_call_argument_begin|>{"city": "Shanghai"}<|tool_call_end|><|tool_calls_section_end|>"#,
        "Help. ",
        &[
            (Some("functions.bad:0"), "bad", r#"{"city":"Beijing""#),
            (Some("functions.good:1"), "good", r#"{"city":"Shanghai"}"#),
        ],
    ),
    // vLLM ::test_bare_counter_single_tool: an id without a name names the one declared tool.
    t(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|>"#,
        "",
        &[(Some("0"), "get_weather", r#"{"city":"Tokyo"}"#)],
        &[("get_weather", None)],
    ),
    // vLLM tests/tool_parsers/test_llama4_pythonic_tool_parser.py::test_bad_sibling_call_does_not_drop_good_calls
    c(
        "llama4_pythonic",
        "<|python_start|>[bad(x=b'z'), get_weather(city='LA', metric='C')]<|python_end|>",
        "",
        &[(None, "get_weather", r#"{"city":"LA","metric":"C"}"#)],
    ),
    // vLLM ::test_non_finite_argument_rejected
    c(
        "pythonic",
        "[calc(x=1e999), get_weather(city='LA', metric='C')]",
        "",
        &[(None, "get_weather", r#"{"city":"LA","metric":"C"}"#)],
    ),
    // vLLM ::test_mismatched_brackets: no call.
    bad("llama4_pythonic", "<|python_start|>[foo(x=1])]<|python_end|>"),
    // vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py::test_none_tool_calls_filtered
    t(
        "qwen3_coder",
        "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n",
        &[(None, "get_current_weather", r#"{"city":"Dallas","state":"TX"}"#)],
        &[("get_current_weather", Some(WEATHER_SCHEMA)), ("bad_func_no_gt", None)],
    ),
    // ======== class 4: where models put calls ========
    // SMG tests/tool_parser_pythonic.rs::test_pythonic_real_world_llama4 (a list after prose)
    c(
        "pythonic",
        "I'll help you with multiple tasks. Let me search for information and perform calculations.\n\n[web_search(query=\"latest Rust features\", max_results=3, safe_search=True),\n calculate(expression=\"42 * 3.14159\", precision=2),\n get_weather(city=\"San Francisco\", units=\"fahrenheit\", include_forecast=False)]\n\nThese functions will provide the information you need.",
        "I'll help you with multiple tasks. Let me search for information and perform calculations.\n\n\n\nThese functions will provide the information you need.",
        &[
            (None, "web_search", r#"{"query":"latest Rust features","max_results":3,"safe_search":true}"#),
            (None, "calculate", r#"{"expression":"42 * 3.14159","precision":2}"#),
            (None, "get_weather", r#"{"city":"San Francisco","units":"fahrenheit","include_forecast":false}"#),
        ],
    ),
    // SGLang test/srt/test_function_call_parser.py TestPythonicDetector::test_parse_streaming_complete_tool_call
    c(
        "pythonic",
        "Here's a tool call: [get_weather(location='New York', unit='celsius')]",
        "Here's a tool call: ",
        &[(None, "get_weather", r#"{"location":"New York","unit":"celsius"}"#)],
    ),
    // SGLang ::test_parse_streaming_multiple_tool_calls
    c(
        "pythonic",
        "[get_weather(location='Berlin')] and [search(query='restaurants')]",
        " and ",
        &[(None, "get_weather", r#"{"location":"Berlin"}"#), (None, "search", r#"{"query":"restaurants"}"#)],
    ),
    // SGLang ::test_parse_streaming_text_after_tool_call
    c(
        "pythonic",
        "[get_weather(location='Tokyo')] Here's the forecast:",
        " Here's the forecast:",
        &[(None, "get_weather", r#"{"location":"Tokyo"}"#)],
    ),
    // SGLang ::test_detect_and_parse_with_python_start_and_end_token
    c(
        "pythonic",
        "User wants to get the weather in Mars. <|python_start|>[get_weather(location='Mars', unit='celsius')]<|python_end|> In this way we will get the weather in Mars.",
        "User wants to get the weather in Mars.  In this way we will get the weather in Mars.",
        &[(None, "get_weather", r#"{"location":"Mars","unit":"celsius"}"#)],
    ),
    // vLLM test_llama4_pythonic_tool_parser.py: `<|python_start|>` without `<|python_end|>`.
    c(
        "llama4_pythonic",
        "<|python_start|>[get_weather(city='LA', metric='C'), register_user(name='Doe', age=9)]",
        "",
        &[(None, "get_weather", r#"{"city":"LA","metric":"C"}"#), (None, "register_user", r#"{"name":"Doe","age":9}"#)],
    ),
    // Prose brackets are text, not held as calls (vLLM: "How can I help you today?").
    c("pythonic", "See [1] and [the docs](http://x) [a, b].", "See [1] and [the docs](http://x) [a, b].", &[]),
    // llama.cpp tests/test-chat.cpp LLAMA_3_X (Llama 3.1 custom-tool form and built-in tools)
    c(
        "llama3_json",
        "<function=special_function>{\"arg1\": 1}</function>",
        "",
        &[(None, "special_function", r#"{"arg1":1}"#)],
    ),
    c(
        "llama3_json",
        "<|python_tag|>python.call(code=\"print('hey')\")",
        "",
        &[(None, "python", r#"{"code":"print('hey')"}"#)],
    ),
    c(
        "llama3_json",
        "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
        "",
        &[(None, "code_interpreter", r#"{"code":"print('hey')"}"#)],
    ),
    // llama.cpp HERMES_2_PRO: `<function=NAME>{json}</function>` lines.
    c(
        "hermes",
        "<function=special_function>{\"arg1\": 1}</function>\n<function=python>{\"code\":\"print('hello')\"}</function>",
        "",
        &[(None, "special_function", r#"{"arg1":1}"#), (None, "python", r#"{"code":"print('hello')"}"#)],
    ),
    // vLLM tests/tool_parsers/test_gemma4_regex_and_bare_calls.py: fallbacks Gemma 4 writes.
    c(
        "gemma4",
        "<|channel>thought\nI need to read the entry source file to inspect the crash point.\n<channel|>call:bash{command:<|\"|>cat /work/src/entry.c<|\"|>}",
        "<|channel>thought\nI need to read the entry source file to inspect the crash point.\n<channel|>",
        &[(None, "bash", r#"{"command":"cat /work/src/entry.c"}"#)],
    ),
    c(
        "gemma4",
        "some prose\ncall:bash{command:<|\"|>make -j8<|\"|>}",
        "some prose\n",
        &[(None, "bash", r#"{"command":"make -j8"}"#)],
    ),
    c("gemma4", "<|tool_call>:call:bash{command:<|\"|>pytest<|\"|>}", "", &[(None, "bash", r#"{"command":"pytest"}"#)]),
    c("gemma4", "<call>get_weather{city:<|\"|>Paris<|\"|>}", "", &[(None, "get_weather", r#"{"city":"Paris"}"#)]),
    c(
        "gemma4",
        "<|tool_call>call:gdb{args:<|\"|>-batch -ex run /tmp/poc<|\"|>}<turn|>",
        "",
        &[(None, "gdb", r#"{"args":"-batch -ex run /tmp/poc"}"#)],
    ),
    c(
        "gemma4",
        "call:web-search{query:<|\"|>gemma 4 release<|\"|>}",
        "",
        &[(None, "web-search", r#"{"query":"gemma 4 release"}"#)],
    ),
    c(
        "gemma4",
        "call:fs.read_file{path:<|\"|>/work/Makefile<|\"|>}",
        "",
        &[(None, "fs.read_file", r#"{"path":"/work/Makefile"}"#)],
    ),
    c("gemma4", "Just some reasoning text with no call in it.", "Just some reasoning text with no call in it.", &[]),
    // vllm-mlx tests/test_gemma4_tool_parser.py: several calls in one block, quoted keys, no end
    // delimiter.
    c(
        "gemma4",
        "<|tool_call>call:glob{pattern:<|\"|>README*.md<|\"|>}call:glob{pattern:<|\"|>CONTRIBUTING.md<|\"|>}<tool_call|>",
        "",
        &[(None, "glob", r#"{"pattern":"README*.md"}"#), (None, "glob", r#"{"pattern":"CONTRIBUTING.md"}"#)],
    ),
    c(
        "gemma4",
        "<|tool_call>call:read{<|\"|>path<|\"|>:<|\"|>/tmp/foo<|\"|>}<tool_call|>",
        "",
        &[(None, "read", r#"{"path":"/tmp/foo"}"#)],
    ),
    c(
        "gemma4",
        "<|tool_call>call:read_file{path:<|\"|>/tmp/foo<|\"|>}",
        "",
        &[(None, "read_file", r#"{"path":"/tmp/foo"}"#)],
    ),
    // Gemma 3's documented function-calling reply (ai.google.dev Gemma function calling guide) and
    // the paren form Gemma 4 sometimes writes (vllm-mlx gemma4 parser fallbacks).
    c(
        "gemma4",
        "```tool_code\nget_weather(city=\"Paris\")\n```",
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    c(
        "pythonic",
        "Let me look.\n```tool_code\n[get_weather(city=\"Paris\", days=2)]\n```",
        "Let me look.\n",
        &[(None, "get_weather", r#"{"city":"Paris","days":2}"#)],
    ),
    c(
        "gemma4",
        "<|tool_call>call:get_weather(city=\"Paris\", days=2)<tool_call|>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris","days":2}"#)],
    ),
    // The paren form bare, with no end marker at all.
    c(
        "gemma4",
        "Checking now.\ncall:get_weather(city=\"Paris\")",
        "Checking now.\n",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    // SMG crates/tool_parser/tests/tool_parser_fallback.rs (JsonParser): a call object mid-text.
    c(
        "json",
        r#"The user typed: {"name": "example"} but this is just quoted text"#,
        "The user typed:  but this is just quoted text",
        &[(None, "example", "{}")],
    ),
    // ======== class 5: formats and aliases ========
    // vLLM tests/tool_parsers/test_deepseekv4_tool_parser.py::test_extract_tool_calls
    c(
        "deepseek_v4",
        "Let me check. <｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n<｜DSML｜parameter name=\"unit\" string=\"true\">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        "Let me check. ",
        &[(None, "get_weather", r#"{"location":"Beijing","unit":"celsius"}"#)],
    ),
    // The V3.2 fixture's values in V4's block (SGLang test_deepseekv32_detector.py runs its V4
    // detector on the same outputs).
    c(
        "deepseek_v4",
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"write_note\">\n<｜DSML｜parameter name=\"payload\" string=\"true\">Здравствуйте, мир! \"Это\" тест</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"n\": [1, 2]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        "",
        &[(None, "write_note", r#"{"payload":"Здравствуйте, мир! \"Это\" тест","opts":{"n":[1,2]}}"#)],
    ),
    // vLLM ::test_function_calls_block_is_not_accepted (and SMG: the V3.2 parser does not read V4's block).
    bad(
        "deepseekv4",
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    ),
    bad(
        "deepseek_v32",
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    ),
    // vLLM test_deepseekv32_tool_parser.py: a declared type beats the `string` mark.
    t(
        "deepseek_v32",
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"s\" string=\"false\">null</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "",
        &[(None, "f", r#"{"n":42,"s":"null"}"#)],
        &[("f", Some(r#"{"properties":{"n":{"type":"integer"},"s":{"type":"string"}}}"#))],
    ),
    // vLLM tests/tool_parsers/test_ernie45_moe_tool_parser.py::test_extract_tool_calls[tool_call_with_content_before]
    c(
        "ernie45",
        "I need to call two tools to handle these two issues separately.\n</think>\n\n<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"Beijing\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_unit\", \"arguments\": {\"location\": \"Guangzhou\", \"unit\": \"c\"}}\n</tool_call>\n",
        "I need to call two tools to handle these two issues separately.\n</think>\n\n",
        &[
            (None, "get_current_temperature", r#"{"location":"Beijing"}"#),
            (None, "get_temperature_unit", r#"{"location":"Guangzhou","unit":"c"}"#),
        ],
    ),
    // llama.cpp tests/test-chat.cpp FIREFUNCTION_V2 (the template writes a space before functools).
    c(
        "firefunction_v2",
        " functools[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]",
        "",
        &[(None, "special_function", r#"{"arg1":1}"#)],
    ),
    // CohereForAI/c4ai-command-r-plus tool-use template (model card): `Action:` and a fenced list.
    c(
        "command_r",
        "Plan: First I will search for the tallest penguin.\nAction: ```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n        \"parameters\": {\n            \"query\": \"biggest penguin in the world\"\n        }\n    }\n]\n```",
        "Plan: First I will search for the tallest penguin.\n",
        &[(None, "internet_search", r#"{"query":"biggest penguin in the world"}"#)],
    ),
    c(
        "command_r_plus",
        "Action: ```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n        \"parameters\": {\"query\": \"Zürich \\\"HB\\\"\", \"filters\": {\"lang\": [\"de\", \"en\"]}}\n    },\n    {\n        \"tool_name\": \"directly_answer\",\n        \"parameters\": {}\n    }\n]\n```",
        "",
        &[
            (None, "internet_search", r#"{"query":"Zürich \"HB\"","filters":{"lang":["de","en"]}}"#),
            (None, "directly_answer", "{}"),
        ],
    ),
    bad("command_r", "Action: ```json\n[{\"tool_name\": }]\n```"),
    // llama.cpp tests/test-chat.cpp LFM2_WITH_JSON_TOOLS
    c(
        "lfm2",
        "Let me check the weather for you.<|tool_call_start|>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}]<|tool_call_end|>Here's the result.",
        "Let me check the weather for you.Here's the result.",
        &[(None, "get_weather", r#"{"location":"Paris"}"#)],
    ),
    // llama.cpp COMMON_CHAT_FORMAT_GENERIC
    c(
        "generic",
        "{\"tool_call\": {\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}}",
        "",
        &[(None, "special_function", r#"{"arg1":1}"#)],
    ),
    c(
        "generic",
        "{\"tool_calls\": [{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}, \"id\": \"123456789\"}, {\"name\": \"search\", \"arguments\": {\"q\": \"東京 \\\"tower\\\"\", \"opts\": {\"n\": [1, 2]}}}, {\"name\": \"now\", \"arguments\": {}}]}",
        "",
        &[
            (Some("123456789"), "special_function", r#"{"arg1":1}"#),
            (None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#),
            (None, "now", "{}"),
        ],
    ),
    c("generic", "{\"response\": \"Hello, world!\\nWhat's up?\"}", "Hello, world!\nWhat's up?", &[]),
    c(
        "generic",
        "{\"tool_call\": {\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}}\nDone.",
        "\nDone.",
        &[(None, "special_function", r#"{"arg1":1}"#)],
    ),
    bad("generic", "{\"tool_call\": {\"name\": 1}}"),
    // ======== class 6: output cut off inside a call (docs/parsers.md, cut-off calls) ========
    // SMG tests/tool_parser_fallback.rs (missing closing tag, text after the call): SMG gives the
    // text back; the call is whole and a stream has sent it, so it stays, and the text after it
    // is text.
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"test\", \"arguments\": {}}\nThis text is missing the closing tag",
        "This text is missing the closing tag",
        &[(None, "test", "{}")],
    ),
    // SMG tests/tool_parser_edge_cases.rs::test_incomplete_json
    bad("json", "{\"name\": \"test\""),
    bad("json", "{\"name\": \"test\", \"arguments\":"),
    bad("json", "{\"name\": \"test\", \"arguments\": {"),
    // SMG tests/tool_parser_qwen_xml.rs::test_qwen_xml_incomplete_tool_call
    // (SMG: text; smgpy: the partial call a stream sent.)
    c(
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>Chicago</parameter>",
        "",
        &[(None, "get_weather", r#"{"city":"Chicago""#)],
    ),
    // SMG tool_parser_fallback.rs (mistral, missing `]`)
    bad("mistral", "[TOOL_CALLS] [{\"name\": \"test\", \"arguments\": {}"),
    // vLLM test_hermes_tool_parser.py::test_hermes_parser_non_streaming_tool_call_until_eos: the
    // arguments are complete, only the end marker is missing.
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}",
        "",
        &[(None, "final_answer", r#"{"trigger":true}"#)],
    ),
    // vLLM ::test_hermes_parser_non_streaming_tool_call_invalid_json: vLLM gives the text back;
    // the arguments closed (only the wrapper's `}` is missing) and a stream has sent the call.
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}",
        "",
        &[(None, "final_answer", r#"{"trigger":true}"#)],
    ),
    // ======== class 7: XML values as each model's reference parser reads them ========
    // vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py::test_extract_tool_calls (single_tool_with_content)
    t(
        "qwen3_coder",
        "Sure! Let me check the weather for you.<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
        "Sure! Let me check the weather for you.",
        &[(None, "get_current_weather", r#"{"city":"Dallas","state":"TX","unit":"fahrenheit"}"#)],
        &[("get_current_weather", Some(WEATHER_SCHEMA))],
    ),
    // vLLM ::test_extract_tool_calls_missing_closing_parameter_tag: the next parameter closes one.
    t(
        "qwen3_coder",
        "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
        "Let me check the weather for you:\n",
        &[(None, "get_current_weather", r#"{"city":"Dallas","state":"TX","unit":"fahrenheit"}"#)],
        &[("get_current_weather", Some(WEATHER_SCHEMA))],
    ),
    // SGLang test/registered/function_call/test_qwen3_coder_detector/test_cases.py::implicit_parameter_close
    t(
        "qwen3_coder",
        "<tool_call>\n<function=get_current_weather>\n<parameter=location>Paris\n<parameter=unit>celsius\n<parameter=days>3\n</function>\n</tool_call>",
        "",
        &[(None, "get_current_weather", r#"{"location":"Paris","unit":"celsius","days":3}"#)],
        &[(
            "get_current_weather",
            Some(r#"{"properties":{"location":{"type":"string"},"unit":{"type":"string"},"days":{"type":"integer"}}}"#),
        )],
    ),
    // vLLM ::test_extract_tool_calls_anyof_type_conversion: anyOf types convert too.
    t(
        "qwen3_coder",
        "<tool_call>\n<function=f>\n<parameter=a>\n5\n</parameter>\n<parameter=b>\nsome text\n</parameter>\n<parameter=c>\n[\"a\", \"b\"]\n</parameter>\n</function>\n</tool_call>",
        "",
        &[(None, "f", r#"{"a":5,"b":"some text","c":["a","b"]}"#)],
        &[(
            "f",
            Some(r#"{"properties":{"a":{"anyOf":[{"type":"integer"},{"type":"null"}]},"b":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},"c":{"anyOf":[{"type":"array"},{"type":"null"}]}}}"#),
        )],
    ),
    // A string-typed value stays text however it looks (SMG tool_parser_minimax_m2.rs issue #1743).
    t(
        "minimax_m2",
        "<minimax:tool_call>\n<invoke name=\"update_task\">\n<parameter name=\"taskId\">3</parameter>\n<parameter name=\"subject\">X</parameter>\n</invoke>\n</minimax:tool_call>",
        "",
        &[(None, "update_task", r#"{"taskId":"3","subject":"X"}"#)],
        &[("update_task", Some(r#"{"properties":{"taskId":{"type":"string"},"subject":{"type":"string"}}}"#))],
    ),
    // vLLM tests/tool_parsers/test_minimax_m2_tool_parser.py (no tools): undeclared values are text.
    c(
        "minimax_m2",
        "Let me check. <minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">Seattle</parameter><parameter name=\"days\">5</parameter></invoke></minimax:tool_call>",
        "Let me check. ",
        &[(None, "get_weather", r#"{"city":"Seattle","days":"5"}"#)],
    ),
    // vLLM test_minimax_m2_tool_parser.py: two invokes in one wrapper.
    c(
        "minimax_m2",
        "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Seattle</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"tz\">PST</parameter>\n</invoke>\n</minimax:tool_call>",
        "",
        &[(None, "get_weather", r#"{"city":"Seattle"}"#), (None, "get_time", r#"{"tz":"PST"}"#)],
    ),
    // MiniMax's reference parser strips a value's whitespace.
    t(
        "minimax_m2",
        "<minimax:tool_call>\n<invoke name=\"search\">\n<parameter name=\"query\">\n  rust async \n</parameter>\n</invoke>\n</minimax:tool_call>",
        "",
        &[(None, "search", r#"{"query":"rust async"}"#)],
        &[("search", Some(r#"{"properties":{"query":{"type":"string"}}}"#))],
    ),
    // llama.cpp tests/test-chat.cpp GLM_4_5: typed values, a quoted string kept.
    t(
        "glm45",
        "\n<tool_call>get_info\n<arg_key>name</arg_key>\n<arg_value>John Doe</arg_value>\n<arg_key>age</arg_key>\n<arg_value>30</arg_value>\n<arg_key>active</arg_key>\n<arg_value>true</arg_value>\n<arg_key>query</arg_key>\n<arg_value>\"From Zero\" Linkin Park album tracklist</arg_value>\n</tool_call>",
        "",
        &[(None, "get_info", r#"{"name":"John Doe","age":30,"active":true,"query":"\"From Zero\" Linkin Park album tracklist"}"#)],
        &[("get_info", Some(r#"{"properties":{"name":{"type":"string"},"age":{"type":"integer"},"active":{"type":"boolean"},"query":{"type":"string"}}}"#))],
    ),
    // ======== third pass (issue 34): calls that were there, end-of-turn markers, values ========
    // SGLang test_function_call_parser.py / TensorRT-LLM tool parser tests
    // (TestDeepSeekV3Parser, TestDeepSeekV31Parser::detect_and_parse_multiple_tools): a second
    // `<｜tool▁calls▁begin｜>` opened inside the first section.
    c(
        "deepseek_v3",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search_web\n```json\n{\"query\": \"AI\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "",
        &[(None, "get_weather", r#"{"location":"Paris"}"#), (None, "search_web", r#"{"query":"AI"}"#)],
    ),
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search_web<｜tool▁sep｜>{"query": "AI"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "",
        &[(None, "get_weather", r#"{"location":"Paris"}"#), (None, "search_web", r#"{"query":"AI"}"#)],
    ),
    // Two separate sections with text between them.
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>then<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>b<｜tool▁sep｜>{"x": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "then",
        &[(None, "a", "{}"), (None, "b", r#"{"x":1}"#)],
    ),
    // The same tests' malformed cases: Python-dict arguments are no call.
    bad(
        "deepseek_v3",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{'location': 'Paris'}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
    // TensorRT-LLM TestQwen3CoderToolParser::detect_and_parse_malformed_tool (SGLang's Qwen3-Coder
    // detector needs `<tool_call>`): a misspelled wrapper is not a call.
    bad(
        "qwen3_coder",
        "<too_call>\n<function=get_weather>\n<parameter=location>San Francisco, CA</parameter>\n</function>\n</tool_call>",
    ),
    // Llama 3.1 model card / vLLM llama3_json: `<|python_tag|>` JSON, then prose (the
    // `<|eom_id|>` cut as a stop token).
    c(
        "llama3_json",
        r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}} I will report back."#,
        "I will report back.",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    // SGLang test_glm4_moe_detector (complete call without `</tool_call>` at the end of output).
    c(
        "glm45",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n",
        "",
        &[(None, "get_weather", r#"{"city":"Beijing","date":"2024-06-27"}"#)],
    ),
    c(
        "glm47",
        "Checking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value>",
        "Checking.",
        &[(None, "get_weather", r#"{"city":"Beijing"}"#)],
    ),
    // vLLM cohere_command tests: two action objects without the comma between them, and one
    // malformed sibling beside a well-formed one (the well-formed one is kept).
    c(
        "cohere",
        "<|START_ACTION|>[\n{\"tool_name\": \"a\", \"parameters\": {\"x\": 1}}\n{\"tool_name\": \"b\", \"parameters\": {}}\n]<|END_ACTION|>",
        "",
        &[(None, "a", r#"{"x":1}"#), (None, "b", "{}")],
    ),
    c(
        "cohere",
        r#"<|START_ACTION|>[{"tool_name": "a", "parameters": {}}, {"tool_name": "b", "parameters": {]<|END_ACTION|>"#,
        "",
        &[(None, "a", "{}")],
    ),
    // Cohere's end-of-turn and text framing never reach content (vLLM decodes Command models'
    // output with special tokens kept).
    c(
        "cohere",
        "<|START_TEXT|>Hello there.<|END_TEXT|><|END_OF_TURN_TOKEN|>",
        "Hello there.",
        &[],
    ),
    // vLLM gemma4 tests: the call's closing `<tool_call|>` and the `<|tool_response>` the model
    // opens after its calls are framing.
    c(
        "gemma4",
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    c("gemma4", "Done.<tool_call|><turn|>", "Done.", &[]),
    // DeepSeek V3.2 encoding (`encoding_dsv32.py`): `string="false"` values are JSON, so a JSON
    // string literal is the string itself, for a `string`-typed parameter too.
    t(
        "deepseek_v32",
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"unit\" string=\"false\">\"celsius\"</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "",
        &[(None, "get_weather", r#"{"unit":"celsius","days":3}"#)],
        &[("get_weather", Some(r#"{"properties":{"unit":{"type":"string"},"days":{"type":"integer"}}}"#))],
    ),
    // Hermes / Qwen parallel calls separated by a newline: the newline is not content.
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n",
        "",
        &[(None, "a", "{}"), (None, "b", "{}")],
    ),
];
