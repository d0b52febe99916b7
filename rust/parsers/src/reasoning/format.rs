//! The closed set of reasoning formats, their names, and how one is chosen for a model.
use super::spec::{self, Spec};
use crate::ParserError;
use std::str::FromStr;

/// A reasoning delimiter family. Canonical names are vLLM's `--reasoning-parser` names where vLLM
/// has the format, else SMG's; SMG's and SGLang's names are accepted as aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningFormat {
    /// `<think>`...`</think>` written by the model (Qwen3 hybrid).
    Qwen3,
    /// GLM-4.5 / 4.6: `<think>` written by the model.
    Glm45,
    /// GLM-4.7 / 5: `<think>` opened by the template, so only `</think>` appears (vLLM `glm47`).
    Glm47,
    /// Kimi K2 / K2-Thinking / K2.5: `<think>` opened by the template unless thinking is off
    /// (vLLM `kimi_k2`); a tool section ends reasoning implicitly.
    KimiK2,
    /// Nemotron 3 Nano: `<think>` (the template usually opens it).
    NemotronV3,
    /// Tencent Hy3: `<think>`.
    HyV3,
    /// OLMo 3: plain-text `<think>` tags.
    Olmo3,
    /// DeepSeek V3.1 / V3.2 / V4: `<think>` opened by the prompt only when thinking is on.
    DeepseekV3,
    /// `<think>` implied by the prompt; only `</think>` appears (DeepSeek-R1, QwQ, Qwen3 Thinking).
    DeepseekR1,
    /// Step-3: implied `<think>`.
    Step3,
    /// Step-3.5: implied `<think>`.
    Step3p5,
    /// MiniMax-M2: implied `<think>`.
    MinimaxM2,
    /// MiniMax-M2, thinking kept in the content with `<think>` restored in front.
    MinimaxM2AppendThink,
    /// MiniMax-M3: `<mm:think>`.
    MinimaxM3,
    /// Ernie 4.5: implied `<think>`, then optional `<response>` tags.
    Ernie45,
    /// Hunyuan-A13B: `<think>` then `<answer>` tags.
    HunyuanA13b,
    /// Kimi-VL / Kimi-Dev: `◁think▷`...`◁/think▷`.
    Kimi,
    /// Kimi K3: `<|open|>think<|sep|>`...`<|close|>think<|sep|>`.
    KimiK3,
    /// Seed-OSS: `<seed:think>`...`</seed:think>`.
    SeedOss,
    /// Magistral / Ministral reasoning: `[THINK]`...`[/THINK]`.
    Mistral,
    /// Command R7B / Command A (CMD3 response framing).
    CohereCommand3,
    /// Command A reasoning / MoE (CMD4 text framing).
    CohereCommand4,
    /// gpt-oss Harmony analysis channel.
    OpenaiGptoss,
    /// Gemma 4 thought channel.
    Gemma4,
    /// Granite 3.2 phrases / Granite 3.3 tags.
    Granite,
    /// Apriel 1.5 / 1.6 phrases.
    Apriel,
    /// Solar Open assistant segments.
    SolarOpen,
    /// Inkling typed content blocks.
    Inkling,
    /// Apertus `<|inner_prefix|>`...`<|inner_suffix|>`.
    Apertus,
}

use ReasoningFormat as F;

/// Extra accepted names (compared after lower-casing and turning `-` into `_`).
const ALIASES: &[(&str, ReasoningFormat)] = &[
    ("qwen", F::Qwen3),
    ("deepseek_v31", F::DeepseekV3),
    ("deepseek_v32", F::DeepseekV3),
    ("deepseek_v4", F::DeepseekV3),
    ("deepseekv3", F::DeepseekV3),
    ("deepseek", F::DeepseekR1),
    ("qwen3_thinking", F::DeepseekR1),
    ("qwq", F::DeepseekR1),
    ("kimi_thinking", F::DeepseekR1),
    ("kimi_k25", F::KimiK2),
    ("nano_v3", F::NemotronV3),
    ("nemotron_3", F::NemotronV3),
    ("glm", F::Glm45),
    ("minimax", F::MinimaxM2),
    ("minimax_append_think", F::MinimaxM2AppendThink),
    ("holo2", F::DeepseekV3),
    ("interns1", F::Qwen3),
    ("mimo", F::Qwen3),
    ("telechat4", F::Qwen3),
    ("poolside_v1", F::Qwen3),
    ("hunyuan", F::HunyuanA13b),
    ("apertus2509", F::Apertus),
    ("cohere_cmd", F::CohereCommand3),
    ("cohere", F::CohereCommand3),
    ("gpt_oss", F::OpenaiGptoss),
    ("harmony", F::OpenaiGptoss),
    ("openai", F::OpenaiGptoss),
    ("solar", F::SolarOpen),
    ("magistral", F::Mistral),
];

