//! The store behind `store: true`, `previous_response_id`, `GET`/`DELETE /v1/responses/{id}`
//! and `GET /v1/responses/{id}/input_items`.
//!
//! Two backends with the same bounds and the same eviction order: in memory (the default, gone
//! with the process) or one SQLite file (`ServerConfig::response_store_path`), which a restarted
//! server reads back. Both hold at most `response_store_bytes` (least recently used evicted
//! first) and drop entries older than `response_store_ttl`.

mod entry;
mod error;
mod memory;
mod schema;
mod sqlite;
mod worker;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

pub use entry::{Bounds, Entry, Stored};
pub use error::{HistoryError, StoreError};

use entry::{now_ms, Encoded};
use memory::MemoryStore;
use worker::SqliteStore;

/// The Responses store of a server: routes use it without knowing which backend it is.
pub struct ResponseStore(Backend);

enum Backend {
    Memory(MemoryStore),
    Sqlite(SqliteStore),
}

impl ResponseStore {
    /// The store at `path` (opened or created), or in memory when `path` is `None`.
    pub fn open(path: Option<&Path>, bounds: Bounds) -> Result<Self, StoreError> {
        Ok(Self(match path {
            None => Backend::Memory(MemoryStore::new(bounds)),
            Some(p) => Backend::Sqlite(SqliteStore::open(p, bounds)?),
        }))
    }

    /// The live entry `id`, marked as most recently used.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Entry>>, StoreError> {
        match &self.0 {
            Backend::Memory(m) => m.get(id, now_ms()),
            Backend::Sqlite(s) => {
                let id = id.to_string();
                s.call(move |db| db.get(&id, now_ms())).await?.map(|e| e.map(Arc::new))
            }
        }
    }

    /// The conversation up to and including response `id`, oldest message first.
    pub async fn history(&self, id: &str) -> Result<Vec<Value>, HistoryError> {
        match &self.0 {
            Backend::Memory(m) => m.history(id, now_ms()),
            Backend::Sqlite(s) => {
                let id = id.to_string();
                s.call(move |db| db.history(&id, now_ms())).await?
            }
        }
    }

    /// Store `stored` under `id`, evicting to stay in budget. Returns false when the entry
    /// alone is larger than the budget (it is not stored).
    pub async fn put(&self, id: String, stored: Stored) -> Result<bool, StoreError> {
        match &self.0 {
            Backend::Memory(m) => m.put(id, Encoded::new(stored), now_ms()),
            // Encoded on the store's thread: large responses are not serialised on the runtime.
            Backend::Sqlite(s) => s.call(move |db| db.put(&id, &Encoded::new(stored), now_ms())).await?,
        }
    }

    /// Delete `id`; false when it was not there.
    pub async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        match &self.0 {
            Backend::Memory(m) => m.remove(id, now_ms()),
            Backend::Sqlite(s) => {
                let id = id.to_string();
                s.call(move |db| db.remove(&id, now_ms())).await?
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(parent: Option<&str>, text: &str) -> Stored {
        Stored {
            response: json!({"t": text}),
            parent: parent.map(str::to_string),
            turn: vec![json!({"role": "user", "content": text})],
            input_items: Vec::new(),
        }
    }

    /// Both backends answer the same through the one type the routes use.
    #[tokio::test]
    async fn both_backends_behave_alike() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.db");
        let bounds = Bounds {
            max_bytes: 1 << 20,
            ttl_ms: Some(3_600_000),
        };
        for path in [None, Some(file.as_path())] {
            let s = ResponseStore::open(path, bounds).unwrap();
            assert!(s.put("r1".into(), stored(None, "one")).await.unwrap());
            assert!(s.put("r2".into(), stored(Some("r1"), "two")).await.unwrap());
            let h = s.history("r2").await.unwrap();
            assert_eq!(h.len(), 2);
            assert_eq!(&*s.get("r1").await.unwrap().unwrap().response, r#"{"t":"one"}"#);
            assert!(s.remove("r1").await.unwrap());
            assert!(!s.remove("r1").await.unwrap());
            assert_eq!(
                s.history("r2").await,
                Err(HistoryError::Broken("r2".into(), "r1".into()))
            );
            assert_eq!(s.history("r9").await, Err(HistoryError::NotFound("r9".into())));
        }
        // The file's store, reopened, still has what the first handle left.
        let s = ResponseStore::open(Some(&file), bounds).unwrap();
        assert!(s.get("r2").await.unwrap().is_some());
    }
}
