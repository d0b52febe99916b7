//! The fast renderer against minijinja on every shared fixture template and conversation.
//!
//! `ChatTemplate::render` tries the fast renderer first and hands the input to minijinja when the fast
//! renderer does not implement something. Whenever the fast renderer completes, its output must equal
//! minijinja's byte for byte (and minijinja must not have failed on that input). The Python differential
//! test then checks the combined renderer against transformers.

use serde_json::{json, Map, Value};
use smgpy_template::{ChatTemplate, DateTime, RenderArgs, Renderer, FAST_PATH_NOT_TAKEN};
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    if root.join("conversations.json").is_file() {
        return Some(root);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "shared fixtures missing at {}",
        root.display()
    );
    eprintln!("skipped: shared fixtures not found at {}", root.display());
    None
}

fn templates(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            templates(&path, out);
        } else if path.extension().is_some_and(|e| e == "jinja") {
            out.push(path);
        }
    }
}

fn tokens() -> Map<String, Value> {
    let v = json!({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"});
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn fast_renders_equal_minijinja_on_every_fixture() {
    let Some(root) = fixtures() else { return };
    let conversations: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("conversations.json")).unwrap()).unwrap();
    let mut paths = Vec::new();
    templates(&root.join("chat_templates"), &mut paths);
    paths.sort();
    let now = DateTime {
        year: 2025,
        month: 1,
        day: 15,
        hour: 10,
        minute: 30,
        second: 0,
    };
    let (mut compiled, mut fast, mut handed_over, mut pairs) = (0, 0, 0, 0);
    let mut not_compiled = Vec::new();
    for path in &paths {
        let source = std::fs::read_to_string(path).unwrap();
        let Ok(template) = ChatTemplate::new(&source, tokens()).and_then(|t| t.with_now(now)) else {
            continue;
        };
        if template.has_fast_path() {
            compiled += 1;
        } else {
            not_compiled.push(path.file_name().unwrap().to_string_lossy().to_string());
        }
        for conv in &conversations {
            pairs += 1;
            let args = RenderArgs {
                messages: conv["messages"].as_array().cloned().unwrap_or_default(),
                tools: conv["tools"].as_array().cloned(),
                add_generation_prompt: conv["add_generation_prompt"].as_bool().unwrap_or(false),
                kwargs: conv["kwargs"].as_object().cloned().unwrap_or_default(),
                ..RenderArgs::default()
            };
            let reference = template
                .render_with(&args, Renderer::Minijinja)
                .map_err(|e| e.to_string());
            let got = template
                .render_with(&args, Renderer::FastOnly)
                .map_err(|e| e.to_string());
            match got {
                Ok(text) => {
                    fast += 1;
                    assert_eq!(
                        Ok(&text),
                        reference.as_ref(),
                        "{} x {}: fast renderer differs from minijinja",
                        path.display(),
                        conv["name"]
                    );
                }
                Err(e) => {
                    assert!(e.contains(FAST_PATH_NOT_TAKEN), "{e}");
                    handed_over += 1;
                }
            }
            // What `render` returns is always minijinja's result.
            let auto = template.render(&args).map_err(|e| e.to_string());
            assert_eq!(auto, reference, "{} x {}", path.display(), conv["name"]);
        }
    }
    eprintln!(
        "fast renderer: {compiled}/{} templates compiled; {fast} of {pairs} renders fast, {handed_over} handed to minijinja; not compiled: {not_compiled:?}",
        paths.len()
    );
    assert!(
        compiled * 2 > paths.len(),
        "fewer than half the fixture templates compile for the fast renderer"
    );
}
