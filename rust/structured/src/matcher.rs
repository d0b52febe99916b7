//! One sequence's structured-output state: accept sampled tokens, give the next mask.
use std::sync::Arc;

use crate::json::{JsonOptions, JsonState};
use crate::schema::{Schema, SchemaState};
use crate::vocab::Vocab;
use crate::{Recognizer, StructuredError};

/// What the output must be.
#[derive(Debug, Clone)]
enum Machine {
    /// Any JSON document (an object when asked).
    Json(JsonState),
    /// A document valid against a schema (boxed: its frame stack is a few hundred bytes).
    Schema(Arc<Schema>, Box<SchemaState>),
}

/// Keeps one sequence's output a JSON document; see the crate docs.
#[derive(Debug, Clone)]
pub struct JsonMatcher {
    vocab: Arc<Vocab>,
    machine: Machine,
    /// An end token was accepted: nothing more may follow.
    ended: bool,
}

impl JsonMatcher {
    /// Any JSON document (an object when `options.object_only`).
    pub fn new(vocab: Arc<Vocab>, options: JsonOptions) -> Self {
        Self {
            vocab,
            machine: Machine::Json(JsonState::new(options)),
            ended: false,
        }
    }

    /// A document valid against `schema`.
    pub fn with_schema(vocab: Arc<Vocab>, schema: Arc<Schema>, max_whitespace: u8) -> Self {
        let state = schema.start(max_whitespace);
        Self {
            vocab,
            machine: Machine::Schema(schema, Box::new(state)),
            ended: false,
        }
    }

    /// Advance past a sampled token. A token the mask did not allow is refused and the state
    /// is left as it was.
    pub fn accept(&mut self, token: u32) -> Result<(), StructuredError> {
        if self.vocab.end_ids().contains(&token) {
            if !self.is_complete() {
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
        let next = match &self.machine {
            Machine::Json(s) => s.feed(bytes).map(Machine::Json),
            Machine::Schema(schema, s) => s
                .feed(schema, bytes)
                .map(|s| Machine::Schema(schema.clone(), Box::new(s))),
        };
        self.machine = next.ok_or_else(rejected)?;
        Ok(())
    }

    /// Write the mask of the next token into `out` (1 = allowed), one entry per logit.
    pub fn mask_into(&self, out: &mut [u8]) {
        if self.ended {
            out.fill(0);
            return;
        }
        match &self.machine {
            Machine::Json(s) => self.vocab.mask_into(&(), *s, out),
            Machine::Schema(schema, s) => self.vocab.mask_into(schema.as_ref(), **s, out),
        }
    }

    /// Whether the output so far is a complete document.
    pub fn is_complete(&self) -> bool {
        match &self.machine {
            Machine::Json(s) => s.is_complete(),
            Machine::Schema(schema, s) => s.is_complete(schema),
        }
    }
}
