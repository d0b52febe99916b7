//! What can go wrong in the Responses store: a conversation that cannot be read back (the
//! client's to fix) and a store file that cannot be used (the operator's).

/// A conversation could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "previous response `{0}` was not found: it was not stored (`store: false`), was deleted, \
         or has expired or been evicted from the response store"
    )]
    NotFound(String),
    #[error(
        "the conversation of `{0}` is incomplete: the earlier response `{1}` it continues was deleted, \
         or has expired or been evicted from the response store; send the conversation as `input` instead"
    )]
    Broken(String, String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The store's file cannot be used. Messages name the file and what to do about it, since the
/// operator reads them at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the response store `{path}`: {detail}; check that its folder exists and is writable")]
    Open { path: String, detail: String },
    #[error(
        "`{path}` is not a smgpy response store (it is another program's SQLite database); \
         give `--response-store` a new file's path"
    )]
    Foreign { path: String },
    #[error(
        "the response store `{path}` was written by a newer smgpy (schema version {found}, this smgpy \
         reads up to {supported}): upgrade smgpy, or give `--response-store` a new file's path"
    )]
    Newer { path: String, found: i64, supported: i64 },
    #[error(
        "the response store `{path}` is damaged or not a SQLite database ({detail}): move it aside \
         (the server then starts with an empty store) or give `--response-store` another path"
    )]
    Damaged { path: String, detail: String },
    /// A read or write failed while serving (a full disk, an I/O error).
    #[error("the response store `{path}` failed: {detail}")]
    Failed { path: String, detail: String },
    #[error("the response store's thread has stopped")]
    Closed,
}
