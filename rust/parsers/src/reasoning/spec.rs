//! Declarative description of each reasoning delimiter family.
//!
//! A format is data, not code: the streaming engine (`engine.rs`) reads these lists and knows
//! nothing about any model. Adding a family means adding one `Spec` constant (plus fixtures).
//!
//! The engine has three modes. *Content* is visible answer text, *Reasoning* is thinking, and
//! *Answer* is content inside explicit answer framing (`<answer>`, `<response>`, Harmony's final
//! channel, ...), whose closing tag must be dropped rather than shown. Every marker the engine
//! recognises is removed from the output except `close_keep` markers, which end reasoning but
//! belong to the tool parser that runs next.

/// One delimiter family.
#[derive(Debug)]
pub(crate) struct Spec {
    /// Open a reasoning block (dropped). Inside reasoning an opening before any reasoning text
    /// is dropped too (a DeepSeek-R1 model that writes `<think>` although the prompt already
    /// opened it); a later one is nested text and stays in the reasoning, as vLLM's, SGLang's
    /// and SMG's parsers keep it (the first close still ends reasoning).
    pub opens: &'static [&'static str],
    /// Close a reasoning block (dropped). Outside reasoning a stray close is content, verbatim
    /// (SGLang's and SMG's detectors return text without an opening unchanged), unless
    /// `drop_stray_close` is set.
    pub closes: &'static [&'static str],
    /// End reasoning implicitly and stay in the content: a tool section opened inside thinking
    /// (Kimi K2-Thinking, DeepSeek) must reach the tool parser instead of being swallowed.
    pub close_keep: &'static [&'static str],
    /// Enter explicit answer framing (dropped); also ends reasoning when no close came first.
    pub answer_opens: &'static [&'static str],
    /// Leave answer framing (dropped).
    pub answer_closes: &'static [&'static str],
    /// Other framing removed from content (message headers, end-of-turn tokens).
    pub drops: &'static [&'static str],
    /// The model starts inside reasoning even when the prompt does not show the opening
    /// (DeepSeek-R1 style). Output with no close marker is then all reasoning.
    pub implied_open: bool,
    /// See `closes`.
    pub drop_stray_close: bool,
    /// Reasoning may open again after it closed (Gemma 4 cycles through thought channels).
    /// Elsewhere, once reasoning has ended, its markers are content kept verbatim: the model
    /// wrote them as text (vLLM, SGLang and SMG split at the first close only).
    pub reopens: bool,
    /// A prompt that *ends* with one of `closes` means thinking was switched off. False where the
    /// close marker is a generic end-of-message token that ends every turn (Harmony, Inkling).
    pub prompt_close_disables: bool,
    /// No splitting at all: everything is content, preceded by this text (vLLM's
    /// `minimax_m2_append_think`, which puts the prompt's `<think>` back in front).
    pub content_prefix: Option<&'static str>,
}

const NONE: &[&str] = &[];

/// Tool calls that may open before `</think>` (formats.md §1.6): the marker ends reasoning and
/// stays in the content for the tool parser. Kimi K2 (both spellings of its section, and a bare
/// call), DeepSeek, and `<tool_call>`, which SGLang's Qwen3, GLM-4.5 and Nemotron 3 detectors
/// treat so ("Qwen3.5 sometimes opens <tool_call> without closing </think>").
const TOOL_SECTIONS: &[&str] = &[
    "<|tool_calls_section_begin|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_begin|>",
    "<｜tool▁calls▁begin｜>",
    "<tool_call>",
];

/// `TOOL_SECTIONS` and Hunyuan's `<tool_calls>` (SGLang's Hunyuan detector ends reasoning there).
const HUNYUAN_TOOLS: &[&str] = &[
    "<|tool_calls_section_begin|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_begin|>",
    "<｜tool▁calls▁begin｜>",
    "<tool_call>",
    "<tool_calls>",
];

const fn base(opens: &'static [&'static str], closes: &'static [&'static str]) -> Spec {
    Spec {
        opens,
        closes,
        close_keep: NONE,
        answer_opens: NONE,
        answer_closes: NONE,
        drops: NONE,
        implied_open: false,
        drop_stray_close: false,
        reopens: false,
        prompt_close_disables: true,
        content_prefix: None,
    }
}

const THINK_OPEN: &[&str] = &["<think>"];
const THINK_CLOSE: &[&str] = &["</think>"];

/// `<think>`...`</think>`, written by the model (Qwen3 hybrid, GLM-4.5, Kimi K2.5, ...).
pub(crate) const THINK: Spec = Spec {
    close_keep: TOOL_SECTIONS,
    ..base(THINK_OPEN, THINK_CLOSE)
};

/// `<think>` implied by the prompt: only `</think>` appears (DeepSeek-R1, QwQ, MiniMax-M2, Step;
/// vLLM's `kimi_k2` and `glm47`, whose templates open the block).
pub(crate) const THINK_IMPLIED: Spec = Spec {
    implied_open: true,
    ..THINK
};

/// Tencent Hy3: `<think>`, and a `<tool_calls>` block ends it.
pub(crate) const THINK_HUNYUAN: Spec = Spec {
    close_keep: HUNYUAN_TOOLS,
    ..base(THINK_OPEN, THINK_CLOSE)
};

/// Apertus: `<|inner_prefix|>`...`<|inner_suffix|>`; a tool block opened inside ends reasoning
/// (SGLang's Apertus detector moves it to the text).
pub(crate) const APERTUS: Spec = Spec {
    close_keep: &["<|tools_prefix|>"],
    ..base(&["<|inner_prefix|>"], &["<|inner_suffix|>"])
};

