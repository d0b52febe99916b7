//! Static inspection of a template's source: what shape of input it expects.
//!
//! The normaliser needs to know, per template, whether to flatten content-part arrays, whether string tool
//! arguments must become objects, and whether assistant tool-call turns need a `content`. These are read
//! off the source text; the patterns are the spellings real Hub templates use.

/// What a template expects of its inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateInfo {
    /// The template walks content-part arrays (`content is string` checks, `for part in message.content`).
    pub iterates_content_parts: bool,
    /// The template reads `message.content` without checking that it exists, so tool-call-only assistant
    /// turns need `content` set.
    pub needs_content_on_tool_calls: bool,
    /// The template serialises or walks tool-call `arguments` (`arguments | tojson`, `arguments.items()`),
    /// so arguments given as a JSON string must become an object.
    pub arguments_as_object: bool,
    /// The template mentions `tools`.
    pub mentions_tools: bool,
}

/// Is `needle` found in `source` with only whitespace/quotes/brackets between it and one of `follow`?
fn followed_by(source: &str, needle: &str, follow: &[&str], window: usize) -> bool {
    source.match_indices(needle).any(|(i, _)| {
        let start = i + needle.len();
        let mut end = (start + window).min(source.len());
        while !source.is_char_boundary(end) {
            end -= 1;
        }
        let after = &source[start..end];
        follow.iter().any(|f| after.contains(f))
    })
}

impl TemplateInfo {
    /// Inspect a template source.
    pub fn inspect(source: &str) -> Self {
        let compact: String = source.split_whitespace().collect::<Vec<_>>().join(" ");
        let s = compact.as_str();
        let iterates_content_parts = followed_by(
            s,
            "content",
            &["is string", "is not string", "is iterable", "is sequence", "is mapping"],
            16,
        ) || [
            "in message.content",
            "in message['content']",
            "in message[\"content\"]",
            "in content ",
            "in content-",
            "in content%",
        ]
        .iter()
        .any(|p| s.contains(p))
            || followed_by(s, "content", &["[0]", "['type']", "[\"type\"]", ".type"], 12);
        let guards_content = [
            "content is defined",
            "content is not defined",
            "'content' in message",
            "\"content\" in message",
            "content is none",
            "content is not none",
            ".get('content'",
            ".get(\"content\"",
        ]
        .iter()
        .any(|p| s.contains(p));
        let reads_content = s.contains(".content") || s.contains("['content']") || s.contains("[\"content\"]");
        let arguments_as_object = followed_by(
            s,
            "arguments",
            &[
                "tojson",
                ".items()",
                "| items",
                "|items",
                "is mapping",
                "is string",
                "is not string",
                ".get(",
            ],
            24,
        );
        Self {
            iterates_content_parts,
            needs_content_on_tool_calls: reads_content && !guards_content,
            arguments_as_object,
            mentions_tools: s.contains("tools"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_common_spellings() {
        let qwen =
            "{%- if message.content is string %}{{ message.content }}{% endif %}{{ tool_call.arguments | tojson }}";
        let info = TemplateInfo::inspect(qwen);
        assert!(info.iterates_content_parts);
        assert!(info.arguments_as_object);
        assert!(info.needs_content_on_tool_calls);
        let plain = "{% for message in messages %}{% if message.content is defined %}{{ message['content'] }}{% endif %}{% endfor %}";
        let info = TemplateInfo::inspect(plain);
        assert!(!info.iterates_content_parts);
        assert!(!info.arguments_as_object);
        assert!(!info.needs_content_on_tool_calls);
        assert!(!info.mentions_tools);
    }
}
