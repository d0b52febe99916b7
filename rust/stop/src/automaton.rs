//! A byte-level Aho-Corasick automaton that exposes what streaming needs: the depth of each state.
//!
//! The `aho-corasick` crate hides state depth, but the hold-back rule of the matcher is exactly
//! "the current state's depth" (the longest suffix of the text read so far that is a prefix of
//! some stop string), so the automaton is built here. It is a trie with failure links, compiled
//! to a dense DFA over byte classes when that table is small (the usual case: a few stop
//! strings), else kept sparse with failure-link walks (amortised O(1) per byte). Either way a
//! scan is linear in the text and does not depend on how the text is chunked.
//!
//! State ids carry a flag bit for "a stop string ends here", so the hot loop tests one register
//! instead of loading per-state data for every byte.

use std::collections::VecDeque;

use crate::set::StopMatch;

/// A state id: the state's table offset, plus [`MATCH_FLAG`] if a stop string ends there.
pub(crate) type StateId = u32;

/// The root state: nothing of any stop string is in progress. Never flagged (no empty stops).
pub(crate) const ROOT: StateId = 0;

/// Set in a state id when some stop string ends at that state.
const MATCH_FLAG: StateId = 1 << 31;

/// Largest dense table, in entries (4 bytes each); bigger sets use sparse transitions so a
/// request with 64 long, unusual stop strings cannot make the server allocate tens of MB.
const DENSE_LIMIT: usize = 1 << 20;

/// The longest stop string that ends at a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Output {
    /// Its length in bytes (the match starts `len` bytes before the current position).
    pub(crate) len: u32,
    /// Its index in the stop list; for duplicate stop strings, the smallest index.
    pub(crate) index: u32,
}

/// Where a scan of some bytes ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    /// All bytes read; `candidate` is a complete match that is not yet certain.
    End {
        state: StateId,
        candidate: Option<StopMatch>,
    },
    /// This match is certain (no stop string can still match starting earlier).
    Stop(StopMatch),
}

/// Dense DFA: `table[state + class[byte]]`, state ids premultiplied by the row stride.
#[derive(Debug, Clone)]
struct Dense {
    classes: Box<[u8; 256]>,
    /// log2 of the row stride (a power of two, so a state's index is a shift away).
    shift: u32,
    table: Vec<StateId>,
}

/// Sparse trie edges plus failure links; state ids are plain indices.
#[derive(Debug, Clone)]
struct Sparse {
    /// Next state from the root for each byte (the root's failure self-loop folded in).
    root_next: Box<[StateId; 256]>,
    /// Per state: range into `edge_bytes`/`edge_targets` of its children, sorted by byte.
    edge_start: Vec<u32>,
    edge_bytes: Vec<u8>,
    edge_targets: Vec<StateId>,
    /// Per state: the state of the longest proper suffix that is also a trie node.
    fail: Vec<StateId>,
}

#[derive(Debug, Clone)]
enum Table {
    Dense(Dense),
    Sparse(Sparse),
}

/// Bytes that can start a stop string, when there are few enough for `memchr` to skip to them.
#[derive(Debug, Clone, Copy)]
enum StartBytes {
    None,
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    Many,
}

/// The compiled automaton. Immutable once built, so one instance can serve many matchers.
#[derive(Debug, Clone)]
pub(crate) struct Automaton {
    table: Table,
    start_bytes: StartBytes,
    /// Per byte: whether some stop string starts with it (for skipping over short slices).
    is_start: [bool; 256],
    /// Per state index: bytes of the stop-string prefix it stands for (the text to hold back).
    depth: Vec<u32>,
    /// Per state index: the longest stop string that is a suffix of this state's prefix.
    output: Vec<Option<Output>>,
}

trait Step {
    fn next(&self, state: StateId, byte: u8) -> StateId;
}

impl Step for Dense {
    #[inline(always)]
    fn next(&self, state: StateId, byte: u8) -> StateId {
        self.table[((state & !MATCH_FLAG) as usize) + usize::from(self.classes[usize::from(byte)])]
    }
}

impl Step for Sparse {
    #[inline(always)]
    fn next(&self, mut state: StateId, byte: u8) -> StateId {
        loop {
            if state == ROOT {
                return self.root_next[usize::from(byte)];
            }
            let s = (state & !MATCH_FLAG) as usize;
            let lo = self.edge_start[s] as usize;
            let hi = self.edge_start[s + 1] as usize;
            // Inner states usually have one or two children: a linear scan beats a binary search.
            if let Some(k) = self.edge_bytes[lo..hi].iter().position(|&b| b == byte) {
                return self.edge_targets[lo + k];
            }
            state = self.fail[s];
        }
    }
}

