//! gpt-oss Harmony message headers, shared by the reasoning parser (which routes each message's
//! text) and the tool-call parser (which reads calls out of it).
//!
//! A Harmony completion is a run of messages. Each has a header, then `<|message|>`, then its
//! text up to `<|end|>`, `<|call|>` or `<|return|>`:
//!
//! ```text
//! <|channel|>analysis<|message|>...<|end|>
//! <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}<|call|>
//! <|start|>assistant<|channel|>final<|message|>...<|return|>
//! ```
//!
//! Headers come in the variants real servers and models produce, and all of them are read the
//! same way (the openai/harmony library's rules): the recipient may sit in the role part
//! (`<|start|>assistant to=functions.x<|channel|>commentary json`) or after the channel name; a
//! newline or spaces may separate any two parts (`<|channel|>analysis\n<|message|>`);
//! `<|constrain|>` may touch the channel name or the recipient and its type may be in any case
//! (`final<|constrain|> JSON `). The prompt ends with `<|start|>assistant`, so the first header
//! of a completion often has no `<|start|>` (`<|channel|>...`) or starts mid-role
//! (` to=functions.x<|channel|>commentary ...`).

/// Opens a message header with its role.
pub(crate) const START: &str = "<|start|>";
/// Introduces the channel part of a header.
pub(crate) const CHANNEL: &str = "<|channel|>";
/// Ends a header; the message text follows.
pub(crate) const MESSAGE: &str = "<|message|>";
/// Introduces a content type in a header.
pub(crate) const CONSTRAIN: &str = "<|constrain|>";
/// Ends a message.
pub(crate) const END: &str = "<|end|>";
/// Ends a message that is a tool call (also a stop token, so often absent from the text).
pub(crate) const CALL: &str = "<|call|>";
/// Ends the final message (a stop token, so often absent from the text).
pub(crate) const RETURN: &str = "<|return|>";

/// The tokens that end a message's text.
pub(crate) const TERMINATORS: &[&str] = &[END, CALL, RETURN];

use crate::scan::find;

/// Built-in tools of gpt-oss: their calls are run by the serving side, never by the client.
const BUILT_IN: &[&str] = &["python", "browser", "container"];

/// What a message is, as its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind<'a> {
    /// The `analysis` channel: reasoning.
    Analysis,
    /// Text for the user: the `final` channel, a `commentary` preamble (no recipient), another
    /// channel or none.
    Content,
    /// A call of the client's function `NAME` (`to=functions.NAME`).
    Call(&'a str),
    /// Shown to no one: a built-in tool's call (`to=browser.search`, `to=python`) or a message of
    /// another role (a tool's response written back in the history).
    Hidden,
}

/// Classify a header: the text from the header's start up to (not including) `<|message|>`,
/// starting with `<|start|>`, with `<|channel|>` or mid-role (` to=...`, the role itself having
/// been in the prompt).
pub(crate) fn classify(header: &str) -> Kind<'_> {
    let (role_part, channel_part) = split(header);
    classify_parts(role_part, channel_part)
}

/// Classify a header from its parts: the role part (what followed `<|start|>`, or mid-role text)
/// and the channel part (what followed `<|channel|>`).
pub(crate) fn classify_parts<'a>(role_part: Option<&'a str>, channel_part: Option<&'a str>) -> Kind<'a> {
    let mut role = None;
    let mut recipient = None;
    if let Some(part) = role_part {
        for_each_word(part, |word| match word.strip_prefix("to=") {
            Some(r) => recipient = Some(r),
            None if role.is_none() => role = Some(word),
            None => {}
        });
    }
    let mut channel = None;
    if let Some(part) = channel_part {
        let mut first = true;
        for_each_word(part, |word| {
            match word.strip_prefix("to=") {
                Some(r) => recipient = Some(r),
                None if first => channel = Some(word),
                // A content type (`json`, `code`): it does not change how the text is read.
                None => {}
            }
            first = false;
        });
    }
    if role.is_some_and(|r| !r.eq_ignore_ascii_case("assistant")) {
        return Kind::Hidden;
    }
    if let Some(r) = recipient {
        return recipient_kind(r);
    }
    match channel {
        Some(c) if c.eq_ignore_ascii_case("analysis") => Kind::Analysis,
        _ => Kind::Content,
    }
}

/// Split what followed `<|start|>` (a role part, then maybe a channel part).
pub(crate) fn split_role(text: &str) -> (Option<&str>, Option<&str>) {
    match find(text, CHANNEL) {
        Some(p) => (Some(&text[..p]), Some(&text[p + CHANNEL.len()..])),
        None => (Some(text), None),
    }
}

