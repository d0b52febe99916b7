//! The one streaming engine behind every reasoning format.
//!
//! It keeps only the text it cannot decide yet (a suffix that may start a marker, found with
//! `crate::scan`), so each byte is scanned a bounded number of times: no rescans of the whole
//! output per chunk. Complete parsing is `push(all); finish()`, so the two always agree.
use super::format::ReasoningFormat;
use super::spec::Spec;
use super::{ReasoningDelta, ReasoningOptions};
use crate::scan::{partial_suffix_len, with_held};
use std::sync::LazyLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Content,
    Reasoning,
    Answer,
}

/// What recognising a marker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Remove the marker, stay in the current mode.
    Drop,
    /// Inside reasoning, an opening marker: removed before any reasoning text, else kept as
    /// reasoning text (a nested opening).
    Nested,
    /// Remove the marker and switch mode.
    To(Mode),
    /// Switch mode and emit the marker into the new mode (it belongs to the next parser).
    Keep(Mode),
}

/// Markers recognised in one mode and what each does, in parallel arrays.
#[derive(Debug, Default)]
struct Table {
    markers: Vec<&'static str>,
    acts: Vec<Act>,
    /// Distinct first bytes of the markers: text without them cannot hold a marker or a prefix
    /// of one, so it is emitted after a `memchr` skip without running the marker scan.
    first_bytes: Vec<u8>,
    /// Longest marker, in bytes: the scan window at a candidate position.
    max_len: usize,
    /// All markers in one automaton, for the bulk search over long text (one pass, SIMD
    /// prefilter) instead of one substring search per marker.
    finder: Option<aho_corasick::AhoCorasick>,
    /// One prebuilt substring searcher per marker, used instead of `finder` for small sets.
    finders: Vec<memchr::memmem::Finder<'static>>,
    /// A searcher for the prefix all markers share (`<|` for Cohere's), when it is at least two
    /// bytes: one pass finds every candidate, and a prefix test at each tells which marker it is.
    shared: Option<memchr::memmem::Finder<'static>>,
}

impl Table {
    fn add(&mut self, list: &'static [&'static str], act: Act) {
        for m in list {
            if !self.markers.contains(m) {
                self.markers.push(m);
                self.acts.push(act);
                if let Some(&b) = m.as_bytes().first() {
                    if !self.first_bytes.contains(&b) {
                        self.first_bytes.push(b);
                    }
                }
                self.max_len = self.max_len.max(m.len());
            }
        }
    }

    /// The marker that starts at offset 0 of `window` (the longest on a tie, like `find_first`).
    fn marker_at(&self, window: &str) -> Option<usize> {
        // A prefix test per marker: cheaper than a substring search in this tiny window.
        let mut best: Option<usize> = None;
        for (i, m) in self.markers.iter().enumerate() {
            if window.starts_with(m) && best.is_none_or(|b| m.len() > self.markers[b].len()) {
                best = Some(i);
            }
        }
        best
    }

    /// Offset of the earliest complete marker in `s`.
    fn earliest(&self, s: &str) -> Option<usize> {
        if let Some(shared) = &self.shared {
            return shared
                .find_iter(s.as_bytes())
                .find(|&p| s.is_char_boundary(p) && self.marker_at(&s[p..]).is_some());
        }
        if !self.finders.is_empty() {
            let mut best: Option<usize> = None;
            for f in &self.finders {
                // Only text before the best hit so far can hold an earlier one.
                let hay = &s.as_bytes()[..best.map_or(s.len(), |b| (b + f.needle().len()).min(s.len()))];
                if let Some(p) = f.find(hay) {
                    best = Some(best.map_or(p, |b| b.min(p)));
                }
            }
            return best;
        }
        if let Some(ac) = &self.finder {
            return ac.find(s).map(|m| m.start());
        }
        self.markers
            .iter()
            .filter_map(|m| memchr::memmem::find(s.as_bytes(), m.as_bytes()))
            .min()
    }

    /// Offset of the next byte that could start a marker.
    fn next_candidate(&self, s: &str) -> Option<usize> {
        let h = s.as_bytes();
        match self.first_bytes[..] {
            [] => None,
            [a] => memchr::memchr(a, h),
            [a, b] => memchr::memchr2(a, b, h),
            [a, b, c] => memchr::memchr3(a, b, c, h),
            _ => h.iter().position(|x| self.first_bytes.contains(x)),
        }
    }
}

