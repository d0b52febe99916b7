//! The state machines between the Rust server and an engine that lives on another thread's
//! event loop (smgpy's Python engines), with no Python in them: `rust/py` converts types and
//! calls these, and every rule here has a Rust test.
//!
//! - [`bell`]: a wake-up byte for a loop that watches a file descriptor, written once per burst.
//! - [`inbox`]: requests, cancellations, embedding requests and "room again" notices queued for
//!   the loop; one engine request for `n` choices, aborted only as a whole ([`group`]).
//! - [`outlets`]: one request's output channels: outputs of one loop turn are held and handed
//!   over together (fewer wake-ups of the HTTP thread), a bounded hold, back-pressure.
//! - [`burst`]: tells a burst of outputs (one loop turn) from outputs an engine spaces out, on
//!   an injectable [`clock::Clock`].
pub mod bell;
pub mod burst;
pub mod clock;
pub mod group;
pub mod inbox;
pub mod outlets;

pub use bell::Bell;
pub use burst::{BurstDetector, BURST_GAP};
pub use clock::{Clock, MonotonicClock};
pub use inbox::{Inbox, Start, Work, CHANNEL_CAPACITY};
pub use outlets::{Next, Outlets, Saturated, Status, KEEP_LIMIT};
