//! The fast renderer's interpreter: walks a [`Program`] over the render's data without copying it.
//!
//! Values read from the render's input (messages, tools, special tokens) are borrowed ([`V::B`],
//! [`V::T`], [`V::S`]) instead of cloned, so `message.role == "user"` compares two `&str`s and
//! `messages[1:]` is a sub-slice. Anything outside the implemented semantics returns [`Bail`]; the
//! caller then renders the same input with minijinja, whose result (output or error) is authoritative.

use super::ir::{Arith, Builtin, Cmp, Expr, FilterKind, LoopAttr, Stmt, Sym, Target, TestKind};
use super::ns::Namespace;
use super::Compiled;
use crate::dict::PairDict;
use crate::doc::{Node, NodeRef};
use crate::none::is_py_none;
use crate::pyrepr::write_str;
use minijinja::value::{Kwargs, ValueKind};
use minijinja::Value;
use std::borrow::Cow;

/// This render is outside what the fast renderer implements (or it fails): use minijinja. `line` is the
/// source line that handed over, for finding which constructs are worth implementing next.
#[derive(Debug, Clone, Copy)]
pub struct Bail {
    pub line: u32,
}

macro_rules! bail {
    () => {
        Bail { line: line!() }
    };
}

type R<T> = Result<T, Bail>;

/// A value during a render: borrowed from the input where possible.
#[derive(Debug, Clone)]
pub enum V<'a> {
    B(&'a Value),
    O(Value),
    /// Text borrowed from the input (e.g. a trimmed message content).
    T(&'a str),
    /// A slice of an input list (`messages[1:]`).
    S(&'a [Value]),
    /// A value of the input document.
    N(NodeRef<'a>),
    /// A range of a document list's items (`messages[1:]`): the list's document, first item, length.
    L(NodeRef<'a>, u32, u32),
    Macro(usize),
    /// One of the environment's global functions (`raise_exception`, `strftime_now`, ...), read as a
    /// value: only `is defined` / `is undefined` are answered here.
    Global,
}

const UNDEFINED: V<'static> = V::O(Value::UNDEFINED);

impl<'a> V<'a> {
    fn val(&self) -> R<Cow<'_, Value>> {
        Ok(match self {
            V::B(v) => Cow::Borrowed(*v),
            V::O(v) => Cow::Borrowed(v),
            V::T(s) => Cow::Owned(Value::from(*s)),
            V::S(items) => Cow::Owned(Value::from(items.to_vec())),
            V::N(r) => Cow::Owned(r.to_value()),
            V::L(r, first, len) => Cow::Owned(Value::from(
                (0..*len).map(|k| r.child(*first, k).to_value()).collect::<Vec<_>>(),
            )),
            V::Macro(_) | V::Global => return Err(bail!()),
        })
    }

    fn into_value(self) -> R<Value> {
        Ok(match self {
            V::O(v) => v,
            other => other.val()?.into_owned(),
        })
    }

    /// The value, when it is one already (borrowed or owned).
    fn raw(&self) -> Option<&Value> {
        match self {
            V::B(v) => Some(v),
            V::O(v) => Some(v),
            _ => None,
        }
    }

    #[inline]
    fn as_str(&self) -> Option<&str> {
        match self {
            V::B(v) => v.as_str(),
            V::O(v) => v.as_str(),
            V::T(s) => Some(s),
            V::N(r) => r.as_str(),
            _ => None,
        }
    }

    /// The borrowed text, when this is text from the input.
    fn text(&self) -> Option<&'a str> {
        match self {
            V::B(v) => v.as_str(),
            V::T(s) => Some(s),
            V::N(r) => r.as_str(),
            _ => None,
        }
    }

    /// A document list (or a range of one): `(anchor, first item, length)`.
    fn nodes(&self) -> Option<(NodeRef<'a>, u32, u32)> {
        match self {
            V::N(r) => r.list().map(|(first, len)| (*r, first, len)),
            V::L(r, first, len) => Some((*r, *first, *len)),
            _ => None,
        }
    }

    /// A document dict.
    fn node_dict(&self) -> Option<NodeRef<'a>> {
        match self {
            V::N(r) if r.dict().is_some() => Some(*r),
            _ => None,
        }
    }

    /// The borrowed list items, when this is a list from the input.
    fn seq(&self) -> Option<&'a [Value]> {
        match self {
            V::B(v) => v.downcast_object_ref::<Vec<Value>>().map(Vec::as_slice),
            V::S(items) => Some(items),
            _ => None,
        }
    }

    fn pair_dict(&self) -> Option<&'a PairDict> {
        match self {
            V::B(v) => v.downcast_object_ref::<PairDict>(),
            _ => None,
        }
    }

    fn kind(&self) -> R<ValueKind> {
        Ok(match self {
            V::B(v) => v.kind(),
            V::O(v) => v.kind(),
            V::T(_) => ValueKind::String,
            // A slice of a list is an iterable in minijinja (`messages[1:] is sequence` is false there).
            V::S(_) | V::L(..) => ValueKind::Iterable,
            V::N(r) => r.kind(),
            V::Macro(_) | V::Global => return Err(bail!()),
        })
    }

    fn is_undefined(&self) -> bool {
        match self {
            V::B(v) => v.is_undefined(),
            V::O(v) => v.is_undefined(),
            _ => false,
        }
    }

    fn truthy(&self) -> R<bool> {
        Ok(match self {
            V::B(v) => v.is_true(),
            // minijinja's namespace is false when empty, this one's type does not say: hand over.
            V::O(v) if v.kind() == ValueKind::Plain && v.downcast_object_ref::<Namespace>().is_some() => {
                return Err(bail!())
            }
            V::O(v) => v.is_true(),
            V::T(s) => !s.is_empty(),
            V::S(items) => !items.is_empty(),
            V::N(r) => r.is_true(),
            V::L(_, _, len) => *len > 0,
            V::Macro(_) | V::Global => return Err(bail!()),
        })
    }

    /// A namespace or macro must not reach generic value code, which may treat it differently from
    /// minijinja's own types.
    #[inline]
    fn plain(self) -> R<Self> {
        match &self {
            // Input values are never namespaces; only values the template made can be.
            V::O(v) if v.kind() == ValueKind::Plain && v.downcast_object_ref::<Namespace>().is_some() => Err(bail!()),
            V::Macro(_) | V::Global => Err(bail!()),
            _ => Ok(self),
        }
    }
}

