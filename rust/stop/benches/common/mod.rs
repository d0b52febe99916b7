//! Bench corpus shared by the criterion bench and the SMG peer bench: the same text and stop
//! lists, so numbers from both can be compared.

/// Words with many near-misses of the stop strings below (`<|`, `</`, `\n`, `#`, `User`).
const WORDS: &[&str] = &[
    "the", "model", "answer", "is", "<|im", "_start|>", "</ans", "wer", "User", "\n", "#", "##", "of", "token",
    "stream", "终", "止", "<｜", "end", "▁", "and", "to", "a", "<", "|", "reserved",
];

/// Deterministic pseudo-random text of about `len` bytes with no full stop-string match.
pub fn text(len: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out
}

/// `n` stop strings: four common ones, then reserved-token-like ones.
pub fn stop_list(n: usize) -> Vec<String> {
    let mut stops: Vec<String> = ["<|im_end|>", "\n\nUser:", "</answer>", "###"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut i = 0;
    while stops.len() < n {
        stops.push(format!("<|reserved_special_token_{i}|>"));
        i += 1;
    }
    stops.truncate(n);
    stops
}

/// Split on char boundaries into pieces of about `size` bytes (like detokenised tokens).
pub fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}