/// The three mode tables of a format, for thinking on and off.
#[derive(Debug)]
struct Tables {
    /// Index: `mode as usize + 3 * thinking_disabled as usize`.
    by_mode: [Table; 6],
}

fn build(spec: &Spec) -> Tables {
    let mut t: [Table; 6] = Default::default();
    for disabled in [false, true] {
        let off = if disabled { 3 } else { 0 };
        let stray = |tb: &mut Table| {
            if spec.drop_stray_close {
                tb.add(spec.closes, Act::Drop);
            }
        };
        // Content.
        let c = &mut t[off];
        if !disabled {
            c.add(spec.opens, Act::To(Mode::Reasoning));
        }
        c.add(spec.answer_opens, Act::To(Mode::Answer));
        c.add(spec.drops, Act::Drop);
        stray(c);
        // Reasoning (only reachable with thinking on, built for both for simplicity).
        let r = &mut t[off + 1];
        r.add(spec.closes, Act::To(Mode::Content));
        r.add(spec.close_keep, Act::Keep(Mode::Content));
        r.add(spec.answer_opens, Act::To(Mode::Answer));
        r.add(spec.opens, Act::Nested);
        // Answer.
        let a = &mut t[off + 2];
        a.add(spec.answer_closes, Act::To(Mode::Content));
        if !disabled {
            a.add(spec.opens, Act::To(Mode::Reasoning));
        }
        a.add(spec.drops, Act::Drop);
        stray(a);
    }
    for table in &mut t {
        let shared = common_prefix(&table.markers);
        if table.markers.len() > 1 && shared.len() >= 2 {
            table.shared = Some(memchr::memmem::Finder::new(shared.as_bytes()));
        } else if (1..=SMALL_SET).contains(&table.markers.len()) {
            table.finders = table
                .markers
                .iter()
                .map(|m| memchr::memmem::Finder::new(m.as_bytes()))
                .collect();
        } else if !table.markers.is_empty() {
            // Building only fails for pathological pattern sets; the memmem path covers that.
            table.finder = aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(&table.markers)
                .ok();
        }
    }
    Tables { by_mode: t }
}

