//! The compile check of a request's structured output, before any engine sees it.
//!
//! A constraint the engine could not enforce (a JSON Schema keyword llguidance does not
//! implement, `"type": "strnig"`, a regex that does not parse, an undefined grammar rule) is a
//! 400 naming the request field and the keyword, never output that silently ignores it.

use smgpy_protocol::SamplingParams;
use smgpy_structured::Source;

use crate::error::ApiError;

/// `Ok` when the request has no structured output or it compiles (checked off the async
/// threads: a large schema can take a while; results are cached by constraint).
pub async fn check(sampling: &SamplingParams) -> Result<(), ApiError> {
    let Some(s) = &sampling.structured else { return Ok(()) };
    let (key, text) = s.constraint.engine_param();
    let Some(source) = Source::from_key(key, text) else {
        return Ok(());
    };
    let param = s.param.clone();
    let result = tokio::task::spawn_blocking(move || smgpy_structured::check(&source))
        .await
        .map_err(|e| ApiError::Internal(format!("the structured-output check failed: {e}")))?;
    result.map_err(|e| ApiError::bad_request(Some(&param), e.to_string()))
}
