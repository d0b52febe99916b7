//! [`Inbox`]: work handed from the server's threads to the engine's event loop.
//!
//! Per request, no thread but the loop's touches the engine: [`Inbox::generate`] queues the
//! request and rings the [`Bell`] the loop watches; the loop drains the queues
//! ([`Inbox::take`]) and starts the request. Dropping a request's stream before the engine
//! finished (client gone, stop string matched, shutdown) queues a cancellation the same way. A
//! ring writes a byte only when none is pending, so a burst of requests wakes the loop once.
//!
//! An engine that samples `n` choices from one prefill gets one request with one channel per
//! choice (see [`crate::group`] for when that request is aborted).
use std::sync::{Arc, Mutex};

use smgpy_server::engine::{
    Abort, EmbedReply, EmbedRequest, Embeddings, EngineError, EngineEvent, EngineStream, GenerateRequest,
};
use tokio::sync::{mpsc, oneshot};

use crate::bell::Bell;
use crate::burst::BurstDetector;
use crate::clock::MonotonicClock;
use crate::group::Group;

/// Outputs buffered per choice before the engine's pump is asked to wait (back-pressure).
pub const CHANNEL_CAPACITY: usize = 1024;

/// Where an embedding request's answer goes.
pub type EmbedAnswer = oneshot::Sender<Result<Embeddings, EngineError>>;

/// A request for the engine to start: its fields and one output channel per choice.
#[derive(Debug)]
pub struct Start {
    pub req: GenerateRequest,
    pub txs: Vec<mpsc::Sender<EngineEvent>>,
}

/// What the loop takes in one turn ([`Inbox::take`]).
#[derive(Debug, Default)]
pub struct Work {
    pub starts: Vec<Start>,
    /// Requests to abort, by rid.
    pub cancels: Vec<String>,
    /// Requests whose full output channel has room again ([`crate::Outlets::room`]).
    pub ready: Vec<String>,
}

#[derive(Default)]
struct Queues {
    work: Work,
    embeds: Vec<(EmbedRequest, EmbedAnswer)>,
}

/// The queues, the bell that announces them, and the clock of the outputs' bursts.
pub struct Inbox {
    queues: Mutex<Queues>,
    bell: Bell,
    /// Shared by every request's outputs: a burst is one loop turn, whichever requests it feeds.
    pub bursts: BurstDetector<MonotonicClock>,
}

impl Inbox {
    pub fn new() -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            queues: Mutex::new(Queues::default()),
            bell: Bell::new()?,
            bursts: BurstDetector::new(MonotonicClock::new()),
        }))
    }

    /// The file descriptor the loop watches.
    pub fn wake_fd(&self) -> i32 {
        self.bell.fd()
    }

    /// Wake the loop (work was queued elsewhere, or it should look at its state).
    pub fn wake(&self) {
        self.bell.ring();
    }

    fn queue(&self, f: impl FnOnce(&mut Queues)) -> Result<(), EngineError> {
        let mut q = self
            .queues
            .lock()
            .map_err(|_| EngineError::Internal("engine queue poisoned".into()))?;
        f(&mut q);
        drop(q);
        self.wake();
        Ok(())
    }

    /// Start one request; dropping the stream before its finish cancels it.
    pub fn generate(self: &Arc<Self>, req: GenerateRequest) -> Result<EngineStream, EngineError> {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let rid = req.rid.clone();
        self.queue(|q| q.work.starts.push(Start { req, txs: vec![tx] }))?;
        Ok(EngineStream::new(
            rx,
            Box::new(CancelOnDrop {
                inbox: self.clone(),
                rid,
            }),
        ))
    }

    /// Start one request for `n` choices that the engine samples itself: one stream per
    /// choice, the request cancelled as [`crate::group`] says.
    pub fn generate_group(self: &Arc<Self>, req: GenerateRequest, n: u32) -> Result<Vec<EngineStream>, EngineError> {
        let group = Group::new(self.clone(), req.rid.clone(), n as usize);
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel(CHANNEL_CAPACITY)).unzip();
        let streams = rxs
            .into_iter()
            .map(|rx| EngineStream::new(rx, group.choice()))
            .collect();
        self.queue(|q| q.work.starts.push(Start { req, txs }))?;
        Ok(streams)
    }

    /// Queue an embedding request. The answer reaches the route through a relay task (spawned
    /// on the current Tokio runtime), which also notices the route going away (its client hung
    /// up) and then cancels the request, as a generation is aborted.
    pub fn embed(self: &Arc<Self>, req: EmbedRequest) -> Result<EmbedReply, EngineError> {
        let (tx, rx) = oneshot::channel();
        let (mut to_route, route) = oneshot::channel();
        let rid = req.rid.clone();
        self.queue(|q| q.embeds.push((req, tx)))?;
        let inbox = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                answer = rx => {
                    if let Ok(answer) = answer {
                        let _ = to_route.send(answer);
                    }
                }
                () = to_route.closed() => inbox.cancel(rid),
            }
        });
        Ok(route)
    }

    /// Queue the abort of request `rid`.
    pub fn cancel(&self, rid: String) {
        let _ = self.queue(|q| q.work.cancels.push(rid));
    }

    /// Report that request `rid`'s full output channel has room again.
    pub fn room(&self, rid: String) {
        let _ = self.queue(|q| q.work.ready.push(rid));
    }

    /// Take the queued work (on the loop thread). The wake-up is cleared first: work queued
    /// before this is in what it returns, work queued later rings again. Embedding requests
    /// stay for [`Self::take_embeds`], which the loop calls right after.
    pub fn take(&self) -> Work {
        self.bell.take();
        self.queues
            .lock()
            .map(|mut q| std::mem::take(&mut q.work))
            .unwrap_or_default()
    }

    /// Take the queued embedding requests and where each answer goes.
    pub fn take_embeds(&self) -> Vec<(EmbedRequest, EmbedAnswer)> {
        self.queues
            .lock()
            .map(|mut q| std::mem::take(&mut q.embeds))
            .unwrap_or_default()
    }
}

