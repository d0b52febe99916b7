//! What the tool-call bench (`smg-peer/benches/tool.rs`) and the `parse_loop` example both time:
//! a response cut in ~4-byte pieces and streamed, each push's result looked at (not accumulated).
use smgpy_parsers::tool::{ToolCallParser, ToolFormat};

/// ~4-byte pieces on char boundaries.
pub fn four_bytes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(4);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        out.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    out
}

/// Stream `pieces` through a fresh parser, touching what each push returns.
pub fn stream_count(format: ToolFormat, pieces: &[String]) -> usize {
    let mut p = ToolCallParser::new(format, None);
    let mut n = 0;
    for piece in pieces {
        let d = p.push(piece);
        n += d.normal_text.len() + d.calls().len();
    }
    n + p.finish().calls().len()
}
