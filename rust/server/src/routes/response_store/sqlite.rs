//! The persistent backend of the Responses store: one SQLite file (see `schema`), read and
//! written synchronously by whoever owns the [`Db`] (the store's own thread, see `worker`).
//!
//! Every call is one transaction. Reads are writes too: they mark what they read as recently
//! used, as the in-memory store does, so eviction order is the same in both. Expired entries
//! are pruned at start-up and on every write; reads skip them.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::Value;

use super::entry::{turn_messages, Bounds, Encoded, Entry, MAX_CHAIN};
use super::error::{HistoryError, StoreError};
use super::schema;

/// An open store file.
pub(crate) struct Db {
    conn: Connection,
    path: PathBuf,
    bounds: Bounds,
}

/// The cut-off of the age bound as SQL compares it: rows created at or before it are expired
/// (`-1`: none is).
fn cutoff(bounds: &Bounds, now: u64) -> i64 {
    bounds
        .expired_up_to(now)
        .map_or(-1, |c| i64::try_from(c).unwrap_or(i64::MAX))
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Db {
    /// Open (or create) the store at `path` and prune what expired while it was closed.
    pub fn open(path: &Path, bounds: Bounds, now: u64) -> Result<Self, StoreError> {
        let conn = schema::open(path)?;
        let mut db = Self {
            conn,
            path: path.to_path_buf(),
            bounds,
        };
        let pruned = db.write(|tx, b| prune(tx, b, now))?;
        // A smaller budget than the last run's applies at once, not at the next write.
        let evicted = db.write(|tx, b| make_room(tx, b.max_bytes, 0))?;
        if pruned + evicted > 0 {
            tracing::info!(path = %path.display(), pruned, evicted, "response store: dropped expired or over-budget entries");
        }
        Ok(db)
    }

    fn failed(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Failed {
            path: self.path.display().to_string(),
            detail: e.to_string(),
        }
    }

    /// Run `f` in one write transaction (taken at once, so concurrent writers queue instead of
    /// failing half-way).
    fn write<T>(&mut self, f: impl FnOnce(&Transaction<'_>, &Bounds) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let bounds = self.bounds;
        let run = |conn: &mut Connection| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx, &bounds)?;
            tx.commit()?;
            Ok(out)
        };
        run(&mut self.conn).map_err(|e| self.failed(e))
    }

    /// The live entry `id`, marked as most recently used.
    pub fn get(&mut self, id: &str, now: u64) -> Result<Option<Entry>, StoreError> {
        self.write(|tx, b| {
            let found = tx
                .prepare_cached("SELECT response, input_items FROM responses WHERE id = ?1 AND created_ms > ?2")?
                .query_row(params![id, cutoff(b, now)], |r| {
                    Ok(Entry {
                        response: r.get::<_, String>(0)?.into_boxed_str(),
                        input_items: r.get::<_, String>(1)?.into_boxed_str(),
                    })
                })
                .optional()?;
            if found.is_some() {
                touch(tx, &[id])?;
            }
            Ok(found)
        })
    }

    /// The conversation up to and including response `id`, oldest message first; every
    /// response in it is marked as recently used.
    pub fn history(&mut self, id: &str, now: u64) -> Result<Vec<Value>, HistoryError> {
        // Newest first: (id, parent, turn).
        let chain: Vec<(String, Option<String>, String)> = self.write(|tx, b| {
            let rows = tx
                .prepare_cached(
                    "WITH RECURSIVE chain(id, parent, turn, depth) AS (
                         SELECT id, parent, turn, 0 FROM responses WHERE id = ?1 AND created_ms > ?2
                         UNION ALL
                         SELECT r.id, r.parent, r.turn, c.depth + 1
                         FROM responses r JOIN chain c ON r.id = c.parent
                         WHERE r.created_ms > ?2 AND c.depth < ?3
                     )
                     SELECT id, parent, turn FROM chain ORDER BY depth",
                )?
                .query_map(params![id, cutoff(b, now), as_i64(MAX_CHAIN as u64)], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let ids: Vec<&str> = rows.iter().map(|(i, _, _)| i.as_str()).collect();
            touch(tx, &ids)?;
            Ok(rows)
        })?;
        let Some((_, missing, _)) = chain.last() else {
            return Err(HistoryError::NotFound(id.to_string()));
        };
        if let Some(missing) = missing {
            return Err(HistoryError::Broken(id.to_string(), missing.clone()));
        }
        let mut out = Vec::new();
        for (turn_id, _, turn) in chain.iter().rev() {
            let messages = turn_messages(turn).map_err(|e| StoreError::Damaged {
                path: self.path.display().to_string(),
                detail: format!("the stored turn of `{turn_id}` does not parse: {e}"),
            })?;
            out.extend(messages);
        }
        Ok(out)
    }

    /// Store `entry` under `id`, evicting the least recently used entries to stay in budget.
    /// Returns false when the entry alone is larger than the budget (it is not stored).
    pub fn put(&mut self, id: &str, entry: &Encoded, now: u64) -> Result<bool, StoreError> {
        let bytes = entry.bytes(id);
        self.write(|tx, b| {
            prune(tx, b, now)?;
            tx.prepare_cached("DELETE FROM responses WHERE id = ?1")?
                .execute([id])?;
            if bytes > b.max_bytes {
                return Ok(false);
            }
            make_room(tx, b.max_bytes, bytes)?;
            let tick = next_tick(tx, 1)?;
            tx.prepare_cached(
                "INSERT INTO responses (id, parent, created_ms, used, bytes, response, turn, input_items)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                id,
                entry.parent.as_deref(),
                as_i64(now),
                tick,
                as_i64(bytes as u64),
                &*entry.entry.response,
                &*entry.turn,
                &*entry.entry.input_items,
            ])?;
            Ok(true)
        })
    }

    pub fn remove(&mut self, id: &str, now: u64) -> Result<bool, StoreError> {
        self.write(|tx, b| {
            prune(tx, b, now)?;
            Ok(tx
                .prepare_cached("DELETE FROM responses WHERE id = ?1")?
                .execute([id])?
                > 0)
        })
    }

    /// Bytes held now (as the budget counts them).
    #[cfg(test)]
    pub fn bytes(&self) -> Result<usize, StoreError> {
        self.count("SELECT bytes FROM totals")
    }

    #[cfg(test)]
    pub fn len(&self) -> Result<usize, StoreError> {
        self.count("SELECT count(*) FROM responses")
    }

    /// The one number a query answers (0 if it is negative).
    #[cfg(test)]
    fn count(&self, sql: &str) -> Result<usize, StoreError> {
        self.conn
            .query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| usize::try_from(n).unwrap_or(0))
            .map_err(|e| self.failed(e))
    }
}

