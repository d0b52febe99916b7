//! Profiling aid and native benchmark: parse one response many times, complete or streamed,
//! without Python.
//!
//! `cargo run --release -p smgpy-parsers --example parse_loop -- FORMAT FILE [stream] [iterations]`
//! streams FILE in 4-byte pieces (or parses it whole) and prints the rate.
//!
//! `parse_loop chunks FILE.json [iterations]` streams the pieces `{"format": F, "chunks": [..]}`
//! gives, as `benches/tool_parser_python.py` cuts them (markers kept whole, as a tokenizer
//! would), and prints one JSON line: the rate and the calls accumulated from the stream, so the
//! caller can check them against a complete parse.
use smgpy_parsers::tool::{parse_complete, CallDelta, ToolCallParser, ToolDelta, ToolFormat};
use std::time::Instant;
use tool_common::{four_bytes, stream_count};

mod tool_common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.as_slice() {
        [_, mode, file, rest @ ..] if mode == "chunks" => chunks(file, rest.first()),
        [_, format, file, rest @ ..] => whole(format, file, rest),
        _ => {
            Err("usage: parse_loop FORMAT FILE [stream] [iterations] | parse_loop chunks FILE.json [iterations]".into())
        }
    }
}

/// One file, parsed whole or in 4-byte pieces.
fn whole(format: &str, file: &str, rest: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let format: ToolFormat = format.parse()?;
    let text = std::fs::read_to_string(file)?;
    let stream = rest.first().is_some_and(|m| m == "stream");
    let iterations: usize = rest.last().and_then(|n| n.parse().ok()).unwrap_or(200_000);
    let pieces = if stream { four_bytes(&text) } else { Vec::new() };
    let start = Instant::now();
    let mut calls = 0;
    for _ in 0..iterations {
        if stream {
            calls += stream_count(format, &pieces);
        } else {
            calls += parse_complete(&text, format, None).calls.len();
        }
    }
    let per = start.elapsed().as_secs_f64() / iterations as f64;
    println!(
        "{} bytes, {calls} call entries, {:.2} us per response, {:.0} MB/s",
        text.len(),
        per * 1e6,
        text.len() as f64 / per / 1e6
    );
    Ok(())
}

/// Pre-cut pieces from a JSON file, then their text parsed whole; prints a JSON line.
fn chunks(file: &str, iterations: Option<&String>) -> Result<(), Box<dyn std::error::Error>> {
    let spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let format: ToolFormat = spec["format"].as_str().ok_or("no \"format\"")?.parse()?;
    let pieces: Vec<String> = serde_json::from_value(spec["chunks"].clone())?;
    let bytes: usize = pieces.iter().map(String::len).sum();
    let calls = stream_pieces(format, &pieces);
    // Each rate is the best of five rounds of about 0.2 s (unless told how many iterations),
    // the round least disturbed by other work on the machine. Streaming is timed like the
    // criterion bench: each push's result is looked at, not accumulated.
    let iterations = match iterations.and_then(|n| n.parse().ok()) {
        Some(n) => n,
        None => {
            let t = Instant::now();
            for _ in 0..100 {
                stream_count(format, &pieces);
            }
            (20.0 / t.elapsed().as_secs_f64().max(1e-7)).clamp(10.0, 1e6) as usize
        }
    };
    // `PARSE_LOOP_ONLY=plain|reused|complete` times one way only (for `perf record`).
    let only = std::env::var("PARSE_LOOP_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only == name;
    let per = if wanted("plain") {
        best_of(5, iterations, || stream_count(format, std::hint::black_box(&pieces)))
    } else {
        f64::NAN
    };
    // The same stream through `push_into` with one delta reused for every piece (no per-piece
    // allocation of the delta itself), as the Python binding's `feed` does.
    let reused_per = if wanted("reused") {
        best_of(5, iterations, || {
            stream_count_reused(format, std::hint::black_box(&pieces))
        })
    } else {
        f64::NAN
    };
    // The same text parsed whole; a complete parse costs a fraction of a streamed one.
    let text = pieces.concat();
    let whole_per = if wanted("complete") {
        best_of(5, iterations * 8, || {
            parse_complete(std::hint::black_box(&text), format, None).calls.len()
        })
    } else {
        f64::NAN
    };
    let calls: Vec<_> = calls
        .into_iter()
        .map(|(name, arguments)| serde_json::json!({"name": name, "arguments": arguments}))
        .collect();
    let line = serde_json::json!({
        "format": format.name(),
        "bytes": bytes,
        "pieces": pieces.len(),
        "iterations": iterations,
        "us_per_response": per * 1e6,
        "mb_per_s": bytes as f64 / per / 1e6,
        "reused_mb_per_s": bytes as f64 / reused_per / 1e6,
        "complete_mb_per_s": bytes as f64 / whole_per / 1e6,
        "calls": calls,
    });
    println!("{line}");
    Ok(())
}

/// Seconds per call of `f`: the best of `rounds` rounds of `iterations` calls.
fn best_of(rounds: usize, iterations: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(f());
        }
        best = best.min(start.elapsed().as_secs_f64() / iterations as f64);
    }
    best
}

/// Stream `pieces` through a fresh parser; the calls as (name, concatenated arguments).
fn stream_pieces(format: ToolFormat, pieces: &[String]) -> Vec<(String, String)> {
    let mut p = ToolCallParser::new(format, None);
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut take = |d: ToolDelta| {
        for c in d.calls().map(CallDelta::owned) {
            match calls.get_mut(c.index) {
                Some(call) => call.1.push_str(&c.arguments),
                None => calls.push((c.name.unwrap_or_default(), c.arguments)),
            }
        }
    };
    for piece in pieces {
        take(p.push(piece));
    }
    take(p.finish());
    calls
}

/// `stream_count` through `push_into`, clearing (`ToolDelta::clear`) and reusing one delta.
fn stream_count_reused(format: ToolFormat, pieces: &[String]) -> usize {
    let mut p = ToolCallParser::new(format, None);
    let mut d = ToolDelta::default();
    let mut n = 0;
    for piece in pieces {
        d.clear();
        p.push_into(piece, &mut d);
        n += d.normal_text.len() + d.calls().len();
    }
    n + p.finish().calls().len()
}
