//! Read the end of a rendered prompt to learn whether the output starts inside reasoning.
//!
//! Templates differ (formats.md §3.2): Qwen3.5 ends `<think>\n` (opening implied), Qwen3 with
//! `enable_thinking=false` ends `<think>\n\n</think>\n\n`, GLM-4.7 ends `</think>`, Apriel ends
//! with its reasoning phrase. Only the tail matters: the last marker before the generation point.
use super::{ReasoningFormat, ReasoningOptions};

/// Decide [`ReasoningOptions`] from the end of the rendered prompt.
///
/// A prompt that ends (ignoring trailing whitespace) with a closing marker has thinking switched
/// off; one that ends with an opening marker has opened the reasoning block for the model.
pub fn prompt_state(format: ReasoningFormat, rendered_prompt: &str) -> ReasoningOptions {
    let spec = format.spec();
    let tail = rendered_prompt.trim_end();
    let ends_with_any = |list: &[&str]| {
        list.iter()
            .any(|m| !m.trim_end().is_empty() && tail.ends_with(m.trim_end()))
    };
    if spec.prompt_close_disables && ends_with_any(spec.closes) {
        return ReasoningOptions {
            prompt_opened_reasoning: false,
            thinking_disabled: true,
            reasoning_not_started: false,
        };
    }
    ReasoningOptions {
        prompt_opened_reasoning: ends_with_any(spec.opens),
        thinking_disabled: false,
        reasoning_not_started: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReasoningFormat as F;

    fn st(f: ReasoningFormat, p: &str) -> (bool, bool) {
        let o = prompt_state(f, p);
        (o.prompt_opened_reasoning, o.thinking_disabled)
    }

    #[test]
    fn template_tails() {
        // (format, prompt tail, (prompt opened reasoning, thinking disabled))
        for (f, prompt, want) in [
            (F::Qwen3, "<|im_start|>assistant\n", (false, false)),
            (F::Qwen3, "<|im_start|>assistant\n<think>\n", (true, false)),
            (
                F::Qwen3,
                "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                (false, true),
            ),
            (F::Glm45, "<|assistant|>\n<think></think>", (false, true)),
            (F::DeepseekV3, "<｜Assistant｜></think>", (false, true)),
            (F::DeepseekV3, "<｜Assistant｜><think>", (true, false)),
            (
                F::Apriel,
                "<|begin_assistant|>\nHere are my reasoning steps:\n",
                (true, false),
            ),
            (F::OpenaiGptoss, "<|end|><|start|>assistant", (false, false)),
            (F::Inkling, "hi<|end_message|>", (false, false)),
            (F::SeedOss, "assistant\n<seed:think>", (true, false)),
        ] {
            assert_eq!(st(f, prompt), want, "{f} {prompt:?}");
        }
    }
}
