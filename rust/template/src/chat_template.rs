//! [`ChatTemplate`]: compile once, render from many threads.

use crate::clock::DateTime;
use crate::dict::pair_dict;
use crate::environment::{build, RaisedByTemplate};
use crate::host::{host_list, DocRenderArgs, HostRenderArgs};
use crate::inspect::TemplateInfo;
use crate::source::prepare_source;
use crate::value::to_jinja;
use crate::{RenderArgs, TemplateError};
use minijinja::Environment;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// Name of the template used when no variant is chosen.
const DEFAULT: &str = "default";
/// Name of the variant transformers picks when tools are passed.
const TOOL_USE: &str = "tool_use";
/// transformers appends this to the final message for `continue_final_message`, then cuts the output there.
const CONTINUE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";
/// Message fields that carry reasoning; transformers copies the first present one to the others.
pub(crate) const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// A compiled chat template plus the special tokens it is rendered with. Cloning is cheap (an `Arc`).
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    env: Environment<'static>,
    /// The fast renderer's program for each variant (same order), when the template allows it.
    fast: Vec<Option<crate::fast::Compiled>>,
    /// `(name, source)` of every variant, the default first.
    variants: Vec<(String, String)>,
    origin: String,
    special_tokens: Map<String, Value>,
    special_jinja: Vec<(minijinja::Value, minijinja::Value)>,
    info: TemplateInfo,
    now: Option<DateTime>,
}

impl ChatTemplate {
    /// Compile `source`; `special_tokens` holds `bos_token`, `eos_token`, ... as strings.
    pub fn new(source: &str, special_tokens: Map<String, Value>) -> Result<Self, TemplateError> {
        Self::compile(
            vec![(DEFAULT.to_string(), source.to_string())],
            "<chat_template>".into(),
            special_tokens,
            None,
        )
    }

    /// Take `source_or_path` as a file path when such a file exists, otherwise as template source.
    pub fn from_source_or_path(
        source_or_path: &str,
        special_tokens: Map<String, Value>,
    ) -> Result<Self, TemplateError> {
        let looks_like_path =
            !source_or_path.contains("{{") && !source_or_path.contains("{%") && source_or_path.len() < 4096;
        if looks_like_path && Path::new(source_or_path).is_file() {
            let source = std::fs::read_to_string(source_or_path).map_err(|e| TemplateError::Io {
                path: source_or_path.to_string(),
                reason: e.to_string(),
            })?;
            return Self::compile(
                vec![(DEFAULT.into(), source)],
                source_or_path.to_string(),
                special_tokens,
                None,
            );
        }
        Self::new(source_or_path, special_tokens)
    }

    /// Find and load the template of a model directory, in transformers' order.
    pub fn from_model_dir(dir: &Path) -> Result<Self, TemplateError> {
        let found = crate::discover::find_in_dir(dir)?;
        Self::compile(found.templates, found.origin, found.special_tokens, None)
    }

    /// The same template with `strftime_now` frozen at `now` (recompiles; meant for tests and replays).
    pub fn with_now(&self, now: DateTime) -> Result<Self, TemplateError> {
        let inner = &self.inner;
        Self::compile(
            inner.variants.clone(),
            inner.origin.clone(),
            inner.special_tokens.clone(),
            Some(now),
        )
    }

    /// The same template rendered with other special tokens (shares nothing mutable; recompiles).
    pub fn with_special_tokens(&self, special_tokens: Map<String, Value>) -> Result<Self, TemplateError> {
        let inner = &self.inner;
        Self::compile(inner.variants.clone(), inner.origin.clone(), special_tokens, inner.now)
    }

    pub(crate) fn compile(
        mut variants: Vec<(String, String)>,
        origin: String,
        special_tokens: Map<String, Value>,
        now: Option<DateTime>,
    ) -> Result<Self, TemplateError> {
        if variants.is_empty() {
            return Err(TemplateError::Render {
                reason: "the list of named chat templates is empty".into(),
            });
        }
        if let Some(pos) = variants.iter().position(|(n, _)| n == DEFAULT) {
            let default = variants.remove(pos);
            variants.insert(0, default);
        }
        let mut env = build(now);
        for (name, source) in &variants {
            let shown = if variants.len() == 1 {
                origin.clone()
            } else {
                format!("{origin} ({name})")
            };
            env.add_template_owned(name.clone(), prepare_source(source))
                .map_err(|e| TemplateError::Syntax {
                    name: shown,
                    line: e.line().unwrap_or(0),
                    reason: e.detail().map_or_else(|| e.kind().to_string(), str::to_string),
                })?;
        }
        let fast = variants
            .iter()
            .map(|(_, source)| crate::fast::Compiled::new(&prepare_source(source), &env, now))
            .collect();
        let special_jinja = special_tokens
            .iter()
            .map(|(k, v)| (minijinja::Value::from(k.as_str()), to_jinja(v)))
            .collect();
        let info = TemplateInfo::inspect(&variants[0].1);
        Ok(Self {
            inner: Arc::new(Inner {
                env,
                fast,
                variants,
                origin,
                special_tokens,
                special_jinja,
                info,
                now,
            }),
        })
    }

