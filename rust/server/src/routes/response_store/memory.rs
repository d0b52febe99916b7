//! The in-memory backend of the Responses store (the default): gone when the process ends.
//!
//! Least recently used entries are evicted first to stay within the byte budget, and entries
//! past the age bound are dropped: lazily when read, in order of creation on every write. A
//! conversation is read back by walking its parent ids, which also marks every ancestor as
//! recently used, so the turns of a conversation in use are not evicted before its newest
//! response.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::entry::{turn_messages, Bounds, Encoded, Entry, MAX_CHAIN};
use super::error::{HistoryError, StoreError};

struct Slot {
    /// Last use, in the store's own clock of ticks.
    tick: u64,
    /// When it was stored (ms since the epoch), for the age bound.
    created: u64,
    /// The tick of its insertion: with `created`, its key in `by_age`.
    born: u64,
    bytes: usize,
    entry: Arc<Entry>,
    parent: Option<Box<str>>,
    turn: Box<str>,
}

#[derive(Default)]
struct Lru {
    tick: u64,
    bytes: usize,
    entries: HashMap<String, Slot>,
    /// Entries by last use.
    order: BTreeMap<u64, String>,
    /// Entries by `(created, born)`, for the age bound.
    by_age: BTreeMap<(u64, u64), String>,
}

impl Lru {
    fn touch(&mut self, id: &str) -> Option<&Slot> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(id)?;
        let old = std::mem::replace(&mut e.tick, tick);
        self.order.remove(&old);
        self.order.insert(tick, id.to_string());
        self.entries.get(id)
    }

    fn remove(&mut self, id: &str) -> bool {
        match self.entries.remove(id) {
            Some(e) => {
                self.order.remove(&e.tick);
                self.by_age.remove(&(e.created, e.born));
                self.bytes -= e.bytes;
                true
            }
            None => false,
        }
    }

    /// Drop what has expired at `now`: oldest first, so this stops at the first live entry.
    fn prune(&mut self, bounds: &Bounds, now: u64) {
        while let Some(first) = self.by_age.first_entry() {
            if !bounds.expired(first.key().0, now) {
                break;
            }
            let id = first.remove();
            self.remove(&id);
        }
    }

    /// The live entry `id`, marked as most recently used (an expired one is dropped).
    fn live(&mut self, id: &str, bounds: &Bounds, now: u64) -> Option<&Slot> {
        if self.entries.get(id).is_some_and(|s| bounds.expired(s.created, now)) {
            self.remove(id);
            return None;
        }
        self.touch(id)
    }
}

/// Responses kept in this process's memory.
pub(crate) struct MemoryStore {
    bounds: Bounds,
    inner: Mutex<Lru>,
}

impl MemoryStore {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            inner: Mutex::new(Lru::default()),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Lru>, StoreError> {
        // Only a panic while holding the lock poisons it, and nothing in here panics.
        self.inner.lock().map_err(|_| StoreError::Closed)
    }

    /// The entry, marked as most recently used.
    pub fn get(&self, id: &str, now: u64) -> Result<Option<Arc<Entry>>, StoreError> {
        Ok(self.lock()?.live(id, &self.bounds, now).map(|s| s.entry.clone()))
    }

    /// The conversation up to and including response `id`, oldest message first.
    pub fn history(&self, id: &str, now: u64) -> Result<Vec<Value>, HistoryError> {
        let mut lru = self.lock()?;
        let mut turns: Vec<Box<str>> = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(cur) = next.take() {
            let Some(slot) = lru.live(&cur, &self.bounds, now) else {
                return Err(if turns.is_empty() {
                    HistoryError::NotFound(cur)
                } else {
                    HistoryError::Broken(id.to_string(), cur)
                });
            };
            next = slot.parent.as_deref().map(str::to_string);
            turns.push(slot.turn.clone());
            if turns.len() > MAX_CHAIN {
                return Err(HistoryError::Broken(id.to_string(), next.unwrap_or_default()));
            }
        }
        drop(lru);
        let mut out = Vec::new();
        for t in turns.iter().rev() {
            // Written by `Encoded::new` from a `Vec<Value>`, so it parses back.
            out.extend(turn_messages(t).unwrap_or_default());
        }
        Ok(out)
    }

    /// Store `entry` under `id`, evicting the least recently used entries to stay in budget.
    /// Returns false when the entry alone is larger than the budget (it is not stored).
    pub fn put(&self, id: String, entry: Encoded, now: u64) -> Result<bool, StoreError> {
        let bytes = entry.bytes(&id);
        let mut lru = self.lock()?;
        lru.prune(&self.bounds, now);
        lru.remove(&id);
        if bytes > self.bounds.max_bytes {
            return Ok(false);
        }
        while lru.bytes + bytes > self.bounds.max_bytes {
            let Some(oldest) = lru.order.first_key_value().map(|(_, id)| id.clone()) else {
                break;
            };
            lru.remove(&oldest);
        }
        lru.tick += 1;
        let tick = lru.tick;
        lru.order.insert(tick, id.clone());
        lru.by_age.insert((now, tick), id.clone());
        lru.bytes += bytes;
        lru.entries.insert(
            id,
            Slot {
                tick,
                created: now,
                born: tick,
                bytes,
                entry: Arc::new(entry.entry),
                parent: entry.parent,
                turn: entry.turn,
            },
        );
        Ok(true)
    }

