//! Python binding for chat templates: `smgpy._native.ChatTemplate` wraps `smgpy_template::ChatTemplate`,
//! plus `normalize_messages` / `normalize_tools`. Conversion only; rendering runs with the GIL released.
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::{Map, Value};
use smgpy_template::{DateTime, Doc, DocRenderArgs, HostRenderArgs, HostValue, RenderArgs, Slot};

use crate::convert::{dict_pairs, py_into_doc, py_to_host, py_to_value, str_key_pairs, value_to_py};

fn dict_to_map(d: Option<&Bound<'_, PyDict>>) -> PyResult<Map<String, Value>> {
    match d {
        Some(d) => match py_to_value(d.as_any())? {
            Value::Object(m) => Ok(m),
            _ => Ok(Map::new()),
        },
        None => Ok(Map::new()),
    }
}

fn list_to_values(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<Value>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match py_to_value(o)? {
            Value::Array(a) => Ok(Some(a)),
            _ => Err(crate::errors::wrong_type(format!("{what} must be a list of dicts"))),
        },
    }
}

/// Message fields transformers aliases into each other; messages with one go through
/// [`RenderInput::host_args`].
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// One message into a document as transformers passes it (None-valued keys left out), in one pass over
/// the dict. `false` when it has a reasoning field, which the value path aliases.
fn message_into_doc(d: &Bound<'_, PyDict>, doc: &mut Doc, slot: Slot) -> PyResult<bool> {
    let len = d.len();
    let first = doc.set_dict(slot, len).map_err(crate::errors::too_large)?;
    let mut k = 0;
    for (key, value) in d.iter() {
        if value.is_none() {
            continue;
        }
        let Ok(key) = key.cast::<PyString>() else {
            return Ok(false);
        };
        let key = key.to_str()?;
        if REASONING_FIELDS.contains(&key) {
            return Ok(false);
        }
        if k == len {
            return Err(crate::errors::misuse("a message dict changed size while it was read"));
        }
        doc.set_str(first + 2 * k, key).map_err(crate::errors::too_large)?;
        py_into_doc(&value, doc, first + 2 * k + 1)?;
        k += 1;
    }
    doc.truncate(slot, k);
    Ok(true)
}

/// `render`'s arguments as Python passed them, for the two paths that read them without going
/// through JSON values ([`RenderInput::doc_args`], then [`RenderInput::host_args`]).
struct RenderInput<'a, 'py> {
    messages: &'a Bound<'py, PyList>,
    tools: Option<&'a Bound<'py, PyAny>>,
    add_generation_prompt: bool,
    documents: Option<&'a Bound<'py, PyAny>>,
    kwargs: Option<&'a Bound<'py, PyDict>>,
}

impl RenderInput<'_, '_> {
    /// The extra template variables as (name, value) pairs.
    fn kwarg_pairs(&self) -> PyResult<Vec<(String, HostValue)>> {
        match self.kwargs {
            Some(k) => str_key_pairs(k),
            None => Ok(Vec::new()),
        }
    }

    /// The render input written into one template document, or `None` when a message is not a
    /// dict or carries a reasoning field (then [`Self::host_args`] and the value path handle it).
    fn doc_args(&self) -> PyResult<Option<DocRenderArgs>> {
        let messages = self.messages;
        let mut doc = Doc::with_capacity(16 * messages.len() + 64, 4096);
        let root = doc.reserve(1).map_err(crate::errors::too_large)?;
        let first = doc.set_list(root, messages.len()).map_err(crate::errors::too_large)?;
        for (k, m) in messages.iter().enumerate().take(messages.len()) {
            let Ok(d) = m.cast::<PyDict>() else { return Ok(None) };
            if !message_into_doc(d, &mut doc, first + k)? {
                return Ok(None);
            }
        }
        let mut list = |obj: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<Option<Slot>> {
            match obj {
                None => Ok(None),
                Some(o) if o.is_none() => Ok(None),
                Some(o) if o.is_instance_of::<PyList>() || o.is_instance_of::<pyo3::types::PyTuple>() => {
                    let slot = doc.reserve(1).map_err(crate::errors::too_large)?;
                    py_into_doc(o, &mut doc, slot)?;
                    Ok(Some(slot))
                }
                Some(_) => Err(crate::errors::wrong_type(format!("{what} must be a list of dicts"))),
            }
        };
        let tools = list(self.tools, "tools")?;
        let documents = list(self.documents, "documents")?;
        Ok(Some(DocRenderArgs {
            doc,
            messages: root,
            tools,
            documents,
            add_generation_prompt: self.add_generation_prompt,
            kwargs: self.kwarg_pairs()?,
        }))
    }

