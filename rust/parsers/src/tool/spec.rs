//! Declarative per-format specs: which markers open a tool region, how the region ends and how
//! its body is read. The streaming engine (`engine.rs`) is the same for every format.
use super::format::ToolFormat;
use super::probe as probes;
use std::sync::OnceLock;

/// How a tool region ends. The end marker is consumed with the region.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End {
    /// At the first of these markers, or at the end of output.
    Marker(&'static [&'static str]),
    /// When the first bracket group (`{`, `[` or `(`) closes, strings respected.
    Balanced,
    /// Like `Balanced`, but a closing marker right after the group (whitespace between allowed)
    /// belongs to the region: some models close a format that needs no closing marker
    /// (Granite 3.1 `<tool_call>[...]</tool_call>`).
    BalancedThen(&'static str),
    /// Like `Marker`, but only the first `.1` markers are consumed: the others end the region
    /// and stay, because they open what follows (a Harmony message without its `<|end|>` ends at
    /// the next header).
    MarkerKeep(&'static [&'static str], usize),
}

/// Whether text after a region's start marker opens the region: markers that are also ordinary
/// text (`[`, `call:`) are a region only when what follows reads like a call's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opens {
    Yes,
    No,
    /// Too little text to tell yet.
    Pending,
}

/// The grammar of a region's body.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Body {
    /// JSON values (objects or arrays of objects) with `name` and `arguments`/`parameters`/`args`.
    Json,
    /// `[{"NAME": {args}}, ...]`.
    NameKeyedJson,
    /// LongCat: a JSON call (LongCat Flash Chat, Hermes-like), or the GLM grammar with
    /// `longcat_`-prefixed tags (LongCat Flash Lite / Thinking: `NAME\n<longcat_arg_key>K
    /// </longcat_arg_key>\n<longcat_arg_value>V</longcat_arg_value>`, vLLM's LongCat parser
    /// for those models subclasses its GLM-4 MoE parser).
    LongCat,
    /// Qwen XML `<function=NAME><parameter=K>V</parameter></function>`; `bare` when the region
    /// started at `<function=` itself.
    QwenXml { bare: bool },
    /// GLM `NAME<arg_key>K</arg_key><arg_value>V</arg_value>...` (Hy3 adds `<tool_sep>`).
    Glm,
    /// `<{p}invoke name="N"><{p}parameter name="K">V</{p}parameter></{p}invoke>` blocks.
    Invoke { prefix: &'static str },
    /// A section made of `begin ITEM end` items, separated by whitespace. `again`, when not
    /// empty, is the section's own start marker written again between items, which is skipped:
    /// DeepSeek V3 / V3.1 models open a second section inside the first (SGLang's and
    /// TensorRT-LLM's DeepSeek tests, `detect_and_parse_multiple_tools`).
    Items {
        begin: &'static str,
        end: &'static str,
        item: &'static Body,
        again: &'static str,
    },
    /// DeepSeek `function<｜tool▁sep｜>NAME\n```json{..}```` or `NAME<｜tool▁sep｜>{..}`.
    DeepSeekItem,
    /// Kimi K2 `functions.NAME:IDX<|tool_call_argument_begin|>{json}`.
    KimiItem,
    /// Step-3 `function<｜tool_sep｜><steptml:invoke ...>`.
    Step3Item,
    /// Kimi K3 XTML calls.
    KimiK3,
    /// Mistral, all three forms.
    Mistral,
    /// Python calls `[f(a=1), g()]` or one per line.
    Pythonic,
    /// A Python literal list of `{'name': .., 'arguments': ..}` dicts.
    PythonDicts,
    /// Gemma `call:NAME{k:<delim>v<delim>,...}`.
    Gemma { delim: &'static str },
    /// gpt-oss Harmony message header up to `<|message|>` (see `crate::harmony`); `role` when the
    /// region opened at `<|start|>` (or mid-role, at the start of output).
    HarmonyHeader { role: bool },
    /// Llama 3.1 after `<|python_tag|>`: JSON calls, or a built-in tool's `NAME.call(k=v)`.
    Llama3Tag,
    /// LFM2: a Python call list, or a JSON list of calls (LFM2 with JSON tools).
    PythonicOrJson,
    /// llama.cpp's generic JSON envelope: `{"tool_call": {..}}`, `{"tool_calls": [..]}` or
    /// `{"response": "text"}`.
    Generic,
    /// Functionary v3.2 recipient line after `>>>`.
    FunctionaryHeader,
    /// Functionary v3.1 `NAME>{json}` after `<function=`.
    FunctionaryV31,
    /// Raw code after `<|python_tag|>`: a call to `python` with `{"code": ...}`.
    PythonCode,
    /// Solar Open `ID<|tool_call:name|>NAME<|tool_call:args|>{json}`.
    Solar,
    /// Inkling `NAME<|content_invoke_tool_json|>{json}`.
    Inkling,
}

/// A marker that opens a tool region.
#[derive(Debug)]
pub(crate) struct Region {
    pub start: &'static str,
    pub end: End,
    pub body: Body,
    /// Decides from the text after `start` whether the region opens; `None`: it always does.
    pub probe: Option<fn(&str) -> Opens>,
    /// The start marker is the body's first character (`[` of a Python list), not framing.
    pub in_body: bool,
}

/// A region that opens at the very start of output (after whitespace) with no marker.
#[derive(Debug)]
pub(crate) struct Leading {
    /// First characters that open it; empty means any.
    pub first: &'static str,
    /// Text it must start with (empty: any); the whitespace before it then belongs to the region.
    pub opens: &'static str,
    pub end: End,
    pub body: Body,
}

/// Everything the engine needs to know about a format.
#[derive(Debug)]
pub(crate) struct Spec {
    pub regions: &'static [Region],
    pub leading: Option<Leading>,
    /// Markers removed from normal text (end-of-turn tokens, answer wrappers).
    pub strip: &'static [&'static str],
    /// Tokens the bracket matcher steps over (`[ARGS]` is not a bracket).
    pub skip: &'static [&'static str],
    /// Markers after which the `leading` region may open again, as at the start of output. The
    /// marker stays in normal text: it ends reasoning the reasoning parser did not take out
    /// (xLAM writes its call array right after `</think>`).
    pub lead_after: &'static [&'static str],
}

