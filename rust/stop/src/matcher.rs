//! The per-request streaming matcher.

use std::sync::Arc;

use crate::automaton::{Scan, StateId, ROOT};
use crate::set::{StopMatch, StopSet};
use crate::StopError;

/// What one call to [`StopMatcher::push`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutput {
    /// Text safe to emit now (may be empty when everything is held back).
    Emit(String),
    /// A stop string matched: `text` is the final piece to emit (with the stop string itself
    /// when `include_stop`), `matched` the index of the stop string in the list given to `new`.
    Stopped { text: String, matched: usize },
}

/// Per-request stop matcher (see the crate docs for the exact semantics).
///
/// State is one automaton state, a few positions and the held-back text (at most the longest
/// stop string minus one byte), so a matcher is cheap to create from a shared [`StopSet`].
#[derive(Debug, Clone)]
pub struct StopMatcher {
    set: Arc<StopSet>,
    include_stop: bool,
    /// Automaton state after the last byte read.
    state: StateId,
    /// Bytes read so far (absolute position in the whole text).
    pos: usize,
    /// Bytes released so far; everything in `[emitted, pos)` is held back.
    emitted: usize,
    /// `held[held_off..]` is the text in `[emitted, pos)`. The dead prefix `held[..held_off]` is
    /// dropped lazily (when it outgrows the live part) so each push costs O(its own length), not
    /// O(held), keeping the total cost linear however small the chunks are.
    held: String,
    held_off: usize,
    /// Earliest complete match seen and not yet known to be final.
    candidate: Option<StopMatch>,
    /// Index of the stop string that ended the stream, once it has.
    matched: Option<usize>,
    /// Set after a stop or `finish`: later pushes return nothing.
    done: bool,
}

impl StopMatcher {
    /// Build a matcher for `stops`; an empty list never stops.
    pub fn new(stops: Vec<String>, include_stop: bool) -> Result<Self, StopError> {
        Ok(Self::from_set(Arc::new(StopSet::new(stops)?), include_stop))
    }

    /// A matcher over an already compiled, shared set (no automaton build per request).
    pub fn from_set(set: Arc<StopSet>, include_stop: bool) -> Self {
        Self {
            set,
            include_stop,
            state: ROOT,
            pos: 0,
            emitted: 0,
            held: String::new(),
            held_off: 0,
            candidate: None,
            matched: None,
            done: false,
        }
    }

    /// The stop strings, in the order given.
    pub fn stops(&self) -> &[String] {
        self.set.stops()
    }

    /// The shared compiled set this matcher runs on.
    pub fn set(&self) -> &Arc<StopSet> {
        &self.set
    }

    /// Length in bytes of the longest stop string: an upper bound (plus one) on held-back text.
    pub fn max_stop_len(&self) -> usize {
        self.set.max_stop_len()
    }

    /// Whether the stop string itself is part of the output.
    pub fn include_stop(&self) -> bool {
        self.include_stop
    }

    /// Index of the stop string that ended the stream, if one did.
    pub fn matched(&self) -> Option<usize> {
        self.matched
    }

    /// Whether a stop string ended the stream.
    pub fn is_stopped(&self) -> bool {
        self.matched.is_some()
    }

    /// Bytes currently held back (not yet emitted).
    pub fn held_len(&self) -> usize {
        self.pos - self.emitted
    }

    /// Feed one text delta and get what is now safe to emit, or the final piece on a stop.
    ///
    /// After `Stopped` (or `finish`), further pushes return `Emit("")`.
    pub fn push(&mut self, text: &str) -> StopOutput {
        let mut out = String::new();
        match self.push_into(text, &mut out) {
            Some(matched) => StopOutput::Stopped { text: out, matched },
            None => StopOutput::Emit(out),
        }
    }

