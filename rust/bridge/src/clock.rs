//! [`Clock`]: where [`crate::burst`] reads the time, so tests set it instead of sleeping.
use std::time::Instant;

/// Nanoseconds since some fixed start; never goes back.
pub trait Clock: Send + Sync {
    fn now_nanos(&self) -> u64;
}

/// The process's monotonic clock, counted from this value's creation.
#[derive(Debug)]
pub struct MonotonicClock(Instant);

impl MonotonicClock {
    pub fn new() -> Self {
        Self(Instant::now())
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_nanos(&self) -> u64 {
        // Saturates after ~584 years of uptime.
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_never_goes_back() {
        let c = MonotonicClock::new();
        let a = c.now_nanos();
        let b = c.now_nanos();
        assert!(b >= a);
    }
}
