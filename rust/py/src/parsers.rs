//! Python binding for the tool-call parsers: conversion only, the logic is in `smgpy-parsers`.
use crate::convert::py_to_value;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use smgpy_parsers::tool::{self, Forced, ToolCallParser, ToolDef, ToolDelta, ToolFormat, ToolParseResult};

/// Inputs larger than this are parsed with the GIL released.
const DETACH_BYTES: usize = 1 << 16;

/// Run `parse` over `text`, with the GIL released when the text is long enough for that to pay.
pub(crate) fn parse_text<T, F>(py: Python<'_>, text: &str, parse: F) -> T
where
    F: pyo3::marker::Ungil + FnOnce() -> T,
    T: pyo3::marker::Ungil,
{
    if text.len() > DETACH_BYTES {
        py.detach(parse)
    } else {
        parse()
    }
}

fn format_of(parser: &str) -> PyResult<ToolFormat> {
    parser.parse::<ToolFormat>().map_err(crate::errors::parser)
}

/// Tools in OpenAI form `{"type": "function", "function": {"name", "parameters"}}` or flat form
/// `{"name", "parameters"}`.
fn tool_defs(tools: Option<&Bound<'_, PyList>>) -> PyResult<Option<Vec<ToolDef>>> {
    let Some(tools) = tools else { return Ok(None) };
    let mut defs = Vec::with_capacity(tools.len());
    for item in tools.iter() {
        let value = py_to_value(&item)?;
        let f = value.get("function").filter(|f| f.is_object()).unwrap_or(&value);
        let Some(name) = f.get("name").and_then(|n| n.as_str()) else {
            return Err(crate::errors::wrong_type(
                "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}} or {\"name\": ...}",
            ));
        };
        defs.push(ToolDef {
            name: name.to_string(),
            parameters: f.get("parameters").cloned(),
        });
    }
    Ok(Some(defs))
}

fn result_to_dict<'py>(py: Python<'py>, r: &ToolParseResult) -> PyResult<Bound<'py, PyDict>> {
    let calls = PyList::empty(py);
    for c in &r.calls {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "name"), &c.name)?;
        d.set_item(intern!(py, "arguments"), &c.arguments)?;
        if let Some(id) = &c.id {
            d.set_item(intern!(py, "id"), id)?;
        }
        calls.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item(intern!(py, "normal_text"), &r.normal_text)?;
    out.set_item(intern!(py, "tool_calls"), calls)?;
    Ok(out)
}

fn delta_to_dict<'py>(py: Python<'py>, d: &ToolDelta) -> PyResult<Bound<'py, PyDict>> {
    let calls = PyList::empty(py);
    for c in d.calls() {
        let item = PyDict::new(py);
        item.set_item(intern!(py, "index"), c.index)?;
        item.set_item(intern!(py, "id"), c.id)?;
        item.set_item(intern!(py, "name"), c.name)?;
        item.set_item(intern!(py, "arguments"), c.arguments)?;
        calls.append(item)?;
    }
    let out = PyDict::new(py);
    out.set_item(intern!(py, "normal_text"), &d.normal_text)?;
    out.set_item(intern!(py, "calls"), calls)?;
    Ok(out)
}

/// Parse a complete model output into normal text and tool calls.
///
/// `parser` is a tool-call parser name (see `list_tool_parsers()`; SMG/SGLang aliases are
/// accepted). When `tools` is given (OpenAI or flat form), calls to undeclared names stay in
/// `normal_text`, and parameter schemas type XML-style values. Returns
/// `{"normal_text": str, "tool_calls": [{"name": str, "arguments": str}]}`, with an `"id"` key
/// when the format carries one. Raises `ValueError` for an unknown parser. `tool_choice`: as for
/// `ToolCallStream`.
#[pyfunction]
#[pyo3(signature = (text, parser, tools = None, tool_choice = None))]
fn parse_tool_call_complete<'py>(
    py: Python<'py>,
    text: &str,
    parser: &str,
    tools: Option<&Bound<'py, PyList>>,
    tool_choice: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let format = format_of(parser)?;
    let defs = tool_defs(tools)?;
    let forced = forced_of(tool_choice)?;
    let parse = move || match forced {
        None => tool::parse_complete(text, format, defs),
        Some(forced) => tool::parse_complete_forced(text, format, defs, forced),
    };
    let r = parse_text(py, text, parse);
    result_to_dict(py, &r)
}

