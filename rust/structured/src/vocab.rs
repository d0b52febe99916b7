//! A tokenizer's vocabulary as bytes, arranged for computing masks.
//!
//! A mask tries every token from one state. Tokens are sorted by their bytes and each stores
//! how many leading bytes it shares with the one before it, so the walk keeps the states of the
//! previous token's prefixes and steps only through the bytes that differ: every distinct prefix
//! is read once per mask (the work of a trie walk, without a trie). When a byte fails, the
//! following tokens that share it are skipped without stepping.
use crate::json::plain_text;
use crate::Recognizer;

/// Token bytes, in byte order, with what a mask needs to walk them.
#[derive(Debug, Clone)]
pub struct Vocab {
    /// Tokens ids, in the order of their bytes (special tokens and empty ones left out).
    order: Vec<u32>,
    /// `lcp[i]`: bytes that token `order[i]` shares with `order[i - 1]` (0 for the first).
    lcp: Vec<u32>,
    /// The bytes of `order[i]` are `bytes[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    bytes: Vec<u8>,
    /// Token id -> its position in `order`, for reading a sampled token's bytes.
    position: Vec<Option<u32>>,
    /// Tokens that end the output (allowed once the document is complete).
    end_ids: Vec<u32>,
    /// Longest token, in bytes.
    longest: usize,
    /// Indexed by id: 1 for tokens that are plain text (`json::plain_text`). Inside a string,
    /// those are exactly the tokens allowed without looking further, most of the vocabulary.
    plain: Vec<u8>,
    /// Tokens of `order` that are not plain text: the only ones a mask inside a string tries.
    not_plain: Vec<u32>,
}

impl Vocab {
    /// `tokens[id]` is the text a token decodes to, as bytes; `None` for tokens that never
    /// appear inside a JSON document (special and control tokens). `end_ids` end the output.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, end_ids: Vec<u32>) -> Self {
        let size = tokens.len();
        let mut ids: Vec<u32> = (0..size)
            .filter(|&i| {
                let id = i as u32;
                !end_ids.contains(&id) && tokens[i].as_ref().is_some_and(|t| !t.is_empty())
            })
            .map(|i| i as u32)
            .collect();
        let text = |id: u32| tokens[id as usize].as_deref().unwrap_or_default();
        ids.sort_unstable_by(|a, b| text(*a).cmp(text(*b)));
        let mut lcp = Vec::with_capacity(ids.len());
        let mut offsets = Vec::with_capacity(ids.len() + 1);
        let mut bytes = Vec::new();
        let mut position = vec![None; size];
        let mut longest = 0;
        let mut previous: &[u8] = &[];
        for (i, &id) in ids.iter().enumerate() {
            let t = text(id);
            lcp.push(previous.iter().zip(t).take_while(|(a, b)| a == b).count() as u32);
            offsets.push(bytes.len());
            bytes.extend_from_slice(t);
            position[id as usize] = Some(i as u32);
            longest = longest.max(t.len());
            previous = t;
        }
        offsets.push(bytes.len());
        let mut plain = vec![0u8; size];
        let mut not_plain = Vec::new();
        for &id in &ids {
            if plain_text(text(id)) {
                plain[id as usize] = 1;
            } else {
                not_plain.push(id);
            }
        }
        Self {
            order: ids,
            lcp,
            offsets,
            bytes,
            position,
            end_ids,
            longest,
            plain,
            not_plain,
        }
    }

    /// Number of token ids (the mask's length when the model has no padding ids).
    pub fn len(&self) -> usize {
        self.position.len()
    }

    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }

    /// The ids that end the output.
    pub fn end_ids(&self) -> &[u32] {
        &self.end_ids
    }

    /// The bytes of token `id`, when it can appear in a document.
    pub fn bytes_of(&self, id: u32) -> Option<&[u8]> {
        let i = (*self.position.get(id as usize)?)? as usize;
        Some(&self.bytes[self.offsets[i]..self.offsets[i + 1]])
    }

    /// Set `out[id] = 1` for every token that may come next from `state` (and 0 for the rest):
    /// the tokens whose bytes keep the output a prefix of a document, and the end tokens when
    /// the document is complete. `out` may be longer than the vocabulary (a model's padded
    /// output layer); the extra ids are 0.
    pub fn mask_into<R: Recognizer>(&self, ctx: &R::Ctx, state: R, out: &mut [u8]) {
        if state.in_string() {
            self.string_mask_into(ctx, state, out);
            return;
        }
        out.fill(0);
        if state.is_complete(ctx) {
            for &id in &self.end_ids {
                if let Some(slot) = out.get_mut(id as usize) {
                    *slot = 1;
                }
            }
        }
        // states[k]: the state after the first k bytes of the previous token.
        let mut states: Vec<R> = Vec::with_capacity(self.longest + 1);
        states.push(state);
        // Bytes of the previous token known good; when it failed, the failing byte's offset.
        let mut failed_at: Option<usize> = None;
        for (i, &id) in self.order.iter().enumerate() {
            let shared = self.lcp[i] as usize;
            if failed_at.is_some_and(|f| shared > f) {
                // Shares the byte that failed the previous token.
                continue;
            }
            states.truncate(shared + 1);
            let token = &self.bytes[self.offsets[i]..self.offsets[i + 1]];
            failed_at = None;
            let mut s = states[shared];
            for (k, &b) in token.iter().enumerate().skip(shared) {
                match s.step(ctx, b) {
                    Some(next) => {
                        s = next;
                        states.push(s);
                    }
                    None => {
                        failed_at = Some(k);
                        break;
                    }
                }
            }
            if failed_at.is_none() {
                if let Some(slot) = out.get_mut(id as usize) {
                    *slot = 1;
                }
            }
        }
    }

    /// `mask_into` inside a string: plain-text tokens are allowed as they are (a copy), and
    /// only the others are tried. A string is never a complete document, so no end token.
    fn string_mask_into<R: Recognizer>(&self, ctx: &R::Ctx, state: R, out: &mut [u8]) {
        let n = out.len().min(self.plain.len());
        out[..n].copy_from_slice(&self.plain[..n]);
        out[n..].fill(0);
        for &id in &self.not_plain {
            if let (Some(slot), Some(bytes)) = (out.get_mut(id as usize), self.bytes_of(id)) {
                *slot = u8::from(state.feed(ctx, bytes).is_some());
            }
        }
    }
}