/// Delete every expired entry; how many went.
fn prune(tx: &Transaction<'_>, bounds: &Bounds, now: u64) -> rusqlite::Result<usize> {
    match bounds.expired_up_to(now) {
        None => Ok(0),
        Some(_) => tx
            .prepare_cached("DELETE FROM responses WHERE created_ms <= ?1")?
            .execute([cutoff(bounds, now)]),
    }
}

/// Evict least recently used entries until `incoming` more bytes fit in `budget`; how many went.
fn make_room(tx: &Transaction<'_>, budget: usize, incoming: usize) -> rusqlite::Result<usize> {
    let limit = as_i64(budget.saturating_sub(incoming) as u64);
    let mut evicted = 0;
    loop {
        let held: i64 = tx.query_row("SELECT bytes FROM totals", [], |r| r.get(0))?;
        if held <= limit {
            return Ok(evicted);
        }
        let gone = tx
            .prepare_cached("DELETE FROM responses WHERE id = (SELECT id FROM responses ORDER BY used LIMIT 1)")?
            .execute([])?;
        if gone == 0 {
            return Ok(evicted);
        }
        evicted += gone;
    }
}

/// Advance the use clock by `n`; the first of the `n` new ticks.
fn next_tick(tx: &Transaction<'_>, n: usize) -> rusqlite::Result<i64> {
    let n = as_i64(n as u64);
    tx.query_row("UPDATE totals SET tick = tick + ?1 RETURNING tick - ?1 + 1", [n], |r| {
        r.get(0)
    })
}