    /// [`Self::push`] that appends the emitted text to `out` instead of allocating a `String`
    /// per call; returns the matched stop index when this push stopped the stream.
    ///
    /// For hot loops with tiny deltas, where one allocation per token would dominate.
    pub fn push_into(&mut self, text: &str, out: &mut String) -> Option<usize> {
        if self.done {
            return None;
        }
        let pos0 = self.pos;
        let automaton = self.set.automaton();
        match automaton.scan(self.state, self.candidate, pos0, text.as_bytes()) {
            Scan::Stop(found) => Some(self.stop(text, pos0, found, out)),
            Scan::End { state, candidate } => {
                self.state = state;
                self.candidate = candidate;
                self.pos = pos0 + text.len();
                // The held-back suffix is a prefix of a stop string, so it starts on a char
                // boundary.
                let safe = self.pos - automaton.depth(state);
                self.release(text, pos0, safe, out);
                None
            }
        }
    }

    /// End of generation: release whatever is still held back (if not stopped).
    ///
    /// A match that was complete but not yet certain (a longer stop string that would have
    /// started earlier was still in progress) becomes final here: the returned text ends before
    /// it, and [`Self::matched`] reports it. Use [`Self::finish_output`] to get that as a value.
    pub fn finish(&mut self) -> String {
        match self.finish_output() {
            StopOutput::Emit(text) | StopOutput::Stopped { text, .. } => text,
        }
    }

    /// Like [`Self::finish`], but reports a match that only became certain at the end.
    pub fn finish_output(&mut self) -> StopOutput {
        let mut out = String::new();
        if self.done {
            return StopOutput::Emit(out);
        }
        if let Some(c) = self.candidate {
            let matched = self.stop("", self.pos, c, &mut out);
            return StopOutput::Stopped { text: out, matched };
        }
        let end = self.pos;
        self.release("", end, end, &mut out);
        self.done = true;
        self.held = String::new();
        self.held_off = 0;
        StopOutput::Emit(out)
    }

    /// Finish on match `c`: emit the text up to the cut, drop the rest; returns the stop index.
    fn stop(&mut self, text: &str, pos0: usize, c: StopMatch, out: &mut String) -> usize {
        let cut = if self.include_stop { c.end } else { c.start };
        self.append(text, pos0, cut, out);
        self.done = true;
        self.matched = Some(c.index);
        self.candidate = None;
        self.held = String::new();
        self.held_off = 0;
        self.emitted = cut;
        c.index
    }

    /// Append the text in `[emitted, cut)` to `out`, where the held text covers
    /// `[emitted, pos0)` and `text` starts at `pos0`.
    #[inline]
    fn append(&self, text: &str, pos0: usize, cut: usize, out: &mut String) {
        if self.emitted == pos0 {
            // Nothing held (the common case): the output is a prefix of `text`.
            out.push_str(&text[..cut - pos0]);
            return;
        }
        let live = &self.held[self.held_off..];
        if cut <= pos0 {
            out.push_str(&live[..cut - self.emitted]);
        } else {
            out.push_str(live);
            out.push_str(&text[..cut - pos0]);
        }
    }

