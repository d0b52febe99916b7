//! Render input laid out flat: every value of a conversation in one node array, every string in one
//! text buffer.
//!
//! Building minijinja values for a long conversation allocates once per string, list and dict and frees
//! each again after the render; for a 120-message chat that was most of the time a fast render takes.
//! A [`Doc`] is two growable buffers: the binding writes Python objects straight into it, the fast
//! renderer reads it in place (strings are slices of `text`), and only a render that hands over to
//! minijinja converts it into minijinja values ([`NodeRef::to_value`]).
//!
//! Layout: a list node points at `len` consecutive child nodes; a dict node at `2 * len` consecutive
//! nodes, key then value. Children of a container are reserved together, so a container's own children
//! may sit anywhere after it.

use minijinja::value::ValueKind;
use minijinja::Value;

/// One value of a [`Doc`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond 64 bits, kept as its decimal digits in the text buffer.
    BigInt(u32, u32),
    Float(f64),
    Str(u32, u32),
    List(u32, u32),
    Dict(u32, u32),
}

/// A conversation (or any render input) stored flat; see the module docs.
#[derive(Debug, Default)]
pub struct Doc {
    nodes: Vec<Node>,
    text: String,
}

/// Where a value is written in a [`Doc`] under construction.
pub type Slot = usize;

/// The input is larger than a [`Doc`] can index (4 GiB of text or 4 billion values).
#[derive(Debug, thiserror::Error)]
#[error("the render input is too large: over 4 GiB of text or 4 billion values")]
pub struct TooLarge;

fn index(n: usize) -> Result<u32, TooLarge> {
    u32::try_from(n).map_err(|_| TooLarge)
}

impl Doc {
    /// An empty document with room for about `nodes` values and `text` bytes.
    pub fn with_capacity(nodes: usize, text: usize) -> Self {
        Self {
            nodes: Vec::with_capacity(nodes),
            text: String::with_capacity(text),
        }
    }

    /// Reserve `n` consecutive slots (set to None); returns the first.
    pub fn reserve(&mut self, n: usize) -> Result<Slot, TooLarge> {
        let first = self.nodes.len();
        index(first + n)?;
        self.nodes.resize(first + n, Node::None);
        Ok(first)
    }

    fn set(&mut self, slot: Slot, node: Node) {
        if let Some(n) = self.nodes.get_mut(slot) {
            *n = node;
        }
    }

    pub fn set_none(&mut self, slot: Slot) {
        self.set(slot, Node::None);
    }

    pub fn set_bool(&mut self, slot: Slot, b: bool) {
        self.set(slot, Node::Bool(b));
    }

    pub fn set_int(&mut self, slot: Slot, i: i64) {
        self.set(slot, Node::Int(i));
    }

    pub fn set_big_int(&mut self, slot: Slot, i: i128) -> Result<(), TooLarge> {
        let (start, len) = self.push_text(&i.to_string())?;
        self.set(slot, Node::BigInt(start, len));
        Ok(())
    }

    pub fn set_float(&mut self, slot: Slot, f: f64) {
        self.set(slot, Node::Float(f));
    }

    pub fn set_str(&mut self, slot: Slot, s: &str) -> Result<(), TooLarge> {
        let (start, len) = self.push_text(s)?;
        self.set(slot, Node::Str(start, len));
        Ok(())
    }

    /// Make `slot` a list of `len` items; returns the first item's slot.
    pub fn set_list(&mut self, slot: Slot, len: usize) -> Result<Slot, TooLarge> {
        let first = self.reserve(len)?;
        self.set(slot, Node::List(index(first)?, index(len)?));
        Ok(first)
    }

    /// Make `slot` a dict of `len` pairs; returns the first key's slot (values follow their keys).
    pub fn set_dict(&mut self, slot: Slot, len: usize) -> Result<Slot, TooLarge> {
        let first = self.reserve(2 * len)?;
        self.set(slot, Node::Dict(index(first)?, index(len)?));
        Ok(first)
    }

    /// Shorten the list or dict at `slot` to its first `len` items (pairs), e.g. after skipping some.
    pub fn truncate(&mut self, slot: Slot, len: usize) {
        let len = len as u32;
        if let Some(node) = self.nodes.get_mut(slot) {
            match node {
                Node::List(_, n) | Node::Dict(_, n) if len <= *n => *n = len,
                _ => {}
            }
        }
    }

    fn push_text(&mut self, s: &str) -> Result<(u32, u32), TooLarge> {
        let start = index(self.text.len())?;
        let len = index(s.len())?;
        index(self.text.len() + s.len())?;
        self.text.push_str(s);
        Ok((start, len))
    }

