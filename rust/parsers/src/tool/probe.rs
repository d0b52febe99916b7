//! Probes for region markers that are also ordinary text (`[`, `call:`, `<function=`): from the
//! text right after the marker they tell whether a call's head follows, so that prose keeps its
//! brackets and the stream holds back no more than the few characters a head needs.
use super::spec::Opens;

/// Characters of a function name in a call's head.
fn name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || b >= 0x80
}

/// A name (at least one character) at the start of `t`, then optional whitespace, then one of
/// `next`: `Yes`; `Pending` while `t` ends before that is settled.
fn name_then(t: &str, allow_ws: bool, next: &[u8]) -> Opens {
    let b = t.as_bytes();
    let n = b.iter().take_while(|&&c| name_char(c)).count();
    let mut i = n;
    if allow_ws {
        i += b[n..].iter().take_while(|c| c.is_ascii_whitespace()).count();
    }
    match b.get(i) {
        None => Opens::Pending,
        Some(c) if n > 0 && next.contains(c) => Opens::Yes,
        Some(_) => Opens::No,
    }
}

/// After `[`: a Python call list, `[NAME(` (whitespace allowed around the name).
pub(crate) fn python_list(t: &str) -> Opens {
    let lead = t.len() - t.trim_start().len();
    if lead == t.len() {
        return Opens::Pending;
    }
    let rest = &t[lead..];
    if !rest.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return Opens::No;
    }
    name_then(rest, true, b"(")
}

/// After Gemma's `call:` or `<call>`: `NAME{` (or the `NAME(` some Gemma outputs use).
pub(crate) fn gemma_call(t: &str) -> Opens {
    name_then(t, false, b"{(")
}

/// After `<function=`: `NAME>` and, after optional whitespace, a JSON object.
pub(crate) fn function_json(t: &str) -> Opens {
    let b = t.as_bytes();
    let n = b
        .iter()
        .take_while(|&&c| name_char(c) || c == b':' || c == b'/')
        .count();
    match b.get(n) {
        None => return Opens::Pending,
        Some(b'>') if n > 0 => {}
        Some(_) => return Opens::No,
    }
    let rest = &t[n + 1..];
    match rest.trim_start().as_bytes().first() {
        None => Opens::Pending,
        Some(b'{') => Opens::Yes,
        Some(_) => Opens::No,
    }
}

/// After `{`: a JSON call object, `{"name":` (or `"tool_name"`), whitespace allowed.
pub(crate) fn json_call_object(t: &str) -> Opens {
    let rest = t.trim_start();
    if rest.is_empty() {
        return Opens::Pending;
    }
    let mut undecided = false;
    for key in ["\"name\"", "\"tool_name\""] {
        if let Some(after) = rest.strip_prefix(key) {
            return match after.trim_start().as_bytes().first() {
                None => Opens::Pending,
                Some(b':') => Opens::Yes,
                Some(_) => Opens::No,
            };
        }
        undecided |= key.starts_with(rest);
    }
    if undecided {
        Opens::Pending
    } else {
        Opens::No
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_read_heads() {
        assert_eq!(python_list("get_weather(city='Paris')]"), Opens::Yes);
        assert_eq!(python_list("\n get_weather ("), Opens::Yes);
        assert_eq!(python_list("1, 2]"), Opens::No);
        assert_eq!(python_list("see below]"), Opens::No);
        assert_eq!(python_list("text](http://x)"), Opens::No);
        assert_eq!(python_list("get_wea"), Opens::Pending);
        assert_eq!(python_list("  "), Opens::Pending);
        assert_eq!(gemma_call("bash{command:"), Opens::Yes);
        assert_eq!(gemma_call("web-search{"), Opens::Yes);
        assert_eq!(gemma_call(" the"), Opens::No);
        assert_eq!(gemma_call("fs.read"), Opens::Pending);
        assert_eq!(function_json("get_weather>{\"a\": 1}"), Opens::Yes);
        assert_eq!(function_json("get_weather>\n<parameter=a>"), Opens::No);
        assert_eq!(function_json("get_weather"), Opens::Pending);
        assert_eq!(function_json("get_weather>\n "), Opens::Pending);
        assert_eq!(json_call_object(" \"name\": \"f\"}"), Opens::Yes);
        assert_eq!(json_call_object("\"na"), Opens::Pending);
        assert_eq!(json_call_object("\"a\": 1}"), Opens::No);
        assert_eq!(json_call_object("\"name\" x"), Opens::No);
    }
}
