//! The one streaming engine behind every tool-call format.
//!
//! Text mode scans for the spec's start markers (holding back any suffix that could begin one,
//! via `crate::scan`). A start marker opens a region that is buffered until its end (end marker
//! or closed bracket group), then read by the spec's body grammar. A body that does not parse,
//! or that names an undeclared tool, falls back to normal text verbatim. Scan positions are
//! kept across pushes, so each byte is examined a bounded number of times.
//!
//! Decisions depend only on the text seen, never on where chunks split it, which is why a
//! streamed parse equals a complete one.
use super::body::{continuation, parse_body, Call, Outcome, Target};
use super::json_stream::special;
use super::live::{Idle, Live, Readers};
use super::spec::Body;
use super::spec::{End, Spec, TextMarkers};
use super::Forced;
use super::{ToolDef, ToolDelta};
use crate::scan::{self, partial_suffix_len};

/// Declared tools, used to reject unknown names and to type XML-style parameters.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ctx {
    tools: Option<Vec<ToolDef>>,
}

impl Ctx {
    pub(crate) fn new(tools: Option<Vec<ToolDef>>) -> Self {
        Self { tools }
    }

    pub(crate) fn declared(&self, name: &str) -> bool {
        self.tools.as_ref().is_none_or(|ts| ts.iter().any(|t| t.name == name))
    }

    /// The JSON-schema `type` of parameter `key` of tool `tool`, if declared.
    pub(crate) fn param_type(&self, tool: &str, key: &str) -> Option<&str> {
        let def = self.tools.as_ref()?.iter().find(|t| t.name == tool)?;
        let ty = def.parameters.as_ref()?.get("properties")?.get(key)?.get("type")?;
        match ty {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Array(types) => types.iter().filter_map(|t| t.as_str()).find(|t| *t != "null"),
            _ => None,
        }
    }
}

/// Bracket matcher state for `End::Balanced`, resumable across pushes.
#[derive(Debug, Clone, Default)]
struct Balance {
    depth: u32,
    quote: u8,
    escaped: bool,
    /// Where the first group closed, once it has (`End::BalancedThen` may still wait for its
    /// closing marker, and must not scan on into a second group meanwhile).
    closed: Option<usize>,
}

impl Balance {
    /// Advance from `*pos`; returns the offset just past the closing bracket of the first group.
    fn advance(&mut self, buf: &str, pos: &mut usize, skip: &[&str], finishing: bool) -> Option<usize> {
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

#[derive(Debug)]
enum Mode {
    Text,
    /// The unconsumed text starts with the region (its start marker first); offsets are
    /// relative to that start.
    Region {
        end: End,
        target: Target,
        body_start: usize,
        scan: usize,
        balance: Balance,
        live: Live,
    },
}

/// Per-request engine state.
#[derive(Debug)]
pub(crate) struct Engine {
    spec: &'static Spec,
    /// Region start markers, then strip markers, then `lead_after` markers.
    markers: &'static [&'static str],
    /// Distinct first bytes of `markers`: a slice without any of them holds no marker and no
    /// marker prefix, which settles most pushes with one `memchr` pass.
    firsts: &'static [u8],
    ctx: Ctx,
    /// Arguments readers shared by the regions' live calls.
    readers: Readers,
    buf: String,
    /// Bytes of `buf` consumed during this push. They are dropped once per push rather than
    /// per region, so a large push holding many regions stays linear.
    pos: usize,
    mode: Mode,
    /// Only whitespace seen so far (a `Leading` region may still open).
    at_start: bool,
    next_index: usize,
    /// Until the first character settles it: the output may open with what `tool_choice`
    /// forced (an arguments object, a JSON list of calls).
    forced: Option<Forced>,
    /// Set while the last push ended inside a live call's JSON string value with everything
    /// read: the next piece, if it holds none of the run's stop bytes, is that call's next
    /// arguments fragment as it stands. Inside a long string argument that is most pieces, and
    /// they then skip the region machinery entirely. Any other push clears it.
    string_run: Option<StringRun>,
}

/// A live call's JSON string value, read up to the end of the buffered region (see
/// `Engine::string_run`).
#[derive(Debug, Clone, Copy)]
struct StringRun {
    /// The call whose arguments the value belongs to.
    index: usize,
    /// Bytes that end the run: those a JSON string cannot hold as is (quote, backslash, control
    /// bytes) and the first bytes of the region's end markers. A bit set, one bit per byte.
    stop: [u64; 4],
}

impl StringRun {
    fn new(index: usize, ends: &[&str]) -> Self {
        // Control bytes 0x00-0x1f, then `"` (0x22) and `\\` (0x5c).
        let mut stop = [0x0000_0004_ffff_ffff, 0x1000_0000, 0, 0];
        for first in ends.iter().filter_map(|e| e.as_bytes().first()) {
            stop[usize::from(first >> 6)] |= 1 << (first & 63);
        }
        Self { index, stop }
    }

