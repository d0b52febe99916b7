//! Prompt ids assembled from the cached ids of the text between added tokens.
//!
//! Why: most of a chat prompt is text the server has encoded before: the system prompt and tool
//! definitions that every request of an application repeats, and the whole history of a
//! conversation, which each turn sends again. `tokenizers` encodes the whole prompt every time (its
//! word cache still pre-tokenizes and allocates per byte): ~20 us for a 160-character chat request,
//! the largest single cost of serving one (benches/README.md, "Per-request cost"), and milliseconds
//! for a long conversation. Added tokens (`<|im_start|>`, `<|eot_id|>`, ...) cut a prompt into
//! segments that `tokenizers` pre-tokenizes and encodes independently of each other, so a segment's
//! ids depend on its text alone: the ids of a segment seen before come from here, and only new
//! segments are encoded.
//!
//! Exactness: the library itself cuts the prompt (`AddedVocabulary::extract_and_normalize`, with the
//! normalizer) and encodes each new segment with the tokenizer's own pre-tokenizer and model. A
//! segment encoded on its own equals the segment encoded in place unless a pre-tokenizer reads
//! where the segment sits in the prompt, which Metaspace with `prepend_scheme: first` does; such
//! tokenizers, and BPE with dropout (random), are not cached ([`Segments::for_tokenizer`]). A new
//! segment's regex split runs without `fancy-regex` where the pattern allows ([`crate::split`]).
//! Tested against the library's `encode` on arbitrary text.

use std::sync::{Arc, Mutex};

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::PrependScheme;
use tokenizers::pre_tokenizers::split::SplitPattern;
use tokenizers::{
    Encoding, ModelWrapper, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer, PreTokenizerWrapper,
    SplitDelimiterBehavior,
};

use crate::split::{LookaheadFree, BYTE_LEVEL_PATTERN};

/// Bytes of segment text and ids kept at most (least recently used segments go first): room for
/// the histories of a few dozen long conversations.
pub const BUDGET_BYTES: usize = 64 << 20;

/// What an entry costs beyond its text and ids (map slot, list links, `Arc` header).
const ENTRY_OVERHEAD: usize = 96;

/// The ids of segments seen before, shared by every thread that encodes with one tokenizer.
pub struct Segments {
    cache: Mutex<Lru>,
    /// How a new segment is pre-tokenized.
    steps: Vec<Step>,
}

/// One pre-tokenizer of the tokenizer's, in order; regex splits with a lookahead run translated
/// (see [`crate::split`]).
enum Step {
    /// Run as `tokenizers` has it.
    Library(PreTokenizerWrapper),
    /// `ByteLevel` with its regex: the translated split, then the library's byte mapping.
    ByteLevel {
        add_prefix_space: bool,
        split: LookaheadFree,
        map: ByteLevel,
    },
    /// `Split` on a regex.
    Split {
        split: LookaheadFree,
        behavior: SplitDelimiterBehavior,
    },
}

impl Step {
    fn plan(p: &PreTokenizerWrapper, out: &mut Vec<Step>) {
        match p {
            PreTokenizerWrapper::Sequence(s) => s.as_ref().iter().for_each(|p| Self::plan(p, out)),
            PreTokenizerWrapper::ByteLevel(b) if b.use_regex => {
                out.push(match LookaheadFree::new(BYTE_LEVEL_PATTERN) {
                    Some(split) => Step::ByteLevel {
                        add_prefix_space: b.add_prefix_space,
                        split,
                        map: ByteLevel::new(false, b.trim_offsets, false),
                    },
                    None => Step::Library(p.clone()),
                })
            }
            PreTokenizerWrapper::Split(s) if !s.invert => {
                let split = match &s.pattern {
                    SplitPattern::Regex(r) => LookaheadFree::new(r),
                    SplitPattern::String(_) => None,
                };
                out.push(match split {
                    Some(split) => Step::Split {
                        split,
                        behavior: s.behavior,
                    },
                    None => Step::Library(p.clone()),
                });
            }
            other => out.push(Step::Library(other.clone())),
        }
    }

    fn run(&self, pre: &mut PreTokenizedString) -> tokenizers::Result<()> {
        match self {
            Step::Library(p) => p.pre_tokenize(pre),
            Step::ByteLevel {
                add_prefix_space,
                split,
                map,
            } => {
                pre.split(|_, mut n| {
                    if *add_prefix_space && !n.get().starts_with(' ') {
                        n.prepend(" ");
                    }
                    n.split(split, SplitDelimiterBehavior::Isolated)
                })?;
                map.pre_tokenize(pre)
            }
            Step::Split { split, behavior } => pre.split(|_, n| n.split(split, *behavior)),
        }
    }
}

struct Lru {
    map: lru::LruCache<Box<str>, Arc<[u32]>>,
    bytes: usize,
    budget: usize,
}