    /// The render input straight from Python objects, or `None` when a message is not a dict (the
    /// JSON path then reports it).
    fn host_args(&self) -> PyResult<Option<HostRenderArgs>> {
        let mut converted = Vec::with_capacity(self.messages.len());
        for m in self.messages.iter() {
            let Ok(d) = m.cast::<PyDict>() else { return Ok(None) };
            converted.push(dict_pairs(d)?);
        }
        Ok(Some(HostRenderArgs {
            messages: converted,
            tools: host_list(self.tools, "tools")?,
            documents: host_list(self.documents, "documents")?,
            add_generation_prompt: self.add_generation_prompt,
            kwargs: self.kwarg_pairs()?,
        }))
    }
}

/// An optional list argument (`None` stays Python's `None` in the template).
fn host_list(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<HostValue>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) if o.is_instance_of::<PyList>() || o.is_instance_of::<pyo3::types::PyTuple>() => o
            .try_iter()?
            .map(|v| py_to_host(&v?))
            .collect::<PyResult<_>>()
            .map(Some),
        Some(_) => Err(crate::errors::wrong_type(format!("{what} must be a list of dicts"))),
    }
}

/// A `datetime.datetime` (or anything with year..second attributes) as a frozen clock.
fn datetime_from_py(obj: &Bound<'_, PyAny>) -> PyResult<DateTime> {
    Ok(DateTime {
        year: obj.getattr("year")?.extract()?,
        month: obj.getattr("month")?.extract()?,
        day: obj.getattr("day")?.extract()?,
        hour: obj.getattr("hour")?.extract()?,
        minute: obj.getattr("minute")?.extract()?,
        second: obj.getattr("second")?.extract()?,
    })
}

/// A HuggingFace chat template, compiled once and rendered exactly like transformers'
/// `apply_chat_template(..., tokenize=False)`.
///
/// `source` is the template text or a path to a `.jinja` file; `special_tokens` maps `bos_token`,
/// `eos_token`, ... to strings; `now` (a `datetime`) freezes `strftime_now`.
#[pyclass(name = "ChatTemplate", module = "smgpy._native", frozen)]
pub struct PyChatTemplate {
    inner: smgpy_template::ChatTemplate,
}

impl From<smgpy_template::ChatTemplate> for PyChatTemplate {
    fn from(inner: smgpy_template::ChatTemplate) -> Self {
        Self { inner }
    }
}

impl PyChatTemplate {
    /// The core template (for the server binding).
    pub fn core(&self) -> &smgpy_template::ChatTemplate {
        &self.inner
    }

    /// `t`, with its clock fixed at the Python datetime `now` when one is given.
    fn at(t: smgpy_template::ChatTemplate, now: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match now {
            Some(now) => t
                .with_now(datetime_from_py(now)?)
                .map(Self::from)
                .map_err(crate::errors::template),
            None => Ok(Self::from(t)),
        }
    }
}

#[pymethods]
impl PyChatTemplate {
    #[new]
    #[pyo3(signature = (source, special_tokens = None, *, now = None))]
    fn new(source: &str, special_tokens: Option<&Bound<'_, PyDict>>, now: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let tokens = dict_to_map(special_tokens)?;
        let t = smgpy_template::ChatTemplate::from_source_or_path(source, tokens).map_err(crate::errors::template)?;
        Self::at(t, now)
    }

    /// Load the template and special tokens of a model directory, in transformers' order:
    /// `chat_template.jinja`, `chat_template.json`, then `tokenizer_config.json`.
    #[staticmethod]
    #[pyo3(signature = (path, *, now = None))]
    fn from_model_dir(path: std::path::PathBuf, now: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let t = smgpy_template::ChatTemplate::from_model_dir(&path).map_err(crate::errors::template)?;
        Self::at(t, now)
    }

    /// The template source.
    #[getter]
    fn source(&self) -> &str {
        self.inner.source()
    }

