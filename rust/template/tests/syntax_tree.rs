//! The fast renderer (`src/fast/lower.rs`) reads minijinja's syntax tree through its
//! `unstable_machinery` feature, which may change in any release. minijinja is pinned to one exact
//! version in the workspace `Cargo.toml`; this test parses a template that uses every construct
//! the fast renderer lowers and compares the tree with the one that version produces, so an
//! upgrade that changes the tree fails here, by name, before it can change any rendering.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use minijinja::machinery::{parse, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;

const EVERY_CONSTRUCT: &str = r#"{%- set ns = namespace(found=false, n=0) -%}
{%- macro render(m, sep='\n') -%}{{ m.role ~ sep ~ m['content'] | trim }}{%- endmacro -%}
{%- for message in messages[1:] if message.role != 'system' -%}
  {%- if loop.first and message.content is string and message.content is not none -%}
    {{ render(message) }}{% set ns.n = ns.n + 1 %}
  {%- elif message.tool_calls is defined and message.tool_calls | length > 0 -%}
    {%- for call in message.tool_calls -%}{{ call.function.arguments | tojson(indent=2) }}{%- endfor -%}
  {%- else -%}{{ '[' + loop.index0 | string + ']' }}{% break %}
  {%- endif -%}
{%- else -%}{{ raise_exception('empty') }}
{%- endfor -%}
{%- if tools %}{{ tools | selectattr('type', 'equalto', 'function') | map(attribute='name') | join(', ') }}{% endif -%}
{{ messages[::-1][0]['content'][:3] }}{{ {'a': 1, 'b': [true, none]}.items() | list | dictsort | length }}
{%- if add_generation_prompt and not (x or y) %}{{ 1 + 2 * 3 - 4 // 2 % 3 }}{% endif %}"#;

/// FNV-1a over the tree's debug text: stable across Rust releases (std's hasher is not).
fn fingerprint(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn minijinja_still_parses_into_the_tree_the_fast_renderer_reads() {
    let ws = WhitespaceConfig {
        keep_trailing_newline: false,
        lstrip_blocks: true,
        trim_blocks: true,
    };
    #[allow(clippy::default_constructed_unit_structs)]
    let ast = parse(EVERY_CONSTRUCT, "<t>", SyntaxConfig::default(), ws).unwrap();
    let tree = format!("{ast:?}");
    assert_eq!(
        fingerprint(&tree),
        EXPECTED,
        "minijinja's syntax tree changed (a new minijinja version?): check src/fast/lower.rs against \
         the new tree before updating this fingerprint. The tree now:\n{tree}"
    );
}

/// The fingerprint under minijinja 2.24.0.
const EXPECTED: u64 = 6_144_639_405_877_558_115;