/// Mark `ids` as used now, in their order (the last most recently, as the in-memory store does
/// when it walks a conversation from its newest response back).
fn touch(tx: &Transaction<'_>, ids: &[&str]) -> rusqlite::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let first = next_tick(tx, ids.len())?;
    let mut update = tx.prepare_cached("UPDATE responses SET used = ?1 WHERE id = ?2")?;
    for (tick, id) in (first..).zip(ids) {
        update.execute(params![tick, id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::entry::Stored;
    use super::*;
    use serde_json::json;

    fn entry(parent: Option<&str>, text: &str) -> Encoded {
        Encoded::new(Stored {
            response: json!({"t": text}),
            parent: parent.map(str::to_string),
            turn: vec![json!({"role": "user", "content": text})],
            input_items: vec![json!({"id": format!("msg_{text}"), "type": "message"})],
        })
    }

    fn bounds(max_bytes: usize, ttl_ms: Option<u64>) -> Bounds {
        Bounds { max_bytes, ttl_ms }
    }

    fn texts(h: &[Value]) -> Vec<&str> {
        h.iter().map(|m| m["content"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_conversation_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("responses.db");
        {
            let mut db = Db::open(&path, bounds(1 << 20, None), 0).unwrap();
            assert!(db.put("r1", &entry(None, "one"), 0).unwrap());
            assert!(db.put("r2", &entry(Some("r1"), "two"), 0).unwrap());
            assert!(db.put("gone", &entry(None, "gone"), 0).unwrap());
            assert!(db.remove("gone", 0).unwrap() && !db.remove("gone", 0).unwrap());
        }
        let mut db = Db::open(&path, bounds(1 << 20, None), 0).unwrap();
        assert_eq!(texts(&db.history("r2", 0).unwrap()), ["one", "two"]);
        let got = db.get("r1", 0).unwrap().unwrap();
        assert_eq!(&*got.response, r#"{"t":"one"}"#);
        assert_eq!(&*got.input_items, r#"[{"id":"msg_one","type":"message"}]"#);
        assert!(db.get("gone", 0).unwrap().is_none());
        assert_eq!(db.len().unwrap(), 2);
        let expected = entry(None, "one").bytes("r1") + entry(Some("r1"), "two").bytes("r2");
        assert_eq!(db.bytes().unwrap(), expected);
        assert!(db.put("r3", &entry(Some("r2"), "three"), 0).unwrap());
        assert_eq!(texts(&db.history("r3", 0).unwrap()), ["one", "two", "three"]);
    }

    #[test]
    fn evicts_least_recently_used_within_the_byte_budget_as_memory_does() {
        let dir = tempfile::tempdir().unwrap();
        let one = entry(None, "aaaa").bytes("a");
        let mut db = Db::open(&dir.path().join("s.db"), bounds(2 * one, None), 0).unwrap();
        assert!(db.put("a", &entry(None, "aaaa"), 0).unwrap());
        assert!(db.put("b", &entry(None, "bbbb"), 0).unwrap());
        assert!(db.get("a", 0).unwrap().is_some()); // "b" is now the oldest
        assert!(db.put("c", &entry(None, "cccc"), 0).unwrap());
        assert!(db.get("b", 0).unwrap().is_none());
        assert!(db.get("a", 0).unwrap().is_some() && db.get("c", 0).unwrap().is_some());
        assert!(db.bytes().unwrap() <= 2 * one);
        assert!(!db.put("huge", &entry(None, &"x".repeat(10 * one)), 0).unwrap());
        assert!(db.get("huge", 0).unwrap().is_none());
    }

    #[test]
    fn reading_a_conversation_keeps_its_ancestors_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let one = entry(None, "aaaa").bytes("a") + 1;
        let mut db = Db::open(&dir.path().join("s.db"), bounds(3 * one, None), 0).unwrap();
        db.put("a", &entry(None, "aaaa"), 0).unwrap();
        db.put("x", &entry(None, "xxxx"), 0).unwrap();
        db.put("b", &entry(Some("a"), "bbbb"), 0).unwrap();
        db.history("b", 0).unwrap(); // touches b and a: x is now the oldest
        db.put("c", &entry(None, "cccc"), 0).unwrap();
        assert!(db.get("x", 0).unwrap().is_none());
        assert!(db.history("b", 0).is_ok());
    }

    #[test]
    fn an_evicted_ancestor_breaks_the_chain_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(&dir.path().join("s.db"), bounds(1 << 20, None), 0).unwrap();
        db.put("r1", &entry(None, "one"), 0).unwrap();
        db.put("r2", &entry(Some("r1"), "two"), 0).unwrap();
        db.put("r3", &entry(Some("r2"), "three"), 0).unwrap();
        db.remove("r2", 0).unwrap();
        assert_eq!(db.history("r3", 0), Err(HistoryError::Broken("r3".into(), "r2".into())));
        assert_eq!(db.history("nope", 0), Err(HistoryError::NotFound("nope".into())));
    }

    #[test]
    fn entries_expire_by_age_and_are_pruned_on_write_and_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let b = bounds(1 << 20, Some(1_000));
        {
            let mut db = Db::open(&path, b, 0).unwrap();
            db.put("old", &entry(None, "old"), 0).unwrap();
            db.put("new", &entry(Some("old"), "new"), 600).unwrap();
            assert!(db.get("old", 999).unwrap().is_some());
            // Expired entries are not read, though not pruned yet.
            assert!(db.get("old", 1_000).unwrap().is_none());
            assert_eq!(db.len().unwrap(), 2);
            assert_eq!(
                db.history("new", 1_000),
                Err(HistoryError::Broken("new".into(), "old".into()))
            );
            db.put("later", &entry(None, "later"), 1_000).unwrap();
            assert_eq!(db.len().unwrap(), 2); // "old" pruned by the write
        }
        // Reopened later: "new" expired while the file was closed.
        let db = Db::open(&path, b, 1_600).unwrap();
        assert_eq!(db.len().unwrap(), 1);
        assert_eq!(db.bytes().unwrap(), entry(None, "later").bytes("later"));
    }

    #[test]
    fn a_smaller_budget_applies_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let one = entry(None, "aaaa").bytes("a");
        {
            let mut db = Db::open(&path, bounds(1 << 20, None), 0).unwrap();
            for id in ["a", "b", "c", "d"] {
                db.put(id, &entry(None, "aaaa"), 0).unwrap();
            }
        }
        let mut db = Db::open(&path, bounds(2 * one, None), 0).unwrap();
        assert_eq!(db.len().unwrap(), 2);
        assert!(db.get("c", 0).unwrap().is_some() && db.get("d", 0).unwrap().is_some());
    }

    #[test]
    fn two_connections_share_one_budget() {
        // A second server on the same file sees the first one's bytes.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let one = entry(None, "aaaa").bytes("a");
        let mut first = Db::open(&path, bounds(2 * one, None), 0).unwrap();
        let mut second = Db::open(&path, bounds(2 * one, None), 0).unwrap();
        first.put("a", &entry(None, "aaaa"), 0).unwrap();
        second.put("b", &entry(None, "bbbb"), 0).unwrap();
        first.put("c", &entry(None, "cccc"), 0).unwrap();
        assert_eq!(second.len().unwrap(), 2);
        assert!(second.get("a", 0).unwrap().is_none());
        assert_eq!(first.bytes().unwrap(), 2 * one);
    }
}
