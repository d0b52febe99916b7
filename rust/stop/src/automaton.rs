//! A byte-level Aho-Corasick automaton that exposes what streaming needs: the depth of each state.
//!
//! The `aho-corasick` crate hides state depth, but the hold-back rule of the matcher is exactly
//! "the current state's depth" (the longest suffix of the text read so far that is a prefix of
//! some stop string), so the automaton is built here. It is a trie with failure links:
//! transitions out of the root are a dense 256-entry table (the hot path when no stop string is in
//! progress), inner states keep sorted sparse edges. Failure-link walks are amortised O(1) per
//! byte, so the cost of a scan is linear in the text and does not depend on how it is chunked.

/// Index of a state; the root is state 0.
pub(crate) type StateId = u32;

/// The root state: nothing of any stop string is in progress.
pub(crate) const ROOT: StateId = 0;

/// The longest stop string that ends at a state, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Output {
    /// Its length in bytes (the match starts `len` bytes before the current position).
    pub(crate) len: u32,
    /// Its index in the stop list; for duplicate stop strings, the smallest index.
    pub(crate) index: u32,
}

/// The compiled automaton. Immutable once built, so one instance can serve many matchers.
#[derive(Debug, Clone)]
pub(crate) struct Automaton {
    /// Next state from the root for each byte (root transitions after failure are folded in).
    root_next: Box<[StateId; 256]>,
    /// Per state: range into `edge_bytes`/`edge_targets` of its trie children, sorted by byte.
    edge_start: Vec<u32>,
    edge_bytes: Vec<u8>,
    edge_targets: Vec<StateId>,
    /// Per state: the state of the longest proper suffix that is also a trie node.
    fail: Vec<StateId>,
    /// Per state: number of bytes of the stop-string prefix it stands for.
    depth: Vec<u32>,
    /// Per state: the longest stop string that is a suffix of this state's prefix.
    output: Vec<Option<Output>>,
}

impl Automaton {
    /// Build the automaton for non-empty `patterns` (validated by the caller).
    pub(crate) fn new(patterns: &[String]) -> Self {
        let mut builder = Builder::default();
        for (index, pattern) in patterns.iter().enumerate() {
            builder.insert(pattern.as_bytes(), index);
        }
        builder.finish()
    }

    /// Follow one byte from `state`.
    #[inline]
    pub(crate) fn next(&self, mut state: StateId, byte: u8) -> StateId {
        loop {
            if state == ROOT {
                return self.root_next[usize::from(byte)];
            }
            let s = state as usize;
            let lo = self.edge_start[s] as usize;
            let hi = self.edge_start[s + 1] as usize;
            let bytes = &self.edge_bytes[lo..hi];
            // Inner states usually have one or two children: a linear scan beats a binary search.
            if let Some(k) = bytes.iter().position(|&b| b == byte) {
                return self.edge_targets[lo + k];
            }
            state = self.fail[s];
        }
    }

    /// Bytes of a stop-string prefix that `state` stands for (the text to hold back).
    #[inline]
    pub(crate) fn depth(&self, state: StateId) -> usize {
        self.depth[state as usize] as usize
    }

    /// The longest stop string ending at `state`, if one does.
    #[inline]
    pub(crate) fn output(&self, state: StateId) -> Option<Output> {
        self.output[state as usize]
    }

    /// Number of states, for sizing reports.
    pub(crate) fn state_count(&self) -> usize {
        self.depth.len()
    }
}

/// Trie under construction: children as small vectors, turned into flat arrays by `finish`.
#[derive(Default)]
struct Builder {
    children: Vec<Vec<(u8, StateId)>>,
    depth: Vec<u32>,
    terminal: Vec<Option<u32>>,
}

impl Builder {
    fn add_state(&mut self, depth: u32) -> StateId {
        self.children.push(Vec::new());
        self.depth.push(depth);
        self.terminal.push(None);
        // State counts are bounded by the stop limits (64 * 1024 bytes), far below u32::MAX.
        (self.children.len() - 1) as StateId
    }

    fn child(&self, state: StateId, byte: u8) -> Option<StateId> {
        self.children[state as usize]
            .iter()
            .find(|&&(b, _)| b == byte)
            .map(|&(_, t)| t)
    }

