//! Call heads: what each format writes before a call's arguments (its name, an id, the opening
//! of the arguments), read from a region's text by `live.rs` to put the call live, and the tail
//! that ends a call after its arguments. A head that cannot be read yet says what it waits for.
use super::body::{trimmed_name, Target};
use super::ctx::Ctx;
use super::spec::Body;
use super::xml_stream::{invoke_dialect, Dialect, GLM, QWEN};
use crate::scan::find;
use std::borrow::Cow;

/// Why a head could not be read.
pub(crate) enum Stop {
    /// The text so far is a prefix of a head: wait for more. When the stop was a search for a
    /// marker (`Cursor::until`), its first byte and where the search began: no try can get
    /// further before that byte arrives.
    Pending(Option<(u8, usize)>),
    /// No call goes live here.
    No,
    /// A malformed call of a body with several (an item, an invoke block): skip it up to this
    /// tail and try the next one.
    Skip(Tail),
}

/// What ends a live call after its arguments object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tail {
    /// Nothing: the arguments are the whole call.
    Nothing,
    /// The `}` of the object that holds `name` and `arguments` (extra keys are skipped).
    CloseObject,
    /// An item's end marker; what lies before it (a code fence) is dropped.
    Marker(&'static str),
}

/// How the arguments a head introduces are written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Syntax {
    /// A JSON object (checked to start with `{` then `"` or `}`).
    Json,
    /// XML parameters of this dialect, starting right at the cursor.
    Xml(&'static Dialect),
}

/// A call head: name, id, where its arguments object starts and what ends the call.
pub(crate) struct HeadFound<'a> {
    pub(crate) id: Option<Cow<'a, str>>,
    pub(crate) name: Cow<'a, str>,
    pub(crate) args: usize,
    pub(crate) tail: Tail,
    pub(crate) skip: Option<Tail>,
    pub(crate) syntax: Syntax,
}

pub(crate) fn head<'a>(target: &'a Target, text: &'a str, ctx: &'a Ctx) -> Result<HeadFound<'a>, Stop> {
    let mut c = Cursor { s: text, i: 0 };
    let found = match target {
        Target::Args { name, id, .. } => Found::json(id.as_deref().map(Cow::Borrowed), name.as_str(), Tail::Nothing),
        Target::Body(body) => body_head(body, &mut c)?,
        Target::Discard => return Err(Stop::No),
    };
    // Past the call's opening, a malformed call is skipped when its body can hold more calls.
    let skip = found.skip;
    let bad = move || skip.map_or(Stop::No, Stop::Skip);
    let args = match found.syntax {
        Syntax::Json => match c.args_start() {
            Err(Stop::No) => return Err(bad()),
            other => other?,
        },
        Syntax::Xml(_) => c.i,
    };
    let name = match found.name {
        // A Kimi id without a name (`0`): the one declared tool, as vLLM infers it.
        Cow::Borrowed("") if found.infer => ctx.sole_tool().map(Cow::Borrowed),
        Cow::Borrowed(n) => trimmed_name(n).map(Cow::Borrowed),
        Cow::Owned(ref n) => trimmed_name(n).map(|t| Cow::Owned(t.to_owned())),
    };
    let Some(name) = name else { return Err(bad()) };
    if !ctx.declared(&name) {
        return Err(Stop::No);
    }
    Ok(HeadFound {
        id: found.id,
        name,
        args,
        tail: found.tail,
        skip: found.skip,
        syntax: found.syntax,
    })
}

/// What a format's head says before the arguments (borrowed from the head's text where it can).
struct Found<'a> {
    id: Option<Cow<'a, str>>,
    name: Cow<'a, str>,
    tail: Tail,
    /// See `HeadFound::skip`.
    skip: Option<Tail>,
    /// An empty name is to be inferred from the declared tools.
    infer: bool,
    syntax: Syntax,
}

impl<'a> Found<'a> {
    fn json(id: Option<Cow<'a, str>>, name: impl Into<Cow<'a, str>>, tail: Tail) -> Self {
        Self {
            id,
            name: name.into(),
            tail,
            skip: None,
            infer: false,
            syntax: Syntax::Json,
        }
    }

