//! The bounded in-memory store behind `store: true`, `previous_response_id` and
//! `GET`/`DELETE /v1/responses/{id}`.
//!
//! Bounded by bytes, not entries: a budget (`ServerConfig::response_store_bytes`) covers every
//! stored response and the conversation turns it added, and the least recently used entries are
//! evicted first. An entry that alone exceeds the budget is not stored. Entries are kept as JSON
//! text, not as `serde_json::Value` trees (which take several times their text's size in small
//! allocations), so the budget is close to the memory actually held.
//!
//! Chained responses share their history instead of copying it: each entry keeps only the turn
//! it added (the request's input messages and the assistant's output) and the id of the response
//! it continues. A conversation is read back by walking those ids, which also marks every
//! ancestor as recently used, so the turns of a conversation in use are not evicted before its
//! newest response. Storing N chained responses of size S costs N x S, not N^2 x S / 2.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Longest chain of `previous_response_id` links followed (a guard, far above real use).
const MAX_CHAIN: usize = 100_000;

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

/// A stored response, as text.
#[derive(Debug)]
pub struct Entry {
    /// The response object's JSON.
    pub response: Box<str>,
    parent: Option<Box<str>>,
    /// The turn's messages as a JSON array.
    turn: Box<str>,
    /// The input items as a JSON array.
    pub input_items: Box<str>,
}

/// A conversation could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "previous response `{0}` was not found: it was not stored (`store: false`), was deleted, \
         or was evicted from the in-memory store"
    )]
    NotFound(String),
    #[error(
        "the conversation of `{0}` is incomplete: the earlier response `{1}` it continues was deleted or \
         evicted from the in-memory store"
    )]
    Broken(String, String),
}

struct Slot {
    tick: u64,
    bytes: usize,
    entry: Arc<Entry>,
}

#[derive(Default)]
struct Lru {
    tick: u64,
    bytes: usize,
    entries: HashMap<String, Slot>,
    order: BTreeMap<u64, String>,
}

impl Lru {
    fn touch(&mut self, id: &str) -> Option<Arc<Entry>> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(id)?;
        let old = std::mem::replace(&mut e.tick, tick);
        let stored = e.entry.clone();
        self.order.remove(&old);
        self.order.insert(tick, id.to_string());
        Some(stored)
    }

    fn remove(&mut self, id: &str) -> bool {
        match self.entries.remove(id) {
            Some(e) => {
                self.order.remove(&e.tick);
                self.bytes -= e.bytes;
                true
            }
            None => false,
        }
    }
}

pub struct ResponseStore {
    budget: usize,
    inner: Mutex<Lru>,
}

