//! The one streaming engine behind every tool-call format.
//!
//! Text mode scans for the spec's start markers (holding back any suffix that could begin one,
//! via `crate::scan`). A start marker opens a region that is buffered until its end (end marker
//! or closed bracket group), then read by the spec's body grammar. A body that does not parse,
//! or that names an undeclared tool, falls back to normal text verbatim. Scan positions are
//! kept across pushes, so each byte is examined a bounded number of times.
//!
//! Decisions depend only on the text seen, never on where chunks split it, which is why a
//! streamed parse equals a complete one, partial calls included (the crate docs' policy on calls
//! that never complete). Whitespace-only text around calls is held and dropped (`Gap`).
use super::body::{continuation, parse_body, whole_without_end, Call, Outcome, Target};
use super::ctx::Ctx;
use super::ends::{closing_marker, contains_any, marker_end, next_marker, Balance, JsonStrings};
use super::json_stream::special;
use super::live::{Between, Idle, Live, Readers};
use super::spec::{Body, End, Opens, Spec, TextMarkers};
use super::string_run::StringRun;
use super::Forced;
use super::{Abandoned, ToolDelta};
use crate::scan::{self, partial_suffix_len};

#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per engine, never collected; boxing the region would allocate per region"
)]
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

impl Mode {
    /// A region whose body starts at `body_start` (its start marker before that).
    fn region(end: End, target: Target, body_start: usize) -> Self {
        Mode::Region {
            end,
            target,
            body_start,
            scan: body_start,
            balance: Balance::default(),
            live: Live::new(body_start),
        }
    }
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
    /// Bytes of normal text emitted so far (where abandoned regions' text goes back).
    emitted: usize,
    /// Calls that went live and never completed, and the text a complete parse has instead.
    abandoned: Abandoned,
    /// The current region's JSON string state for its end-marker search, when its body is JSON
    /// (kept here rather than in `Mode::Region`, which is moved on every step).
    strings: Option<JsonStrings>,
    /// Index of the current region's first call.
    first_call: usize,
    /// Whitespace-only normal text held around calls.
    gap: Gap,
    /// The current region is the JSON that `tool_choice` forced.
    forced_region: bool,
}

/// Normal text that is only whitespace, held until what follows settles it: the newline a model
/// writes before, between or after its calls is formatting, not content (a client shows a
/// `content: "\n"` beside the calls as an empty message). Text with any other character passes
/// with the whitespace held before it; whitespace in a stretch that already has text passes.
#[derive(Debug, Default)]
struct Gap {
    held: String,
    /// The stretch since the last call (or the start) has text other than whitespace.
    texted: bool,
    /// Calls started when the stretch began.
    calls: usize,
}

/// Append `text` to the normal text through the gap rule, counting what is emitted. `calls` is
/// the number of calls started so far: a call since the last text drops the held whitespace.
fn put_text(out: &mut ToolDelta, emitted: &mut usize, gap: &mut Gap, calls: usize, text: &str) {
    if text.is_empty() {
        return;
    }
    if calls != gap.calls {
        gap.calls = calls;
        gap.texted = false;
        gap.held.clear();
    }
    if !gap.texted {
        if text.trim().is_empty() {
            gap.held.push_str(text);
            return;
        }
        gap.texted = true;
        out.normal_text.push_str(&gap.held);
        *emitted += gap.held.len();
        gap.held.clear();
    }
    out.normal_text.push_str(text);
    *emitted += text.len();
}

/// Text left inside a tool region after its calls that starts like another call's JSON (`{`,
/// `[`, a `,` separator): a malformed sibling, skipped as SMG and vLLM skip one bad call among
/// several, rather than shown as content.
fn sibling_debris(text: &str) -> bool {
    text.trim_start().starts_with(['{', '[', ','])
}

