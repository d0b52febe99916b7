//! Output blocks: the one state machine behind the APIs whose output is an ordered list of typed
//! parts, Anthropic's content blocks (`thinking`, `text`, `tool_use`) and Responses' output items
//! (`reasoning`, `message`, `function_call`). Each route only renders [`Event`]s in its own wire
//! format, so a rule fixed here holds for both:
//!
//! - reasoning, text and each tool call are separate blocks, in the order the model wrote them;
//!   consecutive pieces of the same kind extend the open block;
//! - whitespace-only text between blocks (the newline a model writes between two calls, or after
//!   its reasoning) is not a block of its own: it is held, and shown only if text follows it;
//! - a tool call that `max_tokens` cut off is marked incomplete (its arguments are as far as the
//!   model wrote them: a stream cannot take back a call it started).

use crate::driver::Step;

/// What a block holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Reasoning,
    Text,
    /// A tool call: `call_id` as the driver assigned it, the tool's name.
    Call {
        call_id: String,
        name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The route's id for the block (e.g. `msg_...`, `fc_...`; empty where the API has none).
    pub id: String,
    pub kind: Kind,
    /// Reasoning text, message text, or the call's arguments so far.
    pub text: String,
    /// A tool call cut off before its arguments closed.
    pub incomplete: bool,
}

/// What a step did to the blocks, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// Block `index` was opened (its text is still empty).
    Start(usize),
    /// `delta` was appended to block `index`.
    Delta(usize, &'a str),
    /// Block `index` is finished.
    Stop(usize),
}

/// The blocks of one response. `ids` names each new block for the route.
pub struct Blocks {
    pub blocks: Vec<Block>,
    open: bool,
    /// Block index of each tool call, by the parser's call index.
    call_blocks: Vec<usize>,
    /// Whitespace-only text not yet shown (see the module docs).
    held: String,
    ids: fn(&Kind) -> String,
}

impl Blocks {
    pub fn new(ids: fn(&Kind) -> String) -> Self {
        Self {
            blocks: Vec::new(),
            open: false,
            call_blocks: Vec::new(),
            held: String::new(),
            ids,
        }
    }

    /// Apply one step; `emit` sees every event with the blocks as they are after it.
    pub fn push(&mut self, step: &Step, emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        let piece = &step.piece;
        if !piece.reasoning.is_empty() {
            self.text_like(Kind::Reasoning, &piece.reasoning, emit);
        }
        if !piece.content.is_empty() {
            self.text_like(Kind::Text, &piece.content, emit);
        }
        for (c, call_id) in piece.calls.iter().zip(&step.call_ids) {
            if let Some(call_id) = call_id {
                let kind = Kind::Call {
                    call_id: call_id.clone(),
                    name: c.name.clone().unwrap_or_default(),
                };
                self.start(kind, emit);
                self.call_blocks.push(self.blocks.len() - 1);
            }
            let Some(&index) = self.call_blocks.get(c.index) else {
                continue;
            };
            if c.arguments.is_empty() {
                continue;
            }
            if let Some(b) = self.blocks.get_mut(index) {
                b.text.push_str(&c.arguments);
            }
            emit(self, Event::Delta(index, &c.arguments));
        }
    }

    /// The end of the output: close the open block and mark the calls the tool parser abandoned
    /// (cut off before their arguments closed) as incomplete.
    pub fn finish(&mut self, abandoned: &[usize], emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        self.held.clear();
        for &call in abandoned {
            if let Some(&b) = self.call_blocks.get(call) {
                if let Some(block) = self.blocks.get_mut(b) {
                    block.incomplete = true;
                }
            }
        }
        self.close(emit);
    }

    fn text_like(&mut self, kind: Kind, text: &str, emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        let continues = self.open && self.blocks.last().is_some_and(|b| b.kind == kind);
        if !continues {
            if kind == Kind::Text && text.trim().is_empty() {
                self.held.push_str(text);
                return;
            }
            let held = std::mem::take(&mut self.held);
            let is_text = kind == Kind::Text;
            self.start(kind, emit);
            if is_text && !held.is_empty() {
                self.append(&held, emit);
            }
        }
        self.append(text, emit);
    }

