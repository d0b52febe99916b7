//! Property tests for every reasoning format: any chunking streams exactly like the complete
//! parse, all input text is accounted for, and arbitrary input never panics.
//!
//! Case counts scale with `PROPTEST_CASES` (default 256 per property); the fuzz run recorded in
//! benches/README.md used `PROPTEST_CASES=250000` (x4) in release mode.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::ops::Range;

use proptest::prelude::*;
use smgpy_parsers::reasoning::{self, ReasoningFormat, ReasoningOptions, ReasoningParser};

fn format_strategy() -> impl Strategy<Value = ReasoningFormat> {
    (0..ReasoningFormat::ALL.len()).prop_map(|i| ReasoningFormat::ALL[i])
}

fn opts_strategy() -> impl Strategy<Value = ReasoningOptions> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(prompt_opened_reasoning, thinking_disabled, reasoning_not_started)| ReasoningOptions {
            prompt_opened_reasoning,
            thinking_disabled,
            reasoning_not_started: reasoning_not_started && !prompt_opened_reasoning,
        },
    )
}

/// Pieces that stress the scanner: markers of every format, their prefixes, multibyte text.
fn piece(markers: Vec<&'static str>) -> impl Strategy<Value = String> {
    let ms = markers.clone();
    prop_oneof![
        3 => "[a-z <>/|\\[\\]\n｜▁◁▷思é]{0,6}",
        2 => (0..markers.len()).prop_map(move |i| markers[i].to_string()),
        2 => (0..ms.len(), 0..40usize).prop_map(move |(i, n)| {
            let m = ms[i];
            let cut = (0..=n.min(m.len())).rev().find(|c| m.is_char_boundary(*c)).unwrap_or(0);
            m[..cut].to_string()
        }),
    ]
}

fn all_markers() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ReasoningFormat::ALL.iter().flat_map(|f| f.markers()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A format, its options, a text of `pieces` [`piece`]s (markers of all formats) and `cuts` byte
/// positions to stream it in chunks at.
fn stream_case(
    pieces: Range<usize>,
    cuts: Range<usize>,
) -> impl Strategy<Value = (ReasoningFormat, ReasoningOptions, String, Vec<usize>)> {
    (
        format_strategy(),
        opts_strategy(),
        proptest::collection::vec(piece(all_markers()), pieces).prop_map(|p| p.concat()),
        proptest::collection::vec(any::<usize>(), cuts),
    )
}

/// Split `text` at the given byte positions (moved down to char boundaries).
fn chunks(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            let mut c = c % (text.len() + 1);
            while !text.is_char_boundary(c) {
                c -= 1;
            }
            c
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.windows(2).map(|w| text[w[0]..w[1]].to_string()).collect()
}

fn streamed(f: ReasoningFormat, o: &ReasoningOptions, parts: &[String]) -> (String, String) {
    let mut p = ReasoningParser::new(f, o.clone());
    let (mut r, mut c) = (String::new(), String::new());
    for part in parts {
        let d = p.push(part);
        r += &d.reasoning;
        c += &d.content;
    }
    let d = p.finish();
    (r + &d.reasoning, c + &d.content)
}

fn assert_stream_eq(f: ReasoningFormat, o: &ReasoningOptions, text: &str, cuts: &[usize]) -> Result<(), TestCaseError> {
    let full = reasoning::parse_complete(text, f, o.clone());
    let (r, c) = streamed(f, o, &chunks(text, cuts));
    prop_assert_eq!(&full.reasoning, &r, "reasoning differs: {} {:?} {:?}", f, o, text);
    prop_assert_eq!(&full.content, &c, "content differs: {} {:?} {:?}", f, o, text);
    Ok(())
}

/// `assert_stream_eq` at `cuts`, then with one char per chunk: every possible boundary at once.
fn assert_cut_and_every_char_eq(
    f: ReasoningFormat,
    o: &ReasoningOptions,
    text: &str,
    cuts: &[usize],
) -> Result<(), TestCaseError> {
    assert_stream_eq(f, o, text, cuts)?;
    let every: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    assert_stream_eq(f, o, text, &every)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: ProptestConfig::default().cases * 4, ..ProptestConfig::default() })]

    /// Markers of *all* formats, marker prefixes and multibyte text, split everywhere.
    #[test]
    fn stream_equals_complete((f, o, text, cuts) in stream_case(0..24, 0..24)) {
        assert_cut_and_every_char_eq(f, &o, &text, &cuts)?;
    }

    /// Long outputs (over the engine's bulk-search threshold), complete vs big and tiny chunks.
    #[test]
    fn long_text_stream_equals_complete((f, o, text, cuts) in stream_case(40..160, 0..6)) {
        assert_cut_and_every_char_eq(f, &o, &text, &cuts)?;
    }

    /// Nothing lost, nothing doubled: output minus markers has exactly the input's plain text.
    #[test]
    fn all_text_accounted_for(
        f in format_strategy(),
        o in opts_strategy(),
        picks in proptest::collection::vec((any::<bool>(), any::<prop::sample::Index>(), "[xyz 0-9思▁é]{0,40}"), 0..30),
    ) {
        // Harmony routes whole messages (a header's text and a tool call's arguments are shown
        // to no one): `tests/harmony.rs` accounts for its text message by message instead.
        prop_assume!(f != ReasoningFormat::OpenaiGptoss);
        let markers = f.markers();
        let mut text = String::new();
        let mut plain = String::new();
        for (is_marker, idx, s) in &picks {
            if *is_marker && !markers.is_empty() {
                text += markers[idx.index(markers.len())];
            } else {
                text += s;
                plain += s;
            }
        }
        let out = reasoning::parse_complete(&text, f, o.clone());
        let mut content = out.content.as_str();
        if let (Some(p), false) = (f.content_prefix(), o.thinking_disabled) {
            content = content.strip_prefix(p).unwrap_or(content);
        }
        let strip = |s: &str| markers.iter().fold(s.to_string(), |acc, m| acc.replace(m, ""));
        let mut got: Vec<char> = (strip(&out.reasoning) + &strip(content)).chars().collect();
        let mut want: Vec<char> = plain.chars().collect();
        got.sort_unstable();
        want.sort_unstable();
        prop_assert_eq!(got, want, "{} {:?} {:?} -> {:?}", f, o, text, out);
        if o.thinking_disabled {
            prop_assert!(out.reasoning.is_empty());
        }
    }

    /// Fuzz: arbitrary strings, arbitrary chunking, every format; must not panic and must agree.
    #[test]
    fn fuzz_arbitrary_strings(
        f in format_strategy(),
        o in opts_strategy(),
        text in any::<String>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        assert_stream_eq(f, &o, &text, &cuts)?;
    }
}
