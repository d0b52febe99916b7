//! The char-by-char stream the reasoning tests compare with a complete parse.
#![allow(dead_code)]

use smgpy_parsers::reasoning::{self, ReasoningFormat, ReasoningOptions, ReasoningParser};

/// Parse completely and streamed one char at a time; both must agree. Returns (reasoning, content).
pub fn run(name: &str, text: &str, o: ReasoningOptions) -> (String, String) {
    let f: ReasoningFormat = name.parse().unwrap();
    let full = reasoning::parse_complete(text, f, o.clone());
    let (r, c) = stream_chars(ReasoningParser::new(f, o), text);
    assert_eq!(
        (&full.reasoning, &full.content),
        (&r, &c),
        "streamed != complete for {name}: {text:?}"
    );
    (r, c)
}

/// `run` with default options gives `(reasoning, content)`.
pub fn check(name: &str, text: &str, reasoning: &str, content: &str) {
    assert_eq!(
        run(name, text, ReasoningOptions::default()),
        (reasoning.into(), content.into()),
        "{name}: {text:?}"
    );
}

/// [`check`] for each `(text, reasoning, content)` of `cases`, read with the format `name`.
pub fn check_cases(name: &str, cases: &[(&str, &str, &str)]) {
    for (text, reasoning, content) in cases {
        check(name, text, reasoning, content);
    }
}

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
