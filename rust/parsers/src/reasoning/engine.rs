//! The one streaming engine behind every reasoning format.
//!
//! It keeps only the text it cannot decide yet (a suffix that may start a marker, found with
//! `crate::scan`), so each byte is scanned a bounded number of times: no rescans of the whole
//! output per chunk. Complete parsing is `push(all); finish()`, so the two always agree.
use super::format::ReasoningFormat;
use super::spec::Spec;
use super::{ReasoningDelta, ReasoningOptions};
use crate::scan::{find_first, partial_suffix_len};
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
    /// Remove the marker and switch mode.
    To(Mode),
    /// Switch mode and emit the marker into the new mode (it belongs to the next parser).
    Keep(Mode),
}

/// Markers recognised in one mode and what each does, in parallel arrays for `find_first`.
#[derive(Debug, Default)]
struct Table {
    markers: Vec<&'static str>,
    acts: Vec<Act>,
}

impl Table {
    fn add(&mut self, list: &'static [&'static str], act: Act) {
        for m in list {
            if !self.markers.contains(m) {
                self.markers.push(m);
                self.acts.push(act);
            }
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
        r.add(spec.opens, Act::Drop);
        // Answer.
        let a = &mut t[off + 2];
        a.add(spec.answer_closes, Act::To(Mode::Content));
        if !disabled {
            a.add(spec.opens, Act::To(Mode::Reasoning));
        }
        a.add(spec.drops, Act::Drop);
        stray(a);
    }
    Tables { by_mode: t }
}

/// Immutable, shared per-format tables, built once.
static TABLES: LazyLock<Vec<Tables>> = LazyLock::new(|| ReasoningFormat::ALL.iter().map(|f| build(f.spec())).collect());

/// Per-request state.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    format: ReasoningFormat,
    disabled: bool,
    mode: Mode,
    /// Undecided text: always a suffix that might begin a marker (or empty).
    held: String,
    /// `content_prefix` still to be emitted.
    prefix_pending: bool,
}

impl Engine {
    pub(crate) fn new(format: ReasoningFormat, opts: &ReasoningOptions) -> Self {
        let spec = format.spec();
        let disabled = opts.thinking_disabled;
        let mode = if !disabled && (spec.implied_open || opts.prompt_opened_reasoning) {
            Mode::Reasoning
        } else {
            Mode::Content
        };
        Self {
            format,
            disabled,
            mode,
            held: String::new(),
            prefix_pending: !disabled && spec.content_prefix.is_some(),
        }
    }

    pub(crate) fn in_reasoning(&self) -> bool {
        self.mode == Mode::Reasoning
    }

    fn table(&self) -> &'static Table {
        let idx = self.mode as usize + if self.disabled { 3 } else { 0 };
        // `TABLES` has one entry per format in `ALL`; `index()` is always in range.
        &TABLES[self.format.index()].by_mode[idx]
    }

    fn emit(&self, out: &mut ReasoningDelta, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.mode {
            Mode::Reasoning => out.reasoning.push_str(text),
            Mode::Content | Mode::Answer => out.content.push_str(text),
        }
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
        let joined;
        let buf: &str = if self.held.is_empty() {
            text
        } else {
            let mut s = std::mem::take(&mut self.held);
            s.push_str(text);
            joined = s;
            &joined
        };
        let mut pos = 0;
        loop {
            let table = self.table();
            let rest = &buf[pos..];
            if table.markers.is_empty() {
                self.emit(out, rest);
                break;
            }
            let hold = if finishing {
                0
            } else {
                partial_suffix_len(rest, &table.markers)
            };
            match find_first(rest, &table.markers) {
                // A marker prefix that starts at or before the match could still become an
                // earlier or longer marker (`<|channel>thought` vs `<|channel>thought\n`): wait.
                Some((off, i)) if hold == 0 || rest.len() - hold > off => {
                    self.emit(out, &rest[..off]);
                    let marker = table.markers[i];
                    match table.acts[i] {
                        Act::Drop => {}
                        Act::To(m) => self.mode = m,
                        Act::Keep(m) => {
                            self.mode = m;
                            self.emit(out, marker);
                        }
                    }
                    pos += off + marker.len();
                }
                _ => {
                    let cut = rest.len() - hold;
                    self.emit(out, &rest[..cut]);
                    self.held.push_str(&rest[cut..]);
                    break;
                }
            }
        }
    }
}
