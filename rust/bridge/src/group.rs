//! [`Group`]: the `n` choices of one engine request (an engine that samples `n` from one
//! prefill), and when that request is aborted.
//!
//! A choice can end early without its siblings: a stop string cut it, or its reader only wanted
//! that one. So the request is aborted only once every choice's stream is gone and at least one
//! of them went before its finish; choices that all finished abort nothing, and a choice that
//! went early while its siblings still read aborts nothing yet.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use smgpy_server::engine::Abort;

use crate::inbox::Inbox;

/// The choices still open and whether one went early.
pub struct Group {
    inbox: Arc<Inbox>,
    rid: String,
    live: AtomicUsize,
    aborted: AtomicBool,
}

impl Group {
    pub fn new(inbox: Arc<Inbox>, rid: String, n: usize) -> Arc<Self> {
        Arc::new(Self {
            inbox,
            rid,
            live: AtomicUsize::new(n),
            aborted: AtomicBool::new(false),
        })
    }

    /// The abort handle of one choice's stream (make exactly `n`).
    pub fn choice(self: &Arc<Self>) -> Box<dyn Abort> {
        Box::new(Choice(self.clone()))
    }
}

/// One choice: marks the group when its stream goes early, counts down when dropped.
struct Choice(Arc<Group>);

impl Abort for Choice {
    fn abort(self: Box<Self>) {
        self.0.aborted.store(true, Ordering::Release);
    }
}

impl Drop for Choice {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.0.aborted.load(Ordering::Acquire) {
            self.0.inbox.cancel(self.0.rid.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::tests::{finish, request};

    fn started(inbox: &Arc<Inbox>, n: u32) -> (Vec<smgpy_server::engine::EngineStream>, crate::Start) {
        let streams = inbox.generate_group(request("g"), n).expect("queued");
        let start = inbox.take().starts.pop().expect("one engine request");
        assert_eq!(start.txs.len(), n as usize, "one channel per choice");
        (streams, start)
    }

    #[tokio::test]
    async fn choices_that_all_finished_abort_nothing() {
        let inbox = Inbox::new().expect("socket pair");
        let (mut streams, start) = started(&inbox, 3);
        for (tx, s) in start.txs.iter().zip(streams.iter_mut()) {
            tx.try_send(finish()).expect("room");
            assert!(s.recv().await.is_some());
        }
        drop(streams);
        assert!(inbox.take().cancels.is_empty());
    }

    #[test]
    fn one_choice_going_early_aborts_only_when_the_last_goes() {
        let inbox = Inbox::new().expect("socket pair");
        let (mut streams, _start) = started(&inbox, 3);
        drop(streams.remove(0)); // went before its finish
        assert!(inbox.take().cancels.is_empty(), "its siblings still read");
        drop(streams.remove(0));
        assert!(inbox.take().cancels.is_empty());
        drop(streams);
        assert_eq!(inbox.take().cancels, ["g"], "aborted once, when the last went");
    }

    #[tokio::test]
    async fn an_early_choice_and_finished_siblings_abort_the_request() {
        // The engine may still be generating the early one's tokens.
        let inbox = Inbox::new().expect("socket pair");
        let (mut streams, start) = started(&inbox, 2);
        start.txs[1].try_send(finish()).expect("room");
        assert!(streams[1].recv().await.is_some());
        drop(streams.remove(0));
        drop(streams);
        assert_eq!(inbox.take().cancels, ["g"]);
    }
}
