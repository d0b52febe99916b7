//! A small least-recently-used map: compiled grammars and check results, keyed by constraint.
use std::collections::HashMap;
use std::hash::Hash;

/// At most `cap` entries; the least recently used one goes first.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    cap: usize,
    tick: u64,
    map: HashMap<K, (u64, V)>,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            tick: 0,
            map: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(t, v)| {
            *t = tick;
            &*v
        })
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.tick += 1;
        if self.map.len() >= self.cap && !self.map.contains_key(&key) {
            // Linear scan: the maps are small (tens of entries) and inserts follow compiles.
            if let Some(oldest) = self.map.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone()) {
                self.map.remove(&oldest);
            }
        }
        self.map.insert(key, (self.tick, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c = Lru::new(2);
        c.insert(1, "a");
        c.insert(2, "b");
        assert_eq!(c.get(&1), Some(&"a"));
        c.insert(3, "c");
        assert_eq!(c.get(&1), Some(&"a"));
        assert_eq!(c.get(&2), None);
        assert_eq!(c.get(&3), Some(&"c"));
    }
}