    fn xml(name: impl Into<Cow<'a, str>>, dialect: &'static Dialect) -> Self {
        Self {
            id: None,
            name: name.into(),
            tail: Tail::Nothing,
            skip: None,
            infer: false,
            syntax: Syntax::Xml(dialect),
        }
    }

    fn skipping(self, to: Tail) -> Self {
        Self { skip: Some(to), ..self }
    }
}

/// Read a head of `body`, leaving the cursor before the arguments.
fn body_head<'a>(body: &Body, c: &mut Cursor<'a>) -> Result<Found<'a>, Stop> {
    match *body {
        Body::Json => json_head(c),
        Body::Mistral => {
            c.ws();
            if matches!(c.peek()?, b'[' | b'{') {
                // The v3 JSON form gives each call's `"id"` after its arguments, and Mistral
                // templates reject any other id on the next turn: read these regions whole.
                return Err(Stop::No);
            }
            mistral_head(c)
        }
        Body::Items {
            begin,
            end,
            item,
            again,
        } => {
            c.ws();
            if !again.is_empty() {
                // The section's start written again between items is skipped; text that may
                // still become either marker waits in `lit(begin)`.
                match c.lit(again) {
                    Ok(()) => c.ws(),
                    Err(Stop::Pending(wait)) if !begin.starts_with(c.rest()) => return Err(Stop::Pending(wait)),
                    Err(_) => {}
                }
            }
            c.lit(begin)?;
            // A malformed item is skipped to its end; one that cannot stream (a GLM call without
            // parameters) stops the live reading, and the rest is read whole at the region's end.
            let found = match body_head(item, c) {
                Err(Stop::Skip(_)) => return Err(Stop::Skip(Tail::Marker(end))),
                other => other?,
            };
            Ok(Found {
                tail: Tail::Marker(end),
                ..found.skipping(Tail::Marker(end))
            })
        }
        Body::KimiItem => {
            let header = c.until("<|tool_call_argument_begin|>")?.trim();
            let (name, infer) = super::body::kimi_name(header).ok_or(Stop::No)?;
            Ok(Found {
                infer,
                ..Found::json(Some(header.into()), name, Tail::Nothing)
            })
        }
        Body::DeepSeekItem => {
            let left = c.until("<｜tool▁sep｜>")?;
            let name = if left.trim() == "function" {
                let name = c.until("\n")?;
                c.ws();
                if c.rest().starts_with('`') {
                    c.lit("```")?;
                    c.until("\n")?;
                }
                name
            } else {
                left
            };
            Ok(Found::json(None, name, Tail::Nothing))
        }
        Body::FunctionaryV31 => Ok(Found::json(None, c.until(">")?, Tail::Nothing)),
        Body::Solar => {
            let id = c.until("<|tool_call:name|>")?.trim();
            let name = c.until("<|tool_call:args|>")?;
            let id = Some(Cow::Borrowed(id)).filter(|i| !i.is_empty());
            Ok(Found::json(id, name, Tail::Nothing))
        }
        Body::QwenXml { bare } => {
            if !bare {
                c.ws();
                c.lit("<function=")?;
            }
            Ok(Found::xml(c.until(">")?, &QWEN))
        }
        Body::Glm => glm_head(c),
        Body::Invoke { prefix } => invoke_head(c, prefix),
        Body::Step3Item => {
            c.ws();
            if c.lit("function<｜tool_sep｜>").is_err() {
                // Without the prefix the item is the invoke block itself; a partial prefix waits.
                if "function<｜tool_sep｜>".starts_with(c.rest()) {
                    return Err(Stop::Pending(None));
                }
            }
            invoke_head(c, "steptml:")
        }
        _ => Err(Stop::No),
    }
}

