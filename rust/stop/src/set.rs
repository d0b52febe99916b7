//! A validated, compiled list of stop strings, shareable between requests.

use crate::automaton::{Automaton, Scan, ROOT};
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
        Self::build(stops, true)
    }

    /// [`Self::new`] with the sparse transition table forced, so tests can cover the fallback
    /// that large sets use without building 64 KiB of stop strings.
    #[doc(hidden)]
    pub fn new_sparse(stops: Vec<String>) -> Result<Self, StopError> {
        Self::build(stops, false)
    }

    fn build(stops: Vec<String>, allow_dense: bool) -> Result<Self, StopError> {
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
        let automaton = Automaton::new(&stops, allow_dense);
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

    /// Whether the automaton is a dense table (small sets) rather than sparse edges (sets near
    /// the size limits, which would otherwise need a multi-megabyte table).
    pub fn is_dense(&self) -> bool {
        self.automaton.is_dense()
    }

    /// The first stop string in a complete `text`: smallest start, ties to the shortest.
    ///
    /// This is the non-streaming answer; [`crate::StopMatcher`] reaches the same answer for any
    /// chunking. It stops scanning as soon as no earlier-starting match is possible.
    pub fn find(&self, text: &str) -> Option<StopMatch> {
        match self.automaton.scan(ROOT, None, 0, text.as_bytes()) {
            Scan::Stop(found) => Some(found),
            Scan::End { candidate, .. } => candidate,
        }
    }

    pub(crate) fn automaton(&self) -> &Automaton {
        &self.automaton
    }
}
