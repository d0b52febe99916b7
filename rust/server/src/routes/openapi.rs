//! `GET /openapi.json`: a hand-written OpenAPI 3.1 document of every route. Request schemas
//! list the main fields and allow extra ones (the server ignores unknown fields). A test checks
//! that every route registered in `router()` appears here, so the document cannot drift.

use axum::Json;
use serde_json::{json, Map, Value};

pub async fn openapi() -> Json<Value> {
    Json(document())
}

fn obj(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "required": required, "properties": props, "additionalProperties": true})
}

fn body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

/// A JSON (and, for streams, SSE) 200 plus the error answers every inference route can give.
fn answers(ok: &str, streams: bool, error: &str) -> Value {
    let mut ok_content = Map::new();
    ok_content.insert("application/json".into(), json!({"schema": {"type": "object"}}));
    if streams {
        ok_content.insert("text/event-stream".into(), json!({"schema": {"type": "string"}}));
    }
    let err = json!({"$ref": format!("#/components/responses/{error}")});
    json!({
        "200": {"description": ok, "content": Value::Object(ok_content)},
        "400": err, "401": err, "413": err, "500": err, "503": err, "504": err,
    })
}

fn post(summary: &str, tag: &str, schema: Value, ok: &str, streams: bool, error: &str) -> Value {
    json!({"post": {"summary": summary, "tags": [tag], "requestBody": body(schema), "responses": answers(ok, streams, error)}})
}

fn get(summary: &str, tag: &str, ok: &str, content_type: &str) -> Value {
    json!({"get": {"summary": summary, "tags": [tag], "responses": {
        "200": {"description": ok, "content": {content_type: {"schema": if content_type == "application/json" { json!({"type": "object"}) } else { json!({"type": "string"}) }}}},
        "401": {"$ref": "#/components/responses/OpenAIError"},
    }}})
}

fn messages_schema(need_max_tokens: bool) -> Value {
    let required: &[&str] = if need_max_tokens {
        &["max_tokens", "messages"]
    } else {
        &["messages"]
    };
    obj(
        required,
        json!({
            "model": {"type": "string"},
            "max_tokens": {"type": "integer", "minimum": 1},
            "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
            "system": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
            "stop_sequences": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "stream": {"type": "boolean"},
            "temperature": {"type": "number", "minimum": 0, "maximum": 1},
            "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "top_k": {"type": "integer"},
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {"type": "object"},
            "thinking": {"type": "object"},
        }),
    )
}

fn sampling_props() -> Value {
    json!({
        "temperature": {"type": "number", "minimum": 0},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "stop": {"oneOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string", "minLength": 1}}]},
        "seed": {"type": "integer"},
        "n": {"type": "integer", "minimum": 1, "maximum": 128},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

