//! A fast renderer for the common subset of chat templates, checked against minijinja.
//!
//! minijinja's VM clones every value it touches (reference-count traffic on each `message.role`),
//! looks names up through hashed frames and builds a new string for every `+`. Most chat templates are
//! a loop over messages with attribute reads, comparisons, string joins and a few filters, so this
//! module lowers minijinja's own syntax tree ([`lower`]) into a small program and interprets it over
//! borrowed input ([`run`]): names are numbered at compile time, values from the input are borrowed,
//! and `{{ a + b + c }}` / `{{ a ~ b }}` write their parts straight to the output.
//!
//! It is an accelerator, never the authority:
//! * a template using anything not implemented here (see [`lower`]) is not compiled, and renders with
//!   minijinja alone;
//! * a render that meets a case not implemented (a value of an unexpected type, an error, a
//!   `raise_exception`) stops and the same input is rendered by minijinja, whose output or error is
//!   returned. So errors and rare paths behave exactly as before, and a fast render either gives
//!   minijinja's output or is discarded.
//!
//! The differential tests render every shared fixture template with both and require equal output.

mod ir;
mod lower;
mod ns;
mod run;

use crate::clock::DateTime;
use crate::doc::NodeRef;
use crate::json::DumpOptions;
use minijinja::machinery::{parse, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A template whose first this-many successful renders all came from minijinja stops trying the fast
/// path (it uses something the fast renderer does not implement on every input).
const GIVE_UP_AFTER: usize = 16;

/// A template compiled for the fast renderer.
#[derive(Debug)]
pub struct Compiled {
    program: lower::Program,
    /// Per symbol: is it one of the environment's globals (functions like `raise_exception`)?
    globals: Vec<bool>,
    json: DumpOptions,
    now: Option<DateTime>,
    /// Renders that completed here, and renders minijinja completed after a hand-over (renders that
    /// fail, e.g. on `raise_exception`, count for neither).
    hits: AtomicUsize,
    misses: AtomicUsize,
    /// Output size of the last render, to size the next buffer.
    last_len: AtomicUsize,
}

impl Compiled {
    /// Compile an already prepared source (see `source::prepare_source`); `None` when the template uses
    /// anything the fast renderer does not implement.
    pub fn new(source: &str, env: &minijinja::Environment<'_>, now: Option<DateTime>) -> Option<Self> {
        let ws = WhitespaceConfig {
            keep_trailing_newline: false,
            lstrip_blocks: true,
            trim_blocks: true,
        };
        // `default()` rather than the unit literal: the type has fields when minijinja's `custom_syntax`
        // feature is on.
        #[allow(clippy::default_constructed_unit_structs)]
        let syntax = SyntaxConfig::default();
        let ast = parse(source, "<chat_template>", syntax, ws).ok()?;
        let program = lower::lower(&ast);
        let mut globals = vec![false; program.syms.len()];
        for (name, _) in env.globals() {
            if let Some(sym) = program.syms.get(name) {
                globals[*sym as usize] = true;
            }
        }
        Some(Self {
            program,
            globals,
            json: DumpOptions::default(),
            now,
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            last_len: AtomicUsize::new(0),
        })
    }

    /// Render with the context `ctx` (name, value pairs; later ones win) and the document values
    /// `nodes` (which win over `ctx`). `Err(line)`: render with minijinja; `line` is where `run.rs` handed
    /// over (0 when this template no longer tries).
    pub fn render(&self, ctx: &[(Value, Value)], nodes: &[(&str, NodeRef<'_>)]) -> Result<String, u32> {
        if self.misses.load(Ordering::Relaxed) >= GIVE_UP_AFTER && self.hits.load(Ordering::Relaxed) == 0 {
            return Err(0);
        }
        let capacity = self.last_len.load(Ordering::Relaxed) + 256;
        let mut run = run::Run::new(self, ctx, nodes, capacity);
        match run.run() {
            Ok(()) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.last_len.store(run.out.len(), Ordering::Relaxed);
                Ok(run.out)
            }
            Err(bail) => Err(bail.line),
        }
    }

    /// The constructs this template uses that the fast renderer hands over on (for diagnostics).
    pub fn unsupported(&self) -> &[String] {
        &self.program.unsupported
    }

    /// Record that minijinja rendered an input this renderer handed over.
    pub fn note_handover(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }
}
