//! Marker scanning with suffix hold-back, shared by every streaming parser.
//!
//! Streaming parsers must never emit text that might turn out to be the start of a marker
//! (`<tool_call>`, `</think>`, ...): such text is held back until the next delta decides it.
//! `find_first` and `partial_suffix_len` are the only place that logic lives; `with_held` reads
//! what was held back in front of the next delta.

use std::borrow::Cow;

/// `held + text`, taking `held`: the text a streaming parser held back, then the new delta.
/// `text` is borrowed, not copied, when nothing is held (the common case).
pub(crate) fn with_held<'a>(held: &mut String, text: &'a str) -> Cow<'a, str> {
    if held.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut joined = std::mem::take(held);
    joined.push_str(text);
    Cow::Owned(joined)
}

/// Earliest occurrence of any marker in `buf`: `(byte_offset, marker_index)`.
/// On a tie at the same offset, the longest marker wins (so `<tool_call>` beats `<tool`).
pub fn find_first(buf: &str, markers: &[&str]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for (i, m) in markers.iter().enumerate() {
        if m.is_empty() {
            continue;
        }
        if let Some(pos) = buf.find(m) {
            best = match best {
                None => Some((pos, i)),
                Some((bp, bi)) if pos < bp || (pos == bp && m.len() > markers[bi].len()) => Some((pos, i)),
                keep => keep,
            };
        }
    }
    best
}

/// Length in bytes of the longest suffix of `buf` that is a proper prefix of some marker.
/// The caller may emit `buf[..buf.len() - partial_suffix_len(buf, markers)]` safely.
/// The returned length always falls on a char boundary of `buf`.
pub fn partial_suffix_len(buf: &str, markers: &[&str]) -> usize {
    let bytes = buf.as_bytes();
    let mut best = 0;
    for m in markers {
        let mb = m.as_bytes();
        let Some(&first) = mb.first() else { continue };
        let max = (mb.len() - 1).min(bytes.len());
        if max <= best {
            continue;
        }
        // Only a suffix starting with the marker's first byte can be a prefix of it; the
        // earliest such start that matches is the longest.
        let end = bytes.len();
        for start in end - max..end - best {
            if bytes[start] == first && bytes[start..] == mb[..end - start] && buf.is_char_boundary(start) {
                best = end - start;
                break;
            }
        }
    }
    best
}

/// Below this length a plain loop finds a byte faster than `memchr`, whose vector setup and
/// dispatch cost more than the search itself. Streaming pushes are often a few bytes long.
const SHORT: usize = 16;

/// First `b` in `hay`.
#[inline]
pub(crate) fn byte(b: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < SHORT {
        hay.iter().position(|&x| x == b)
    } else {
        memchr::memchr(b, hay)
    }
}

/// First `a` or `b` in `hay`.
#[inline]
pub(crate) fn byte2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < SHORT {
        hay.iter().position(|&x| x == a || x == b)
    } else {
        memchr::memchr2(a, b, hay)
    }
}

/// First `a`, `b` or `c` in `hay`.
#[inline]
pub(crate) fn byte3(a: u8, b: u8, c: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < SHORT {
        hay.iter().position(|&x| x == a || x == b || x == c)
    } else {
        memchr::memchr3(a, b, c, hay)
    }
}

/// First `b` in `hay`, which is usually within its first few bytes: those are looked at one by one
/// before `memchr` takes the rest.
#[inline]
fn near_byte(b: u8, hay: &[u8]) -> Option<usize> {
    let (head, tail) = hay.split_at(hay.len().min(SHORT));
    head.iter()
        .position(|&x| x == b)
        .or_else(|| memchr::memchr(b, tail).map(|p| p + SHORT))
}

/// `hay.starts_with(marker)`, compared 8 bytes at a time inline: markers are a few dozen bytes at
/// most, where a `memcmp` call costs more than the comparison itself.
#[inline]
pub(crate) fn has_prefix(hay: &[u8], marker: &[u8]) -> bool {
    let Some(head) = hay.get(..marker.len()) else {
        return false;
    };
    let word = |c: &[u8]| <[u8; 8]>::try_from(c).ok().map(u64::from_ne_bytes);
    let (mut a, mut b) = (head.chunks_exact(8), marker.chunks_exact(8));
    if (&mut a).zip(&mut b).any(|(x, y)| word(x) != word(y)) {
        return false;
    }
    a.remainder().iter().zip(b.remainder()).all(|(x, y)| x == y)
}

/// First occurrence of `marker` in `hay`. Parsers search a few dozen bytes for a short tag, often
/// again at each push while they wait: jumping between occurrences of the tag's first byte is far
/// cheaper there than building a substring searcher each time (`str::find`).
pub(crate) fn find(hay: &str, marker: &str) -> Option<usize> {
    let first = *marker.as_bytes().first()?;
    let bytes = hay.as_bytes();
    let mut from = 0;
    while let Some(off) = near_byte(first, &bytes[from..]) {
        let p = from + off;
        if has_prefix(&bytes[p..], marker.as_bytes()) {
            return Some(p);
        }
        from = p + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every suffix length tried against every marker.
    fn partial_suffix_len_naive(buf: &str, markers: &[&str]) -> usize {
        let bytes = buf.as_bytes();
        let mut best = 0;
        for m in markers {
            let mb = m.as_bytes();
            for len in 1..mb.len().min(bytes.len() + 1) {
                if buf.is_char_boundary(bytes.len() - len) && bytes[bytes.len() - len..] == mb[..len] {
                    best = best.max(len);
                }
            }
        }
        best
    }

    proptest! {
        #[test]
        fn has_prefix_equals_starts_with(hay in "[ab<｜]{0,40}", marker in "[ab<｜]{0,30}") {
            prop_assert_eq!(has_prefix(hay.as_bytes(), marker.as_bytes()), hay.starts_with(&marker));
            let longer = format!("{marker}{hay}");
            prop_assert!(has_prefix(longer.as_bytes(), marker.as_bytes()));
        }

        #[test]
        fn partial_suffix_len_equals_trying_every_length(
            buf in "[<a｜/>t]{0,12}",
            markers in proptest::collection::vec("[<a｜/>t]{0,6}", 0..4),
        ) {
            let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
            prop_assert_eq!(partial_suffix_len(&buf, &markers), partial_suffix_len_naive(&buf, &markers));
        }
    }

    #[test]
    fn finds_earliest_and_longest() {
        assert_eq!(find_first("ab<tool_call>x", &["<tool", "<tool_call>"]), Some((2, 1)));
        assert_eq!(find_first("x</think>y<think>", &["<think>", "</think>"]), Some((1, 1)));
        assert_eq!(find_first("nothing", &["<a>"]), None);
    }

    #[test]
    fn holds_back_partial_markers() {
        assert_eq!(partial_suffix_len("hello <tool_c", &["<tool_call>"]), 7);
        assert_eq!(partial_suffix_len("hello <", &["<tool_call>", "</think>"]), 1);
        assert_eq!(partial_suffix_len("hello", &["<tool_call>"]), 0);
        // A complete marker is not a *proper* prefix: find_first handles it.
        assert_eq!(partial_suffix_len("<a>", &["<a>"]), 0);
        assert_eq!(partial_suffix_len("x｜", &["｜tool▁calls｜"]), "｜".len());
    }
}
