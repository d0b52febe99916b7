//! Drives one engine stream (one choice) through its [`Pipeline`], turning engine outputs into
//! visible steps with finish reasons, usage, tool-call ids and logprobs. Every endpoint (chat,
//! completions, responses, messages) consumes these steps and only differs in wire shape.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Instant;

use smgpy_protocol::common::{FinishReason, MatchedStop, TokenLogprob, TopLogprob};

use crate::engine::{EngineEvent, EngineFinish, EngineStream, MatchedBy, TokenLogprobs};
use crate::error::ApiError;
use crate::pipeline::{Piece, Pipeline};
use crate::state::{random_alnum, AppState};

/// How a choice ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub reason: FinishReason,
    pub matched: Option<MatchedStop>,
}

/// One visible step of a choice.
#[derive(Debug, Default)]
pub struct Step {
    pub piece: Piece,
    /// Ids of calls that start in this step, parallel to `piece.calls` (None for continuations).
    pub call_ids: Vec<Option<String>>,
    pub logprobs: Vec<TokenLogprobs>,
    pub finish: Option<Finish>,
    /// With the finish: tool calls (by index) that were cut off before their arguments closed.
    pub abandoned: Vec<usize>,
    /// The choice ended without finishing: the engine refused or failed it, it was cut off
    /// (shutdown, `request_timeout`), or the engine stopped it. Never shown as a normal finish.
    pub error: Option<ApiError>,
}

/// Token counts of one choice.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub prompt: u32,
    pub completion: u32,
    pub cached: u32,
    /// Completion tokens whose text went to reasoning (a step's tokens count as reasoning when
    /// the step's visible output was reasoning only).
    pub reasoning: u32,
}

pub struct ChoiceDriver {
    pub index: u32,
    /// The engine request's id (server-made), for the log.
    rid: String,
    stream: EngineStream,
    pipeline: Pipeline,
    pub counts: Counts,
    counted_tokens: u32,
    /// Tokens of steps that showed nothing yet (see `count_reasoning`).
    unseen_tokens: u32,
    call_ids: Vec<String>,
    done: bool,
    state: AppState,
    started: Instant,
    last_token: Option<Instant>,
    /// A step read ahead by [`ChoiceDriver::admit`], returned by the next `next()`.
    pending: Option<Step>,
    /// Resolves when the server ends every running request (shutdown grace period over).
    stopped: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The request's time limit, if any.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// What ended a wait for the engine.
enum Wake {
    Engine(Option<EngineEvent>),
    Stopped,
    TimedOut,
}

impl ChoiceDriver {
    pub fn new(index: u32, rid: String, stream: EngineStream, pipeline: Pipeline, state: AppState) -> Self {
        state.0.metrics.running.fetch_add(1, Ordering::Relaxed);
        let stopped = Box::pin(state.0.health.stopped());
        let deadline = state.config().request_timeout.map(|t| Box::pin(tokio::time::sleep(t)));
        Self {
            index,
            rid,
            stream,
            pipeline,
            counts: Counts::default(),
            counted_tokens: 0,
            unseen_tokens: 0,
            call_ids: Vec::new(),
            done: false,
            state,
            started: Instant::now(),
            last_token: None,
            pending: None,
            stopped,
            deadline,
        }
    }

    /// Wait up to `wait` for the engine's first event. An engine that refuses the request
    /// (overloaded, prompt too long) does so at once, so its error surfaces here and becomes an
    /// HTTP status instead of an error event inside a stream that already answered 200. A first
    /// token that arrives is kept for `next()`, so nothing is delayed by the wait.
    pub async fn admit(&mut self, wait: std::time::Duration) -> Result<(), ApiError> {
        if self.pending.is_some() || self.done {
            return Ok(());
        }
        // `recv` is cancel-safe: a timeout loses nothing.
        if let Ok(ev) = tokio::time::timeout(wait, self.stream.recv()).await {
            let step = self.handle(ev, Arrival::Now);
            if let Some(e) = step.error {
                return Err(e);
            }
            self.pending = Some(step);
        }
        Ok(())
    }

    /// Whether any tool call was emitted.
    pub fn made_tool_calls(&self) -> bool {
        !self.call_ids.is_empty()
    }

