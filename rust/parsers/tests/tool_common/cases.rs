//! Fixtures: real-looking outputs of every format (written for these tests).
use super::{bad, c, Case};

pub static CASES: &[Case] = &[
    // ---- hermes ----
    c(
        "hermes",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris","unit":"c"}"#)],
    ),
    c(
        "qwen25",
        "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": null}]}}\n</tool_call>",
        // The newline between the calls is not content (docs/parsers.md, text around calls).
        "Let me check.\n",
        &[(None, "a", "{}"), (None, "b", r#"{"x":[1,{"y":null}]}"#)],
    ),
    c(
        "qwen",
        r#"<tool_call>{"name": "say", "arguments": {"t": "héllo \"w\" \u00e9 ｜▁ \n"}}</tool_call> done"#,
        " done",
        &[(None, "say", r#"{"t":"héllo \"w\" é ｜▁ \n"}"#)],
    ),
    c("hermes", r#"<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>"#, "", &[(None, "f", r#"{"a":1}"#)]),
    // Output cut off inside the arguments (max_tokens): a partial call, its arguments as far as
    // they are certain, as a stream sent them (docs/parsers.md, cut-off calls; `Abandoned`).
    c("hermes", r#"<tool_call>{"name": "f", "arguments": {"a": 1"#, "", &[(None, "f", r#"{"a":"#)]),
    bad("hermes", "Use <tool_call> tags like <tool_call>this</tool_call>."),
    Case {
        format: "hermes",
        input: r#"<tool_call>{"name": "undeclared", "arguments": {}}</tool_call>"#,
        text: r#"<tool_call>{"name": "undeclared", "arguments": {}}</tool_call>"#,
        calls: &[],
        tools: Some(&[("declared", None)]),
    },
    // ---- json ----
    c("json", r#"{"name": "f", "arguments": {"a": 1}}"#, "", &[(None, "f", r#"{"a":1}"#)]),
    c(
        "json",
        r#" [{"name": "f", "parameters": {}}, {"name": "g", "arguments": "{\"k\": \"v\"}"}]"#,
        "",
        &[(None, "f", "{}"), (None, "g", r#"{"k":"v"}"#)],
    ),
    // A call object after text (SMG's JSON parser finds it anywhere); other JSON stays text.
    c("json", r#"Sure: {"name": "f"}"#, "Sure: ", &[(None, "f", "{}")]),
    c("json", r#"Sure: {"a": "f"} {"name"x"#, r#"Sure: {"a": "f"} {"name"x"#, &[]),
    c("json", r#"{"name": "f", "arguments": {"a": "#, "", &[(None, "f", r#"{"a":"#)]),
    bad("json", r#"  {"a": 1} and more"#),
    c(
        "json",
        r#"{"name": "search", "arguments": {"q": "caf\u00e9 \"naïve\" 😀", "filters": {"lang": ["fr", "en"], "safe": true}}}"#,
        "",
        &[(None, "search", r#"{"q":"café \"naïve\" 😀","filters":{"lang":["fr","en"],"safe":true}}"#)],
    ),
    c(
        "json",
        "[{\"name\": \"a\", \"arguments\": {}}]\nDone.",
        "\nDone.",
        &[(None, "a", "{}")],
    ),
    // ---- llama3_json ----
    c(
        "llama3_json",
        r#"<|python_tag|>{"name": "get", "parameters": {"q": "x"}}<|eom_id|>"#,
        "",
        &[(None, "get", r#"{"q":"x"}"#)],
    ),
    c(
        "llama",
        r#"{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"n": 1.5}}"#,
        "",
        &[(None, "a", "{}"), (None, "b", r#"{"n":1.5}"#)],
    ),
    c("llama3_json", r#"Hello {"x"}<|eot_id|>"#, r#"Hello {"x"}"#, &[]),
    bad("llama3_json", r#"<|python_tag|>{"name": "a", "para"#),
    c(
        "llama3_json",
        r#"Let me look that up.<|python_tag|>{"name": "search", "parameters": {"q": "Zürich \"old town\"", "opts": {"n": [1, 2], "x": null}}}<|eom_id|>"#,
        "Let me look that up.",
        &[(None, "search", r#"{"q":"Zürich \"old town\"","opts":{"n":[1,2],"x":null}}"#)],
    ),
    // ---- pythonic ----
    c(
        "pythonic",
        r#"[get_weather(city="San Francisco", days=3), get_time(tz='UTC')]"#,
        "",
        &[(None, "get_weather", r#"{"city":"San Francisco","days":3}"#), (None, "get_time", r#"{"tz":"UTC"}"#)],
    ),
    c(
        "llama4_pythonic",
        r#"<|python_start|>[f(a=True, b=None, c=[1, 2], d={"k": "v"})]<|python_end|>"#,
        "",
        &[(None, "f", r#"{"a":true,"b":null,"c":[1,2],"d":{"k":"v"}}"#)],
    ),
    c("pythonic", r#"[say(text="日本語 \"q\"")]"#, "", &[(None, "say", r#"{"text":"日本語 \"q\""}"#)]),
    bad("pythonic", "[1, 2, 3] is a list"),
    bad("pythonic", "[f(x=1"),
    c(
        "pythonic",
        r#"I'll check both.<|python_start|>[get_weather(city="Paris"), get_time()]<|python_end|>"#,
        "I'll check both.",
        &[(None, "get_weather", r#"{"city":"Paris"}"#), (None, "get_time", "{}")],
    ),
    // SGLang's name for the pythonic Llama 4 parser.
    c(
        "llama4",
        r#"[get_weather(city="São Paulo", opts={"units": ["c"], "alerts": False})]"#,
        "",
        &[(None, "get_weather", r#"{"city":"São Paulo","opts":{"units":["c"],"alerts":false}}"#)],
    ),
    // ---- lfm2 ----
    c("lfm2", "<|tool_call_start|>[f(x=1)]<|tool_call_end|>Done.", "Done.", &[(None, "f", r#"{"x":1}"#)]),
    c("lfm2", "<|tool_call_start|>[get_time()]<|tool_call_end|>", "", &[(None, "get_time", "{}")]),
    bad("lfm2", "<|tool_call_start|>[f(x=]<|tool_call_end|>"),
    c(
        "lfm2",
        r#"Checking.<|tool_call_start|>[get_weather(city="Zürich \"HB\"", opts={"units": ["c"], "alerts": True}), get_time()]<|tool_call_end|>The results follow."#,
        "Checking.The results follow.",
        &[(None, "get_weather", r#"{"city":"Zürich \"HB\"","opts":{"units":["c"],"alerts":true}}"#), (None, "get_time", "{}")],
    ),
    // ---- olmo3 ----
    c(
        "olmo3",
        "<function_calls>\nf(a=1)\ng(b=\"x\", c=null)\n</function_calls>",
        "",
        &[(None, "f", r#"{"a":1}"#), (None, "g", r#"{"b":"x","c":null}"#)],
    ),
    c(
        "olmo3",
        "<function_calls>\nget_weather(city=\"Paris\")\n</function_calls>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    bad("olmo3", "<function_calls>\nnot python\n</function_calls>"),
    c(
        "olmo3",
        "Let me do both.\n<function_calls>\nsearch(q=\"naïve \\\"quoted\\\"\", opts={\"k\": [1, 2]})\nnow()\n</function_calls>",
        "Let me do both.\n",
        &[(None, "search", r#"{"q":"naïve \"quoted\"","opts":{"k":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- mistral ----
    c(
        "mistral",
        r#"[TOOL_CALLS][{"name": "get", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}]"#,
        "",
        &[(Some("a1B2c3D4e"), "get", r#"{"city":"Paris"}"#)],
    ),
    c(
        "mistral",
        r#"[TOOL_CALLS] [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]"#,
        "",
        &[(None, "a", "{}"), (None, "b", r#"{"x":1}"#)],
    ),
    c(
        "mistral",
        r#"[TOOL_CALLS]get[ARGS]{"city": "Paris [FR]"}[TOOL_CALLS]time[ARGS]{}"#,
        "",
        &[(None, "get", r#"{"city":"Paris [FR]"}"#), (None, "time", "{}")],
    ),
    c(
        "mistral",
        r#"[TOOL_CALLS]get[CALL_ID]a1B2c3D4e[ARGS]{"q": "x"}"#,
        "",
        &[(Some("a1B2c3D4e"), "get", r#"{"q":"x"}"#)],
    ),
    c("mistral", r#"Sure.[TOOL_CALLS]get{"n": 1}</s>"#, "Sure.", &[(None, "get", r#"{"n":1}"#)]),
    c("mistral", r#"[TOOL_CALLS]get[ARGS]{"n": "#, "", &[(None, "get", r#"{"n":"#)]),
    c(
        "mistral",
        r#"[TOOL_CALLS]search[ARGS]{"q": "東京 \"tower\"", "filter": {"tags": ["a", "b"], "n": {"min": 1}}}"#,
        "",
        &[(None, "search", r#"{"q":"東京 \"tower\"","filter":{"tags":["a","b"],"n":{"min":1}}}"#)],
    ),
    bad("mistral", "[TOOL_CALLS]get[ARGS]{bad json}"),
    bad("mistral", r#"[TOOL_CALLS][{"name": 1, "arguments": {}}]"#),
    // ---- deepseek_v3 ----
    c(
        "deepseek_v3",
        "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        "Let me check.",
        &[(None, "get_weather", r#"{"city":"Paris"}"#), (None, "get_time", "{}")],
    ),
    // Arguments that break before their object closes: a partial call, as a stream sent it.
    c(
        "deepseek",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": \n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "",
        &[(None, "f", r#"{"a":"#)],
    ),
    c(
        "deepseek_v3",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{\"q\": \"Zürich \\\"HB\\\"\", \"opts\": {\"n\": [1, 2]}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#)],
    ),
    bad("deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get\n```json\n{not json}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    // ---- deepseek_v31 ----
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{"a": "ü"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "",
        &[(None, "get", r#"{"a":"ü"}"#), (None, "f", "{}")],
    ),
    c(
        "deepseekv31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜>"#,
        "",
        &[(None, "get", r#"{"a":1}"#)],
    ),
    c(
        "deepseek_v31",
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{"a": "#,
        "",
        &[(None, "get", r#"{"a":"#)],
    ),
    c(
        "deepseek_v31",
        r#"Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{"q": {"terms": ["a", "b \"c\""], "n": 2}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#,
        "Sure.",
        &[(None, "search", r#"{"q":{"terms":["a","b \"c\""],"n":2}}"#)],
    ),
    bad("deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{oops}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    // ---- deepseek_v32 ----
    c(
        "deepseek_v32",
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "",
        &[(None, "get", r#"{"city":"Paris","days":3}"#)],
    ),
    c(
        "deepseek_v4",
        "ok<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">{\"x\": [1]}</｜DSML｜invoke>\n<｜DSML｜invoke name=\"b\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
        "ok",
        &[(None, "a", r#"{"x":[1]}"#), (None, "b", "{}")],
    ),
    bad("deepseek_v32", "<｜DSML｜function_calls>garbage</｜DSML｜function_calls>"),
    c(
        "deepseek_v32",
        "Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"q\" string=\"true\">Zürich \"HB\" & 東京</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"n\": [1, 2], \"safe\": true}</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "Checking.",
        &[(None, "search", r#"{"q":"Zürich \"HB\" & 東京","opts":{"n":[1,2],"safe":true}}"#), (None, "now", "{}")],
    ),
    // ---- kimi_k2 ----
    c(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"#,
        "",
        &[
            (Some("functions.get_weather:0"), "get_weather", r#"{"city":"Paris"}"#),
            (Some("functions.get_time:1"), "get_time", "{}"),
        ],
    ),
    c(
        "kimik2",
        r#"I'll search.<|tool_calls_section_begin|><|tool_call_begin|>search:2<|tool_call_argument_begin|>{"q": "a\"b"}<|tool_call_end|><|tool_calls_section_end|>Done"#,
        "I'll search.Done",
        &[(Some("search:2"), "search", r#"{"q":"a\"b"}"#)],
    ),
    bad(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.x:0<|tool_call_argument_begin|>{bad}<|tool_call_end|><|tool_calls_section_end|>"#,
    ),
    c(
        "kimi_k2",
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{"q": "東京 tower", "opts": {"n": [1, 2]}}<|tool_call_end|><|tool_calls_section_end|>"#,
        "",
        &[(Some("functions.search:0"), "search", r#"{"q":"東京 tower","opts":{"n":[1,2]}}"#)],
    ),
    // ---- kimi_k3 ----
    c(
        "kimi_k3",
        r#"<|open|>response<|sep|>Checking.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get" index="0"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key="n" type="integer"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"#,
        "Checking.",
        &[(None, "get", r#"{"city":"Paris","n":2}"#)],
    ),
    bad("kimi_k3", "<|open|>tools<|sep|>junk<|close|>tools<|sep|>"),
    c(
        "kimi_k3",
        r#"<|open|>tools<|sep|><|open|>call tool="search" index="0"<|sep|><|open|>argument key="q" type="string"<|sep|>Zürich "HB" 東京<|close|>argument<|sep|><|open|>argument key="opts" type="object"<|sep|>{"n": [1, 2]}<|close|>argument<|sep|><|close|>call<|sep|><|open|>call tool="now" index="1"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"#,
        "",
        &[(None, "search", r#"{"q":"Zürich \"HB\" 東京","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- qwen3_coder ----
    // Values are typed by the tool's schema, as Qwen's reference parser types them; without
    // one they stay text.
    Case {
        format: "qwen3_coder",
        input: "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        text: "",
        calls: &[(None, "get_weather", r#"{"city":"San Francisco","days":3}"#)],
        tools: Some(&[("get_weather", Some(r#"{"properties":{"city":{"type":"string"},"days":{"type":"integer"}}}"#))]),
    },
    c(
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "",
        &[(None, "get_weather", r#"{"city":"San Francisco","days":"3"}"#)],
    ),
    Case {
        format: "qwen3_coder",
        input: "<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=code>\nif a < b && c:\n    print(\"x\")\n</parameter>\n</function>\n</tool_call>",
        text: "",
        calls: &[(None, "f", r#"{"zip":"01234","code":"if a < b && c:\n    print(\"x\")"}"#)],
        tools: Some(&[("f", Some(r#"{"properties":{"zip":{"type":"string"},"code":{"type":"string"}}}"#))]),
    },
    Case {
        format: "qwen_xml",
        input: "Sure.\n<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=x>\n[1, 2]\n</parameter>\n</function>\n</tool_call>",
        text: "Sure.\n",
        calls: &[(None, "a", "{}"), (None, "b", r#"{"x":[1,2]}"#)],
        tools: Some(&[("a", None), ("b", Some(r#"{"properties":{"x":{"type":"array"}}}"#))]),
    },
    c("qwen3_coder", "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>", "", &[(None, "f", r#"{"a":"1"}"#)]),
    bad("qwen3_coder", "<tool_call>\nnot xml\n</tool_call>"),
    Case {
        format: "qwen3_coder",
        input: "<tool_call>\n<function=search>\n<parameter=q>\nZürich \"HB\" 東京\n</parameter>\n<parameter=opts>\n{\"n\": [1, 2], \"safe\": true}\n</parameter>\n</function>\n</tool_call>",
        text: "",
        calls: &[(None, "search", r#"{"q":"Zürich \"HB\" 東京","opts":{"n":[1,2],"safe":true}}"#)],
        tools: Some(&[("search", Some(r#"{"properties":{"q":{"type":"string"},"opts":{"type":"object"}}}"#))]),
    },
    // ---- seed_oss ----
    c(
        "seed_oss",
        "<seed:tool_call>\n<function=f>\n<parameter=a>\nx y\n</parameter>\n</function>\n</seed:tool_call>",
        "",
        &[(None, "f", r#"{"a":"x y"}"#)],
    ),
    bad("seed_oss", "<seed:tool_call>oops</seed:tool_call>"),
    // As the Seed-OSS template writes calls: values without the Qwen-XML newlines.
    Case {
        format: "seed_oss",
        input: "Let me check.\n<seed:tool_call>\n<function=search>\n<parameter=q>Zürich \"HB\"</parameter>\n<parameter=opts>{\"n\": [1, 2]}</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=now>\n</function>\n</seed:tool_call>",
        text: "Let me check.\n",
        calls: &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
        tools: Some(&[("search", Some(r#"{"properties":{"q":{"type":"string"},"opts":{"type":"object"}}}"#)), ("now", None)]),
    },
    c(
        "seed_oss",
        "Let me check.\n<seed:tool_call>\n<function=search>\n<parameter=q>Zürich \"HB\"</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=now>\n</function>\n</seed:tool_call>",
        "Let me check.\n",
        &[(None, "search", r#"{"q":"Zürich \"HB\""}"#), (None, "now", "{}")],
    ),
    // ---- glm45 ----
    c(
        "glm45",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
        "",
        &[(None, "get_weather", r#"{"city":"Beijing","days":2}"#)],
    ),
    c(
        "glm",
        "text<tool_call>noargs</tool_call>\n<tool_call>f\n<arg_key>o</arg_key>\n<arg_value>{\"a\": [1]}</arg_value>\n</tool_call>",
        "text",
        &[(None, "noargs", "{}"), (None, "f", r#"{"o":{"a":[1]}}"#)],
    ),
    bad("glm45", "<tool_call>bad name here\n<arg_key>x</arg_key></tool_call>"),
    c(
        "glm45",
        "<tool_call>search\n<arg_key>q</arg_key>\n<arg_value>Zürich \"HB\" 東京</arg_value>\n</tool_call>",
        "",
        &[(None, "search", r#"{"q":"Zürich \"HB\" 東京"}"#)],
    ),
    // ---- glm47 ----
    c(
        "glm47",
        "<tool_call>get<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>n</arg_key><arg_value>1</arg_value></tool_call>",
        "",
        &[(None, "get", r#"{"city":"Paris","n":1}"#)],
    ),
    bad("glm47", "<tool_call>get<arg_key>city</arg_key>Paris</tool_call>"),
    c(
        "glm47",
        r#"Checking both.<tool_call>search<arg_key>q</arg_key><arg_value>Zürich "HB"</arg_value><arg_key>opts</arg_key><arg_value>{"n": [1, 2]}</arg_value></tool_call><tool_call>now</tool_call>"#,
        "Checking both.",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- hy_v3 ----
    c(
        "hy_v3",
        "<tool_calls>\n<tool_call>get<tool_sep>\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n</tool_calls>",
        "",
        &[(None, "get", r#"{"city":"Paris"}"#)],
    ),
    bad("hy_v3", "<tool_calls>\nnope\n</tool_calls>"),
    c(
        "hy_v3",
        "Checking.\n<tool_calls>\n<tool_call>search<tool_sep>\n<arg_key>q</arg_key>\n<arg_value>Zürich \"HB\"</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"n\": [1, 2]}</arg_value>\n</tool_call>\n<tool_call>now<tool_sep>\n</tool_call>\n</tool_calls>",
        "Checking.\n",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- step3 ----
    c(
        "step3",
        r#"<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get"><steptml:parameter name="city">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"#,
        "",
        &[(None, "get", r#"{"city":"Paris"}"#)],
    ),
    bad("step3", "<｜tool_calls_begin｜><｜tool_call_begin｜>junk<｜tool_call_end｜><｜tool_calls_end｜>"),
    c(
        "step3",
        r#"Checking.<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="search"><steptml:parameter name="q">Zürich "HB"</steptml:parameter><steptml:parameter name="opts">{"n": [1, 2]}</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="now"></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"#,
        "Checking.",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- minimax_m2 ----
    Case {
        format: "minimax_m2",
        input: "Let me.\n<minimax:tool_call>\n<invoke name=\"get\">\n<parameter name=\"city\">Paris &amp; Co</parameter>\n<parameter name=\"n\">3</parameter>\n</invoke>\n<invoke name=\"time\">\n</invoke>\n</minimax:tool_call>",
        text: "Let me.\n",
        calls: &[(None, "get", r#"{"city":"Paris & Co","n":3}"#), (None, "time", "{}")],
        tools: Some(&[("get", Some(r#"{"properties":{"city":{"type":"string"},"n":{"type":"integer"}}}"#)), ("time", None)]),
    },
    c(
        "minimax_m2",
        "Let me.\n<minimax:tool_call>\n<invoke name=\"get\">\n<parameter name=\"city\">Paris &amp; Co</parameter>\n<parameter name=\"n\">3</parameter>\n</invoke>\n<invoke name=\"time\">\n</invoke>\n</minimax:tool_call>",
        "Let me.\n",
        &[(None, "get", r#"{"city":"Paris & Co","n":"3"}"#), (None, "time", "{}")],
    ),
    bad("minimax_m2", "<minimax:tool_call>\n<invoke nam=\"x\">\n</invoke>\n</minimax:tool_call>"),
    Case {
        format: "minimax_m2",
        input: "<minimax:tool_call>\n<invoke name=\"search\">\n<parameter name=\"q\">東京 \"tower\"</parameter>\n<parameter name=\"opts\">{\"n\": [1, 2]}</parameter>\n</invoke>\n</minimax:tool_call>",
        text: "",
        calls: &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#)],
        tools: Some(&[("search", Some(r#"{"properties":{"q":{"type":"string"},"opts":{"type":"object"}}}"#))]),
    },
    // ---- minimax (M1) ----
    c(
        "minimax",
        "<tool_calls>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n{\"name\": \"b\", \"arguments\": {}}\n</tool_calls>",
        "",
        &[(None, "a", r#"{"x":1}"#), (None, "b", "{}")],
    ),
    bad("minimax", "<tool_calls>\n{\"name\": \n</tool_calls>"),
    c(
        "minimax",
        "I'll search.\n<tool_calls>\n{\"name\": \"search\", \"arguments\": {\"q\": \"Zürich \\\"HB\\\"\", \"opts\": {\"n\": [1, 2]}}}\n</tool_calls>",
        "I'll search.\n",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#)],
    ),
    // ---- openai (harmony) ----
    // Analysis text is no normal text, with or without a reasoning parser before the tool parser
    // (vLLM and vllm-mlx drop it from the content).
    c(
        "openai",
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#)],
    ),
    c("openai", "<|channel|>final<|message|>Hello there!<|return|>", "Hello there!", &[]),
    // Harmony decoded with its special tokens skipped: no markers, so text (the crate's policy
    // on SGLang's gpt-oss text strategy).
    bad("openai", "commentary to=functions.get_weather json{\"city\": \"Paris\"}"),
    c(
        "gpt-oss",
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
        "",
        &[(None, "f", "{}")],
    ),
    c(
        "openai",
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": <|call|>",
        "",
        &[(None, "f", r#"{"a":"#)],
    ),
    // `<|call|>` is a stop token, so one call per turn is the rule; with the stop token off, the
    // calls follow one another as whole messages.
    c(
        "openai",
        r#"<|channel|>analysis<|message|>Need both.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|><|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"#,
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#), (None, "get_time", "{}")],
    ),
    c(
        "openai",
        r#"<|channel|>commentary to=functions.search <|constrain|>json<|message|>{"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}<|call|>"#,
        "",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#)],
    ),
    // Arguments that are not JSON are kept as written (vLLM tests/tool_parsers/
    // test_openai_tool_parser.py::test_extract_tool_calls_multiple_tools keeps `foo`; vllm-mlx
    // tests/test_harmony_parsers.py::test_malformed_json_arguments keeps `{invalid json here}`).
    c(
        "openai",
        "<|channel|>commentary to=functions.get <|constrain|>json<|message|>{not json}<|call|>",
        "",
        &[(None, "get", "{not json}")],
    ),
    // A commentary message with no recipient is a visible preamble.
    c(
        "openai",
        "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary to=functions.get <|constrain|>json<|message|>{}<|call|>",
        "Let me check.",
        &[(None, "get", "{}")],
    ),
    // ---- cohere ----
    c(
        "cohere_command3",
        "<|START_ACTION|>[\n{\"tool_call_id\": \"0\", \"tool_name\": \"search\", \"parameters\": {\"q\": \"x\"}},\n{\"tool_call_id\": \"1\", \"tool_name\": \"calc\", \"parameters\": {}}\n]<|END_ACTION|>",
        "",
        &[(Some("0"), "search", r#"{"q":"x"}"#), (Some("1"), "calc", "{}")],
    ),
    c("cohere", "<|START_RESPONSE|>Hi there<|END_RESPONSE|>", "Hi there", &[]),
    bad("cohere_command4", "<|START_ACTION|>[{\"tool_name\": }]<|END_ACTION|>"),
    c(
        "cohere",
        r#"I will look this up.<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": {"q": "Zürich \"HB\"", "opts": {"n": [1, 2]}}}]<|END_ACTION|>"#,
        "I will look this up.",
        &[(Some("0"), "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#)],
    ),
    // ---- granite ----
    c("granite", r#"<|tool_call|>[{"name": "f", "arguments": {"a": 1}}]"#, "", &[(None, "f", r#"{"a":1}"#)]),
    c("granite", r#"<tool_call>[{"name": "g", "arguments": {}}] done"#, " done", &[(None, "g", "{}")]),
    bad("granite", r#"<|tool_call|>[{"name": 1}]"#),
    c(
        "granite",
        "<|tool_call|>[\n    {\n        \"name\": \"search\",\n        \"arguments\": {\n            \"q\": \"Zürich \\\"HB\\\"\",\n            \"opts\": {\n                \"n\": [1, 2]\n            }\n        }\n    },\n    {\n        \"name\": \"now\",\n        \"arguments\": {}\n    }\n]",
        "",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // Granite 3.1 may close `<tool_call>[...]` with `</tool_call>`: the marker belongs to the call.
    c(
        "granite",
        r#"Sure.<tool_call>[{"name": "g", "arguments": {"q": "x"}}]</tool_call>"#,
        "Sure.",
        &[(None, "g", r#"{"q":"x"}"#)],
    ),
    c(
        "granite",
        "<tool_call>[{\"name\": \"g\", \"arguments\": {}}]\n</tool_call>\nDone.",
        "\nDone.",
        &[(None, "g", "{}")],
    ),
    // ---- granite-20b-fc ----
    c(
        "granite-20b-fc",
        r#"<function_call> {"name": "a", "arguments": {"x": 1}} <function_call> {"name": "b", "arguments": {}}"#,
        "",
        &[(None, "a", r#"{"x":1}"#), (None, "b", "{}")],
    ),
    c("granite-20b-fc", r#"<function_call> {"name": "a", "arguments": {"x": 1}}"#, "", &[(None, "a", r#"{"x":1}"#)]),
    bad("granite-20b-fc", r#"<function_call> {"name": "a""#),
    c(
        "granite-20b-fc",
        r#"I'll search. <function_call> {"name": "search", "arguments": {"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}}"#,
        "I'll search. ",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#)],
    ),
    // ---- gemma4 ----
    c(
        "gemma4",
        r#"<|tool_call>call:get_weather{city:<|"|>Paris, "FR"<|"|>,days:3,metric:true}<tool_call|><|tool_call>call:noop{}<tool_call|>"#,
        "",
        &[(None, "get_weather", r#"{"city":"Paris, \"FR\"","days":3,"metric":true}"#), (None, "noop", "{}")],
    ),
    bad("gemma4", r#"<|tool_call>call:get{city:<|"|>Paris}<tool_call|>"#),
    c(
        "gemma4",
        r#"Let me check.<|tool_call>call:search{q:<|"|>Zürich "HB" 東京<|"|>,opts:{n:[1,2],safe:true}}<tool_call|>"#,
        "Let me check.",
        &[(None, "search", r#"{"q":"Zürich \"HB\" 東京","opts":{"n":[1,2],"safe":true}}"#)],
    ),
    // ---- functiongemma ----
    c(
        "functiongemma",
        "<start_function_call>call:get{city:<escape>New York<escape>,n:[1,2]}<end_function_call>",
        "",
        &[(None, "get", r#"{"city":"New York","n":[1,2]}"#)],
    ),
    bad("functiongemma", "<start_function_call>nonsense<end_function_call>"),
    c(
        "functiongemma",
        r#"Sure.<start_function_call>call:search{q:<escape>東京 "tower"<escape>,opts:{n:[1,2]}}<end_function_call><start_function_call>call:now{}<end_function_call>"#,
        "Sure.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- <tool_calls> JSON families ----
    c("jamba", r#"<tool_calls>[{"name": "f", "arguments": {"k": "v"}}]</tool_calls>"#, "", &[(None, "f", r#"{"k":"v"}"#)]),
    bad("jamba", "<tool_calls>[{]</tool_calls>"),
    c("hunyuan_a13b", r#"ok<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>"#, "ok", &[(None, "f", "{}")]),
    bad("hunyuan_a13b", "<tool_calls>[1]</tool_calls>"),
    c("apriel", r#"<tool_calls>[{"name": "f", "arguments": {"n": -2e3}}]</tool_calls>"#, "", &[(None, "f", r#"{"n":-2000.0}"#)]),
    bad("apriel", "<tool_calls>nope</tool_calls>"),
    c(
        "jamba",
        "Sure.\n<tool_calls>[{\"name\": \"search\", \"arguments\": {\"q\": \"Zürich \\\"HB\\\"\", \"opts\": {\"n\": [1, 2]}}}, {\"name\": \"now\", \"arguments\": {}}]</tool_calls>",
        "Sure.\n",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    c(
        "hunyuan_a13b",
        r#"<tool_calls>[{"name": "search", "arguments": {"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}}, {"name": "now", "arguments": {}}]</tool_calls>"#,
        "",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // The Apriel template writes `arguments` as a JSON-encoded string.
    c(
        "apriel",
        concat!(
            "Checking.\n",
            r#"<tool_calls>[{"name": "search", "arguments": "{\"q\": \"Zürich \\\"HB\\\"\", \"opts\": {\"n\": [1, 2]}}"}, {"name": "now", "arguments": "{}"}]</tool_calls>"#
        ),
        "Checking.\n",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- nemotron ----
    c("nemotron_json", r#"<TOOLCALL>[{"name": "f", "arguments": {}}]</TOOLCALL>"#, "", &[(None, "f", "{}")]),
    bad("nemotron_json", "<TOOLCALL>[</TOOLCALL>"),
    c(
        "nemotron_json",
        r#"Sure.<TOOLCALL>[{"name": "search", "arguments": {"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}}, {"name": "now", "arguments": {}}]</TOOLCALL>"#,
        "Sure.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- phi4 ----
    c("phi4_mini_json", r#"functools[{"name": "f", "arguments": {"a": "b"}}]"#, "", &[(None, "f", r#"{"a":"b"}"#)]),
    bad("phi4_mini_json", r#"functools[{"name""#),
    c(
        "phi4_mini_json",
        r#"functools[{"name": "search", "arguments": {"q": "Zürich \"HB\"", "opts": {"n": [1, 2]}}}, {"name": "now", "arguments": {}}]"#,
        "",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    c(
        "phi4_mini_json",
        r#"Let me check. functools[{"name": "now", "arguments": {}}]"#,
        "Let me check. ",
        &[(None, "now", "{}")],
    ),
    // ---- internlm ----
    c(
        "internlm",
        "Sure<|action_start|><|plugin|>\n{\"name\": \"f\", \"parameters\": {\"x\": 2}}<|action_end|>",
        "Sure",
        &[(None, "f", r#"{"x":2}"#)],
    ),
    bad("internlm", "<|action_start|><|plugin|>\nno<|action_end|>"),
    c(
        "internlm",
        "<|action_start|><|plugin|>\n{\"name\": \"search\", \"parameters\": {\"q\": \"東京 \\\"tower\\\"\", \"opts\": {\"n\": [1, 2]}}}<|action_end|>",
        "",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#)],
    ),
    c(
        "internlm",
        "<|action_start|><|plugin|>\n{\"name\": \"now\", \"parameters\": {}}<|action_end|>",
        "",
        &[(None, "now", "{}")],
    ),
    // ---- apertus ----
    c(
        "apertus",
        r#"<|tools_prefix|>[{"get": {"city": "Paris"}}, {"time": {}}]<|tools_suffix|>"#,
        "",
        &[(None, "get", r#"{"city":"Paris"}"#), (None, "time", "{}")],
    ),
    bad("apertus", "<|tools_prefix|>[1]<|tools_suffix|>"),
    c(
        "apertus",
        r#"Let me look.<|tools_prefix|>[{"search": {"q": "Zürich \"HB\"", "opts": {"n": [1, 2]}}}]<|tools_suffix|>"#,
        "Let me look.",
        &[(None, "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#)],
    ),
    // ---- gigachat3 ----
    c("gigachat3", r#"<|function_call|>{"name": "f", "arguments": {"a": 1}}"#, "", &[(None, "f", r#"{"a":1}"#)]),
    c("gigachat3", "function call<|role_sep|>\n{\"name\": \"g\", \"arguments\": {}}", "", &[(None, "g", "{}")]),
    c("gigachat3", "Hi<|message_sep|>", "Hi", &[]),
    c(
        "gigachat3",
        r#"<|function_call|>{"name": "search", "arguments": {"q": "Москва \"центр\"", "opts": {"n": [1, 2]}}}"#,
        "",
        &[(None, "search", r#"{"q":"Москва \"центр\"","opts":{"n":[1,2]}}"#)],
    ),
    bad("gigachat3", r#"<|function_call|>{"name": "f", "arguments": }"#),
    c(
        "gigachat3",
        r#"Let me check.<|function_call|>{"name": "now", "arguments": {}}"#,
        "Let me check.",
        &[(None, "now", "{}")],
    ),
    // ---- longcat ----
    c("longcat", r#"<longcat_tool_call>{"name": "f", "arguments": {}}</longcat_tool_call>"#, "", &[(None, "f", "{}")]),
    bad("longcat", "<longcat_tool_call>{</longcat_tool_call>"),
    // LongCat Flash Lite / Thinking write the GLM grammar with `longcat_` tags; a newline between
    // a key and its value is formatting (vLLM's LongCat Flash Lite parser, a GLM-4 MoE subclass).
    c(
        "longcat",
        "<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n<longcat_arg_value>Paris</longcat_arg_value>\n<longcat_arg_key>days</longcat_arg_key>\n\n<longcat_arg_value>2</longcat_arg_value>\n</longcat_tool_call>",
        "",
        &[(None, "get_weather", r#"{"city":"Paris","days":2}"#)],
    ),
    c(
        "longcat",
        "Checking.<longcat_tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"東京 \\\"tower\\\"\", \"opts\": {\"n\": [1, 2]}}}</longcat_tool_call>\n<longcat_tool_call>{\"name\": \"now\", \"arguments\": {}}</longcat_tool_call>",
        "Checking.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // ---- solar_open ----
    c(
        "solar_open",
        r#"<|tool_call:begin|>abc123<|tool_call:name|>get<|tool_call:args|>{"q": 1}<|tool_call:end|>"#,
        "",
        &[(Some("abc123"), "get", r#"{"q":1}"#)],
    ),
    bad("solar_open", "<|tool_call:begin|>x<|tool_call:end|>"),
    c(
        "solar_open",
        r#"Checking.<|tool_call:begin|>c1<|tool_call:name|>search<|tool_call:args|>{"q": "Zürich \"HB\"", "opts": {"n": [1, 2]}}<|tool_call:end|><|tool_call:begin|>c2<|tool_call:name|>now<|tool_call:args|>{}<|tool_call:end|>"#,
        "Checking.",
        &[(Some("c1"), "search", r#"{"q":"Zürich \"HB\"","opts":{"n":[1,2]}}"#), (Some("c2"), "now", "{}")],
    ),
    // ---- xlam ----
    c("xlam", r#"[{"name": "f", "arguments": {"a": 1}}]"#, "", &[(None, "f", r#"{"a":1}"#)]),
    c("xlam", "Here:\n```json\n[{\"name\": \"g\", \"arguments\": {}}]\n```", "Here:\n", &[(None, "g", "{}")]),
    c("xlam", r#"[TOOL_CALLS][{"name": "h", "arguments": {}}]"#, "", &[(None, "h", "{}")]),
    c(
        "xlam",
        r#"[{"name": "search", "arguments": {"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}}, {"name": "now", "arguments": {}}]"#,
        "",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    // The array may follow reasoning the reasoning parser left in (`</think>` stays text).
    c(
        "xlam",
        "I need the weather.</think>\n[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]",
        "I need the weather.</think>\n",
        &[(None, "f", r#"{"a":1}"#)],
    ),
    c(
        "xlam",
        "Plan.</think>\n```json\n[{\"name\": \"g\", \"arguments\": {}}]\n```",
        "Plan.</think>\n",
        &[(None, "g", "{}")],
    ),
    c(
        "xlam",
        r#"<tool_call>[{"name": "h", "arguments": {"x": [1]}}]</tool_call>"#,
        "",
        &[(None, "h", r#"{"x":[1]}"#)],
    ),
    bad("xlam", r#"[{"name": f, "arguments": {}}]"#),
    bad("xlam", "Thinking.</think>\nThe answer is 4."),
    // ---- functionary ----
    c("functionary_v3_1", r#"<function=get>{"city": "Paris"}</function>"#, "", &[(None, "get", r#"{"city":"Paris"}"#)]),
    c("functionary", "<|python_tag|>print(1)\n<|eom_id|>", "", &[(None, "python", r#"{"code":"print(1)"}"#)]),
    bad("functionary_v3_1", "<function=get>{bad}</function>"),
    c(
        "functionary_v3_2",
        "get_weather\n{\"city\": \"Paris\"}>>>time\n{}",
        "",
        &[(None, "get_weather", r#"{"city":"Paris"}"#), (None, "time", "{}")],
    ),
    // The prompt ends in `>>>`; a call after text opens with its own `>>>`.
    c("functionary_v3_2", ">>>get_time\n{\"tz\": \"UTC\"}", "", &[(None, "get_time", r#"{"tz":"UTC"}"#)]),
    c("functionary_v3_2", "all\nHello there", "Hello there", &[]),
    bad("functionary_v3_2", "Hi there\nsecond line"),
    c(
        "functionary_v3_1",
        r#"Let me check.<function=search>{"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}</function><function=now>{}</function>"#,
        "Let me check.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
    c(
        "functionary_v3_2",
        "all\nLet me check.>>>search\n{\"q\": \"東京 \\\"tower\\\"\", \"opts\": {\"n\": [1, 2]}}",
        "Let me check.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#)],
    ),
    // ---- sarashina ----
    c("sarashina", "<|tool_calls|>[{'name': 'f', 'arguments': {'a': 'b'}}]", "", &[(None, "f", r#"{"a":"b"}"#)]),
    c("sarashina", "[{'name': 'g', 'arguments': {}}]", "", &[(None, "g", "{}")]),
    bad("sarashina", "[{'name': ]"),
    c(
        "sarashina",
        r#"Let me check.<|tool_calls|>[{'name': 'search', 'arguments': {'q': '東京 "tower"', 'opts': {'n': [1, 2], 'safe': True}}}, {'name': 'now', 'arguments': {}}]"#,
        "Let me check.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2],"safe":true}}"#), (None, "now", "{}")],
    ),
    // ---- inkling ----
    c(
        "inkling",
        r#"<|message_model|>get<|content_invoke_tool_json|>{"name": "get", "args": {"a": 1}}<|end_message|>"#,
        "",
        &[(None, "get", r#"{"a":1}"#)],
    ),
    bad("inkling", "<|message_model|>hello<|end_message|>"),
    c(
        "inkling",
        r#"Let me check.<|message_model|>search<|content_invoke_tool_json|>{"name": "search", "args": {"q": "東京 \"tower\"", "opts": {"n": [1, 2]}}}<|end_message|><|message_model|>now<|content_invoke_tool_json|>{"name": "now", "args": {}}<|end_message|>"#,
        "Let me check.",
        &[(None, "search", r#"{"q":"東京 \"tower\"","opts":{"n":[1,2]}}"#), (None, "now", "{}")],
    ),
];