/// MiniMax-M2 with the thinking kept in the content, `<think>` restored in front.
pub(crate) const THINK_APPEND: Spec = Spec {
    content_prefix: Some("<think>"),
    ..base(NONE, NONE)
};

/// Kimi-VL-Thinking / Kimi-Dev.
pub(crate) const KIMI_VL: Spec = base(&["◁think▷"], &["◁/think▷"]);

/// Seed-OSS; `<seed:cot_budget_reflect>` notes stay inside the reasoning text.
pub(crate) const SEED_OSS: Spec = base(&["<seed:think>"], &["</seed:think>"]);

/// Magistral, Ministral-3-Reasoning.
pub(crate) const MISTRAL: Spec = base(&["[THINK]"], &["[/THINK]"]);

/// Command R7B / Command A: the response framing of CMD3 and CMD4 is removed, actions are kept.
pub(crate) const COHERE: Spec = Spec {
    answer_opens: &["<|START_RESPONSE|>", "<|START_TEXT|>"],
    answer_closes: &["<|END_RESPONSE|>", "<|END_TEXT|>"],
    // End-of-turn tokens never reach content (vLLM's Cohere parsers decode with special tokens
    // kept, so the turn's end token arrives as text).
    drops: &["<|END_OF_TURN_TOKEN|>"],
    ..base(&["<|START_THINKING|>"], &["<|END_THINKING|>"])
};

/// gpt-oss Harmony. Parsed by its own message machine (`harmony.rs`); these lists only name its
/// tokens (for `ReasoningFormat::markers` and the prompt's tail in `prompt_state`).
pub(crate) const HARMONY: Spec = Spec {
    answer_opens: &["<|channel|>final<|message|>"],
    answer_closes: &["<|return|>", "<|end|>"],
    drops: &[
        "<|start|>assistant",
        "<|start|>",
        "<|channel|>",
        "<|message|>",
        "<|constrain|>",
        "<|call|>",
        " to=functions.",
    ],
    prompt_close_disables: false,
    ..base(&["<|channel|>analysis<|message|>"], &["<|end|>"])
};

/// Gemma 4 thought channel; the model may cycle through several thought blocks. A channel
/// opened without its `thought` header is a thought channel too: vLLM's Gemma 4 reasoning
/// parser reads `<|channel>` alone as the start of thinking (the header is a plain token the
/// model sometimes skips).
pub(crate) const GEMMA4: Spec = Spec {
    reopens: true,
    drops: &["<|tool_response>", "<tool_response|>"],
    ..base(
        &["<|channel>thought\n", "<|channel>thought", "<|channel>"],
        &["<channel|>"],
    )
};

/// Kimi K3: the response wrapper is framing; `<|open|>tools` stays for the tool parser.
pub(crate) const KIMI_K3: Spec = Spec {
    answer_opens: &["<|open|>response<|sep|>"],
    answer_closes: &["<|close|>response<|sep|>"],
    ..base(&["<|open|>think<|sep|>"], &["<|close|>think<|sep|>"])
};

/// Inkling typed blocks. `<|end_message|>` also ends tool blocks, so a stray one is kept.
pub(crate) const INKLING: Spec = Spec {
    answer_opens: &["<|message_model|><|content_text|>", "<|content_text|>"],
    answer_closes: &["<|end_message|>"],
    drop_stray_close: false,
    prompt_close_disables: false,
    ..base(
        &["<|message_model|><|content_thinking|>", "<|content_thinking|>"],
        &["<|end_message|>"],
    )
};

/// Hunyuan-A13B: `<think>`...`</think>` then `<answer>`...`</answer>`; `<tool_calls>` ends
/// reasoning.
pub(crate) const HUNYUAN_A13B: Spec = Spec {
    answer_opens: &["<answer>"],
    answer_closes: &["</answer>"],
    close_keep: HUNYUAN_TOOLS,
    ..base(THINK_OPEN, THINK_CLOSE)
};

/// Ernie 4.5 (the prompt opens `<think>`): `...</think>` then optional `<response>`...`</response>`.
pub(crate) const ERNIE45: Spec = Spec {
    answer_opens: &["<response>"],
    answer_closes: &["</response>"],
    implied_open: true,
    ..base(THINK_OPEN, THINK_CLOSE)
};

/// Granite 3.2 plain phrases, plus Granite 3.3's `<think>`/`<response>` tags.
pub(crate) const GRANITE: Spec = Spec {
    answer_opens: &["Here is my response:", "Here's my response:", "<response>"],
    answer_closes: &["</response>"],
    ..base(
        &["Here is my thought process:", "Here's my thought process:", "<think>"],
        &["</think>"],
    )
};

/// Apriel 1.5 / 1.6: the prompt ends with the reasoning phrase, so reasoning is implied.
pub(crate) const APRIEL: Spec = Spec {
    drops: &["[END FINAL RESPONSE]"],
    implied_open: true,
    ..base(
        &["Here are my reasoning steps:\n", "Here are my reasoning steps:"],
        &["[BEGIN FINAL RESPONSE]"],
    )
};

/// Solar Open: reasoning and answer are separate assistant segments.
pub(crate) const SOLAR_OPEN: Spec = Spec {
    answer_opens: &["<|begin|>assistant<|content|>", "<|content|>"],
    answer_closes: &["<|end|>"],
    drops: &["<|begin|>assistant"],
    prompt_close_disables: false,
    ..base(&["<|begin|>assistant<|think|>", "<|think|>"], &["<|end|>"])
};

/// MiniMax M3 (crates.io `reasoning-parser` 1.10): `<mm:think>`; stray closers are dropped.
pub(crate) const MINIMAX_M3: Spec = Spec {
    drop_stray_close: true,
    ..base(&["<mm:think>"], &["</mm:think>"])
};