    /// The next step, or `None` once the choice has finished.
    pub async fn next(&mut self) -> Option<Step> {
        if let Some(step) = self.pending.take() {
            return Some(step);
        }
        if self.done {
            return None;
        }
        // Outputs that were already waiting arrived together with the one before: they share its
        // arrival time, so the clock is read once per wake-up, not once per token.
        if let Some(ev) = self.stream.try_recv() {
            // `recv` would count against the task's budget; so does this, so a stream that keeps
            // refilling still lets the thread's other connections run.
            tokio::task::consume_budget().await;
            return Some(self.handle(Some(ev), Arrival::WithPrevious));
        }
        let never = std::future::pending::<()>();
        let wake = tokio::select! {
            biased;
            ev = self.stream.recv() => Wake::Engine(ev),
            () = &mut self.stopped => Wake::Stopped,
            () = async {
                match self.deadline.as_mut() {
                    Some(d) => d.await,
                    None => never.await,
                }
            } => Wake::TimedOut,
        };
        Some(match wake {
            Wake::Engine(ev) => self.handle(ev, Arrival::Now),
            Wake::Stopped => self.cut_off(ApiError::Unavailable(
                "the server is shutting down: this request was stopped before it finished".into(),
            )),
            Wake::TimedOut => {
                let secs = self.state.config().request_timeout.map_or(0, |t| t.as_secs());
                self.cut_off(ApiError::Timeout(secs))
            }
        })
    }

    /// End the choice with `e`: the engine request is aborted, nothing more is read.
    fn cut_off(&mut self, e: ApiError) -> Step {
        self.stream.abort();
        self.done = true;
        self.end_metrics(false);
        Step {
            error: Some(e),
            ..Step::default()
        }
    }

    fn handle(&mut self, ev: Option<EngineEvent>, arrival: Arrival) -> Step {
        match ev {
            None => self.cut_off(ApiError::Unavailable(
                "the engine ended this request without finishing it".into(),
            )),
            Some(EngineEvent::Error(e)) => {
                self.done = true;
                self.end_metrics(false);
                Step {
                    error: Some(e.into()),
                    ..Step::default()
                }
            }
            Some(EngineEvent::Output(o)) => {
                self.observe_tokens(o.token_ids.len(), arrival);
                if let Some(p) = o.prompt_tokens {
                    self.counts.prompt = p;
                }
                if let Some(c) = o.cached_tokens {
                    self.counts.cached = c;
                }
                self.counted_tokens = self.counted_tokens.saturating_add(saturate(o.token_ids.len()));
                self.counts.completion = o.completion_tokens.unwrap_or(self.counted_tokens);
                let mut piece = self.pipeline.push(&o.text_delta);
                self.count_reasoning(&piece, saturate(o.token_ids.len()));
                if let Some(i) = piece.stopped {
                    // Our matcher is the authority over visible text: stop the engine now.
                    self.stream.abort();
                    self.done = true;
                    let matched = self.pipeline.stop_string(i).map(|s| MatchedStop::Text(s.to_string()));
                    let finish = Finish {
                        reason: FinishReason::Stop,
                        matched,
                    };
                    return self.step(piece, o.logprobs, Some(finish));
                }
                let finish = match o.finish {
                    None => return self.step(piece, o.logprobs, None),
                    Some(EngineFinish::Stop { matched }) => Finish {
                        reason: FinishReason::Stop,
                        matched: matched.map(|m| match m {
                            MatchedBy::Token(t) => MatchedStop::Token(t),
                            MatchedBy::Text(s) => MatchedStop::Text(s),
                        }),
                    },
                    Some(EngineFinish::Length) => Finish {
                        reason: FinishReason::Length,
                        matched: None,
                    },
                    Some(EngineFinish::Abort { message, status }) => {
                        tracing::warn!(
                            rid = %self.rid,
                            choice = self.index,
                            status = ?status,
                            message = %crate::logging::escape(message.as_deref().unwrap_or("")),
                            "the engine aborted a request"
                        );
                        if let (Some(status), Some(text)) = (status, message.as_deref()) {
                            if let Some(refused) = ApiError::refused_by_engine(status, text) {
                                return self.cut_off(refused);
                            }
                        }
                        // Any other abort's message can hold anything (paths, tracebacks): the
                        // log has it.
                        return self.cut_off(ApiError::Unavailable(format!(
                            "the engine stopped request {} before it finished (the server log has the details)",
                            self.rid
                        )));
                    }
                };
                self.done = true;
                let rest = self.pipeline.finish();
                piece.reasoning.push_str(&rest.reasoning);
                piece.content.push_str(&rest.content);
                piece.calls.extend(rest.calls);
                let finish = match rest.stopped.and_then(|i| self.pipeline.stop_string(i)) {
                    Some(s) => Finish {
                        reason: FinishReason::Stop,
                        matched: Some(MatchedStop::Text(s.to_string())),
                    },
                    None => finish,
                };
                self.step(piece, o.logprobs, Some(finish))
            }
        }
    }

