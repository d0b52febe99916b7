//! The persistent store's own thread: it owns the SQLite connection, and handlers send it work
//! and await the answer, so no runtime thread ever waits on the disk. One thread also means
//! one writer, so writes never contend inside the process.

use std::path::Path;
use std::sync::mpsc;
use std::thread;

use tokio::sync::oneshot;

use super::entry::{now_ms, Bounds};
use super::error::StoreError;
use super::sqlite::Db;

type Job = Box<dyn FnOnce(&mut Db) + Send>;

/// A handle on the thread that owns the store file; the thread ends (closing the file) when
/// the last handle is dropped.
pub(crate) struct SqliteStore {
    jobs: mpsc::Sender<Job>,
}

impl SqliteStore {
    /// Open the file on the calling thread (start-up may wait on the disk), then hand it to a
    /// thread of its own.
    pub fn open(path: &Path, bounds: Bounds) -> Result<Self, StoreError> {
        let mut db = Db::open(path, bounds, now_ms())?;
        let (jobs, queue) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("smgpy-response-store".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job(&mut db);
                }
            })
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                detail: format!("cannot start its thread: {e}"),
            })?;
        Ok(Self { jobs })
    }

    /// Run `f` on the store's thread and await its result.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Db) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move |db| {
                let _ = tx.send(f(db));
            }))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)
    }
}
