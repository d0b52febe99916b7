//! [`Outlets`]: one request's output channels (one per choice) and the outputs held for them.
//!
//! Handing an output to a channel can wake a parked HTTP thread. Outputs pushed in a burst (see
//! [`crate::burst`]) into a channel its reader has emptied (the reader is asleep) are held until
//! the end of the loop's turn: the first such push asks its caller to schedule one flush
//! ([`Next::ScheduleFlush`]), which hands every held output over at once. A turn that gives 32
//! streams a token each, the usual pattern of a batching engine, then wakes the HTTP thread once
//! or twice instead of up to 32 times (`benches/bridge.py --engine stepped`, one HTTP worker:
//! 0.19-0.23 -> 0.11-0.12 context switches and ~10 % less server CPU per token, measured before
//! the burst rule, which sends the first output of each step at once again). Outputs go at once
//! otherwise:
//! - into a channel that still holds outputs: its reader is awake or already woken, so that costs
//!   no wake-up, and holding would only delay it;
//! - outside a burst: an engine that computes between outputs would otherwise see its tokens
//!   held until its loop turns, which it does not while it computes.
//!
//! At most [`KEEP_LIMIT`] outputs are held; a full channel keeps its choice's outputs here, in
//! order, and the pusher is told to wait ([`Status::Full`], [`Outlets::room`]): back-pressure
//! instead of unbounded memory.
use std::collections::VecDeque;
use std::future::Future;

use tokio::sync::mpsc;

/// Outputs held between flushes before they are handed over at once: a pump whose engine
/// yields many outputs without returning to its loop still streams, and memory stays bounded.
/// Small, because such a pump keeps the HTTP thread busy best with frequent small hand-overs
/// (`benches/bridge.py`: server CPU per token 1.07 us at 16, 1.11 us at 64, 1.19 us at 256).
pub const KEEP_LIMIT: usize = 16;

/// What a push or a flush leaves the pusher to do (`OutputSink.push`'s return value in Python).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// Taken (sent or held): go on.
    Taken = 0,
    /// [`KEEP_LIMIT`] outputs are held behind a full channel: wait for [`Outlets::room`], then
    /// flush until it says `Taken`.
    Full = 1,
    /// Every reader is gone while the engine still has something to say: stop generating.
    Closed = 2,
}

/// What the caller of [`Outlets::push`] must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// The output is held: schedule one flush at the end of this loop turn, then report whether
    /// that worked with [`Outlets::flush_scheduled`].
    ScheduleFlush,
}

/// `push` was called while [`KEEP_LIMIT`] outputs are held behind a full channel: the pusher
/// skipped the wait that [`Status::Full`] asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saturated;

impl std::fmt::Display for Saturated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink.push called while full: call flush() first")
    }
}

impl std::error::Error for Saturated {}

struct Choice<T> {
    tx: mpsc::Sender<T>,
    /// The engine sent this choice's finish: nothing is left to stop.
    finished: bool,
}

/// One request's channels and held outputs (see the module doc).
pub struct Outlets<T> {
    choices: Vec<Choice<T>>,
    /// Outputs not handed over yet: `(choice, output)`, oldest first.
    kept: VecDeque<(usize, T)>,
    /// A flush is scheduled.
    queued: bool,
}

impl<T> Outlets<T> {
    /// One channel per choice.
    pub fn new(txs: Vec<mpsc::Sender<T>>) -> Self {
        Self {
            choices: txs.into_iter().map(|tx| Choice { tx, finished: false }).collect(),
            kept: VecDeque::new(),
            queued: false,
        }
    }

    /// How many choices the request has (an output's `index` is below it).
    pub fn choices(&self) -> usize {
        self.choices.len()
    }

    /// Outputs held now.
    pub fn held(&self) -> usize {
        self.kept.len()
    }

    /// Before an output is made: hand held outputs over if the hold is at its limit, and refuse
    /// when that does not make room.
    pub fn make_room(&mut self) -> Result<(), Saturated> {
        if self.kept.len() >= KEEP_LIMIT {
            self.hand_over();
            if self.kept.len() >= KEEP_LIMIT {
                return Err(Saturated);
            }
        }
        Ok(())
    }