impl Automaton {
    /// Build the automaton for non-empty `patterns` (validated by the caller); `allow_dense`
    /// false forces the sparse table (for tests of the fallback).
    pub(crate) fn new(patterns: &[String], allow_dense: bool) -> Self {
        let mut trie = Trie::new();
        for (index, pattern) in patterns.iter().enumerate() {
            trie.insert(pattern.as_bytes(), index);
        }
        trie.compile(allow_dense)
    }

    /// Bytes of the stop-string prefix that `state` stands for (the text to hold back).
    #[inline]
    pub(crate) fn depth(&self, state: StateId) -> usize {
        self.depth[self.index(state)] as usize
    }

    /// Number of states, for sizing reports.
    pub(crate) fn state_count(&self) -> usize {
        self.depth.len()
    }

    /// Whether transitions are a dense table (else sparse edges with failure links).
    pub(crate) fn is_dense(&self) -> bool {
        matches!(self.table, Table::Dense(_))
    }

    /// Read `bytes` (which start at absolute position `pos0`) from `state`, tracking the
    /// earliest complete match, until the end or until a match is certain.
    pub(crate) fn scan(&self, state: StateId, candidate: Option<StopMatch>, pos0: usize, bytes: &[u8]) -> Scan {
        match &self.table {
            Table::Dense(d) => self.scan_with(d, state, candidate, pos0, bytes),
            Table::Sparse(s) => self.scan_with(s, state, candidate, pos0, bytes),
        }
    }

    #[inline(always)]
    fn scan_with<T: Step>(
        &self,
        step: &T,
        mut state: StateId,
        mut candidate: Option<StopMatch>,
        pos0: usize,
        bytes: &[u8],
    ) -> Scan {
        let mut i = 0;
        while i < bytes.len() {
            if state == ROOT && candidate.is_none() {
                // Nothing in progress: jump to the next byte that can start a stop string.
                match self.skip(&bytes[i..]) {
                    Some(k) => i += k,
                    None => return Scan::End { state, candidate },
                }
            }
            state = step.next(state, bytes[i]);
            i += 1;
            if state & MATCH_FLAG != 0 || candidate.is_some() {
                let pos = pos0 + i;
                if let Some(found) = self.output[self.index(state)] {
                    let start = pos - found.len as usize;
                    if candidate.is_none_or(|c| start < c.start) {
                        candidate = Some(StopMatch {
                            start,
                            end: pos,
                            index: found.index as usize,
                        });
                    }
                }
                if let Some(c) = candidate {
                    // Every stop string still in progress starts at `pos - depth` or later: once
                    // that is not before the candidate, no earlier (or same-start, shorter) match
                    // can come.
                    if pos - self.depth(state) >= c.start {
                        return Scan::Stop(c);
                    }
                }
            }
        }
        Scan::End { state, candidate }
    }

    /// Offset of the first byte in `bytes` that can start a stop string (`Some(0)` when the set
    /// has too many distinct first bytes to skip cheaply).
    #[inline]
    fn skip(&self, bytes: &[u8]) -> Option<usize> {
        if bytes.len() < 16 {
            // Token-sized deltas: a table lookup per byte beats memchr's setup.
            return bytes.iter().position(|&b| self.is_start[usize::from(b)]);
        }
        match self.start_bytes {
            StartBytes::None => None,
            StartBytes::One(a) => memchr::memchr(a, bytes),
            StartBytes::Two(a, b) => memchr::memchr2(a, b, bytes),
            StartBytes::Three(a, b, c) => memchr::memchr3(a, b, c, bytes),
            StartBytes::Many => Some(0),
        }
    }

    #[inline]
    fn index(&self, state: StateId) -> usize {
        let raw = state & !MATCH_FLAG;
        match &self.table {
            Table::Dense(d) => (raw >> d.shift) as usize,
            Table::Sparse(_) => raw as usize,
        }
    }
}

/// Trie under construction: children as small vectors, compiled by `compile`.
struct Trie {
    children: Vec<Vec<(u8, u32)>>,
    depth: Vec<u32>,
    terminal: Vec<Option<u32>>,
}

impl Trie {
    fn new() -> Self {
        Self {
            children: vec![Vec::new()],
            depth: vec![0],
            terminal: vec![None],
        }
    }

    fn child(&self, state: u32, byte: u8) -> Option<u32> {
        self.children[state as usize]
            .iter()
            .find(|&&(b, _)| b == byte)
            .map(|&(_, t)| t)
    }

