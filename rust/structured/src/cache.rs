//! A small least-recently-used map: compiled grammars and check results, keyed by constraint,
//! bounded by entries and by bytes (a key is the constraint's whole text, which a client sizes).
use std::collections::HashMap;
use std::hash::Hash;

/// At most `cap` entries and `budget` bytes (each entry weighs what its inserter says); the
/// least recently used entries go first. An entry heavier than the whole budget is not kept.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    cap: usize,
    budget: usize,
    bytes: usize,
    tick: u64,
    map: HashMap<K, (u64, usize, V)>,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    pub(crate) fn new(cap: usize, budget: usize) -> Self {
        Self {
            cap: cap.max(1),
            budget,
            bytes: 0,
            tick: 0,
            map: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(t, _, v)| {
            *t = tick;
            &*v
        })
    }

    /// Keep `value` under `key`, counted as `weight` bytes.
    pub(crate) fn insert(&mut self, key: K, value: V, weight: usize) {
        self.tick += 1;
        if let Some((_, w, _)) = self.map.remove(&key) {
            self.bytes -= w;
        }
        if weight > self.budget {
            return;
        }
        while !self.map.is_empty() && (self.map.len() >= self.cap || self.bytes + weight > self.budget) {
            // Linear scan: the maps are small (at most a few hundred entries) and inserts follow compiles.
            let Some(oldest) = self.map.iter().min_by_key(|(_, (t, _, _))| *t).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some((_, w, _)) = self.map.remove(&oldest) {
                self.bytes -= w;
            }
        }
        self.bytes += weight;
        self.map.insert(key, (self.tick, weight, value));
    }

    /// The bytes the kept entries weigh.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c = Lru::new(2, 100);
        c.insert(1, "a", 1);
        c.insert(2, "b", 1);
        assert_eq!(c.get(&1), Some(&"a"));
        c.insert(3, "c", 1);
        assert_eq!(c.get(&1), Some(&"a"));
        assert_eq!(c.get(&2), None);
        assert_eq!(c.get(&3), Some(&"c"));
    }

    #[test]
    fn stays_within_its_byte_budget() {
        let mut c = Lru::new(100, 10);
        c.insert(1, "a", 4);
        c.insert(2, "b", 4);
        c.insert(3, "c", 4);
        assert_eq!(c.get(&1), None);
        assert_eq!(c.bytes(), 8);
        c.insert(4, "huge", 11);
        assert_eq!(c.get(&4), None);
        assert_eq!(c.bytes(), 8);
        c.insert(2, "b2", 2);
        assert_eq!(c.bytes(), 6);
        assert_eq!(c.get(&2), Some(&"b2"));
    }
}
