//! Compare renders against reference outputs recorded from transformers.
//! Usage: `cargo run -p smgpy-template --example differential -- <fixtures dir> <expected.json> [filter]`
//! where expected.json maps `template path -> conversation name -> {"ok": text} | {"err": message}`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Map, Value};
use smgpy_template::{ChatTemplate, DateTime, RenderArgs};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = std::path::Path::new(&args[1]);
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let filter = args.get(3).cloned().unwrap_or_default();
    let convs: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("conversations.json")).unwrap()).unwrap();
    let mut tokens = Map::new();
    for (k, v) in [
        ("bos_token", "<s>"),
        ("eos_token", "</s>"),
        ("unk_token", "<unk>"),
        ("pad_token", "<pad>"),
    ] {
        tokens.insert(k.into(), Value::String(v.into()));
    }
    let now = DateTime::FIXTURE;
    let (mut same, mut total, mut ok_total) = (0, 0, 0);
    for (tpl, results) in expected.as_object().unwrap() {
        if !tpl.contains(&filter) {
            continue;
        }
        let src = std::fs::read_to_string(root.join("chat_templates").join(tpl)).unwrap();
        let compiled = ChatTemplate::new(&src, tokens.clone()).and_then(|t| t.with_now(now));
        for conv in &convs {
            let name = conv["name"].as_str().unwrap();
            let exp = &results[name];
            total += 1;
            let got = compiled.as_ref().map_err(|e| e.to_string()).and_then(|t| {
                t.render(&RenderArgs {
                    messages: conv["messages"].as_array().unwrap().clone(),
                    tools: conv["tools"].as_array().cloned(),
                    documents: None,
                    add_generation_prompt: conv["add_generation_prompt"].as_bool().unwrap(),
                    continue_final_message: false,
                    kwargs: conv["kwargs"].as_object().unwrap().clone(),
                })
                .map_err(|e| e.to_string())
            });
            if exp.get("ok").is_some() {
                ok_total += 1;
            }
            match (exp.get("ok").and_then(Value::as_str), &got) {
                (Some(e), Ok(g)) if e == g => same += 1,
                (None, Err(_)) => same += 1,
                (Some(e), Ok(g)) => {
                    let pos = e
                        .bytes()
                        .zip(g.bytes())
                        .position(|(a, b)| a != b)
                        .unwrap_or(e.len().min(g.len()));
                    let lo = pos.saturating_sub(60);
                    let cut = |s: &str| {
                        s.get(lo..(pos + 60).min(s.len()))
                            .unwrap_or("<non-boundary>")
                            .to_string()
                    };
                    println!(
                        "DIFF {tpl} / {name} at {pos}:\n  exp: {:?}\n  got: {:?}",
                        cut(e),
                        cut(g)
                    );
                }
                (Some(_), Err(err)) => println!("ERR  {tpl} / {name}: we raised: {err}"),
                (None, Ok(_)) => println!("NOERR {tpl} / {name}: transformers raised {}", exp["err"]),
            }
        }
    }
    println!("identical {same}/{total} (transformers renders {ok_total})");
}