/// The items a `for` loop walks.
enum Items<'a> {
    Slice(&'a [Value]),
    Pairs(&'a [(Value, Value)]),
    /// A document list's items: anchor, first, length.
    Nodes(NodeRef<'a>, u32, u32),
    /// A document dict's pairs: anchor, first key, number of pairs.
    NodePairs(NodeRef<'a>, u32, u32),
    Owned(Vec<V<'a>>),
}

impl<'a> Items<'a> {
    /// Every item, in order (pairs become tuples).
    fn into_vec(self) -> Vec<V<'a>> {
        match self {
            Items::Slice(s) => s.iter().map(V::B).collect(),
            Items::Pairs(p) => p
                .iter()
                .map(|(k, v)| V::O(crate::tuple::pair(k.clone(), v.clone())))
                .collect(),
            Items::Nodes(r, first, n) => (0..n).map(|k| V::N(r.child(first, k))).collect(),
            Items::NodePairs(r, first, n) => (0..n)
                .map(|k| {
                    V::O(crate::tuple::pair(
                        r.child(first, 2 * k).to_value(),
                        r.child(first, 2 * k + 1).to_value(),
                    ))
                })
                .collect(),
            Items::Owned(v) => v,
        }
    }

    fn len(&self) -> usize {
        match self {
            Items::Slice(s) => s.len(),
            Items::Pairs(p) => p.len(),
            Items::Nodes(_, _, n) | Items::NodePairs(_, _, n) => *n as usize,
            Items::Owned(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> Option<V<'a>> {
        match self {
            Items::Slice(s) => s.get(i).map(V::B),
            Items::Pairs(_) | Items::NodePairs(..) => None,
            Items::Nodes(r, first, n) => (i < *n as usize).then(|| V::N(r.child(*first, i as u32))),
            Items::Owned(v) => v.get(i).cloned(),
        }
    }
}

struct LoopState<'a> {
    items: Items<'a>,
    index: usize,
}

enum Flow {
    Next,
    Break,
    Continue,
}

/// One render.
pub struct Run<'a> {
    prog: &'a Compiled,
    root: Vec<Option<V<'a>>>,
    scope: Vec<(Sym, V<'a>)>,
    /// Start of each open frame in `scope`: the template's, then loops and macro calls.
    frames: Vec<usize>,
    /// While a macro runs: the start of its frame and the end of the template's top-level frame; names
    /// are looked up there and nowhere between (macros see their arguments and the top level).
    macro_view: Option<(usize, usize)>,
    loops: Vec<LoopState<'a>>,
    /// Macro calls in progress; deep recursion is left to minijinja and its limits.
    macro_depth: usize,
    pub out: String,
}

/// Macro calls nested deeper than this hand the render over.
const MAX_MACRO_DEPTH: usize = 64;

impl<'a> Run<'a> {
    /// `ctx` holds the context's values; `nodes` names document values (they win over `ctx`).
    pub fn new(prog: &'a Compiled, ctx: &'a [(Value, Value)], nodes: &[(&str, NodeRef<'a>)], capacity: usize) -> Self {
        let mut root: Vec<Option<V<'a>>> = vec![None; prog.program.syms.len()];
        for (k, v) in ctx {
            if let Some(sym) = k.as_str().and_then(|k| prog.program.syms.get(k)) {
                root[*sym as usize] = Some(V::B(v));
            }
        }
        for (k, r) in nodes {
            if let Some(sym) = prog.program.syms.get(*k) {
                root[*sym as usize] = Some(V::N(*r));
            }
        }
        Run {
            prog,
            root,
            scope: Vec::with_capacity(32),
            frames: vec![0],
            macro_view: None,
            loops: Vec::new(),
            macro_depth: 0,
            out: String::with_capacity(capacity),
        }
    }

    pub fn run(&mut self) -> R<()> {
        let body = &self.prog.program.body;
        match self.block(body)? {
            Flow::Next => Ok(()),
            _ => Err(bail!()),
        }
    }

    fn block(&mut self, stmts: &'a [Stmt]) -> R<Flow> {
        for s in stmts {
            match s {
                Stmt::Raw(text) => self.out.push_str(text),
                Stmt::Emit(e) => self.emit(e)?,
                Stmt::If(cond, then, otherwise) => {
                    let branch = if self.cond(cond)? { then } else { otherwise };
                    match self.block(branch)? {
                        Flow::Next => {}
                        other => return Ok(other),
                    }
                }
                Stmt::For(f) => self.for_loop(f)?,
                Stmt::Set(sym, e) => {
                    let v = self.eval(e)?;
                    self.set(*sym, v);
                }
                Stmt::SetAttr(sym, attr, e) => {
                    let v = self.eval(e)?.plain()?.into_value()?;
                    let target = self.lookup_ref(*sym);
                    let ns = target
                        .raw()
                        .and_then(|t| t.downcast_object_ref::<Namespace>())
                        .ok_or(bail!())?;
                    ns.set(attr, v);
                }
                Stmt::DefineMacro(sym, index) => self.set(*sym, V::Macro(*index)),
                Stmt::SetBlock(sym, body) => {
                    let saved = std::mem::take(&mut self.out);
                    let flow = self.block(body);
                    let captured = std::mem::replace(&mut self.out, saved);
                    match flow? {
                        Flow::Next => self.set(*sym, V::O(Value::from(captured))),
                        _ => return Err(bail!()),
                    }
                }
                Stmt::Unsupported => return Err(bail!()),
                Stmt::Break => return Ok(Flow::Break),
                Stmt::Continue => return Ok(Flow::Continue),
            }
        }
        Ok(Flow::Next)
    }

    /// Assign in the current frame.
    fn set(&mut self, sym: Sym, v: V<'a>) {
        let start = self.frames.last().copied().unwrap_or(0);
        match self.scope[start..].iter_mut().rev().find(|(s, _)| *s == sym) {
            Some(slot) => slot.1 = v,
            None => self.scope.push((sym, v)),
        }
    }

    fn lookup(&self, sym: Sym) -> R<V<'a>> {
        Ok(self.lookup_ref(sym).clone())
    }

    /// The value a name resolves to: the innermost binding in scope (macros see their own frame and
    /// the top level), then the render's context, then the environment's globals.
    fn lookup_ref(&self, sym: Sym) -> &V<'a> {
        let found = match self.macro_view {
            None => self.scope.iter().rev().find(|(s, _)| *s == sym),
            Some((base, top_end)) => self.scope[base..]
                .iter()
                .rev()
                .chain(self.scope[..top_end].iter().rev())
                .find(|(s, _)| *s == sym),
        };
        if let Some((_, v)) = found {
            return v;
        }
        if let Some(v) = &self.root[sym as usize] {
            return v;
        }
        if self.prog.globals[sym as usize] {
            return &V::Global;
        }
        &UNDEFINED
    }

    fn emit(&mut self, e: &'a Expr) -> R<()> {
        match e {
            Expr::Concat(items) => {
                for item in items {
                    self.emit_part(item)?;
                }
                return Ok(());
            }
            Expr::Add(items) => {
                // Strings are written as they come; a non-string operand means numbers or lists are being
                // added, so the output goes back to the mark and the whole sum is computed instead.
                let mark = self.out.len();
                let mut all_strings = true;
                for item in items {
                    let v = self.eval(item)?;
                    match v.as_str() {
                        Some(s) => self.out.push_str(s),
                        None => {
                            all_strings = false;
                            break;
                        }
                    }
                }
                if all_strings {
                    return Ok(());
                }
                self.out.truncate(mark);
                let values = items.iter().map(|x| self.eval(x)).collect::<R<Vec<_>>>()?;
                let v = add_all(values)?;
                return self.write(&v);
            }
            _ if plain_tojson(e).is_some() => return self.emit_part(e),
            Expr::Filter(FilterKind::ToJson, input, pos, kwargs) => {
                // `tojson(indent=4)` and friends: the options are parsed as the filter parses them.
                let v = self.eval(input)?.plain()?;
                let indent = match pos.first() {
                    Some(x) => Some(self.eval(x)?.plain()?.into_value()?),
                    None => None,
                };
                let kwargs = kwargs
                    .iter()
                    .map(|(k, x)| Ok((&**k, self.eval(x)?.plain()?.into_value()?)))
                    .collect::<R<Vec<_>>>()?;
                let opts = crate::json::dump_options(indent, kwargs.into_iter().collect()).map_err(|_| bail!())?;
                return self.write_json(v, &opts);
            }
            Expr::CallName(sym, _, pos, kwargs) => {
                if let V::Macro(index) = self.lookup(*sym)? {
                    return self.call_macro(index, pos, kwargs, true).map(|_| ());
                }
            }
            _ => {}
        }
        let v = self.eval(e)?;
        self.write(&v)
    }

    fn write(&mut self, v: &V<'a>) -> R<()> {
        if let Some(s) = v.as_str() {
            self.out.push_str(s);
            return Ok(());
        }
        let v = v.clone().plain()?;
        let v = v.val()?;
        if is_py_none(&v) {
            self.out.push_str("None");
        } else {
            write_str(&mut self.out, &v);
        }
        Ok(())
    }

    /// Write `v` as JSON with `opts`: a document value read in place, any other through its value.
    fn write_json(&mut self, v: V<'a>, opts: &crate::json::DumpOptions) -> R<()> {
        if let V::N(r) = v {
            return crate::json::dump_node(&mut self.out, r, opts, 0).map_err(|_| bail!());
        }
        crate::json::dump(&mut self.out, &*v.val()?, opts, 0).map_err(|_| bail!())
    }

    /// One operand of `~` in an emitted expression: JSON is written straight to the output.
    fn emit_part(&mut self, e: &'a Expr) -> R<()> {
        if let Some(input) = plain_tojson(e) {
            let v = self.eval(input)?.plain()?;
            let prog = self.prog;
            return self.write_json(v, &prog.json);
        }
        let v = self.eval(e)?;
        self.write_concat_part(&v)
    }

    /// One operand of `~`, written as minijinja's `Display` would.
    fn write_concat_part(&mut self, v: &V<'a>) -> R<()> {
        if let Some(s) = v.as_str() {
            self.out.push_str(s);
            return Ok(());
        }
        let value = v.val()?;
        if value.is_undefined() {
            return Ok(());
        }
        match (value.kind(), value.as_i64()) {
            (ValueKind::Number, Some(i)) if value.is_integer() => {
                use std::fmt::Write;
                let _ = write!(self.out, "{i}");
                Ok(())
            }
            _ => Err(bail!()),
        }
    }

    fn for_loop(&mut self, f: &'a super::ir::For) -> R<()> {
        let mut items = match &f.iter {
            Expr::Slice(base, start, stop, Some(step)) if !f.items => self.stepped_items(base, start, stop, step)?,
            _ => self.loop_items(f)?,
        };
        if let Some(filter) = &f.filter {
            items = self.filtered(f, items, filter)?;
        }
        if items.len() == 0 {
            let flow = self.block(&f.else_body)?;
            return match flow {
                Flow::Next => Ok(()),
                _ => Err(bail!()),
            };
        }
        self.each_in_loop(items, |this, i| {
            if let Some(state) = this.loops.last_mut() {
                state.index = i;
            }
            this.bind_target(&f.target, i)?;
            match this.block(&f.body)? {
                // minijinja runs `else` when a loop breaks in its first iteration; not copied here.
                Flow::Break if i == 0 && !f.else_body.is_empty() => Err(bail!()),
                Flow::Break => Ok(false),
                _ => Ok(true),
            }
        })
    }

    /// Run `step` on each index of `items` inside a loop of its own (a scope frame, and the loop's
    /// state that `loop.*` and [`Self::bind_target`] read), until it returns `false` or an error; the
    /// loop and its frame are gone afterwards however it ended.
    fn each_in_loop(&mut self, items: Items<'a>, mut step: impl FnMut(&mut Self, usize) -> R<bool>) -> R<()> {
        let start = self.scope.len();
        self.frames.push(start);
        let n = items.len();
        self.loops.push(LoopState { items, index: 0 });
        let mut result = Ok(());
        for i in 0..n {
            // Each iteration starts from the loop's frame: what the previous one set is gone (jinja2
            // and minijinja alike; `{% set first = false %}` in a loop body does not carry over).
            self.scope.truncate(start);
            match step(self, i) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.loops.pop();
        self.frames.pop();
        self.scope.truncate(start);
        result
    }

    /// An optional integer slice bound.
    fn slice_bound(&mut self, e: &'a Option<Box<Expr>>) -> R<Option<i64>> {
        let Some(x) = e else { return Ok(None) };
        let v = self.eval(x)?;
        let v = v.val()?;
        if v.is_none() {
            return Ok(None);
        }
        v.as_i64().filter(|_| v.is_integer()).map(Some).ok_or(bail!())
    }

    /// `for x in seq[start:stop:step]`: the items of a list that minijinja's slice picks.
    fn stepped_items(
        &mut self,
        base: &'a Expr,
        start: &'a Option<Box<Expr>>,
        stop: &'a Option<Box<Expr>>,
        step: &'a Expr,
    ) -> R<Items<'a>> {
        let base = self.eval(base)?.plain()?;
        let (start, stop) = (self.slice_bound(start)?, self.slice_bound(stop)?);
        let step = {
            let v = self.eval(step)?;
            let v = v.val()?;
            v.as_i64().filter(|s| v.is_integer() && *s != 0).ok_or(bail!())?
        };
        if let Some((r, first, len)) = base.nodes() {
            let picked = minijinja_slice_indices(start, stop, step, len as usize)?;
            return Ok(Items::Owned(
                picked.into_iter().map(|i| V::N(r.child(first, i as u32))).collect(),
            ));
        }
        if let Some(items) = base.seq() {
            let picked = minijinja_slice_indices(start, stop, step, items.len())?;
            return Ok(Items::Owned(picked.into_iter().map(|i| V::B(&items[i])).collect()));
        }
        Err(bail!())
    }

    /// What a `for` loop (without a stepped slice) walks.
    fn loop_items(&mut self, f: &'a super::ir::For) -> R<Items<'a>> {
        let source = self.eval(&f.iter)?.plain()?;
        if !f.items {
            return iterate(&source);
        }
        Ok(
            match (
                source.pair_dict(),
                source.node_dict().and_then(|r| r.dict().map(|d| (r, d))),
            ) {
                (Some(d), _) => Items::Pairs(d.pairs()),
                (None, Some((r, (first, len)))) => Items::NodePairs(r, first, len),
                (None, None) => {
                    let value = source.val()?;
                    if value.is_undefined() {
                        Items::Owned(Vec::new())
                    } else {
                        let pairs = crate::generators::items_of(&value).map_err(|_| bail!())?;
                        Items::Owned(pairs.into_iter().map(V::O).collect())
                    }
                }
            },
        )
    }

    /// Bind the loop target to item `i` of the innermost loop.
    fn bind_target(&mut self, target: &Target, i: usize) -> R<()> {
        let state = self.loops.last().ok_or(bail!())?;
        match (&state.items, target) {
            (Items::Pairs(p), Target::Pair(a, b)) => {
                let (k, v) = &p[i];
                let (a, b) = (*a, *b);
                self.set(a, V::B(k));
                self.set(b, V::B(v));
            }
            (Items::NodePairs(r, first, _), Target::Pair(a, b)) => {
                let (k, v) = (r.child(*first, 2 * i as u32), r.child(*first, 2 * i as u32 + 1));
                let (a, b) = (*a, *b);
                self.set(a, V::N(k));
                self.set(b, V::N(v));
            }
            (Items::Pairs(_) | Items::NodePairs(..), Target::One(_)) => return Err(bail!()),
            (items, Target::One(sym)) => {
                let item = items.get(i).ok_or(bail!())?;
                let sym = *sym;
                self.set(sym, item);
            }
            (items, Target::Pair(a, b)) => {
                let item = items.get(i).ok_or(bail!())?;
                let (x, y) = unpack_pair(&item)?;
                let (a, b) = (*a, *b);
                self.set(a, x);
                self.set(b, y);
            }
        }
        Ok(())
    }

    /// `for x in xs if cond`: the kept items, as jinja2 counts them.
    fn filtered(&mut self, f: &'a super::ir::For, items: Items<'a>, filter: &'a Expr) -> R<Items<'a>> {
        let mut kept = Vec::new();
        self.each_in_loop(items, |this, i| {
            this.bind_target(&f.target, i)?;
            if !this.cond(filter)? {
                return Ok(true);
            }
            let state = this.loops.last().ok_or(bail!())?;
            match &state.items {
                Items::Pairs(p) => {
                    let (k, v) = &p[i];
                    kept.push(V::O(crate::tuple::pair(k.clone(), v.clone())));
                }
                Items::NodePairs(r, first, _) => {
                    let k = r.child(*first, 2 * i as u32).to_value();
                    let v = r.child(*first, 2 * i as u32 + 1).to_value();
                    kept.push(V::O(crate::tuple::pair(k, v)));
                }
                items => kept.push(items.get(i).ok_or(bail!())?),
            }
            Ok(true)
        })?;
        Ok(Items::Owned(kept))
    }

    fn call_macro(&mut self, index: usize, pos: &'a [Expr], kwargs: &'a [(Box<str>, Expr)], direct: bool) -> R<V<'a>> {
        let m = self.prog.program.macros.get(index).ok_or(bail!())?;
        if pos.len() > m.args.len() || self.macro_depth >= MAX_MACRO_DEPTH {
            return Err(bail!());
        }
        let mut bound: Vec<Option<V<'a>>> = vec![None; m.args.len()];
        for (slot, e) in bound.iter_mut().zip(pos) {
            *slot = Some(self.eval(e)?);
        }
        for (name, e) in kwargs {
            let at = m.arg_names.iter().position(|n| n == name).ok_or(bail!())?;
            if bound[at].is_some() {
                return Err(bail!());
            }
            bound[at] = Some(self.eval(e)?);
        }
        let top_end = match self.macro_view {
            Some((_, top_end)) => top_end,
            None => self.frames.get(1).copied().unwrap_or(self.scope.len()),
        };
        let start = self.scope.len();
        let saved_view = self.macro_view.replace((start, top_end));
        self.frames.push(start);
        self.macro_depth += 1;
        let first_default = m.args.len().saturating_sub(m.defaults.len());
        let mut result = Ok(());
        // minijinja binds arguments from the last to the first, and an argument passed as undefined
        // takes its default as a missing one does.
        for (i, (sym, value)) in m.args.iter().zip(bound).enumerate().rev() {
            let value = match value {
                Some(v) if !v.is_undefined() => v,
                _ if i >= first_default => match m.defaults.get(i - first_default).map(|d| self.eval(d)) {
                    Some(Ok(v)) => v,
                    None => {
                        result = Err(bail!());
                        break;
                    }
                    Some(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                },
                Some(v) => v,
                None => UNDEFINED,
            };
            self.scope.push((*sym, value));
        }
        let saved_out = if direct {
            None
        } else {
            Some(std::mem::take(&mut self.out))
        };
        if result.is_ok() {
            result = match self.block(&m.body) {
                Ok(Flow::Next) => Ok(()),
                Ok(_) => Err(bail!()),
                Err(e) => Err(e),
            };
        }
        self.frames.pop();
        self.scope.truncate(start);
        self.macro_view = saved_view;
        self.macro_depth -= 1;
        let rendered = match saved_out {
            Some(saved) => V::O(Value::from(std::mem::replace(&mut self.out, saved))),
            None => UNDEFINED,
        };
        result.map(|_| rendered)
    }

    /// The hot node kinds; the rest are in [`Run::eval_cold`] so this frame stays small.
    fn eval(&mut self, e: &'a Expr) -> R<V<'a>> {
        match e {
            Expr::Const(v) => Ok(V::B(v)),
            Expr::Var(sym) => self.lookup(*sym),
            Expr::VarAttr(sym, name) => attr(self.lookup_ref(*sym), name),
            Expr::Attr(base, name) => {
                let base = self.eval(base)?;
                attr(&base, name)
            }
            Expr::Loop(attr) => self.loop_attr(*attr),
            Expr::Not(_) | Expr::Cmp(..) | Expr::EqStr(..) | Expr::In(..) | Expr::Test(..) => {
                Ok(V::O(Value::from(self.cond(e)?)))
            }
            Expr::And(a, b) => {
                let a = self.eval(a)?;
                if a.truthy()? {
                    self.eval(b)
                } else {
                    Ok(a)
                }
            }
            Expr::Or(a, b) => {
                let a = self.eval(a)?;
                if a.truthy()? {
                    Ok(a)
                } else {
                    self.eval(b)
                }
            }
            Expr::Cond(test, then, otherwise) => {
                if self.cond(test)? {
                    self.eval(then)
                } else {
                    match otherwise {
                        Some(x) => self.eval(x),
                        None => Ok(UNDEFINED),
                    }
                }
            }
            _ => self.eval_cold(e),
        }
    }

    /// An expression's truth value, without building a value for comparisons and tests.
    fn cond(&mut self, e: &'a Expr) -> R<bool> {
        match e {
            Expr::EqStr(x, literal, negate) => {
                let v = self.eval(x)?;
                let equal = match v.as_str() {
                    Some(s) => s == &**literal,
                    None => {
                        v.plain()?;
                        false
                    }
                };
                Ok(equal != *negate)
            }
            Expr::Not(x) => Ok(!self.cond(x)?),
            Expr::And(a, b) => Ok(self.cond(a)? && self.cond(b)?),
            Expr::Or(a, b) => Ok(self.cond(a)? || self.cond(b)?),
            Expr::Test(kind, input) => {
                let v = self.eval(input)?;
                test(*kind, &v)
            }
            Expr::Cmp(op, a, b) => {
                let a = self.eval(a)?.plain()?;
                let b = self.eval(b)?.plain()?;
                compare(*op, &a, &b)
            }
            Expr::In(needle, container) => {
                let needle = self.eval(needle)?.plain()?;
                let container = self.eval(container)?.plain()?;
                contains(&container, &needle)
            }
            _ => self.eval(e)?.truthy(),
        }
    }

    #[inline(never)]
    fn eval_cold(&mut self, e: &'a Expr) -> R<V<'a>> {
        Ok(match e {
            Expr::Const(_)
            | Expr::Var(_)
            | Expr::Attr(..)
            | Expr::VarAttr(..)
            | Expr::Loop(_)
            | Expr::Not(_)
            | Expr::Cmp(..)
            | Expr::EqStr(..)
            | Expr::In(..)
            | Expr::Test(..)
            | Expr::And(..)
            | Expr::Or(..)
            | Expr::Cond(..) => return self.eval(e),
            Expr::Item(base, key) => {
                let base = self.eval(base)?.plain()?;
                let key = self.eval(key)?.plain()?;
                item(base, key)?
            }
            Expr::Slice(base, start, stop, step) => {
                let base = self.eval(base)?.plain()?;
                let start = match start {
                    Some(x) => Some(self.eval(x)?),
                    None => None,
                };
                let stop = match stop {
                    Some(x) => Some(self.eval(x)?),
                    None => None,
                };
                match step {
                    // Stepped slices of strings; lists only as a loop's iterable (see `for_loop`).
                    Some(step) if base.as_str().is_some() => {
                        let step = self.eval(step)?;
                        stepped_slice(base, start, stop, &step)?
                    }
                    Some(_) => return Err(bail!()),
                    None => slice(base, start, stop)?,
                }
            }
            Expr::Neg(x) => {
                let v = self.eval(x)?;
                let v = v.val()?;
                let i = v.as_i64().filter(|_| v.is_integer()).ok_or(bail!())?;
                V::O(Value::from(i.checked_neg().ok_or(bail!())?))
            }
            Expr::Add(items) => {
                let values = items.iter().map(|x| self.eval(x)).collect::<R<Vec<_>>>()?;
                add_all(values)?
            }
            Expr::Arith(op, a, b) => {
                let int = |v: V<'a>| -> R<i64> {
                    let v = v.val()?;
                    v.as_i64()
                        .filter(|_| v.kind() == ValueKind::Number && v.is_integer())
                        .ok_or(bail!())
                };
                let a = int(self.eval(a)?)?;
                let b = int(self.eval(b)?)?;
                let r = match op {
                    Arith::Sub => a.checked_sub(b),
                    Arith::Mul => a.checked_mul(b),
                    Arith::Rem if b > 0 => a.checked_rem_euclid(b),
                    Arith::Rem => None,
                };
                V::O(Value::from(r.ok_or(bail!())?))
            }
            Expr::Concat(items) => {
                let saved = std::mem::take(&mut self.out);
                let mut result = Ok(());
                for item in items {
                    result = self.eval(item).and_then(|v| self.write_concat_part(&v));
                    if result.is_err() {
                        break;
                    }
                }
                let text = std::mem::replace(&mut self.out, saved);
                result?;
                V::O(Value::from(text))
            }
            Expr::Filter(kind, input, pos, kwargs) => {
                let input = self.eval(input)?.plain()?;
                let pos = pos
                    .iter()
                    .map(|x| self.eval(x).and_then(V::plain))
                    .collect::<R<Vec<_>>>()?;
                let kwargs = kwargs
                    .iter()
                    .map(|(k, x)| Ok((&**k, self.eval(x)?.plain()?.into_value()?)))
                    .collect::<R<Vec<_>>>()?;
                filter(*kind, input, pos, kwargs)?
            }
            Expr::CallName(sym, builtin, pos, kwargs) => match self.lookup(*sym) {
                Ok(V::Macro(index)) => self.call_macro(index, pos, kwargs, false)?,
                Ok(V::Global) => {
                    let builtin = builtin.ok_or(bail!())?;
                    let pos = pos
                        .iter()
                        .map(|x| self.eval(x)?.plain()?.into_value())
                        .collect::<R<Vec<_>>>()?;
                    let kwargs = kwargs
                        .iter()
                        .map(|(k, x)| Ok((&**k, self.eval(x)?.plain()?.into_value()?)))
                        .collect::<R<Vec<_>>>()?;
                    self.builtin(builtin, pos, kwargs)?
                }
                _ => return Err(bail!()),
            },
            Expr::Method(base, name, args) => {
                let base = self.eval(base)?.plain()?;
                let args = args
                    .iter()
                    .map(|x| self.eval(x)?.plain()?.into_value())
                    .collect::<R<Vec<_>>>()?;
                method(base, name, &args)?
            }
            Expr::Unsupported => return Err(bail!()),
            Expr::Map(pairs) => {
                // Later keys replace earlier values in place, as in a Python dict display.
                let mut out: Vec<(Value, Value)> = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    let k = self.eval(k)?.plain()?.into_value()?;
                    let v = self.eval(v)?.plain()?.into_value()?;
                    match out.iter_mut().find(|(existing, _)| *existing == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                V::O(crate::dict::pair_dict(out))
            }
            Expr::List(items) => V::O(Value::from(
                items
                    .iter()
                    .map(|x| self.eval(x)?.plain()?.into_value())
                    .collect::<R<Vec<_>>>()?,
            )),
        })
    }

    fn loop_attr(&self, attr: LoopAttr) -> R<V<'a>> {
        let state = self.loops.last().ok_or(bail!())?;
        let (i, n) = (state.index, state.items.len());
        Ok(match attr {
            LoopAttr::Index => V::O(Value::from(i + 1)),
            LoopAttr::Index0 => V::O(Value::from(i)),
            LoopAttr::RevIndex => V::O(Value::from(n - i)),
            LoopAttr::RevIndex0 => V::O(Value::from(n - i - 1)),
            LoopAttr::First => V::O(Value::from(i == 0)),
            LoopAttr::Last => V::O(Value::from(i + 1 == n)),
            LoopAttr::Length => V::O(Value::from(n)),
            LoopAttr::PrevItem => match i {
                0 => UNDEFINED,
                _ => state.items.get(i - 1).ok_or(bail!())?,
            },
            LoopAttr::NextItem => match state.items.get(i + 1) {
                Some(v) => v,
                None if i + 1 == n && !matches!(state.items, Items::Pairs(_) | Items::NodePairs(..)) => UNDEFINED,
                None => return Err(bail!()),
            },
        })
    }

    fn builtin(&self, builtin: Builtin, pos: Vec<Value>, kwargs: Vec<(&str, Value)>) -> R<V<'a>> {
        Ok(match builtin {
            Builtin::Namespace => {
                if pos.len() > 1 {
                    return Err(bail!());
                }
                let mut pairs: Vec<(String, Value)> = Vec::new();
                if let Some(first) = pos.first() {
                    if first.kind() != ValueKind::Map {
                        return Err(bail!());
                    }
                    for key in first.try_iter().map_err(|_| bail!())? {
                        let item = first.get_item(&key).map_err(|_| bail!())?;
                        pairs.push((key.as_str().ok_or(bail!())?.to_string(), item));
                    }
                }
                for (k, v) in kwargs {
                    pairs.push((k.to_string(), v));
                }
                if pairs.iter().any(|(k, _)| k.starts_with('_')) {
                    return Err(bail!());
                }
                // Later keys win, as when minijinja builds the namespace's map.
                let mut unique: Vec<(String, Value)> = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    match unique.iter_mut().find(|(existing, _)| *existing == k) {
                        Some(slot) => slot.1 = v,
                        None => unique.push((k, v)),
                    }
                }
                V::O(Namespace::value(unique))
            }
            Builtin::StrftimeNow => {
                let [format] = pos.as_slice() else { return Err(bail!()) };
                if !kwargs.is_empty() {
                    return Err(bail!());
                }
                let format = format.as_str().ok_or(bail!())?;
                let now = self.prog.now.unwrap_or_else(crate::clock::DateTime::now_utc);
                V::O(Value::from(now.strftime(format)))
            }
            Builtin::Range => {
                if !kwargs.is_empty() {
                    return Err(bail!());
                }
                // minijinja's own `range` (an iterable, not a list: `range(3) is sequence` is false).
                let ints = pos
                    .iter()
                    .map(|v| {
                        v.as_i64()
                            .filter(|_| v.kind() == ValueKind::Number && v.is_integer())
                            .and_then(|i| isize::try_from(i).ok())
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or(bail!())?;
                let range = match ints.as_slice() {
                    [hi] => minijinja::functions::range(*hi, None, None),
                    [lo, hi] => minijinja::functions::range(*lo, Some(*hi), None),
                    [lo, hi, step] => minijinja::functions::range(*lo, Some(*hi), Some(*step)),
                    _ => return Err(bail!()),
                };
                V::O(range.map_err(|_| bail!())?)
            }
        })
    }
}

/// `x|tojson` or `x|tojson|safe` with default options: the `x`, whose JSON can be written straight out.
fn plain_tojson(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Filter(FilterKind::ToJson, input, pos, kwargs) if pos.is_empty() && kwargs.is_empty() => Some(input),
        Expr::Filter(FilterKind::Safe, inner, pos, kwargs) if pos.is_empty() && kwargs.is_empty() => {
            plain_tojson(inner)
        }
        _ => None,
    }
}

/// What a loop over `source` walks (strings by character, as the source rewrite arranges).
fn iterate<'a>(source: &V<'a>) -> R<Items<'a>> {
    if let Some(items) = source.seq() {
        return Ok(Items::Slice(items));
    }
    if let Some((r, first, len)) = source.nodes() {
        return Ok(Items::Nodes(r, first, len));
    }
    if let Some((r, (first, len))) = source.node_dict().and_then(|r| r.dict().map(|d| (r, d))) {
        return Ok(Items::Owned((0..len).map(|k| V::N(r.child(first, 2 * k))).collect()));
    }
    if let Some(d) = source.pair_dict() {
        return Ok(Items::Owned(d.pairs().iter().map(|(k, _)| V::B(k)).collect()));
    }
    if let Some(s) = source.as_str() {
        return Ok(Items::Owned(
            s.chars().map(|c| V::O(Value::from(c.to_string()))).collect(),
        ));
    }
    let value = source.val()?;
    match value.kind() {
        ValueKind::Undefined => Ok(Items::Owned(Vec::new())),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable if !is_py_none(&value) => {
            let items = value.try_iter().map_err(|_| bail!())?;
            Ok(Items::Owned(items.map(V::O).collect()))
        }
        _ => Err(bail!()),
    }
}

/// `for a, b in pairs`: a two-item sequence.
fn unpack_pair<'a>(item: &V<'a>) -> R<(V<'a>, V<'a>)> {
    if let Some([a, b]) = item.seq() {
        return Ok((V::B(a), V::B(b)));
    }
    if let Some((r, first, 2)) = item.nodes() {
        return Ok((V::N(r.child(first, 0)), V::N(r.child(first, 1))));
    }
    let value = item.val()?;
    if value.kind() != ValueKind::Seq || value.len() != Some(2) {
        return Err(bail!());
    }
    let a = value.get_item_by_index(0).map_err(|_| bail!())?;
    let b = value.get_item_by_index(1).map_err(|_| bail!())?;
    Ok((V::O(a), V::O(b)))
}

fn attr<'a>(base: &V<'a>, name: &str) -> R<V<'a>> {
    if let V::N(r) = base {
        return Ok(r.get(name).map_or(UNDEFINED, V::N));
    }
    if let V::L(..) = base {
        return Ok(UNDEFINED);
    }
    if let Some(d) = base.pair_dict() {
        return Ok(d.get(name).map_or(UNDEFINED, V::B));
    }
    match base.raw() {
        None if matches!(base, V::Macro(_) | V::Global) => Err(bail!()),
        None => Ok(UNDEFINED),
        Some(v) => {
            if v.is_undefined() {
                return Err(bail!());
            }
            if let Some(ns) = v.downcast_object_ref::<Namespace>() {
                return Ok(ns.get(name).map_or(UNDEFINED, V::O));
            }
            Ok(V::O(v.get_attr(name).map_err(|_| bail!())?))
        }
    }
}

fn item<'a>(base: V<'a>, key: V<'a>) -> R<V<'a>> {
    if let Some((r, first, len)) = base.nodes() {
        if key.kind().is_ok_and(|k| k == ValueKind::Number) {
            if let Some(i) = key.val()?.as_i64().filter(|_| key.val().is_ok_and(|k| k.is_integer())) {
                let at = if i < 0 { i + i64::from(len) } else { i };
                return Ok(match u32::try_from(at).ok().filter(|&at| at < len) {
                    Some(at) => V::N(r.child(first, at)),
                    None => UNDEFINED,
                });
            }
        }
    }
    if let (Some(r), Some(k)) = (base.node_dict(), key.as_str()) {
        return Ok(r.get(k).map_or(UNDEFINED, V::N));
    }
    if let Some(items) = base.seq() {
        if let Some(i) = key
            .val()?
            .as_i64()
            .filter(|_| key.kind().is_ok_and(|k| k == ValueKind::Number))
        {
            let len = items.len() as i64;
            let at = if i < 0 { i + len } else { i };
            return Ok(match usize::try_from(at).ok().and_then(|at| items.get(at)) {
                Some(v) => V::B(v),
                None => UNDEFINED,
            });
        }
    }
    if let (Some(d), Some(k)) = (base.pair_dict(), key.as_str()) {
        return Ok(d.get(k).map_or(UNDEFINED, V::B));
    }
    let value = base.val()?;
    if value.is_undefined() {
        return Err(bail!());
    }
    Ok(V::O(value.get_item(&*key.val()?).map_err(|_| bail!())?))
}

/// Python slice bounds for a sequence of `len` items (no step).
fn bounds(len: usize, start: Option<&V<'_>>, stop: Option<&V<'_>>) -> R<(usize, usize)> {
    let resolve = |v: Option<&V<'_>>, default: i64| -> R<usize> {
        let i = match v {
            None => default,
            Some(v) => {
                let value = v.val()?;
                if value.is_none() {
                    default
                } else {
                    value.as_i64().filter(|_| value.is_integer()).ok_or(bail!())?
                }
            }
        };
        let len = len as i64;
        let i = if i < 0 { (i + len).max(0) } else { i.min(len) };
        Ok(i as usize)
    };
    let lo = resolve(start, 0)?;
    let hi = resolve(stop, len as i64)?;
    Ok((lo, hi.max(lo)))
}

