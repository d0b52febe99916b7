//! Pre-tokenizer regexes run by the `regex` crate, the one lookahead they use written out.
//!
//! Why: byte-level BPE tokenizers (GPT-2's pattern in `ByteLevel`, and the `Split` patterns of
//! Llama 3, Qwen and others) end their pattern with `\s+(?!\S)|\s+`. The lookahead makes
//! `tokenizers` run it with `fancy-regex`'s backtracking VM: 4.0 us for an 85-character chat
//! message, about a third of encoding it, against 0.33 us for the same pattern without the
//! lookahead in the `regex` crate (a DFA). Long prompts seen for the first time pay it per byte.
//!
//! The lookahead has one meaning at the end of an alternation: where no earlier alternative
//! matches, a whitespace run followed by a non-space character is matched without its last
//! character if it has two or more (that character then starts the next piece, e.g. the space of
//! ` word`); a run of one, or one at the end of the text, is matched whole. So the pattern is run
//! as `(?:X)|\s+`, and a whitespace match that `X` does not make is shortened by that rule. Only
//! patterns of exactly that shape whose rest compiles in the `regex` crate are translated; every
//! other pre-tokenizer runs as `tokenizers` has it. Tested against `tokenizers`' own split.

use regex::Regex;
use tokenizers::tokenizer::pattern::Pattern;
use tokenizers::{Offsets, Result};

/// GPT-2's pre-tokenizer pattern, as `tokenizers`' `ByteLevel` applies it when `use_regex` is set.
pub const BYTE_LEVEL_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// The lookahead ending this module translates.
const TAIL: &str = r"|\s+(?!\S)|\s+";

/// A translated pattern: `(?:X)|\s+` to find pieces, and `X` anchored to tell whose a whitespace
/// piece is.
#[derive(Debug, Clone)]
pub struct LookaheadFree {
    pieces: Regex,
    head: Regex,
}

impl LookaheadFree {
    /// The translation of `pattern`, when it has the shape described in the module doc.
    pub fn new(pattern: &str) -> Option<Self> {
        let head = pattern.strip_suffix(TAIL)?;
        // No assertions (`^`, `$`, `\b`, ...) in the rest: whether `X` makes a whitespace piece is
        // then decided by the piece's own text.
        if !regex_syntax::parse(head).ok()?.properties().look_set().is_empty() {
            return None;
        }
        let head_re = Regex::new(&format!(r"\A(?:{head})")).ok()?;
        // A rest that matches nothing at all would make empty pieces, which this module does not
        // step over as `tokenizers` does.
        if head_re.is_match("") {
            return None;
        }
        Some(Self {
            pieces: Regex::new(&format!(r"(?:{head})|\s+")).ok()?,
            head: head_re,
        })
    }

    /// The pieces of `text` as `(start, end)`, as the original pattern finds them.
    fn pieces(&self, text: &str) -> Vec<Offsets> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(m) = self.pieces.find_at(text, at) {
            let (start, mut end) = (m.start(), m.end());
            let piece = m.as_str();
            if end < text.len() && piece.chars().all(char::is_whitespace) && !self.head.is_match(piece) {
                // `\s+` took the whole run and a non-space follows: `\s+(?!\S)` keeps the last
                // whitespace character for the next piece, unless it is the only one.
                if let Some((last, _)) = piece.char_indices().last().filter(|&(i, _)| i > 0) {
                    end = start + last;
                }
            }
            if end == start {
                break; // not reachable (`new` refuses such patterns); never loop on an empty piece
            }
            out.push((start, end));
            at = end;
        }
        out
    }
}

/// `tokenizers`' contract: every byte of `inside` in order, each range marked as a match or not.
impl Pattern for &LookaheadFree {
    fn find_matches(&self, inside: &str) -> Result<Vec<(Offsets, bool)>> {
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        let mut prev = 0;
        let mut splits = Vec::new();
        for (start, end) in self.pieces(inside) {
            if prev != start {
                splits.push(((prev, start), false));
            }
            splits.push(((start, end), true));
            prev = end;
        }
        if prev != inside.len() {
            splits.push(((prev, inside.len()), false));
        }
        Ok(splits)
    }
}
