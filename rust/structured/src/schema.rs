//! JSON Schema, the subset structured outputs use, as a recognizer for masks.
//!
//! A schema compiles to a table of nodes; the recognizer's state is a fixed stack of frames
//! (one per open object, array or literal) plus a [`JsonState`] for the value being read at the
//! leaf (a string, number, boolean, null, or a value the schema leaves free), so the state stays
//! `Copy` like the plain JSON one. Every document the recognizer accepts is valid against the
//! schema; it may be stricter than the schema where that keeps it simple:
//! - object keys are written in the schema's order, each at most once, and keys the schema does
//!   not declare are not written (also when `additionalProperties` would allow them);
//! - `enum` / `const` values are written in compact JSON (`{"a":1}`, not `{ "a": 1 }`);
//! - `anyOf` / `oneOf` (and type lists such as `["string", "null"]`) need alternatives that
//!   start with different bytes, so that the first byte of a value picks one; or alternatives
//!   that are all objects tagged by one required key with a distinct `const` value each (a
//!   discriminated union, such as Pydantic writes or a list of tool calls). The tag is then
//!   written first, and its value picks the alternative. Either way the alternatives exclude
//!   each other, so `oneOf` means the same as `anyOf`.
//!
//! Keywords that would need more (`pattern`, `format`, `minLength`, `minimum`, ...) make
//! `compile` fail with the keyword named, and the caller falls back to plain JSON.
use std::collections::HashMap;

use serde_json::Value;

use crate::json::{JsonOptions, JsonState};
use crate::Recognizer;

/// Why a schema cannot be enforced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("the schema uses `{0}`, which structured output does not enforce")]
    Unsupported(String),
    #[error("invalid schema: {0}")]
    Invalid(String),
}

/// Keywords that constrain nothing or that this module enforces.
const KNOWN: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "discriminator",
    "$ref",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "strict",
];

/// Deepest nesting of schema objects, arrays and literals in one document.
const MAX_FRAMES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Number,
    Integer,
    Boolean,
    Null,
    /// An object the schema leaves free.
    Object,
}

#[derive(Debug, Clone)]
struct Prop {
    /// The key as JSON text, quotes included.
    key: Vec<u8>,
    node: u16,
    required: bool,
}

#[derive(Debug, Clone)]
enum Node {
    /// Any JSON value.
    Any,
    Object(Vec<Prop>),
    Array {
        items: u16,
        min: u16,
        max: u16,
    },
    Scalar(Kind),
    /// One of these values, as compact JSON text.
    Literals(Vec<Vec<u8>>),
    /// One of these nodes, told apart by a value's first byte.
    Alt(Vec<u16>),
    /// Objects told apart by their first key's value: `head` is that key alone, its node the
    /// literals of every alternative's tag in the order of `objects`. Once the tag's value is
    /// read, the frame becomes the object it names (its first property read).
    Tagged {
        head: Vec<Prop>,
        objects: Vec<u16>,
    },
}

/// A compiled schema; see the module docs.
#[derive(Debug, Clone)]
pub struct Schema {
    nodes: Vec<Node>,
    root: u16,
}

impl Schema {
    /// Compile `schema` (a JSON Schema object).
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let mut c = Compiler {
            root: schema,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        let root = c.node(schema, 0)?;
        let s = Self { nodes: c.nodes, root };
        for node in &s.nodes {
            if let Node::Alt(ids) = node {
                let mut seen = [false; 256];
                for &id in ids {
                    let firsts = s.first_bytes(id, 0);
                    if firsts.iter().enumerate().any(|(b, &f)| f && seen[b]) {
                        return Err(SchemaError::Unsupported(
                            "anyOf with alternatives that start alike".into(),
                        ));
                    }
                    for (b, f) in firsts.iter().enumerate() {
                        seen[b] |= f;
                    }
                }
            }
        }
        Ok(s)
    }

    /// The state before the first byte of a document.
    pub fn start(&self, max_whitespace: u8) -> SchemaState {
        let mut frames = [Frame::default(); MAX_FRAMES];
        frames[0].node = self.root;
        SchemaState {
            frames,
            depth: 1,
            scalar: JsonState::new(free()),
            ws: 0,
            max_ws: max_whitespace,
        }
    }

