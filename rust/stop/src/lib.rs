//! Stop-sequence matching on decoded text.
//!
//! A [`StopMatcher`] is a small synchronous state machine: feed it text deltas with
//! [`StopMatcher::push`], and it returns the text that is safe to show now. Text that could be
//! the start of a stop string is held back until it is known not to be one, so not one byte of
//! a stop string (unless `include_stop`) ever reaches the client.
#![forbid(unsafe_code)]

/// Errors raised when building a matcher.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StopError {
    /// An empty stop string would match everywhere.
    #[error("stop string #{index} is empty: every stop string must contain at least one character")]
    EmptyStop { index: usize },
}

/// What one call to [`StopMatcher::push`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutput {
    /// Text safe to emit now (may be empty when everything is held back).
    Emit(String),
    /// A stop string matched: `text` is the final piece to emit (with the stop string itself
    /// when `include_stop`), `matched` the index of the stop string in the list given to `new`.
    Stopped { text: String, matched: usize },
}

/// Per-request stop matcher (see the crate docs).
#[derive(Debug, Clone)]
pub struct StopMatcher {
    stops: Vec<String>,
    include_stop: bool,
    held: String,
    done: bool,
}

impl StopMatcher {
    /// Build a matcher for `stops`; an empty list never stops.
    pub fn new(stops: Vec<String>, include_stop: bool) -> Result<Self, StopError> {
        if let Some(index) = stops.iter().position(|s| s.is_empty()) {
            return Err(StopError::EmptyStop { index });
        }
        Ok(Self { stops, include_stop, held: String::new(), done: false })
    }

    /// The stop strings, in the order given.
    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// Feed one text delta. PLACEHOLDER: naive implementation, replaced by the real one.
    pub fn push(&mut self, text: &str) -> StopOutput {
        if self.done {
            return StopOutput::Emit(String::new());
        }
        self.held.push_str(text);
        let best = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| self.held.find(s.as_str()).map(|p| (p, p + s.len(), i)))
            .min();
        if let Some((start, end, i)) = best {
            self.done = true;
            let cut = if self.include_stop { end } else { start };
            let text = self.held[..cut].to_string();
            self.held.clear();
            return StopOutput::Stopped { text, matched: i };
        }
        StopOutput::Emit(std::mem::take(&mut self.held))
    }

    /// End of generation: release whatever is still held back.
    pub fn finish(&mut self) -> String {
        self.done = true;
        std::mem::take(&mut self.held)
    }
}
