//! A model's vocabulary as an llguidance token trie, and the grammars compiled against it.
use std::sync::{Arc, Mutex};

use llguidance::api::ParserLimits;
use llguidance::earley::SlicedBiasComputer;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use crate::cache::Lru;
use crate::{GrammarMatcher, Source, StructuredError};

/// Compiled grammars kept per vocabulary (each is a few kilobytes to a few megabytes).
const CACHED_GRAMMARS: usize = 64;

/// Bytes the compiled grammars of one vocabulary may weigh, estimated as
/// [`COMPILED_BYTES_PER_SOURCE_BYTE`] times their source text (llguidance reports no sizes).
const GRAMMAR_CACHE_BYTES: usize = 64 << 20;

/// Memory of a compiled grammar per byte of its source: the text itself, its parsed form, the
/// lexer's and the Earley parser's tables (an estimate on the generous side).
const COMPILED_BYTES_PER_SOURCE_BYTE: usize = 16;

/// A model's tokens as bytes, ready for masks. Built once per model (the trie and llguidance's
/// precomputed slices take ~0.1 s for 49k tokens, ~0.5 s for 150k).
pub struct Vocabulary {
    factory: Arc<ParserFactory>,
    size: usize,
    end_ids: Vec<u32>,
    cache: Mutex<Lru<Source, Grammar>>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("size", &self.size)
            .field("end_ids", &self.end_ids)
            .finish_non_exhaustive()
    }
}

/// A constraint compiled against one vocabulary; [`Grammar::matcher`] starts a sequence.
/// Cheap to clone: matchers share its compiled form and lexer cache.
#[derive(Clone)]
pub struct Grammar {
    template: Arc<Matcher>,
    end_ids: Arc<[u32]>,
    size: usize,
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Grammar {
    /// A matcher for one sequence, at the start of the output.
    pub fn matcher(&self) -> GrammarMatcher {
        GrammarMatcher::new(Matcher::clone(&self.template), self.end_ids.clone(), self.size)
    }
}

impl Vocabulary {
    /// `tokens[id]`: the bytes token `id` adds to the decoded text (`None` for tokens that
    /// never belong in constrained output, such as padding). `specials`: ids of special tokens;
    /// each is kept out of text (llguidance's `0xFF` + name form, which a Lark grammar names
    /// as `<|name|>`), except tool-call and reasoning markers (`<tool_call>`, `[TOOL_CALLS]`,
    /// `<think>`, ...), which stay text so that a grammar's literal `"<tool_call>"` is written
    /// with the model's own marker token. `end_ids` end the output (allowed once the grammar
    /// is complete). `size`: the number of logits (at least `tokens.len()`; the model's output
    /// layer may be padded).
    pub fn new(
        tokens: Vec<Option<Vec<u8>>>,
        specials: &[u32],
        end_ids: Vec<u32>,
        size: usize,
    ) -> Result<Self, StructuredError> {
        let size = size.max(tokens.len());
        if size == 0 || size >= 1 << 24 {
            return Err(StructuredError::Vocabulary(format!(
                "a vocabulary of {size} tokens is not supported (1 to 16,777,215)"
            )));
        }
        let first_end = *end_ids
            .first()
            .ok_or_else(|| StructuredError::Vocabulary("at least one end-of-sequence id is needed".into()))?;
        if let Some(bad) = end_ids.iter().find(|&&t| t as usize >= size) {
            return Err(StructuredError::Vocabulary(format!(
                "end id {bad} is outside the vocabulary of {size} tokens"
            )));
        }
        let markers = markers();
        let mut words: Vec<Vec<u8>> = tokens.into_iter().map(Option::unwrap_or_default).collect();
        words.resize(size, Vec::new());
        for &id in specials {
            let Some(word) = words.get_mut(id as usize) else {
                continue;
            };
            if word.is_empty() || markers.iter().any(|m| m.as_bytes() == word.as_slice()) {
                continue;
            }
            word.insert(0, TokTrie::SPECIAL_TOKEN_MARKER);
        }
        for &id in &end_ids {
            if let Some(word) = words.get_mut(id as usize) {
                if word.first() != Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
                    word.clear();
                }
            }
        }
        let info = TokRxInfo::new(size as u32, first_end);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&end_ids);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let factory = factory(&env, &SlicedBiasComputer::general_slices())?;
        Ok(Self {
            factory: Arc::new(factory),
            size,
            end_ids,
            cache: Mutex::new(Lru::new(CACHED_GRAMMARS, GRAMMAR_CACHE_BYTES)),
        })
    }

    /// The number of logits a mask covers.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The ids that end the output.
    pub fn end_ids(&self) -> &[u32] {
        &self.end_ids
    }

    /// Compile `source`, or take it from the cache (keyed by the constraint's text).
    pub fn compile(&self, source: &Source) -> Result<Grammar, StructuredError> {
        if let Some(g) = self.cache.lock().ok().and_then(|mut c| c.get(source).cloned()) {
            return Ok(g);
        }
        let template = compile_with(&self.factory, source)?;
        let grammar = Grammar {
            template: Arc::new(template),
            end_ids: self.end_ids.clone().into(),
            size: self.size,
        };
        if let Ok(mut c) = self.cache.lock() {
            let weight = source.text().len().saturating_mul(COMPILED_BYTES_PER_SOURCE_BYTE) + 64 * 1024;
            c.insert(source.clone(), grammar.clone(), weight);
        }
        Ok(grammar)
    }
}

