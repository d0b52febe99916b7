//! minijinja's syntax tree -> the fast renderer's [`Program`].
//!
//! A statement or expression the fast renderer does not implement becomes [`Stmt::Unsupported`] /
//! [`Expr::Unsupported`]: the template still compiles, and only a render that reaches that node hands
//! over to minijinja. Templates often keep rare constructs in branches most conversations never take
//! (list-valued content, error paths).

use super::ir::{Arith, Builtin, Cmp, Expr, FilterKind, For, LoopAttr, Macro, Stmt, Sym, Target, TestKind};
use crate::source::ITER_FILTER;
use minijinja::machinery::ast;
use std::collections::{HashMap, HashSet};

/// A lowered template.
#[derive(Debug)]
pub struct Program {
    pub body: Vec<Stmt>,
    pub macros: Vec<Macro>,
    /// Symbol number of every name the template mentions.
    pub syms: HashMap<String, Sym>,
    /// What became [`Stmt::Unsupported`] / [`Expr::Unsupported`], in source order (for diagnostics).
    pub unsupported: Vec<String>,
}

/// Lower a parsed template.
pub fn lower(template: &ast::Stmt<'_>) -> Program {
    let mut l = Lower::default();
    let body = l.stmt_list(std::slice::from_ref(template));
    // A macro sees a top-level variable through minijinja's closure only if the closure scan found the
    // name; where it reads one the scan misses, minijinja sees it undefined and the fast renderer would
    // not. Such macros hand over.
    for (m, hidden) in l.macros.iter_mut().zip(&l.hidden_reads) {
        let args: HashSet<Sym> = m.args.iter().copied().collect();
        if hidden.iter().any(|s| l.top_assigned.contains(s) && !args.contains(s)) {
            m.body = vec![Stmt::Unsupported];
            l.unsupported
                .push("macro reading a top-level name outside minijinja's closure".into());
        }
    }
    Program {
        body,
        macros: l.macros,
        syms: l.syms,
        unsupported: l.unsupported,
    }
}

#[derive(Default)]
struct Lower {
    syms: HashMap<String, Sym>,
    macros: Vec<Macro>,
    loop_depth: usize,
    in_macro: bool,
    /// Counts `loop.*` references lowered, to tell whether a body uses `loop`.
    loop_refs: usize,
    unsupported: Vec<String>,
    /// Names assigned in the template's top-level scope.
    top_assigned: HashSet<Sym>,
    /// Every variable read lowered so far, in order (to see what an expression reads).
    reads: Vec<Sym>,
    /// Per macro: names it reads in ways minijinja's closure scan does not see (slice bases, a `set`
    /// target read on its own right-hand side, the namespace of `set ns.x`).
    hidden_reads: Vec<Vec<Sym>>,
}

impl Lower {
    /// Note an assignment: names assigned at the top level can be read by macros.
    fn assigned(&mut self, sym: Sym) {
        if !self.in_macro && self.loop_depth == 0 {
            self.top_assigned.insert(sym);
        }
    }

    /// Note a read of `sym` that minijinja's closure scan would not see (only matters inside macros).
    fn hidden_read(&mut self, sym: Sym) {
        if self.in_macro {
            if let Some(hidden) = self.hidden_reads.last_mut() {
                hidden.push(sym);
            }
        }
    }

    fn sym(&mut self, name: &str) -> Sym {
        let next = self.syms.len() as Sym;
        *self.syms.entry(name.to_string()).or_insert(next)
    }

    fn stmt_list(&mut self, stmts: &[ast::Stmt<'_>]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            self.stmt(s, &mut out);
        }
        out
    }

    fn stmt(&mut self, stmt: &ast::Stmt<'_>, out: &mut Vec<Stmt>) {
        if let ast::Stmt::Template(t) = stmt {
            for s in &t.children {
                self.stmt(s, out);
            }
            return;
        }
        if let ast::Stmt::EmitRaw(r) = stmt {
            push_raw(out, r.raw);
            return;
        }
        let lowered = match self.try_stmt(stmt) {
            Some(s) => s,
            None => {
                self.unsupported.push(stmt_name(stmt).to_string());
                Stmt::Unsupported
            }
        };
        match lowered {
            // `{{ 'literal' }}` prints the literal: it joins the surrounding text.
            Stmt::Emit(Expr::Const(c)) if c.as_str().is_some() => push_raw(out, c.as_str().unwrap_or_default()),
            lowered => out.push(lowered),
        }
    }

