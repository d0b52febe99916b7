//! Render a template string given on the command line with JSON variables (a debugging aid).
//! Usage: `cargo run -p smgpy-template --example probe -- '<template>' '<messages json>'`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = smgpy_template::ChatTemplate::new(&args[1], serde_json::Map::new()).unwrap();
    let messages: Vec<serde_json::Value> = serde_json::from_str(args.get(2).map_or("[]", String::as_str)).unwrap();
    let out = t.render(&smgpy_template::RenderArgs {
        messages,
        ..Default::default()
    });
    println!("{out:?}");
}
