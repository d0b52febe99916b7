//! Render one template over one conversation in a loop, for profiling the renderer alone.
//! Usage: `cargo run --release -p smgpy-template --example render_loop -- <template> <conversation.json> [n] [auto|minijinja|fast]`
//! where the JSON file holds `{"messages": [...], "tools": [...]}`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Map, Value};
use smgpy_template::{ChatTemplate, RenderArgs, Renderer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let src = std::fs::read_to_string(&args[1]).unwrap();
    let conv: Value = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let n: usize = args.get(3).map_or(1000, |s| s.parse().unwrap());
    let mut tokens = Map::new();
    tokens.insert("bos_token".into(), Value::String("<s>".into()));
    tokens.insert("eos_token".into(), Value::String("</s>".into()));
    let template = ChatTemplate::new(&src, tokens).unwrap();
    let render_args = RenderArgs {
        messages: conv["messages"].as_array().unwrap().clone(),
        tools: conv["tools"].as_array().cloned(),
        documents: None,
        add_generation_prompt: true,
        continue_final_message: false,
        kwargs: Map::new(),
    };
    let only = args.get(4).map(String::as_str);
    for (label, renderer) in [
        ("auto", Renderer::Auto),
        ("minijinja", Renderer::Minijinja),
        ("fast", Renderer::FastOnly),
    ] {
        if only.is_some_and(|o| o != label) {
            continue;
        }
        if let Err(e) = template.render_with(&render_args, renderer) {
            println!("{label}: {e}");
            continue;
        }
        let start = std::time::Instant::now();
        let mut chars = 0;
        for _ in 0..n {
            chars = template.render_with(&render_args, renderer).unwrap().len();
        }
        let per = start.elapsed().as_secs_f64() / n as f64;
        println!("{label}: {chars} chars, {:.1} us per render", per * 1e6);
    }
}