/// GLM `NAME\n<arg_key>` / `NAME<arg_key>` / `NAME<tool_sep>` (Hy3).
fn glm_head<'a>(c: &mut Cursor<'a>) -> Result<Found<'a>, Stop> {
    c.ws();
    let rest = c.rest();
    // The earliest of `<arg_key>`, `<tool_sep>` and a newline, in one pass (this runs per push
    // until the first parameter has arrived).
    let bytes = rest.as_bytes();
    let mut from = 0;
    let p = loop {
        let p = from + crate::scan::byte2(b'<', b'\n', &bytes[from..]).ok_or(Stop::Pending(None))?;
        if bytes[p] == b'\n' || rest[p..].starts_with("<arg_key>") || rest[p..].starts_with("<tool_sep>") {
            break p;
        }
        from = p + 1;
    };
    let name = &rest[..p];
    c.i += p;
    c.ws();
    if let Err(Stop::Pending(_)) = c.lit("<tool_sep>") {
        return Err(Stop::Pending(None));
    }
    // Commit only once the first parameter is well formed, so that a malformed call stays text.
    let mut probe = Cursor { s: c.s, i: c.i };
    probe.ws();
    probe.lit("<arg_key>")?;
    probe.until("</arg_key>")?;
    probe.ws();
    probe.lit("<arg_value>")?;
    Ok(Found::xml(name, &GLM))
}

/// `<{prefix}invoke name="N">`, then XML parameters or a JSON object.
fn invoke_head<'a>(c: &mut Cursor<'a>, prefix: &str) -> Result<Found<'a>, Stop> {
    let dialect = invoke_dialect(prefix).ok_or(Stop::No)?;
    c.ws();
    c.lit("<")?;
    c.lit(prefix)?;
    c.lit("invoke")?;
    let header = c.until(">")?;
    let skip = Tail::Marker(dialect.function_end);
    let name = super::xml::attr(header, "name").ok_or(Stop::Skip(skip))?;
    let mut peek = Cursor { s: c.s, i: c.i };
    peek.ws();
    match peek.peek()? {
        b'{' => Ok(Found::json(None, name, Tail::Marker(dialect.function_end)).skipping(skip)),
        // An invoke block closes right away (`<invoke name="f"></invoke>`) or opens a parameter.
        b'<' => Ok(Found::xml(name, dialect).skipping(skip)),
        _ => Err(Stop::Skip(skip)),
    }
}

/// `{"name": "N", "arguments": {` (also `tool_name`, `parameters`, `args`), after any `[`, `,`
/// or `;` that separate calls.
fn json_head<'a>(c: &mut Cursor<'a>) -> Result<Found<'a>, Stop> {
    c.skip_while(|b| b.is_ascii_whitespace() || matches!(b, b'[' | b',' | b';'));
    c.lit("{")?;
    c.ws();
    if !matches!(c.json_string()?, "name" | "tool_name") {
        return Err(Stop::No);
    }
    c.ws();
    c.lit(":")?;
    c.ws();
    let name = c.json_string()?;
    c.ws();
    c.lit(",")?;
    c.ws();
    if !matches!(c.json_string()?, "arguments" | "parameters" | "args") {
        return Err(Stop::No);
    }
    c.ws();
    c.lit(":")?;
    Ok(Found::json(None, name, Tail::CloseObject))
}

/// Mistral's `NAME[ARGS]{`, `NAME[CALL_ID]ID[ARGS]{` or `NAME{`.
fn mistral_head<'a>(c: &mut Cursor<'a>) -> Result<Found<'a>, Stop> {
    let start = c.i;
    let name_byte =
        |b: u8| b.is_ascii_alphanumeric() || b >= 0x80 || matches!(b, b'_' | b'-' | b'.' | b':' | b'/' | b' ');
    let (name_end, has_id) = to_mistral_args(c, name_byte, true)?;
    let name = &c.s[start..name_end];
    if !has_id {
        return Ok(Found::json(None, name, Tail::Nothing));
    }
    let id_start = c.i;
    let (id_end, _) = to_mistral_args(c, |_| true, false)?;
    Ok(Found::json(
        Some(c.s[id_start..id_end].trim().into()),
        name,
        Tail::Nothing,
    ))
}