/// What a message addressed to `recipient` is.
fn recipient_kind(recipient: &str) -> Kind<'_> {
    if let Some(name) = recipient.strip_prefix("functions.") {
        return if name.is_empty() {
            Kind::Hidden
        } else {
            Kind::Call(name)
        };
    }
    let namespace = recipient.split('.').next().unwrap_or(recipient);
    if BUILT_IN.contains(&namespace) || matches!(recipient, "assistant" | "user" | "system" | "developer") {
        return Kind::Hidden;
    }
    // Another namespace (`to=api.users.create`) names the function by its last part, as the
    // sgl-router's gpt-oss parser reads it; a bare name (`to=lookup_weather`) is the function.
    match recipient.rsplit('.').next() {
        Some(name) if !name.is_empty() => Kind::Call(name),
        _ => Kind::Hidden,
    }
}

/// The role part (after `<|start|>`, or the mid-role text before the first `<|channel|>`) and the
/// channel part (after `<|channel|>`) of a header. Mid-role text (` to=functions.x`) has no role
/// word, which `classify_parts` reads as the assistant.
fn split(header: &str) -> (Option<&str>, Option<&str>) {
    let h = header.trim_start();
    if let Some(after) = h.strip_prefix(START) {
        return split_role(after);
    }
    match find(h, CHANNEL) {
        Some(0) => (None, Some(&h[CHANNEL.len()..])),
        Some(p) => (Some(&h[..p]), Some(&h[p + CHANNEL.len()..])),
        None if h.is_empty() => (None, None),
        None => (Some(h), None),
    }
}

/// Call `f` on each word of a header part: words are separated by whitespace and by `<|...|>`
/// tokens (`<|constrain|>` may touch the word before it: `json<|constrain|>`, `final<|constrain|>JSON`).
fn for_each_word<'a>(part: &'a str, mut f: impl FnMut(&'a str)) {
    let b = part.as_bytes();
    let (mut i, mut start) = (0, 0);
    while i < b.len() {
        let token = b[i] == b'<' && b.get(i + 1) == Some(&b'|');
        if b[i].is_ascii_whitespace() || token {
            if i > start {
                f(&part[start..i]);
            }
            i = if token {
                find(&part[i + 2..], "|>").map_or(b.len(), |p| i + 2 + p + 2)
            } else {
                i + 1
            };
            start = i;
        } else {
            i += 1;
        }
    }
    if start < b.len() {
        f(&part[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Headers as gpt-oss and other servers write them (sources: openai/harmony src/tests.rs,
    // llama.cpp tests/test-chat.cpp GPT_OSS, vLLM tests/reasoning/test_gptoss_reasoning_parser.py,
    // vllm-mlx tests/test_harmony_parsers.py).
    #[test]
    fn header_variants() {
        for (want, headers) in [
            (Kind::Analysis, &["<|channel|>analysis", "<|channel|>analysis\n"][..]),
            (
                Kind::Content,
                &[
                    "<|start|>assistant<|channel|>final",
                    "<|channel|>final<|constrain|> JSON ",
                    "<|channel|>final <|constrain|>ReplyAction ",
                    "<|channel|>commentary",
                    "<|start|>assistant",
                    "<|channel|>unknown",
                    "",
                ],
            ),
            (
                Kind::Hidden,
                &[
                    "<|channel|>analysis to=browser.search",
                    "<|channel|>analysis to=python code",
                    "<|start|>user",
                    "<|start|>functions.get_weather to=assistant<|channel|>commentary",
                ],
            ),
        ] {
            for header in headers {
                assert_eq!(classify(header), want, "{header:?}");
            }
        }
        // A call of a client function: the recipient's last dotted part, wherever it stands.
        for (header, name) in [
            (
                "<|channel|>commentary to=functions.get_weather <|constrain|>json",
                "get_weather",
            ),
            (
                "<|channel|>commentary to=functions.get_weather<|constrain|>json",
                "get_weather",
            ),
            ("<|start|>assistant to=functions.f<|channel|>commentary json", "f"),
            (
                " to=functions.special_function<|channel|>commentary <|constrain|>json",
                "special_function",
            ),
            (
                " to=functions.special_function<|channel|>analysis <|constrain|>json",
                "special_function",
            ),
            (
                "<|channel|>commentary to=functions.get_weather\n<|constrain|>json\n",
                "get_weather",
            ),
            ("<|channel|>analysis to=lookup_weather code", "lookup_weather"),
            ("<|channel|>commentary to=api.users.create<|constrain|>json", "create"),
        ] {
            assert_eq!(classify(header), Kind::Call(name), "{header:?}");
        }
    }
}