    /// Write a JSON value at `slot` (integers stay integers, objects keep their key order).
    pub fn set_json(&mut self, slot: Slot, v: &serde_json::Value) -> Result<(), TooLarge> {
        use serde_json::Value as J;
        match v {
            J::Null => self.set_none(slot),
            J::Bool(b) => self.set_bool(slot, *b),
            J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => self.set_int(slot, i),
                (None, Some(u), _) => self.set_big_int(slot, i128::from(u))?,
                (None, None, Some(f)) => self.set_float(slot, f),
                _ => self.set_str(slot, &n.to_string())?,
            },
            J::String(s) => self.set_str(slot, s)?,
            J::Array(items) => {
                let first = self.set_list(slot, items.len())?;
                for (k, item) in items.iter().enumerate() {
                    self.set_json(first + k, item)?;
                }
            }
            J::Object(map) => {
                let first = self.set_dict(slot, map.len())?;
                for (k, (key, value)) in map.iter().enumerate() {
                    self.set_str(first + 2 * k, key)?;
                    self.set_json(first + 2 * k + 1, value)?;
                }
            }
        }
        Ok(())
    }

    /// The value at `slot`, for reading.
    pub(crate) fn at(&self, slot: Slot) -> NodeRef<'_> {
        NodeRef {
            doc: self,
            i: slot as u32,
        }
    }

    /// The string at a `Str`/`BigInt` node's span.
    fn span(&self, start: u32, len: u32) -> &str {
        self.text
            .get(start as usize..(start + len) as usize)
            .unwrap_or_default()
    }
}

/// A value inside a [`Doc`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    pub doc: &'a Doc,
    pub i: u32,
}

impl<'a> NodeRef<'a> {
    pub fn node(self) -> Node {
        self.doc.nodes.get(self.i as usize).copied().unwrap_or(Node::None)
    }

    fn at(self, i: u32) -> NodeRef<'a> {
        NodeRef { doc: self.doc, i }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self.node() {
            Node::Str(start, len) => Some(self.doc.span(start, len)),
            _ => None,
        }
    }

    /// The list's items as `(first, len)`.
    pub fn list(self) -> Option<(u32, u32)> {
        match self.node() {
            Node::List(first, len) => Some((first, len)),
            _ => None,
        }
    }

    /// The dict's pairs as `(first key, number of pairs)`.
    pub fn dict(self) -> Option<(u32, u32)> {
        match self.node() {
            Node::Dict(first, len) => Some((first, len)),
            _ => None,
        }
    }

    /// Item `k` of a node range starting at `first`.
    pub fn child(self, first: u32, k: u32) -> NodeRef<'a> {
        self.at(first + k)
    }

    /// The value under a string key of a dict.
    pub fn get(self, key: &str) -> Option<NodeRef<'a>> {
        let (first, len) = self.dict()?;
        let pairs = self.doc.nodes.get(first as usize..(first + 2 * len) as usize)?;
        let text = self.doc.text.as_bytes();
        let key = key.as_bytes();
        // Compare lengths first: most keys of a message differ in length from the one asked for.
        let at = pairs.chunks_exact(2).position(|pair| match pair[0] {
            Node::Str(start, n) => {
                n as usize == key.len() && text.get(start as usize..(start + n) as usize) == Some(key)
            }
            _ => false,
        })?;
        Some(self.at(first + 2 * at as u32 + 1))
    }

    pub fn kind(self) -> ValueKind {
        match self.node() {
            Node::None => ValueKind::None,
            Node::Bool(_) => ValueKind::Bool,
            Node::Int(_) | Node::BigInt(..) | Node::Float(_) => ValueKind::Number,
            Node::Str(..) => ValueKind::String,
            Node::List(..) => ValueKind::Seq,
            Node::Dict(..) => ValueKind::Map,
        }
    }

    pub fn is_true(self) -> bool {
        match self.node() {
            Node::None => false,
            Node::Bool(b) => b,
            Node::Int(i) => i != 0,
            Node::BigInt(..) => true,
            Node::Float(f) => f != 0.0,
            Node::Str(_, len) | Node::List(_, len) | Node::Dict(_, len) => len > 0,
        }
    }

    /// The same value as a minijinja value (what the binding built before documents existed).
    pub fn to_value(self) -> Value {
        match self.node() {
            Node::None => Value::from(()),
            Node::Bool(b) => Value::from(b),
            Node::Int(i) => Value::from(i),
            Node::BigInt(start, len) => {
                let digits = self.doc.span(start, len);
                digits.parse::<i128>().map_or_else(|_| Value::from(digits), Value::from)
            }
            Node::Float(f) => Value::from(f),
            Node::Str(start, len) => Value::from(self.doc.span(start, len)),
            Node::List(first, len) => Value::from((0..len).map(|k| self.at(first + k).to_value()).collect::<Vec<_>>()),
            Node::Dict(first, len) => crate::dict::pair_dict(
                (0..len)
                    .map(|k| (self.at(first + 2 * k).to_value(), self.at(first + 2 * k + 1).to_value()))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doc_reads_back_what_was_written() {
        let mut doc = Doc::default();
        let root = doc.reserve(1).unwrap();
        let first = doc.set_dict(root, 3).unwrap();
        doc.set_str(first, "role").unwrap();
        doc.set_str(first + 1, "user").unwrap();
        doc.set_str(first + 2, "n").unwrap();
        let items = doc.set_list(first + 3, 2).unwrap();
        doc.set_int(items, 7);
        doc.set_big_int(items + 1, 1 << 100).unwrap();
        doc.set_str(first + 4, "skipped").unwrap();
        doc.truncate(root, 2);
        let r = doc.at(root);
        assert_eq!(r.get("role").and_then(NodeRef::as_str), Some("user"));
        assert!(r.get("skipped").is_none());
        let v = r.to_value();
        assert_eq!(v.get_attr("n").unwrap().len(), Some(2));
        assert_eq!(
            v.get_attr("n").unwrap().get_item_by_index(1).unwrap().to_string(),
            (1i128 << 100).to_string()
        );
    }
}
