//! [`BurstDetector`]: whether an output comes in the same burst (one turn of the engine's event
//! loop) as the previous one.
//!
//! A batching engine hands every running request its token in one loop turn: such outputs are
//! microseconds apart, and holding them until the turn ends wakes the HTTP thread once instead
//! of once per request (see [`crate::outlets`]). An engine that computes between outputs without
//! returning to the loop (a plain loop around a model inside its generator) spaces them by a
//! model step; holding those would delay each until the loop turns, which it does not while the
//! engine computes. [`BURST_GAP`] tells the two apart.
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::Clock;

/// Outputs closer together than this belong to one burst; a model step takes longer.
pub const BURST_GAP: std::time::Duration = std::time::Duration::from_micros(500);

/// Remembers when the last output was pushed (shared by every request of one bridge).
#[derive(Debug)]
pub struct BurstDetector<C> {
    clock: C,
    /// Nanoseconds of the last push plus one (0: none yet).
    last: AtomicU64,
}

impl<C: Clock> BurstDetector<C> {
    pub fn new(clock: C) -> Self {
        Self {
            clock,
            last: AtomicU64::new(0),
        }
    }

    /// Whether this push comes less than [`BURST_GAP`] after the previous one; records it.
    /// The first push ever starts a burst of its own.
    pub fn in_burst(&self) -> bool {
        let now = self.clock.now_nanos().saturating_add(1);
        let last = self.last.swap(now, Ordering::Relaxed);
        let gap = u64::try_from(BURST_GAP.as_nanos()).unwrap_or(u64::MAX);
        last != 0 && now.saturating_sub(last) < gap
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A clock the test moves.
    #[derive(Clone, Default)]
    struct Manual(Arc<AtomicU64>);

    impl Manual {
        fn advance(&self, d: std::time::Duration) {
            self.0.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    impl Clock for Manual {
        fn now_nanos(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn the_first_push_is_alone_and_close_pushes_are_one_burst() {
        let clock = Manual::default();
        let b = BurstDetector::new(clock.clone());
        assert!(!b.in_burst(), "nothing came before the first push");
        clock.advance(std::time::Duration::from_micros(3));
        assert!(b.in_burst());
        clock.advance(BURST_GAP - std::time::Duration::from_nanos(1));
        assert!(b.in_burst(), "just under the gap after the previous push");
    }

    #[test]
    fn a_gap_ends_the_burst_and_the_next_push_starts_one() {
        let clock = Manual::default();
        let b = BurstDetector::new(clock.clone());
        b.in_burst();
        clock.advance(BURST_GAP);
        assert!(!b.in_burst(), "a model step's gap");
        clock.advance(std::time::Duration::from_micros(1));
        assert!(b.in_burst(), "measured from the last push, not the first of the burst");
        clock.advance(std::time::Duration::from_millis(20));
        assert!(!b.in_burst());
    }

    #[test]
    fn a_push_at_time_zero_still_counts() {
        // The clock may read 0 at the first push; the second push right after is in its burst.
        let b = BurstDetector::new(Manual::default());
        assert!(!b.in_burst());
        assert!(b.in_burst());
    }
}