/// Reads a Mistral head's part up to its arguments: `{` (left for the arguments) or `[ARGS]`
/// (consumed), over bytes `ok` accepts; where `call_id`, a `[CALL_ID]` (consumed) may end the
/// part instead, and the answer says so. Returns where the part's text ends.
fn to_mistral_args(c: &mut Cursor<'_>, ok: impl Fn(u8) -> bool, call_id: bool) -> Result<(usize, bool), Stop> {
    loop {
        match c.peek()? {
            b'{' => return Ok((c.i, false)),
            b'[' => {
                let end = c.i;
                let args = c.lit("[ARGS]");
                if args.is_ok() || !call_id {
                    return args.map(|()| (end, false));
                }
                c.lit("[CALL_ID]")?;
                return Ok((end, true));
            }
            b if ok(b) => c.i += 1,
            _ => return Err(Stop::No),
        }
    }
}

/// Bytes of the tail at the start of `text`.
pub(crate) fn skip_tail(tail: Tail, text: &str) -> Result<usize, Stop> {
    let mut c = Cursor { s: text, i: 0 };
    match tail {
        Tail::Nothing => Ok(0),
        Tail::Marker(end) => {
            c.until(end)?;
            Ok(c.i)
        }
        Tail::CloseObject => {
            c.ws();
            match c.peek()? {
                b'}' => Ok(c.i + 1),
                b',' => c.close_object(),
                _ => Ok(0),
            }
        }
    }
}

/// A read position in a head.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    fn peek(&self) -> Result<u8, Stop> {
        self.s.as_bytes().get(self.i).copied().ok_or(Stop::Pending(None))
    }

    fn skip_while(&mut self, f: impl Fn(u8) -> bool) {
        while self.s.as_bytes().get(self.i).is_some_and(|b| f(*b)) {
            self.i += 1;
        }
    }

    fn ws(&mut self) {
        self.skip_while(|b| b.is_ascii_whitespace());
    }

    /// Consume `lit`.
    fn lit(&mut self, lit: &str) -> Result<(), Stop> {
        let rest = self.rest();
        if crate::scan::has_prefix(rest.as_bytes(), lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else if lit.starts_with(rest) {
            // Nothing changes until `lit`'s next byte arrives (another byte fails the head, and
            // noticing that later changes nothing): the head waits for it.
            Err(Stop::Pending(
                lit.as_bytes().get(rest.len()).map(|&b| (b, self.s.len())),
            ))
        } else {
            Err(Stop::No)
        }
    }

    /// The text up to `marker`, consuming both.
    fn until(&mut self, marker: &str) -> Result<&'a str, Stop> {
        let rest = self.rest();
        let p = find(rest, marker).ok_or(Stop::Pending(marker.as_bytes().first().map(|&b| (b, self.i))))?;
        self.i += p + marker.len();
        Ok(&rest[..p])
    }

    /// A JSON string without escapes (keys and names never need them).
    fn json_string(&mut self) -> Result<&'a str, Stop> {
        self.lit("\"")?;
        let rest = self.rest();
        match crate::scan::byte2(b'"', b'\\', rest.as_bytes()) {
            Some(p) if rest.as_bytes()[p] == b'"' => {
                self.i += p + 1;
                Ok(&rest[..p])
            }
            Some(_) => Err(Stop::No),
            None => Err(Stop::Pending(None)),
        }
    }

    /// Where the arguments object starts: `{` then `"` or `}`. Returns its offset.
    fn args_start(&mut self) -> Result<usize, Stop> {
        self.ws();
        let at = self.i;
        if at == self.s.len() {
            // No head succeeds before a `{` arrives (the object's, or one after more of the
            // head): the head is not read again until then.
            return Err(Stop::Pending(Some((b'{', at))));
        }
        self.lit("{")?;
        self.ws();
        match self.peek()? {
            b'"' | b'}' => Ok(at),
            _ => Err(Stop::No),
        }
    }

    /// Skip the rest of an object whose `{` was already read; returns the offset after its `}`.
    fn close_object(&mut self) -> Result<usize, Stop> {
        let bytes = self.s.as_bytes();
        let (mut depth, mut quoted, mut escaped) = (1u32, false, false);
        while let Some(&b) = bytes.get(self.i) {
            self.i += 1;
            if quoted {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => quoted = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => quoted = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.i);
                    }
                }
                _ => {}
            }
        }
        Err(Stop::Pending(None))
    }
}