    /// The template source (the default variant's).
    pub fn source(&self) -> &str {
        &self.inner.variants[0].1
    }

    /// Every `(name, source)` variant, the default first.
    pub fn variants(&self) -> &[(String, String)] {
        &self.inner.variants
    }

    /// Special tokens this template is rendered with.
    pub fn special_tokens(&self) -> &Map<String, Value> {
        &self.inner.special_tokens
    }

    /// What the template expects of its inputs (used by the normaliser).
    pub fn info(&self) -> &TemplateInfo {
        &self.inner.info
    }

    /// Whether the template renders tool definitions (it mentions `tools`).
    pub fn supports_tools(&self) -> bool {
        self.inner.variants.iter().any(|(_, s)| s.contains("tools"))
    }

    /// The text `add_generation_prompt=True` appends after a user turn, e.g. `<|im_start|>assistant\n`, found
    /// by rendering a probe conversation both ways. `None` when the template refuses the probe.
    pub fn generation_prompt(&self) -> Option<String> {
        let messages = vec![serde_json::json!({"role": "user", "content": "smgpy-probe"})];
        let mut args = RenderArgs {
            messages,
            ..RenderArgs::default()
        };
        let without = self.render(&args).ok()?;
        args.add_generation_prompt = true;
        let with = self.render(&args).ok()?;
        with.strip_prefix(without.as_str()).map(str::to_string)
    }

    /// Render, as transformers' `apply_chat_template(..., tokenize=False)`.
    pub fn render(&self, args: &RenderArgs) -> Result<String, TemplateError> {
        self.render_with(args, Renderer::Auto)
    }

    /// Whether the template compiled for the fast renderer (see `fast.rs`); for tests and benchmarks.
    #[doc(hidden)]
    pub fn has_fast_path(&self) -> bool {
        self.inner.fast.iter().any(Option::is_some)
    }

    /// The constructs of this template the fast renderer does not implement; for tests and diagnostics.
    #[doc(hidden)]
    pub fn fast_unsupported(&self) -> Vec<String> {
        self.inner
            .fast
            .iter()
            .flatten()
            .flat_map(|f| f.unsupported().iter().cloned())
            .collect()
    }

