//! One sequence's constrained state: accept the sampled tokens, give the next mask.
use std::sync::Arc;

use llguidance::toktrie::SimpleVob;
use llguidance::Matcher;

use crate::StructuredError;

/// Holds one sequence's output to a compiled grammar.
///
/// llguidance's `Matcher` goes into an error state when asked for a mask after the grammar
/// stopped, or when given an end token then; this wrapper asks for `compute_mask_or_eos` and
/// takes an end token after a stop as the end, as llguidance's own Python binding does.
#[derive(Clone)]
pub struct GrammarMatcher {
    inner: Matcher,
    end_ids: Arc<[u32]>,
    size: usize,
    /// An end token was accepted: nothing may follow.
    ended: bool,
    /// The last mask, `ceil(size / 32)` words (bit `i % 32` of word `i / 32` is token `i`).
    words: Vec<u32>,
}

impl std::fmt::Debug for GrammarMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarMatcher")
            .field("size", &self.size)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl GrammarMatcher {
    pub(crate) fn new(inner: Matcher, end_ids: Arc<[u32]>, size: usize) -> Self {
        Self {
            inner,
            end_ids,
            size,
            ended: false,
            words: vec![0; size.div_ceil(32)],
        }
    }

    /// The number of logits a mask covers.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Advance past a sampled token. A token the mask did not allow is an error, and the
    /// matcher cannot go on (llguidance does not roll back out of it).
    pub fn accept(&mut self, token: u32) -> Result<(), StructuredError> {
        if self.end_ids.contains(&token) && (self.inner.is_stopped() || self.inner.is_accepting().unwrap_or(false)) {
            self.ended = true;
            return Ok(());
        }
        if self.ended {
            return Err(StructuredError::Rejected {
                token,
                message: "the output already ended".into(),
            });
        }
        self.inner.consume_token(token).map_err(|e| StructuredError::Rejected {
            token,
            message: crate::vocab::clean(&e.to_string()),
        })
    }

    /// The tokens allowed next: the grammar's continuations, plus the end tokens once the
    /// output may end (only them once it must).
    pub fn mask(&mut self) -> Result<SimpleVob, StructuredError> {
        if self.ended {
            return Ok(SimpleVob::alloc(self.size));
        }
        self.inner
            .compute_mask_or_eos()
            .map_err(|e| StructuredError::Matcher(crate::vocab::clean(&e.to_string())))
    }

    /// [`GrammarMatcher::mask`] as `ceil(size / 32)` little-endian bit words, kept in the
    /// matcher (no allocation per step).
    pub fn mask_words(&mut self) -> Result<&[u32], StructuredError> {
        let v = self.mask()?;
        let src = v.as_slice();
        let n = self.words.len().min(src.len());
        self.words[..n].copy_from_slice(&src[..n]);
        self.words[n..].fill(0);
        Ok(&self.words)
    }

    /// [`GrammarMatcher::mask`] as one byte per logit (1 = allowed) into `out`; entries past
    /// the vocabulary are 0.
    pub fn mask_into(&mut self, out: &mut [u8]) -> Result<(), StructuredError> {
        let words = self.mask_words()?;
        expand(words, out);
        Ok(())
    }

    /// Whether the grammar is complete and nothing more may follow.
    pub fn is_stopped(&self) -> bool {
        self.ended || self.inner.is_stopped()
    }

    /// Whether the output may end here.
    pub fn is_accepting(&mut self) -> bool {
        self.ended || self.inner.is_stopped() || self.inner.is_accepting().unwrap_or(false)
    }
}

/// Bits to bytes, 32 at a time; all-zero and all-one words (most of a mask) are one fill.
fn expand(words: &[u32], out: &mut [u8]) {
    for (chunk, &w) in out.chunks_mut(32).zip(words.iter().chain(std::iter::repeat(&0))) {
        match w {
            0 => chunk.fill(0),
            u32::MAX => chunk.fill(1),
            _ => {
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = ((w >> i) & 1) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_bits() {
        let mut out = [9u8; 70];
        expand(&[0b101, u32::MAX], &mut out);
        assert_eq!(&out[..4], &[1, 0, 1, 0]);
        assert!(out[32..64].iter().all(|&b| b == 1));
        assert!(out[64..].iter().all(|&b| b == 0));
    }
}
