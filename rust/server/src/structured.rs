//! A request's structured output, compiled before any engine sees the request.
//!
//! A constraint the engine could not enforce (a JSON Schema keyword llguidance does not
//! implement, `"type": "strnig"`, a regex that does not parse, an undefined grammar rule) is a
//! 400 naming the request field and the keyword, never output that silently ignores it.
//!
//! When the engine declared its vocabulary ([`ServerConfig::vocabulary`]) the constraint is
//! compiled here against the model's own tokens, once, and the result travels with the
//! request: the engine starts its matchers from it and compiles nothing. Otherwise the
//! constraint is only checked against a small byte vocabulary and the engine compiles it.

use std::sync::Arc;

use smgpy_structured::{Grammar, Source, StructuredError, Vocabulary};

use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::state::ServerConfig;

/// Compile (or check) `request`'s constraint off the async threads (a large schema can take a
/// while; results are cached by constraint) and attach the compiled grammar to it; `Ok` at
/// once when it has none.
pub async fn compile(config: &ServerConfig, request: &mut GenerateRequest) -> Result<(), ApiError> {
    let Some(s) = &request.sampling.structured else {
        return Ok(());
    };
    let (key, text) = s.constraint.engine_param();
    let Some(source) = Source::from_key(key, text) else {
        return Ok(());
    };
    let param = s.param.clone();
    let vocabulary = config.vocabulary.clone();
    let result = tokio::task::spawn_blocking(move || compile_blocking(vocabulary, &source))
        .await
        .map_err(|e| ApiError::Internal(format!("the structured-output compile failed: {e}")))?;
    request.grammar = result.map_err(|e| ApiError::bad_request(Some(&param), e.to_string()))?;
    Ok(())
}

fn compile_blocking(vocabulary: Option<Arc<Vocabulary>>, source: &Source) -> Result<Option<Grammar>, StructuredError> {
    match vocabulary {
        Some(v) => v.compile(source).map(Some),
        None => smgpy_structured::check(source).map(|()| None),
    }
}
