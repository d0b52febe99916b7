//! Property tests: streaming under any chunking equals the complete answer equals a naive
//! reference, and no stop string ever reaches the client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aho_corasick::{AhoCorasick, MatchKind};
use proptest::prelude::*;
use smgpy_stop::{StopMatcher, StopOutput, StopSet};
use std::sync::Arc;

/// Few symbols so that matches, overlaps and shared prefixes are frequent; several multi-byte
/// symbols share lead bytes (`｜`/`▁`, `终`/`止`) to catch char-boundary mistakes.
const ALPHABET: &[char] = &['a', 'b', 'c', '\n', '｜', '▁', '终', '止', '🛑'];

fn sym() -> impl Strategy<Value = char> {
    prop::sample::select(ALPHABET)
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(sym(), 0..60).prop_map(|v| v.into_iter().collect())
}

/// 1–6 stops; derived ones (prefixes, suffixes, extensions, infixes of others) make
/// prefix-of-each-other and overlapping sets common.
fn stops() -> impl Strategy<Value = Vec<String>> {
    let one = prop::collection::vec(sym(), 1..5).prop_map(|v| v.into_iter().collect::<String>());
    let derived = prop::collection::vec((any::<prop::sample::Index>(), 0usize..5, sym()), 0..4);
    (prop::collection::vec(one, 1..4), derived).prop_map(|(mut base, derived)| {
        for (idx, mode, c) in derived {
            let s = idx.get(&base).clone();
            let chars: Vec<char> = s.chars().collect();
            let n = chars.len();
            let new: String = match mode {
                0 if n > 1 => chars[..n - 1].iter().collect(),
                1 => format!("{s}{c}"),
                2 if n > 1 => chars[1..].iter().collect(),
                3 if n > 2 => chars[1..n - 1].iter().collect(),
                _ => format!("{c}{s}"),
            };
            base.push(new);
        }
        base.truncate(6);
        base
    })
}

/// Stops plus a text made of random symbols and fragments (prefixes) of the stops, so near
/// misses, overlaps and pending matches are frequent.
fn stops_and_text() -> impl Strategy<Value = (Vec<String>, String)> {
    stops().prop_flat_map(|stops| {
        let piece = prop_oneof![
            sym().prop_map(|c| c.to_string()),
            (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map({
                let stops = stops.clone();
                move |(i, cut)| {
                    let s = i.get(&stops);
                    let bounds: Vec<usize> = (1..=s.len()).filter(|&k| s.is_char_boundary(k)).collect();
                    s[..*cut.get(&bounds)].to_string()
                }
            }),
        ];
        let text = prop::collection::vec(piece, 0..25).prop_map(|v| v.concat());
        (Just(stops), prop_oneof![text, self::text()])
    })
}

/// Split `text` at the char boundaries picked by `cuts`.
fn chunk(text: &str, cuts: &[prop::sample::Index]) -> Vec<String> {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
    let mut points: Vec<usize> = if bounds.is_empty() {
        Vec::new()
    } else {
        cuts.iter().map(|c| *c.get(&bounds)).collect()
    };
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(text[last..p].to_string());
        last = p;
    }
    out.push(text[last..].to_string());
    out
}

/// Brute force: for each start in order, the shortest stop there (smallest index on ties).
fn naive(stops: &[String], text: &str, include: bool) -> (String, Option<usize>) {
    for start in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
        let hit = stops
            .iter()
            .enumerate()
            .filter(|(_, s)| text[start..].starts_with(s.as_str()))
            .min_by_key(|(i, s)| (s.len(), *i));
        if let Some((index, s)) = hit {
            let cut = if include { start + s.len() } else { start };
            return (text[..cut].to_string(), Some(index));
        }
    }
    (text.to_string(), None)
}

/// The `aho-corasick` crate as an independent oracle: all overlapping matches, take the minimum.
fn oracle(stops: &[String], text: &str, include: bool) -> (String, Option<usize>) {
    let ac = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .build(stops)
        .unwrap();
    let best = ac
        .find_overlapping_iter(text)
        .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
        .min();
    match best {
        Some((start, end, index)) => (text[..if include { end } else { start }].to_string(), Some(index)),
        None => (text.to_string(), None),
    }
}

/// Stream `chunks`; returns (output, matched, emitted chunks).
fn stream(m: &mut StopMatcher, chunks: &[String]) -> (String, Option<usize>, Vec<String>) {
    let mut out = String::new();
    let mut pieces = Vec::new();
    for c in chunks {
        match m.push(c) {
            StopOutput::Emit(t) => {
                out.push_str(&t);
                pieces.push(t);
            }
            StopOutput::Stopped { text, matched } => {
                out.push_str(&text);
                pieces.push(text);
                assert_eq!(m.push("more"), StopOutput::Emit(String::new()));
                return (out, Some(matched), pieces);
            }
        }
        assert!(m.held_len() < m.max_stop_len().max(1) + m.max_stop_len());
    }
    let last = m.finish();
    out.push_str(&last);
    pieces.push(last);
    (out, m.matched(), pieces)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn streaming_equals_complete_equals_naive(
        (stops, text) in stops_and_text(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
        include in any::<bool>(),
    ) {
        let expected = naive(&stops, &text, include);
        prop_assert_eq!(&oracle(&stops, &text, include), &expected);

        let set = StopSet::new(stops.clone()).unwrap();
        let found = set.find(&text);
        prop_assert_eq!(found.map(|f| f.index), expected.1);

        let mut whole = StopMatcher::new(stops.clone(), include).unwrap();
        let (out, matched, _) = stream(&mut whole, std::slice::from_ref(&text));
        prop_assert_eq!((&out, matched), (&expected.0, expected.1));

        let mut chunked = StopMatcher::new(stops.clone(), include).unwrap();
        let (out, matched, pieces) = stream(&mut chunked, &chunk(&text, &cuts));
        prop_assert_eq!((&out, matched), (&expected.0, expected.1));

        // The sparse table (used for sets near the size limits) must agree too.
        let sparse = Arc::new(StopSet::new_sparse(stops.clone()).unwrap());
        prop_assert!(!sparse.is_dense() && set.is_dense());
        let mut m = StopMatcher::from_set(sparse, include);
        let (sparse_out, sparse_matched, _) = stream(&mut m, &chunk(&text, &cuts));
        prop_assert_eq!((&sparse_out, sparse_matched), (&expected.0, expected.1));
        prop_assert!(text.starts_with(&out));
        if !include {
            for piece in &pieces {
                for s in &stops {
                    prop_assert!(!piece.contains(s.as_str()), "chunk {:?} contains stop {:?}", piece, s);
                }
            }
        }
    }

    #[test]
    fn char_by_char_equals_complete((stops, text) in stops_and_text(), include in any::<bool>()) {
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let mut m = StopMatcher::new(stops.clone(), include).unwrap();
        let (out, matched, _) = stream(&mut m, &chars);
        prop_assert_eq!((out, matched), naive(&stops, &text, include));
    }
}