fn slice<'a>(base: V<'a>, start: Option<V<'a>>, stop: Option<V<'a>>) -> R<V<'a>> {
    if let Some((r, first, len)) = base.nodes() {
        let (lo, hi) = bounds(len as usize, start.as_ref(), stop.as_ref())?;
        return Ok(V::L(r, first + lo as u32, (hi - lo) as u32));
    }
    if let Some(items) = base.seq() {
        let (lo, hi) = bounds(items.len(), start.as_ref(), stop.as_ref())?;
        return Ok(V::S(&items[lo..hi]));
    }
    if let Some(s) = base.as_str() {
        if s.is_ascii() {
            let (lo, hi) = bounds(s.len(), start.as_ref(), stop.as_ref())?;
            return Ok(match base.text() {
                Some(t) => V::T(&t[lo..hi]),
                None => V::O(Value::from(&s[lo..hi])),
            });
        }
        let chars: Vec<char> = s.chars().collect();
        let (lo, hi) = bounds(chars.len(), start.as_ref(), stop.as_ref())?;
        return Ok(V::O(Value::from(chars[lo..hi].iter().collect::<String>())));
    }
    // Slices of lists the template built are iterables in minijinja; not copied here.
    Err(bail!())
}

/// The positions minijinja's `seq[start:stop:step]` visits in a list of `len` items. For negative steps
/// this is minijinja's own rule (not Python's: `start=-5` of 3 items starts at 0), and where minijinja
/// would index past the end the render is handed over.
fn minijinja_slice_indices(start: Option<i64>, stop: Option<i64>, step: i64, len: usize) -> R<Vec<usize>> {
    let n = len as i64;
    let picked: Vec<usize> = if step > 0 {
        let first = start.unwrap_or(0);
        let (offset, count) = if first < 0 || stop.is_none_or(|x| x < 0) {
            let offset = if first < 0 { (n + first).max(0) } else { first };
            let end = match stop {
                None => n,
                Some(x) if x < 0 => (n + x).max(0),
                Some(x) => x,
            };
            (offset, (end - offset).max(0))
        } else {
            (first, (stop.unwrap_or(n) - first).max(0))
        };
        (offset..offset.saturating_add(count).min(n))
            .step_by(step as usize)
            .map(|i| i as usize)
            .collect()
    } else {
        let step = step.unsigned_abs() as usize;
        let start = match start {
            None => len.saturating_sub(1),
            Some(s) if s >= n => len.saturating_sub(1),
            Some(s) if s >= 0 => s as usize,
            Some(s) => (n + s).max(0) as usize,
        };
        let stop = match stop {
            None => 0,
            Some(s) if s < 0 => (n + s).max(0) as usize,
            Some(s) => s as usize,
        };
        let count = if stop == 0 {
            (start + step) / step
        } else {
            start.saturating_sub(stop).saturating_add(step - 1) / step
        };
        if stop > start {
            Vec::new()
        } else {
            (stop..=start).rev().step_by(step).take(count).collect()
        }
    };
    if picked.iter().any(|&i| i >= len) {
        return Err(bail!());
    }
    Ok(picked)
}

