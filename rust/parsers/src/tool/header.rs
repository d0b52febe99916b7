//! Regions that are a header naming what follows: a Harmony message header and Functionary
//! v3.2's recipient line. Their outcome says how the text after them is read.
use super::body::{valid_name, Outcome, Target};
use super::spec::End;
use crate::harmony::{self, Kind, CALL, CHANNEL, END, RETURN, START, TERMINATORS};

/// Where hidden Harmony text ends: at its terminator (consumed), or at the next header when the
/// terminator is missing (kept: it opens the next message).
const HIDDEN_ENDS: &[&str] = &[END, CALL, RETURN, START, CHANNEL];

/// A Harmony header (`text` is what followed `<|start|>` when `role`, else `<|channel|>`): a
/// function recipient makes the message's text a call's arguments, which are kept raw when they
/// are not JSON (vLLM, vllm-mlx and SMG keep them); analysis text, built-in tool calls and
/// other roles' messages are hidden; final text, preambles and header-less text are normal text.
pub(crate) fn harmony(text: &str, role: bool) -> Outcome {
    let (role_part, channel_part) = if role {
        harmony::split_role(text)
    } else {
        (None, Some(text))
    };
    let hidden = Outcome::Follow {
        target: Target::Discard,
        end: End::MarkerKeep(HIDDEN_ENDS, 3),
    };
    match harmony::classify_parts(role_part, channel_part) {
        Kind::Call(name) => match valid_name(name) {
            Some(name) => Outcome::Follow {
                target: Target::Args {
                    name,
                    id: None,
                    raw: true,
                },
                end: End::Marker(TERMINATORS),
            },
            None => hidden,
        },
        Kind::Analysis | Kind::Hidden => hidden,
        Kind::Content => Outcome::Drop,
    }
}

/// Functionary v3.2 `>>>NAME` line: `all` introduces plain text.
pub(crate) fn functionary(text: &str) -> Outcome {
    let t = text.trim();
    let t = t.strip_prefix(">>>").unwrap_or(t).trim();
    if t == "all" {
        return Outcome::Drop;
    }
    match valid_name(t) {
        Some(name) => Outcome::Follow {
            target: Target::Args {
                name,
                id: None,
                raw: false,
            },
            end: End::Balanced,
        },
        None => Outcome::Text,
    }
}
