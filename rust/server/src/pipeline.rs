//! The per-choice output pipeline: stop matcher -> reasoning parser -> tool parser.
//!
//! Each stage is a synchronous state machine owned by its crate; this loop is the only place
//! that chains them. A non-streaming request pushes every delta the same way and so yields
//! exactly what the stream would have.

use smgpy_parsers::{
    CallDelta, Forced, ReasoningFormat, ReasoningOptions, ReasoningParser, ToolCallDelta, ToolCallParser, ToolDef,
    ToolDelta, ToolFormat,
};
use std::sync::Arc;

use smgpy_stop::{StopMatcher, StopOutput, StopSet};

use crate::error::ApiError;

/// Visible output of one step.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Piece {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<ToolCallDelta>,
    /// Index of the stop string that ended the output during this step.
    pub stopped: Option<usize>,
}

impl Piece {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty() && self.calls.is_empty()
    }
}

/// Stage configuration for one request.
#[derive(Debug, Default, Clone)]
pub struct PipelineSpec {
    /// Compiled once per request ([`stop_set`]) and shared by its choices.
    pub stops: Option<Arc<StopSet>>,
    pub include_stop: bool,
    pub reasoning: Option<(ReasoningFormat, ReasoningOptions)>,
    pub tools: Option<ToolStage>,
}

/// How the tool stage reads the output.
#[derive(Debug, Clone)]
pub struct ToolStage {
    /// The model's own format.
    pub format: ToolFormat,
    /// The declared tools (calls to others stay text); `None` accepts any name.
    pub tools: Option<Vec<ToolDef>>,
    /// What `tool_choice` forced the output to open with, if anything.
    pub forced: Option<Forced>,
    /// `parallel_tool_calls: false`: only the first call is reported.
    pub single: bool,
}

/// A request's stop strings, compiled once for all its choices; `None` when it has none. A list
/// the matcher refuses (empty string, too many, too long) is a 400 naming `param`.
pub fn stop_set(stops: &[String], param: &str) -> Result<Option<Arc<StopSet>>, ApiError> {
    if stops.is_empty() {
        return Ok(None);
    }
    StopSet::new(stops.to_vec())
        .map(|s| Some(Arc::new(s)))
        .map_err(|e| ApiError::bad_request(Some(param), e.to_string()))
}

pub struct Pipeline {
    stop: Option<StopMatcher>,
    reasoning: Option<ReasoningParser>,
    tools: Option<ToolCallParser>,
    /// Report only the first call (`parallel_tool_calls: false`).
    single_call: bool,
    /// The tool stage's output for one push, cleared and reused for the next.
    tool_out: ToolDelta,
    done: bool,
}

impl Pipeline {
    pub fn new(spec: &PipelineSpec) -> Self {
        Self {
            stop: spec
                .stops
                .clone()
                .map(|set| StopMatcher::from_set(set, spec.include_stop)),
            // A tool stage reads the calls the reasoning parser hands over (gpt-oss Harmony keeps
            // them out of the content otherwise).
            reasoning: spec
                .reasoning
                .clone()
                .map(|(f, o)| ReasoningParser::new(f, o).keep_tool_calls(spec.tools.is_some())),
            tools: spec.tools.clone().map(|stage| match stage.forced {
                None => ToolCallParser::new(stage.format, stage.tools),
                Some(forced) => ToolCallParser::forced(stage.format, stage.tools, forced),
            }),
            single_call: spec.tools.as_ref().is_some_and(|t| t.single),
            tool_out: ToolDelta::default(),
            done: false,
        }
    }

    /// The stop string at `index` of the request's list (what [`Piece::stopped`] points at).
    pub fn stop_string(&self, index: usize) -> Option<&str> {
        self.stop.as_ref()?.stops().get(index).map(String::as_str)
    }

    /// Feed one engine text delta.
    pub fn push(&mut self, text: &str) -> Piece {
        if self.done {
            return Piece::default();
        }
        let (visible, stopped) = match &mut self.stop {
            None => (text.to_string(), None),
            Some(m) => match m.push(text) {
                StopOutput::Emit(s) => (s, None),
                StopOutput::Stopped { text, matched } => (text, Some(matched)),
            },
        };
        let mut piece = self.after_stop(&visible);
        if stopped.is_some() {
            let rest = self.flush_parsers();
            merge(&mut piece, rest);
            piece.stopped = stopped;
            self.done = true;
        }
        piece
    }

