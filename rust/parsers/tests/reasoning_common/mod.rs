//! The char-by-char stream the reasoning tests compare with a complete parse.

use smgpy_parsers::reasoning::ReasoningParser;

/// Push `text` through `p` one char at a time, then finish: the `(reasoning, content)` a client
/// assembles from the deltas.
pub fn stream_chars(mut p: ReasoningParser, text: &str) -> (String, String) {
    let (mut r, mut c) = (String::new(), String::new());
    for ch in text.chars() {
        let d = p.push(ch.encode_utf8(&mut [0; 4]));
        r += &d.reasoning;
        c += &d.content;
    }
    let d = p.finish();
    r += &d.reasoning;
    c += &d.content;
    (r, c)
}
