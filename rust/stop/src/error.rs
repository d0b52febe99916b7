//! The one error type of this crate: reasons a list of stop strings is rejected.

/// Errors raised when building a stop set or matcher.
///
/// Every variant carries the data the caller needs to fix the request (which stop string, how
/// long, what the limit is), so the server can turn it into a 400 with an actionable message.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum StopError {
    /// An empty stop string would match everywhere.
    #[error("stop string #{index} is empty: every stop string must contain at least one character")]
    EmptyStop { index: usize },
    /// Too many stop strings: the limit bounds automaton size and per-request build time.
    #[error("{count} stop strings given, at most {max} are allowed: remove some stop strings")]
    TooMany { count: usize, max: usize },
    /// One stop string is too long: the limit bounds how much text a matcher may hold back.
    #[error("stop string #{index} is {len} bytes long, at most {max} bytes are allowed: shorten it")]
    TooLong { index: usize, len: usize, max: usize },
}