    /// Take one output for choice `index` (below [`Self::choices`]; others are dropped).
    /// `finishes`: it is the choice's last. `burst` says whether it comes in the same loop turn
    /// as the previous output that could be held ([`crate::BurstDetector::in_burst`]); it is
    /// asked only for an output that would be held, so only those are timed.
    pub fn push(&mut self, index: usize, out: T, finishes: bool, burst: impl FnOnce() -> bool) -> (Status, Next) {
        let Some(choice) = self.choices.get_mut(index) else {
            return (Status::Taken, Next::Nothing);
        };
        choice.finished |= finishes;
        if self.choices.iter().all(|c| c.tx.is_closed()) {
            return (Status::Closed, Next::Nothing);
        }
        let Some(out) = self.send_if_awake(index, out) else {
            return (self.status(), Next::Nothing);
        };
        self.kept.push_back((index, out));
        if !burst() || self.kept.len() >= KEEP_LIMIT {
            // Nothing to batch this with, or a pump that has not returned to its loop for this
            // many outputs: hand them over now.
            self.hand_over();
            return (self.status(), Next::Nothing);
        }
        if self.queued {
            return (self.status(), Next::Nothing);
        }
        (self.status(), Next::ScheduleFlush)
    }

    /// After [`Next::ScheduleFlush`]: whether the flush could be scheduled. When it could not
    /// (no loop, or a closed one), the held outputs go now.
    pub fn flush_scheduled(&mut self, scheduled: bool) -> Status {
        if scheduled {
            self.queued = true;
        } else {
            self.hand_over();
        }
        self.status()
    }

    /// The scheduled flush runs: hand every held output over.
    pub fn run_scheduled_flush(&mut self) {
        self.queued = false;
        self.hand_over();
    }

    /// Hand held outputs over now (the pusher, after [`Status::Full`] and once its engine is
    /// done): `Taken` when none is left, `Full` when a channel is still full, `Closed` when
    /// every reader is gone.
    pub fn flush(&mut self) -> Status {
        self.hand_over();
        if self.closed() {
            Status::Closed
        } else if self.kept.is_empty() {
            Status::Taken
        } else {
            Status::Full
        }
    }

    /// The engine failed: outputs before the failure go first, then `error()` to every choice.
    /// A full channel drops what does not fit and the error; its stream then ends when the
    /// channels are dropped, which its reader reports as a failure.
    pub fn fail(&mut self, error: impl Fn() -> T) -> Status {
        self.hand_over();
        self.kept.clear();
        for c in &self.choices {
            let _ = c.tx.try_send(error());
        }
        if self.closed() {
            Status::Closed
        } else {
            Status::Taken
        }
    }

    /// Every reader is gone while the engine still has something to generate. A reader that
    /// took its choice's finish and left at once (on another thread, before the push returned)
    /// does not count: the engine is done, and aborting it then would be a spurious abort.
    pub fn closed(&self) -> bool {
        self.choices.iter().all(|c| c.tx.is_closed() || c.finished) && !self.choices.iter().all(|c| c.finished)
    }

    /// After [`Status::Full`]: completes once the channel the oldest held output waits for has
    /// room for half its capacity (or its reader is gone); `None` when nothing waits. Waiting
    /// for half the channel, not one slot, lets a pump behind a slow reader refill it in one go
    /// instead of waking once per slot the reader frees.
    pub fn room(&self) -> Option<impl Future<Output = ()> + Send + 'static>
    where
        T: Send + 'static,
    {
        let (index, _) = self.kept.front()?;
        let tx = self.choices.get(*index)?.tx.clone();
        Some(async move {
            // Permits are free slots; dropping them frees the slots again for the pusher's flush.
            // An error means the reader is gone, which `flush` then reports.
            drop(tx.reserve_many((tx.max_capacity() / 2).max(1)).await);
        })
    }

    /// The result of a push: full once [`KEEP_LIMIT`] outputs are held.
    fn status(&self) -> Status {
        if self.closed() {
            Status::Closed
        } else if self.kept.len() >= KEEP_LIMIT {
            Status::Full
        } else {
            Status::Taken
        }
    }

