//! The mask equals trying each token alone, and following masks only ever yields documents
//! `serde_json` accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use smgpy_structured::{JsonMatcher, JsonOptions, JsonState, Vocab};
use std::sync::Arc;

/// Pieces JSON is made of, and some that break it, so random tokens hit both.
const PIECES: &[&str] = &[
    "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "1", "0", "-", ".", "e", "+", "true", "fal", "se", "null",
    "\\", "\\n", "\\u00", "e9", "é", "日", "{\"", "\":", "\",", "\"}", "[1", "x", "```", "\t", "  ",
];

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(proptest::sample::select(PIECES), 1..4).prop_map(|p| p.concat().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 1..4),
    ]
}

fn vocab() -> impl Strategy<Value = Vec<Option<Vec<u8>>>> {
    proptest::collection::vec(prop_oneof![9 => token().prop_map(Some), 1 => Just(None)], 1..60)
}

fn options() -> impl Strategy<Value = JsonOptions> {
    (any::<bool>(), 1u8..6).prop_map(|(object_only, max_whitespace)| JsonOptions {
        object_only,
        max_whitespace,
    })
}

/// `out` is a JSON document (an object when asked for one). Numbers beyond `f64` (`1e999`) are
/// valid JSON that `serde_json` will not hold, so they are accepted as such.
fn check(out: &[u8], options: JsonOptions) -> Result<(), TestCaseError> {
    match serde_json::from_slice::<serde_json::Value>(out) {
        Ok(v) => prop_assert!(!options.object_only || v.is_object(), "{:?}", v),
        Err(e) => prop_assert!(
            e.to_string().contains("number out of range"),
            "{e}: {:?}",
            String::from_utf8_lossy(out)
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn mask_equals_each_token_alone(
        tokens in vocab(),
        options in options(),
        // Random pieces, and prefixes that end inside a key or a value string (the masks that
        // copy the plain-text tokens and try only the others).
        prefix in prop_oneof![
            3 => token(),
            1 => proptest::sample::select(vec![&b"{\""[..], b"{\"k\": \"v", b"[\"\xe6\x97", b"[\"\\u00"])
                .prop_map(|p| p.to_vec()),
        ],
    ) {
        let end = tokens.len() as u32;
        let mut all = tokens.clone();
        all.push(None);
        let vocab = Vocab::new(all, vec![end]);
        let start = JsonState::new(options);
        let state = start.feed(&prefix).unwrap_or(start);
        let mut mask = vec![9u8; tokens.len() + 3];
        vocab.mask_into(&(), state, &mut mask);
        for (id, t) in tokens.iter().enumerate() {
            let alone = t.as_ref().is_some_and(|t| !t.is_empty() && state.feed(t).is_some());
            prop_assert_eq!(mask[id] == 1, alone, "token {:?}", t.as_ref().map(|t| String::from_utf8_lossy(t)));
        }
        prop_assert_eq!(mask[end as usize] == 1, state.is_complete());
        prop_assert_eq!(&mask[tokens.len() + 1..], &[0, 0]);
    }

    #[test]
    fn following_the_masks_gives_valid_json(tokens in vocab(), options in options(), picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..40)) {
        let end = tokens.len() as u32;
        let mut all = tokens.clone();
        all.push(None);
        let vocab = Arc::new(Vocab::new(all, vec![end]));
        let mut m = JsonMatcher::new(vocab.clone(), options);
        let mut out = Vec::new();
        let mut mask = vec![0u8; tokens.len() + 1];
        for pick in picks {
            m.mask_into(&mut mask);
            let allowed: Vec<u32> = (0..mask.len() as u32).filter(|&i| mask[i as usize] == 1).collect();
            if allowed.is_empty() {
                break;
            }
            let t = allowed[pick.index(allowed.len())];
            m.accept(t).unwrap();
            if t == end {
                check(&out, options)?;
                return Ok(());
            }
            out.extend_from_slice(vocab.bytes_of(t).unwrap());
        }
        if m.is_complete() {
            check(&out, options)?;
        }
    }
}

#[test]
fn refuses_what_the_mask_forbids() {
    let vocab = Arc::new(Vocab::new(
        vec![Some(b"{".to_vec()), Some(b"}".to_vec()), Some(b"x".to_vec()), None],
        vec![3],
    ));
    let mut m = JsonMatcher::new(vocab, JsonOptions::default());
    assert!(m.accept(2).is_err());
    assert!(m.accept(3).is_err(), "end before the document is complete");
    m.accept(0).unwrap();
    m.accept(1).unwrap();
    assert!(m.is_complete());
    m.accept(3).unwrap();
    assert!(m.accept(0).is_err(), "nothing after the end");
    assert!(m.accept(7).is_err());
}
