//! The translated pre-tokenizer regexes cut every text exactly where `tokenizers`' own regex
//! (`fancy-regex`, with the lookahead) cuts it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use smgpy_tokenizer::split::{LookaheadFree, BYTE_LEVEL_PATTERN};
use tokenizers::tokenizer::pattern::Pattern;
use tokenizers::utils::SysRegex;

/// Llama 3's `Split` pattern (Qwen 2 and others use near copies).
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Text full of what the lookahead decides: runs of every kind of whitespace before letters,
/// digits, punctuation and the end, multi-byte spaces and letters, contractions.
const TEXT: &str = "( |  |   |\n|\n\n| \n|\t|\r\n|\u{a0}|\u{3000}|\u{2028}|a|Z|é|ß|中|7|42|12345|'s|'LL|!|\\.|,|-|😀|x y|\u{301}){0,40}";

fn same_cuts(pattern: &str, text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
    let ours = LookaheadFree::new(pattern).expect("translatable");
    let theirs = SysRegex::new(pattern).unwrap();
    proptest::prop_assert_eq!(
        (&ours).find_matches(text).unwrap(),
        (&theirs).find_matches(text).unwrap()
    );
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(2000))]

    #[test]
    fn gpt2_pieces_equal_the_library_s(text in TEXT) {
        same_cuts(BYTE_LEVEL_PATTERN, &text)?;
    }

    #[test]
    fn llama3_pieces_equal_the_library_s(text in TEXT) {
        same_cuts(LLAMA3, &text)?;
    }
}

#[test]
fn known_cuts() {
    let gpt2 = LookaheadFree::new(BYTE_LEVEL_PATTERN).unwrap();
    let pieces = |text: &str| -> Vec<String> {
        (&gpt2)
            .find_matches(text)
            .unwrap()
            .into_iter()
            .map(|((s, e), _)| text[s..e].to_string())
            .collect()
    };
    // the run before a word gives its last space to the word; a run at the end stays whole
    assert_eq!(pieces("a   b  "), ["a", "  ", " b", "  "]);
    // a newline is not a space: the last one of a run is a piece of its own
    assert_eq!(pieces("x\n\ny"), ["x", "\n", "\n", "y"]);
}

#[test]
fn patterns_it_cannot_translate_are_left_to_the_library() {
    assert!(LookaheadFree::new(r"\w+").is_none()); // no lookahead tail
    assert!(LookaheadFree::new(r"\b\w+|\s+(?!\S)|\s+").is_none()); // an assertion in the rest
    assert!(LookaheadFree::new(r"(?<=a)b|\s+(?!\S)|\s+").is_none()); // a look-behind
    assert!(LookaheadFree::new(r"\p{N}{0,3}|\s+(?!\S)|\s+").is_none()); // matches nothing at all
}