/// The whole document.
pub fn document() -> Value {
    let chat = obj(
        &["messages"],
        with(
            sampling_props(),
            json!({
                "model": {"type": "string"},
                "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role"]}},
                "max_tokens": {"type": "integer", "minimum": 1},
                "max_completion_tokens": {"type": "integer", "minimum": 1},
                "logprobs": {"type": "boolean"},
                "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                "tools": {"type": "array", "items": {"type": "object"}},
                "tool_choice": {"oneOf": [{"type": "string", "enum": ["none", "auto", "required"]}, {"type": "object"}]},
                "response_format": {"type": "object"},
                "chat_template_kwargs": {"type": "object"},
                "documents": {"type": "array", "items": {"type": "object"}, "description": "documents for retrieval-augmented chat templates (Cohere, Granite)"},
                "reasoning_effort": {"type": "string"},
            }),
        ),
    );
    let completions = obj(
        &["prompt"],
        with(
            sampling_props(),
            json!({
                "model": {"type": "string"},
                "prompt": {"oneOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                    {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}},
                ]},
                "max_tokens": {"type": "integer", "minimum": 1},
                "echo": {"type": "boolean"},
                "logprobs": {"type": "integer", "minimum": 0, "maximum": 5},
                "best_of": {"type": "integer", "minimum": 1, "description": "Must equal `n` or be 1."},
                "suffix": {"type": "string", "maxLength": 0, "description": "Not supported: a non-empty suffix is a 400."},
            }),
        ),
    );
    let responses = obj(
        &["input"],
        json!({
            "model": {"type": "string"},
            "input": {"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "object"}}]},
            "instructions": {"type": "string"},
            "tools": {"type": "array", "items": {"type": "object", "required": ["type"]}},
            "tool_choice": {"oneOf": [{"type": "string", "enum": ["none", "auto", "required"]}, {"type": "object"}]},
            "max_output_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0},
            "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "stream": {"type": "boolean"},
            "store": {"type": "boolean"},
            "previous_response_id": {"type": "string"},
            "reasoning": {"type": "object"},
        }),
    );
    let generate = obj(
        &[],
        json!({
            "text": {"type": "string"},
            "input_ids": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
            "sampling_params": {"type": "object"},
            "stream": {"type": "boolean"},
            "return_logprob": {"type": "boolean"},
            "rid": {"type": "string"},
        }),
    );
    let embeddings = obj(
        &["input"],
        json!({
            "model": {"type": "string"},
            "input": {"oneOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}},
                {"type": "array", "items": {"type": "integer", "minimum": 0}},
                {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
            ]},
            "encoding_format": {"enum": ["float", "base64"]},
            "dimensions": {"type": "integer", "minimum": 1},
            "user": {"type": "string"},
        }),
    );
    let tokenize = obj(
        &[],
        json!({"prompt": {"type": "string"}, "messages": {"type": "array", "items": {"type": "object"}}}),
    );
    let detokenize = obj(
        &["tokens"],
        json!({"tokens": {"type": "array", "items": {"type": "integer", "minimum": 0}}}),
    );
    let id_param = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let stored = json!({
        "200": {"description": "The stored response.", "content": {"application/json": {"schema": {"type": "object"}}}},
        "401": {"$ref": "#/components/responses/OpenAIError"},
        "404": {"$ref": "#/components/responses/OpenAIError"},
    });
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "smgpy",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "OpenAI- and Anthropic-compatible serving of a Python LLM engine.",
        },
        "security": [{"bearer": []}, {"x_api_key": []}],
        "paths": {
            "/health": {"get": {"summary": "Readiness: 503 while draining or while the engine's loop is stalled (never needs an API key).",
                "tags": ["server"], "security": [],
                "responses": {
                    "200": {"description": "Ready", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "503": {"description": "Not ready (draining, engine stalled)", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/live": {"get": {"summary": "Liveness: 200 while the HTTP server answers (never needs an API key).", "tags": ["server"], "security": [],
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/metrics": get("Prometheus metrics.", "server", "Prometheus text format.", "text/plain"),
            "/v1/models": get("The served model.", "openai", "Model list.", "application/json"),
            "/v1/models/{id}": {"parameters": id_param, "get": {"summary": "The served model, by name (404 for any other).", "tags": ["openai"],
                "responses": {"200": {"description": "The model.", "content": {"application/json": {"schema": {"type": "object"}}}},
                              "404": {"$ref": "#/components/responses/OpenAIError"}}}},
            "/v1/loads": get("Running/waiting requests and token usage (SMG router shape).", "server", "Loads.", "application/json"),
            "/server_info": get("Server facts a router reads (SGLang shape).", "server", "Server info.", "application/json"),
            "/get_server_info": get("Older name of /server_info.", "server", "Server info.", "application/json"),
            "/model_info": get("Model facts a router reads (SGLang shape).", "server", "Model info.", "application/json"),
            "/get_model_info": get("Older name of /model_info.", "server", "Model info.", "application/json"),
            "/health_generate": get("One-token generation probe: 200 when the engine answers, 503 otherwise.", "server", "Healthy.", "application/json"),
            "/flush_cache": {
                "get": {"summary": "Drop the engine's prefix cache.", "tags": ["server"], "responses": {"200": {"description": "Flushed (or nothing to flush)."}}},
                "post": {"summary": "Drop the engine's prefix cache.", "tags": ["server"], "responses": {"200": {"description": "Flushed (or nothing to flush)."}}},
            },
            "/openapi.json": get("This document.", "server", "OpenAPI document.", "application/json"),
            "/v1/chat/completions": post("Chat completion.", "openai", chat, "A chat completion (or SSE chunks).", true, "OpenAIError"),
            "/v1/completions": post("Text completion.", "openai", completions, "A text completion (or SSE chunks).", true, "OpenAIError"),
            "/v1/embeddings": post("Embeddings of texts or token ids.", "openai", embeddings, "A list of embeddings.", false, "OpenAIError"),
            "/v1/responses": post("OpenAI Responses API.", "openai", responses, "A response (or SSE events).", true, "OpenAIError"),
            "/v1/responses/{id}": {
                "parameters": id_param,
                "get": {"summary": "A stored response.", "tags": ["openai"], "responses": stored},
                "delete": {"summary": "Delete a stored response.", "tags": ["openai"], "responses": stored},
            },
            "/v1/responses/{id}/input_items": {
                "parameters": id_param,
                "get": {"summary": "The input items of a stored response (paginated: after, limit, order).", "tags": ["openai"], "responses": stored},
            },
            "/v1/messages": post("Anthropic Messages.", "anthropic", messages_schema(true), "A message (or SSE events).", true, "AnthropicError"),
            "/v1/messages/count_tokens": post("Count prompt tokens (needs the engine's tokenizer).", "anthropic", messages_schema(false), "`{\"input_tokens\": n}`.", false, "AnthropicError"),
            "/generate": post("sglang-native generation.", "native", generate, "`text` and `meta_info` (or SSE chunks).", true, "OpenAIError"),
            "/v1/tokenize": post("Token ids of a prompt (needs the engine's tokenizer).", "native", tokenize, "`tokens`, `count`, `max_model_len`.", false, "OpenAIError"),
            "/v1/detokenize": post("Text of token ids (needs the engine's tokenizer).", "native", detokenize, "`prompt`.", false, "OpenAIError"),
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "x_api_key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
            "schemas": {
                "OpenAIError": obj(&["error"], json!({"error": obj(&["message", "type"], json!({
                    "message": {"type": "string"}, "type": {"type": "string"},
                    "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]},
                }))})),
                "AnthropicError": obj(&["type", "error"], json!({"type": {"const": "error"}, "error": obj(&["type", "message"], json!({
                    "type": {"type": "string"}, "message": {"type": "string"},
                }))})),
            },
            "responses": {
                "OpenAIError": {"description": "An error in OpenAI's shape.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}},
                "AnthropicError": {"description": "An error in Anthropic's shape.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AnthropicError"}}}},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(METHOD, path)` of every `.route(...)` in `router()`, read from its source.
    fn registered_routes() -> Vec<(String, String)> {
        let src = include_str!("../lib.rs");
        let mut out = Vec::new();
        for chunk in src.split(".route(").skip(1) {
            let Some(chunk) = chunk.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some((path, rest)) = chunk.split_once('"') else {
                continue;
            };
            let call = rest.split(".route(").next().unwrap_or_default();
            for method in ["get", "post", "delete"] {
                if call.contains(&format!(" {method}(")) || call.contains(&format!(".{method}(")) {
                    out.push((method.to_string(), path.to_string()));
                }
            }
        }
        out
    }

    #[test]
    fn every_route_is_documented() {
        let doc = document();
        let routes = registered_routes();
        assert!(routes.len() >= 15, "{routes:?}");
        for (method, path) in routes {
            assert!(
                doc["paths"][&path][&method].is_object(),
                "{method} {path} is missing from /openapi.json"
            );
        }
    }
}