/// End of output: held whitespace is text only in an output without calls.
fn end_gap(out: &mut ToolDelta, emitted: &mut usize, gap: &mut Gap, calls: usize) {
    if calls == 0 {
        out.normal_text.push_str(&gap.held);
        *emitted += gap.held.len();
    }
    gap.held.clear();
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
            emitted: 0,
            abandoned: Abandoned::default(),
            strings: None,
            first_call: 0,
            gap: Gap::default(),
            forced_region: false,
        }
    }

    /// Enter a region whose body starts at `body_start`.
    fn enter(&mut self, end: End, target: Target, body_start: usize) {
        self.strings = target.is_json().then(JsonStrings::default);
        self.first_call = self.next_index;
        self.forced_region = false;
        self.mode = Mode::region(end, target, body_start);
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

    /// The calls this engine started that a complete parse does not report.
    pub(crate) fn abandoned(&self) -> &Abandoned {
        &self.abandoned
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
            put_text(out, &mut self.emitted, &mut self.gap, self.next_index, text);
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
    /// when it cannot end the region; true when settled (else `run` takes it). That holds when
    /// the region was scanned to its end and `text` holds no byte an end marker starts with.
    /// Then the live call waits for nothing or for a byte `text` does not hold, or `text` is
    /// plain characters inside a JSON string value, written through as a fragment (inside a
    /// long value, most pushes), or else the live call reads `text` at once.
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
                &mut self.abandoned.calls,
                out,
            );
        }
        true
    }

    pub(crate) fn finish(&mut self, out: &mut ToolDelta) {
        self.run(true, out);
        end_gap(out, &mut self.emitted, &mut self.gap, self.next_index);
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
        put_text(
            out,
            &mut self.emitted,
            &mut self.gap,
            self.next_index,
            &self.buf[self.pos..self.pos + n],
        );
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
                        raw: false,
                    },
                ),
                Forced::List => ('[', Target::Body(Body::Json)),
            };
            self.forced = None;
            if first == opener {
                // Whitespace before the forced JSON is no content.
                self.pos += ws;
                self.at_start = false;
                self.enter(End::Balanced, target, 0);
                self.forced_region = true;
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
                let undecided = |m: &str| m.len() > rest.len() && m.starts_with(rest);
                if !finishing && (self.markers.iter().any(|m| undecided(m)) || undecided(lead.opens)) {
                    // Might be a start marker (or the leading text) rather than not: wait.
                    return false;
                }
                let opens_marker = self.markers.iter().any(|m| rest.starts_with(m));
                let leads = (lead.first.is_empty() || lead.first.contains(first))
                    && rest.starts_with(lead.opens)
                    && !opens_marker;
                self.at_start = false;
                if leads {
                    // A region that must start with given text owns the whitespace before it.
                    if lead.opens.is_empty() {
                        self.emit_text(ws, out);
                    }
                    self.enter(lead.end, Target::Body(lead.body), 0);
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
        match self.spec.regions.get(i) {
            Some(region) => {
                match region.probe.map_or(Opens::Yes, |probe| probe(&tail[marker.len()..])) {
                    Opens::Yes => {}
                    Opens::Pending if !finishing => {
                        self.emit_text(pos, out);
                        return false;
                    }
                    // Not a call's head: the marker is ordinary text.
                    _ => {
                        self.emit_text(pos + marker.len(), out);
                        return true;
                    }
                }
                self.emit_text(pos, out);
                let body_start = if region.in_body { 0 } else { marker.len() };
                self.enter(region.end, Target::Body(region.body), body_start);
            }
            None if i < self.spec.regions.len() + self.spec.strip.len() => {
                self.emit_text(pos, out);
                self.pos += marker.len();
            }
            None => {
                self.emit_text(pos + marker.len(), out);
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
        let (ctx, readers, next_index, abandoned, strings) = (
            &self.ctx,
            &mut self.readers,
            &mut self.next_index,
            &mut self.abandoned.calls,
            &mut self.strings,
        );
        // Whether an end marker found at `at` lies inside a JSON string: the live call reading
        // the arguments knows (nearly always, at no cost); else the quotes before it are counted.
        let mut inside = |at: usize| {
            let Some(st) = strings.as_mut() else {
                return false;
            };
            live.advance(target, &region[..at], false, ctx, readers, next_index, abandoned, out);
            match live.in_json_string(readers, region, at) {
                Some(inside) => inside,
                None => st.inside(region.as_bytes(), at),
            }
        };
        let found = match *end {
            End::Marker(ends) => marker_end(region, scan, ends, ends.len(), &mut inside),
            End::MarkerKeep(ends, consumed) => marker_end(region, scan, ends, consumed, &mut inside),
            End::Balanced => balance.advance(region, scan, self.spec.skip, finishing).map(|q| (q, q)),
            End::BalancedThen(close) => balance
                .advance(region, scan, self.spec.skip, finishing)
                .and_then(|q| closing_marker(region, q, close, finishing)),
        };
        // Calls go live on text that is certainly inside the region.
        let limit = found.map_or(*scan, |(body_end, _)| body_end);
        live.advance(
            target,
            &region[..limit],
            found.is_some(),
            &self.ctx,
            &mut self.readers,
            &mut self.next_index,
            &mut self.abandoned.calls,
            out,
        );
        let Some((body_end, region_end)) = found else {
            return finishing && self.unterminated(out);
        };
        if live.emitted {
            let (calls, text) = match live.between() {
                Between::Dead => (Vec::new(), String::new()),
                _ => continuation(target, &region[live.cursor..body_end], &self.ctx),
            };
            if live.completed == 0 && calls.is_empty() {
                // Every call that went live broke: the region is text after all.
                self.abandon_region(region_end);
            } else {
                for Call { id, name, arguments } in calls {
                    out.push_call(self.next_index, id.as_deref(), &name, &arguments);
                    self.next_index += 1;
                }
                if !sibling_debris(&text) {
                    put_text(out, &mut self.emitted, &mut self.gap, self.next_index, &text);
                }
            }
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
                put_text(out, &mut self.emitted, &mut self.gap, self.next_index, &trailing);
            }
            Outcome::Calls(..) | Outcome::Text => put_text(
                out,
                &mut self.emitted,
                &mut self.gap,
                self.next_index,
                &region[..region_end],
            ),
            Outcome::Drop => {}
            Outcome::Follow { target, end } => {
                // The header stays in the region's text (an abandoned call gives it back).
                self.enter(end, target, region_end);
                return true;
            }
        }
        self.pos += region_end;
        self.mode = Mode::Text;
        true
    }

    /// The output ended inside the current region, before its end. It is calls only if it
    /// reads whole: every call's arguments closed and nothing but whitespace after them (a
    /// missing end marker after that is tolerated: it is often a stop token the server cut).
    /// Otherwise it is text, and calls of it that went live are abandoned.
    fn unterminated(&mut self, out: &mut ToolDelta) -> bool {
        let Mode::Region {
            target,
            body_start,
            live,
            ..
        } = &mut self.mode
        else {
            return false;
        };
        let region = &self.buf[self.pos..];
        let len = region.len();
        // Everything there is, read as if more could come: a call still open stays open. A GLM
        // call closes only with its region; cut off right after a closed value it is whole
        // (SGLang's GLM-4.5 detector reports it), and reads as if the region ended there.
        let closes = matches!(target, Target::Body(Body::Glm)) && region.trim_end().ends_with("</arg_value>");
        live.advance(
            target,
            region,
            closes,
            &self.ctx,
            &mut self.readers,
            &mut self.next_index,
            &mut self.abandoned.calls,
            out,
        );
        if live.emitted {
            let rest = match live.between() {
                Between::At(cursor) => Some(&region[cursor..]),
                Between::Tail => Some(""),
                Between::Dead | Between::Inside => None,
            };
            // Complete calls, then text (Llama 3's `<|python_tag|>` call followed by prose, its
            // end-of-turn token cut as a stop): the calls, and the text as normal text. A broken
            // sibling after them is dropped, as in a closed region.
            let whole = rest.map(|rest| continuation(target, rest, &self.ctx));
            match whole {
                Some((calls, text)) if live.completed > 0 || !calls.is_empty() => {
                    for Call { id, name, arguments } in calls {
                        out.push_call(self.next_index, id.as_deref(), &name, &arguments);
                        self.next_index += 1;
                    }
                    if !sibling_debris(&text) {
                        put_text(out, &mut self.emitted, &mut self.gap, self.next_index, &text);
                    }
                }
                _ => self.abandon_region(len),
            }
        } else if self.forced_region || matches!(target, Target::Body(Body::HarmonyHeader { .. }) | Target::Discard) {
            // A header that never reached its text, or hidden text: nothing to show. The JSON
            // that `tool_choice` forced, cut off before a call went live, is no content either:
            // it is the server's wrapper, not the model's answer.
        } else {
            let body = &region[*body_start..];
            let calls = match whole_without_end(target, body).then(|| parse_body(target, body, &self.ctx)) {
                // Complete calls and text after them: the text is normal text (see above).
                Some(Outcome::Calls(calls, trailing)) if calls.iter().all(|c| self.ctx.declared(&c.name)) => {
                    Some((calls, trailing))
                }
                Some(Outcome::Drop) => Some((Vec::new(), String::new())),
                // A header whose text never came (Functionary's `>>>NAME` line) is text.
                _ => None,
            };
            match calls {
                Some((calls, trailing)) => {
                    for Call { id, name, arguments } in calls {
                        out.push_call(self.next_index, id.as_deref(), &name, &arguments);
                        self.next_index += 1;
                    }
                    if !sibling_debris(&trailing) {
                        put_text(out, &mut self.emitted, &mut self.gap, self.next_index, &trailing);
                    }
                }
                None => put_text(
                    out,
                    &mut self.emitted,
                    &mut self.gap,
                    self.next_index,
                    &self.buf[self.pos..],
                ),
            }
        }
        self.pos += len;
        self.mode = Mode::Text;
        true
    }

    /// The current region (its first `len` bytes) is not calls after all: every call of it
    /// that went live is abandoned, and a complete parse has its text where it stood.
    fn abandon_region(&mut self, len: usize) {
        let calls = &mut self.abandoned.calls;
        calls.extend(self.first_call..self.next_index);
        calls.sort_unstable();
        calls.dedup();
        let text = self.buf[self.pos..self.pos + len].to_string();
        self.abandoned.text.push((self.emitted, text));
    }
}