    /// Bytes a value of node `id` may start with.
    fn first_bytes(&self, id: u16, depth: usize) -> [bool; 256] {
        let mut out = [false; 256];
        let mut set = |bytes: &[u8]| bytes.iter().for_each(|&b| out[usize::from(b)] = true);
        match &self.nodes[usize::from(id)] {
            Node::Any => set(b"{[\"-0123456789tfn"),
            Node::Object(_) | Node::Tagged { .. } => set(b"{"),
            Node::Array { .. } => set(b"["),
            Node::Scalar(kind) => set(kind_firsts(*kind)),
            Node::Literals(alts) => alts
                .iter()
                .filter_map(|a| a.first())
                .for_each(|&b| out[usize::from(b)] = true),
            Node::Alt(ids) if depth < 8 => {
                for &i in ids {
                    for (b, f) in self.first_bytes(i, depth + 1).iter().enumerate() {
                        out[b] |= f;
                    }
                }
            }
            Node::Alt(_) => out = [true; 256],
        }
        out
    }

    fn node(&self, id: u16) -> &Node {
        &self.nodes[usize::from(id)]
    }
}

fn kind_firsts(kind: Kind) -> &'static [u8] {
    match kind {
        Kind::String => b"\"",
        Kind::Number | Kind::Integer => b"-0123456789",
        Kind::Boolean => b"tf",
        Kind::Null => b"n",
        Kind::Object => b"{",
    }
}

/// Options of the leaf recognizer: any value (the frame checks its first byte).
fn free() -> JsonOptions {
    JsonOptions {
        object_only: false,
        max_whitespace: 64,
    }
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    refs: HashMap<String, u16>,
}

impl<'a> Compiler<'a> {
    fn push(&mut self, node: Node) -> Result<u16, SchemaError> {
        let id = u16::try_from(self.nodes.len()).map_err(|_| SchemaError::Unsupported("a schema this large".into()))?;
        self.nodes.push(node);
        Ok(id)
    }

