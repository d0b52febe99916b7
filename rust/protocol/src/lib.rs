//! Wire types of the OpenAI and Anthropic HTTP APIs, and the engine-facing request they become.
#![forbid(unsafe_code)]