impl std::fmt::Debug for Segments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (entries, bytes) = self.usage();
        f.debug_struct("Segments")
            .field("entries", &entries)
            .field("bytes", &bytes)
            .finish()
    }
}

impl Segments {
    /// A cache for `tokenizer`, or `None` when its segments cannot be encoded on their own (see
    /// the module doc).
    pub fn for_tokenizer(tokenizer: &tokenizers::Tokenizer, budget: usize) -> Option<Self> {
        if let ModelWrapper::BPE(bpe) = tokenizer.get_model() {
            if bpe.dropout.is_some_and(|p| p > 0.0) {
                return None;
            }
        }
        if let Some(p) = tokenizer.get_pre_tokenizer() {
            if !position_free(p) {
                return None;
            }
        }
        let mut steps = Vec::new();
        if let Some(p) = tokenizer.get_pre_tokenizer() {
            Step::plan(p, &mut steps);
        }
        Some(Self {
            cache: Mutex::new(Lru {
                map: lru::LruCache::unbounded(),
                bytes: 0,
                budget,
            }),
            steps,
        })
    }

    /// `(entries, bytes)` held now.
    pub fn usage(&self) -> (usize, usize) {
        self.cache.lock().map(|c| (c.map.len(), c.bytes)).unwrap_or((0, 0))
    }

    /// The ids of `text` as `tokenizer.encode(text, add_special_tokens)` gives them (without the
    /// file's truncation and padding, which are off in [`crate::Tokenizer`]).
    pub fn encode(
        &self,
        tokenizer: &tokenizers::Tokenizer,
        text: &str,
        add_special_tokens: bool,
    ) -> tokenizers::Result<Vec<u32>> {
        let cut = tokenizer
            .get_added_vocabulary()
            .extract_and_normalize(tokenizer.get_normalizer(), text);
        let mut ids = Vec::new();
        for (segment, _, tokens) in cut.get_splits(OffsetReferential::Normalized, OffsetType::None) {
            match tokens {
                Some(tokens) => ids.extend(tokens.iter().map(|t| t.id)),
                None => ids.extend_from_slice(&self.segment(tokenizer, segment)?),
            }
        }
        if !add_special_tokens {
            // Without special tokens every post-processor leaves the ids as they are.
            return Ok(ids);
        }
        post_process(tokenizer, ids)
    }

    /// The ids of one segment: cached, or encoded with the tokenizer's pre-tokenizer and model.
    fn segment(&self, tokenizer: &tokenizers::Tokenizer, text: &str) -> tokenizers::Result<Arc<[u32]>> {
        if let Ok(mut c) = self.cache.lock() {
            if let Some(ids) = c.map.get(text) {
                return Ok(ids.clone());
            }
        }
        let mut pre = PreTokenizedString::from(text);
        for step in &self.steps {
            step.run(&mut pre)?;
        }
        pre.tokenize(|n| tokenizers::Model::tokenize(tokenizer.get_model(), n.get()))?;
        let ids: Arc<[u32]> = pre.into_encoding(None, 0, OffsetType::None)?.get_ids().into();
        if let Ok(mut c) = self.cache.lock() {
            c.insert(text, ids.clone());
        }
        Ok(ids)
    }
}

impl Lru {
    fn insert(&mut self, text: &str, ids: Arc<[u32]>) {
        let cost = text.len() + 4 * ids.len() + ENTRY_OVERHEAD;
        if cost > self.budget {
            return;
        }
        if let Some(old) = self.map.put(text.into(), ids) {
            self.bytes -= text.len() + 4 * old.len() + ENTRY_OVERHEAD;
        }
        self.bytes += cost;
        while self.bytes > self.budget {
            match self.map.pop_lru() {
                Some((k, v)) => self.bytes -= k.len() + 4 * v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }
}

/// Whether a pre-tokenizer splits a text the same wherever the text sits in a prompt.
fn position_free(p: &PreTokenizerWrapper) -> bool {
    match p {
        PreTokenizerWrapper::Metaspace(m) => m.get_prepend_scheme() != PrependScheme::First,
        PreTokenizerWrapper::Sequence(s) => s.as_ref().iter().all(position_free),
        _ => true,
    }
}

/// `ids` with the tokenizer's special tokens added (BOS, ...), as its post-processor adds them to
/// an encoding of one sequence.
pub(crate) fn post_process(tokenizer: &tokenizers::Tokenizer, ids: Vec<u32>) -> tokenizers::Result<Vec<u32>> {
    let n = ids.len();
    let encoding = Encoding::new(
        ids,
        vec![0; n],
        vec![String::new(); n],
        vec![None; n],
        vec![(0, 0); n],
        vec![0; n],
        vec![1; n],
        Vec::new(),
        Default::default(),
    );
    Ok(tokenizer.post_process(encoding, None, true)?.get_ids().to_vec())
}