    /// [`ChatTemplate::render`] with a chosen renderer; for the differential tests and benchmarks.
    #[doc(hidden)]
    pub fn render_with(&self, args: &RenderArgs, renderer: Renderer) -> Result<String, TemplateError> {
        if renderer != Renderer::Minijinja {
            if let Some(doc_args) = DocRenderArgs::from_json(args) {
                return self.render_doc_with(doc_args, renderer);
            }
        }
        let inner = &self.inner;
        let name = self.variant(args.tools.is_some());
        let source = inner
            .variants
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, s)| s.as_str());

        // The common path converts each message once, straight into template values; only
        // `continue_final_message` needs an edited copy first.
        let (messages, continued) = if args.continue_final_message {
            let mut messages = prepare_messages(&args.messages)?;
            let continued = tag_final_message(&mut messages, source)?;
            (messages.iter().map(to_jinja).collect::<Vec<_>>(), Some(continued))
        } else {
            let messages = args
                .messages
                .iter()
                .map(message_to_jinja)
                .collect::<Result<Vec<_>, _>>()?;
            (messages, None)
        };

        let list = |items: &Option<Vec<Value>>| match items {
            Some(items) => minijinja::Value::from(items.iter().map(to_jinja).collect::<Vec<_>>()),
            None => crate::none::py_none(),
        };
        let kwargs = args
            .kwargs
            .iter()
            .map(|(k, v)| (minijinja::Value::from(k.as_str()), to_jinja(v)));
        let vars = Vars {
            messages,
            tools: list(&args.tools),
            documents: list(&args.documents),
            add_generation_prompt: args.add_generation_prompt,
        };
        let rendered = self.render_vars(name, vars, kwargs, renderer)?;
        match continued {
            Some(final_text) => cut_at_continue_tag(rendered, &final_text),
            None => Ok(rendered),
        }
    }

    /// Render from values built straight from host objects (see [`crate::HostValue`]); same output as
    /// [`ChatTemplate::render`] for the same input.
    /// Takes the arguments by value: their values become the template's without a copy.
    pub fn render_host(&self, args: HostRenderArgs) -> Result<String, TemplateError> {
        let name = self.variant(args.tools.is_some());
        let messages = args.messages.into_iter().map(prepared_host_message).collect();
        let kwargs = args
            .kwargs
            .into_iter()
            .map(|(k, v)| (minijinja::Value::from(k.as_str()), v.0));
        let vars = Vars {
            messages,
            tools: host_list(args.tools),
            documents: host_list(args.documents),
            add_generation_prompt: args.add_generation_prompt,
        };
        self.render_vars(name, vars, kwargs, Renderer::Auto)
    }

    /// Render from a [`crate::Doc`] (see [`DocRenderArgs`]); same output as [`ChatTemplate::render`] for the same
    /// input. The fast renderer reads the document in place; only when it hands over is the document
    /// converted into minijinja values.
    pub fn render_doc(&self, args: DocRenderArgs) -> Result<String, TemplateError> {
        self.render_doc_with(args, Renderer::Auto)
    }

    fn render_doc_with(&self, args: DocRenderArgs, renderer: Renderer) -> Result<String, TemplateError> {
        let name = self.variant(args.tools.is_some());
        let doc = &args.doc;
        let kwargs = || {
            args.kwargs
                .iter()
                .map(|(k, v)| (minijinja::Value::from(k.as_str()), v.0.clone()))
        };
        let index = self.inner.variants.iter().position(|(n, _)| n == name);
        let fast = index.and_then(|i| self.inner.fast.get(i)).and_then(Option::as_ref);
        if let Some(fast) = fast {
            let mut ctx: Vec<(minijinja::Value, minijinja::Value)> = self.inner.special_jinja.clone();
            ctx.extend(kwargs());
            let mut nodes = vec![("messages", doc.at(args.messages))];
            for (key, slot) in [("tools", args.tools), ("documents", args.documents)] {
                match slot {
                    Some(slot) => nodes.push((key, doc.at(slot))),
                    None => ctx.push((key.into(), crate::none::py_none())),
                }
            }
            ctx.push((
                "add_generation_prompt".into(),
                minijinja::Value::from(args.add_generation_prompt),
            ));
            match fast.render(&ctx, &nodes) {
                Ok(out) => return Ok(out),
                Err(line) if renderer == Renderer::FastOnly => return Err(handed_over(line)),
                Err(_) => {}
            }
        }
        if renderer == Renderer::FastOnly {
            return Err(handed_over(0));
        }
        let messages = match doc.at(args.messages).to_value() {
            v if v.kind() == minijinja::value::ValueKind::Seq => {
                v.try_iter().map(Iterator::collect).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let list = |slot: Option<crate::Slot>| match slot {
            Some(slot) => doc.at(slot).to_value(),
            None => crate::none::py_none(),
        };
        let vars = Vars {
            messages,
            tools: list(args.tools),
            documents: list(args.documents),
            add_generation_prompt: args.add_generation_prompt,
        };
        let rendered = self.render_vars(name, vars, kwargs(), Renderer::Minijinja);
        if let (Some(fast), Ok(_)) = (fast, &rendered) {
            fast.note_handover();
        }
        rendered
    }

    /// The variant transformers would use: `tool_use` when tools are given and it exists.
    fn variant(&self, with_tools: bool) -> &str {
        let variants = &self.inner.variants;
        if with_tools && variants.iter().any(|(n, _)| n == TOOL_USE) {
            TOOL_USE
        } else {
            variants[0].0.as_str()
        }
    }

    fn template(&self, name: &str) -> Result<minijinja::Template<'_, '_>, TemplateError> {
        self.inner
            .env
            .get_template(name)
            .map_err(|e| TemplateError::Render { reason: e.to_string() })
    }

    /// Build the context (special tokens, kwargs, then the standard variables) and render.
    fn render_vars(
        &self,
        name: &str,
        vars: Vars,
        kwargs: impl Iterator<Item = (minijinja::Value, minijinja::Value)>,
        renderer: Renderer,
    ) -> Result<String, TemplateError> {
        let mut ctx: Vec<(minijinja::Value, minijinja::Value)> = self.inner.special_jinja.clone();
        ctx.extend(kwargs);
        ctx.push(("messages".into(), minijinja::Value::from(vars.messages)));
        ctx.push(("tools".into(), vars.tools));
        ctx.push(("documents".into(), vars.documents));
        ctx.push((
            "add_generation_prompt".into(),
            minijinja::Value::from(vars.add_generation_prompt),
        ));
        let index = self.inner.variants.iter().position(|(n, _)| n == name);
        let fast = index.and_then(|i| self.inner.fast.get(i)).and_then(Option::as_ref);
        if let (Some(fast), false) = (fast, renderer == Renderer::Minijinja) {
            match fast.render(&ctx, &[]) {
                Ok(out) => return Ok(out),
                Err(line) if renderer == Renderer::FastOnly => return Err(handed_over(line)),
                Err(_) => {}
            }
        }
        if renderer == Renderer::FastOnly {
            return Err(handed_over(0));
        }
        let template = self.template(name)?;
        let ctx: minijinja::Value = ctx.into_iter().collect();
        // minijinja indexes past the end on some inputs (`[][::-1]`); a render must fail, not panic.
        let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| template.render(ctx)))
            .unwrap_or_else(|_| {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "the template engine failed on this input (internal error)",
                ))
            })
            .map_err(render_error);
        if let (Some(fast), Renderer::Auto, Ok(_)) = (fast, renderer, &rendered) {
            fast.note_handover();
        }
        rendered
    }
}