/// `text[start:stop:step]` with a step other than 1, by characters, as minijinja slices strings.
fn stepped_slice<'a>(base: V<'a>, start: Option<V<'a>>, stop: Option<V<'a>>, step: &V<'a>) -> R<V<'a>> {
    let int = |v: Option<&V<'_>>| -> R<Option<i64>> {
        let Some(v) = v else { return Ok(None) };
        let value = v.val()?;
        if value.is_none() {
            return Ok(None);
        }
        value.as_i64().filter(|_| value.is_integer()).map(Some).ok_or(bail!())
    };
    let step_value = step.val()?;
    if step_value.is_none() {
        return slice(base, start, stop);
    }
    let step = step_value
        .as_i64()
        .filter(|s| step_value.is_integer() && *s != 0)
        .ok_or(bail!())?;
    let text = base.as_str().ok_or(bail!())?;
    let chars: Vec<char> = text.chars().collect();
    let picked = minijinja_slice_indices(int(start.as_ref())?, int(stop.as_ref())?, step, chars.len())?;
    Ok(V::O(Value::from(
        picked.into_iter().map(|i| chars[i]).collect::<String>(),
    )))
}

fn compare(op: Cmp, a: &V<'_>, b: &V<'_>) -> R<bool> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        return Ok(match op {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
        });
    }
    let (x, y) = (a.val()?, b.val()?);
    Ok(match op {
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
        _ => {
            // Ordering is only defined here between numbers, as in Python.
            if x.kind() != ValueKind::Number || y.kind() != ValueKind::Number {
                return Err(bail!());
            }
            match op {
                Cmp::Lt => x < y,
                Cmp::Le => x <= y,
                Cmp::Gt => x > y,
                _ => x >= y,
            }
        }
    })
}