const fn regions(regions: &'static [Region]) -> Spec {
    Spec {
        regions,
        leading: None,
        strip: &[],
        skip: &[],
        lead_after: &[],
    }
}

const fn tag(start: &'static str, end: &'static [&'static str], body: Body) -> Region {
    Region {
        start,
        end: End::Marker(end),
        body,
        probe: None,
        in_body: false,
    }
}

const fn open(start: &'static str, body: Body) -> Region {
    Region {
        start,
        end: End::Balanced,
        body,
        probe: None,
        in_body: false,
    }
}

/// A region that opens only where `probe` says so.
const fn probed(region: Region, probe: fn(&str) -> Opens) -> Region {
    Region {
        probe: Some(probe),
        ..region
    }
}

const fn leading(first: &'static str, end: End, body: Body) -> Leading {
    Leading {
        first,
        opens: "",
        end,
        body,
    }
}

const EOS_DEEPSEEK: &[&str] = &["<｜end▁of▁sentence｜>"];
const LLAMA_EOT: &[&str] = &["<|eom_id|>", "<|eot_id|>"];

/// Llama 3.1's custom-tool form and Functionary v3.1: `<function=NAME>{json}</function>`. Outside
/// Functionary the marker is also ordinary text, so it opens a region only before a JSON object.
const FUNCTION_JSON: Region = probed(
    tag("<function=", &["</function>"], Body::FunctionaryV31),
    probes::function_json,
);

static HERMES: Spec = regions(&[tag("<tool_call>", &["</tool_call>"], Body::Json), FUNCTION_JSON]);
/// OpenAI-style JSON: a call list or object at the start, and, as SMG's JSON parser reads it,
/// a call object anywhere in the text (`{` opens a region only before a `"name"` key).
static JSON: Spec = Spec {
    leading: Some(leading("{[", End::Balanced, Body::Json)),
    ..regions(&[Region {
        in_body: true,
        ..probed(open("{", Body::Json), probes::json_call_object)
    }])
};
static LLAMA3: Spec = Spec {
    leading: Some(leading("{", End::Marker(LLAMA_EOT), Body::Json)),
    strip: LLAMA_EOT,
    ..regions(&[tag("<|python_tag|>", LLAMA_EOT, Body::Llama3Tag), FUNCTION_JSON])
};
/// A Python call list anywhere in the text (Llama 4 writes `Let me check: [get_weather(...)]`):
/// `[` opens a region only where a call's head follows.
const PYTHON_LIST: Region = Region {
    in_body: true,
    ..probed(open("[", Body::Pythonic), probes::python_list)
};
/// Gemma 3 (and Gemma 4 out of habit) fence Python calls as ```` ```tool_code ````.
const TOOL_CODE: Region = tag("```tool_code", &["```"], Body::Pythonic);
static PYTHONIC: Spec = Spec {
    leading: Some(leading("[", End::Balanced, Body::Pythonic)),
    strip: &["<|eot|>", "<|eom|>"],
    ..regions(&[
        tag("<|python_start|>", &["<|python_end|>"], Body::Pythonic),
        PYTHON_LIST,
        TOOL_CODE,
    ])
};
static LFM2: Spec = regions(&[tag("<|tool_call_start|>", &["<|tool_call_end|>"], Body::PythonicOrJson)]);
static OLMO3: Spec = regions(&[tag("<function_calls>", &["</function_calls>"], Body::Pythonic)]);
static MISTRAL: Spec = Spec {
    skip: &["[ARGS]", "[CALL_ID]"],
    strip: &["</s>"],
    ..regions(&[open("[TOOL_CALLS]", Body::Mistral)])
};
const DEEPSEEK_ITEMS: Body = Body::Items {
    begin: "<｜tool▁call▁begin｜>",
    end: "<｜tool▁call▁end｜>",
    item: &Body::DeepSeekItem,
    again: "<｜tool▁calls▁begin｜>",
};
static DEEPSEEK: Spec = Spec {
    strip: EOS_DEEPSEEK,
    ..regions(&[tag("<｜tool▁calls▁begin｜>", &["<｜tool▁calls▁end｜>"], DEEPSEEK_ITEMS)])
};
const DSML: Body = Body::Invoke { prefix: "｜DSML｜" };
static DEEPSEEK_V32: Spec = Spec {
    strip: EOS_DEEPSEEK,
    ..regions(&[tag("<｜DSML｜function_calls>", &["</｜DSML｜function_calls>"], DSML)])
};
/// DeepSeek V4 names its block `tool_calls`; like vLLM and SMG, each of V3.2 and V4 reads only
/// its own block name.
static DEEPSEEK_V4: Spec = Spec {
    strip: EOS_DEEPSEEK,
    ..regions(&[tag("<｜DSML｜tool_calls>", &["</｜DSML｜tool_calls>"], DSML)])
};
static KIMI_K2: Spec = regions(&[
    tag(
        "<|tool_calls_section_begin|>",
        &["<|tool_calls_section_end|>"],
        Body::Items {
            begin: "<|tool_call_begin|>",
            end: "<|tool_call_end|>",
            item: &Body::KimiItem,
            again: "",
        },
    ),
    tag(
        "<|tool_call_section_begin|>",
        &["<|tool_call_section_end|>", "<|tool_calls_section_end|>"],
        Body::Items {
            begin: "<|tool_call_begin|>",
            end: "<|tool_call_end|>",
            item: &Body::KimiItem,
            again: "",
        },
    ),
    tag("<|tool_call_begin|>", &["<|tool_call_end|>"], Body::KimiItem),
]);
static KIMI_K3: Spec = Spec {
    strip: &["<|open|>response<|sep|>", "<|close|>response<|sep|>"],
    ..regions(&[tag("<|open|>tools<|sep|>", &["<|close|>tools<|sep|>"], Body::KimiK3)])
};
/// A bare `<function=` (no `<tool_call>`) opens a call only at the start of output: after other
/// text, such as a misspelled wrapper (`<too_call>`), it is text, as SGLang's Qwen3-Coder
/// detector and TensorRT-LLM's tests (`detect_and_parse_malformed_tool`) have it.
static QWEN3_CODER: Spec = Spec {
    leading: Some(Leading {
        first: "<",
        opens: "<function=",
        // Read from `<function=` on: the body's own grammar, as inside `<tool_call>`.
        end: End::Marker(&["</function>"]),
        body: Body::QwenXml { bare: false },
    }),
    ..regions(&[tag("<tool_call>", &["</tool_call>"], Body::QwenXml { bare: false })])
};
static SEED_OSS: Spec = regions(&[tag(
    "<seed:tool_call>",
    &["</seed:tool_call>"],
    Body::QwenXml { bare: false },
)]);
static GLM: Spec = regions(&[tag("<tool_call>", &["</tool_call>"], Body::Glm)]);
static HY_V3: Spec = regions(&[tag(
    "<tool_calls>",
    &["</tool_calls>"],
    Body::Items {
        begin: "<tool_call>",
        end: "</tool_call>",
        item: &Body::Glm,
        again: "",
    },
)]);
static STEP3: Spec = regions(&[tag(
    "<｜tool_calls_begin｜>",
    &["<｜tool_calls_end｜>"],
    Body::Items {
        begin: "<｜tool_call_begin｜>",
        end: "<｜tool_call_end｜>",
        item: &Body::Step3Item,
        again: "",
    },
)]);
static MINIMAX_M2: Spec = regions(&[tag(
    "<minimax:tool_call>",
    &["</minimax:tool_call>"],
    Body::Invoke { prefix: "" },
)]);
static TOOL_CALLS_JSON: Spec = regions(&[tag("<tool_calls>", &["</tool_calls>"], Body::Json)]);
/// Harmony: a header region runs to `<|message|>`; `Body::HarmonyHeader` then follows with the
/// message's text as a call's arguments, as text hidden from the user (analysis, built-in tools)
/// or as normal text (final, preambles). The output may start mid-header (` to=functions.x...`),
/// the prompt having ended with `<|start|>assistant`.
static HARMONY: Spec = Spec {
    leading: Some(Leading {
        first: "t",
        opens: "to=",
        end: End::Marker(&["<|message|>"]),
        body: Body::HarmonyHeader { role: true },
    }),
    strip: &["<|end|>", "<|return|>", "<|call|>"],
    ..regions(&[
        tag("<|channel|>", &["<|message|>"], Body::HarmonyHeader { role: false }),
        tag("<|start|>", &["<|message|>"], Body::HarmonyHeader { role: true }),
    ])
};
static COHERE: Spec = Spec {
    // `<|END_OF_TURN_TOKEN|>` arrives as text where special tokens are kept (vLLM's Cohere
    // parsers decode with them); like the response framing it is never content.
    strip: &[
        "<|END_OF_TURN_TOKEN|>",
        "<|START_RESPONSE|>",
        "<|END_RESPONSE|>",
        "<|START_TEXT|>",
        "<|END_TEXT|>",
    ],
    ..regions(&[tag("<|START_ACTION|>", &["<|END_ACTION|>"], Body::Json)])
};
/// Command R+ (tool-use template): `Action: ```json [...] ``` `.
static COMMAND_R: Spec = regions(&[
    tag("Action: ```json", &["```"], Body::Json),
    tag("Action:```json", &["```"], Body::Json),
    tag("Action:\n```json", &["```"], Body::Json),
]);
static GRANITE: Spec = regions(&[
    open("<|tool_call|>", Body::Json),
    Region {
        start: "<tool_call>",
        end: End::BalancedThen("</tool_call>"),
        body: Body::Json,
        probe: None,
        in_body: false,
    },
]);
static GRANITE_20B: Spec = regions(&[open("<function_call>", Body::Json)]);
const GEMMA_DELIM: &str = "<|\"|>";
/// Gemma 4's call and turn framing never reaches content: a `<tool_call|>` after a call or
/// without one, the `<|tool_response>` the model opens after its calls (vLLM's Gemma 4 parser
/// strips them) and the turn's end.
static GEMMA4: Spec = Spec {
    strip: &["<tool_call|>", "<|tool_response>", "<tool_response|>", "<turn|>"],
    ..regions(&[
        tag(
            "<|tool_call>",
            &["<tool_call|>", "<turn|>"],
            Body::Gemma { delim: GEMMA_DELIM },
        ),
        // Fallbacks seen in Gemma 4 output (vLLM gemma4_utils): a bare `call:NAME{...}` (after prose or
        // glued to the thought channel's end) and `<call>NAME{...}`.
        probed(open("call:", Body::Gemma { delim: GEMMA_DELIM }), probes::gemma_call),
        probed(open("<call>", Body::Gemma { delim: GEMMA_DELIM }), probes::gemma_call),
        TOOL_CODE,
    ])
};
static FUNCTIONGEMMA: Spec = regions(&[tag(
    "<start_function_call>",
    &["<end_function_call>"],
    Body::Gemma { delim: "<escape>" },
)]);
static NEMOTRON: Spec = regions(&[tag("<TOOLCALL>", &["</TOOLCALL>"], Body::Json)]);
static PHI4: Spec = regions(&[open("functools", Body::Json)]);
static INTERNLM: Spec = regions(&[tag("<|action_start|><|plugin|>", &["<|action_end|>"], Body::Json)]);
static APERTUS: Spec = regions(&[tag("<|tools_prefix|>", &["<|tools_suffix|>"], Body::NameKeyedJson)]);
static GIGACHAT: Spec = Spec {
    strip: &["<|message_sep|>", "</s>"],
    ..regions(&[
        open("<|function_call|>", Body::Json),
        open("function call<|role_sep|>", Body::Json),
    ])
};
static LONGCAT: Spec = regions(&[tag("<longcat_tool_call>", &["</longcat_tool_call>"], Body::LongCat)]);
static SOLAR: Spec = regions(&[tag("<|tool_call:begin|>", &["<|tool_call:end|>"], Body::Solar)]);
static XLAM: Spec = Spec {
    leading: Some(leading("{[", End::Balanced, Body::Json)),
    lead_after: &["</think>"],
    ..regions(&[
        tag("```json", &["```"], Body::Json),
        open("[TOOL_CALLS]", Body::Json),
        tag("<tool_call>", &["</tool_call>"], Body::Json),
    ])
};
static FUNCTIONARY_V31: Spec = Spec {
    strip: LLAMA_EOT,
    ..regions(&[
        tag("<function=", &["</function>"], Body::FunctionaryV31),
        tag("<|python_tag|>", LLAMA_EOT, Body::PythonCode),
    ])
};
static FUNCTIONARY_V32: Spec = Spec {
    leading: Some(leading("", End::Marker(&["\n"]), Body::FunctionaryHeader)),
    ..regions(&[tag(">>>", &["\n"], Body::FunctionaryHeader)])
};
static SARASHINA: Spec = Spec {
    leading: Some(leading("[", End::Balanced, Body::PythonDicts)),
    ..regions(&[open("<|tool_calls|>", Body::PythonDicts)])
};
static INKLING: Spec = regions(&[tag("<|message_model|>", &["<|end_message|>"], Body::Inkling)]);
/// llama.cpp's generic format (what it falls back to for templates it does not know, Command R+
/// among them): the whole output is one JSON object.
static GENERIC: Spec = Spec {
    leading: Some(leading("{", End::Balanced, Body::Generic)),
    ..regions(&[])
};

impl Spec {
    /// Every marker the engine itself looks for, deduplicated: region starts and ends, item
    /// delimiters, stripped and skipped tokens. Body-internal separators are not included.
    pub(crate) fn markers(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = Vec::new();
        let mut add = |list: &[&'static str]| {
            for m in list {
                if !all.contains(m) {
                    all.push(m);
                }
            }
        };
        for r in self.regions {
            add(&[r.start]);
            add_end(r.end, &mut add);
            add_body(r.body, &mut add);
        }
        if let Some(lead) = &self.leading {
            add_end(lead.end, &mut add);
            add_body(lead.body, &mut add);
        }
        add(self.strip);
        add(self.skip);
        add(self.lead_after);
        all
    }
}

fn add_end(end: End, add: &mut impl FnMut(&[&'static str])) {
    match end {
        End::Marker(ends) | End::MarkerKeep(ends, _) => add(ends),
        End::BalancedThen(close) => add(&[close]),
        End::Balanced => {}
    }
}

fn add_body(body: Body, add: &mut impl FnMut(&[&'static str])) {
    if let Body::Items { begin, end, item, .. } = body {
        add(&[begin, end]);
        add_body(*item, add);
    }
}

/// The markers text mode scans for: region starts, then strip markers, then `lead_after`
/// markers (an index below `regions.len()` is a region), and their distinct first bytes.
#[derive(Debug)]
pub(crate) struct TextMarkers {
    pub markers: Vec<&'static str>,
    /// A slice without any of these bytes holds no marker and no marker prefix, which settles
    /// most pushes with one `memchr` pass.
    pub firsts: Vec<u8>,
}

static TEXT_MARKERS: [OnceLock<TextMarkers>; ToolFormat::ALL.len()] =
    [const { OnceLock::new() }; ToolFormat::ALL.len()];

/// A format's text-mode markers, computed on first use, so that a parser per request costs no
/// allocation for them.
pub(crate) fn text_markers(format: ToolFormat) -> &'static TextMarkers {
    TEXT_MARKERS[format as usize].get_or_init(|| {
        let spec = spec(format);
        let markers: Vec<&'static str> = spec
            .regions
            .iter()
            .map(|r| r.start)
            .chain(spec.strip.iter().copied())
            .chain(spec.lead_after.iter().copied())
            .collect();
        let mut firsts: Vec<u8> = markers.iter().filter_map(|m| m.as_bytes().first().copied()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        TextMarkers { markers, firsts }
    })
}

/// The spec of a format.
pub(crate) fn spec(format: ToolFormat) -> &'static Spec {
    use ToolFormat as F;
    match format {
        F::Hermes => &HERMES,
        F::Json => &JSON,
        F::Llama3Json => &LLAMA3,
        F::Pythonic => &PYTHONIC,
        F::Lfm2 => &LFM2,
        F::Olmo3 => &OLMO3,
        F::Mistral => &MISTRAL,
        F::DeepSeekV3 | F::DeepSeekV31 => &DEEPSEEK,
        F::DeepSeekV32 => &DEEPSEEK_V32,
        F::DeepSeekV4 => &DEEPSEEK_V4,
        F::CommandR => &COMMAND_R,
        F::Generic => &GENERIC,
        F::KimiK2 => &KIMI_K2,
        F::KimiK3 => &KIMI_K3,
        F::Qwen3Coder => &QWEN3_CODER,
        F::SeedOss => &SEED_OSS,
        F::Glm45 | F::Glm47 => &GLM,
        F::HyV3 => &HY_V3,
        F::Step3 => &STEP3,
        F::MinimaxM2 => &MINIMAX_M2,
        F::MinimaxM1 | F::Jamba | F::HunyuanA13b | F::Apriel => &TOOL_CALLS_JSON,
        F::Harmony => &HARMONY,
        F::Cohere => &COHERE,
        F::Granite => &GRANITE,
        F::Granite20bFc => &GRANITE_20B,
        F::Gemma4 => &GEMMA4,
        F::FunctionGemma => &FUNCTIONGEMMA,
        F::NemotronJson => &NEMOTRON,
        F::Phi4Mini => &PHI4,
        F::InternLm => &INTERNLM,
        F::Apertus => &APERTUS,
        F::GigaChat3 => &GIGACHAT,
        F::LongCat => &LONGCAT,
        F::SolarOpen => &SOLAR,
        F::Xlam => &XLAM,
        F::FunctionaryV31 => &FUNCTIONARY_V31,
        F::FunctionaryV32 => &FUNCTIONARY_V32,
        F::Sarashina => &SARASHINA,
        F::Inkling => &INKLING,
    }
}
