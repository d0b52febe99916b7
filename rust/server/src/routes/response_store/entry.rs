//! What the Responses store keeps for one response, the same in both backends.
//!
//! Entries are kept as JSON text, not as `serde_json::Value` trees (which take several times
//! their text's size in small allocations), so the byte budget is close to what is held. Chained
//! responses share their history instead of copying it: each entry keeps only the turn it added
//! (the request's input messages and the assistant's output) and the id of the response it
//! continues, so storing N chained responses of size S costs N x S, not N^2 x S / 2.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Longest chain of `previous_response_id` links followed (a guard, far above real use).
pub(crate) const MAX_CHAIN: usize = 100_000;

/// One response to store.
#[derive(Debug)]
pub struct Stored {
    /// The response object as returned to the client.
    pub response: Value,
    /// The response this one continues (`previous_response_id`).
    pub parent: Option<String>,
    /// Chat messages this response added to the conversation: its input messages, then the
    /// assistant's output (the request's `instructions` do not carry over).
    pub turn: Vec<Value>,
    /// The request's input items, as `GET /v1/responses/{id}/input_items` lists them.
    pub input_items: Vec<Value>,
}

/// A stored response as the routes read it back.
#[derive(Debug)]
pub struct Entry {
    /// The response object's JSON.
    pub response: Box<str>,
    /// The input items as a JSON array.
    pub input_items: Box<str>,
}

/// A response as text, ready to store.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub entry: Entry,
    pub parent: Option<Box<str>>,
    /// The turn's messages as a JSON array.
    pub turn: Box<str>,
}

impl Encoded {
    pub fn new(stored: Stored) -> Self {
        Self {
            entry: Entry {
                response: stored.response.to_string().into_boxed_str(),
                input_items: Value::Array(stored.input_items).to_string().into_boxed_str(),
            },
            parent: stored.parent.map(String::into_boxed_str),
            turn: Value::Array(stored.turn).to_string().into_boxed_str(),
        }
    }

    /// What the entry counts against the byte budget under `id`: its texts and ids. Both
    /// backends count the same, so one `--response-store-size` means the same in either.
    pub fn bytes(&self, id: &str) -> usize {
        self.entry.response.len()
            + self.turn.len()
            + self.entry.input_items.len()
            + id.len()
            + self.parent.as_ref().map_or(0, |p| p.len())
    }
}

/// A stored turn's messages (a JSON array written by [`Encoded::new`]).
pub(crate) fn turn_messages(text: &str) -> Result<Vec<Value>, serde_json::Error> {
    serde_json::from_str(text)
}

/// Milliseconds since the Unix epoch: creation times and the age bound are in these.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How much a store may hold and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Budget of [`Encoded::bytes`] over all entries; least recently used entries go first.
    pub max_bytes: usize,
    /// Entries older than this (since they were stored) are gone (`None`: no age bound).
    pub ttl_ms: Option<u64>,
}

impl Bounds {
    /// Entries created at or before this instant have expired at `now` (`None`: none has).
    pub fn expired_up_to(&self, now: u64) -> Option<u64> {
        self.ttl_ms.and_then(|ttl| now.checked_sub(ttl))
    }

    /// Whether an entry created at `created` has expired at `now`.
    pub fn expired(&self, created: u64, now: u64) -> bool {
        self.expired_up_to(now).is_some_and(|cut| created <= cut)
    }
}