    fn try_stmt(&mut self, stmt: &ast::Stmt<'_>) -> Option<Stmt> {
        Some(match stmt {
            ast::Stmt::EmitExpr(e) => Stmt::Emit(self.expr(&e.expr)),
            ast::Stmt::ForLoop(f) => Stmt::For(Box::new(self.for_loop(f)?)),
            ast::Stmt::IfCond(c) => {
                let cond = self.expr(&c.expr);
                let then = self.stmt_list(&c.true_body);
                let otherwise = self.stmt_list(&c.false_body);
                Stmt::If(Box::new(cond), then, otherwise)
            }
            ast::Stmt::Set(s) => {
                let reads_before = self.reads.len();
                let value = self.expr(&s.expr);
                match &s.target {
                    ast::Expr::Var(v) if v.id != "loop" => {
                        let sym = self.sym(v.id);
                        if self.reads[reads_before..].contains(&sym) {
                            self.hidden_read(sym);
                        }
                        self.assigned(sym);
                        Stmt::Set(sym, value)
                    }
                    ast::Expr::GetAttr(g) => match &g.expr {
                        ast::Expr::Var(v) if v.id != "loop" => {
                            let ns = self.sym(v.id);
                            self.hidden_read(ns);
                            Stmt::SetAttr(ns, g.name.into(), value)
                        }
                        _ => return None,
                    },
                    _ => return None,
                }
            }
            ast::Stmt::SetBlock(s) if s.filter.is_none() => match &s.target {
                ast::Expr::Var(v) if v.id != "loop" => {
                    let body = self.stmt_list(&s.body);
                    let sym = self.sym(v.id);
                    self.assigned(sym);
                    Stmt::SetBlock(sym, body)
                }
                _ => return None,
            },
            ast::Stmt::Macro(m) if !self.in_macro && self.loop_depth == 0 => {
                let index = self.macro_def(m)?;
                let sym = self.sym(m.name);
                self.assigned(sym);
                Stmt::DefineMacro(sym, index)
            }
            ast::Stmt::Continue(_) if self.loop_depth > 0 => Stmt::Continue,
            ast::Stmt::Break(_) if self.loop_depth > 0 => Stmt::Break,
            _ => return None,
        })
    }

    fn for_loop(&mut self, f: &ast::ForLoop<'_>) -> Option<For> {
        if f.recursive {
            return None;
        }
        let target = match &f.target {
            ast::Expr::Var(v) if v.id != "loop" => Target::One(self.sym(v.id)),
            ast::Expr::List(l) => match l.items.as_slice() {
                [ast::Expr::Var(a), ast::Expr::Var(b)] if a.id != "loop" && b.id != "loop" => {
                    Target::Pair(self.sym(a.id), self.sym(b.id))
                }
                _ => return None,
            },
            _ => return None,
        };
        // The source rewrite wraps every iterable as `(EXPR)|smgpy_iter`; the loop itself implements it.
        let iter = match &f.iter {
            ast::Expr::Filter(flt) if flt.name == ITER_FILTER && flt.args.is_empty() => flt.expr.as_ref()?,
            _ => return None,
        };
        let (iter, items) = match (iter, &target) {
            (ast::Expr::Filter(flt), Target::Pair(..)) if flt.name == "items" && flt.args.is_empty() => {
                (flt.expr.as_ref()?, true)
            }
            _ => (iter, false),
        };
        let iter = self.expr(iter);
        let refs_before = self.loop_refs;
        let filter = f.filter_expr.as_ref().map(|e| self.expr(e));
        self.loop_depth += 1;
        let body = self.stmt_list(&f.body);
        self.loop_depth -= 1;
        // `loop.length` and friends over a filtered loop count only the kept items, and `loop` in the
        // filter means the enclosing loop; neither is implemented.
        if filter.is_some() && self.loop_refs != refs_before {
            return None;
        }
        let else_body = self.stmt_list(&f.else_body);
        Some(For {
            target,
            iter,
            items,
            filter,
            body,
            else_body,
        })
    }

    fn macro_def(&mut self, m: &ast::Macro<'_>) -> Option<usize> {
        let mut args = Vec::with_capacity(m.args.len());
        let mut arg_names = Vec::with_capacity(m.args.len());
        for a in &m.args {
            let ast::Expr::Var(v) = a else { return None };
            args.push(self.sym(v.id));
            arg_names.push(v.id.into());
        }
        let saved = (self.in_macro, self.loop_depth);
        self.in_macro = true;
        self.hidden_reads.push(Vec::new());
        let defaults = m.defaults.iter().map(|d| self.expr(d)).collect();
        self.loop_depth = 0;
        let body = self.stmt_list(&m.body);
        (self.in_macro, self.loop_depth) = saved;
        self.macros.push(Macro {
            args,
            arg_names,
            defaults,
            body,
        });
        Some(self.macros.len() - 1)
    }

