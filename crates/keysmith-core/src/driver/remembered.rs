//! What a backend remembers of each pool or sequence it touched (a pool's
//! size, a sequence row and the revision it was read at): a bounded map
//! shared by the backends that keep such hints (PostgreSQL, etcd, MySQL),
//! written once here.
//!
//! Never trusted on its own: the backends check what they remembered in the
//! same statement or transaction that uses it, and forget an entry that
//! turned out stale.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How many names a cache remembers before it forgets them all.
const CAPACITY: usize = 4096;

/// A bounded map from a pool's or sequence's name to what was last read of
/// it. When full it is cleared rather than evicting one by one: a miss
/// costs one read, and the common case is a handful of names.
#[derive(Debug, Default)]
pub struct Remembered<V> {
    map: Mutex<HashMap<String, V>>,
}

impl<V: Clone + PartialEq> Remembered<V> {
    /// An empty map.
    pub fn new() -> Self {
        Remembered {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, V>> {
        // The map holds plain values: a panic elsewhere cannot leave it torn.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What was last remembered of `name`.
    pub fn get(&self, name: &str) -> Option<V> {
        self.map().get(name).cloned()
    }

    /// Remembers `value` for `name`.
    pub fn remember(&self, name: &str, value: V) {
        let mut map = self.map();
        if map.get(name) == Some(&value) {
            return;
        }
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(name.to_owned(), value);
    }

    /// Forgets `name` (dropped, or found stale).
    pub fn forget(&self, name: &str) {
        self.map().remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_forgets_and_stays_bounded() {
        let c = Remembered::new();
        c.remember("a", 1_i64);
        assert_eq!(c.get("a"), Some(1));
        c.forget("a");
        assert_eq!(c.get("a"), None);
        for i in 0..=CAPACITY {
            c.remember(&i.to_string(), 7);
        }
        assert!(c.map().len() <= CAPACITY);
        assert_eq!(c.get(&CAPACITY.to_string()), Some(7));
    }
}
