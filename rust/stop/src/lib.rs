//! Stop-sequence matching on decoded text.
//!
//! A [`StopMatcher`] is a small synchronous state machine: feed it text deltas with
//! [`StopMatcher::push`], and it returns the text that is safe to show now. Text that could be
//! the start of a stop string is held back until it is known not to be one, so not one byte of
//! a stop string (unless `include_stop`) ever reaches the client.
//!
//! # Semantics
//!
//! * Matching is on decoded text: `&str` deltas of any size, and a stop string may span any
//!   number of deltas. Output is only ever cut on char boundaries.
//! * **Which match.** For a complete text `T`, the match is the occurrence of any stop string
//!   with the smallest start; ties (same start) go to the smallest end, i.e. the shortest stop
//!   string, and equal stop strings to the smallest index. The output is `T[..start]`
//!   (`T[..end]` with `include_stop`), or all of `T` without a match. [`StopSet::find`] is this
//!   answer for a complete text.
//! * **Streaming.** `push` returns only text that is certain to be output. It holds back the
//!   longest suffix of the unreleased text that is a proper prefix of some stop string, and,
//!   while a match is known but a longer stop string that started earlier is still in progress,
//!   everything from that earlier start. A match is reported as soon as no other stop string
//!   could still match starting earlier. So for *any* chunking, the emitted text plus the
//!   `Stopped` text (plus [`StopMatcher::finish`] when nothing stopped) equals the complete
//!   answer, and with `include_stop == false` no emitted chunk holds a byte of the stop string
//!   that cut the text.
//! * **Cost.** One Aho-Corasick automaton walk, one step per byte and state kept between
//!   pushes: linear in the total text length and independent of the chunking. The held-back
//!   suffix is the automaton state's depth, so it is never longer than the longest stop string.
//! * **Limits.** At most [`MAX_STOPS`] stop strings of at most [`MAX_STOP_LEN`] bytes each.
//!
//! Build a [`StopSet`] once and share it (`Arc`) when many requests use the same stop list;
//! [`StopMatcher::from_set`] then only allocates per-request state.
//!
//! ```
//! use smgpy_stop::{StopMatcher, StopOutput};
//!
//! let mut m = StopMatcher::new(vec!["<|end|>".into()], false)?;
//! assert_eq!(m.push("Hello <|e"), StopOutput::Emit("Hello ".into()));
//! assert_eq!(m.push("nd|> ignored"), StopOutput::Stopped { text: String::new(), matched: 0 });
//! # Ok::<(), smgpy_stop::StopError>(())
//! ```
#![forbid(unsafe_code)]

mod automaton;
mod error;
mod matcher;
mod set;

pub use error::StopError;
pub use matcher::{StopMatcher, StopOutput};
pub use set::{StopMatch, StopSet, MAX_STOPS, MAX_STOP_LEN};
