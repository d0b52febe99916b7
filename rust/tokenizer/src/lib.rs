//! A model's tokenizer in Rust: prompt token ids and incremental detokenization from its
//! `tokenizer.json`, with Hugging Face's `tokenizers` library (the one the `tokenizers` and
//! `transformers` Python packages wrap, so ids are the same).
//!
//! Why here and not in the engine's Python: the server renders a prompt in Rust, and tokenizing
//! it in Python would take the GIL and stall the engine's event loop for as long as a long prompt
//! takes to encode, delaying every other stream. Here it runs on the server's threads.
//!
//! Two rules the engines relied on live here too:
//! - [`Tokenizer::encode_prompt`]: a prompt that already starts with the BOS token (a rendered
//!   chat template writes its own) gets no special tokens added; any other prompt gets the
//!   tokenizer's post-processing (e.g. a BOS), as `encode(text)` does in Python.
//! - [`Decoder`]: generated ids become text without ever splitting a multi-byte character, by
//!   the same algorithm as `tokenizers`' `DecodeStream` (decode a short window, emit what no
//!   longer ends in a partial character), over an owned, shareable tokenizer.
#![forbid(unsafe_code)]

mod literal;
mod segments;
pub mod split;

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

pub use literal::Specials;
pub use segments::Segments;

/// Errors of loading or running a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("cannot load the tokenizer from {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("cannot encode the text: {0}")]
    Encode(String),
    #[error("cannot decode these token ids: {0}")]
    Decode(String),
}

/// A loaded tokenizer, cheap to clone (shared).
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    bos: Option<String>,
    /// Ids of segments between added tokens seen before; `None` when the tokenizer's segments
    /// cannot be encoded on their own (see [`Segments`]).
    segments: Option<Arc<Segments>>,
    /// The special tokens' texts and a copy that encodes them as text, made on first use.
    specials: Arc<OnceLock<Specials>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos)
            .finish()
    }
}

