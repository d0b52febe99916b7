//! Wire types of the OpenAI and Anthropic HTTP APIs, their validation, and the engine-facing
//! sampling parameters they become. Pure data: no I/O, no async.
#![forbid(unsafe_code)]

pub mod anthropic;
pub mod cache_hints;
pub mod chat;
pub mod common;
pub mod completion;
pub mod embeddings;
pub mod error;
pub mod generate;
pub mod image_urls;
pub mod images;
#[macro_use]
mod request_fields;
pub mod responses;
pub mod sampling;
pub mod structured;

pub use error::{parse_json, ErrorCode, ProtocolError};
pub use sampling::SamplingParams;
