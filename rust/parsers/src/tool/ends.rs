//! Where tool regions end: bracket matching for `End::Balanced`, marker search for
//! `End::Marker`, and the JSON string tracking that keeps an end marker written inside a string
//! argument from ending anything (`{"text": "say <|END_ACTION|> please"}`).
use crate::scan::{self, partial_suffix_len};

/// Bracket matcher state for `End::Balanced`, resumable across pushes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Balance {
    depth: u32,
    quote: u8,
    escaped: bool,
    /// Where the first group closed, once it has (`End::BalancedThen` may still wait for its
    /// closing marker, and must not scan on into a second group meanwhile).
    closed: Option<usize>,
}

impl Balance {
    /// Advance from `*pos`; returns the offset just past the closing bracket of the first group.
    pub(crate) fn advance(&mut self, buf: &str, pos: &mut usize, skip: &[&str], finishing: bool) -> Option<usize> {
        if self.closed.is_some() {
            return self.closed;
        }
        let bytes = buf.as_bytes();
        while *pos < bytes.len() {
            let c = bytes[*pos];
            if self.quote != 0 {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == self.quote {
                    self.quote = 0;
                } else {
                    // Jump to the next quote or backslash: string contents dominate the text.
                    let skip = scan::byte2(self.quote, b'\\', &bytes[*pos..]).unwrap_or(bytes.len() - *pos);
                    *pos += skip;
                    continue;
                }
                *pos += 1;
                continue;
            }
            if c == b'[' && !skip.is_empty() {
                let rest = &buf[*pos..];
                if let Some(t) = skip.iter().find(|t| rest.starts_with(**t)) {
                    *pos += t.len();
                    continue;
                }
                if !finishing && skip.iter().any(|t| t.starts_with(rest)) {
                    return None;
                }
            }
            match c {
                b'{' | b'[' | b'(' => self.depth += 1,
                b'}' | b']' | b')' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        *pos += 1;
                        self.closed = Some(*pos);
                        return self.closed;
                    }
                }
                b'"' | b'\'' if self.depth > 0 => self.quote = c,
                _ => {}
            }
            *pos += 1;
        }
        None
    }
}

/// JSON string state of a region whose body is JSON, for the end-marker search: an end marker
/// inside a string value is text. A `"` opens a string only once the JSON has begun (a `{` or `[`
/// was seen), so prose before it (a header, a name) cannot open one.
///
/// The state is brought up to date only when an end marker is found, by counting the quotes
/// before it that no backslash escapes (one SIMD pass over each byte, once), so pieces that hold no
/// end marker cost nothing here.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JsonStrings {
    /// Region offset the state below is for.
    at: usize,
    started: bool,
    quoted: bool,
}

impl JsonStrings {
    /// Whether offset `at` of `region` lies inside a JSON string.
    pub(crate) fn inside(&mut self, region: &[u8], at: usize) -> bool {
        self.advance(region, at);
        self.quoted
    }

    /// Bring the state from its offset up to `to` (a later offset of the same `region`).
    fn advance(&mut self, region: &[u8], to: usize) {
        let mut from = self.at.min(to);
        if !self.started {
            match scan::byte2(b'{', b'[', &region[from..to]) {
                Some(off) => {
                    self.started = true;
                    from += off + 1;
                }
                None => {
                    self.at = to;
                    return;
                }
            }
        }
        for off in memchr::memchr_iter(b'"', &region[from..to]) {
            let q = from + off;
            let slashes = region[..q].iter().rev().take_while(|&&b| b == b'\\').count();
            if slashes % 2 == 0 {
                self.quoted = !self.quoted;
            }
        }
        self.at = to;
    }
}