    /// The operands of `left op right` for an operator whose chains are flattened (`+`, `~`):
    /// `left`'s own operands when `split` finds it is the same chain, then `right`.
    fn chain(&mut self, b: &ast::BinOp<'_>, split: fn(Expr) -> Result<Vec<Expr>, Expr>) -> Vec<Expr> {
        let mut items = split(self.expr(&b.left)).unwrap_or_else(|left| vec![left]);
        items.push(self.expr(&b.right));
        items
    }

    fn boxed(&mut self, e: &ast::Expr<'_>) -> Option<Box<Expr>> {
        Some(Box::new(self.expr(e)))
    }

    fn expr(&mut self, e: &ast::Expr<'_>) -> Expr {
        match self.try_expr(e) {
            Some(x) => x,
            None => {
                let what = match e {
                    ast::Expr::Filter(f) => format!("filter {}", f.name),
                    ast::Expr::Test(t) => format!("test {}", t.name),
                    ast::Expr::Call(c) => match &c.expr {
                        ast::Expr::Var(v) => format!("call {}()", v.id),
                        ast::Expr::GetAttr(g) => format!("method .{}()", g.name),
                        _ => "call".to_string(),
                    },
                    ast::Expr::GetAttr(g) => format!("attribute .{}", g.name),
                    other => other.description().to_string(),
                };
                self.unsupported.push(what);
                Expr::Unsupported
            }
        }
    }

    fn try_expr(&mut self, e: &ast::Expr<'_>) -> Option<Expr> {
        // minijinja folds constant expressions when it compiles (`{{ 0 and 1 }}` prints `False`); so
        // does this.
        if let Some(value) = e.as_const() {
            return Some(Expr::Const(value));
        }
        Some(match e {
            ast::Expr::Var(v) => {
                let special = matches!(v.id, "loop" | "caller" | "varargs" | "kwargs" | "self");
                if special {
                    return None;
                }
                let sym = self.sym(v.id);
                self.reads.push(sym);
                Expr::Var(sym)
            }
            ast::Expr::Const(c) => Expr::Const(c.value.clone()),
            ast::Expr::Slice(s) => {
                if let ast::Expr::Var(v) = &s.expr {
                    let sym = self.sym(v.id);
                    self.hidden_read(sym);
                }
                let step = match &s.step {
                    Some(x) => Some(self.boxed(x)?),
                    None => None,
                };
                let start = match &s.start {
                    Some(x) => Some(self.boxed(x)?),
                    None => None,
                };
                let stop = match &s.stop {
                    Some(x) => Some(self.boxed(x)?),
                    None => None,
                };
                Expr::Slice(self.boxed(&s.expr)?, start, stop, step)
            }
            ast::Expr::UnaryOp(u) => match u.op {
                ast::UnaryOpKind::Not => Expr::Not(self.boxed(&u.expr)?),
                ast::UnaryOpKind::Neg => Expr::Neg(self.boxed(&u.expr)?),
            },
            ast::Expr::BinOp(b) => self.bin_op(b)?,
            ast::Expr::IfExpr(i) => {
                let otherwise = match &i.false_expr {
                    Some(x) => Some(self.boxed(x)?),
                    None => None,
                };
                Expr::Cond(self.boxed(&i.test_expr)?, self.boxed(&i.true_expr)?, otherwise)
            }
            ast::Expr::Filter(f) => {
                let kind = filter_kind(f.name)?;
                let input = self.boxed(f.expr.as_ref()?)?;
                let (pos, kwargs) = self.call_args(&f.args)?;
                let ok = match kind {
                    FilterKind::Trim => pos.len() <= 1 && kwargs.is_empty(),
                    FilterKind::ToJson | FilterKind::Join => pos.len() <= 1,
                    FilterKind::DictSort => pos.is_empty(),
                    FilterKind::Default => pos.len() <= 2 && kwargs.is_empty(),
                    FilterKind::MarkupAdd => pos.len() == 1 && kwargs.is_empty(),
                    FilterKind::SelectAttr | FilterKind::RejectAttr => !pos.is_empty() && kwargs.is_empty(),
                    FilterKind::MapAttr => {
                        pos.is_empty()
                            && kwargs.iter().any(|(k, _)| &**k == "attribute")
                            && kwargs.iter().all(|(k, _)| matches!(&**k, "attribute" | "default"))
                    }
                    _ => pos.is_empty() && kwargs.is_empty(),
                };
                if !ok {
                    return None;
                }
                Expr::Filter(kind, input, pos, kwargs)
            }
            ast::Expr::Test(t) => {
                if !t.args.is_empty() {
                    return None;
                }
                Expr::Test(test_kind(t.name)?, self.boxed(&t.expr)?)
            }
            ast::Expr::GetAttr(g) => match &g.expr {
                ast::Expr::Var(v) if v.id == "loop" => {
                    if self.loop_depth == 0 {
                        return None;
                    }
                    self.loop_refs += 1;
                    Expr::Loop(loop_attr(g.name)?)
                }
                _ => attr_of(self.expr(&g.expr), g.name),
            },
            // `x['key']` finds what `x.key` finds for every value a template sees (dicts, lists,
            // strings, undefined), so it takes the attribute path.
            ast::Expr::GetItem(g) => match &g.subscript_expr {
                ast::Expr::Const(c) if c.value.as_str().is_some() => {
                    attr_of(self.expr(&g.expr), c.value.as_str().unwrap_or_default())
                }
                _ => Expr::Item(self.boxed(&g.expr)?, self.boxed(&g.subscript_expr)?),
            },
            ast::Expr::Call(c) => {
                let (pos, kwargs) = self.call_args(&c.args)?;
                match &c.expr {
                    ast::Expr::Var(v) if !matches!(v.id, "loop" | "caller" | "varargs" | "kwargs" | "self") => {
                        Expr::CallName(self.sym(v.id), builtin(v.id), pos, kwargs)
                    }
                    ast::Expr::GetAttr(g) if kwargs.is_empty() => {
                        Expr::Method(self.boxed(&g.expr)?, g.name.into(), pos)
                    }
                    _ => return None,
                }
            }
            ast::Expr::List(l) => Expr::List(l.items.iter().map(|x| self.expr(x)).collect()),
            ast::Expr::Map(m) => {
                let keys = m.keys.iter().map(|x| self.expr(x));
                let keys: Vec<Expr> = keys.collect();
                let values: Vec<Expr> = m.values.iter().map(|x| self.expr(x)).collect();
                Expr::Map(keys.into_iter().zip(values).collect())
            }
            ast::Expr::Compare(_) => return None,
        })
    }

