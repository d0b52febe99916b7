//! The reasoning parser for gpt-oss Harmony output: a message-level state machine instead of the
//! marker tables of `engine.rs`, because a Harmony header is not a fixed string (see
//! `crate::harmony` for the header grammar).
//!
//! Each message's text goes where its header says: `analysis` to reasoning, `final`, a
//! `commentary` preamble or a header-less message to content. A tool call (`to=functions.x`) is
//! shown to no one by itself: with `keep_calls` (a tool-call parser runs next, as in the server's
//! pipeline) it is handed over in the content, header and terminator included, in the form
//! `<|start|>assistant to=... <|channel|>...<|message|>ARGS<|call|>`; otherwise it is dropped, as
//! built-in tool calls and other roles' messages always are. Several analysis messages make one
//! reasoning text.
//!
//! Whitespace: a message's text is kept exactly, except for newlines right before its end (a
//! terminator, the next header or the end of output), and whitespace between messages is
//! dropped; text between messages that is not only whitespace is content, verbatim (SGLang's
//! reading). Every decision depends only on the text seen, so streaming equals complete parsing.
use super::ReasoningDelta;
use crate::harmony::{self, Kind, CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START};
use crate::scan::{partial_suffix_len, with_held};

/// Every token the machine reacts to (all start with `<|`).
const TOKENS: &[&str] = &[START, CHANNEL, MESSAGE, CONSTRAIN, END, CALL, RETURN];

/// A header longer than this is not a header but text that happens to start like one.
const MAX_HEADER: usize = 1024;

/// Where a message's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Reasoning,
    Content,
    /// A function call's arguments: content when calls are kept, else nowhere.
    Call,
    Hidden,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside any message. `after`: a message ended (so whitespace alone is framing), rather than
    /// the output having just started. `visible`: text that is content has started here.
    Between { after: bool, visible: bool },
    /// Reading a header (in `Harmony::header`).
    Header,
    /// Inside a message's text.
    Text(Route),
}

/// What follows a piece of text.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// A token.
    Token(&'static str),
    /// The end of the output.
    End,
    /// Nothing yet: more text may come.
    More,
}

/// Per-request Harmony reasoning state.
#[derive(Debug, Clone)]
pub(crate) struct Harmony {
    state: State,
    /// Text held back: a possible token's start, newlines that may end a message, whitespace that
    /// may turn out to be framing, the start of a mid-role header.
    held: String,
    /// The header being read.
    header: String,
    keep_calls: bool,
    /// Thinking disabled: analysis text is content.
    disabled: bool,
}

impl Harmony {
    pub(crate) fn new(prompt_opened_reasoning: bool, disabled: bool) -> Self {
        let state = if prompt_opened_reasoning && !disabled {
            State::Text(Route::Reasoning)
        } else {
            State::Between {
                after: false,
                visible: false,
            }
        };
        Self {
            state,
            held: String::new(),
            header: String::new(),
            keep_calls: false,
            disabled,
        }
    }

    pub(crate) fn keep_calls(&mut self, keep: bool) {
        self.keep_calls = keep;
    }

    pub(crate) fn in_reasoning(&self) -> bool {
        self.state == State::Text(Route::Reasoning)
    }

    pub(crate) fn push(&mut self, text: &str, out: &mut ReasoningDelta) {
        self.run(text, false, out);
    }

    pub(crate) fn finish(&mut self, out: &mut ReasoningDelta) {
        self.run("", true, out);
        // A header that never reached `<|message|>` carries nothing to show (the prompt-style
        // `<|start|>assistant` that a rendered conversation ends with, or output cut off).
        self.header.clear();
    }