/// Cancels a one-choice request when its stream is dropped before the finish.
struct CancelOnDrop {
    inbox: Arc<Inbox>,
    rid: String,
}

impl Abort for CancelOnDrop {
    fn abort(self: Box<Self>) {
        self.inbox.cancel(self.rid);
    }
}

/// Also the fixtures of the other modules' tests that queue requests.
#[cfg(test)]
pub(crate) mod tests {
    use smgpy_server::engine::{EngineFinish, EngineOutput};

    use super::*;

    pub(crate) fn request(rid: &str) -> GenerateRequest {
        GenerateRequest {
            rid: rid.into(),
            ..GenerateRequest::default()
        }
    }

    /// Wake-up bytes waiting on the loop's side (reading them).
    fn wake_bytes(inbox: &Inbox) -> usize {
        crate::bell::pending_bytes(&inbox.bell)
    }

    /// A choice's last output.
    pub(crate) fn finish() -> EngineEvent {
        EngineEvent::Output(EngineOutput {
            finish: Some(EngineFinish::Length),
            ..EngineOutput::default()
        })
    }

    #[test]
    fn a_burst_of_requests_wakes_the_loop_once_and_arrives_in_order() {
        let inbox = Inbox::new().expect("socket pair");
        let _a = inbox.generate(request("a")).expect("queued");
        let _b = inbox.generate(request("b")).expect("queued");
        assert_eq!(wake_bytes(&inbox), 1);
        let work = inbox.take();
        let rids: Vec<_> = work.starts.iter().map(|s| s.req.rid.as_str()).collect();
        assert_eq!(rids, ["a", "b"]);
        assert!(inbox.take().starts.is_empty());
        let _c = inbox.generate(request("c")).expect("queued");
        assert_eq!(wake_bytes(&inbox), 1, "taken work: the next request rings again");
    }

    #[test]
    fn dropping_a_stream_before_its_finish_cancels_the_request() {
        let inbox = Inbox::new().expect("socket pair");
        let stream = inbox.generate(request("a")).expect("queued");
        inbox.take();
        drop(stream);
        assert_eq!(inbox.take().cancels, ["a"]);
    }

    #[tokio::test]
    async fn a_stream_that_got_its_finish_cancels_nothing() {
        let inbox = Inbox::new().expect("socket pair");
        let mut stream = inbox.generate(request("a")).expect("queued");
        let start = inbox.take().starts.pop().expect("started");
        start.txs[0].try_send(finish()).expect("room");
        assert!(stream.recv().await.is_some());
        drop(stream);
        assert!(inbox.take().cancels.is_empty());
    }

    #[test]
    fn room_notices_reach_the_loop() {
        let inbox = Inbox::new().expect("socket pair");
        inbox.room("a".into());
        assert_eq!(wake_bytes(&inbox), 1);
        assert_eq!(inbox.take().ready, ["a"]);
    }

    #[tokio::test]
    async fn an_embedding_answer_reaches_the_route_and_a_gone_route_cancels() {
        let inbox = Inbox::new().expect("socket pair");
        let reply = inbox
            .embed(EmbedRequest {
                rid: "e1".into(),
                ..EmbedRequest::default()
            })
            .expect("queued");
        let (_, answer) = inbox.take_embeds().pop().expect("queued embedding");
        let _ = answer.send(Ok(Embeddings {
            dim: 1,
            data: vec![0.5],
            prompt_tokens: None,
        }));
        let got = reply.await.expect("relayed").expect("no error");
        assert_eq!(got.data, [0.5]);
        assert!(inbox.take().cancels.is_empty());

        let reply = inbox
            .embed(EmbedRequest {
                rid: "e2".into(),
                ..EmbedRequest::default()
            })
            .expect("queued");
        let _pending = inbox.take_embeds();
        drop(reply);
        for _ in 0..100 {
            if !inbox.take().cancels.is_empty() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the relay did not cancel the embedding request of a gone route");
    }
}
