//! The sampling and structured-output fields that the OpenAI-style endpoints (chat completions,
//! completions, and `/generate`'s `sampling_params` under SGLang's names) all take, declared once.
//!
//! Why a macro and not `#[serde(flatten)]`: a flattened struct is deserialised from a buffer, so
//! `serde_path_to_error` loses the field's path and a wrong type would be a 400 without `param`.
//! [`with_sampling_fields!`] writes the fields into each request struct itself, so every one is a
//! top-level field with an exact path, and adds the methods that read them.

/// Declare `$name` with its own fields followed by the shared ones, and implement
/// `shared_sampling(max_new_tokens)` (the engine's sampling parameters) and `structured()` (the
/// structured output asked for, in any of the shapes clients send).
#[macro_export]
macro_rules! with_sampling_fields {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            #[serde(default, alias = "min_new_tokens")]
            pub min_tokens: Option<u32>,
            #[serde(default)]
            pub temperature: Option<f64>,
            #[serde(default)]
            pub top_p: Option<f64>,
            #[serde(default)]
            pub top_k: Option<i64>,
            #[serde(default)]
            pub min_p: Option<f64>,
            #[serde(default)]
            pub repetition_penalty: Option<f64>,
            #[serde(default)]
            pub frequency_penalty: Option<f64>,
            #[serde(default)]
            pub presence_penalty: Option<f64>,
            #[serde(default)]
            pub stop: Option<$crate::common::StopField>,
            #[serde(default)]
            pub stop_token_ids: Option<Vec<i64>>,
            #[serde(default)]
            pub include_stop_str_in_output: bool,
            #[serde(default)]
            pub ignore_eos: Option<bool>,
            #[serde(default, alias = "sampling_seed")]
            pub seed: Option<i64>,
            #[serde(default)]
            pub n: Option<u32>,
            #[serde(default)]
            pub logit_bias: Option<serde_json::Map<String, serde_json::Value>>,
            /// The most tokens to draft per step for speculative decoding (`mlx_lm.server`'s
            /// name); 0 turns speculation off for this request.
            #[serde(default)]
            pub num_draft_tokens: Option<u32>,
            /// Structured output (see `structured::from_openai`): OpenAI's `response_format`,
            /// vLLM's `structured_outputs` and `guided_*`, SGLang's `json_schema` / `regex` /
            /// `ebnf` / `structural_tag`.
            #[serde(default)]
            pub response_format: Option<serde_json::Value>,
            #[serde(default)]
            pub structured_outputs: Option<serde_json::Value>,
            #[serde(default)]
            pub guided_json: Option<serde_json::Value>,
            #[serde(default)]
            pub guided_regex: Option<serde_json::Value>,
            #[serde(default)]
            pub guided_choice: Option<serde_json::Value>,
            #[serde(default)]
            pub guided_grammar: Option<serde_json::Value>,
            #[serde(default)]
            pub json_schema: Option<serde_json::Value>,
            #[serde(default)]
            pub regex: Option<serde_json::Value>,
            #[serde(default)]
            pub ebnf: Option<serde_json::Value>,
            #[serde(default)]
            pub structural_tag: Option<serde_json::Value>,
        }

        impl $name {
            /// The engine's sampling parameters from the shared fields.
            pub fn shared_sampling(&self, max_new_tokens: Option<u32>) -> $crate::sampling::SamplingParams {
                $crate::sampling::SamplingParams {
                    max_new_tokens,
                    min_new_tokens: self.min_tokens,
                    temperature: self.temperature,
                    top_p: self.top_p,
                    top_k: self.top_k,
                    min_p: self.min_p,
                    repetition_penalty: self.repetition_penalty,
                    frequency_penalty: self.frequency_penalty,
                    presence_penalty: self.presence_penalty,
                    stop: self
                        .stop
                        .clone()
                        .map($crate::common::StopField::into_vec)
                        .unwrap_or_default(),
                    stop_token_ids: self.stop_token_ids.clone().unwrap_or_default(),
                    ignore_eos: self.ignore_eos,
                    seed: self.seed,
                    n: self.n,
                    logit_bias: self.logit_bias.clone(),
                    num_draft_tokens: self.num_draft_tokens,
                    structured: self.structured().ok().flatten(),
                    response_format: self.response_format.clone(),
                }
            }

            /// The structured output this request asks for, in whichever shape it was sent.
            pub fn structured(
                &self,
            ) -> Result<Option<$crate::structured::Structured>, $crate::ProtocolError> {
                $crate::structured::from_openai($crate::structured::OpenAiFields {
                    response_format: self.response_format.as_ref(),
                    structured_outputs: self.structured_outputs.as_ref(),
                    guided_json: self.guided_json.as_ref(),
                    guided_regex: self.guided_regex.as_ref(),
                    guided_choice: self.guided_choice.as_ref(),
                    guided_grammar: self.guided_grammar.as_ref(),
                    json_schema: self.json_schema.as_ref(),
                    regex: self.regex.as_ref(),
                    ebnf: self.ebnf.as_ref(),
                    structural_tag: self.structural_tag.as_ref(),
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::chat::ChatCompletionRequest;
    use crate::completion::CompletionRequest;
    use crate::generate::GenerateBody;
    use crate::parse_json;

    /// Every shared field, with a value of the wrong type for it.
    const WRONG: &[(&str, &str)] = &[
        ("min_tokens", r#""x""#),
        ("temperature", r#""hot""#),
        ("top_p", "[]"),
        ("top_k", "1.5"),
        ("min_p", "{}"),
        ("repetition_penalty", "true"),
        ("frequency_penalty", r#""x""#),
        ("presence_penalty", r#""x""#),
        ("stop", "5"),
        ("stop_token_ids", r#""x""#),
        ("include_stop_str_in_output", "3"),
        ("ignore_eos", r#""yes""#),
        ("num_draft_tokens", "-1"),
        ("seed", "1.5"),
        ("n", "-1"),
        ("logit_bias", "[1]"),
    ];

    #[test]
    fn a_wrong_type_names_the_field_on_every_endpoint() {
        for (field, value) in WRONG {
            let chat = format!(r#"{{"messages":[],"{field}":{value}}}"#);
            let e = parse_json::<ChatCompletionRequest>(chat.as_bytes()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(*field), "chat {field}");
            let comp = format!(r#"{{"prompt":"x","{field}":{value}}}"#);
            let e = parse_json::<CompletionRequest>(comp.as_bytes()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(*field), "completions {field}");
            let gen = format!(r#"{{"text":"x","sampling_params":{{"{field}":{value}}}}}"#);
            let e = parse_json::<GenerateBody>(gen.as_bytes()).unwrap_err();
            assert_eq!(e.param, Some(format!("sampling_params.{field}")), "generate {field}");
        }
        // SGLang's own names are aliases, and keep their name in the error
        for (field, value) in [("min_new_tokens", r#""x""#), ("sampling_seed", r#""x""#)] {
            let gen = format!(r#"{{"text":"x","sampling_params":{{"{field}":{value}}}}}"#);
            let e = parse_json::<GenerateBody>(gen.as_bytes()).unwrap_err();
            assert_eq!(e.param, Some(format!("sampling_params.{field}")), "generate {field}");
        }
    }

    #[test]
    fn the_shared_fields_reach_the_engine_parameters() {
        let body =
            r#"{"text":"x","sampling_params":{"min_new_tokens":3,"sampling_seed":7,"max_new_tokens":9,"stop":"END"}}"#;
        let g: GenerateBody = parse_json(body.as_bytes()).unwrap();
        let s = g.sampling();
        assert_eq!(
            (s.min_new_tokens, s.seed, s.max_new_tokens),
            (Some(3), Some(7), Some(9))
        );
        assert_eq!(s.stop, ["END"]);
        let c: ChatCompletionRequest =
            parse_json(br#"{"messages":[],"max_tokens":5,"max_completion_tokens":6,"n":2,"seed":1}"#).unwrap();
        let s = c.sampling();
        assert_eq!((s.max_new_tokens, s.n, s.seed), (Some(6), Some(2), Some(1)));
    }
}
