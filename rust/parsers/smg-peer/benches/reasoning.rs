//! Reasoning parser throughput: smgpy vs SMG's `reasoning-parser` crate (crates.io 1.10.0) on the
//! same corpus, complete and streamed in ~4-byte chunks. A naive baseline (`str::find` on the
//! close marker, complete only) sits in the same group. Results go in benches/README.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reasoning_parser::{ParserFactory, ReasoningParser as SmgParser};
use smgpy_parsers::reasoning::{parse_complete, ReasoningFormat, ReasoningOptions, ReasoningParser};
use std::hint::black_box;

/// (smgpy name, SMG name, opening, closing, answer suffix). The opening is empty for formats whose
/// prompt implies it.
const CASES: &[(&str, &str, &str, &str, &str)] = &[
    ("qwen3", "qwen3", "<think>\n", "\n</think>\n\n", ""),
    ("deepseek_r1", "deepseek_r1", "", "\n</think>\n\n", ""),
    ("glm45", "glm45", "<think>", "</think>", ""),
    ("step3", "step3", "", "\n</think>\n\n", ""),
    ("minimax_m2", "minimax", "", "\n</think>\n\n", ""),
    ("nemotron_v3", "nano_v3", "<think>\n", "\n</think>\n\n", ""),
    ("kimi", "kimi", "◁think▷", "◁/think▷", ""),
    (
        "cohere_command3",
        "cohere_cmd",
        "<|START_THINKING|>",
        "<|END_THINKING|><|START_RESPONSE|>",
        "<|END_RESPONSE|>",
    ),
    ("gemma4", "gemma4", "<|channel>thought\n", "<channel|>", ""),
    (
        "kimi_k3",
        "kimi_k3",
        "<|open|>think<|sep|>",
        "<|close|>think<|sep|><|open|>response<|sep|>",
        "<|close|>response<|sep|>",
    ),
    ("minimax_m3", "minimax_m3", "<mm:think>", "</mm:think>", ""),
];

/// A realistic response: ~6 KB of reasoning (with `<` and multibyte text that exercise the
/// hold-back path) and ~2 KB of answer.
fn corpus(open: &str, close: &str, suffix: &str) -> String {
    let reasoning = "Let me think about this step by step. If x < 10 and y > 3, then the sum is bounded; \
                     the user wrote 計算 (calculation) and asked for <b>bold</b> output. ";
    let answer = "The answer is 42. Here is why: each term is positive, so the series converges — done. ";
    let mut s = String::from(open);
    while s.len() < 6000 {
        s.push_str(reasoning);
    }
    s.push_str(close);
    let start = s.len();
    while s.len() - start < 2000 {
        s.push_str(answer);
    }
    s.push_str(suffix);
    s
}

/// ~4-byte chunks on char boundaries, like detokenized deltas.
fn chunk(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + 4).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn smg_stream(p: &mut dyn SmgParser, chunks: &[&str]) -> (usize, usize) {
    let (mut r, mut c) = (0, 0);
    for ch in chunks {
        let d = p.parse_reasoning_streaming_incremental(ch).unwrap();
        r += d.reasoning_text.len();
        c += d.normal_text.len();
    }
    let d = p.flush().unwrap();
    (r + d.reasoning_text.len(), c + d.normal_text.len())
}

fn ours_stream(f: ReasoningFormat, chunks: &[&str]) -> (usize, usize) {
    let mut p = ReasoningParser::new(f, ReasoningOptions::default());
    let (mut r, mut c) = (0, 0);
    for ch in chunks {
        let d = p.push(ch);
        r += d.reasoning.len();
        c += d.content.len();
    }
    let d = p.finish();
    (r + d.reasoning.len(), c + d.content.len())
}

fn bench(c: &mut Criterion) {
    let factory = ParserFactory::new();
    for &(ours, smg, open, close, suffix) in CASES {
        let f: ReasoningFormat = ours.parse().unwrap();
        let text = corpus(open, close, suffix);
        let chunks = chunk(&text);
        // Both sides must split the corpus the same way, or the comparison means nothing.
        let mine = parse_complete(&text, f, ReasoningOptions::default());
        let theirs = factory
            .registry()
            .create_parser(smg)
            .unwrap()
            .detect_and_parse_reasoning(&text)
            .unwrap();
        if (mine.reasoning.len(), mine.content.len()) != (theirs.reasoning_text.len(), theirs.normal_text.len()) {
            eprintln!(
                "note {ours}: outputs differ (smgpy r={} c={}, smg r={} c={})",
                mine.reasoning.len(),
                mine.content.len(),
                theirs.reasoning_text.len(),
                theirs.normal_text.len()
            );
        }
        let streamed = smg_stream(&mut *factory.registry().create_parser(smg).unwrap(), &chunks);
        if streamed != ours_stream(f, &chunks) {
            eprintln!(
                "note {ours}: streamed outputs differ (smg r={} c={})",
                streamed.0, streamed.1
            );
        }

        let mut g = c.benchmark_group(format!("reasoning/{ours}"));
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(BenchmarkId::new("complete", "smgpy"), |b| {
            b.iter(|| parse_complete(black_box(&text), f, ReasoningOptions::default()))
        });
        g.bench_function(BenchmarkId::new("complete", "smg"), |b| {
            b.iter(|| {
                let mut p = factory.registry().create_parser(smg).unwrap();
                p.detect_and_parse_reasoning(black_box(&text)).unwrap()
            })
        });
        g.bench_function(BenchmarkId::new("complete", "naive_find"), |b| {
            b.iter(|| {
                let t = black_box(&text);
                match t.find(close) {
                    Some(i) => (t[..i].to_string(), t[i + close.len()..].to_string()),
                    None => (t.to_string(), String::new()),
                }
            })
        });
        g.bench_function(BenchmarkId::new("stream4", "smgpy"), |b| {
            b.iter(|| ours_stream(f, black_box(&chunks)))
        });
        g.bench_function(BenchmarkId::new("stream4", "smg"), |b| {
            b.iter(|| {
                let mut p = factory.registry().create_parser(smg).unwrap();
                smg_stream(&mut *p, black_box(&chunks))
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_millis(1200));
    targets = bench
}
criterion_main!(benches);