    fn node(&mut self, s: &'a Value, depth: usize) -> Result<u16, SchemaError> {
        if depth > 64 {
            return Err(SchemaError::Unsupported("nesting deeper than 64".into()));
        }
        let m = match s {
            Value::Bool(true) => return self.push(Node::Any),
            Value::Object(m) => m,
            _ => return Err(SchemaError::Invalid(format!("a schema must be an object, got {s}"))),
        };
        if let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(SchemaError::Unsupported(k.clone()));
        }
        if let Some(r) = m.get("$ref") {
            return self.reference(r, depth);
        }
        if let Some(c) = m.get("const") {
            return self.push(Node::Literals(vec![compact(c)]));
        }
        if let Some(e) = m.get("enum") {
            let Value::Array(values) = e else {
                return Err(SchemaError::Invalid("`enum` must be an array".into()));
            };
            if values.is_empty() || values.len() > 64 {
                return Err(SchemaError::Unsupported("an enum of no or more than 64 values".into()));
            }
            return self.push(Node::Literals(values.iter().map(compact).collect()));
        }
        if let Some((word, any_of)) = m
            .get("anyOf")
            .map(|v| ("anyOf", v))
            .or_else(|| m.get("oneOf").map(|v| ("oneOf", v)))
        {
            let Value::Array(alts) = any_of else {
                return Err(SchemaError::Invalid(format!("`{word}` must be an array")));
            };
            let ids = alts
                .iter()
                .map(|a| self.node(a, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(tagged) = self.tagged(&ids) {
                return self.push(tagged);
            }
            return self.push(Node::Alt(ids));
        }
        match m.get("type") {
            Some(Value::String(t)) => self.typed(t, m, depth),
            Some(Value::Array(types)) => {
                let mut ids = Vec::new();
                for t in types {
                    let t = t
                        .as_str()
                        .ok_or_else(|| SchemaError::Invalid("`type` entries must be strings".into()))?;
                    ids.push(self.typed(t, m, depth)?);
                }
                self.push(Node::Alt(ids))
            }
            Some(other) => Err(SchemaError::Invalid(format!(
                "`type` must be a string or a list, got {other}"
            ))),
            None if m.contains_key("properties") => self.typed("object", m, depth),
            None if m.contains_key("items") => self.typed("array", m, depth),
            None => self.push(Node::Any),
        }
    }

    fn typed(&mut self, t: &str, m: &'a serde_json::Map<String, Value>, depth: usize) -> Result<u16, SchemaError> {
        let kind = match t {
            "string" => Kind::String,
            "number" => Kind::Number,
            "integer" => Kind::Integer,
            "boolean" => Kind::Boolean,
            "null" => Kind::Null,
            "object" => return self.object(m, depth),
            "array" => return self.array(m, depth),
            other => return Err(SchemaError::Invalid(format!("unknown type `{other}`"))),
        };
        self.push(Node::Scalar(kind))
    }

    fn object(&mut self, m: &'a serde_json::Map<String, Value>, depth: usize) -> Result<u16, SchemaError> {
        let Some(props) = m.get("properties") else {
            return self.push(Node::Scalar(Kind::Object));
        };
        let Value::Object(props) = props else {
            return Err(SchemaError::Invalid("`properties` must be an object".into()));
        };
        if props.len() > 64 {
            return Err(SchemaError::Unsupported("more than 64 properties in one object".into()));
        }
        let required: Vec<&str> = match m.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(SchemaError::Invalid("`required` must be an array".into())),
        };
        if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
            return Err(SchemaError::Unsupported(format!(
                "required key `{missing}` without a schema"
            )));
        }
        let mut out = Vec::with_capacity(props.len());
        for (key, schema) in props {
            out.push(Prop {
                key: compact(&Value::String(key.clone())),
                node: self.node(schema, depth + 1)?,
                required: required.contains(&key.as_str()),
            });
        }
        self.push(Node::Object(out))
    }

    fn array(&mut self, m: &'a serde_json::Map<String, Value>, depth: usize) -> Result<u16, SchemaError> {
        let items = match m.get("items") {
            Some(s) => self.node(s, depth + 1)?,
            None => self.push(Node::Any)?,
        };
        let bound = |k: &str, default: u16| match m.get(k) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .map(|n| u16::try_from(n).unwrap_or(u16::MAX))
                .ok_or_else(|| SchemaError::Invalid(format!("`{k}` must be a non-negative integer"))),
        };
        let (min, max) = (bound("minItems", 0)?, bound("maxItems", u16::MAX)?);
        if min > max {
            return Err(SchemaError::Invalid("minItems is larger than maxItems".into()));
        }
        self.push(Node::Array { items, min, max })
    }

    /// The node behind `$ref` indirections.
    fn resolve(&self, mut id: u16) -> u16 {
        for _ in 0..8 {
            match &self.nodes[usize::from(id)] {
                Node::Alt(inner) if inner.len() == 1 => id = inner[0],
                _ => break,
            }
        }
        id
    }

    /// `ids` as a discriminated union, when they are two or more objects that all require one
    /// key whose schema is a single `const` value, distinct in each: each object is copied with
    /// that key first.
    fn tagged(&mut self, ids: &[u16]) -> Option<Node> {
        if ids.len() < 2 || ids.len() > 64 {
            return None;
        }
        let objects: Vec<&Vec<Prop>> = ids
            .iter()
            .map(|&id| match &self.nodes[usize::from(self.resolve(id))] {
                Node::Object(props) => Some(props),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let single = |prop: &Prop| match &self.nodes[usize::from(prop.node)] {
            Node::Literals(values) if values.len() == 1 => Some(values[0].clone()),
            _ => None,
        };
        // The first key, in the first object's order, that tags every object.
        let key = objects[0].iter().map(|p| p.key.clone()).find(|key| {
            let mut seen: Vec<Vec<u8>> = Vec::new();
            objects.iter().all(|props| {
                props
                    .iter()
                    .find(|p| &p.key == key && p.required)
                    .and_then(single)
                    .is_some_and(|v| {
                        let fresh = !seen.contains(&v);
                        seen.push(v);
                        fresh
                    })
            })
        })?;
        let mut tags = Vec::with_capacity(objects.len());
        let mut reordered = Vec::with_capacity(objects.len());
        for props in objects {
            let at = props.iter().position(|p| p.key == key)?;
            tags.push(single(&props[at])?);
            let mut props = props.clone();
            let tag = props.remove(at);
            props.insert(0, tag);
            reordered.push(props);
        }
        let mut objects = Vec::with_capacity(reordered.len());
        for props in reordered {
            objects.push(self.push(Node::Object(props)).ok()?);
        }
        let literals = self.push(Node::Literals(tags)).ok()?;
        Some(Node::Tagged {
            head: vec![Prop {
                key,
                node: literals,
                required: true,
            }],
            objects,
        })
    }

    fn reference(&mut self, r: &Value, depth: usize) -> Result<u16, SchemaError> {
        let path = r
            .as_str()
            .ok_or_else(|| SchemaError::Invalid("`$ref` must be a string".into()))?;
        if let Some(&id) = self.refs.get(path) {
            return Ok(id);
        }
        let target = path
            .strip_prefix("#/")
            .map(|p| p.split('/').try_fold(self.root, |v, part| v.get(part)))
            .unwrap_or_else(|| (path == "#").then_some(self.root))
            .ok_or_else(|| SchemaError::Unsupported(format!("$ref `{path}` (only local references)")))?;
        // Reserve the node first: a recursive schema refers to itself.
        let id = self.push(Node::Alt(Vec::new()))?;
        self.refs.insert(path.to_string(), id);
        let inner = self.node(target, depth + 1)?;
        self.nodes[usize::from(id)] = Node::Alt(vec![inner]);
        Ok(id)
    }
}

fn compact(v: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Phase {
    /// The node's value has not started.
    #[default]
    Start,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    KeyAfterComma,
    /// Inside a key; `cands`: properties it may still be, `pos` bytes read.
    Key {
        cands: u64,
        pos: u8,
    },
    Colon {
        prop: u8,
    },
    /// After a member's value: `,` or `}`.
    AfterMember,
    /// After `[`: an item or `]`.
    ArrFirst,
    /// After an item: `,` or `]`.
    AfterItem,
    /// Inside a literal; `cands`: values it may still be, `pos` bytes read.
    Literal {
        cands: u64,
        pos: u16,
    },
    /// The leaf recognizer reads the value.
    Leaf,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Frame {
    node: u16,
    phase: Phase,
    /// Object: the first property that may still come. Array: items so far. Integer leaf: 1
    /// right after a leading `-`, plus twice the digits read.
    next: u16,
}

/// A schema recognizer's state; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaState {
    frames: [Frame; MAX_FRAMES],
    /// Open frames; 0 once the document is complete.
    depth: u8,
    /// The value a `Leaf` frame reads.
    scalar: JsonState,
    ws: u8,
    max_ws: u8,
}

impl Recognizer for SchemaState {
    type Ctx = Schema;

    fn step(mut self, schema: &Schema, b: u8) -> Option<Self> {
        // A byte that ends a frame's value is read again by the frame below.
        loop {
            if self.depth == 0 {
                // The document is complete: nothing may follow (see `JsonState::step`).
                return None;
            }
            let top = usize::from(self.depth - 1);
            let f = self.frames[top];
            let node = schema.node(f.node);
            match f.phase {
                Phase::Leaf => {
                    let integer = matches!(node, Node::Scalar(Kind::Integer));
                    // Integers: no fraction or exponent, no `-0` (a float to many parsers), and at
                    // most 18 digits (an `i64` everywhere). `next`: 1 right after a leading `-`,
                    // plus twice the digits so far.
                    let n = self.frames[top].next;
                    let refused = integer
                        && (matches!(b, b'.' | b'e' | b'E')
                            || (n & 1 == 1 && b == b'0')
                            || (b.is_ascii_digit() && n >> 1 >= 18));
                    if integer && b.is_ascii_digit() {
                        self.frames[top].next = ((n >> 1) + 1) << 1;
                    }
                    if !refused {
                        if let Some(next) = self.scalar.step(b) {
                            self.scalar = next;
                            return Some(self);
                        }
                    }
                    if !self.scalar.is_complete() {
                        return None;
                    }
                    self.pop();
                }
                Phase::Literal { cands, pos } => {
                    let Node::Literals(alts) = node else { return None };
                    let p = usize::from(pos);
                    let next = mask_where(cands, alts.len(), |i| alts[i].get(p) == Some(&b));
                    if next != 0 {
                        self.frames[top].phase = Phase::Literal {
                            cands: next,
                            pos: pos + 1,
                        };
                        return Some(self);
                    }
                    let done = mask_where(cands, alts.len(), |i| alts[i].len() == p);
                    if done == 0 {
                        return None;
                    }
                    self.pop();
                    // The tag of a tagged object: the frame becomes the object it names, with
                    // its first property (the tag) read. Distinct values: one is complete.
                    if let Some(parent) = self.depth.checked_sub(1).map(usize::from) {
                        if let Node::Tagged { objects, .. } = schema.node(self.frames[parent].node) {
                            let chosen = objects.get(done.trailing_zeros() as usize)?;
                            self.frames[parent].node = *chosen;
                            self.frames[parent].next = 1;
                        }
                    }
                }
                _ if is_ws(b) && !matches!(f.phase, Phase::Key { .. }) => return self.whitespace(),
                phase => {
                    self.ws = 0;
                    return self.structural(schema, top, phase, node, b);
                }
            }
        }
    }

    fn is_complete(&self, schema: &Schema) -> bool {
        match self.depth {
            0 => true,
            1 => {
                let f = self.frames[0];
                match (f.phase, schema.node(f.node)) {
                    (Phase::Leaf, _) => self.scalar.is_complete(),
                    (Phase::Literal { cands, pos }, Node::Literals(alts)) => {
                        mask_where(cands, alts.len(), |i| alts[i].len() == usize::from(pos)) != 0
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    fn in_string(&self) -> bool {
        self.depth > 0 && self.frames[usize::from(self.depth - 1)].phase == Phase::Leaf && self.scalar.in_string()
    }
}

impl SchemaState {
    /// One more whitespace byte between tokens of the document.
    fn whitespace(mut self) -> Option<Self> {
        if self.ws >= self.max_ws {
            return None;
        }
        self.ws += 1;
        Some(self)
    }

    fn pop(&mut self) {
        self.depth -= 1;
    }

    fn push(&mut self, node: u16) -> Option<()> {
        let d = usize::from(self.depth);
        if d >= MAX_FRAMES {
            return None;
        }
        self.frames[d] = Frame {
            node,
            phase: Phase::Start,
            next: 0,
        };
        self.depth += 1;
        Some(())
    }

    /// A byte outside leaves and literals that is not whitespace, for frame `top`.
    fn structural(mut self, schema: &Schema, top: usize, phase: Phase, node: &Node, b: u8) -> Option<Self> {
        let mut f = self.frames[top];
        match (phase, node) {
            (Phase::Start, Node::Alt(ids)) => {
                f.node = *ids.iter().find(|&&id| schema.first_bytes(id, 0)[usize::from(b)])?;
                self.frames[top] = f;
                return self.step(schema, b);
            }
            (Phase::Start, Node::Object(_) | Node::Tagged { .. }) if b == b'{' => f.phase = Phase::KeyOrClose,
            (Phase::Start, Node::Array { .. }) if b == b'[' => f.phase = Phase::ArrFirst,
            (Phase::Start, Node::Literals(alts)) => {
                let cands = mask_where(u64::MAX, alts.len(), |i| alts[i].first() == Some(&b));
                if cands == 0 {
                    return None;
                }
                f.phase = Phase::Literal { cands, pos: 1 };
            }
            (Phase::Start, Node::Scalar(kind)) if kind_firsts(*kind).contains(&b) => {
                f.phase = Phase::Leaf;
                f.next = if b == b'-' {
                    1
                } else {
                    u16::from(b.is_ascii_digit()) << 1
                };
                self.scalar = JsonState::new(free()).step(b)?;
            }
            (Phase::Start, Node::Any) => {
                f.phase = Phase::Leaf;
                self.scalar = JsonState::new(free()).step(b)?;
            }
            (Phase::KeyOrClose | Phase::KeyAfterComma, Node::Object(props) | Node::Tagged { head: props, .. }) => {
                let next = usize::from(f.next);
                if b == b'}' && phase == Phase::KeyOrClose && rest_optional(props, next) {
                    self.pop();
                    return Some(self);
                }
                let cands = allowed_keys(props, next);
                if b != b'"' || cands == 0 {
                    return None;
                }
                f.phase = Phase::Key { cands, pos: 1 };
            }
            (Phase::Key { cands, pos }, Node::Object(props) | Node::Tagged { head: props, .. }) => {
                let p = usize::from(pos);
                let next = mask_where(cands, props.len(), |i| props[i].key.get(p) == Some(&b));
                if next == 0 {
                    return None;
                }
                // Keys end with their closing quote, so a complete key is the only candidate.
                let done = (0..props.len()).find(|&i| next & (1 << i) != 0 && props[i].key.len() == p + 1);
                f.phase = match done {
                    Some(i) => Phase::Colon { prop: i as u8 },
                    None => Phase::Key {
                        cands: next,
                        pos: pos.checked_add(1)?,
                    },
                };
            }
            (Phase::Colon { prop }, Node::Object(props) | Node::Tagged { head: props, .. }) if b == b':' => {
                f.phase = Phase::AfterMember;
                f.next = u16::from(prop) + 1;
                self.frames[top] = f;
                self.push(props[usize::from(prop)].node)?;
                return Some(self);
            }
            (Phase::AfterMember, Node::Object(props)) => {
                let next = usize::from(f.next);
                match b {
                    b',' if allowed_keys(props, next) != 0 => f.phase = Phase::KeyAfterComma,
                    b'}' if rest_optional(props, next) => {
                        self.pop();
                        return Some(self);
                    }
                    _ => return None,
                }
            }
            (Phase::ArrFirst, Node::Array { items, min, .. }) => {
                if b == b']' {
                    if *min > 0 {
                        return None;
                    }
                    self.pop();
                    return Some(self);
                }
                f.phase = Phase::AfterItem;
                f.next = 1;
                self.frames[top] = f;
                self.push(*items)?;
                return self.step(schema, b);
            }
            (Phase::AfterItem, Node::Array { items, min, max }) => match b {
                b',' if f.next < *max => {
                    f.next += 1;
                    self.frames[top] = f;
                    self.push(*items)?;
                    return Some(self);
                }
                b']' if f.next >= *min => {
                    self.pop();
                    return Some(self);
                }
                _ => return None,
            },
            _ => return None,
        }
        self.frames[top] = f;
        Some(self)
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The members of `cands` (over `n` items) for which `keep` holds.
fn mask_where(cands: u64, n: usize, keep: impl Fn(usize) -> bool) -> u64 {
    (0..n.min(64))
        .filter(|&i| cands & (1 << i) != 0 && keep(i))
        .fold(0, |m, i| m | (1 << i))
}

/// Properties that may come next when properties before `next` are settled: each one up to and
/// including the first required one.
fn allowed_keys(props: &[Prop], next: usize) -> u64 {
    let mut m = 0u64;
    for (i, p) in props.iter().enumerate().skip(next) {
        m |= 1 << i;
        if p.required {
            break;
        }
    }
    m
}

/// Whether every property from `next` on is optional (the object may close).
fn rest_optional(props: &[Prop], next: usize) -> bool {
    props.iter().skip(next).all(|p| !p.required)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accepts(schema: &Value, doc: &str) -> bool {
        let s = Schema::compile(schema).unwrap();
        let end = doc.bytes().try_fold(s.start(64), |st, b| Recognizer::step(st, &s, b));
        end.is_some_and(|st| st.is_complete(&s))
    }

    #[test]
    fn objects_in_schema_order_with_required_keys() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
            "required": ["name", "age"],
            "additionalProperties": false
        });
        assert!(accepts(&schema, r#"{"name": "Ann", "age": 30}"#));
        assert!(accepts(
            &schema,
            r#"{ "name" : "Ann" , "age" : -3, "tags": ["a", "b"] }"#
        ));
        assert!(!accepts(&schema, r#"{"age": 30, "name": "Ann"}"#), "schema order");
        assert!(!accepts(&schema, r#"{"name": "Ann"}"#), "required");
        assert!(!accepts(&schema, r#"{"name": "Ann", "age": 3.5}"#), "integer");
        assert!(!accepts(&schema, r#"{"name": 1, "age": 3}"#), "string");
        assert!(!accepts(&schema, r#"{"name": "Ann", "age": 3, "tags": ["c"]}"#), "enum");
        assert!(
            !accepts(&schema, r#"{"name": "Ann", "age": 3, "tags": ["a", "a", "a"]}"#),
            "maxItems"
        );
        assert!(
            !accepts(&schema, r#"{"name": "Ann", "age": 3, "x": 1}"#),
            "undeclared key"
        );
        assert!(!accepts(&schema, r#"{"name": "Ann", "age": -0}"#), "-0");
        assert!(accepts(&schema, r#"{"name": "Ann", "age": -123456789012345678}"#));
        assert!(
            !accepts(&schema, r#"{"name": "Ann", "age": 1234567890123456789}"#),
            "19 digits"
        );
    }

    #[test]
    fn nullable_refs_and_free_values() {
        let schema = json!({
            "$defs": {"Pet": {"type": "object", "properties": {"kind": {"const": "cat"}, "owner": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]}}, "required": ["kind"]}},
            "type": "object",
            "properties": {"pet": {"$ref": "#/$defs/Pet"}, "note": {"type": ["string", "null"]}, "extra": {}},
            "required": ["pet", "note", "extra"]
        });
        assert!(accepts(
            &schema,
            r#"{"pet": {"kind": "cat", "owner": {"kind": "cat"}}, "note": null, "extra": [1, {"a": true}]}"#
        ));
        assert!(accepts(
            &schema,
            r#"{"pet": {"kind": "cat", "owner": null}, "note": "hi", "extra": 0}"#
        ));
        assert!(!accepts(
            &schema,
            r#"{"pet": {"kind": "dog"}, "note": null, "extra": 0}"#
        ));
    }

    #[test]
    fn tagged_unions_pick_the_object_their_tag_names() {
        let call = |name: &str, params: Value| json!({"type": "object", "properties": {"name": {"const": name}, "parameters": params}, "required": ["name", "parameters"]});
        let schema = json!({"type": "array", "minItems": 1, "items": {"anyOf": [
            call("get_weather", json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})),
            call("get_time", json!({"type": "object", "properties": {"tz": {"type": "integer"}}, "required": ["tz"]})),
            call("get", json!({"type": "object"})),
        ]}});
        assert!(accepts(
            &schema,
            r#"[{"name": "get_weather", "parameters": {"city": "Paris"}}]"#
        ));
        assert!(accepts(
            &schema,
            r#"[{"name":"get_time","parameters":{"tz":2}}, {"name" : "get" , "parameters": {"x": [1]}}]"#
        ));
        assert!(
            !accepts(&schema, r#"[{"name": "get_weather", "parameters": {"tz": 2}}]"#),
            "other tool's params"
        );
        assert!(
            !accepts(&schema, r#"[{"name": "get_time", "parameters": {"tz": "x"}}]"#),
            "typed by its tool"
        );
        assert!(
            !accepts(&schema, r#"[{"name": "get_date", "parameters": {}}]"#),
            "unknown tag"
        );
        assert!(!accepts(&schema, r#"[{"parameters": {}, "name": "get"}]"#), "tag first");
        assert!(!accepts(&schema, r#"[{"name": "get"}]"#), "required after the tag");
        // Pydantic's discriminated union: `oneOf` of `$ref`s, the tag not first, `discriminator`.
        let pets = json!({
            "$defs": {
                "Cat": {"type": "object", "properties": {"meows": {"type": "integer"}, "kind": {"const": "cat"}}, "required": ["meows", "kind"]},
                "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}, "barks": {"type": "boolean"}}, "required": ["kind"]}
            },
            "type": "object",
            "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "kind"}}},
            "required": ["pet"]
        });
        assert!(accepts(&pets, r#"{"pet": {"kind": "cat", "meows": 3}}"#));
        assert!(accepts(&pets, r#"{"pet": {"kind": "dog"}}"#));
        assert!(accepts(&pets, r#"{"pet": {"kind": "dog", "barks": true}}"#));
        assert!(!accepts(&pets, r#"{"pet": {"kind": "cat"}}"#), "a cat meows");
        assert!(!accepts(&pets, r#"{"pet": {"kind": "dog", "meows": 1}}"#));
        // Tags that are not distinct are no tagged union, and they start alike.
        let same = json!({"anyOf": [call("a", json!({})), call("a", json!({"type": "object"}))]});
        assert!(Schema::compile(&same).unwrap_err().to_string().contains("start alike"));
    }

    #[test]
    fn unsupported_keywords_are_named() {
        for (schema, word) in [
            (json!({"type": "string", "pattern": "a+"}), "pattern"),
            (
                json!({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}),
                "format",
            ),
            (
                json!({"oneOf": [{"type": "string"}, {"type": ["string", "null"]}]}),
                "start alike",
            ),
            (json!({"anyOf": [{"type": "string"}, {"enum": ["a"]}]}), "start alike"),
        ] {
            let err = Schema::compile(&schema).unwrap_err().to_string();
            assert!(err.contains(word), "{err}");
        }
    }
}
