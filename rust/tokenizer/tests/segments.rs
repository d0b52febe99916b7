//! Ids assembled from cached segments equal `tokenizers`' own encode, cold and warm, for byte-level
//! BPE with merges and for Metaspace tokenizers; a tokenizer whose segments depend on their place
//! in the prompt is not cached at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use smgpy_tokenizer::Tokenizer;

/// GPT-2's byte-to-character map: the character that stands for byte `b`.
fn byte_char(b: u8) -> char {
    let printable = |c: u32| (33..=126).contains(&c) || (0xA1..=0xAC).contains(&c) || (0xAE..=0xFF).contains(&c);
    if printable(u32::from(b)) {
        return char::from(b);
    }
    let n = (0..u32::from(b)).filter(|&c| !printable(c)).count() as u32;
    char::from_u32(256 + n).unwrap()
}

fn added(id: u32, content: &str, special: bool, lstrip: bool, rstrip: bool) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": lstrip, "rstrip": rstrip,
           "normalized": !special, "special": special})
}

/// Llama 3's `Split` pattern.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Byte-level BPE with a few merges, a BOS template, and added tokens of every kind: special,
/// stripping whitespace, and not special. Pre-tokenized by GPT-2's regex in `ByteLevel` after
/// digits split one by one, or by `split` (a `Split` regex, as Llama 3 has it) and then `ByteLevel`
/// without its regex.
fn byte_level(split: Option<&str>) -> Tokenizer {
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        vocab.insert(byte_char(b).to_string(), json!(b));
    }
    let sp = byte_char(b' ').to_string();
    let merges: Vec<(String, String)> = [
        ("t", "h"),
        ("h", "e"),
        ("th", "e"),
        (sp.as_str(), "t"),
        (&format!("{sp}t"), "he"),
        ("e", "r"),
        ("i", "n"),
        ("in", "g"),
        (sp.as_str(), "a"),
        ("o", "n"),
        (sp.as_str(), sp.as_str()),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let mut next = 256;
    for (a, b) in &merges {
        vocab.entry(format!("{a}{b}")).or_insert_with(|| {
            next += 1;
            json!(next - 1)
        });
    }
    let (bos, end, tool) = (next, next + 1, next + 2);
    let tokenizer = json!({
        "version": "1.0", "truncation": {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0},
        "padding": null,
        "added_tokens": [added(bos, "<s>", true, false, false), added(end, "<|im_end|>", true, false, true),
                         added(tool, "[TOOL]", false, true, false)],
        "normalizer": null,
        "pre_tokenizer": match split {
            None => json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}),
            Some(regex) => json!({"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}),
        },
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges.iter().map(|(a, b)| vec![a, b]).collect::<Vec<_>>()}
    });
    Tokenizer::from_json(&tokenizer.to_string(), Some("<s>".into()))
        .map_err(|e| e.to_string())
        .unwrap()
}

/// A SentencePiece-style tokenizer: Metaspace (`▁` for spaces, prepended per `scheme`) over a
/// character vocabulary with byte fallback.
fn metaspace(scheme: &str) -> Tokenizer {
    let mut vocab = vec![json!(["<unk>", 0.0]), json!(["<s>", 0.0]), json!(["</s>", 0.0])];
    for b in 0..=255u8 {
        vocab.push(json!([format!("<0x{b:02X}>"), 0.0]));
    }
    for (i, piece) in ["▁", "a", "b", "c", "▁a", "ab", "▁ab", "bc", "▁b", "c▁"]
        .iter()
        .enumerate()
    {
        vocab.push(json!([piece, -(i as f64)]));
    }
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [added(1, "<s>", true, false, false), added(2, "</s>", true, false, false)],
        "normalizer": null,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": true},
        "post_processor": null,
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": true},
        "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": true}
    });
    Tokenizer::from_json(&tokenizer.to_string(), None).unwrap()
}

fn same_both_ways(t: &Tokenizer, text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
    for special in [false, true] {
        let want = t.encode_uncached(text, special).unwrap();
        // Cold, then warm: every segment of the second call comes from the cache.
        proptest::prop_assert_eq!(&t.encode(text, special).unwrap(), &want, "cold, special {}", special);
        proptest::prop_assert_eq!(&t.encode(text, special).unwrap(), &want, "warm, special {}", special);
    }
    Ok(())
}

proptest::proptest! {
    #[test]
    fn byte_level_ids_equal_the_library_s(text in "(the|ing|er| |  |\n|\t|\u{a0}|\u{3000}|[a-z0-9]|é|€|😀|<s>|<\\|im_end\\|>| \\[TOOL\\] |'s|!){0,40}") {
        same_both_ways(&byte_level(None), &text)?;
        same_both_ways(&byte_level(Some(LLAMA3)), &text)?;
    }

    #[test]
    fn metaspace_ids_equal_the_library_s(text in "(a|b|c|ab| |  |x|é|<s>|</s>){0,30}") {
        same_both_ways(&metaspace("always"), &text)?;
        same_both_ways(&metaspace("never"), &text)?;
    }
}

#[test]
fn segments_seen_before_come_from_the_cache() {
    let t = byte_level(None);
    let system = "<s>system\nthe thing is in the string<|im_end|>\n";
    t.encode(&format!("{system}<s>user\nhi<|im_end|>\n"), false).unwrap();
    // "system\n..." and "user\nhi" (`<|im_end|>` takes the newline after it: rstrip)
    let (entries, bytes) = t.cached_segments().unwrap();
    assert!(entries == 2 && bytes > 0, "{entries} {bytes}");
    t.encode(
        &format!("{system}<s>user\nhi<|im_end|>\n<s>user\nmore<|im_end|>\n"),
        false,
    )
    .unwrap();
    // one new segment ("user\nmore"); the others were cached
    assert_eq!(t.cached_segments().unwrap().0, entries + 1);
}

#[test]
fn the_file_s_truncation_does_not_cut_prompts() {
    // The byte-level tokenizer's file truncates at 8 ids; transformers turns that off per call.
    let t = byte_level(None);
    let text = "the thing is in the string, and the other thing is there too";
    assert!(t.encode(text, false).unwrap().len() > 8);
    assert_eq!(t.encode(text, true).unwrap(), t.encode_uncached(text, true).unwrap());
}

#[test]
fn a_tokenizer_whose_segments_depend_on_their_place_is_not_cached() {
    // prepend_scheme "first": only the prompt's first segment gets `▁`, so a segment's ids depend on
    // where it sits.
    let t = metaspace("first");
    assert_eq!(t.cached_segments(), None);
    assert_eq!(
        t.encode("ab<s>ab", false).unwrap(),
        t.encode_uncached("ab<s>ab", false).unwrap()
    );
    assert!(metaspace("always").cached_segments().is_some());
}
