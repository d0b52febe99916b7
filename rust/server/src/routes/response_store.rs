//! The bounded in-memory store behind `store: true`, `previous_response_id` and
//! `GET`/`DELETE /v1/responses/{id}`. Least-recently-used entries are evicted first, so a busy
//! server keeps recent conversations without growing without bound.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Default number of responses kept.
pub const DEFAULT_CAPACITY: usize = 1024;

/// One stored response.
#[derive(Debug)]
pub struct Stored {
    /// The response object as returned to the client.
    pub response: Value,
    /// The conversation up to and including this response, as chat messages (without the
    /// request's `instructions`, which do not carry over).
    pub conversation: Vec<Value>,
}

#[derive(Default)]
struct Lru {
    tick: u64,
    entries: HashMap<String, (u64, Arc<Stored>)>,
    order: BTreeMap<u64, String>,
}

pub struct ResponseStore {
    capacity: usize,
    inner: Mutex<Lru>,
}

impl ResponseStore {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Lru::default()),
        }
    }

    /// The entry, marked as most recently used.
    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        let mut lru = self.inner.lock().ok()?;
        lru.tick += 1;
        let tick = lru.tick;
        let (old, stored) = {
            let e = lru.entries.get_mut(id)?;
            let old = std::mem::replace(&mut e.0, tick);
            (old, e.1.clone())
        };
        lru.order.remove(&old);
        lru.order.insert(tick, id.to_string());
        Some(stored)
    }

    pub fn put(&self, id: String, stored: Stored) {
        let Ok(mut lru) = self.inner.lock() else { return };
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((old, _)) = lru.entries.insert(id.clone(), (tick, Arc::new(stored))) {
            lru.order.remove(&old);
        }
        lru.order.insert(tick, id);
        while lru.entries.len() > self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.entries.remove(&oldest);
        }
    }

    pub fn remove(&self, id: &str) -> bool {
        let Ok(mut lru) = self.inner.lock() else { return false };
        match lru.entries.remove(id) {
            Some((tick, _)) => {
                lru.order.remove(&tick);
                true
            }
            None => false,
        }
    }
}

impl Default for ResponseStore {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: i64) -> Stored {
        Stored {
            response: Value::from(n),
            conversation: Vec::new(),
        }
    }

    #[test]
    fn evicts_least_recently_used() {
        let s = ResponseStore::new(2);
        s.put("a".into(), entry(1));
        s.put("b".into(), entry(2));
        assert!(s.get("a").is_some()); // "b" is now the oldest
        s.put("c".into(), entry(3));
        assert!(s.get("b").is_none());
        assert!(s.get("a").is_some() && s.get("c").is_some());
        assert!(s.remove("a"));
        assert!(!s.remove("a"));
        assert!(s.get("a").is_none());
    }
}
