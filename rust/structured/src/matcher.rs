//! One sequence's structured-output state: accept sampled tokens, give the next mask.
use std::sync::Arc;

use crate::json::{JsonOptions, JsonState};
use crate::vocab::Vocab;
use crate::StructuredError;

/// Keeps one sequence's output a JSON document; see the crate docs.
#[derive(Debug, Clone)]
pub struct JsonMatcher {
    vocab: Arc<Vocab>,
    state: JsonState,
    /// An end token was accepted: nothing more may follow.
    ended: bool,
}

impl JsonMatcher {
    pub fn new(vocab: Arc<Vocab>, options: JsonOptions) -> Self {
        Self {
            vocab,
            state: JsonState::new(options),
            ended: false,
        }
    }

    /// Advance past a sampled token. A token the mask did not allow is refused and the state
    /// is left as it was.
    pub fn accept(&mut self, token: u32) -> Result<(), StructuredError> {
        if self.vocab.end_ids().contains(&token) {
            if !self.state.is_complete() {
                return Err(StructuredError::Incomplete);
            }
            self.ended = true;
            return Ok(());
        }
        if token as usize >= self.vocab.len() {
            return Err(StructuredError::UnknownToken {
                token,
                size: self.vocab.len(),
            });
        }
        let rejected = || StructuredError::Rejected {
            token,
            text: String::from_utf8_lossy(self.vocab.bytes_of(token).unwrap_or_default()).into_owned(),
        };
        if self.ended {
            return Err(rejected());
        }
        let bytes = self.vocab.bytes_of(token).ok_or_else(rejected)?;
        self.state = self.state.feed(bytes).ok_or_else(rejected)?;
        Ok(())
    }

    /// Write the mask of the next token into `out` (1 = allowed), one entry per logit.
    pub fn mask_into(&self, out: &mut [u8]) {
        if self.ended {
            out.fill(0);
            return;
        }
        self.vocab.mask_into(self.state, out);
    }

    /// Whether the output so far is a complete document.
    pub fn is_complete(&self) -> bool {
        self.state.is_complete()
    }
}