    fn step(&mut self, piece: Piece, logprobs: Vec<TokenLogprobs>, finish: Option<Finish>) -> Step {
        let mut call_ids = Vec::with_capacity(piece.calls.len());
        for c in &piece.calls {
            if c.index >= self.call_ids.len() {
                let id = c.id.clone().unwrap_or_else(|| format!("call_{}", random_alnum(24)));
                self.call_ids.push(id.clone());
                call_ids.push(Some(id));
            } else {
                call_ids.push(None);
            }
        }
        let finish = finish.map(|mut f| {
            if f.reason == FinishReason::Stop && self.made_tool_calls() {
                f.reason = FinishReason::ToolCalls;
            }
            self.end_metrics(true);
            f
        });
        let abandoned = if finish.is_some() {
            self.pipeline.abandoned_calls()
        } else {
            Vec::new()
        };
        Step {
            piece,
            call_ids,
            logprobs,
            finish,
            abandoned,
            error: None,
        }
    }

    /// Tokens whose step showed nothing (markers such as `<think>`) go with the next step that
    /// shows something: reasoning if that step is reasoning only, otherwise the answer.
    fn count_reasoning(&mut self, piece: &Piece, tokens: u32) {
        if piece.is_empty() {
            self.unseen_tokens = self.unseen_tokens.saturating_add(tokens);
        } else if piece.content.is_empty() && piece.calls.is_empty() {
            self.counts.reasoning = self
                .counts
                .reasoning
                .saturating_add(self.unseen_tokens.saturating_add(tokens));
            self.unseen_tokens = 0;
        } else {
            self.unseen_tokens = 0;
        }
    }

    fn observe_tokens(&mut self, n: usize, arrival: Arrival) {
        if n == 0 {
            return;
        }
        let now = match (arrival, self.last_token) {
            (Arrival::WithPrevious, Some(t)) => t,
            _ => Instant::now(),
        };
        let m = &self.state.0.metrics;
        m.throughput.add(n as u64);
        match self.last_token {
            None => m.ttft.observe(now.duration_since(self.started).as_secs_f64()),
            Some(t) => m.itl.observe(now.duration_since(t).as_secs_f64() / n as f64),
        }
        self.last_token = Some(now);
    }

    fn end_metrics(&mut self, ok: bool) {
        let m = &self.state.0.metrics;
        m.running.fetch_sub(1, Ordering::Relaxed);
        if ok {
            m.requests_ok.fetch_add(1, Ordering::Relaxed);
            m.e2e.observe(self.started.elapsed().as_secs_f64());
        } else {
            m.requests_err.fetch_add(1, Ordering::Relaxed);
        }
        m.prompt_tokens
            .fetch_add(u64::from(self.counts.prompt), Ordering::Relaxed);
        m.generation_tokens
            .fetch_add(u64::from(self.counts.completion), Ordering::Relaxed);
        m.cached_tokens
            .fetch_add(u64::from(self.counts.cached), Ordering::Relaxed);
    }
}

/// A token count as `u32`, saturating (counts never wrap around to small numbers).
pub(crate) fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The sum of token counts, saturating at `u32::MAX`.
pub fn sum_counts(counts: impl IntoIterator<Item = u32>) -> u32 {
    counts.into_iter().fold(0, u32::saturating_add)
}

/// When an engine event arrived, for the latency metrics.
#[derive(Clone, Copy)]
enum Arrival {
    /// Just now: the driver waited for it.
    Now,
    /// Already waiting when the previous one was taken: at that one's time.
    WithPrevious,
}

impl Drop for ChoiceDriver {
    fn drop(&mut self) {
        if !self.done {
            // Client went away mid-generation: the stream's own drop aborts the engine request.
            self.state.0.metrics.running.fetch_sub(1, Ordering::Relaxed);
            self.state.0.metrics.requests_cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// OpenAI chat-style logprobs for one step.
pub fn chat_logprobs(lp: &[TokenLogprobs]) -> Vec<TokenLogprob> {
    lp.iter()
        .map(|t| {
            let token = t.token.clone().unwrap_or_default();
            TokenLogprob {
                bytes: token.as_bytes().to_vec(),
                token,
                logprob: t.logprob,
                top_logprobs: t
                    .top
                    .iter()
                    .map(|(_, tok, lp)| {
                        let token = tok.clone().unwrap_or_default();
                        TopLogprob {
                            bytes: token.as_bytes().to_vec(),
                            token,
                            logprob: *lp,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}
