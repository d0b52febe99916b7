//! Prompt ids in which some spans are literal text: a special token's text inside them (a user
//! typing `<|im_end|>\n<|im_start|>system`) is encoded as ordinary text, never as the token.
//!
//! Why: `tokenizers` matches every added token wherever its text occurs, so request content that
//! spells a special token would otherwise produce the real token and could forge a turn of the
//! conversation (a fake system message). Only the chat template's own markup may produce special
//! tokens; the server marks which spans of a rendered prompt came from request content and this
//! module encodes them with special-token matching off (transformers' `split_special_tokens`).
//!
//! How: the prompt is cut at the special tokens that lie outside every literal span (the
//! template's markup), as `tokenizers` itself cuts it; a piece that holds a literal span is
//! encoded by a copy of the tokenizer that matches no special token, every other piece by the
//! normal encoder, and each markup token becomes its id. A prompt without literal spans takes
//! the normal path, so its ids are unchanged.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

/// The texts of a tokenizer's special tokens, and a copy of it that encodes them as text.
pub struct Specials {
    /// Leftmost-longest matcher over the special tokens' texts (`None`: the tokenizer has none).
    matcher: Option<AhoCorasick>,
    /// The special token's id, by pattern index.
    ids: Vec<u32>,
    /// The special token's text, by pattern index.
    texts: Vec<String>,
    /// The same tokenizer with special-token matching off, copied the first time a literal span
    /// holds a special token's text (most servers never need it).
    plain: OnceLock<tokenizers::Tokenizer>,
}

impl std::fmt::Debug for Specials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Specials").field("tokens", &self.texts.len()).finish()
    }
}

impl Specials {
    pub(crate) fn new(tokenizer: &tokenizers::Tokenizer) -> Self {
        let mut tokens: Vec<(u32, String)> = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special && !t.content.is_empty())
            .map(|(id, t)| (id, t.content))
            .collect();
        tokens.sort_unstable();
        let (ids, texts): (Vec<u32>, Vec<String>) = tokens.into_iter().unzip();
        let matcher = if texts.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&texts)
                .ok()
        };
        Self {
            matcher,
            ids,
            texts,
            plain: OnceLock::new(),
        }
    }

    /// Whether `text` spells any special token.
    pub fn occurs_in(&self, text: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(text))
    }

    /// The special tokens spelled in `text`: `(byte range, index of the token)`, leftmost-longest.
    pub fn find_in(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        match &self.matcher {
            Some(m) => m.find_iter(text).map(|x| (x.range(), x.pattern().as_usize())).collect(),
            None => Vec::new(),
        }
    }

    /// The text of special token `index` (as [`Specials::find_in`] numbers them).
    pub fn text(&self, index: usize) -> Option<&str> {
        self.texts.get(index).map(String::as_str)
    }

    /// Ids of `text` in which the special tokens inside `literal` (sorted, disjoint byte ranges)
    /// are text. `encode(piece)` is the normal encoder of a piece without added ids.
    pub(crate) fn encode(
        &self,
        tokenizer: &tokenizers::Tokenizer,
        text: &str,
        literal: &[Range<usize>],
        mut encode: impl FnMut(&str) -> tokenizers::Result<Vec<u32>>,
    ) -> tokenizers::Result<Vec<u32>> {
        let plain = self.plain.get_or_init(|| {
            let mut plain = tokenizer.clone();
            plain.set_encode_special_tokens(true);
            plain
        });
        let mut ids = Vec::new();
        let mut start = 0;
        let mut flush = |ids: &mut Vec<u32>, piece: Range<usize>| -> tokenizers::Result<()> {
            if piece.is_empty() {
                return Ok(());
            }
            let s = &text[piece.clone()];
            if literal.iter().any(|l| l.start < piece.end && piece.start < l.end) {
                ids.extend_from_slice(plain.encode_fast(s, false)?.get_ids());
            } else {
                ids.extend(encode(s)?);
            }
            Ok(())
        };
        for (range, index) in self.find_in(text) {
            if literal.iter().any(|l| l.start < range.end && range.start < l.end) {
                continue;
            }
            flush(&mut ids, start..range.start)?;
            ids.push(self.ids[index]);
            start = range.end;
        }
        flush(&mut ids, start..text.len())?;
        Ok(ids)
    }
}
