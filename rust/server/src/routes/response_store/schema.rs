//! The SQLite file of the persistent Responses store: opening it, recognising it, creating it.
//!
//! A file is ours when its header carries smgpy's `application_id`; its `user_version` is the
//! schema version. Anything else is refused at start-up with a message naming the file, never
//! written to: another program's database (`Foreign`), a newer smgpy's store (`Newer`), a file
//! that is not SQLite or fails SQLite's `quick_check` (`Damaged`). An empty or new file becomes
//! a store.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::error::StoreError;

/// "smgR" in the header's `application_id`: tells our store from other SQLite files.
pub(crate) const APPLICATION_ID: i64 = 0x736d_6752;
/// The schema this code reads and writes.
pub(crate) const VERSION: i64 = 1;

/// Version 1. Each row holds one response as JSON text. `used` orders eviction (least recently
/// used first) and `created_ms` the age bound. `totals` keeps the byte sum and the use clock,
/// kept exact by triggers, so every connection to the file sees the same budget.
const CREATE_V1: &str = "
CREATE TABLE responses (
    id          TEXT PRIMARY KEY NOT NULL,
    parent      TEXT,
    created_ms  INTEGER NOT NULL,
    used        INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    response    TEXT NOT NULL,
    turn        TEXT NOT NULL,
    input_items TEXT NOT NULL
);
CREATE INDEX responses_by_use ON responses(used);
CREATE INDEX responses_by_age ON responses(created_ms);
CREATE TABLE totals (
    one   INTEGER PRIMARY KEY CHECK (one = 1),
    bytes INTEGER NOT NULL,
    tick  INTEGER NOT NULL
);
INSERT INTO totals VALUES (1, 0, 0);
CREATE TRIGGER responses_added AFTER INSERT ON responses
    BEGIN UPDATE totals SET bytes = bytes + NEW.bytes; END;
CREATE TRIGGER responses_removed AFTER DELETE ON responses
    BEGIN UPDATE totals SET bytes = bytes - OLD.bytes; END;
";

/// How long a write waits for another connection's write to finish (e.g. a second server
/// process on the same file) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Open the store at `path`, creating it when the file is new or empty.
pub(crate) fn open(path: &Path) -> Result<Connection, StoreError> {
    let shown = path.display().to_string();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| opening(&shown, e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| opening(&shown, e))?;
    let pragma = |name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    // The first read of the header: a file that is not SQLite fails here.
    let app = pragma("application_id").map_err(|e| opening(&shown, e))?;
    let version = pragma("user_version").map_err(|e| opening(&shown, e))?;
    if app == 0 && version == 0 {
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| opening(&shown, e))?;
        if objects > 0 {
            return Err(StoreError::Foreign { path: shown });
        }
        set_modes(&conn, &shown)?;
        create(&conn).map_err(|e| opening(&shown, e))?;
    } else if app != APPLICATION_ID {
        return Err(StoreError::Foreign { path: shown });
    } else if version > VERSION {
        return Err(StoreError::Newer {
            path: shown,
            found: version,
            supported: VERSION,
        });
    } else if version < VERSION {
        // No older schema has been released: a store of ours without one is damaged.
        return Err(StoreError::Damaged {
            path: shown,
            detail: format!("unknown schema version {version}"),
        });
    } else {
        set_modes(&conn, &shown)?;
    }
    check(&conn, &shown)?;
    Ok(conn)
}

/// WAL (readers never wait for the writer; a crash loses no committed write) with
/// `synchronous = NORMAL` (no fsync per commit: a power cut may lose the last writes, never the
/// file's consistency).
fn set_modes(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| opening(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            path,
            mode,
            "the response store cannot use WAL here; it runs in this mode instead"
        );
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL")
        .map_err(|e| opening(path, e))
}

fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {CREATE_V1} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {VERSION}; COMMIT;"
    ))
}

/// SQLite's own consistency check, and the tables this version needs.
fn check(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let verdict: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| opening(path, e))?;
    if verdict != "ok" {
        return Err(StoreError::Damaged {
            path: path.to_string(),
            detail: verdict,
        });
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('responses', 'totals')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| opening(path, e))?;
    if tables != 2 {
        return Err(StoreError::Damaged {
            path: path.to_string(),
            detail: "its tables are missing".into(),
        });
    }
    Ok(())
}

/// A failure while opening: a file SQLite cannot read as a database is `Damaged`, anything else
/// (permissions, a missing folder, a lock) `Open`.
fn opening(path: &str, e: rusqlite::Error) -> StoreError {
    let detail = e.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Damaged {
            path: path.to_string(),
            detail,
        },
        _ => StoreError::Open {
            path: path.to_string(),
            detail,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path named `name` in a fresh folder (kept while the returned guard lives).
    fn scratch(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        (dir, path)
    }

    /// Make a store at `path` and change it with `sql` behind its back.
    fn alter(path: &Path, sql: &str) {
        open(path).unwrap().execute_batch(sql).unwrap();
    }

    #[test]
    fn a_new_file_becomes_a_store_in_wal_mode() {
        let (dir, path) = scratch("new.db");
        let conn = open(&path).unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
        drop(conn);
        open(&path).unwrap();
        // An empty file (e.g. made by `touch`) is new too.
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        open(&empty).unwrap();
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
        let (_dir, path) = scratch("junk.db");
        let junk = b"this is not a database, just some text that is long enough to be a header ".repeat(20);
        std::fs::write(&path, &junk).unwrap();
        let err = open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains("junk.db") && message.contains("move it aside"),
            "{message}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), junk);
    }

    #[test]
    fn another_programs_database_is_refused_and_left_alone() {
        let (_dir, path) = scratch("other.db");
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        drop(other);
        let err = open(&path).unwrap_err();
        assert_eq!(
            err,
            StoreError::Foreign {
                path: path.display().to_string()
            }
        );
        let other = Connection::open(&path).unwrap();
        let x: i64 = other.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 1);
        let mode: String = other.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete");
        // The same with another program's application id.
        other.execute_batch("PRAGMA application_id = 42").unwrap();
        drop(other);
        assert!(matches!(open(&path), Err(StoreError::Foreign { .. })));
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let (_dir, path) = scratch("newer.db");
        alter(&path, &format!("PRAGMA user_version = {}", VERSION + 1));
        let err = open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::Newer { found, .. } if found == VERSION + 1),
            "{err:?}"
        );
        assert!(err.to_string().contains("upgrade smgpy"));
    }

    #[test]
    fn a_store_missing_its_tables_is_damaged() {
        let (_dir, path) = scratch("s.db");
        alter(&path, "DROP TABLE totals");
        assert!(matches!(open(&path), Err(StoreError::Damaged { .. })));
    }

    #[test]
    fn a_missing_folder_is_an_open_error_naming_the_path() {
        let (_dir, path) = scratch("no/such/folder/s.db");
        let err = open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
        assert!(err.to_string().contains("no/such/folder/s.db"));
    }
}
