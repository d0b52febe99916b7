//! Preparing a template's source for minijinja, where jinja2's lexer and parser behave differently.
//!
//! * jinja2 turns `\r\n` and `\r` into `\n`; minijinja keeps them.
//! * transformers' `{% generation %}...{% endgeneration %}` tag renders its body; it becomes
//!   `{% if true %}...{% endif %}` with the same whitespace-control markers, so `trim_blocks`,
//!   `lstrip_blocks` and `-` act exactly as around the original tag.
//! * `{% for c in text %}` over a string has `loop.last`/`loop.length` in jinja2, but minijinja 2's string
//!   iterator reports no exact length. Every loop's iterable `EXPR` becomes `(EXPR)|smgpy_iter`, a filter that
//!   turns strings into lists of characters and passes everything else through unchanged.
//! * `"..."|safe + x` escapes `x` in jinja2 (Markup arithmetic); see `markup.rs`.

/// Name of the filter wrapped around every `for` loop's iterable.
pub const ITER_FILTER: &str = "smgpy_iter";

/// Apply all rewrites.
pub fn prepare_source(source: &str) -> String {
    let normalized;
    let source = if source.contains('\r') {
        normalized = source.replace("\r\n", "\n").replace('\r', "\n");
        normalized.as_str()
    } else {
        source
    };
    crate::markup::rewrite_markup_concat(&rewrite_tags(source))
}

/// Walk `{% ... %}` tags (skipping comments and raw blocks) and rewrite the ones that need it.
fn rewrite_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 64);
    let mut rest = source;
    let mut in_raw = false;
    loop {
        let tag_at = rest.find("{%");
        let comment_at = rest.find("{#");
        let start = match (tag_at, comment_at) {
            (Some(t), Some(c)) if c < t && !in_raw => {
                let end = rest[c..].find("#}").map_or(rest.len(), |e| c + e + 2);
                out.push_str(&rest[..end]);
                rest = &rest[end..];
                continue;
            }
            (Some(t), _) => t,
            (None, _) => break,
        };
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let (lead, body, trail) = split_markers(&tag[2..end]);
        let keyword = body.trim();
        let replacement = if in_raw {
            in_raw = keyword != "endraw";
            None
        } else {
            match keyword {
                "raw" => {
                    in_raw = true;
                    None
                }
                "generation" => Some("if true".to_string()),
                "endgeneration" => Some("endif".to_string()),
                k if k.starts_with("for ") || k.starts_with("for(") => wrap_for_iterable(k),
                _ => None,
            }
        };
        match replacement {
            Some(r) => push_tag(&mut out, ("{%", "%}"), lead, &r, trail),
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A tag's inner text (between `{%` and `%}`, or `{{` and `}}`) split into its leading
/// whitespace-control marker (`-`, `+` or none), its body and its trailing marker, so that a rewrite
/// of the body keeps the markers and `trim_blocks`/`lstrip_blocks` act as around the original.
pub(crate) fn split_markers(inner: &str) -> (&str, &str, &str) {
    let (lead, body) = match inner.strip_prefix(['-', '+']) {
        Some(b) => (&inner[..1], b),
        None => ("", inner),
    };
    match body.strip_suffix(['-', '+']) {
        Some(b) => (lead, b, &body[body.len() - 1..]),
        None => (lead, body, ""),
    }
}

/// Append the tag `open lead body trail close` (`{%- body %}`) to `out`: a rewritten body between
/// the markers [`split_markers`] took from the original tag.
pub(crate) fn push_tag(out: &mut String, (open, close): (&str, &str), lead: &str, body: &str, trail: &str) {
    for part in [open, lead, " ", body, " ", trail, close] {
        out.push_str(part);
    }
}

/// A walk over the bytes of a template expression that skips string literals (and the escapes in
/// them) and counts brackets: each byte outside strings that is not a quote or a bracket, with its
/// offset and the depth of the brackets around it.
pub(crate) struct TopLevel<'a> {
    bytes: &'a [u8],
    i: usize,
    depth: i32,
    quote: Option<u8>,
}

impl<'a> TopLevel<'a> {
    /// The walk over `text` from byte offset `from`.
    pub(crate) fn new(text: &'a str, from: usize) -> Self {
        Self {
            bytes: text.as_bytes(),
            i: from,
            depth: 0,
            quote: None,
        }
    }

    /// Continue at byte offset `i` (past a word the caller has read).
    pub(crate) fn skip_to(&mut self, i: usize) {
        self.i = i;
    }

    /// Whether every bracket and string opened so far is closed.
    pub(crate) fn balanced(&self) -> bool {
        self.depth == 0 && self.quote.is_none()
    }
}

impl Iterator for TopLevel<'_> {
    type Item = (usize, u8, i32);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(&b) = self.bytes.get(self.i) {
            let i = self.i;
            self.i += 1;
            if let Some(q) = self.quote {
                if b == b'\\' {
                    self.i += 1;
                } else if b == q {
                    self.quote = None;
                }
                continue;
            }
            match b {
                b'\'' | b'"' => self.quote = Some(b),
                b'(' | b'[' | b'{' => self.depth += 1,
                b')' | b']' | b'}' => self.depth -= 1,
                _ => return Some((i, b, self.depth)),
            }
        }
        None
    }
}

/// Byte offsets of top-level whole-word `word` in `text` (outside strings and brackets).
fn top_level_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    TopLevel::new(text, from)
        .find(|&(i, _, depth)| {
            let after = i + word.len();
            depth == 0
                && bytes[i..].starts_with(word.as_bytes())
                && (i == 0 || bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b')')
                && (after == bytes.len() || bytes[after].is_ascii_whitespace() || bytes[after] == b'(')
        })
        .map(|(i, ..)| i)
}

/// `for TARGET in EXPR [if COND] [recursive]` -> `for TARGET in (EXPR)|smgpy_iter [if COND] [recursive]`.
fn wrap_for_iterable(body: &str) -> Option<String> {
    let in_at = top_level_word(body, "in", 3)?;
    let expr_start = in_at + 2;
    let expr_end = [
        top_level_word(body, "if", expr_start),
        top_level_word(body, "recursive", expr_start),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(body.len());
    let expr = body[expr_start..expr_end].trim();
    if expr.is_empty() {
        return None;
    }
    Some(
        format!(
            "{} in ({expr})|{ITER_FILTER} {}",
            &body[..in_at].trim_end(),
            &body[expr_end..]
        )
        .trim_end()
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_become_plain_blocks() {
        assert_eq!(
            prepare_source("a{%- generation %}b{% endgeneration -%}c"),
            "a{%- if true %}b{% endif -%}c"
        );
        assert_eq!(
            prepare_source("{{ add_generation_prompt }}\r\n"),
            "{{ add_generation_prompt }}\n"
        );
    }

    #[test]
    fn for_loops_wrap_their_iterable() {
        assert_eq!(
            prepare_source("{%- for m in messages -%}"),
            "{%- for m in (messages)|smgpy_iter -%}"
        );
        assert_eq!(
            prepare_source("{% for k, v in x.items() if k != 'in' recursive %}"),
            "{% for k, v in (x.items())|smgpy_iter if k != 'in' recursive %}"
        );
        assert_eq!(
            prepare_source("{% for x in a if b else c %}"),
            "{% for x in (a)|smgpy_iter if b else c %}"
        );
        assert_eq!(
            prepare_source("{# {% for x in y %} #}{% raw %}{% for a in b %}{% endraw %}"),
            "{# {% for x in y %} #}{% raw %}{% for a in b %}{% endraw %}"
        );
    }
}