fn contains(container: &V<'_>, needle: &V<'_>) -> R<bool> {
    if let Some(s) = container.as_str() {
        return Ok(s.contains(needle.as_str().ok_or(bail!())?));
    }
    if let Some((r, first, len)) = container.nodes() {
        return Ok(match needle.as_str() {
            Some(n) => (0..len).any(|k| r.child(first, k).as_str() == Some(n)),
            None => {
                let n = needle.val()?;
                (0..len).any(|k| r.child(first, k).to_value() == *n)
            }
        });
    }
    if let Some(r) = container.node_dict() {
        return Ok(match needle.as_str() {
            Some(n) => r.get(n).is_some(),
            None => {
                let n = needle.val()?;
                let (first, len) = r.dict().unwrap_or((0, 0));
                (0..len).any(|k| r.child(first, 2 * k).to_value() == *n)
            }
        });
    }
    let owned_list = container.raw().and_then(|v| v.downcast_object_ref::<Vec<Value>>());
    if let Some(items) = container.seq().or(owned_list.map(Vec::as_slice)) {
        return Ok(match needle.as_str() {
            Some(n) => items.iter().any(|v| v.as_str() == Some(n)),
            None => {
                let n = needle.val()?;
                items.contains(&n)
            }
        });
    }
    if let Some(d) = container.pair_dict() {
        return Ok(match needle.as_str() {
            Some(n) => d.get(n).is_some(),
            None => {
                let n = needle.val()?;
                d.pairs().iter().any(|(k, _)| *k == *n)
            }
        });
    }
    let c = container.val()?;
    if c.is_undefined() {
        return Ok(false);
    }
    let n = needle.val()?;
    match c.kind() {
        ValueKind::Map => Ok(!c.get_item(&n).map_err(|_| bail!())?.is_undefined()),
        ValueKind::Seq | ValueKind::Iterable => Ok(c.try_iter().map_err(|_| bail!())?.any(|v| v == *n)),
        _ => Err(bail!()),
    }
}

