//! Every generation route through the one runner (`smgpy_server::wire`): the same engine output,
//! streamed and collected, in each API's shape, and an engine failure inside an open stream
//! rendered the way each API renders it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::http::StatusCode;
use common::Scripted;
use serde_json::{json, Value};

/// Each generation route with a body that asks for the stream or not.
fn routes(stream: bool) -> Vec<(&'static str, Value)> {
    let chat = json!({"messages": [{"role": "user", "content": "hi"}], "stream": stream});
    vec![
        ("/v1/chat/completions", chat),
        ("/v1/completions", json!({"prompt": "hi", "stream": stream})),
        ("/generate", json!({"text": "hi", "stream": stream})),
        (
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": stream}),
        ),
        ("/v1/responses", json!({"input": "hi", "stream": stream})),
    ]
}

fn app(fail_with: Option<&'static str>) -> axum::Router {
    let mut engine = Scripted::new(vec!["Hel", "lo"], 3, 0);
    engine.fail_with = fail_with;
    common::router(engine, common::config()).0
}

/// The `data:` payloads of an SSE body, and the names of its `event:` lines.
fn frames(body: &str) -> (Vec<String>, Vec<String>) {
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_string)
        .collect();
    let events = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .map(str::to_string)
        .collect();
    (data, events)
}

#[tokio::test]
async fn every_route_streams_and_collects_the_same_text() {
    for ((path, streamed), (_, whole)) in routes(true).into_iter().zip(routes(false)) {
        let (status, body) = common::post(app(None), path, whole).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains("Hello"), "{path}: {body}");
        let (status, body) = common::post(app(None), path, streamed).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let (data, _) = frames(&body);
        let text: String = data
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .map(|v| {
                let pieces = [
                    &v["choices"][0]["delta"]["content"],
                    &v["choices"][0]["text"],
                    &v["delta"]["text"],
                    &v["delta"],
                ];
                pieces.iter().filter_map(|p| p.as_str()).collect::<String>()
            })
            .collect();
        if path == "/generate" {
            // sglang repeats the text so far in every chunk.
            assert!(data.iter().any(|d| d.contains("\"text\":\"Hello\"")), "{body}");
        } else {
            assert_eq!(text, "Hello", "{path}: {body}");
        }
    }
}

#[tokio::test]
async fn an_engine_failure_in_an_open_stream_is_rendered_per_api() {
    for (path, body) in routes(true) {
        let (status, body) = common::post(app(Some("the engine failed")), path, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let (data, events) = frames(&body);
        let last_json = data.iter().rev().find(|d| d.starts_with('{')).unwrap();
        match path {
            // OpenAI's shape, then the stream's end as usual.
            "/v1/chat/completions" | "/v1/completions" => {
                assert_eq!(data.last().unwrap(), "[DONE]", "{body}");
                let e: Value = serde_json::from_str(last_json).unwrap();
                assert_eq!(e["error"]["message"], "the engine failed", "{body}");
            }
            // sglang: the error is the last frame, no `[DONE]`.
            "/generate" => {
                let e: Value = serde_json::from_str(data.last().unwrap()).unwrap();
                assert_eq!(e["error"]["message"], "the engine failed", "{body}");
            }
            "/v1/messages" => {
                assert_eq!(events.last().unwrap(), "error", "{body}");
                let e: Value = serde_json::from_str(last_json).unwrap();
                assert_eq!(e["type"], "error");
                assert_eq!(e["error"]["message"], "the engine failed", "{body}");
                assert!(!events.contains(&"message_stop".to_string()), "{body}");
            }
            "/v1/responses" => {
                assert_eq!(events[events.len() - 2..], ["error", "response.failed"], "{body}");
                let r: Value = serde_json::from_str(last_json).unwrap();
                assert_eq!(r["response"]["status"], "failed");
                assert_eq!(r["response"]["output"][0]["content"][0]["text"], "Hello", "{body}");
                let seq: Vec<u64> = data
                    .iter()
                    .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                    .map(|v| v["sequence_number"].as_u64().unwrap())
                    .collect();
                assert!(seq.windows(2).all(|w| w[1] == w[0] + 1), "{seq:?}");
            }
            _ => unreachable!(),
        }
    }
}