    /// Emit `[emitted, safe)` and keep `[safe, pos0 + text.len())` held.
    fn release(&mut self, text: &str, pos0: usize, safe: usize, out: &mut String) {
        self.append(text, pos0, safe, out);
        if safe >= pos0 {
            self.held.clear();
            self.held_off = 0;
            if safe < pos0 + text.len() {
                self.held.push_str(&text[safe - pos0..]);
            }
        } else {
            self.held_off += safe - self.emitted;
            if self.held_off > self.held.len() / 2 {
                self.held.drain(..self.held_off);
                self.held_off = 0;
            }
            self.held.push_str(text);
        }
        self.emitted = safe;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(stops: &[&str], include: bool) -> StopMatcher {
        StopMatcher::new(stops.iter().map(|s| s.to_string()).collect(), include).unwrap()
    }

    /// Feed `chunks`, return (all text emitted, matched index).
    fn run(matcher: &mut StopMatcher, chunks: &[&str]) -> (String, Option<usize>) {
        let mut out = String::new();
        for chunk in chunks {
            match matcher.push(chunk) {
                StopOutput::Emit(t) => out.push_str(&t),
                StopOutput::Stopped { text, matched } => {
                    out.push_str(&text);
                    return (out, Some(matched));
                }
            }
        }
        out.push_str(&matcher.finish());
        (out, matcher.matched())
    }

    fn chars(text: &str) -> Vec<String> {
        text.chars().map(String::from).collect()
    }

    #[test]
    fn match_across_chunks() {
        let mut s = m(&["</stop>"], false);
        assert_eq!(s.push("hello </st"), StopOutput::Emit("hello ".into()));
        assert_eq!(s.held_len(), 4);
        assert_eq!(
            s.push("op> ignored"),
            StopOutput::Stopped {
                text: String::new(),
                matched: 0
            }
        );
        assert_eq!(s.push("more"), StopOutput::Emit(String::new()));
        assert_eq!(s.finish(), "");
        assert!(s.is_stopped());
    }

    #[test]
    fn char_by_char() {
        for include in [false, true] {
            let mut s = m(&["STOP"], include);
            let pieces = chars("abc ST STOP tail");
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let (out, matched) = run(&mut s, &refs);
            assert_eq!(out, if include { "abc ST STOP" } else { "abc ST " });
            assert_eq!(matched, Some(0));
        }
    }

    #[test]
    fn overlapping_stops_cut_at_earliest_start() {
        let mut s = m(&["abcd", "bc"], false);
        assert_eq!(run(&mut s, &["xabcd"]), ("x".to_string(), Some(0)));
        // "bc" completes first but "abcd" started earlier and is still possible: hold.
        let mut s = m(&["abcd", "bc"], false);
        assert_eq!(s.push("xabc"), StopOutput::Emit("x".into()));
        assert_eq!(
            s.push("d"),
            StopOutput::Stopped {
                text: String::new(),
                matched: 0
            }
        );
        // When "abcd" fails, the pending "bc" becomes final.
        let mut s = m(&["abcd", "bc"], false);
        assert_eq!(s.push("xabc"), StopOutput::Emit("x".into()));
        assert_eq!(
            s.push("e"),
            StopOutput::Stopped {
                text: "a".into(),
                matched: 1
            }
        );
        // And at the end of the stream it is final too.
        let mut s = m(&["abcd", "bc"], false);
        assert_eq!(s.push("xabc"), StopOutput::Emit("x".into()));
        assert_eq!(
            s.finish_output(),
            StopOutput::Stopped {
                text: "a".into(),
                matched: 1
            }
        );
    }

    #[test]
    fn stops_that_are_prefixes_of_each_other() {
        // Same start: the shorter one wins, and it is certain at once.
        let mut s = m(&["abc", "ab"], false);
        assert_eq!(
            s.push("xab"),
            StopOutput::Stopped {
                text: "x".into(),
                matched: 1
            }
        );
        let mut s = m(&["ab", "abc"], true);
        assert_eq!(run(&mut s, &["x", "a", "bc"]), ("xab".to_string(), Some(0)));
        // Duplicates: the first index wins.
        let mut s = m(&["zz", "ab", "ab"], false);
        assert_eq!(run(&mut s, &["1ab2"]), ("1".to_string(), Some(1)));
    }

    #[test]
    fn unicode_stops() {
        let mut s = m(&["🛑", "终止", "<｜end｜>"], false);
        assert_eq!(
            run(
                &mut s,
                &chars("ok 👍 then 🛑 gone")
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
            .0,
            "ok 👍 then "
        );
        let mut s = m(&["🛑", "终止", "<｜end｜>"], false);
        assert_eq!(run(&mut s, &["中文终", "止了"]), ("中文".to_string(), Some(1)));
        let mut s = m(&["🛑", "终止", "<｜end｜>"], true);
        assert_eq!(run(&mut s, &["a<｜e", "nd｜>b"]), ("a<｜end｜>".to_string(), Some(2)));
        // A shared first byte with a different char must not be cut mid-char.
        let mut s = m(&["终止"], false);
        let out = s.push("终了");
        assert_eq!(out, StopOutput::Emit("终了".into()));
    }

    #[test]
    fn include_stop() {
        let mut s = m(&["END"], true);
        assert_eq!(run(&mut s, &["aaE", "NDbb"]), ("aaEND".to_string(), Some(0)));
    }

    #[test]
    fn no_stop_passthrough_holds_nothing() {
        let mut s = m(&["<|im_end|>"], false);
        for chunk in ["plain ", "text ", "with no angle"] {
            assert_eq!(s.push(chunk), StopOutput::Emit(chunk.into()));
            assert_eq!(s.held_len(), 0);
        }
        assert_eq!(s.finish(), "");
        assert!(!s.is_stopped());
    }

    #[test]
    fn held_text_is_released_on_mismatch_and_at_finish() {
        let mut s = m(&["<|im_end|>"], false);
        assert_eq!(s.push("a <|im"), StopOutput::Emit("a ".into()));
        assert_eq!(s.push("_x"), StopOutput::Emit("<|im_x".into()));
        assert_eq!(s.push(" <|"), StopOutput::Emit(" ".into()));
        assert_eq!(s.finish(), "<|");
        assert_eq!(s.matched(), None);
        assert_eq!(s.push("late"), StopOutput::Emit(String::new()));
    }

    #[test]
    fn empty_list_never_stops() {
        let mut s = m(&[], false);
        assert_eq!(s.push("anything"), StopOutput::Emit("anything".into()));
        assert_eq!(s.max_stop_len(), 0);
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn long_hold_with_tiny_chunks_stays_correct() {
        let stop = format!("{}b", "a".repeat(300));
        let mut s = StopMatcher::new(vec![stop], false).unwrap();
        let text = "a".repeat(1000);
        let (out, matched) = run(&mut s, &chars(&text).iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!((out, matched), (text, None));
    }

    #[test]
    fn rejects_bad_lists() {
        assert_eq!(
            StopMatcher::new(vec!["a".into(), String::new()], false).unwrap_err(),
            StopError::EmptyStop { index: 1 }
        );
        let many = vec!["x".to_string(); crate::MAX_STOPS + 1];
        assert_eq!(
            StopMatcher::new(many, false).unwrap_err(),
            StopError::TooMany { count: 65, max: 64 }
        );
        let long = "y".repeat(crate::MAX_STOP_LEN + 1);
        assert_eq!(
            StopMatcher::new(vec![long], false).unwrap_err(),
            StopError::TooLong {
                index: 0,
                len: 1025,
                max: 1024
            }
        );
        assert!(StopMatcher::new(vec!["z".repeat(crate::MAX_STOP_LEN); crate::MAX_STOPS], false).is_ok());
    }

    #[test]
    fn push_into_appends_to_one_buffer() {
        let mut s = m(&["<|end|>"], false);
        let mut out = String::from("> ");
        assert_eq!(s.push_into("one <|", &mut out), None);
        assert_eq!(s.push_into("two", &mut out), None);
        assert_eq!(s.push_into(" <|end|>", &mut out), Some(0));
        assert_eq!(out, "> one <|two ");
    }

    #[test]
    fn shared_set_serves_independent_matchers() {
        let set = Arc::new(StopSet::new(vec!["\n\n".into()]).unwrap());
        let mut a = StopMatcher::from_set(set.clone(), false);
        let mut b = StopMatcher::from_set(set, true);
        assert_eq!(a.push("one\n"), StopOutput::Emit("one".into()));
        assert_eq!(
            b.push("two\n\nx"),
            StopOutput::Stopped {
                text: "two\n\n".into(),
                matched: 0
            }
        );
        assert_eq!(a.push("x"), StopOutput::Emit("\nx".into()));
    }
}