/// The first of `ends` at or after `*scan` in `region`, as `(body_end, region_end)`: the first
/// `consumed` markers are consumed with the region, the others end it and stay. `inside(at)` says
/// whether a marker found at `at` lies inside a JSON string (then it is text and the search goes
/// on). When none is found, `*scan` moves to where the search must resume (the start of a
/// possible marker the region ends with).
pub(crate) fn marker_end(
    region: &str,
    scan: &mut usize,
    ends: &[&str],
    consumed: usize,
    mut inside: impl FnMut(usize) -> bool,
) -> Option<(usize, usize)> {
    let firsts = FirstBytes::of(ends);
    loop {
        if !contains_any(&region[*scan..], firsts.as_slice()) {
            *scan = region.len();
            return None;
        }
        let Some((p, i)) = next_marker(&region[*scan..], ends, firsts.as_slice()) else {
            *scan = region.len() - partial_suffix_len(&region[*scan..], ends);
            return None;
        };
        let at = *scan + p;
        if !inside(at) {
            return Some((at, if i < consumed { at + ends[i].len() } else { at }));
        }
        *scan = at + 1;
    }
}

/// The end of a region whose bracket group closed at `q` and that may be closed by `close`
/// (after whitespace): `(body_end, region_end)`, or `None` while the text after `q` could still
/// become `close`.
pub(crate) fn closing_marker(region: &str, q: usize, close: &str, finishing: bool) -> Option<(usize, usize)> {
    let after = &region[q..];
    let t = after.trim_start();
    if t.starts_with(close) {
        return Some((q, region.len() - t.len() + close.len()));
    }
    if !finishing && close.starts_with(t) {
        return None;
    }
    Some((q, q))
}

/// Whether `hay` contains any of the bytes `set`.
pub(crate) fn contains_any(hay: &str, set: &[u8]) -> bool {
    position_of_any(hay.as_bytes(), set).is_some()
}

/// Earliest marker in `hay` as `(offset, index)`, the longest on a tie (the same answer as
/// `scan::find_first`), found in one pass: `memchr` jumps between bytes that can start a marker.
pub(crate) fn next_marker(hay: &str, markers: &[&str], firsts: &[u8]) -> Option<(usize, usize)> {
    let bytes = hay.as_bytes();
    if let [first] = *firsts {
        // One byte starts every marker (DeepSeek's `<｜`...): one iterator over its occurrences
        // rather than a fresh search from each rejected one.
        return memchr::memchr_iter(first, bytes).find_map(|p| marker_at(bytes, p, markers).map(|i| (p, i)));
    }
    let mut from = 0;
    while let Some(off) = position_of_any(&bytes[from..], firsts) {
        let p = from + off;
        if let Some(i) = marker_at(bytes, p, markers) {
            return Some((p, i));
        }
        from = p + 1;
    }
    None
}

/// The longest of `markers` at offset `p` of `bytes`.
pub(crate) fn marker_at(bytes: &[u8], p: usize, markers: &[&str]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, m) in markers.iter().enumerate() {
        if !m.is_empty()
            && scan::has_prefix(&bytes[p..], m.as_bytes())
            && best.is_none_or(|b| m.len() > markers[b].len())
        {
            best = Some(i);
        }
    }
    best
}

/// Distinct first bytes of a region's few end markers, without allocating (this runs per push).
pub(crate) struct FirstBytes {
    bytes: [u8; 8],
    len: usize,
}

impl FirstBytes {
    pub(crate) fn of(markers: &[&str]) -> Self {
        let mut out = Self { bytes: [0; 8], len: 0 };
        for b in markers.iter().filter_map(|m| m.as_bytes().first()) {
            if !out.as_slice().contains(b) && out.len < out.bytes.len() {
                out.bytes[out.len] = *b;
                out.len += 1;
            }
        }
        out
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

pub(crate) fn position_of_any(h: &[u8], set: &[u8]) -> Option<usize> {
    match *set {
        [] => None,
        [a] => scan::byte(a, h),
        [a, b] => scan::byte2(a, b, h),
        [a, b, c] => scan::byte3(a, b, c, h),
        _ => h.iter().position(|b| set.contains(b)),
    }
}
