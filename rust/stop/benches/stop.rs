//! Stop matching throughput: the streaming matcher against the naive "search the tail after every
//! token" approach, over ~1 MB of text with no full match (the common case: every byte is
//! scanned), fed in token-sized chunks, 1-char chunks and one chunk.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use smgpy_stop::{StopMatcher, StopSet};

mod common;
use common::{chunks, stop_list, text};

fn run_matcher(set: &Arc<StopSet>, pieces: &[&str], out: &mut String) -> Option<usize> {
    out.clear();
    let mut m = StopMatcher::from_set(set.clone(), false);
    for piece in pieces {
        if let Some(i) = m.push_into(piece, out) {
            return Some(i);
        }
    }
    out.push_str(&m.finish());
    None
}

/// The naive approach: append the token, then search the last `max_stop_len + token_len`
/// bytes for each stop string.
fn run_naive(stops: &[String], max_len: usize, pieces: &[&str], buf: &mut String) -> Option<usize> {
    buf.clear();
    for piece in pieces {
        buf.push_str(piece);
        let mut from = buf.len().saturating_sub(max_len + piece.len());
        while !buf.is_char_boundary(from) {
            from -= 1;
        }
        let window = &buf[from..];
        if let Some(i) = stops.iter().position(|s| window.contains(s.as_str())) {
            return Some(i);
        }
    }
    None
}

fn bench_stop_counts(c: &mut Criterion) {
    let text = text(1 << 20);
    for n in [1, 4, 64] {
        let stops = stop_list(n);
        let set = Arc::new(StopSet::new(stops.clone()).unwrap());
        assert!(set.find(&text).is_none(), "bench text must not contain a stop string");
        let max_len = set.max_stop_len();
        let mut group = c.benchmark_group(format!("stop/{n}_stops"));
        // The naive baseline takes up to a second per pass with 64 stops: keep runs short.
        group.sample_size(10);
        group.throughput(Throughput::Bytes(text.len() as u64));
        let mut out = String::with_capacity(text.len());
        for (label, size) in [("4B_chunks", 4), ("1char_chunks", 1), ("one_chunk", text.len())] {
            let pieces = chunks(&text, size);
            group.bench_function(BenchmarkId::new("matcher", label), |b| {
                b.iter(|| black_box(run_matcher(&set, black_box(&pieces), &mut out)))
            });
            if size <= 4 {
                group.bench_function(BenchmarkId::new("naive_tail", label), |b| {
                    b.iter(|| black_box(run_naive(&stops, max_len, black_box(&pieces), &mut out)))
                });
            }
        }
        group.finish();
    }
}

/// Linear and chunking-independent: MB/s must not drop as the text grows, for any chunk size.
fn bench_linearity(c: &mut Criterion) {
    let set = Arc::new(StopSet::new(stop_list(4)).unwrap());
    let mut group = c.benchmark_group("stop/linearity");
    group.sample_size(20);
    let mut out = String::new();
    for len in [1 << 16, 1 << 20] {
        let text = text(len);
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (label, size) in [("1char", 1), ("one_chunk", text.len())] {
            let pieces = chunks(&text, size);
            group.bench_function(BenchmarkId::new(label, len), |b| {
                b.iter(|| black_box(run_matcher(&set, black_box(&pieces), &mut out)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_stop_counts, bench_linearity);
criterion_main!(benches);