/// Which renderer [`ChatTemplate::render_with`] uses.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    /// The fast renderer when it handles the template and input, else minijinja (what `render` does).
    Auto,
    /// minijinja only.
    Minijinja,
    /// The fast renderer only; an error with [`FAST_PATH_NOT_TAKEN`] when it does not handle the input.
    FastOnly,
}

/// The reason of the error [`Renderer::FastOnly`] gives when the fast renderer hands over.
#[doc(hidden)]
pub const FAST_PATH_NOT_TAKEN: &str = "the fast renderer does not handle this template or input";

/// The [`Renderer::FastOnly`] error: which line of the fast renderer handed over (0: none was tried).
fn handed_over(line: u32) -> TemplateError {
    TemplateError::Render {
        reason: format!("{FAST_PATH_NOT_TAKEN} (fast/run.rs line {line})"),
    }
}

/// The standard template variables of one render.
struct Vars {
    messages: Vec<minijinja::Value>,
    tools: minijinja::Value,
    documents: minijinja::Value,
    add_generation_prompt: bool,
}

/// Drop None-valued keys and alias reasoning fields, as transformers 5 does before rendering.
fn prepare_messages(messages: &[Value]) -> Result<Vec<Value>, TemplateError> {
    messages
        .iter()
        .map(|m| {
            let Value::Object(map) = m else {
                return Err(TemplateError::Render {
                    reason: format!("chat messages must be objects, got {m}"),
                });
            };
            let mut map: Map<String, Value> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(reasoning) = REASONING_FIELDS.iter().find_map(|k| map.get(*k)).cloned() {
                // Python: {"thinking": r, **message, "reasoning_content": r}
                let mut aliased = Map::with_capacity(map.len() + 2);
                aliased.insert("thinking".into(), reasoning.clone());
                for (k, v) in std::mem::take(&mut map) {
                    aliased.insert(k, v);
                }
                aliased.insert("reasoning_content".into(), reasoning);
                map = aliased;
            }
            Ok(Value::Object(map))
        })
        .collect()
}

/// [`prepare_messages`] and [`to_jinja`] in one pass, without an intermediate JSON copy.
fn message_to_jinja(message: &Value) -> Result<minijinja::Value, TemplateError> {
    let Value::Object(map) = message else {
        return Err(TemplateError::Render {
            reason: format!("chat messages must be objects, got {message}"),
        });
    };
    Ok(prepared_message(map.iter().map(|(k, v)| (k.as_str(), to_jinja(v)))))
}