impl ResponseStore {
    /// A store holding at most `budget` bytes of responses and turns.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(Lru::default()),
        }
    }

    /// The entry, marked as most recently used.
    pub fn get(&self, id: &str) -> Option<Arc<Entry>> {
        self.inner.lock().ok()?.touch(id)
    }

    /// The conversation up to and including response `id`, oldest message first.
    pub fn history(&self, id: &str) -> Result<Vec<Value>, HistoryError> {
        let mut lru = self.inner.lock().map_err(|_| HistoryError::NotFound(id.to_string()))?;
        let mut turns: Vec<Arc<Entry>> = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(cur) = next.take() {
            let Some(stored) = lru.touch(&cur) else {
                return Err(if turns.is_empty() {
                    HistoryError::NotFound(cur)
                } else {
                    HistoryError::Broken(id.to_string(), cur)
                });
            };
            next = stored.parent.as_deref().map(str::to_string);
            turns.push(stored);
            if turns.len() > MAX_CHAIN {
                return Err(HistoryError::Broken(id.to_string(), next.unwrap_or_default()));
            }
        }
        drop(lru);
        let mut out = Vec::new();
        for t in turns.iter().rev() {
            // Written by `put` from a `Vec<Value>`, so it parses back.
            if let Ok(Value::Array(messages)) = serde_json::from_str(&t.turn) {
                out.extend(messages);
            }
        }
        Ok(out)
    }

    /// Store `stored` under `id`, evicting the least recently used entries to stay in budget.
    /// Returns false when the entry alone is larger than the budget (it is not stored).
    pub fn put(&self, id: String, stored: Stored) -> bool {
        let entry = Entry {
            response: stored.response.to_string().into_boxed_str(),
            parent: stored.parent.map(String::into_boxed_str),
            turn: Value::Array(stored.turn).to_string().into_boxed_str(),
            input_items: Value::Array(stored.input_items).to_string().into_boxed_str(),
        };
        let bytes = entry.response.len()
            + entry.turn.len()
            + entry.input_items.len()
            + id.len()
            + entry.parent.as_ref().map_or(0, |p| p.len());
        let Ok(mut lru) = self.inner.lock() else { return false };
        lru.remove(&id);
        if bytes > self.budget {
            return false;
        }
        while lru.bytes + bytes > self.budget {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            if let Some(e) = lru.entries.remove(&oldest) {
                lru.bytes -= e.bytes;
            }
        }
        lru.tick += 1;
        let tick = lru.tick;
        lru.order.insert(tick, id.clone());
        lru.bytes += bytes;
        lru.entries.insert(
            id,
            Slot {
                tick,
                bytes,
                entry: Arc::new(entry),
            },
        );
        true
    }

    pub fn remove(&self, id: &str) -> bool {
        self.inner.lock().map(|mut lru| lru.remove(id)).unwrap_or(false)
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().map(|l| l.bytes).unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|l| l.entries.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(parent: Option<&str>, text: &str) -> Stored {
        Stored {
            response: json!({"t": text}),
            parent: parent.map(str::to_string),
            turn: vec![json!({"role": "user", "content": text})],
            input_items: Vec::new(),
        }
    }

    #[test]
    fn evicts_least_recently_used_within_the_byte_budget() {
        let json_size = |v: &Value| v.to_string().len();
        let one = json_size(&json!({"t": "aaaa"})) + json_size(&json!([{"role": "user", "content": "aaaa"}])) + 2 + 1;
        let s = ResponseStore::new(2 * one);
        assert!(s.put("a".into(), entry(None, "aaaa")));
        assert!(s.put("b".into(), entry(None, "bbbb")));
        assert!(s.get("a").is_some()); // "b" is now the oldest
        assert!(s.put("c".into(), entry(None, "cccc")));
        assert!(s.get("b").is_none());
        assert!(s.get("a").is_some() && s.get("c").is_some());
        assert!(s.bytes() <= 2 * one);
        assert!(s.remove("a") && !s.remove("a"));
        assert!(s.get("a").is_none());
        assert!(!s.put("huge".into(), entry(None, &"x".repeat(10 * one))));
        assert!(s.get("huge").is_none());
    }

    #[test]
    fn chained_responses_share_history() {
        let s = ResponseStore::new(1 << 20);
        s.put("r1".into(), entry(None, "one"));
        s.put("r2".into(), entry(Some("r1"), "two"));
        s.put("r3".into(), entry(Some("r2"), "three"));
        let h = s.history("r3").unwrap();
        let texts: Vec<&str> = h.iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        // Each entry holds only its own turn: bytes grow linearly with the chain.
        let per = s.bytes() / 3;
        s.put("r4".into(), entry(Some("r3"), "four"));
        assert!(s.bytes() <= 4 * per + 16);
        s.remove("r2");
        assert_eq!(s.history("r4"), Err(HistoryError::Broken("r4".into(), "r2".into())));
        assert_eq!(s.history("nope"), Err(HistoryError::NotFound("nope".into())));
    }

    #[test]
    fn reading_a_conversation_keeps_its_ancestors_fresh() {
        let json_size = |v: &Value| v.to_string().len();
        let one = json_size(&json!({"t": "aaaa"})) + json_size(&json!([{"role": "user", "content": "aaaa"}])) + 2 + 4;
        let s = ResponseStore::new(3 * one);
        s.put("a".into(), entry(None, "aaaa"));
        s.put("x".into(), entry(None, "xxxx"));
        s.put("b".into(), entry(Some("a"), "bbbb"));
        s.history("b").unwrap(); // touches b and a: x is now the oldest
        s.put("c".into(), entry(None, "cccc"));
        assert!(s.get("x").is_none());
        assert!(s.history("b").is_ok());
    }
}