    fn bin_op(&mut self, b: &ast::BinOp<'_>) -> Option<Expr> {
        let cmp = |op| -> Option<Cmp> {
            Some(match op {
                ast::BinOpKind::Eq => Cmp::Eq,
                ast::BinOpKind::Ne => Cmp::Ne,
                ast::BinOpKind::Lt => Cmp::Lt,
                ast::BinOpKind::Lte => Cmp::Le,
                ast::BinOpKind::Gt => Cmp::Gt,
                ast::BinOpKind::Gte => Cmp::Ge,
                _ => return None,
            })
        };
        if let Some(op) = cmp(b.op) {
            let left = self.boxed(&b.left)?;
            let right = self.boxed(&b.right)?;
            if matches!(op, Cmp::Eq | Cmp::Ne) {
                let negate = op == Cmp::Ne;
                match (*left, *right) {
                    (x, Expr::Const(c)) | (Expr::Const(c), x) if c.as_str().is_some() => {
                        return Some(Expr::EqStr(Box::new(x), c.as_str().unwrap_or_default().into(), negate));
                    }
                    (l, r) => return Some(Expr::Cmp(op, Box::new(l), Box::new(r))),
                }
            }
            return Some(Expr::Cmp(op, left, right));
        }
        Some(match b.op {
            ast::BinOpKind::ScAnd => Expr::And(self.boxed(&b.left)?, self.boxed(&b.right)?),
            ast::BinOpKind::ScOr => Expr::Or(self.boxed(&b.left)?, self.boxed(&b.right)?),
            ast::BinOpKind::In => Expr::In(self.boxed(&b.left)?, self.boxed(&b.right)?),
            ast::BinOpKind::Add => Expr::Add(self.chain(b, |left| match left {
                Expr::Add(items) => Ok(items),
                left => Err(left),
            })),
            ast::BinOpKind::Concat => Expr::Concat(self.chain(b, |left| match left {
                Expr::Concat(items) => Ok(items),
                left => Err(left),
            })),
            ast::BinOpKind::Sub => Expr::Arith(Arith::Sub, self.boxed(&b.left)?, self.boxed(&b.right)?),
            ast::BinOpKind::Mul => Expr::Arith(Arith::Mul, self.boxed(&b.left)?, self.boxed(&b.right)?),
            ast::BinOpKind::Rem => Expr::Arith(Arith::Rem, self.boxed(&b.left)?, self.boxed(&b.right)?),
            _ => return None,
        })
    }

