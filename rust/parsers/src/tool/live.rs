//! Live calls: a tool call's arguments stream while the model is still writing them.
//!
//! Inside a region, as soon as the text at the cursor fixes a call's name (and id) and its
//! arguments have begun (a JSON object's `{` then `"` or `}`; an XML dialect's first parameter),
//! the call goes live: its name is reported and the arguments are written as compact JSON
//! fragments by `JsonStream` or `XmlArgs`. After the arguments end, the format's tail (the `}`
//! of a wrapping object, an item's end marker) is skipped and the next call may go live. Every
//! decision depends only on the text before the cursor, so a streamed parse still equals a
//! complete one (`engine.rs` runs the same steps either way).
//!
//! Shapes whose name comes after the arguments, whose arguments are Python literals or
//! JSON-encoded strings, or that a header introduces, never go live: their region is read whole
//! when it ends, as before. What follows the live calls is read by `body::continuation`.
//!
//! A live call whose arguments break (or whose region ends before they close) is abandoned: its
//! index goes to the engine's `Abandoned` list and nothing more is written for it, so its
//! fragments stop where the valid text stopped. A malformed call among several (a bad head or
//! broken arguments inside an item) is skipped up to its end, and the next one may go live.
use super::body::Target;
use super::ctx::Ctx;
use super::heads::{head, skip_tail, Stop, Syntax, Tail};
use super::json_stream::{Fed, JsonStream};
use super::xml_stream::{XmlArgs, XmlFed, QWEN};
use super::ToolDelta;

#[derive(Debug)]
enum Phase {
    /// Looking for the next call's head at the cursor. `wait`: the last try stopped in a
    /// search for a marker starting with byte `.0`, from region offset `.1` on; until that byte
    /// arrives the head cannot parse further, so the try is not repeated (a head can take a
    /// dozen pushes to arrive, and each try re-reads it from its start).
    Head { wait: Option<(u8, usize)> },
    /// Streaming the arguments of call `index` with the engine's reader of this kind.
    Args {
        index: usize,
        reader: Reader,
        tail: Tail,
        /// Where a call that breaks is skipped to, when its body has more calls after it.
        skip: Option<Tail>,
    },
    /// Skipping the tail of the last call.
    Tail(Tail),
    /// Nothing more goes live in this region; the rest is read by `body::continuation`.
    Off,
    /// A call broke and nothing after it in this region is read.
    Dead,
}

/// Where a region's live calls stand (see `Live::between`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Between {
    /// Between calls: the text from this region offset on is not read yet.
    At(usize),
    /// A call's arguments are complete and its tail (an item's end marker) is being skipped.
    Tail,
    /// Inside a call's arguments, or the wrapping object of a call is still open.
    Inside,
    /// A call broke: the rest of the region is not read.
    Dead,
}

/// Why a live-call machine can let text pass unread (`Live::idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// No call goes live in this region any more.
    Done,
    /// A head waits for a marker that starts with this byte, from this region offset on (see
    /// `Phase::Head`): while the region holds no such byte from there, nothing changes.
    Head(u8, usize),
    /// An XML value typed when complete, searched through for its end tag: only a `<` matters.
    XmlValue,
}

/// Which reader reads a live call's arguments.
#[derive(Debug, Clone, Copy)]
enum Reader {
    Json,
    Xml,
}

/// The arguments readers, owned by the engine and reset for each call, so a call or a push costs
/// no reader and no output buffer of its own: their buffers keep their capacity across calls.
#[derive(Debug)]
pub(crate) struct Readers {
    json: JsonStream,
    xml: XmlArgs,
}

impl Readers {
    /// See `XmlArgs::searched_more`; for a `Live::idle` that waits on the XML reader's `<`.
    pub(crate) fn searched_more(&mut self, n: usize) {
        self.xml.searched_more(n);
    }

    pub(crate) fn new() -> Self {
        Self {
            json: JsonStream::new(),
            xml: XmlArgs::new(&QWEN, ""),
        }
    }
}

/// Live-call state of one region.
#[derive(Debug)]
pub(crate) struct Live {
    /// Region offset of the first byte not yet read by this machine.
    pub cursor: usize,
    /// Whether a call of this region went live.
    pub emitted: bool,
    /// Calls of this region whose arguments completed.
    pub completed: usize,
    phase: Phase,
}

impl Live {
    pub(crate) fn new(cursor: usize) -> Self {
        Self {
            cursor,
            emitted: false,
            completed: 0,
            phase: Phase::Head { wait: None },
        }
    }

    /// Whether offset `at` of `region`, read up to by `advance`, lies inside a JSON string, when
    /// the calls tell: the live call is reading JSON arguments, or calls completed and only
    /// whitespace follows them. `None` otherwise.
    pub(crate) fn in_json_string(&self, readers: &Readers, region: &str, at: usize) -> Option<bool> {
        match self.phase {
            Phase::Args {
                reader: Reader::Json, ..
            } if self.cursor == at => Some(readers.json.in_string()),
            Phase::Head { .. } | Phase::Tail(Tail::Nothing)
                if self.completed > 0 && region.get(self.cursor..at).is_some_and(|t| t.trim().is_empty()) =>
            {
                Some(false)
            }
            _ => None,
        }
    }

    /// Where the live calls stand.
    pub(crate) fn between(&self) -> Between {
        match self.phase {
            Phase::Head { .. } | Phase::Off | Phase::Tail(Tail::Nothing) => Between::At(self.cursor),
            Phase::Tail(Tail::Marker(_)) => Between::Tail,
            Phase::Tail(Tail::CloseObject) | Phase::Args { .. } => Between::Inside,
            Phase::Dead => Between::Dead,
        }
    }

