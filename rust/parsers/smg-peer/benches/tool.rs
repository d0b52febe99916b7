//! Tool-call parser throughput (MB/s): complete and streaming (~4-byte chunks) on one fixed,
//! realistic response per format, side by side with SMG's published `tool-parser` crate on every
//! format both implement. SMG's parsers are async; they run on a current-thread Tokio runtime,
//! one `block_on` per response, with parser instances created once and `reset()` per stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use smgpy_parsers::tool::{parse_complete, ToolFormat};
use std::hint::black_box;
use std::time::Duration;
use tool_common::{four_bytes, stream_count};
use tool_parser::ParserFactory;

#[path = "../../examples/tool_common/mod.rs"]
mod tool_common;

/// An argument value long enough that arguments dominate, as in real agent traffic.
const NOTE: &str = "The forecast should cover the next three days, including wind speed, humidity and the \
chance of rain in the afternoon; the user is planning a cycling trip along the river and wants to know \
whether to pack a rain jacket. Please also mention sunrise and sunset times and any weather warnings.";

/// One response in the given format: a short preamble and two calls (or the format's norm).
fn unit(format: ToolFormat) -> String {
    use ToolFormat as F;
    let a1 = format!(r#"{{"city": "Paris", "days": 3, "note": "{NOTE}"}}"#);
    let a2 = format!(r#"{{"query": "{NOTE}", "limit": 5, "filters": {{"lang": "en", "safe": true}}}}"#);
    let json_calls =
        format!(r#"[{{"name": "get_weather", "arguments": {a1}}}, {{"name": "search", "arguments": {a2}}}]"#);
    let pre = "Let me look that up for you.\n";
    match format {
        F::Hermes => format!(
            "{pre}<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {a1}}}\n</tool_call>\n<tool_call>\n{{\"name\": \"search\", \"arguments\": {a2}}}\n</tool_call>"
        ),
        F::Json | F::Xlam => json_calls,
        // SMG splits Llama calls at every `;`, even inside strings, so its corpus has none.
        F::Llama3Json => format!(
            "<|python_tag|>{{\"name\": \"get_weather\", \"parameters\": {a1}}}; {{\"name\": \"search\", \"parameters\": {a2}}}"
        )
        .replace("afternoon;", "afternoon,"),
        F::Pythonic => format!(
            "[get_weather(city=\"Paris\", days=3, note=\"{NOTE}\"), search(query=\"{NOTE}\", limit=5, filters={{\"lang\": \"en\", \"safe\": True}})]"
        ),
        F::Lfm2 => format!("<|tool_call_start|>[get_weather(city=\"Paris\", days=3, note=\"{NOTE}\")]<|tool_call_end|>"),
        F::Olmo3 => format!("<function_calls>\nget_weather(city=\"Paris\", days=3, note=\"{NOTE}\")\n</function_calls>"),
        F::Mistral => format!("[TOOL_CALLS] {json_calls}"),
        F::DeepSeekV3 => format!(
            "{pre}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{a1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{a2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        F::DeepSeekV31 => format!(
            "{pre}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{a1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{a2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        F::DeepSeekV4 => format!(
            "{pre}<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"note\" string=\"true\">{NOTE}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
        ),
        F::CommandR => format!("{pre}Action: ```json\n[{{\"tool_name\": \"get_weather\", \"parameters\": {a1}}}, {{\"tool_name\": \"search\", \"parameters\": {a2}}}]\n```"),
        F::Generic => format!("{{\"tool_calls\": {json_calls}}}"),
        F::DeepSeekV32 => format!(
            "{pre}<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"note\" string=\"true\">{NOTE}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        ),
        F::KimiK2 => format!(
            "{pre}<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{a1}<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{a2}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        F::KimiK3 => format!(
            "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"0\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key=\"note\" type=\"string\"<|sep|>{NOTE}<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
        ),
        F::Qwen3Coder | F::SeedOss => {
            let (o, c) = if format == F::SeedOss { ("<seed:tool_call>", "</seed:tool_call>") } else { ("<tool_call>", "</tool_call>") };
            format!(
                "{pre}{o}\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=note>\n{NOTE}\n</parameter>\n</function>\n{c}\n{o}\n<function=search>\n<parameter=query>\n{NOTE}\n</parameter>\n</function>\n{c}"
            )
        }
        F::Glm45 => format!(
            "{pre}<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>note</arg_key>\n<arg_value>{NOTE}</arg_value>\n</tool_call>\n<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>{NOTE}</arg_value>\n</tool_call>"
        ),
        F::Glm47 => format!(
            "{pre}<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>note</arg_key><arg_value>{NOTE}</arg_value></tool_call><tool_call>search<arg_key>query</arg_key><arg_value>{NOTE}</arg_value></tool_call>"
        ),
        F::HyV3 => format!(
            "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>note</arg_key>\n<arg_value>{NOTE}</arg_value>\n</tool_call>\n</tool_calls>"
        ),
        F::Step3 => format!(
            "{pre}<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">Paris</steptml:parameter><steptml:parameter name=\"note\">{NOTE}</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"
        ),
        F::MinimaxM2 => format!(
            "{pre}<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"note\">{NOTE}</parameter>\n</invoke>\n<invoke name=\"search\">\n<parameter name=\"query\">{NOTE}</parameter>\n</invoke>\n</minimax:tool_call>"
        ),
        F::MinimaxM1 => format!(
            "<tool_calls>\n{{\"name\": \"get_weather\", \"arguments\": {a1}}}\n{{\"name\": \"search\", \"arguments\": {a2}}}\n</tool_calls>"
        ),
        F::Harmony => format!(
            "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{a1}<|call|>"
        ),
        F::Cohere => format!(
            "<|START_ACTION|>[{{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {a1}}}, {{\"tool_call_id\": \"1\", \"tool_name\": \"search\", \"parameters\": {a2}}}]<|END_ACTION|>"
        ),
        F::Granite => format!("<|tool_call|>{json_calls}"),
        F::Granite20bFc => format!("<function_call> {{\"name\": \"get_weather\", \"arguments\": {a1}}}"),
        F::Gemma4 => format!(
            "<|tool_call>call:get_weather{{city:<|\"|>Paris<|\"|>,days:3,note:<|\"|>{NOTE}<|\"|>}}<tool_call|><|tool_call>call:search{{query:<|\"|>{NOTE}<|\"|>,limit:5}}<tool_call|>"
        ),
        F::FunctionGemma => format!(
            "<start_function_call>call:get_weather{{city:<escape>Paris<escape>,note:<escape>{NOTE}<escape>}}<end_function_call>"
        ),
        F::Jamba | F::HunyuanA13b | F::Apriel => format!("{pre}<tool_calls>{json_calls}</tool_calls>"),
        F::NemotronJson => format!("<TOOLCALL>{json_calls}</TOOLCALL>"),
        F::Phi4Mini => format!("functools{json_calls}"),
        F::InternLm => format!("{pre}<|action_start|><|plugin|>\n{{\"name\": \"get_weather\", \"parameters\": {a1}}}<|action_end|>"),
        F::Apertus => format!("<|tools_prefix|>[{{\"get_weather\": {a1}}}, {{\"search\": {a2}}}]<|tools_suffix|>"),
        F::GigaChat3 => format!("<|function_call|>{{\"name\": \"get_weather\", \"arguments\": {a1}}}"),
        F::LongCat => format!("<longcat_tool_call>{{\"name\": \"get_weather\", \"arguments\": {a1}}}</longcat_tool_call>"),
        F::SolarOpen => format!("<|tool_call:begin|>abc<|tool_call:name|>get_weather<|tool_call:args|>{a1}<|tool_call:end|>"),
        F::FunctionaryV31 => format!("<function=get_weather>{a1}</function><function=search>{a2}</function>"),
        F::FunctionaryV32 => format!("get_weather\n{a1}>>>search\n{a2}"),
        F::Sarashina => format!(
            "<|tool_calls|>[{{'name': 'get_weather', 'arguments': {{'city': 'Paris', 'note': '{NOTE}'}}}}]"
        ),
        F::Inkling => format!(
            "<|message_model|>get_weather<|content_invoke_tool_json|>{{\"name\": \"get_weather\", \"args\": {a1}}}<|end_message|>"
        ),
    }
}

/// SMG's registry name for the formats both crates implement.
fn smg_name(format: ToolFormat) -> Option<&'static str> {
    use ToolFormat as F;
    Some(match format {
        F::Hermes => "qwen",
        F::Json => "json",
        F::Llama3Json => "llama",
        F::Pythonic => "pythonic",
        F::Mistral => "mistral",
        F::DeepSeekV3 => "deepseek",
        F::DeepSeekV31 => "deepseek31",
        F::DeepSeekV32 => "deepseek32",
        F::KimiK2 => "kimik2",
        F::KimiK3 => "kimi_k3",
        F::Qwen3Coder => "qwen_xml",
        F::Glm45 => "glm45_moe",
        F::Glm47 => "glm47_moe",
        F::Step3 => "step3",
        F::MinimaxM2 => "minimax_m2",
        F::Cohere => "cohere",
        F::Gemma4 => "gemma4",
        F::Sarashina => "sarashina",
        F::Inkling => "inkling",
        _ => return None,
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let factory = ParserFactory::new();
    // Declared tools for SMG's streaming validation (same names as the corpus).
    let tools: Vec<_> = serde_json::from_value(serde_json::json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}, "note": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer"}, "filters": {"type": "object"}}}}}
    ]))
    .unwrap();
    for &format in ToolFormat::ALL {
        let text = unit(format);
        let pieces = four_bytes(&text);
        let ours = parse_complete(&text, format, None);
        assert!(!ours.calls.is_empty(), "corpus of {} has no calls", format.name());
        let mut group = c.benchmark_group(format!("tool/{}", format.name()));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(BenchmarkId::new("smgpy", "complete"), |b| {
            b.iter(|| parse_complete(black_box(&text), format, None))
        });
        group.bench_function(BenchmarkId::new("smgpy", "stream4"), |b| {
            b.iter(|| stream_count(format, black_box(&pieces)))
        });
        if let Some(name) = smg_name(format) {
            let parser = factory.registry().create_parser(name).unwrap();
            let (_, theirs) = rt.block_on(parser.parse_complete(&text)).unwrap();
            eprintln!(
                "{}: smgpy {} calls, smg {} calls",
                format.name(),
                ours.calls.len(),
                theirs.len()
            );
            group.bench_function(BenchmarkId::new("smg", "complete"), |b| {
                b.iter(|| rt.block_on(parser.parse_complete(black_box(&text))).unwrap())
            });
            let mut sp = factory.registry().create_parser(name).unwrap();
            group.bench_function(BenchmarkId::new("smg", "stream4"), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        sp.reset();
                        let mut n = 0;
                        for piece in &pieces {
                            if let Ok(r) = sp.parse_incremental(black_box(piece), &tools).await {
                                n += r.normal_text.len() + r.calls.len();
                            }
                        }
                        n += sp.get_unstreamed_tool_args().map_or(0, |v| v.len());
                        n + sp.take_unstreamed_normal_text().len()
                    })
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(900));
    targets = bench
}
criterion_main!(benches);