    /// Whether `text` is plain characters that continue the run.
    fn continues(&self, text: &str) -> bool {
        text.bytes()
            .all(|b| self.stop[usize::from(b >> 6)] & (1 << (b & 63)) == 0)
    }
}

impl Engine {
    const INITIAL_BUF: usize = 512;

    pub(crate) fn new(spec: &'static Spec, text: &'static TextMarkers, ctx: Ctx) -> Self {
        Self {
            spec,
            markers: &text.markers,
            firsts: &text.firsts,
            ctx,
            readers: Readers::new(),
            buf: String::new(),
            pos: 0,
            mode: Mode::Text,
            at_start: spec.leading.is_some(),
            next_index: 0,
            forced: None,
            string_run: None,
        }
    }

    /// Start over on another output, as `new` (or `forced`) would, keeping the text buffer's
    /// and the arguments readers' memory.
    pub(crate) fn renew(&mut self, spec: &'static Spec, text: &'static TextMarkers, ctx: Ctx, forced: Option<Forced>) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let readers = std::mem::replace(&mut self.readers, Readers::new());
        *self = match forced {
            Some(forced) => Self::forced(spec, text, ctx, forced),
            None => Self::new(spec, text, ctx),
        };
        self.buf = buf;
        self.readers = readers;
    }

