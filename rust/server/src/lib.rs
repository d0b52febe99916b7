//! The HTTP surface of smgpy (axum): OpenAI chat/completions/responses, Anthropic messages, SSE.
//!
//! The server owns the [`engine::Engine`] trait; `rust/py` implements it for Python engines and
//! tests implement it with scripted fakes, so every route is testable without Python.
#![forbid(unsafe_code)]

pub mod blocks;
pub mod driver;
pub mod engine;
pub mod error;
pub mod extract;
pub mod health;
pub mod layers;
pub mod listen;
pub mod literal;
pub mod logging;
pub mod metrics;
pub mod offload;
pub mod pipeline;
pub mod prompt;
pub mod routes;
pub mod sse;
pub mod state;
pub mod structured;
pub mod wire;
pub mod wire_errors;

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;

pub use engine::{
    EmbedRequest, Embeddings, Engine, EngineError, EngineEvent, EngineOutput, EngineStream, GenerateRequest,
};
pub use error::ApiError;
pub use state::{AppState, ServerConfig};

/// All routes, with body limit, auth and CORS layers.
pub fn router(state: AppState) -> Router {
    let limit = state.config().max_body_bytes;
    let app = Router::new()
        .route("/health", get(routes::info::health))
        .route("/live", get(routes::info::live))
        .route("/v1/models", get(routes::info::models))
        .route("/v1/models/{id}", get(routes::info::model))
        .route("/metrics", get(routes::info::metrics))
        .route("/v1/chat/completions", post(routes::chat::chat_completions))
        .route("/v1/completions", post(routes::completions::completions))
        .route("/v1/embeddings", post(routes::embeddings::embeddings))
        .route("/v1/messages", post(routes::messages::messages))
        .route("/v1/messages/count_tokens", post(routes::messages::count_tokens))
        .route("/v1/responses", post(routes::responses::create))
        .route(
            "/v1/responses/{id}",
            get(routes::responses::get).delete(routes::responses::delete),
        )
        .route("/v1/responses/{id}/input_items", get(routes::responses::input_items))
        .route("/generate", post(routes::generate::generate))
        .route("/v1/loads", get(routes::loads::loads))
        .route("/server_info", get(routes::worker::server_info))
        .route("/get_server_info", get(routes::worker::server_info))
        .route("/model_info", get(routes::worker::model_info))
        .route("/get_model_info", get(routes::worker::model_info))
        .route("/health_generate", get(routes::worker::health_generate))
        .route(
            "/flush_cache",
            post(routes::worker::flush_cache).get(routes::worker::flush_cache),
        )
        .route("/openapi.json", get(routes::openapi::openapi))
        .route("/v1/tokenize", post(routes::tokenize::tokenize))
        .route("/v1/detokenize", post(routes::tokenize::detokenize))
        .fallback(routes::info::not_found)
        .method_not_allowed_fallback(routes::info::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            offload::offload_heavy,
        ))
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            layers::require_api_key,
        ));
    // CORS sits outside auth so browsers' preflight requests get their answer without a key.
    let app = match layers::cors(&state.config().allowed_origins) {
        Some(cors) => app.layer(cors),
        None => app,
    };
    app.layer(axum::middleware::from_fn(layers::access_log))
        .with_state(state)
}

/// Bind `addr` (port 0 picks a free port). Returns the listener and its real address.
pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Serve until `shutdown` resolves, then drain: see [`listen`] for the limits and the sequence.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    listen::serve(listener, state, shutdown).await
}