    fn insert(&mut self, pattern: &[u8], index: usize) {
        let mut state = 0;
        for &byte in pattern {
            state = match self.child(state, byte) {
                Some(next) => next,
                None => {
                    // State counts are bounded by the stop limits (64 * 1024 bytes).
                    let next = self.children.len() as u32;
                    self.children.push(Vec::new());
                    self.depth.push(self.depth[state as usize] + 1);
                    self.terminal.push(None);
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

    fn compile(mut self, allow_dense: bool) -> Automaton {
        let n = self.children.len();
        for kids in &mut self.children {
            kids.sort_unstable_by_key(|&(b, _)| b);
        }
        // Breadth-first order: a state's failure target (shallower) is finished before it.
        let mut order = Vec::with_capacity(n);
        let mut fail = vec![0u32; n];
        let mut output: Vec<Option<Output>> = vec![None; n];
        let mut queue = VecDeque::from([0u32]);
        while let Some(state) = queue.pop_front() {
            let s = state as usize;
            order.push(state);
            output[s] = match self.terminal[s] {
                Some(index) => Some(Output {
                    len: self.depth[s],
                    index,
                }),
                None if state == 0 => None,
                None => output[fail[s] as usize],
            };
            for &(byte, child) in &self.children[s] {
                fail[child as usize] = if state == 0 { 0 } else { self.goto(&fail, fail[s], byte) };
                queue.push_back(child);
            }
        }
        let start_bytes = self.start_bytes();
        let mut is_start = [false; 256];
        for &(b, _) in &self.children[0] {
            is_start[usize::from(b)] = true;
        }
        let dense = if allow_dense {
            self.dense(&order, &fail, &output)
        } else {
            None
        };
        let table = match dense {
            Some(dense) => Table::Dense(dense),
            None => Table::Sparse(self.sparse(&fail, &output)),
        };
        Automaton {
            table,
            start_bytes,
            is_start,
            depth: self.depth,
            output,
        }
    }

    /// Classic goto-with-failure on the trie (used while building).
    fn goto(&self, fail: &[u32], mut state: u32, byte: u8) -> u32 {
        loop {
            if let Some(next) = self.child(state, byte) {
                return next;
            }
            if state == 0 {
                return 0;
            }
            state = fail[state as usize];
        }
    }

    fn start_bytes(&self) -> StartBytes {
        match self.children[0].iter().map(|&(b, _)| b).collect::<Vec<_>>()[..] {
            [] => StartBytes::None,
            [a] => StartBytes::One(a),
            [a, b] => StartBytes::Two(a, b),
            [a, b, c] => StartBytes::Three(a, b, c),
            _ => StartBytes::Many,
        }
    }

    fn dense(&self, order: &[u32], fail: &[u32], output: &[Option<Output>]) -> Option<Dense> {
        // Bytes that appear in no stop string behave alike: they all share class 0. Valid UTF-8
        // never uses every byte value, so the classes always fit in a `u8`.
        let mut classes = Box::new([0u8; 256]);
        let mut reps = vec![0u8];
        for kids in &self.children {
            for &(b, _) in kids {
                if classes[usize::from(b)] == 0 {
                    classes[usize::from(b)] = u8::try_from(reps.len()).ok()?;
                    reps.push(b);
                }
            }
        }
        let shift = reps.len().next_power_of_two().trailing_zeros();
        let stride = 1usize << shift;
        if self.children.len().checked_mul(stride)? > DENSE_LIMIT {
            return None;
        }
        let id = |s: u32| -> StateId {
            let flag = if output[s as usize].is_some() { MATCH_FLAG } else { 0 };
            ((s as usize) << shift) as StateId | flag
        };
        let mut table = vec![ROOT; self.children.len() * stride];
        for &state in order {
            let s = state as usize;
            for (class, &byte) in reps.iter().enumerate() {
                let target = match self.child(state, byte) {
                    Some(t) => id(t),
                    // Class 0 has no edges; others fall back to the failure state's row, which
                    // BFS order has already filled.
                    None if state == 0 || class == 0 => ROOT,
                    None => table[((fail[s] as usize) << shift) + class],
                };
                table[(s << shift) + class] = target;
            }
        }
        Some(Dense { classes, shift, table })
    }

    fn sparse(&self, fail: &[u32], output: &[Option<Output>]) -> Sparse {
        let id = |s: u32| -> StateId { s | if output[s as usize].is_some() { MATCH_FLAG } else { 0 } };
        let mut root_next = Box::new([ROOT; 256]);
        for &(byte, target) in &self.children[0] {
            root_next[usize::from(byte)] = id(target);
        }
        let mut edge_start = Vec::with_capacity(self.children.len() + 1);
        let mut edge_bytes = Vec::new();
        let mut edge_targets = Vec::new();
        for kids in &self.children {
            edge_start.push(edge_bytes.len() as u32);
            edge_bytes.extend(kids.iter().map(|&(b, _)| b));
            edge_targets.extend(kids.iter().map(|&(_, t)| id(t)));
        }
        edge_start.push(edge_bytes.len() as u32);
        let fail = fail.iter().map(|&f| id(f)).collect();
        Sparse {
            root_next,
            edge_start,
            edge_bytes,
            edge_targets,
            fail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stops(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn walk(a: &Automaton, text: &str) -> StateId {
        let step = |s, b| match &a.table {
            Table::Dense(d) => d.next(s, b),
            Table::Sparse(sp) => sp.next(s, b),
        };
        text.bytes().fold(ROOT, step)
    }

    fn output(a: &Automaton, s: StateId) -> Option<Output> {
        a.output[a.index(s)]
    }

    /// Both representations, so the sparse fallback is tested without 64 KiB of stop strings.
    fn both(patterns: &[String]) -> [Automaton; 2] {
        let [dense, sparse] = [Automaton::new(patterns, true), Automaton::new(patterns, false)];
        assert!(dense.is_dense() && !sparse.is_dense());
        [dense, sparse]
    }

    #[test]
    fn depth_is_longest_suffix_that_is_a_prefix() {
        for a in both(&stops(&["abcd", "bce"])) {
            assert_eq!(a.depth(walk(&a, "xab")), 2);
            assert_eq!(a.depth(walk(&a, "xabc")), 3);
            assert_eq!(a.depth(walk(&a, "xabcx")), 0);
            // "abce": after "abc" fails on 'e', "bc" + 'e' completes the second stop.
            assert_eq!(output(&a, walk(&a, "abce")), Some(Output { len: 3, index: 1 }));
        }
    }

    #[test]
    fn output_follows_suffix_links_and_prefers_longest() {
        for a in both(&stops(&["c", "abc", "bc"])) {
            assert_eq!(output(&a, walk(&a, "abc")), Some(Output { len: 3, index: 1 }));
            assert_eq!(output(&a, walk(&a, "xbc")), Some(Output { len: 2, index: 2 }));
            assert_ne!(walk(&a, "xbc") & MATCH_FLAG, 0);
            assert_eq!(walk(&a, "xb") & MATCH_FLAG, 0);
        }
    }

    #[test]
    fn duplicates_keep_first_index_and_empty_set_stays_at_root() {
        for a in both(&stops(&["ab", "ab"])) {
            assert_eq!(output(&a, walk(&a, "ab")), Some(Output { len: 2, index: 0 }));
        }
        let empty = Automaton::new(&[], true);
        assert_eq!(walk(&empty, "anything"), ROOT);
        assert_eq!(empty.state_count(), 1);
        assert_eq!(
            empty.scan(ROOT, None, 0, b"text"),
            Scan::End {
                state: ROOT,
                candidate: None
            }
        );
    }

    #[test]
    fn scan_agrees_between_dense_and_sparse() {
        let patterns = stops(&["<|im_end|>", "|>", "\n\n", "终止", "ab", "b"]);
        let text = "x<|im_e|> ab\n终止 <|im_end|>".as_bytes();
        let [dense, sparse] = both(&patterns);
        // State ids differ between representations; depths and matches must not.
        let view = |a: &Automaton, scan| match scan {
            Scan::End { state, candidate } => (Some(a.depth(state)), candidate),
            Scan::Stop(found) => (None, Some(found)),
        };
        for pos in 0..text.len() {
            let d = view(&dense, dense.scan(ROOT, None, 0, &text[..pos]));
            assert_eq!(
                d,
                view(&sparse, sparse.scan(ROOT, None, 0, &text[..pos])),
                "prefix of {pos} bytes"
            );
        }
    }

    #[test]
    fn huge_sets_fall_back_to_sparse() {
        // 64 stop strings of 1024 distinct-ish bytes: far over the dense limit.
        let patterns: Vec<String> = (0..64)
            .map(|i| {
                (0..1024)
                    .map(|j| char::from(b' ' + ((i * 7 + j * 13) % 90) as u8))
                    .collect()
            })
            .collect();
        let a = Automaton::new(&patterns, true);
        assert!(!a.is_dense());
        let text = format!("zz{}", patterns[5]);
        assert!(matches!(a.scan(ROOT, None, 0, text.as_bytes()), Scan::Stop(m) if m.start == 2));
    }
}