    /// The text buffer's capacity in bytes.
    pub(crate) fn buffered_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Drop the declared tools (a kept engine should not hold one request's schemas until the
    /// next parse).
    pub(crate) fn forget_tools(&mut self) {
        self.ctx = Ctx::default();
    }

    /// An engine for output that a request's `tool_choice` forced (see `ToolCallParser::forced`).
    pub(crate) fn forced(spec: &'static Spec, text: &'static TextMarkers, ctx: Ctx, forced: Forced) -> Self {
        let mut engine = Self::new(spec, text, ctx);
        engine.at_start = true;
        engine.forced = Some(forced);
        engine
    }

    pub(crate) fn push(&mut self, text: &str, out: &mut ToolDelta) {
        if let Some(run) = &self.string_run {
            let index = run.index;
            if run.continues(text) && self.continue_run(index, text, out) {
                return;
            }
            self.string_run = None;
        }
        self.push_slow(text, out);
    }

    /// `push` of anything but a string run's next piece: kept out of line, so that the run's
    /// path stays a short function.
    #[inline(never)]
    fn push_slow(&mut self, text: &str, out: &mut ToolDelta) {
        if self.buf.is_empty()
            && matches!(self.mode, Mode::Text)
            && !self.at_start
            && self.forced.is_none()
            && !contains_any(text, self.firsts)
        {
            // Plain text with nothing held: no marker can start in it (what `text_step` would
            // find, without copying it through the buffer). Most of a model's output.
            out.normal_text.push_str(text);
            return;
        }
        let before = self.buf.len() - self.pos;
        if self.buf.capacity() == 0 {
            // A tool region is held whole until it ends: room for a typical one up front saves
            // a streamed region the first several doublings.
            self.buf.reserve(text.len().max(Self::INITIAL_BUF));
        }
        self.buf.push_str(text);
        if self.quick_push(before, text, out) {
            return;
        }
        self.run(false, out);
    }

    /// Append `text`, plain characters, to the region and to call `index`'s arguments: what
    /// `quick_push` does for them, without its checks (the run's stop bytes cover them).
    fn continue_run(&mut self, index: usize, text: &str, out: &mut ToolDelta) -> bool {
        let Mode::Region { scan, live, .. } = &mut self.mode else {
            return false;
        };
        self.buf.push_str(text);
        *scan = self.buf.len() - self.pos;
        live.cursor += text.len();
        out.push_fragment(index, text);
        true
    }

    /// Settle `text`, just appended to a region of `before` bytes, without the step machinery
    /// when it cannot end the region; true when settled (else `run` takes it). That holds when the region was scanned
    /// to its end and `text` holds no byte an end marker starts with. Then the live call waits
    /// for nothing or for a byte `text` does not hold, or `text` is plain characters inside a
    /// JSON string value, written through as a fragment (inside a long value, most pushes), or
    /// else the live call reads `text` at once.
    fn quick_push(&mut self, before: usize, text: &str, out: &mut ToolDelta) -> bool {
        let Mode::Region {
            end: End::Marker(ends),
            target,
            scan: scanned,
            live,
            ..
        } = &mut self.mode
        else {
            return false;
        };
        if *scanned != before {
            return false;
        }
        let bytes = text.as_bytes();
        if !ends
            .iter()
            .filter_map(|e| e.as_bytes().first())
            .all(|b| scan::byte(*b, bytes).is_none())
        {
            return false;
        }
        let settled = match live.idle(&self.readers, before) {
            Some(Idle::Done) => true,
            // The whole wait, not only `text`: the byte may have come earlier, in a marker
            // still incomplete then.
            Some(Idle::Head(wake, from)) => self.buf.as_bytes()[self.pos..]
                .get(from..)
                .is_some_and(|waited| scan::byte(wake, waited).is_none()),
            Some(Idle::XmlValue) => {
                // `text` has no `<`, so it is searched through as well, and the next push can
                // take this path again.
                let settled = scan::byte(b'<', bytes).is_none();
                if settled {
                    self.readers.searched_more(text.len());
                }
                settled
            }
            None => {
                let index = special(bytes)
                    .is_none()
                    .then(|| live.pass_string(&self.readers, before, text, out))
                    .flatten();
                if let Some(index) = index {
                    self.string_run = Some(StringRun::new(index, ends));
                }
                index.is_some()
            }
        };
        *scanned = self.buf.len() - self.pos;
        if !settled {
            // The region cannot end in `text`: its calls read it now, as `region_step` would
            // after scanning it for an end, without the scan.
            live.advance(
                target,
                &self.buf[self.pos..],
                false,
                &self.ctx,
                &mut self.readers,
                &mut self.next_index,
                out,
            );
        }
        true
    }

    pub(crate) fn finish(&mut self, out: &mut ToolDelta) {
        self.run(true, out);
    }

    fn run(&mut self, finishing: bool, out: &mut ToolDelta) {
        self.string_run = None;
        loop {
            let progressed = match self.mode {
                Mode::Text => self.text_step(finishing, out),
                Mode::Region { .. } => self.region_step(finishing, out),
            };
            if !progressed {
                break;
            }
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
    }

    /// The unconsumed text.
    fn rest(&self) -> &str {
        &self.buf[self.pos..]
    }

    /// Emit the next `n` unconsumed bytes as normal text.
    fn emit_text(&mut self, n: usize, out: &mut ToolDelta) {
        out.normal_text.push_str(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
    }

    fn text_step(&mut self, finishing: bool, out: &mut ToolDelta) -> bool {
        if let Some(forced) = &self.forced {
            let rest = self.rest();
            let ws = rest.len() - rest.trim_start().len();
            let Some(first) = rest[ws..].chars().next() else {
                if finishing {
                    self.forced = None;
                    self.at_start = false;
                    self.emit_text(ws, out);
                }
                return false;
            };
            let (opener, target) = match forced {
                Forced::Call(name) => (
                    '{',
                    Target::Args {
                        name: name.clone(),
                        id: None,
                    },
                ),
                Forced::List => ('[', Target::Body(Body::Json)),
            };
            self.forced = None;
            if first == opener {
                // Whitespace before the forced JSON is no content.
                self.pos += ws;
                self.at_start = false;
                self.mode = Mode::Region {
                    end: End::Balanced,
                    target,
                    body_start: 0,
                    scan: 0,
                    balance: Balance::default(),
                    live: Live::new(0),
                };
                return true;
            }
            // Not what was forced (an engine that does not enforce `json_schema`): the format's
            // own markers are read as usual.
            self.at_start = self.spec.leading.is_some();
        }
        if self.at_start {
            if let Some(lead) = &self.spec.leading {
                let rest = self.rest();
                let ws = rest.len() - rest.trim_start().len();
                let rest = &rest[ws..];
                let Some(first) = rest.chars().next() else {
                    if finishing {
                        self.at_start = false;
                        self.emit_text(ws, out);
                    }
                    return false;
                };
                if !finishing && self.markers.iter().any(|m| m.len() > rest.len() && m.starts_with(rest)) {
                    // Might be a start marker rather than a leading call: undecided yet.
                    return false;
                }
                let opens_marker = self.markers.iter().any(|m| rest.starts_with(m));
                self.at_start = false;
                if (lead.first.is_empty() || lead.first.contains(first)) && !opens_marker {
                    self.emit_text(ws, out);
                    self.mode = Mode::Region {
                        end: lead.end,
                        target: Target::Body(lead.body),
                        body_start: 0,
                        scan: 0,
                        balance: Balance::default(),
                        live: Live::new(0),
                    };
                    return true;
                }
            }
        }
        let rest = self.rest();
        if !finishing && !contains_any(rest, self.firsts) {
            self.emit_text(rest.len(), out);
            return false;
        }
        let Some((pos, i)) = next_marker(rest, self.markers, self.firsts) else {
            let hold = if finishing {
                0
            } else {
                partial_suffix_len(rest, self.markers)
            };
            self.emit_text(rest.len() - hold, out);
            return false;
        };
        let marker = self.markers[i];
        let tail = &rest[pos..];
        if !finishing && self.markers.iter().any(|m| m.len() > tail.len() && m.starts_with(tail)) {
            // `marker` is complete but a longer marker may still follow: wait for it.
            self.emit_text(pos, out);
            return false;
        }
        self.emit_text(pos, out);
        match self.spec.regions.get(i) {
            Some(region) => {
                self.mode = Mode::Region {
                    end: region.end,
                    target: Target::Body(region.body),
                    body_start: marker.len(),
                    scan: marker.len(),
                    balance: Balance::default(),
                    live: Live::new(marker.len()),
                };
            }
            None if i < self.spec.regions.len() + self.spec.strip.len() => self.pos += marker.len(),
            None => {
                self.emit_text(marker.len(), out);
                self.at_start = true;
            }
        }
        true
    }

    fn region_step(&mut self, finishing: bool, out: &mut ToolDelta) -> bool {
        let Mode::Region {
            end,
            target,
            body_start,
            scan,
            balance,
            live,
            ..
        } = &mut self.mode
        else {
            return false;
        };
        let region = &self.buf[self.pos..];
        let found = match *end {
            End::Marker(ends)
                if !ends
                    .iter()
                    .any(|e| contains_any(&region[*scan..], e.as_bytes().get(..1).unwrap_or_default())) =>
            {
                *scan = region.len();
                None
            }
            End::Marker(ends) => match next_marker(&region[*scan..], ends, FirstBytes::of(ends).as_slice()) {
                Some((p, i)) => Some((*scan + p, *scan + p + ends[i].len())),
                None => {
                    *scan = region.len() - partial_suffix_len(&region[*scan..], ends);
                    None
                }
            },
            End::Balanced => balance.advance(region, scan, self.spec.skip, finishing).map(|q| (q, q)),
            End::BalancedThen(close) => balance
                .advance(region, scan, self.spec.skip, finishing)
                .and_then(|q| closing_marker(region, q, close, finishing)),
        };
        let ended = found.or(finishing.then_some((region.len(), region.len())));
        // Calls go live on text that is certainly inside the region.
        let limit = ended.map_or(*scan, |(body_end, _)| body_end);
        live.advance(
            target,
            &region[..limit],
            ended.is_some(),
            &self.ctx,
            &mut self.readers,
            &mut self.next_index,
            out,
        );
        let Some((body_end, region_end)) = ended else {
            return false;
        };
        if live.emitted {
            let (calls, text) = continuation(target, &region[live.cursor..body_end], &self.ctx);
            for Call { id, name, arguments } in calls {
                out.push_call(self.next_index, id.as_deref(), &name, &arguments);
                self.next_index += 1;
            }
            out.normal_text.push_str(&text);
            self.pos += region_end;
            self.mode = Mode::Text;
            return true;
        }
        let outcome = parse_body(target, &region[*body_start..body_end], &self.ctx);
        match outcome {
            Outcome::Calls(calls, trailing) if calls.iter().all(|c| self.ctx.declared(&c.name)) => {
                for Call { id, name, arguments } in calls {
                    out.push_call(self.next_index, id.as_deref(), &name, &arguments);
                    self.next_index += 1;
                }
                out.normal_text.push_str(&trailing);
            }
            Outcome::Calls(..) | Outcome::Text => out.normal_text.push_str(&region[..region_end]),
            Outcome::Drop => {}
            Outcome::Follow { target, end } => {
                self.mode = Mode::Region {
                    end,
                    target,
                    body_start: region_end,
                    scan: region_end,
                    balance: Balance::default(),
                    live: Live::new(region_end),
                };
                return true;
            }
        }
        self.pos += region_end;
        self.mode = Mode::Text;
        true
    }
}

/// The end of a region whose bracket group closed at `q` and that may be closed by `close`
/// (after whitespace): `(body_end, region_end)`, or `None` while the text after `q` could still
/// become `close`.
fn closing_marker(region: &str, q: usize, close: &str, finishing: bool) -> Option<(usize, usize)> {
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
fn contains_any(hay: &str, set: &[u8]) -> bool {
    position_of_any(hay.as_bytes(), set).is_some()
}

/// Earliest marker in `hay` as `(offset, index)`, the longest on a tie (the same answer as
/// `scan::find_first`), found in one pass: `memchr` jumps between bytes that can start a marker.
fn next_marker(hay: &str, markers: &[&str], firsts: &[u8]) -> Option<(usize, usize)> {
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
fn marker_at(bytes: &[u8], p: usize, markers: &[&str]) -> Option<usize> {
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
struct FirstBytes {
    bytes: [u8; 8],
    len: usize,
}

impl FirstBytes {
    fn of(markers: &[&str]) -> Self {
        let mut out = Self { bytes: [0; 8], len: 0 };
        for b in markers.iter().filter_map(|m| m.as_bytes().first()) {
            if !out.as_slice().contains(b) && out.len < out.bytes.len() {
                out.bytes[out.len] = *b;
                out.len += 1;
            }
        }
        out
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn position_of_any(h: &[u8], set: &[u8]) -> Option<usize> {
    match *set {
        [] => None,
        [a] => scan::byte(a, h),
        [a, b] => scan::byte2(a, b, h),
        [a, b, c] => scan::byte3(a, b, c, h),
        _ => h.iter().position(|b| set.contains(b)),
    }
}
