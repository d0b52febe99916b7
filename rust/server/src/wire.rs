//! The one runner behind every generation route, and the trait each route's wire format implements.
//!
//! Chat Completions, Completions, sglang's `/generate`, Anthropic Messages and Responses all answer
//! the same way: the [`Step`]s of their choices (from [`ChoiceDriver`]) become either one JSON body
//! or one SSE stream. Only the shape differs, so a route describes its shape as a [`WireFormat`]
//! (what a choice sends when it starts, for each step, for an error, and at the end) and
//! [`respond`] does the rest once:
//!
//! - the collect loop (all choices at once; the first error, in choice order, is the answer);
//! - the stream loop: one event stream per choice, merged only when there is more than one (the
//!   merge re-queues its stream on every item, which one choice, the common case, does not need);
//! - steps that show nothing are skipped without waking the client;
//! - an error inside an open stream (the response already answered 200) is logged when it is the
//!   server's own fault and rendered by the format's [`WireFormat::error`], after which that
//!   choice's stream ends;
//! - a step that finishes a choice is settled ([`WireFormat::settle`], e.g. the Responses store)
//!   before its events leave, so a client that hears "done" can rely on what done implies.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, BoxStream, StreamExt};

use crate::driver::{ChoiceDriver, Counts, Step};
use crate::error::ApiError;
use crate::layers::with_tokens;
use crate::sse;
use crate::state::AppState;

/// Where a format writes its stream events: `Some` when streaming, `None` when the answer is
/// collected into one body (the format then only keeps what [`WireFormat::done`] needs).
pub type Out<'a> = Option<&'a mut Vec<Bytes>>;

/// One API's shape of a generation's output. See the module docs for what the runner does with it.
pub trait WireFormat: Send + Sync + 'static {
    /// One choice's state while its steps arrive.
    type Choice: Send + 'static;
    /// What the non-streamed body keeps of a finished choice.
    type Done: Send + 'static;
    /// The non-streamed body.
    type Body: serde::Serialize;

    /// Choice `index` begins; when streaming, `out` takes the events sent before its first step.
    fn start(&self, index: u32, out: Out<'_>) -> Self::Choice;

    /// One step of a choice (without an error: the runner takes those); `counts` are the
    /// choice's token counts so far.
    fn step(&self, choice: &mut Self::Choice, step: Step, counts: Counts, out: Out<'_>);

    /// Work to finish before the events of a step that ended the choice leave (or before the
    /// collected body is answered).
    fn settle<'a>(&'a self, _choice: &'a mut Self::Choice) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }

    /// The events for an error inside an open stream; the choice's stream ends after them.
    fn error(&self, choice: &mut Self::Choice, error: &ApiError, counts: Counts) -> Vec<Bytes>;

    /// A choice that ended normally, as the non-streamed body keeps it.
    fn done(&self, choice: Self::Choice, index: u32, counts: Counts) -> Self::Done;

    /// The non-streamed body from every choice (in the order they were started), with its
    /// prompt and completion token counts for the access log.
    fn body(&self, done: Vec<Self::Done>) -> (Self::Body, u32, u32);

    /// The events after every choice's stream ended (none by default: Anthropic's and Responses'
    /// streams end with their choice's own events). `ended`: the index and counts of each choice
    /// that ended normally; `failed`: whether any ended in an error.
    fn finish(&self, _ended: &[(u32, Counts)], _failed: bool) -> Vec<Bytes> {
        Vec::new()
    }
}

/// Answer a request whose choices were started: one JSON body, or one SSE stream.
pub async fn respond<W: WireFormat>(
    state: &AppState,
    wire: W,
    drivers: Vec<ChoiceDriver>,
    stream: bool,
) -> Result<Response, ApiError> {
    if stream {
        return Ok(stream_response(state, Arc::new(wire), drivers));
    }
    let results = futures::future::join_all(drivers.into_iter().map(|d| collect(&wire, d))).await;
    let done = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let (body, prompt, completion) = wire.body(done);
    Ok(with_tokens(Json(body).into_response(), prompt, completion))
}

async fn collect<W: WireFormat>(wire: &W, mut d: ChoiceDriver) -> Result<W::Done, ApiError> {
    let mut choice = wire.start(d.index, None);
    while let Some(mut step) = d.next().await {
        if let Some(e) = step.error.take() {
            return Err(e);
        }
        let finished = step.finish.is_some();
        wire.step(&mut choice, step, d.counts, None);
        if finished {
            wire.settle(&mut choice).await;
        }
    }
    Ok(wire.done(choice, d.index, d.counts))
}

/// How a stream's choices ended, for [`WireFormat::finish`].
#[derive(Default)]
struct Tally {
    ended: Vec<(u32, Counts)>,
    failed: bool,
}

fn tally(t: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    t.lock().unwrap_or_else(PoisonError::into_inner)
}

fn stream_response<W: WireFormat>(state: &AppState, wire: Arc<W>, drivers: Vec<ChoiceDriver>) -> Response {
    let ended = Arc::new(Mutex::new(Tally::default()));
    let mut streams: Vec<_> = drivers
        .into_iter()
        .map(|d| choice_events(wire.clone(), d, ended.clone()))
        .collect();
    let body = if streams.len() == 1 {
        streams.pop().unwrap_or_else(|| stream::empty().boxed())
    } else {
        stream::select_all(streams).boxed()
    };
    let tail = stream::once(async move {
        let t = tally(&ended);
        wire.finish(&t.ended, t.failed)
    })
    .flat_map(stream::iter);
    sse::response(body.chain(tail), state.config().keep_alive)
}

/// The events of one choice: what it sends at its start, then per step, until it ends or fails.
fn choice_events<W: WireFormat>(wire: Arc<W>, d: ChoiceDriver, ended: Arc<Mutex<Tally>>) -> BoxStream<'static, Bytes> {
    let mut first = Vec::new();
    let choice = wire.start(d.index, Some(&mut first));
    // Boxed: `unfold` moves its state in and out on every step, and a driver is large.
    let rest = stream::unfold(Some(Box::new((d, choice, wire, ended))), |st| async move {
        let mut st = st?;
        let (d, choice, wire, ended) = &mut *st;
        loop {
            let Some(mut step) = d.next().await else {
                tally(ended).ended.push((d.index, d.counts));
                return None;
            };
            if let Some(e) = step.error.take() {
                if let ApiError::Internal(m) = &e {
                    tracing::error!(error = %m, "error in stream");
                }
                tally(ended).failed = true;
                return Some((wire.error(choice, &e, d.counts), None));
            }
            let finished = step.finish.is_some();
            let mut out = Vec::new();
            wire.step(choice, step, d.counts, Some(&mut out));
            if finished {
                wire.settle(choice).await;
            }
            if !out.is_empty() {
                return Some((out, Some(st)));
            }
        }
    });
    stream::iter(first).chain(rest.flat_map(stream::iter)).boxed()
}