    /// Send `out` now if its channel holds earlier outputs (its reader is awake); gives it back
    /// when it should be held instead.
    fn send_if_awake(&mut self, index: usize, out: T) -> Option<T> {
        let choice = self.choices.get(index)?;
        if !self.kept.is_empty() || choice.tx.capacity() == choice.tx.max_capacity() {
            return Some(out);
        }
        match choice.tx.try_send(out) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(out)) => Some(out),
        }
    }

    /// Move held outputs into their channels, oldest first. A choice whose channel is full keeps
    /// its outputs, in order, without holding back its siblings'. Outputs of a choice whose
    /// reader is gone (its client, or a stop string) are dropped; its siblings may still listen.
    fn hand_over(&mut self) {
        let mut full: Vec<usize> = Vec::new();
        let mut rest = VecDeque::new();
        while let Some((index, out)) = self.kept.pop_front() {
            if full.contains(&index) {
                rest.push_back((index, out));
                continue;
            }
            let Some(choice) = self.choices.get(index) else {
                continue;
            };
            match choice.tx.try_send(out) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(out)) => {
                    full.push(index);
                    rest.push_back((index, out));
                }
            }
        }
        self.kept = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<T>(rx: &mut mpsc::Receiver<T>) -> Vec<T> {
        let mut out = Vec::new();
        while let Ok(v) = rx.try_recv() {
            out.push(v);
        }
        out
    }

    /// Outlets over one channel per choice, of these capacities, and the channels' readers.
    fn outlets<const N: usize>(capacities: [usize; N]) -> (Outlets<u32>, [mpsc::Receiver<u32>; N]) {
        let mut txs = Vec::with_capacity(N);
        let rxs = capacities.map(|c| {
            let (tx, rx) = mpsc::channel(c);
            txs.push(tx);
            rx
        });
        (Outlets::new(txs), rxs)
    }

    fn one(capacity: usize) -> (Outlets<u32>, mpsc::Receiver<u32>) {
        let (o, [rx]) = outlets([capacity]);
        (o, rx)
    }

    #[test]
    fn a_burst_into_an_idle_channel_is_held_until_the_one_flush() {
        let (mut o, mut rx) = one(8);
        assert_eq!(o.push(0, 1, false, || true), (Status::Taken, Next::ScheduleFlush));
        assert_eq!(o.flush_scheduled(true), Status::Taken);
        assert_eq!(
            o.push(0, 2, false, || true),
            (Status::Taken, Next::Nothing),
            "one flush per turn"
        );
        assert!(drain(&mut rx).is_empty(), "held: the reader is not woken yet");
        o.run_scheduled_flush();
        assert_eq!(drain(&mut rx), [1, 2]);
        assert_eq!(
            o.push(0, 3, false, || true),
            (Status::Taken, Next::ScheduleFlush),
            "the next turn asks again"
        );
    }

    #[test]
    fn outside_a_burst_an_output_goes_at_once() {
        let (mut o, mut rx) = one(8);
        assert_eq!(o.push(0, 1, false, || false), (Status::Taken, Next::Nothing));
        assert_eq!(drain(&mut rx), [1]);
    }

    #[test]
    fn a_channel_whose_reader_is_awake_gets_outputs_at_once() {
        let (mut o, mut rx) = one(8);
        o.push(0, 1, false, || false);
        // The reader has not taken 1 yet: it is awake or already woken.
        assert_eq!(o.push(0, 2, false, || true), (Status::Taken, Next::Nothing));
        assert_eq!(drain(&mut rx), [1, 2]);
    }

    #[test]
    fn a_flush_that_cannot_be_scheduled_hands_over_at_once() {
        let (mut o, mut rx) = one(8);
        assert_eq!(o.push(0, 1, false, || true).1, Next::ScheduleFlush);
        assert_eq!(o.flush_scheduled(false), Status::Taken);
        assert_eq!(drain(&mut rx), [1]);
    }

    #[test]
    fn a_pump_that_never_yields_hands_over_every_keep_limit_outputs() {
        let (mut o, mut rx) = one(64);
        o.push(0, 0, false, || true);
        o.flush_scheduled(true);
        for i in 1..KEEP_LIMIT as u32 {
            // Each push after the first is queued behind the held ones.
            o.push(0, i, false, || true);
        }
        assert_eq!(
            drain(&mut rx).len(),
            KEEP_LIMIT,
            "handed over when the hold reached its limit"
        );
        assert_eq!(o.held(), 0);
    }

    #[test]
    fn a_full_channel_pushes_back_and_keeps_order() {
        let (mut o, mut rx) = one(2);
        let mut last = (Status::Taken, Next::Nothing);
        let mut pushed = 0u32;
        while last.0 == Status::Taken {
            last = o.push(0, pushed, false, || false);
            pushed += 1;
        }
        assert_eq!(last.0, Status::Full);
        assert_eq!(o.held(), KEEP_LIMIT);
        assert_eq!(
            o.make_room(),
            Err(Saturated),
            "a push now would grow the hold past its bound"
        );
        assert_eq!(drain(&mut rx), [0, 1]);
        assert_eq!(o.flush(), Status::Full, "two more fit, the rest waits");
        let mut got = drain(&mut rx);
        while o.flush() != Status::Taken {
            got.extend(drain(&mut rx));
        }
        got.extend(drain(&mut rx));
        assert_eq!(got, (2..pushed).collect::<Vec<_>>(), "every output, in order");
    }

    #[test]
    fn a_full_choice_does_not_hold_back_its_siblings() {
        let (mut o, [mut rx0, mut rx1]) = outlets([1, 8]);
        o.push(0, 10, false, || false);
        o.push(0, 11, false, || false); // choice 0 is full: held
        o.push(1, 20, false, || false); // held too (something is held), but its channel has room
        o.push(1, 21, false, || false);
        assert_eq!(drain(&mut rx1), [20, 21]);
        assert_eq!(drain(&mut rx0), [10]);
        assert_eq!(o.flush(), Status::Taken);
        assert_eq!(drain(&mut rx0), [11]);
    }

    #[test]
    fn closed_only_while_the_engine_still_has_something_to_say() {
        let (mut o, [rx0, rx1]) = outlets([8, 8]);
        drop(rx0);
        assert_eq!(o.push(1, 1, false, || false).0, Status::Taken, "choice 1 still listens");
        drop(rx1);
        assert!(o.closed());
        assert_eq!(
            o.push(1, 2, false, || false).0,
            Status::Closed,
            "nobody listens: stop generating"
        );
    }

    #[test]
    fn a_reader_that_left_after_its_finish_is_not_an_abort() {
        let (mut o, rx) = one(8);
        assert_eq!(o.push(0, 1, true, || false).0, Status::Taken);
        drop(rx);
        assert!(!o.closed(), "the engine is done: nothing to abort");
        assert_eq!(o.flush(), Status::Taken);
    }

    #[test]
    fn a_failure_goes_after_the_outputs_before_it_to_every_choice() {
        let (mut o, [mut rx0, mut rx1]) = outlets([8, 8]);
        o.push(0, 1, false, || true);
        o.flush_scheduled(true);
        assert_eq!(o.fail(|| 99), Status::Taken);
        assert_eq!(drain(&mut rx0), [1, 99]);
        assert_eq!(drain(&mut rx1), [99]);
    }

    #[test]
    fn an_index_past_the_choices_is_dropped() {
        let (mut o, mut rx) = one(8);
        assert_eq!(o.push(3, 1, false, || false), (Status::Taken, Next::Nothing));
        assert!(drain(&mut rx).is_empty());
    }

    #[tokio::test]
    async fn room_completes_once_the_reader_frees_half_the_channel() {
        let (mut o, mut rx) = one(4);
        assert!(o.room().is_none(), "nothing waits");
        for i in 0..(4 + KEEP_LIMIT as u32) {
            o.push(0, i, false, || false);
        }
        let room = o.room().expect("outputs wait for room");
        let waiter = tokio::spawn(room);
        tokio::task::yield_now().await;
        rx.recv().await;
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one free slot is not half the channel");
        rx.recv().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("room within the timeout")
            .expect("the waiter ran");
        assert_eq!(o.flush(), Status::Full, "two slots freed, more are held");
    }

    #[tokio::test]
    async fn room_completes_when_the_reader_is_gone() {
        let (mut o, rx) = one(1);
        o.push(0, 0, false, || false);
        o.push(0, 1, false, || false);
        let room = o.room().expect("an output waits");
        drop(rx);
        tokio::time::timeout(std::time::Duration::from_secs(5), room)
            .await
            .expect("a gone reader ends the wait");
        assert_eq!(o.flush(), Status::Closed);
    }
}