/// Model-id patterns (lower case). Every part must occur in the id; the longest total pattern
/// wins, so `qwen3`+`thinking` beats `qwen3`, and `kimi-k3` beats `kimi`. `None` marks families
/// known to have no reasoning output (Qwen3-Coder, the 2507 Instruct models).
const MODEL_PATTERNS: &[(&[&str], Option<ReasoningFormat>)] = &[
    (&["deepseek-r1"], Some(F::DeepseekR1)),
    (&["deepseek-v3"], Some(F::DeepseekV3)),
    (&["deepseek-v4"], Some(F::DeepseekV3)),
    (&["qwq"], Some(F::DeepseekR1)),
    (&["qwen3"], Some(F::Qwen3)),
    (&["qwen3", "thinking"], Some(F::DeepseekR1)),
    (&["qwen3.5"], Some(F::DeepseekR1)),
    (&["qwen3_5"], Some(F::DeepseekR1)),
    (&["qwen3", "coder"], None),
    (&["qwen3", "instruct-2507"], None),
    (&["glm-4.5"], Some(F::Glm45)),
    (&["glm-4.6"], Some(F::Glm45)),
    (&["glm-4.7"], Some(F::Glm47)),
    (&["glm-5"], Some(F::Glm47)),
    (&["glm45"], Some(F::Glm45)),
    (&["glm47"], Some(F::Glm47)),
    (&["kimi"], Some(F::Kimi)),
    (&["kimi-k2"], Some(F::KimiK2)),
    (&["kimi-k2", "instruct"], None),
    (&["kimi-k2-thinking"], Some(F::DeepseekR1)),
    (&["kimi-k3"], Some(F::KimiK3)),
    (&["kimi_k3"], Some(F::KimiK3)),
    (&["nemotron-nano"], Some(F::NemotronV3)),
    (&["nemotron-3"], Some(F::NemotronV3)),
    (&["hy3"], Some(F::HyV3)),
    (&["hunyuan-a13b"], Some(F::HunyuanA13b)),
    (&["olmo-3"], Some(F::Olmo3)),
    (&["olmo3"], Some(F::Olmo3)),
    (&["step3"], Some(F::Step3)),
    (&["step-3"], Some(F::Step3)),
    (&["step-3.5"], Some(F::Step3p5)),
    (&["step3p5"], Some(F::Step3p5)),
    (&["stepfun3.5"], Some(F::Step3p5)),
    (&["minimax"], Some(F::MinimaxM2)),
    (&["minimax-m3"], Some(F::MinimaxM3)),
    (&["ernie-4.5"], Some(F::Ernie45)),
    (&["seed-oss"], Some(F::SeedOss)),
    (&["magistral"], Some(F::Mistral)),
    (&["ministral", "reasoning"], Some(F::Mistral)),
    (&["command-r7b"], Some(F::CohereCommand3)),
    (&["command-a"], Some(F::CohereCommand3)),
    (&["command-a-reasoning"], Some(F::CohereCommand4)),
    (&["gpt-oss"], Some(F::OpenaiGptoss)),
    (&["gemma-4"], Some(F::Gemma4)),
    (&["gemma4"], Some(F::Gemma4)),
    (&["granite-3.2"], Some(F::Granite)),
    (&["granite-3.3"], Some(F::Granite)),
    (&["apriel"], Some(F::Apriel)),
    (&["solar-open"], Some(F::SolarOpen)),
    (&["inkling"], Some(F::Inkling)),
    (&["apertus"], Some(F::Apertus)),
    (&["smollm3"], Some(F::Qwen3)),
    (&["mimo"], Some(F::Qwen3)),
    (&["phi-4", "reasoning"], Some(F::Qwen3)),
];