fn add_all(values: Vec<V<'_>>) -> R<V<'_>> {
    let mut iter = values.into_iter();
    let mut acc = iter.next().ok_or(bail!())?;
    for next in iter {
        acc = add(&acc, &next)?;
    }
    Ok(acc)
}

fn add<'a>(a: &V<'a>, b: &V<'a>) -> R<V<'a>> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        let mut s = String::with_capacity(x.len() + y.len());
        s.push_str(x);
        s.push_str(y);
        return Ok(V::O(Value::from(s)));
    }
    let (x, y) = (a.val()?, b.val()?);
    if x.is_integer() && y.is_integer() {
        let sum = x
            .as_i64()
            .ok_or(bail!())?
            .checked_add(y.as_i64().ok_or(bail!())?)
            .ok_or(bail!())?;
        return Ok(V::O(Value::from(sum)));
    }
    Err(bail!())
}

fn test(kind: TestKind, v: &V<'_>) -> R<bool> {
    if matches!(v, V::Global | V::Macro(_)) {
        return match kind {
            TestKind::Defined => Ok(true),
            TestKind::Undefined => Ok(false),
            _ => Err(bail!()),
        };
    }
    let k = v.kind()?;
    Ok(match kind {
        TestKind::Defined => k != ValueKind::Undefined,
        TestKind::Undefined => k == ValueKind::Undefined,
        TestKind::None => match v {
            V::N(r) => matches!(r.node(), Node::None),
            _ => v.raw().is_some_and(is_py_none),
        },
        TestKind::String => k == ValueKind::String,
        TestKind::Mapping => k == ValueKind::Map,
        TestKind::Iterable => matches!(
            k,
            ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable | ValueKind::Undefined
        ),
        TestKind::Sequence => matches!(k, ValueKind::Seq | ValueKind::Map | ValueKind::String),
        TestKind::Number => matches!(k, ValueKind::Number | ValueKind::Bool),
        TestKind::Integer => k == ValueKind::Bool || (k == ValueKind::Number && v.val()?.is_integer()),
        TestKind::Float => k == ValueKind::Number && !v.val()?.is_integer(),
        TestKind::Boolean => k == ValueKind::Bool,
        TestKind::True => k == ValueKind::Bool && v.truthy()?,
        TestKind::False => k == ValueKind::Bool && !v.truthy()?,
    })
}