/// [`prepared_message`] for a message built from host values, reusing its pair list.
fn prepared_host_message(pairs: Vec<(crate::HostValue, crate::HostValue)>) -> minijinja::Value {
    let mut pairs: Vec<(minijinja::Value, minijinja::Value)> = pairs.into_iter().map(|(k, v)| (k.0, v.0)).collect();
    let has_reasoning = pairs
        .iter()
        .any(|(k, v)| k.as_str().is_some_and(|k| REASONING_FIELDS.contains(&k)) && !v.is_none());
    if has_reasoning {
        return prepared_message(pairs.iter().map(|(k, v)| (k.as_str().unwrap_or_default(), v.clone())));
    }
    pairs.retain(|(_, v)| !v.is_none());
    pair_dict(pairs)
}

/// One message as transformers 5 passes it to the template: None-valued keys dropped, and the
/// first reasoning field present copied as `{"thinking": r, **message, "reasoning_content": r}`.
fn prepared_message<'a>(pairs: impl Iterator<Item = (&'a str, minijinja::Value)>) -> minijinja::Value {
    let kept: Vec<(&str, minijinja::Value)> = pairs.filter(|(_, v)| !v.is_none()).collect();
    let reasoning = REASONING_FIELDS
        .iter()
        .find_map(|f| kept.iter().find(|(k, _)| k == f).map(|(_, v)| v.clone()));
    let Some(reasoning) = reasoning else {
        return pair_dict(kept.into_iter().map(|(k, v)| (minijinja::Value::from(k), v)).collect());
    };
    let mut out: Vec<(minijinja::Value, minijinja::Value)> = Vec::with_capacity(kept.len() + 2);
    out.push(("thinking".into(), reasoning.clone()));
    let mut has_reasoning_content = false;
    for (k, v) in kept {
        match k {
            "thinking" => out[0].1 = v,
            "reasoning_content" => {
                has_reasoning_content = true;
                out.push((k.into(), reasoning.clone()));
            }
            _ => out.push((k.into(), v)),
        }
    }
    if !has_reasoning_content {
        out.push(("reasoning_content".into(), reasoning));
    }
    pair_dict(out)
}

/// Append transformers' continue tag to the final message's content; returns the text being continued.
fn tag_final_message(messages: &mut [Value], source: &str) -> Result<String, TemplateError> {
    let err = |reason: &str| TemplateError::Render {
        reason: reason.to_string(),
    };
    let last = messages
        .last_mut()
        .ok_or_else(|| err("continue_final_message is set but the conversation is empty"))?;
    let content = last
        .get_mut("content")
        .ok_or_else(|| err("continue_final_message is set but the final message has no \"content\" to continue"))?;
    if !source.contains("content") {
        return Err(err(
            "continue_final_message is set to \"content\" but this is not an accepted field in the chat_template",
        ));
    }
    match content {
        Value::String(s) => {
            let original = s.clone();
            s.push_str(CONTINUE_TAG);
            Ok(original)
        }
        Value::Array(blocks) => {
            for block in blocks.iter_mut().rev() {
                if let Some(Value::String(text)) = block.get_mut("text") {
                    let original = text.clone();
                    text.push_str(CONTINUE_TAG);
                    return Ok(original);
                }
            }
            Err(err(
                "continue_final_message is set but we could not find any text to continue in the final message",
            ))
        }
        _ => Err(err(
            "continue_final_message needs the final message's content to be text",
        )),
    }
}

/// Cut the output where the continued message ends, as transformers does.
fn cut_at_continue_tag(rendered: String, final_text: &str) -> Result<String, TemplateError> {
    let marker = CONTINUE_TAG.trim();
    if !rendered.contains(final_text.trim()) || !rendered.contains(marker) {
        return Err(TemplateError::Render {
            reason: "continue_final_message is set but the final message does not appear in the chat after applying the chat template"
                .into(),
        });
    }
    let loc = rendered.rfind(marker).unwrap_or(rendered.len());
    if rendered[loc..].starts_with(CONTINUE_TAG) {
        Ok(rendered[..loc].to_string())
    } else {
        Ok(rendered[..loc].trim_end().to_string())
    }
}

/// Map a minijinja error: `raise_exception` becomes [`TemplateError::Raised`], anything else a render error.
fn render_error(err: minijinja::Error) -> TemplateError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(raised) = e.downcast_ref::<RaisedByTemplate>() {
            return TemplateError::Raised {
                message: raised.0.clone(),
            };
        }
        source = e.source();
    }
    TemplateError::Render {
        reason: err.to_string(),
    }
}