/// Template markers, most specific first. `<think>` alone comes last: it is part of several
/// richer families.
const TEMPLATE_MARKERS: &[(&[&str], ReasoningFormat)] = &[
    (&["<|channel|>"], F::OpenaiGptoss),
    (&["<|channel>"], F::Gemma4),
    (&["<|inner_prefix|>"], F::Apertus),
    (&["<seed:think>"], F::SeedOss),
    (&["[THINK]"], F::Mistral),
    (&["<|START_THINKING|>"], F::CohereCommand3),
    (&["◁think▷"], F::Kimi),
    (&["<|open|>think"], F::KimiK3),
    (&["<|content_thinking|>"], F::Inkling),
    (&["<mm:think>"], F::MinimaxM3),
    (&["Here is my thought process"], F::Granite),
    (&["Here are my reasoning steps"], F::Apriel),
    (&["<|think|>", "<|begin|>"], F::SolarOpen),
    (&["<think>", "<answer>"], F::HunyuanA13b),
    (&["<think>", "<response>"], F::Ernie45),
    (&["<think>"], F::Qwen3),
];

impl ReasoningFormat {
    /// Every format, in the order `list_reasoning_parsers()` reports them.
    pub const ALL: &'static [ReasoningFormat] = &[
        F::Qwen3,
        F::Glm45,
        F::Glm47,
        F::KimiK2,
        F::NemotronV3,
        F::HyV3,
        F::Olmo3,
        F::DeepseekV3,
        F::DeepseekR1,
        F::Step3,
        F::Step3p5,
        F::MinimaxM2,
        F::MinimaxM2AppendThink,
        F::MinimaxM3,
        F::Ernie45,
        F::HunyuanA13b,
        F::Kimi,
        F::KimiK3,
        F::SeedOss,
        F::Mistral,
        F::CohereCommand3,
        F::CohereCommand4,
        F::OpenaiGptoss,
        F::Gemma4,
        F::Granite,
        F::Apriel,
        F::SolarOpen,
        F::Inkling,
        F::Apertus,
    ];

    /// Canonical name.
    pub fn name(self) -> &'static str {
        match self {
            F::Qwen3 => "qwen3",
            F::Glm45 => "glm45",
            F::Glm47 => "glm47",
            F::KimiK2 => "kimi_k2",
            F::NemotronV3 => "nemotron_v3",
            F::HyV3 => "hy_v3",
            F::Olmo3 => "olmo3",
            F::DeepseekV3 => "deepseek_v3",
            F::DeepseekR1 => "deepseek_r1",
            F::Step3 => "step3",
            F::Step3p5 => "step3p5",
            F::MinimaxM2 => "minimax_m2",
            F::MinimaxM2AppendThink => "minimax_m2_append_think",
            F::MinimaxM3 => "minimax_m3",
            F::Ernie45 => "ernie45",
            F::HunyuanA13b => "hunyuan_a13b",
            F::Kimi => "kimi",
            F::KimiK3 => "kimi_k3",
            F::SeedOss => "seed_oss",
            F::Mistral => "mistral",
            F::CohereCommand3 => "cohere_command3",
            F::CohereCommand4 => "cohere_command4",
            F::OpenaiGptoss => "openai_gptoss",
            F::Gemma4 => "gemma4",
            F::Granite => "granite",
            F::Apriel => "apriel",
            F::SolarOpen => "solar_open",
            F::Inkling => "inkling",
            F::Apertus => "apertus",
        }
    }

    pub(crate) fn spec(self) -> &'static Spec {
        match self {
            F::Qwen3 | F::Glm45 | F::NemotronV3 | F::Olmo3 | F::DeepseekV3 => &spec::THINK,
            F::DeepseekR1 | F::Step3 | F::Step3p5 | F::MinimaxM2 | F::Glm47 | F::KimiK2 => &spec::THINK_IMPLIED,
            F::HyV3 => &spec::THINK_HUNYUAN,
            F::MinimaxM2AppendThink => &spec::THINK_APPEND,
            F::MinimaxM3 => &spec::MINIMAX_M3,
            F::Ernie45 => &spec::ERNIE45,
            F::HunyuanA13b => &spec::HUNYUAN_A13B,
            F::Kimi => &spec::KIMI_VL,
            F::KimiK3 => &spec::KIMI_K3,
            F::SeedOss => &spec::SEED_OSS,
            F::Mistral => &spec::MISTRAL,
            F::CohereCommand3 | F::CohereCommand4 => &spec::COHERE,
            F::OpenaiGptoss => &spec::HARMONY,
            F::Gemma4 => &spec::GEMMA4,
            F::Granite => &spec::GRANITE,
            F::Apriel => &spec::APRIEL,
            F::SolarOpen => &spec::SOLAR_OPEN,
            F::Inkling => &spec::INKLING,
            F::Apertus => &spec::APERTUS,
        }
    }

    /// Position in `ALL` (used to index per-format tables).
    pub(crate) fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// Pick the format from a model id or path (case-insensitive; most specific pattern wins).
    /// `None` when the model is unknown or known not to reason.
    pub fn for_model(model: &str) -> Option<ReasoningFormat> {
        let id = model.to_ascii_lowercase();
        MODEL_PATTERNS
            .iter()
            .filter(|(parts, _)| parts.iter().all(|p| id.contains(p)))
            .max_by_key(|(parts, _)| parts.iter().map(|p| p.len()).sum::<usize>())
            .and_then(|(_, f)| *f)
    }

    /// Pick the format from the markers a chat template writes.
    pub fn from_chat_template(template: &str) -> Option<ReasoningFormat> {
        TEMPLATE_MARKERS
            .iter()
            .find(|(parts, _)| parts.iter().all(|p| template.contains(p)))
            .map(|(_, f)| *f)
    }

    /// Every marker this format recognises (for tests, fuzzing and documentation).
    pub fn markers(self) -> Vec<&'static str> {
        let s = self.spec();
        let mut all: Vec<&'static str> = Vec::new();
        for list in [
            s.opens,
            s.closes,
            s.close_keep,
            s.answer_opens,
            s.answer_closes,
            s.drops,
        ] {
            for m in list {
                if !all.contains(m) {
                    all.push(m);
                }
            }
        }
        all
    }

    /// Text put in front of all content (only `minimax_m2_append_think`: `<think>`).
    pub fn content_prefix(self) -> Option<&'static str> {
        self.spec().content_prefix
    }

    fn valid_names() -> String {
        Self::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for ReasoningFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReasoningFormat {
    type Err = ParserError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let key = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL
            .iter()
            .copied()
            .find(|f| f.name() == key)
            .or_else(|| ALIASES.iter().find(|(a, _)| *a == key).map(|(_, f)| *f))
            .ok_or_else(|| ParserError::UnknownParser {
                kind: "reasoning",
                name: s.to_string(),
                valid: Self::valid_names(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for f in ReasoningFormat::ALL {
            assert_eq!(f.name().parse::<ReasoningFormat>(), Ok(*f));
        }
        for (name, f) in [
            ("deepseek-r1", F::DeepseekR1),
            ("qwen3-thinking", F::DeepseekR1),
            ("gpt-oss", F::OpenaiGptoss),
            ("nano_v3", F::NemotronV3),
        ] {
            assert_eq!(name.parse::<ReasoningFormat>(), Ok(f), "{name}");
        }
        let err = "nope".parse::<ReasoningFormat>().unwrap_err().to_string();
        assert!(err.contains("deepseek_r1") && err.contains("nope"), "{err}");
    }

    #[test]
    fn model_mapping_most_specific_wins() {
        for (model, want) in [
            ("deepseek-ai/DeepSeek-R1", Some(F::DeepseekR1)),
            ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", Some(F::DeepseekR1)),
            ("Qwen/Qwen3-8B", Some(F::Qwen3)),
            ("Qwen/Qwen3-30B-A3B-Thinking-2507", Some(F::DeepseekR1)),
            ("Qwen/Qwen3-Coder-30B-A3B-Instruct", None),
            ("Qwen/QwQ-32B", Some(F::DeepseekR1)),
            ("moonshotai/Kimi-K3", Some(F::KimiK3)),
            ("moonshotai/Kimi-VL-A3B-Thinking", Some(F::Kimi)),
            ("openai/gpt-oss-20b", Some(F::OpenaiGptoss)),
            ("zai-org/GLM-4.6", Some(F::Glm45)),
            ("zai-org/GLM-4.7-Flash", Some(F::Glm47)),
            ("swiss-ai/Apertus-8B-2509", Some(F::Apertus)),
            ("moonshotai/Kimi-K2-Instruct", None),
            ("MiniMaxAI/MiniMax-M2", Some(F::MinimaxM2)),
            ("meta-llama/Llama-3.1-8B", None),
        ] {
            assert_eq!(ReasoningFormat::for_model(model), want, "{model}");
        }
    }

    #[test]
    fn template_detection() {
        for (template, want) in [
            ("{{'<|channel|>analysis'}}", Some(F::OpenaiGptoss)),
            ("x <seed:think> y", Some(F::SeedOss)),
            ("[THINK]", Some(F::Mistral)),
            ("'<think>\\n'", Some(F::Qwen3)),
            ("{{ messages }}", None),
        ] {
            assert_eq!(ReasoningFormat::from_chat_template(template), want, "{template}");
        }
    }
}
