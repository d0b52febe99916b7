//! A validated, compiled list of stop strings, shareable between requests.

use crate::automaton::{Automaton, ROOT};
use crate::StopError;

/// Most stop strings one request may give (OpenAI allows 4; engines commonly allow more).
pub const MAX_STOPS: usize = 64;

/// Longest stop string in bytes. A matcher holds back at most this many bytes minus one.
pub const MAX_STOP_LEN: usize = 1024;

/// Where the first stop string occurs in a text (see the crate docs for "first").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopMatch {
    /// Byte offset of the first byte of the stop string.
    pub start: usize,
    /// Byte offset just past the stop string.
    pub end: usize,
    /// Index of the stop string in the list.
    pub index: usize,
}

/// Stop strings plus their compiled automaton.
///
/// Building the automaton costs time proportional to the total stop length; a server that sees
/// the same stop list on many requests can build one `StopSet`, put it in an `Arc`, and create
/// a cheap [`crate::StopMatcher::from_set`] per request. The set is immutable, so sharing it
/// needs no lock.
#[derive(Debug, Clone)]
pub struct StopSet {
    stops: Vec<String>,
    max_len: usize,
    automaton: Automaton,
}

impl StopSet {
    /// Validate and compile `stops`; an empty list is valid and never matches.
    ///
    /// Errors: more than [`MAX_STOPS`] strings, an empty string, or one longer than
    /// [`MAX_STOP_LEN`] bytes.
    pub fn new(stops: Vec<String>) -> Result<Self, StopError> {
        if stops.len() > MAX_STOPS {
            return Err(StopError::TooMany {
                count: stops.len(),
                max: MAX_STOPS,
            });
        }
        for (index, stop) in stops.iter().enumerate() {
            if stop.is_empty() {
                return Err(StopError::EmptyStop { index });
            }
            if stop.len() > MAX_STOP_LEN {
                return Err(StopError::TooLong {
                    index,
                    len: stop.len(),
                    max: MAX_STOP_LEN,
                });
            }
        }
        let max_len = stops.iter().map(String::len).max().unwrap_or(0);
        let automaton = Automaton::new(&stops);
        Ok(Self {
            stops,
            max_len,
            automaton,
        })
    }

    /// The stop strings, in the order given.
    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// Length in bytes of the longest stop string (0 for an empty set).
    pub fn max_stop_len(&self) -> usize {
        self.max_len
    }

    /// Whether the set has no stop strings (and so never matches).
    pub fn is_empty(&self) -> bool {
        self.stops.is_empty()
    }

    /// Number of automaton states, useful for sizing the per-set memory.
    pub fn state_count(&self) -> usize {
        self.automaton.state_count()
    }

    /// The first stop string in a complete `text`: smallest start, ties to the shortest.
    ///
    /// This is the non-streaming answer; [`crate::StopMatcher`] reaches the same answer for any
    /// chunking. It stops scanning as soon as no earlier-starting match is possible.
    pub fn find(&self, text: &str) -> Option<StopMatch> {
        let mut state = ROOT;
        let mut best: Option<StopMatch> = None;
        for (i, &byte) in text.as_bytes().iter().enumerate() {
            state = self.automaton.next(state, byte);
            let pos = i + 1;
            if let Some(out) = self.automaton.output(state) {
                let start = pos - out.len as usize;
                if best.is_none_or(|b| start < b.start) {
                    best = Some(StopMatch {
                        start,
                        end: pos,
                        index: out.index as usize,
                    });
                }
            }
            if let Some(b) = best {
                if pos - self.automaton.depth(state) >= b.start {
                    return best;
                }
            }
        }
        best
    }

    pub(crate) fn automaton(&self) -> &Automaton {
        &self.automaton
    }
}