    #[allow(clippy::type_complexity)]
    fn call_args(&mut self, args: &[ast::CallArg<'_>]) -> Option<(Vec<Expr>, Vec<(Box<str>, Expr)>)> {
        let mut pos = Vec::new();
        let mut kwargs = Vec::new();
        for a in args {
            match a {
                ast::CallArg::Pos(e) if kwargs.is_empty() => pos.push(self.expr(e)),
                ast::CallArg::Kwarg(name, e) => kwargs.push(((*name).into(), self.expr(e))),
                _ => return None,
            }
        }
        Some((pos, kwargs))
    }
}

fn stmt_name(stmt: &ast::Stmt<'_>) -> &'static str {
    match stmt {
        ast::Stmt::ForLoop(_) => "for loop",
        ast::Stmt::Set(_) => "set",
        ast::Stmt::SetBlock(_) => "set block",
        ast::Stmt::Macro(_) => "macro in a loop or macro",
        ast::Stmt::CallBlock(_) => "call block",
        ast::Stmt::FilterBlock(_) => "filter block",
        ast::Stmt::WithBlock(_) => "with block",
        ast::Stmt::Do(_) => "do",
        ast::Stmt::Continue(_) | ast::Stmt::Break(_) => "loop control outside a loop",
        _ => "statement",
    }
}

/// Append template text, joining it to the text before when there is nothing in between.
fn push_raw(out: &mut Vec<Stmt>, text: &str) {
    if text.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(Stmt::Raw(prev)) => {
            let mut joined = String::with_capacity(prev.len() + text.len());
            joined.push_str(prev);
            joined.push_str(text);
            *prev = joined.into();
        }
        _ => out.push(Stmt::Raw(text.into())),
    }
}

/// `base.name`, fused with a plain variable base.
fn attr_of(base: Expr, name: &str) -> Expr {
    match base {
        Expr::Var(sym) => Expr::VarAttr(sym, name.into()),
        base => Expr::Attr(Box::new(base), name.into()),
    }
}

fn filter_kind(name: &str) -> Option<FilterKind> {
    Some(match name {
        "length" | "count" => FilterKind::Length,
        "trim" => FilterKind::Trim,
        "lower" => FilterKind::Lower,
        "upper" => FilterKind::Upper,
        "capitalize" => FilterKind::Capitalize,
        "title" => FilterKind::Title,
        "string" => FilterKind::StringOf,
        "safe" => FilterKind::Safe,
        "tojson" => FilterKind::ToJson,
        "join" => FilterKind::Join,
        "default" | "d" => FilterKind::Default,
        "items" => FilterKind::Items,
        "list" => FilterKind::List,
        "first" => FilterKind::First,
        "last" => FilterKind::Last,
        crate::markup::ADD_FILTER => FilterKind::MarkupAdd,
        "selectattr" => FilterKind::SelectAttr,
        "rejectattr" => FilterKind::RejectAttr,
        "map" => FilterKind::MapAttr,
        "dictsort" => FilterKind::DictSort,
        _ => return None,
    })
}

pub(super) fn test_kind(name: &str) -> Option<TestKind> {
    Some(match name {
        "defined" => TestKind::Defined,
        "undefined" => TestKind::Undefined,
        "none" => TestKind::None,
        "string" => TestKind::String,
        "mapping" => TestKind::Mapping,
        "iterable" => TestKind::Iterable,
        "sequence" => TestKind::Sequence,
        "number" => TestKind::Number,
        "integer" => TestKind::Integer,
        "float" => TestKind::Float,
        "boolean" => TestKind::Boolean,
        "true" => TestKind::True,
        "false" => TestKind::False,
        _ => return None,
    })
}

fn loop_attr(name: &str) -> Option<LoopAttr> {
    Some(match name {
        "index" => LoopAttr::Index,
        "index0" => LoopAttr::Index0,
        "revindex" => LoopAttr::RevIndex,
        "revindex0" => LoopAttr::RevIndex0,
        "first" => LoopAttr::First,
        "last" => LoopAttr::Last,
        "length" => LoopAttr::Length,
        "previtem" => LoopAttr::PrevItem,
        "nextitem" => LoopAttr::NextItem,
        _ => return None,
    })
}

fn builtin(name: &str) -> Option<Builtin> {
    Some(match name {
        "namespace" => Builtin::Namespace,
        "strftime_now" => Builtin::StrftimeNow,
        "range" => Builtin::Range,
        _ => return None,
    })
}