    fn insert(&mut self, pattern: &[u8], index: usize) {
        if self.children.is_empty() {
            self.add_state(0);
        }
        let mut state = ROOT;
        for (i, &byte) in pattern.iter().enumerate() {
            state = match self.child(state, byte) {
                Some(next) => next,
                None => {
                    let next = self.add_state(i as u32 + 1);
                    self.children[state as usize].push((byte, next));
                    next
                }
            };
        }
        // Keep the first index for duplicates: ties between equal strings go to the earlier stop.
        let slot = &mut self.terminal[state as usize];
        if slot.is_none() {
            *slot = Some(index as u32);
        }
    }

    fn finish(mut self) -> Automaton {
        if self.children.is_empty() {
            self.add_state(0);
        }
        let n = self.children.len();
        let mut fail = vec![ROOT; n];
        let mut output: Vec<Option<Output>> = vec![None; n];
        let mut root_next = Box::new([ROOT; 256]);
        for &(byte, target) in &self.children[ROOT as usize] {
            root_next[usize::from(byte)] = target;
        }
        // Breadth-first order guarantees a state's failure target is finished before the state.
        let mut queue = std::collections::VecDeque::new();
        queue.push_back(ROOT);
        while let Some(state) = queue.pop_front() {
            let s = state as usize;
            output[s] = match self.terminal[s] {
                Some(index) => Some(Output {
                    len: self.depth[s],
                    index,
                }),
                None if state == ROOT => None,
                None => output[fail[s] as usize],
            };
            for &(byte, child) in &self.children[s] {
                fail[child as usize] = if state == ROOT {
                    ROOT
                } else {
                    self.next(&root_next, &fail, fail[s], byte)
                };
                queue.push_back(child);
            }
        }
        for kids in &mut self.children {
            kids.sort_unstable_by_key(|&(b, _)| b);
        }
        let mut edge_start = Vec::with_capacity(n + 1);
        let mut edge_bytes = Vec::new();
        let mut edge_targets = Vec::new();
        for kids in &self.children {
            edge_start.push(edge_bytes.len() as u32);
            edge_bytes.extend(kids.iter().map(|&(b, _)| b));
            edge_targets.extend(kids.iter().map(|&(_, t)| t));
        }
        edge_start.push(edge_bytes.len() as u32);
        Automaton {
            root_next,
            edge_start,
            edge_bytes,
            edge_targets,
            fail,
            depth: self.depth,
            output,
        }
    }

    /// `Automaton::next` on the partially built automaton (failure links of shallower states).
    fn next(&self, root_next: &[StateId; 256], fail: &[StateId], mut state: StateId, byte: u8) -> StateId {
        loop {
            if state == ROOT {
                return root_next[usize::from(byte)];
            }
            if let Some(next) = self.child(state, byte) {
                return next;
            }
            state = fail[state as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(a: &Automaton, text: &str) -> StateId {
        text.bytes().fold(ROOT, |s, b| a.next(s, b))
    }

    #[test]
    fn depth_is_longest_suffix_that_is_a_prefix() {
        let a = Automaton::new(&["abcd".to_string(), "bce".to_string()]);
        assert_eq!(a.depth(walk(&a, "xab")), 2);
        assert_eq!(a.depth(walk(&a, "xabc")), 3);
        assert_eq!(a.depth(walk(&a, "xabcx")), 0);
        // "abce": after "abc" fails on 'e', "bc" + 'e' completes the second stop.
        let s = walk(&a, "abce");
        assert_eq!(a.output(s), Some(Output { len: 3, index: 1 }));
    }

    #[test]
    fn output_follows_suffix_links_and_prefers_longest() {
        let a = Automaton::new(&["c".to_string(), "abc".to_string(), "bc".to_string()]);
        let s = walk(&a, "abc");
        assert_eq!(a.output(s), Some(Output { len: 3, index: 1 }));
        let s = walk(&a, "xbc");
        assert_eq!(a.output(s), Some(Output { len: 2, index: 2 }));
    }

    #[test]
    fn duplicates_keep_first_index_and_empty_set_stays_at_root() {
        let a = Automaton::new(&["ab".to_string(), "ab".to_string()]);
        assert_eq!(a.output(walk(&a, "ab")), Some(Output { len: 2, index: 0 }));
        let empty = Automaton::new(&[]);
        assert_eq!(walk(&empty, "anything"), ROOT);
        assert_eq!(empty.state_count(), 1);
    }
}
