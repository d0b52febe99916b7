//! The closed set of tool-call formats, their names and how a format is chosen from a model id
//! or a chat template.
use crate::ParserError;
use std::str::FromStr;

macro_rules! formats {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal $(| $alias:literal)* ;)*) => {
        /// A tool-call output format. Canonical names are vLLM's `--tool-call-parser` names where
        /// vLLM has the format; SMG's and SGLang's names are accepted as aliases.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ToolFormat {
            $( $(#[$doc])* $variant, )*
        }

        impl ToolFormat {
            /// Every format, in a stable order.
            pub const ALL: &'static [ToolFormat] = &[$(ToolFormat::$variant),*];

            /// Canonical name.
            pub fn name(self) -> &'static str {
                match self {
                    $(ToolFormat::$variant => $name,)*
                }
            }

            /// Canonical name or alias (lower case) to format.
            fn lookup(name: &str) -> Option<ToolFormat> {
                match name {
                    $($name $(| $alias)* => Some(ToolFormat::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

formats! {
    /// Hermes / Qwen 2.5 / Qwen3 `<tool_call>{json}</tool_call>` (also Granite 4, Ernie 4.5).
    Hermes => "hermes" | "qwen" | "qwen25" | "qwen2_5" | "qwen3" | "granite4" | "ernie45";
    /// OpenAI-style JSON object or array with no marker.
    Json => "json" | "openai_json";
    /// Llama 3.x JSON, optionally after `<|python_tag|>`; `;` separates calls.
    Llama3Json => "llama3_json" | "llama" | "llama3" | "llama4_json";
    /// Python call list `[f(a=1), g()]` (Llama 4, Llama 3.2 model-card mode, ToolACE). SGLang
    /// names its Llama 4 parser `llama4`; Llama 4's JSON mode is `llama4_json` instead.
    Pythonic => "pythonic" | "llama4_pythonic" | "llama4";
    /// LFM2 `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`.
    Lfm2 => "lfm2";
    /// OLMo 3 `<function_calls>` with one Python call per line.
    Olmo3 => "olmo3";
    /// Mistral: `[TOOL_CALLS][...]`, `[TOOL_CALLS]NAME[ARGS]{..}`, `[TOOL_CALLS]NAME[CALL_ID]id[ARGS]{..}`.
    Mistral => "mistral";
    /// DeepSeek V3 / R1 (fenced JSON after `function<｜tool▁sep｜>NAME`).
    DeepSeekV3 => "deepseek_v3" | "deepseek" | "deepseekv3";
    /// DeepSeek V3.1 / V3.2-Exp (`NAME<｜tool▁sep｜>{json}`).
    DeepSeekV31 => "deepseek_v31" | "deepseek31" | "deepseekv31";
    /// DeepSeek V3.2 DSML invoke blocks in `<｜DSML｜function_calls>`.
    DeepSeekV32 => "deepseek_v32" | "deepseek32" | "deepseekv32" | "dsml";
    /// DeepSeek V4 DSML invoke blocks in `<｜DSML｜tool_calls>`.
    DeepSeekV4 => "deepseek_v4" | "deepseekv4";
    /// Kimi K2 / K2-Thinking / K2.5 sections; ids `functions.NAME:IDX`.
    KimiK2 => "kimi_k2" | "kimik2";
    /// Kimi K3 XTML.
    KimiK3 => "kimi_k3" | "kimik3";
    /// Qwen XML: Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, Step-3.5, MiMo.
    Qwen3Coder => "qwen3_coder" | "qwen_xml" | "qwen_coder" | "qwen3_xml" | "step3p5" | "mimo" | "nemotron_v3";
    /// Seed-OSS: Qwen XML grammar inside `<seed:tool_call>`.
    SeedOss => "seed_oss" | "seed";
    /// GLM-4.5 / 4.6 `<arg_key>`/`<arg_value>` pairs.
    Glm45 => "glm45" | "glm45_moe" | "glm" | "glm4_moe";
    /// GLM-4.7 / GLM-5 / Poolside Laguna (same grammar without newlines).
    Glm47 => "glm47" | "glm47_moe" | "poolside_v1";
    /// Tencent Hy3 `<tool_calls>` with GLM-style pairs.
    HyV3 => "hy_v3" | "hunyuan_v3" | "hyv4" | "hunyuan";
    /// Step-3 steptml invoke blocks.
    Step3 => "step3";
    /// MiniMax M2 `<minimax:tool_call>` with `<invoke>` blocks.
    MinimaxM2 => "minimax_m2";
    /// MiniMax M1 `<tool_calls>` with one JSON object per line.
    MinimaxM1 => "minimax" | "minimax_m1";
    /// gpt-oss Harmony: calls on the commentary channel addressed `to=functions.NAME`.
    Harmony => "openai" | "gpt-oss" | "gpt_oss" | "harmony";
    /// Cohere Command R7B / A `<|START_ACTION|>[...]<|END_ACTION|>`.
    Cohere => "cohere_command3" | "cohere" | "cohere_command4" | "cohere_cmd";
    /// Command R / R+ tool-use template: `Action: ```json [...] ``` `.
    CommandR => "command_r" | "command_r_plus" | "cohere_command_r";
    /// Granite 3.x `<|tool_call|>[...]` / `<tool_call>[...]`.
    Granite => "granite" | "granite3";
    /// granite-20b-functioncalling `<function_call> {json}`.
    Granite20bFc => "granite-20b-fc" | "granite_20b_fc";
    /// Gemma 4 `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`.
    Gemma4 => "gemma4";
    /// FunctionGemma `<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`.
    FunctionGemma => "functiongemma" | "function_gemma";
    /// Jamba `<tool_calls>[...]</tool_calls>`.
    Jamba => "jamba";
    /// Hunyuan-A13B `<tool_calls>[...]</tool_calls>`.
    HunyuanA13b => "hunyuan_a13b";
    /// Apriel 1.5 / 1.6 `<tool_calls>[...]</tool_calls>`.
    Apriel => "apriel";
    /// Nemotron Nano v2 `<TOOLCALL>[...]</TOOLCALL>`.
    NemotronJson => "nemotron_json" | "nemotron_nano_v2";
    /// Phi-4-mini and FireFunction v2 `functools[...]`.
    Phi4Mini => "phi4_mini_json" | "phi4_mini" | "firefunction_v2" | "firefunction";
    /// InternLM2 `<|action_start|><|plugin|>{json}<|action_end|>`.
    InternLm => "internlm" | "internlm2" | "interns1";
    /// Apertus `<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>`.
    Apertus => "apertus" | "apertus2509";
    /// GigaChat 3 `<|function_call|>{json}`.
    GigaChat3 => "gigachat3";
    /// LongCat `<longcat_tool_call>{json}</longcat_tool_call>`.
    LongCat => "longcat";
    /// Solar Open `<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{json}<|tool_call:end|>`.
    SolarOpen => "solar_open" | "solar";
    /// xLAM: a JSON array, bare, fenced, after `[TOOL_CALLS]` or in `<tool_call>`.
    Xlam => "xlam";
    /// Functionary v3.1 `<function=NAME>{json}</function>` and `<|python_tag|>code`.
    FunctionaryV31 => "functionary_v3_1" | "functionary" | "functionary_v31";
    /// Functionary v3.2 `>>>NAME\n{json}`.
    FunctionaryV32 => "functionary_v3_2" | "functionary_v32";
    /// Sarashina: a Python list of dicts, optionally after `<|tool_calls|>`.
    Sarashina => "sarashina";
    /// Inkling `<|message_model|>NAME<|content_invoke_tool_json|>{json}<|end_message|>`.
    Inkling => "inkling";
    /// llama.cpp's generic JSON: `{"tool_call": {...}}`, `{"tool_calls": [...]}` or `{"response": "..."}`.
    Generic => "generic";
}

/// Model-id substrings (lower case) and their format. The longest matching pattern wins, so
/// `qwen3-coder` beats `qwen` and `kimi-k3` beats `kimi`.
const MODEL_PATTERNS: &[(&str, ToolFormat)] = &[
    ("qwen3-coder", ToolFormat::Qwen3Coder),
    ("qwen3.5", ToolFormat::Qwen3Coder),
    ("qwen3_5", ToolFormat::Qwen3Coder),
    ("qwen3-next", ToolFormat::Hermes),
    ("qwen", ToolFormat::Hermes),
    ("qwq", ToolFormat::Hermes),
    ("hermes", ToolFormat::Hermes),
    ("ernie-4.5", ToolFormat::Hermes),
    ("ernie", ToolFormat::Hermes),
    ("granite-4", ToolFormat::Hermes),
    ("granite-20b-functioncalling", ToolFormat::Granite20bFc),
    ("granite", ToolFormat::Granite),
    ("llama-4", ToolFormat::Pythonic),
    ("llama4", ToolFormat::Pythonic),
    ("llama-3", ToolFormat::Llama3Json),
    ("llama3", ToolFormat::Llama3Json),
    ("llama", ToolFormat::Llama3Json),
    ("toolace", ToolFormat::Pythonic),
    ("lfm2", ToolFormat::Lfm2),
    ("olmo-3", ToolFormat::Olmo3),
    ("olmo3", ToolFormat::Olmo3),
    ("mistral", ToolFormat::Mistral),
    ("mixtral", ToolFormat::Mistral),
    ("ministral", ToolFormat::Mistral),
    ("magistral", ToolFormat::Mistral),
    ("devstral", ToolFormat::Mistral),
    ("codestral", ToolFormat::Mistral),
    ("deepseek-v3.1", ToolFormat::DeepSeekV31),
    ("deepseek-v3.2-exp", ToolFormat::DeepSeekV31),
    ("deepseek-v3.2", ToolFormat::DeepSeekV32),
    ("deepseek-v4", ToolFormat::DeepSeekV4),
    ("deepseek-v3", ToolFormat::DeepSeekV3),
    ("deepseek-r1", ToolFormat::DeepSeekV3),
    ("deepseek", ToolFormat::DeepSeekV3),
    ("kimi-k3", ToolFormat::KimiK3),
    ("kimi-k2", ToolFormat::KimiK2),
    ("kimi", ToolFormat::KimiK2),
    ("seed-oss", ToolFormat::SeedOss),
    ("glm-4.5", ToolFormat::Glm45),
    ("glm-4.6", ToolFormat::Glm45),
    ("glm-4.7", ToolFormat::Glm47),
    ("glm-5", ToolFormat::Glm47),
    ("laguna", ToolFormat::Glm47),
    ("hy3", ToolFormat::HyV3),
    ("hunyuan-a13b", ToolFormat::HunyuanA13b),
    ("step-3.5", ToolFormat::Qwen3Coder),
    ("step3p5", ToolFormat::Qwen3Coder),
    ("step-3", ToolFormat::Step3),
    ("step3", ToolFormat::Step3),
    ("mimo", ToolFormat::Qwen3Coder),
    ("nemotron-3-nano", ToolFormat::Qwen3Coder),
    ("nemotron-nano-3", ToolFormat::Qwen3Coder),
    ("nemotron-nano", ToolFormat::NemotronJson),
    ("minimax-m1", ToolFormat::MinimaxM1),
    ("minimax", ToolFormat::MinimaxM2),
    ("gpt-oss", ToolFormat::Harmony),
    ("command-r7b", ToolFormat::Cohere),
    ("command-a", ToolFormat::Cohere),
    ("c4ai-command", ToolFormat::Cohere),
    ("command-r-plus", ToolFormat::CommandR),
    ("c4ai-command-r-v01", ToolFormat::CommandR),
    ("command-r-08-2024", ToolFormat::CommandR),
    ("command-r-plus-08-2024", ToolFormat::CommandR),
    ("firefunction", ToolFormat::Phi4Mini),
    ("functiongemma", ToolFormat::FunctionGemma),
    ("gemma-4", ToolFormat::Gemma4),
    ("gemma4", ToolFormat::Gemma4),
    ("jamba", ToolFormat::Jamba),
    ("apriel", ToolFormat::Apriel),
    ("phi-4-mini", ToolFormat::Phi4Mini),
    ("internlm", ToolFormat::InternLm),
    ("apertus", ToolFormat::Apertus),
    ("gigachat", ToolFormat::GigaChat3),
    ("longcat", ToolFormat::LongCat),
    ("solar-open", ToolFormat::SolarOpen),
    ("xlam", ToolFormat::Xlam),
    ("functionary-small-v3.2", ToolFormat::FunctionaryV32),
    ("functionary-medium-v3.2", ToolFormat::FunctionaryV32),
    ("functionary-v3.2", ToolFormat::FunctionaryV32),
    ("functionary", ToolFormat::FunctionaryV31),
    ("sarashina", ToolFormat::Sarashina),
    ("inkling", ToolFormat::Inkling),
];

/// Template markers, most specific first: the first whose every needle occurs in the template
/// source decides.
const TEMPLATE_MARKERS: &[(&[&str], ToolFormat)] = &[
    (&["｜DSML｜tool_calls"], ToolFormat::DeepSeekV4),
    (&["｜DSML｜"], ToolFormat::DeepSeekV32),
    (&["tool▁sep", "```json"], ToolFormat::DeepSeekV3),
    (&["tool▁sep"], ToolFormat::DeepSeekV31),
    (&["<|tool_calls_section_begin|>"], ToolFormat::KimiK2),
    (&["<|open|>", "<|sep|>"], ToolFormat::KimiK3),
    (&["<seed:tool_call>"], ToolFormat::SeedOss),
    (&["<function=", "<parameter="], ToolFormat::Qwen3Coder),
    (&["<tool_sep>", "<arg_key>"], ToolFormat::HyV3),
    (&["\\n<arg_key>"], ToolFormat::Glm45),
    (&["<arg_key>"], ToolFormat::Glm47),
    (&["<minimax:tool_call>"], ToolFormat::MinimaxM2),
    (&["<steptml:invoke"], ToolFormat::Step3),
    (&["<|channel|>", "<|message|>"], ToolFormat::Harmony),
    (&["<|START_ACTION|>"], ToolFormat::Cohere),
    (&["Action:", "```json", "tool_name"], ToolFormat::CommandR),
    (&["<|tool_call>"], ToolFormat::Gemma4),
    (&["<start_function_call>"], ToolFormat::FunctionGemma),
    (&["<|tool_call_start|>"], ToolFormat::Lfm2),
    (&["<function_calls>"], ToolFormat::Olmo3),
    (&["<|python_start|>"], ToolFormat::Pythonic),
    (&["[TOOL_CALLS]"], ToolFormat::Mistral),
    (&["<|tool_call:begin|>"], ToolFormat::SolarOpen),
    (&["<longcat_tool_call>"], ToolFormat::LongCat),
    (&["<|tools_prefix|>"], ToolFormat::Apertus),
    (&["<|action_start|>"], ToolFormat::InternLm),
    (&["<|function_call|>"], ToolFormat::GigaChat3),
    (&["<TOOLCALL>"], ToolFormat::NemotronJson),
    (&["functools["], ToolFormat::Phi4Mini),
    (&["<|content_invoke_tool_json|>"], ToolFormat::Inkling),
    (&["<function_call>"], ToolFormat::Granite20bFc),
    (&["<|tool_call|>"], ToolFormat::Granite),
    (&["<tool_calls>"], ToolFormat::Jamba),
    (&["<tool_call>"], ToolFormat::Hermes),
    (&["<|python_tag|>"], ToolFormat::Llama3Json),
];

impl ToolFormat {
    /// Pick a format from a model id such as `Qwen/Qwen3-Coder-30B` (case-insensitive; the
    /// longest matching pattern wins).
    pub fn for_model(model: &str) -> Option<ToolFormat> {
        let lower = model.to_ascii_lowercase();
        MODEL_PATTERNS
            .iter()
            .filter(|(pat, _)| lower.contains(pat))
            .max_by_key(|(pat, _)| pat.len())
            .map(|&(_, f)| f)
    }

    /// Guess a format from a chat template's source by the markers it writes for tool calls.
    pub fn from_chat_template(template: &str) -> Option<ToolFormat> {
        TEMPLATE_MARKERS
            .iter()
            .find(|(needles, _)| needles.iter().all(|n| template.contains(n)))
            .map(|&(_, f)| f)
    }

    /// The markers this format's parser looks for in text (region starts and ends, item
    /// delimiters, stripped tokens), deduplicated: for tests and fuzzing, which build inputs
    /// from them.
    pub fn markers(self) -> Vec<&'static str> {
        super::spec::spec(self).markers()
    }

    /// Canonical names joined for error messages.
    pub(crate) fn valid_names() -> String {
        ToolFormat::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
    }
}

impl FromStr for ToolFormat {
    type Err = ParserError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        // SGLang spells some names with `-` where vLLM uses `_` (`minimax-m2`, `gpt-oss`).
        ToolFormat::lookup(&name)
            .or_else(|| ToolFormat::lookup(&name.replace('-', "_")))
            .ok_or_else(|| ParserError::UnknownParser {
                kind: "tool-call",
                name: s.to_string(),
                valid: ToolFormat::valid_names(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ToolFormat as F;

    #[test]
    fn names_round_trip_and_aliases() {
        for f in ToolFormat::ALL {
            assert_eq!(f.name().parse::<ToolFormat>(), Ok(*f));
        }
        for (name, f) in [
            ("QWEN25", F::Hermes),
            ("qwen_xml", F::Qwen3Coder),
            // SGLang's `llama4` is the pythonic Llama 4 format, not the JSON one.
            ("llama4", F::Pythonic),
            ("llama4_json", F::Llama3Json),
            // Peers' names: SGLang's hyphenated ones, vLLM's and llama.cpp's.
            ("minimax-m2", F::MinimaxM2),
            ("deepseekv4", F::DeepSeekV4),
            ("hunyuan", F::HyV3),
            ("interns1", F::InternLm),
            ("apertus2509", F::Apertus),
            ("firefunction_v2", F::Phi4Mini),
            ("ernie45", F::Hermes),
            ("gpt-oss", F::Harmony),
            ("granite-20b-fc", F::Granite20bFc),
        ] {
            assert_eq!(name.parse::<ToolFormat>(), Ok(f), "{name}");
        }
        assert!(matches!(
            "nope".parse::<ToolFormat>(),
            Err(ParserError::UnknownParser { .. })
        ));
    }

    #[test]
    fn model_mapping_most_specific_wins() {
        for (model, want) in [
            ("Qwen/Qwen3-Coder-30B", Some(F::Qwen3Coder)),
            ("Qwen/Qwen2.5-7B-Instruct", Some(F::Hermes)),
            ("moonshotai/Kimi-K3", Some(F::KimiK3)),
            ("deepseek-ai/DeepSeek-V3.1", Some(F::DeepSeekV31)),
            ("meta-llama/Llama-3.1-8B-Instruct", Some(F::Llama3Json)),
            ("openai/gpt-oss-20b", Some(F::Harmony)),
            ("deepseek-ai/DeepSeek-V4-Flash", Some(F::DeepSeekV4)),
            ("deepseek-ai/DeepSeek-V3.2", Some(F::DeepSeekV32)),
            ("CohereForAI/c4ai-command-r-plus", Some(F::CommandR)),
            ("CohereLabs/c4ai-command-r7b-12-2024", Some(F::Cohere)),
            ("fireworks-ai/llama-3-firefunction-v2", Some(F::Phi4Mini)),
            ("unknown/model", None),
        ] {
            assert_eq!(ToolFormat::for_model(model), want, "{model}");
        }
    }

    #[test]
    fn template_detection() {
        for (template, want) in [
            (
                "{{ '<tool_call>\\n<function=' }}{{ '<parameter=' }}",
                Some(F::Qwen3Coder),
            ),
            ("'<tool_call>' + tojson", Some(F::Hermes)),
            ("{{ '<｜DSML｜tool_calls>' }}", Some(F::DeepSeekV4)),
            ("{{ '<｜DSML｜function_calls>' }}", Some(F::DeepSeekV32)),
            ("plain", None),
        ] {
            assert_eq!(ToolFormat::from_chat_template(template), want, "{template}");
        }
    }
}
