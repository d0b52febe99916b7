//! The fast renderer's program: minijinja's syntax tree lowered to owned nodes, with every name
//! resolved to a symbol number and every filter, test and loop attribute to an enum.
//!
//! Lowering refuses (returns `None` from [`crate::fast::compile`]) any construct the fast renderer
//! does not implement; those templates keep rendering with minijinja alone.

use minijinja::Value;

/// A variable name, numbered at compile time.
pub type Sym = u32;

#[derive(Debug)]
pub enum Stmt {
    /// Template text (whitespace control already applied by the parser).
    Raw(Box<str>),
    Emit(Expr),
    For(Box<For>),
    If(Box<Expr>, Vec<Stmt>, Vec<Stmt>),
    Set(Sym, Expr),
    /// `{% set ns.attr = expr %}`
    SetAttr(Sym, Box<str>, Expr),
    /// `{% set name %}body{% endset %}`: the body's output, as a string.
    SetBlock(Sym, Vec<Stmt>),
    /// `{% macro %}` at the top level: binds the name to macro number `usize`.
    DefineMacro(Sym, usize),
    Break,
    Continue,
    /// Not implemented by the fast renderer: reaching it hands the render to minijinja.
    Unsupported,
}

#[derive(Debug)]
pub enum Target {
    One(Sym),
    Pair(Sym, Sym),
}

#[derive(Debug)]
pub struct For {
    pub target: Target,
    pub iter: Expr,
    /// `for x in xs|items`: pairs are walked without building tuples.
    pub items: bool,
    pub filter: Option<Expr>,
    pub body: Vec<Stmt>,
    pub else_body: Vec<Stmt>,
}

#[derive(Debug)]
pub struct Macro {
    pub args: Vec<Sym>,
    pub arg_names: Vec<Box<str>>,
    /// Defaults for the last `defaults.len()` arguments.
    pub defaults: Vec<Expr>,
    pub body: Vec<Stmt>,
}

#[derive(Debug, Clone, Copy)]
pub enum LoopAttr {
    Index,
    Index0,
    RevIndex,
    RevIndex0,
    First,
    Last,
    Length,
    PrevItem,
    NextItem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy)]
pub enum Arith {
    Sub,
    Mul,
    Rem,
}

#[derive(Debug, Clone, Copy)]
pub enum FilterKind {
    Length,
    Trim,
    Lower,
    Upper,
    Capitalize,
    Title,
    StringOf,
    Safe,
    ToJson,
    Join,
    Default,
    Items,
    List,
    First,
    Last,
    MarkupAdd,
    SelectAttr,
    RejectAttr,
    /// `map(attribute=...)` only.
    MapAttr,
    /// minijinja's own `dictsort` (it needs no render state, so it is called as is).
    DictSort,
}

#[derive(Debug, Clone, Copy)]
pub enum TestKind {
    Defined,
    Undefined,
    None,
    String,
    Mapping,
    Iterable,
    Sequence,
    Number,
    Integer,
    Float,
    Boolean,
    True,
    False,
}

#[derive(Debug, Clone, Copy)]
pub enum Builtin {
    Namespace,
    StrftimeNow,
    Range,
}

#[derive(Debug)]
pub enum Expr {
    Const(Value),
    Var(Sym),
    Loop(LoopAttr),
    Attr(Box<Expr>, Box<str>),
    /// `name.attr` / `name['attr']`: the most common read, without a nested node.
    VarAttr(Sym, Box<str>),
    Item(Box<Expr>, Box<Expr>),
    /// `base[start:stop]`, or with a step (`messages[::-1]`).
    Slice(Box<Expr>, Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    /// `expr == "literal"` (or `!=` when the flag is set): the most common test in chat templates.
    EqStr(Box<Expr>, Box<str>, bool),
    In(Box<Expr>, Box<Expr>),
    /// A left-to-right chain of `+`.
    Add(Vec<Expr>),
    Arith(Arith, Box<Expr>, Box<Expr>),
    /// A chain of `~`.
    Concat(Vec<Expr>),
    Cond(Box<Expr>, Box<Expr>, Option<Box<Expr>>),
    Filter(FilterKind, Box<Expr>, Vec<Expr>, Vec<(Box<str>, Expr)>),
    Test(TestKind, Box<Expr>),
    /// A call of a name: a macro bound in scope, else the builtin of that name (if any).
    CallName(Sym, Option<Builtin>, Vec<Expr>, Vec<(Box<str>, Expr)>),
    /// `value.method(args)`.
    Method(Box<Expr>, Box<str>, Vec<Expr>),
    List(Vec<Expr>),
    /// A dict literal `{k: v, ...}`.
    Map(Vec<(Expr, Expr)>),
    /// Not implemented by the fast renderer: evaluating it hands the render to minijinja.
    Unsupported,
}