/// The longest prefix all `markers` share.
fn common_prefix(markers: &[&'static str]) -> &'static str {
    let Some(first) = markers.first() else { return "" };
    let mut n = first.len();
    for m in &markers[1..] {
        n = n.min(first.bytes().zip(m.bytes()).take_while(|(a, b)| a == b).count());
    }
    while !first.is_char_boundary(n) {
        n -= 1;
    }
    &first[..n]
}

/// Up to this many markers, one SIMD substring search per marker beats one multi-pattern automaton
/// (measured on the 8 KB bench corpus, where markers share prefixes like `<|`).
const SMALL_SET: usize = 8;

/// Immutable, shared per-format tables, built once.
static TABLES: LazyLock<Vec<Tables>> = LazyLock::new(|| ReasoningFormat::ALL.iter().map(|f| build(f.spec())).collect());

/// Above this many pending bytes the engine searches for whole markers first (see `run`).
const BULK_MIN: usize = 256;

/// Per-request state.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    format: ReasoningFormat,
    tables: &'static Tables,
    disabled: bool,
    mode: Mode,
    /// Undecided text: always a suffix that might begin a marker (or empty).
    held: String,
    /// `content_prefix` still to be emitted.
    prefix_pending: bool,
    /// Reasoning text other than whitespace was emitted in the current reasoning block.
    thought: bool,
    /// Reasoning may open again after it ends (`Spec::reopens`).
    reopens: bool,
}

impl Engine {
    pub(crate) fn new(format: ReasoningFormat, opts: &ReasoningOptions) -> Self {
        let spec = format.spec();
        let disabled = opts.thinking_disabled;
        let opened = opts.prompt_opened_reasoning || (spec.implied_open && !opts.reasoning_not_started);
        let mode = if !disabled && opened {
            Mode::Reasoning
        } else {
            Mode::Content
        };
        // `TABLES` has one entry per format in `ALL`, in the same order.
        let tables = &TABLES[format.index()];
        Self {
            format,
            tables,
            disabled,
            mode,
            held: String::new(),
            prefix_pending: !disabled && spec.content_prefix.is_some(),
            thought: false,
            reopens: spec.reopens,
        }
    }

    pub(crate) fn in_reasoning(&self) -> bool {
        self.mode == Mode::Reasoning
    }

    fn table(&self) -> &'static Table {
        let idx = self.mode as usize + if self.disabled { 3 } else { 0 };
        &self.tables.by_mode[idx]
    }

    fn emit(&mut self, out: &mut ReasoningDelta, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.mode {
            Mode::Reasoning => {
                self.thought = self.thought || !text.trim().is_empty();
                out.reasoning.push_str(text);
            }
            Mode::Content | Mode::Answer => out.content.push_str(text),
        }
    }

    /// Enter mode `m`. Leaving reasoning ends it for good unless the format reopens: from then
    /// on the thinking-disabled tables apply, which read reasoning markers as content.
    fn switch(&mut self, m: Mode) {
        if self.mode == Mode::Reasoning && m != Mode::Reasoning && !self.reopens {
            self.disabled = true;
        }
        if m == Mode::Reasoning {
            self.thought = false;
        }
        self.mode = m;
    }

    pub(crate) fn push(&mut self, text: &str, out: &mut ReasoningDelta) {
        self.run(text, false, out);
    }

    pub(crate) fn finish(&mut self, out: &mut ReasoningDelta) {
        self.run("", true, out);
    }

    fn run(&mut self, text: &str, finishing: bool, out: &mut ReasoningDelta) {
        if self.prefix_pending {
            self.prefix_pending = false;
            if let Some(p) = self.format.spec().content_prefix {
                out.content.push_str(p);
            }
        }
        // Work on `held + text` without copying `text` when nothing is held (the common case).
        let joined = with_held(&mut self.held, text);
        let buf: &str = &joined;
        let mut pos = 0;
        loop {
            let table = self.table();
            let rest = &buf[pos..];
            // Long text (complete parsing, big deltas): jump to the earliest marker with a SIMD
            // substring search instead of stopping at every `<`. Text further than the longest
            // marker from the end cannot be part of an unfinished marker.
            if rest.len() > BULK_MIN {
                let mut safe = rest.len() - table.max_len;
                if let Some(p) = table.earliest(rest) {
                    safe = safe.min(p);
                }
                while !rest.is_char_boundary(safe) {
                    safe -= 1;
                }
                if safe > 0 {
                    self.emit(out, &rest[..safe]);
                    pos += safe;
                    continue;
                }
            }
            let Some(k) = table.next_candidate(rest) else {
                self.emit(out, rest);
                break;
            };
            // Only a window of the longest marker's length can matter at a candidate.
            let mut end = (k + table.max_len).min(rest.len());
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            let tail_is_short = end == rest.len();
            // At the end of the text, a candidate whose whole tail is a marker prefix (or a
            // marker that could still grow into a longer one) waits for the next delta.
            if !finishing && tail_is_short && partial_suffix_len(&rest[k..], &table.markers) == rest.len() - k {
                self.emit(out, &rest[..k]);
                self.held.push_str(&rest[k..]);
                break;
            }
            match table.marker_at(&rest[k..end]) {
                Some(i) => {
                    self.emit(out, &rest[..k]);
                    let marker = table.markers[i];
                    match table.acts[i] {
                        Act::Drop => {}
                        Act::Nested => {
                            if self.thought {
                                self.emit(out, marker);
                            }
                        }
                        Act::To(m) => self.switch(m),
                        Act::Keep(m) => {
                            self.switch(m);
                            self.emit(out, marker);
                        }
                    }
                    pos += k + marker.len();
                }
                _ => {
                    // No marker starts here: emit through this char and look further.
                    let step = rest[k..].chars().next().map_or(1, char::len_utf8);
                    self.emit(out, &rest[..k + step]);
                    pos += k + step;
                }
            }
        }
    }
}