/// A factory that logs nothing to stderr and keeps its errors short (no parser state or
/// grammar dump in messages that reach clients).
pub(crate) fn factory(env: &TokEnv, slices: &[String]) -> Result<ParserFactory, StructuredError> {
    let mut f = ParserFactory::new(env, InferenceCapabilities::default(), slices)
        .map_err(|e| StructuredError::Vocabulary(e.to_string()))?;
    f.quiet();
    *f.limits_mut() = ParserLimits {
        verbose_errors: false,
        ..ParserLimits::default()
    };
    Ok(f)
}

/// A fresh matcher for `source`, or why it does not compile.
pub(crate) fn compile_with(factory: &ParserFactory, source: &Source) -> Result<Matcher, StructuredError> {
    let grammar = source.to_grammar()?;
    let matcher = Matcher::new(factory.create_parser(grammar));
    match matcher.get_error() {
        None => Ok(matcher),
        Some(e) => Err(StructuredError::Invalid {
            what: source.what(),
            message: clean(&e),
        }),
    }
}

/// llguidance's message without its `<non-verbose/>` marker, any backtrace and trailing blank
/// lines.
pub(crate) fn clean(message: &str) -> String {
    let message = message.split("\n<backtrace>").next().unwrap_or_default();
    message.replace("<non-verbose/>", "").trim().to_string()
}

/// Every tool-call marker smgpy's parsers know, and the reasoning markers.
fn markers() -> Vec<&'static str> {
    let mut all = vec!["<think>", "</think>"];
    for f in smgpy_parsers::ToolFormat::ALL {
        for m in f.markers() {
            if !all.contains(&m) {
                all.push(m);
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_vocab() -> Vocabulary {
        let mut tokens: Vec<Option<Vec<u8>>> = (0u8..=255).map(|b| Some(vec![b])).collect();
        tokens.push(Some(b"<|im_end|>".to_vec()));
        tokens.push(Some(b"<tool_call>".to_vec()));
        tokens.push(Some(b"<|im_start|>".to_vec()));
        Vocabulary::new(tokens, &[256, 257, 258], vec![256], 300).unwrap()
    }

    #[test]
    fn compiles_and_caches() {
        let v = bytes_vocab();
        assert_eq!(v.size(), 300);
        let s = Source::JsonSchema(r#"{"type":"integer"}"#.into());
        let a = v.compile(&s).unwrap();
        let b = v.compile(&s).unwrap();
        assert!(Arc::ptr_eq(&a.template, &b.template));
        let e = v
            .compile(&Source::JsonSchema(r#"{"type":"strnig"}"#.into()))
            .unwrap_err();
        assert!(e.to_string().contains("strnig"), "{e}");
        assert!(!e.to_string().contains("non-verbose"), "{e}");
    }

    #[test]
    fn markers_stay_text_and_other_specials_do_not() {
        let v = bytes_vocab();
        // `<tool_call>` (257) is a marker: the literal matches the single token.
        let mut m = v
            .compile(&Source::Grammar("start: \"<tool_call>\" \"x\"".into()))
            .unwrap()
            .matcher();
        assert!(m.mask().unwrap().is_allowed(257));
        // `<|im_start|>` (258) is special: never text, but a Lark grammar can name it.
        let mut m = v.compile(&Source::Regex("(.|\n)*".into())).unwrap().matcher();
        assert!(!m.mask().unwrap().is_allowed(258));
        let mut m = v
            .compile(&Source::Grammar("start: <|im_start|> \"x\"".into()))
            .unwrap()
            .matcher();
        assert!(m.mask().unwrap().is_allowed(258));
    }

    #[test]
    fn bad_vocabularies() {
        assert!(Vocabulary::new(vec![Some(b"a".to_vec())], &[], vec![], 1).is_err());
        assert!(Vocabulary::new(vec![Some(b"a".to_vec())], &[], vec![5], 2).is_err());
    }
}