    /// What must arrive before this machine can act, given `read` bytes of region read so far
    /// (all of them seen by `advance`); `None` when any text may matter.
    pub(crate) fn idle(&self, readers: &Readers, read: usize) -> Option<Idle> {
        match self.phase {
            Phase::Off | Phase::Dead => Some(Idle::Done),
            Phase::Head { wait: Some((b, from)) } => Some(Idle::Head(b, from)),
            Phase::Args {
                reader: Reader::Xml, ..
            } if read
                .checked_sub(self.cursor)
                .is_some_and(|unread| readers.xml.waits_for_tag(unread)) =>
            {
                Some(Idle::XmlValue)
            }
            _ => None,
        }
    }

    /// Write `text`, which follows the `read` bytes of region read so far, straight through
    /// as an arguments fragment when the call is live, JSON, inside a string value and has read
    /// everything before it: what `JsonStream::feed` would do, without its steps. The caller
    /// has checked that `text` is plain characters (nothing JSON escapes, no byte an end marker
    /// starts with). False (nothing done) otherwise.
    /// Returns the call's index when written.
    pub(crate) fn pass_string(
        &mut self,
        readers: &Readers,
        read: usize,
        text: &str,
        out: &mut ToolDelta,
    ) -> Option<usize> {
        let Phase::Args {
            index,
            reader: Reader::Json,
            ..
        } = self.phase
        else {
            return None;
        };
        if self.cursor != read || !readers.json.in_plain_value() {
            return None;
        }
        if !text.is_empty() {
            out.push_fragment(index, text);
            self.cursor += text.len();
        }
        Some(index)
    }

    /// Read `region` (cut where the region's end is certain not to lie) from the cursor.
    /// `ended`: the region ends at `region.len()`. Calls that break are added to `abandoned`.
    /// The engine's parts are passed one by one (rather than the engine) because the region's
    /// text borrows its buffer meanwhile.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn advance(
        &mut self,
        target: &Target,
        region: &str,
        ended: bool,
        ctx: &Ctx,
        readers: &mut Readers,
        next_index: &mut usize,
        abandoned: &mut Vec<usize>,
        out: &mut ToolDelta,
    ) {
        loop {
            let rest = &region[self.cursor..];
            match &mut self.phase {
                Phase::Off | Phase::Dead => return,
                Phase::Head { wait: Some((b, from)) }
                    if !ended && crate::scan::byte(*b, &region.as_bytes()[*from..]).is_none() =>
                {
                    return
                }
                Phase::Head { .. } => match head(target, rest, ctx) {
                    Ok(h) => {
                        out.push_call(*next_index, h.id.as_deref(), &h.name, "");
                        let reader = match h.syntax {
                            Syntax::Json => {
                                readers.json.reset();
                                Reader::Json
                            }
                            Syntax::Xml(dialect) => {
                                XmlArgs::open(out.fragment(*next_index));
                                readers.xml.reset(dialect, &h.name);
                                Reader::Xml
                            }
                        };
                        self.phase = Phase::Args {
                            index: *next_index,
                            reader,
                            tail: h.tail,
                            skip: h.skip,
                        };
                        *next_index += 1;
                        self.cursor += h.args;
                        self.emitted = true;
                    }
                    Err(Stop::Pending(wait)) if !ended => {
                        self.phase = Phase::Head {
                            wait: wait.map(|(b, at)| (b, self.cursor + at)),
                        };
                        return;
                    }
                    Err(Stop::Skip(tail)) => self.phase = Phase::Tail(tail),
                    Err(_) => self.phase = Phase::Off,
                },
                Phase::Args {
                    index,
                    reader,
                    tail,
                    skip,
                } => {
                    let (index, reader, tail, skip) = (*index, *reader, *tail, *skip);
                    // Written straight into the delta (`settle` drops a fragment left empty).
                    let frag = out.fragment(index);
                    let fed = match reader {
                        Reader::Xml => match readers.xml.feed(rest, ended, ctx, frag) {
                            XmlFed::More(n) => Step::More(n),
                            XmlFed::Done(n) => Step::Done(n),
                            XmlFed::Failed(n) => Step::Failed(n),
                        },
                        Reader::Json => {
                            let fed = readers.json.feed(rest, frag);
                            match fed {
                                Fed::More => Step::More(rest.len()),
                                Fed::Done(n) => Step::Done(n),
                                Fed::Failed(n) => Step::Failed(n),
                            }
                        }
                    };
                    out.settle();
                    match fed {
                        Step::More(n) => {
                            self.cursor += n;
                            if ended {
                                // The region ended inside the arguments.
                                abandoned.push(index);
                                self.phase = Phase::Dead;
                            }
                            return;
                        }
                        Step::Done(n) => {
                            self.cursor += n;
                            self.completed += 1;
                            self.phase = Phase::Tail(tail);
                        }
                        Step::Failed(n) => {
                            self.cursor += n;
                            abandoned.push(index);
                            // Inside an item or invoke block, the broken rest up to its end is
                            // dropped and the next call may still go live; elsewhere nothing
                            // more of the region is read.
                            self.phase = skip.map_or(Phase::Dead, Phase::Tail);
                        }
                    }
                }
                Phase::Tail(tail) => match skip_tail(*tail, rest) {
                    Ok(n) => {
                        self.cursor += n;
                        self.phase = Phase::Head { wait: None };
                    }
                    Err(Stop::Pending(_)) if !ended => return,
                    Err(_) => {
                        self.cursor = region.len();
                        self.phase = Phase::Off;
                    }
                },
            }
        }
    }
}

/// What an arguments reader did with the text it was given.
enum Step {
    More(usize),
    Done(usize),
    Failed(usize),
}