    pub fn remove(&self, id: &str, now: u64) -> Result<bool, StoreError> {
        let mut lru = self.lock()?;
        lru.prune(&self.bounds, now);
        Ok(lru.remove(id))
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.inner.lock().map(|l| l.bytes).unwrap_or(0)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().map(|l| l.entries.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::entry::Stored;
    use super::*;
    use serde_json::json;

    pub(crate) fn entry(parent: Option<&str>, text: &str) -> Encoded {
        Encoded::new(Stored {
            response: json!({"t": text}),
            parent: parent.map(str::to_string),
            turn: vec![json!({"role": "user", "content": text})],
            input_items: Vec::new(),
        })
    }

    fn store(max_bytes: usize, ttl_ms: Option<u64>) -> MemoryStore {
        MemoryStore::new(Bounds { max_bytes, ttl_ms })
    }

    #[test]
    fn evicts_least_recently_used_within_the_byte_budget() {
        let one = entry(None, "aaaa").bytes("a");
        let s = store(2 * one, None);
        assert!(s.put("a".into(), entry(None, "aaaa"), 0).unwrap());
        assert!(s.put("b".into(), entry(None, "bbbb"), 0).unwrap());
        assert!(s.get("a", 0).unwrap().is_some()); // "b" is now the oldest
        assert!(s.put("c".into(), entry(None, "cccc"), 0).unwrap());
        assert!(s.get("b", 0).unwrap().is_none());
        assert!(s.get("a", 0).unwrap().is_some() && s.get("c", 0).unwrap().is_some());
        assert!(s.bytes() <= 2 * one);
        assert!(s.remove("a", 0).unwrap() && !s.remove("a", 0).unwrap());
        assert!(s.get("a", 0).unwrap().is_none());
        assert!(!s.put("huge".into(), entry(None, &"x".repeat(10 * one)), 0).unwrap());
        assert!(s.get("huge", 0).unwrap().is_none());
    }

    #[test]
    fn chained_responses_share_history() {
        let s = store(1 << 20, None);
        s.put("r1".into(), entry(None, "one"), 0).unwrap();
        s.put("r2".into(), entry(Some("r1"), "two"), 0).unwrap();
        s.put("r3".into(), entry(Some("r2"), "three"), 0).unwrap();
        let h = s.history("r3", 0).unwrap();
        let texts: Vec<&str> = h.iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        // Each entry holds only its own turn: bytes grow linearly with the chain.
        let per = s.bytes() / 3;
        s.put("r4".into(), entry(Some("r3"), "four"), 0).unwrap();
        assert!(s.bytes() <= 4 * per + 16);
        s.remove("r2", 0).unwrap();
        assert_eq!(s.history("r4", 0), Err(HistoryError::Broken("r4".into(), "r2".into())));
        assert_eq!(s.history("nope", 0), Err(HistoryError::NotFound("nope".into())));
    }

    #[test]
    fn reading_a_conversation_keeps_its_ancestors_fresh() {
        let one = entry(None, "aaaa").bytes("a") + 1;
        let s = store(3 * one, None);
        s.put("a".into(), entry(None, "aaaa"), 0).unwrap();
        s.put("x".into(), entry(None, "xxxx"), 0).unwrap();
        s.put("b".into(), entry(Some("a"), "bbbb"), 0).unwrap();
        s.history("b", 0).unwrap(); // touches b and a: x is now the oldest
        s.put("c".into(), entry(None, "cccc"), 0).unwrap();
        assert!(s.get("x", 0).unwrap().is_none());
        assert!(s.history("b", 0).is_ok());
    }

    #[test]
    fn entries_expire_by_age_whatever_their_use() {
        let s = store(1 << 20, Some(1_000));
        s.put("old".into(), entry(None, "old"), 0).unwrap();
        s.put("new".into(), entry(Some("old"), "new"), 600).unwrap();
        assert!(s.get("old", 999).unwrap().is_some());
        assert!(s.get("old", 1_000).unwrap().is_none());
        assert_eq!(
            s.history("new", 1_000),
            Err(HistoryError::Broken("new".into(), "old".into()))
        );
        // A write prunes what has expired, used or not.
        s.put("later".into(), entry(None, "later"), 1_600).unwrap();
        assert_eq!(s.len(), 1);
        assert!(s.get("later", 1_600).unwrap().is_some());
        // A replaced entry's first insertion does not expire the second.
        s.put("later".into(), entry(None, "again"), 2_500).unwrap();
        s.put("x".into(), entry(None, "x"), 2_700).unwrap();
        assert!(s.get("later", 2_700).unwrap().is_some());
    }
}