/// Canonical tool-call parser names (vLLM's `--tool-call-parser` names where vLLM has the format).
#[pyfunction]
fn list_tool_parsers() -> Vec<&'static str> {
    ToolFormat::ALL.iter().map(|f| f.name()).collect()
}

/// The tool-call parser for a model id or path (case-insensitive, most specific pattern wins),
/// or `None` when the model is unknown.
#[pyfunction]
fn tool_parser_for_model(model: &str) -> Option<&'static str> {
    ToolFormat::for_model(model).map(|f| f.name())
}

/// What an OpenAI `tool_choice` forces: `None` for `"auto"` (or no choice), the list of calls
/// for `"required"`, the arguments of the named function for `{"type": "function", ...}`.
fn forced_of(choice: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Forced>> {
    let Some(choice) = choice.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    if let Ok(word) = choice.extract::<&str>() {
        return match word {
            "auto" => Ok(None),
            "required" => Ok(Some(Forced::List)),
            other => Err(crate::errors::invalid(format!(
                "tool_choice must be \"auto\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {other:?}"
            ))),
        };
    }
    let value = py_to_value(choice)?;
    let name = value
        .get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| value.get("name"))
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            crate::errors::invalid("a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}")
        })?;
    Ok(Some(Forced::Call(name.to_string())))
}

/// Streaming tool-call parser for one response.
///
/// `ToolCallStream(parser, tools=None, tool_choice=None)`. `feed(delta)` returns what can be emitted now:
/// `{"normal_text": str, "calls": [{"index", "id", "name", "arguments"}]}`. A call's first entry
/// carries its `name` (and `id` when the format gives one); later entries with the same index
/// carry argument fragments, whose concatenation is the call's JSON arguments. Text that could
/// begin a marker is held back, never emitted and retracted; `finish()` flushes the rest.
///
/// `tool_choice="required"` or `{"type": "function", "function": {"name": N}}`: the output was
/// held to JSON of the calls (a list of `{"name", "parameters"}` objects, or N's arguments
/// object), as an engine does for a forced tool choice; that JSON is read as the calls. Output
/// that does not open with it is read in `parser`'s format.
#[pyclass(name = "ToolCallStream", module = "smgpy._native")]
struct PyToolCallStream {
    inner: ToolCallParser,
    /// Reused by every `feed` (cleared first), so a feed allocates only the Python objects it returns.
    out: ToolDelta,
}

impl From<ToolCallParser> for PyToolCallStream {
    fn from(inner: ToolCallParser) -> Self {
        Self {
            inner,
            out: ToolDelta::default(),
        }
    }
}

#[pymethods]
impl PyToolCallStream {
    #[new]
    #[pyo3(signature = (parser, tools = None, tool_choice = None))]
    fn new(parser: &str, tools: Option<&Bound<'_, PyList>>, tool_choice: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let format = format_of(parser)?;
        let defs = tool_defs(tools)?;
        Ok(match forced_of(tool_choice)? {
            None => ToolCallParser::new(format, defs),
            Some(forced) => ToolCallParser::forced(format, defs, forced),
        }
        .into())
    }

    /// Feed the next piece of output; returns `{"normal_text", "calls"}` to emit now.
    fn feed<'py>(&mut self, py: Python<'py>, delta: &str) -> PyResult<Bound<'py, PyDict>> {
        self.out.clear();
        self.inner.push_into(delta, &mut self.out);
        delta_to_dict(py, &self.out)
    }

    /// End of output: flush everything held back.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.inner.finish();
        delta_to_dict(py, &d)
    }

    /// The canonical name of this stream's parser.
    #[getter]
    fn parser(&self) -> &'static str {
        self.inner.format().name()
    }

    /// Calls this stream started that never completed (their arguments broke, or the output
    /// ended inside them); a complete parse reports them as the same partial calls:
    /// `{"calls": [index, ...], "text": [(offset, text), ...]}`, where each text is the text of
    /// such a call's region, at that byte offset of the normal text streamed so far.
    #[getter]
    fn abandoned<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let a = self.inner.abandoned();
        let out = PyDict::new(py);
        out.set_item(intern!(py, "calls"), &a.calls)?;
        out.set_item(intern!(py, "text"), &a.text)?;
        Ok(out)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_tool_call_complete, m)?)?;
    m.add_function(wrap_pyfunction!(list_tool_parsers, m)?)?;
    m.add_function(wrap_pyfunction!(tool_parser_for_model, m)?)?;
    m.add_class::<PyToolCallStream>()?;
    Ok(())
}
