//! The server's compile check: does a constraint compile at all?
//!
//! A grammar's errors (an unknown JSON Schema keyword, a bad regex, an undefined Lark rule) do
//! not depend on the model's tokens, so the server compiles against a 256-token byte
//! vocabulary it builds once (no slices: masks are never asked of it), before any engine sees
//! the request. The one check that needs the model is whether a Lark grammar's `<|special|>`
//! tokens exist; that is left to the engine.
use std::sync::{Mutex, OnceLock};

use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::ParserFactory;

use crate::cache::Lru;
use crate::vocab::{compile_with, factory};
use crate::{Source, StructuredError};

/// Check results kept (a repeated constraint is checked once).
const CACHED_CHECKS: usize = 256;

/// Bytes the kept check results may weigh (their constraint texts and messages): clients size
/// those texts, so the cache is bounded by bytes as well as entries.
pub const CHECK_CACHE_BYTES: usize = 16 << 20;

/// What one kept check result weighs: its key text, its message and the entry itself.
fn weight(source: &Source, result: &Result<(), StructuredError>) -> usize {
    let message = result.as_ref().err().map_or(0, |e| e.to_string().len());
    source.text().len() + message + 128
}

struct Checker {
    factory: ParserFactory,
    cache: Mutex<Lru<Source, Result<(), StructuredError>>>,
}

fn checker() -> Result<&'static Checker, StructuredError> {
    static CHECKER: OnceLock<Result<Checker, StructuredError>> = OnceLock::new();
    CHECKER
        .get_or_init(|| {
            let mut words: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
            let mut end = vec![TokTrie::SPECIAL_TOKEN_MARKER];
            end.extend_from_slice(b"<|end|>");
            words.push(end);
            let info = TokRxInfo::new(words.len() as u32, 256);
            let trie = TokTrie::from(&info, &words);
            let env: TokEnv = std::sync::Arc::new(ApproximateTokEnv::new(trie));
            Ok(Checker {
                factory: factory(&env, &[])?,
                cache: Mutex::new(Lru::new(CACHED_CHECKS, CHECK_CACHE_BYTES)),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// `Ok` when `source` compiles; otherwise llguidance's reason (naming the keyword, the regex
/// position or the grammar line).
pub fn check(source: &Source) -> Result<(), StructuredError> {
    let checker = checker()?;
    if let Some(r) = checker.cache.lock().ok().and_then(|mut c| c.get(source).cloned()) {
        return r;
    }
    let result = match compile_with(&checker.factory, source) {
        Err(StructuredError::Invalid { message, .. })
            if matches!(source, Source::Grammar(_) | Source::StructuralTag(_))
                && message.contains("unknown special token") =>
        {
            Ok(())
        }
        other => other.map(|_| ()),
    };
    if let Ok(mut c) = checker.cache.lock() {
        c.insert(source.clone(), result.clone(), weight(source, &result));
    }
    result
}

/// The bytes the kept check results weigh now (at most [`CHECK_CACHE_BYTES`]).
pub fn cache_bytes() -> usize {
    checker()
        .ok()
        .and_then(|c| c.cache.lock().ok().map(|c| c.bytes()))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: Source) -> String {
        check(&s).unwrap_err().to_string()
    }

    #[test]
    fn what_is_refused_and_why() {
        assert!(check(&Source::JsonSchema(r#"{"type":"object","properties":{"d":{"type":"string","format":"date","pattern":"^2"},"n":{"minimum":1}}}"#.into())).is_ok());
        assert!(err(Source::JsonSchema(r#"{"type":"array","uniqueItems":true}"#.into())).contains("uniqueItems"));
        assert!(err(Source::JsonSchema(r#"{"type":"strnig"}"#.into())).contains("strnig"));
        assert!(err(Source::JsonSchema("{nope".into())).contains("not valid JSON"));
        assert!(err(Source::Regex("a(b".into())).contains("regular expression"));
        assert!(err(Source::Grammar("start: foo".into())).contains("foo"));
        assert!(check(&Source::Grammar("start: \"a\" | \"b\"".into())).is_ok());
        // Special tokens are the engine's to check.
        assert!(check(&Source::Grammar("start: <|im_end|>".into())).is_ok());
        // Cached: the same answer again.
        assert!(err(Source::JsonSchema(r#"{"type":"strnig"}"#.into())).contains("strnig"));
    }

    #[test]
    fn large_constraints_stay_within_the_byte_budget() {
        let big = "x".repeat(3 << 20);
        for i in 0..12 {
            let schema = format!(r#"{{"type":"string","description":"{i}{big}"}}"#);
            assert!(check(&Source::JsonSchema(schema)).is_ok());
            assert!(cache_bytes() <= CHECK_CACHE_BYTES);
        }
    }
}