impl Tokenizer {
    /// Load `tokenizer.json`. `bos` is the BOS token's text, if the model has one (see
    /// [`Tokenizer::encode_prompt`]).
    pub fn from_file(path: impl AsRef<Path>, bos: Option<String>) -> Result<Self, TokenizerError> {
        let path = path.as_ref();
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| TokenizerError::Load {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::new(inner, bos, &path.display().to_string())
    }

    /// Load from the JSON text of a `tokenizer.json`.
    pub fn from_json(json: &str, bos: Option<String>) -> Result<Self, TokenizerError> {
        let inner: tokenizers::Tokenizer = json.parse().map_err(|e: tokenizers::Error| TokenizerError::Load {
            path: "<json>".into(),
            reason: e.to_string(),
        })?;
        Self::new(inner, bos, "<json>")
    }

    fn new(mut inner: tokenizers::Tokenizer, bos: Option<String>, path: &str) -> Result<Self, TokenizerError> {
        // A tokenizer.json may carry the truncation and padding it was trained or exported with;
        // transformers turns both off for every call that does not ask for them (as
        // `apply_chat_template` does not), so a prompt is never cut or padded here either.
        inner
            .with_truncation(None)
            .map_err(|e| TokenizerError::Load {
                path: path.to_string(),
                reason: e.to_string(),
            })?
            .with_padding(None);
        let segments = Segments::for_tokenizer(&inner, segments::BUDGET_BYTES).map(Arc::new);
        Ok(Self {
            inner: Arc::new(inner),
            bos: bos.filter(|b| !b.is_empty()),
            segments,
            specials: Arc::new(OnceLock::new()),
        })
    }

    /// Ids of `text`; `add_special_tokens` applies the tokenizer's post-processing (BOS, ...).
    /// Segments between added tokens seen before are not encoded again (see [`Segments`]).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TokenizerError> {
        let ids = match &self.segments {
            Some(s) => s.encode(&self.inner, text, add_special_tokens),
            None => self
                .inner
                .encode_fast(text, add_special_tokens)
                .map(|e| e.get_ids().to_vec()),
        };
        ids.map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// Ids of `text` straight from `tokenizers`, no segment reused (the reference the cached
    /// path is tested against).
    pub fn encode_uncached(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TokenizerError> {
        self.inner
            .encode_fast(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// Segments cached now: `(entries, bytes)`; `None` when this tokenizer caches none.
    pub fn cached_segments(&self) -> Option<(usize, usize)> {
        self.segments.as_ref().map(|s| s.usage())
    }

    /// Ids of a prompt, as the engine would make them: special tokens are added unless the text
    /// already starts with the BOS token (a rendered chat template carries its own).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let has_bos = self.bos.as_deref().is_some_and(|b| text.starts_with(b));
        self.encode(text, !has_bos)
    }

    /// Ids of a rendered prompt (BOS as in [`Tokenizer::encode_prompt`]) in which the byte ranges
    /// `literal` (sorted, disjoint: text that came from request content) never produce a special
    /// token: their special tokens' texts are encoded as text (see [`Specials`]). Without literal
    /// ranges this is [`Tokenizer::encode_prompt`].
    pub fn encode_prompt_literal(&self, text: &str, literal: &[Range<usize>]) -> Result<Vec<u32>, TokenizerError> {
        if literal.is_empty() {
            return self.encode_prompt(text);
        }
        let has_bos = self.bos.as_deref().is_some_and(|b| text.starts_with(b));
        let inner = &*self.inner;
        let ids = self
            .specials()
            .encode(inner, text, literal, |piece| match &self.segments {
                Some(s) => s.encode(inner, piece, false),
                None => inner.encode_fast(piece, false).map(|e| e.get_ids().to_vec()),
            })
            .and_then(|ids| {
                if has_bos {
                    Ok(ids)
                } else {
                    segments::post_process(inner, ids)
                }
            });
        ids.map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// The tokenizer's special tokens (their matcher is built on first use).
    pub fn specials(&self) -> &Specials {
        self.specials.get_or_init(|| Specials::new(&self.inner))
    }

    /// Text of `ids`, special tokens included (no clean-up of spaces).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| TokenizerError::Decode(e.to_string()))
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of a token's text (e.g. `<|im_end|>`), if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// An incremental decoder for one sequence; ids in `drop` (end of turn, padding) are left
    /// out of the text.
    pub fn decoder(&self, drop: Arc<[u32]>) -> Decoder {
        Decoder {
            tokenizer: self.clone(),
            drop,
            ids: Vec::new(),
            prefix: String::new(),
            prefix_index: 0,
        }
    }
}

/// Generated ids to text deltas, for one sequence.
#[derive(Debug, Clone)]
pub struct Decoder {
    tokenizer: Tokenizer,
    drop: Arc<[u32]>,
    /// The window of recent ids: those before `prefix_index` give context to the next decode.
    ids: Vec<u32>,
    /// The decoded text of `ids[..prefix_index]`, already emitted.
    prefix: String,
    prefix_index: usize,
}

impl Decoder {
    /// Add one id; the text it completes (empty while a character is still partial).
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        if self.drop.contains(&id) {
            return Ok(String::new());
        }
        let tok = &*self.tokenizer.inner;
        let step = tokenizers::tokenizer::step_decode_stream(
            tok,
            vec![id],
            false,
            &mut self.ids,
            &mut self.prefix,
            &mut self.prefix_index,
        );
        match step {
            Ok(text) => Ok(text.unwrap_or_default()),
            Err(e) => Err(TokenizerError::Decode(e.to_string())),
        }
    }

    /// Text still held back at the end (an incomplete character comes out as U+FFFD).
    pub fn flush(&mut self) -> Result<String, TokenizerError> {
        if self.ids.is_empty() {
            return Ok(String::new());
        }
        let full = self.tokenizer.decode(&self.ids, false)?;
        let rest = full.get(self.prefix.len()..).unwrap_or_default().to_string();
        self.ids.clear();
        self.prefix.clear();
        self.prefix_index = 0;
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::single_range_in_vec_init)]
    use super::*;

    /// A byte-level BPE tokenizer with byte fallback pieces, written out as a tokenizer.json.
    fn tiny() -> Tokenizer {
        let mut vocab = serde_vocab();
        vocab.push(("<s>".to_string(), 0));
        let json = format!(
            r#"{{"version":"1.0","truncation":null,"padding":null,
            "added_tokens":[{{"id":{s},"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}}],
            "normalizer":null,
            "pre_tokenizer":{{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}},
            "post_processor":{{"type":"TemplateProcessing","single":[{{"SpecialToken":{{"id":"<s>","type_id":0}}}},{{"Sequence":{{"id":"A","type_id":0}}}}],"pair":[{{"Sequence":{{"id":"A","type_id":0}}}}],"special_tokens":{{"<s>":{{"id":"<s>","ids":[{s}],"tokens":["<s>"]}}}}}},
            "decoder":{{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}},
            "model":{{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"vocab":{v},"merges":[]}}}}"#,
            s = 256,
            v = vocab_json(&vocab[..256]),
        );
        Tokenizer::from_json(&json, Some("<s>".into())).unwrap()
    }

    /// The 256 byte-level symbols, one token each (GPT-2's byte-to-unicode map).
    fn serde_vocab() -> Vec<(String, u32)> {
        let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
            .chain(0xA1..=0xAC)
            .chain(0xAE..=0xFF)
            .collect();
        let mut cs = bs.clone();
        let mut n = 0;
        for b in 0..256u32 {
            if !bs.contains(&b) {
                bs.push(b);
                cs.push(256 + n);
                n += 1;
            }
        }
        let mut pairs: Vec<(u32, u32)> = bs.into_iter().zip(cs).collect();
        pairs.sort();
        pairs
            .into_iter()
            .map(|(b, c)| (char::from_u32(c).unwrap().to_string(), b))
            .collect()
    }

    fn vocab_json(v: &[(String, u32)]) -> String {
        let items: Vec<String> = v
            .iter()
            .map(|(k, id)| format!("{}:{id}", serde_json_string(k)))
            .collect();
        format!("{{{}}}", items.join(","))
    }

    fn serde_json_string(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn prompts_get_a_bos_unless_they_start_with_one() {
        let t = tiny();
        let plain = t.encode_prompt("hi").unwrap();
        assert_eq!(plain, [256, u32::from(b'h'), u32::from(b'i')]);
        assert_eq!(
            t.encode_prompt("<s>hi").unwrap(),
            [256, u32::from(b'h'), u32::from(b'i')]
        );
        assert_eq!(t.decode(&plain, false).unwrap(), "<s>hi");
        assert_eq!(t.decode(&plain, true).unwrap(), "hi");
    }

    proptest::proptest! {
        /// Every prefix of the decoded stream equals the full decode of the ids pushed so far,
        /// minus at most one character still partial; the whole stream equals the full decode.
        #[test]
        fn the_stream_equals_a_full_decode(text in "[a-zé€😀 \\n]{0,24}") {
            let t = tiny();
            let ids = t.encode(&text, false).unwrap();
            let mut d = t.decoder(Arc::from(Vec::new()));
            let mut out = String::new();
            for (i, id) in ids.iter().enumerate() {
                out.push_str(&d.push(*id).unwrap());
                let full = t.decode(&ids[..=i], false).unwrap();
                let settled = full.trim_end_matches(char::REPLACEMENT_CHARACTER);
                proptest::prop_assert!(settled.starts_with(&out), "{:?} is not a prefix of {:?}", out, full);
            }
            out.push_str(&d.flush().unwrap());
            proptest::prop_assert_eq!(out, text);
        }
    }

    #[test]
    fn special_tokens_inside_literal_spans_are_text() {
        let t = tiny();
        let b = |c: u8| u32::from(c);
        // The template's own `<s>` stays the token; the one the user typed is three bytes.
        assert_eq!(t.encode_prompt("<s>a<s>b").unwrap(), [256, b(b'a'), 256, b(b'b')]);
        assert_eq!(
            t.encode_prompt_literal("<s>a<s>b", &[4..7]).unwrap(),
            [256, b(b'a'), b(b'<'), b(b's'), b(b'>'), b(b'b')]
        );
        // A literal span that holds no special token changes nothing.
        assert_eq!(
            t.encode_prompt_literal("<s>a<s>b", &[3..4]).unwrap(),
            t.encode_prompt("<s>a<s>b").unwrap()
        );
        // Without a leading BOS the post-processor still adds one.
        assert_eq!(
            t.encode_prompt_literal("a<s>", &[1..4]).unwrap(),
            [256, b(b'a'), b(b'<'), b(b's'), b(b'>')]
        );
        assert!(t.specials().occurs_in("x<s>"));
        assert_eq!(t.specials().find_in("x<s>"), [(1..4, 0)]);
        assert_eq!(t.specials().text(0), Some("<s>"));
    }

    proptest::proptest! {
        /// Literal spans around text that spells no special token leave the ids as they were.
        #[test]
        fn literal_spans_without_specials_change_nothing(
            parts in proptest::collection::vec(("[a-z <>s]{0,6}", proptest::bool::ANY), 0..6),
        ) {
            let t = tiny();
            let mut text = String::new();
            let mut literal = Vec::new();
            for (p, lit) in &parts {
                text.push_str("<s>");
                let start = text.len();
                text.push_str(p);
                if *lit && !p.is_empty() && !p.contains("<s>") {
                    literal.push(start..text.len());
                }
            }
            // A span only counts as holding no special if no match crosses into it.
            let crossing = t.specials().find_in(&text).into_iter().any(|(r, _)| {
                literal.iter().any(|l| l.start < r.end && r.start < l.end)
            });
            proptest::prop_assume!(!crossing);
            proptest::prop_assert_eq!(
                t.encode_prompt_literal(&text, &literal).unwrap(),
                t.encode_prompt(&text).unwrap()
            );
        }
    }

    #[test]
    fn dropped_ids_leave_no_text() {
        let t = tiny();
        let mut d = t.decoder(Arc::from(vec![256]));
        assert_eq!(d.push(256).unwrap(), "");
        assert_eq!(d.push(u32::from(b'a')).unwrap(), "a");
    }
}