/// How `selectattr` / `rejectattr` judge an item's attribute.
enum Check {
    Truthy,
    Equals(Value),
    Test(TestKind),
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn filter<'a>(kind: FilterKind, input: V<'a>, pos: Vec<V<'a>>, kwargs: Vec<(&str, Value)>) -> R<V<'a>> {
    let err = |_| bail!();
    Ok(match kind {
        FilterKind::Length => {
            if let Some(items) = input.seq() {
                return Ok(V::O(Value::from(items.len())));
            }
            if let Some((_, _, len)) = input.nodes() {
                return Ok(V::O(Value::from(len)));
            }
            if let Some((_, len)) = input.node_dict().and_then(|r| r.dict()) {
                return Ok(V::O(Value::from(len)));
            }
            if let Some(s) = input.as_str() {
                let n = if s.is_ascii() { s.len() } else { s.chars().count() };
                return Ok(V::O(Value::from(n)));
            }
            V::O(crate::environment::length_filter(&*input.val()?).map_err(err)?)
        }
        FilterKind::Trim if pos.is_empty() && input.as_str().is_some() => match input.text() {
            Some(t) => V::T(t.trim_matches(is_py_space)),
            None => V::O(Value::from(
                input.as_str().unwrap_or_default().trim_matches(is_py_space),
            )),
        },
        FilterKind::Trim | FilterKind::Lower | FilterKind::Upper | FilterKind::Capitalize | FilterKind::Title => {
            let name = match kind {
                FilterKind::Trim => "trim",
                FilterKind::Lower => "lower",
                FilterKind::Upper => "upper",
                FilterKind::Capitalize => "capitalize",
                _ => "title",
            };
            let args = pos.into_iter().map(V::into_value).collect::<R<Vec<_>>>()?;
            V::O(crate::environment::string_filter(name, &*input.val()?, &args).map_err(err)?)
        }
        FilterKind::StringOf => match &input {
            V::T(_) => input,
            V::N(r) if r.as_str().is_some() => input,
            _ if input
                .raw()
                .is_some_and(|v| v.kind() == ValueKind::String && !v.is_safe()) =>
            {
                input
            }
            _ => V::O(Value::from(crate::pyrepr::py_str(&*input.val()?))),
        },
        FilterKind::Safe => {
            let s = input.as_str().ok_or(bail!())?;
            if input.raw().is_some_and(Value::is_safe) {
                input
            } else {
                V::O(Value::from_safe_string(s.to_string()))
            }
        }
        FilterKind::ToJson => {
            let indent = pos.into_iter().next().map(V::into_value).transpose()?;
            let kwargs: Kwargs = kwargs.into_iter().collect();
            V::O(crate::json::tojson_filter(&*input.val()?, indent, kwargs).map_err(err)?)
        }
        FilterKind::Join => {
            let sep = pos.into_iter().next().map(V::into_value).transpose()?;
            let kwargs: Kwargs = kwargs.into_iter().collect();
            V::O(crate::environment::join_filter(&*input.val()?, sep, kwargs).map_err(err)?)
        }
        FilterKind::Default => {
            let mut pos = pos.into_iter();
            let other = pos.next();
            let lax = match pos.next() {
                Some(v) => v.truthy()?,
                None => false,
            };
            if input.is_undefined() || (lax && !input.truthy()?) {
                other.unwrap_or(V::O(Value::from("")))
            } else {
                input
            }
        }
        FilterKind::Items => {
            let value = input.val()?;
            V::O(crate::generators::items_filter(&value).map_err(err)?)
        }
        FilterKind::List => {
            if let Some(items) = input.seq() {
                return Ok(V::O(Value::from(items.to_vec())));
            }
            if input.nodes().is_some() {
                return Ok(V::O(input.into_value()?));
            }
            let value = input.val()?;
            if value.is_undefined() {
                return Ok(V::O(Value::from(Vec::<Value>::new())));
            }
            if is_py_none(&value) {
                return Err(bail!());
            }
            V::O(Value::from(value.try_iter().map_err(err)?.collect::<Vec<_>>()))
        }
        FilterKind::First | FilterKind::Last => {
            if let Some((r, first, len)) = input.nodes() {
                let at = if matches!(kind, FilterKind::First) {
                    0
                } else {
                    len.wrapping_sub(1)
                };
                return Ok(if len == 0 { UNDEFINED } else { V::N(r.child(first, at)) });
            }
            let items = input.seq().ok_or(bail!())?;
            let v = if matches!(kind, FilterKind::First) {
                items.first()
            } else {
                items.last()
            };
            v.map_or(UNDEFINED, V::B)
        }
        FilterKind::SelectAttr | FilterKind::RejectAttr => {
            let invert = matches!(kind, FilterKind::RejectAttr);
            if !input.truthy()? {
                return Ok(V::O(crate::generators::generator(Vec::new())));
            }
            let mut pos = pos.into_iter();
            let name = pos.next().ok_or(bail!())?;
            let name = name.as_str().ok_or(bail!())?;
            // Dotted and numeric paths walk items differently; not implemented here.
            if name.contains('.') || name.parse::<usize>().is_ok() {
                return Err(bail!());
            }
            let test_name = match pos.next() {
                Some(t) => Some(t.as_str().ok_or(bail!())?.to_string()),
                None => None,
            };
            let args = pos.map(V::into_value).collect::<R<Vec<_>>>()?;
            let check = match (test_name.as_deref(), args.as_slice()) {
                (None, []) => Check::Truthy,
                (Some("equalto" | "eq" | "=="), [other]) => Check::Equals(other.clone()),
                (Some(t), []) => Check::Test(super::lower::test_kind(t).ok_or(bail!())?),
                _ => return Err(bail!()),
            };
            let mut kept = Vec::new();
            for item in iterate(&input)?.into_vec() {
                let field = attr(&item, name)?;
                let passed = match &check {
                    Check::Truthy => field.truthy()?,
                    Check::Equals(other) => *field.val()? == *other,
                    Check::Test(kind) => test(*kind, &field)?,
                };
                if passed != invert {
                    kept.push(item.into_value()?);
                }
            }
            V::O(crate::generators::generator(kept))
        }
        FilterKind::MapAttr => {
            let (mut name, mut default) = (None, Value::UNDEFINED);
            for (k, v) in kwargs {
                match k {
                    "attribute" => name = Some(v),
                    _ => default = v,
                }
            }
            let name = name.ok_or(bail!())?;
            let name = name.as_str().ok_or(bail!())?;
            if name.contains('.') || name.parse::<usize>().is_ok() {
                return Err(bail!());
            }
            if !input.truthy()? {
                return Ok(V::O(crate::generators::generator(Vec::new())));
            }
            let mut mapped = Vec::new();
            for item in iterate(&input)?.into_vec() {
                let field = attr(&item, name)?;
                mapped.push(if field.is_undefined() {
                    default.clone()
                } else {
                    field.into_value()?
                });
            }
            V::O(crate::generators::generator(mapped))
        }
        FilterKind::DictSort => {
            let kwargs: Kwargs = kwargs.into_iter().collect();
            V::O(minijinja::filters::dictsort(&*input.val()?, kwargs).map_err(err)?)
        }
        FilterKind::MarkupAdd => {
            let right = pos.into_iter().next().ok_or(bail!())?;
            V::O(crate::markup::markup_add(&*input.val()?, &*right.val()?).map_err(err)?)
        }
    })
}

fn method<'a>(base: V<'a>, name: &str, args: &[Value]) -> R<V<'a>> {
    if name == "get" {
        if let (Some(r), Some(key)) = (base.node_dict(), args.first().and_then(Value::as_str)) {
            return match (r.get(key), args.get(1), args.len()) {
                (Some(v), _, 1 | 2) => Ok(V::N(v)),
                (None, Some(default), 2) => Ok(V::O(default.clone())),
                (None, None, 1) => Ok(V::O(Value::from(()))),
                _ => Err(bail!()),
            };
        }
        if let (Some(d), Some(key)) = (base.pair_dict(), args.first().and_then(Value::as_str)) {
            return match (d.get(key), args.get(1), args.len()) {
                (Some(v), _, 1 | 2) => Ok(V::B(v)),
                (None, Some(default), 2) => Ok(V::O(default.clone())),
                (None, None, 1) => Ok(V::O(Value::from(()))),
                _ => Err(bail!()),
            };
        }
    }
    if args.is_empty() && matches!(name, "strip" | "lstrip" | "rstrip") {
        if let Some(t) = base.text() {
            return Ok(V::T(match name {
                "strip" => t.trim_matches(is_py_space),
                "lstrip" => t.trim_start_matches(is_py_space),
                _ => t.trim_end_matches(is_py_space),
            }));
        }
    }
    let value = base.val()?;
    match crate::methods::plain_method(&value, name, args) {
        Ok(Some(v)) => Ok(V::O(v)),
        _ => Err(bail!()),
    }
}