    fn append(&mut self, text: &str, emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        let index = self.blocks.len().saturating_sub(1);
        if let Some(b) = self.blocks.last_mut() {
            b.text.push_str(text);
        }
        emit(self, Event::Delta(index, text));
    }

    fn start(&mut self, kind: Kind, emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        self.close(emit);
        if kind != Kind::Text {
            self.held.clear();
        }
        self.blocks.push(Block {
            id: (self.ids)(&kind),
            kind,
            text: String::new(),
            incomplete: false,
        });
        self.open = true;
        emit(self, Event::Start(self.blocks.len() - 1));
    }

    fn close(&mut self, emit: &mut impl FnMut(&Blocks, Event<'_>)) {
        if self.open {
            self.open = false;
            emit(self, Event::Stop(self.blocks.len().saturating_sub(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::pipeline::Piece;
    use smgpy_parsers::ToolCallDelta;

    fn step(reasoning: &str, content: &str, calls: Vec<(usize, Option<&str>, &str)>) -> Step {
        let call_ids = calls.iter().map(|(_, id, _)| id.map(str::to_string)).collect();
        let calls = calls
            .into_iter()
            .map(|(index, id, args)| ToolCallDelta {
                index,
                id: None,
                name: id.map(|_| "f".to_string()),
                arguments: args.to_string(),
            })
            .collect();
        Step {
            piece: Piece {
                reasoning: reasoning.into(),
                content: content.into(),
                calls,
                stopped: None,
            },
            call_ids,
            ..Step::default()
        }
    }

    fn run(steps: &[Step], abandoned: &[usize]) -> (Vec<Block>, Vec<String>) {
        let mut b = Blocks::new(|_| String::new());
        let mut log = Vec::new();
        let mut emit = |_: &Blocks, e: Event<'_>| log.push(format!("{e:?}"));
        for s in steps {
            b.push(s, &mut emit);
        }
        b.finish(abandoned, &mut emit);
        (b.blocks, log)
    }

    #[test]
    fn whitespace_between_calls_is_not_a_block() {
        let steps = [
            step("think", "", vec![]),
            step("", "\n\n", vec![]),
            step("", "", vec![(0, Some("c0"), "{}")]),
            step("", "\n", vec![]),
            step("", "", vec![(1, Some("c1"), "{}")]),
            step("", " \n", vec![]),
        ];
        let (blocks, _) = run(&steps, &[]);
        let kinds: Vec<bool> = blocks.iter().map(|b| matches!(b.kind, Kind::Call { .. })).collect();
        assert_eq!(kinds, [false, true, true]);
        assert_eq!(blocks[0].kind, Kind::Reasoning);
    }

    #[test]
    fn held_whitespace_is_shown_when_text_follows() {
        let steps = [
            step("", "", vec![(0, Some("c0"), "{}")]),
            step("", "\n", vec![]),
            step("", "Done.", vec![]),
        ];
        let (blocks, _) = run(&steps, &[]);
        assert_eq!(blocks[1].kind, Kind::Text);
        assert_eq!(blocks[1].text, "\nDone.");
        // whitespace inside an open text block is part of it
        let (blocks, _) = run(
            &[step("", "a", vec![]), step("", " ", vec![]), step("", "b", vec![])],
            &[],
        );
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].text, "a b");
    }

    #[test]
    fn events_come_in_order_and_cut_calls_are_incomplete() {
        let steps = [
            step("", "Hi", vec![]),
            step("", "", vec![(0, Some("c0"), "{\"a\":")]),
            step("", "", vec![(0, None, " 1")]),
        ];
        let (blocks, log) = run(&steps, &[0]);
        assert!(blocks[1].incomplete);
        assert_eq!(blocks[1].text, "{\"a\": 1");
        assert_eq!(
            log,
            [
                "Start(0)",
                "Delta(0, \"Hi\")",
                "Stop(0)",
                "Start(1)",
                "Delta(1, \"{\\\"a\\\":\")",
                "Delta(1, \" 1\")",
                "Stop(1)"
            ]
        );
    }
}