    /// Indexes of the tool calls the tool parser abandoned: cut off (e.g. by `max_tokens`) or
    /// broken before their arguments closed. Known once the output has finished.
    pub fn abandoned_calls(&self) -> Vec<usize> {
        self.tools
            .as_ref()
            .map(|t| t.abandoned().calls.clone())
            .unwrap_or_default()
    }

    /// End of the engine's output: release everything held.
    pub fn finish(&mut self) -> Piece {
        if self.done {
            return Piece::default();
        }
        self.done = true;
        // A stop can become certain only now (e.g. stops `abcd` and `bc`, output ending `abc`).
        let (held, stopped) = match self.stop.as_mut().map(StopMatcher::finish_output) {
            None => (String::new(), None),
            Some(StopOutput::Emit(s)) => (s, None),
            Some(StopOutput::Stopped { text, matched }) => (text, Some(matched)),
        };
        let mut piece = self.after_stop(&held);
        merge(&mut piece, self.flush_parsers());
        piece.stopped = stopped;
        piece
    }

    fn after_stop(&mut self, text: &str) -> Piece {
        if text.is_empty() {
            return Piece::default();
        }
        let (reasoning, content) = match &mut self.reasoning {
            None => (String::new(), text.to_string()),
            Some(r) => {
                let d = r.push(text);
                (d.reasoning, d.content)
            }
        };
        let mut piece = Piece {
            reasoning,
            ..Piece::default()
        };
        self.content(&content, &mut piece);
        piece
    }

    fn content(&mut self, content: &str, piece: &mut Piece) {
        match &mut self.tools {
            None => piece.content.push_str(content),
            Some(t) if !content.is_empty() => {
                let d = &mut self.tool_out;
                d.clear();
                t.push_into(content, d);
                piece.content.push_str(&d.normal_text);
                let single = self.single_call;
                piece
                    .calls
                    .extend(d.calls().filter(|c| !single || c.index == 0).map(CallDelta::owned));
            }
            Some(_) => {}
        }
    }

    fn flush_parsers(&mut self) -> Piece {
        let mut piece = Piece::default();
        if let Some(r) = &mut self.reasoning {
            let d = r.finish();
            piece.reasoning = d.reasoning;
            self.content(&d.content, &mut piece);
        }
        if let Some(t) = &mut self.tools {
            let d = t.finish();
            piece.content.push_str(&d.normal_text);
            let single = self.single_call;
            piece
                .calls
                .extend(d.calls().filter(|c| !single || c.index == 0).map(CallDelta::owned));
        }
        piece
    }
}

fn merge(into: &mut Piece, other: Piece) {
    into.reasoning.push_str(&other.reasoning);
    into.content.push_str(&other.content);
    into.calls.extend(other.calls);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_cuts_and_reports() {
        let spec = PipelineSpec {
            stops: stop_set(&["END".into()], "stop").unwrap(),
            ..Default::default()
        };
        let mut p = Pipeline::new(&spec);
        let mut out = String::new();
        let mut stopped = None;
        for t in ["hello E", "N", "D and more"] {
            let piece = p.push(t);
            out.push_str(&piece.content);
            stopped = stopped.or(piece.stopped);
        }
        out.push_str(&p.finish().content);
        assert_eq!(out, "hello ");
        assert_eq!(stopped, Some(0));
    }

    #[test]
    fn stop_certain_only_at_finish_is_reported() {
        let spec = PipelineSpec {
            stops: stop_set(&["abcd".into(), "bc".into()], "stop").unwrap(),
            ..Default::default()
        };
        let mut p = Pipeline::new(&spec);
        let mut out = p.push("xab").content;
        out.push_str(&p.push("c").content);
        let last = p.finish();
        out.push_str(&last.content);
        assert_eq!(out, "xa");
        assert_eq!(last.stopped, Some(1));
    }
}