    fn run(&mut self, text: &str, finishing: bool, out: &mut ReasoningDelta) {
        let joined = with_held(&mut self.held, text);
        let buf: &str = &joined;
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            let found = next_token(rest);
            let (seg_len, next) = match found {
                Some((p, t)) => (p, Next::Token(t)),
                None if finishing => (rest.len(), Next::End),
                None => (rest.len(), Next::More),
            };
            let seg = &rest[..seg_len];
            let partial = match next {
                Next::More => partial_suffix_len(seg, TOKENS),
                _ => 0,
            };
            let body = &seg[..seg.len() - partial];
            let hold = self.text(body, next, out);
            match next {
                Next::Token(t) => {
                    pos += seg_len + t.len();
                    self.token(t, out);
                }
                Next::End => return,
                Next::More => {
                    self.held.push_str(&seg[body.len() - hold..]);
                    return;
                }
            }
        }
    }

    fn emit(&self, route: Route, text: &str, out: &mut ReasoningDelta) {
        match route {
            Route::Reasoning => out.reasoning.push_str(text),
            Route::Content => out.content.push_str(text),
            Route::Call if self.keep_calls => out.content.push_str(text),
            Route::Call | Route::Hidden => {}
        }
    }

    /// Read `seg`, text with no token in it, followed by `next`. Returns how many of its last
    /// bytes to hold back (only when more text may follow).
    fn text(&mut self, seg: &str, next: Next, out: &mut ReasoningDelta) -> usize {
        match self.state {
            State::Text(route) => {
                let ends_message = match next {
                    Next::Token(t) => !matches!(t, MESSAGE | CONSTRAIN),
                    Next::End | Next::More => true,
                };
                if !ends_message {
                    self.emit(route, seg, out);
                    return 0;
                }
                let kept = seg.trim_end_matches('\n');
                self.emit(route, kept, out);
                match next {
                    Next::More => seg.len() - kept.len(),
                    _ => 0,
                }
            }
            State::Header => {
                self.header.push_str(seg);
                if self.header.len() > MAX_HEADER {
                    // Not a header after all: what was read is text.
                    out.content.push_str(&self.header);
                    self.header.clear();
                    self.state = State::Between {
                        after: false,
                        visible: true,
                    };
                }
                0
            }
            State::Between { visible: true, .. } => {
                out.content.push_str(seg);
                0
            }
            State::Between { after, visible: false } => {
                let t = seg.trim_start();
                if t.is_empty() {
                    return match next {
                        Next::More => seg.len(),
                        Next::End if !after => {
                            out.content.push_str(seg);
                            0
                        }
                        // Whitespace around tokens is framing.
                        _ => 0,
                    };
                }
                if !after {
                    // The prompt ended with `<|start|>assistant`: the output may continue that
                    // header (` to=functions.x<|channel|>commentary ...`).
                    if t.starts_with("to=") {
                        self.header.clear();
                        self.header.push_str(seg);
                        self.state = State::Header;
                        return 0;
                    }
                    if matches!(next, Next::More) && "to=".starts_with(t) {
                        return seg.len();
                    }
                }
                out.content.push_str(seg);
                self.state = State::Between { after, visible: true };
                0
            }
        }
    }

    fn token(&mut self, t: &'static str, out: &mut ReasoningDelta) {
        match self.state {
            State::Text(route) => match t {
                MESSAGE | CONSTRAIN => self.emit(route, t, out),
                END | CALL | RETURN => {
                    // A kept call keeps its terminator: the tool parser reads the end of the
                    // arguments from it.
                    if route == Route::Call {
                        self.emit(route, t, out);
                    }
                    self.state = State::Between {
                        after: true,
                        visible: false,
                    };
                }
                _ => {
                    // The next header ends the message without its terminator.
                    if route == Route::Call {
                        self.emit(route, CALL, out);
                    }
                    self.open_header(t);
                }
            },
            State::Header => match t {
                MESSAGE => {
                    let route = self.route();
                    if route == Route::Call && self.keep_calls {
                        let h = self.header.trim_start();
                        if !(h.starts_with(START) || h.starts_with(CHANNEL)) {
                            out.content.push_str(START);
                            out.content.push_str("assistant ");
                        }
                        out.content.push_str(h);
                        out.content.push_str(MESSAGE);
                    }
                    self.header.clear();
                    self.state = State::Text(route);
                }
                CHANNEL | CONSTRAIN => self.header.push_str(t),
                START => self.open_header(t),
                _ => {
                    // A terminator before `<|message|>`: the header had no text; nothing to show.
                    self.header.clear();
                    self.state = State::Between {
                        after: true,
                        visible: false,
                    };
                }
            },
            State::Between { after, .. } => match t {
                START | CHANNEL => self.open_header(t),
                MESSAGE => self.state = State::Text(Route::Content),
                CONSTRAIN => {
                    out.content.push_str(t);
                    self.state = State::Between { after, visible: true };
                }
                _ => {
                    self.state = State::Between {
                        after: true,
                        visible: false,
                    }
                }
            },
        }
    }

    fn open_header(&mut self, t: &str) {
        self.header.clear();
        self.header.push_str(t);
        self.state = State::Header;
    }

    /// Where the text of the message whose header was just read goes.
    fn route(&self) -> Route {
        match harmony::classify(&self.header) {
            Kind::Analysis if self.disabled => Route::Content,
            Kind::Analysis => Route::Reasoning,
            Kind::Content => Route::Content,
            Kind::Call(_) => Route::Call,
            Kind::Hidden => Route::Hidden,
        }
    }
}

/// The earliest token in `s` and its offset.
fn next_token(s: &str) -> Option<(usize, &'static str)> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&bytes[from..], b"<|") {
        let p = from + off;
        if let Some(t) = TOKENS.iter().find(|t| bytes[p..].starts_with(t.as_bytes())) {
            return Some((p, t));
        }
        from = p + 1;
    }
    None
}