    /// The special tokens the template is rendered with.
    #[getter]
    fn special_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &Value::Object(self.inner.special_tokens().clone()))
    }

    /// Whether the template renders tool definitions.
    #[getter]
    fn supports_tools(&self) -> bool {
        self.inner.supports_tools()
    }

    /// The text `add_generation_prompt=True` appends after a user turn, or None if it cannot be found.
    #[getter]
    fn generation_prompt(&self) -> Option<String> {
        self.inner.generation_prompt()
    }

    /// Render `messages` (and `tools`, `documents`, extra template variables) to the prompt text.
    /// With `normalize=True`, client-shaped input is first normalised (see `normalize_messages`).
    #[pyo3(signature = (messages, tools = None, add_generation_prompt = true, *, documents = None, continue_final_message = false, normalize = false, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn render(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        tools: Option<&Bound<'_, PyAny>>,
        add_generation_prompt: bool,
        documents: Option<&Bound<'_, PyAny>>,
        continue_final_message: bool,
        normalize: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        if !normalize && !continue_final_message {
            let input = RenderInput {
                messages,
                tools,
                add_generation_prompt,
                documents,
                kwargs,
            };
            if let Some(args) = input.doc_args()? {
                let inner = &self.inner;
                return py
                    .detach(move || inner.render_doc(args))
                    .map_err(crate::errors::template);
            }
            if let Some(args) = input.host_args()? {
                let inner = &self.inner;
                return py
                    .detach(move || inner.render_host(args))
                    .map_err(crate::errors::template);
            }
        }
        let mut messages = list_to_values(Some(messages.as_any()), "messages")?.unwrap_or_default();
        let mut tools = list_to_values(tools, "tools")?;
        let documents = list_to_values(documents, "documents")?;
        let kwargs = dict_to_map(kwargs)?;
        let inner = &self.inner;
        py.detach(|| {
            if normalize {
                messages = smgpy_template::normalize_messages(messages, inner.info());
                tools = tools.map(|t| smgpy_template::normalize_tools(&t));
            }
            let args = RenderArgs {
                messages,
                tools,
                documents,
                add_generation_prompt,
                continue_final_message,
                kwargs,
            };
            inner.render(&args)
        })
        .map_err(crate::errors::template)
    }

    fn __repr__(&self) -> String {
        format!("ChatTemplate(<{} chars>)", self.inner.source().len())
    }
}

/// Normalise client-shaped messages for a template (string tool arguments to objects, content parts
/// flattened for string-only templates, `content` on tool-call turns). Without a template every rule
/// applies as for a string-only template that serialises arguments.
#[pyfunction]
#[pyo3(signature = (messages, template = None))]
fn normalize_messages<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
    template: Option<PyRef<'py, PyChatTemplate>>,
) -> PyResult<Bound<'py, PyAny>> {
    let messages = list_to_values(Some(messages.as_any()), "messages")?.unwrap_or_default();
    let info = match &template {
        Some(t) => t.inner.info().clone(),
        None => smgpy_template::TemplateInfo {
            iterates_content_parts: false,
            needs_content_on_tool_calls: true,
            arguments_as_object: true,
            mentions_tools: true,
        },
    };
    value_to_py(py, &Value::Array(smgpy_template::normalize_messages(messages, &info)))
}

/// Nest Responses-API flat function tools as `{"type": "function", "function": {...}}`.
#[pyfunction]
fn normalize_tools<'py>(py: Python<'py>, tools: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
    let tools = list_to_values(Some(tools.as_any()), "tools")?.unwrap_or_default();
    value_to_py(py, &Value::Array(smgpy_template::normalize_tools(&tools)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChatTemplate>()?;
    m.add_function(wrap_pyfunction!(normalize_messages, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_tools, m)?)?;
    Ok(())
}

/// Build the server's template from `chat_template` (a source string, a path to a file, or a
/// `ChatTemplate`) and `special_tokens`.
pub fn template_from_py(
    t: &Bound<'_, PyAny>,
    special_tokens: Option<&Bound<'_, PyDict>>,
) -> PyResult<smgpy_template::ChatTemplate> {
    if let Ok(existing) = t.cast::<PyChatTemplate>() {
        let existing = existing.get().inner.clone();
        return match special_tokens {
            Some(d) => existing
                .with_special_tokens(dict_to_map(Some(d))?)
                .map_err(crate::errors::template),
            None => Ok(existing),
        };
    }
    let src: String = t.extract()?;
    smgpy_template::ChatTemplate::from_source_or_path(&src, dict_to_map(special_tokens)?)
        .map_err(crate::errors::template)
}
