//! Log lines that a client cannot forge: every control character of a logged field is escaped,
//! so a request field holding `\n` or `\r` stays on its own log line.

use std::borrow::Cow;

/// Whether `c` could break or rewrite a log line: C0 and C1 controls (tab excepted), DEL and
/// the Unicode line and paragraph separators.
fn breaks_lines(c: char) -> bool {
    (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}'
}

/// `text` with control characters escaped (`\n`, `\r`, `\u{1b}`), borrowed when it has none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(breaks_lines) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if breaks_lines(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// One formatted log event with control characters escaped, except the line break that ends
/// it: what a log writer passes on, so that no field of the event starts a line of its own.
pub fn escape_event(event: &str) -> Cow<'_, str> {
    match event.strip_suffix('\n') {
        Some(body) => match escape(body) {
            Cow::Borrowed(_) => Cow::Borrowed(event),
            Cow::Owned(mut s) => {
                s.push('\n');
                Cow::Owned(s)
            }
        },
        None => escape(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(escape("plain\ttext"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nINFO forged\r\u{1b}[2J"), "a\\nINFO forged\\r\\u{1b}[2J");
        assert_eq!(escape("x\u{2028}y\u{85}"), "x\\u{2028}y\\u{85}");
    }

    #[test]
    fn an_event_keeps_its_own_line_break() {
        assert_eq!(escape_event("rid=a\nb\n"), "rid=a\\nb\n");
        assert!(matches!(escape_event("ok\n"), Cow::Borrowed(_)));
    }
}
