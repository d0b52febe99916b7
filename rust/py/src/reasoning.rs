//! Python binding for the reasoning parsers: conversion only, the logic is in `smgpy-parsers`.
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use smgpy_parsers::reasoning::{
    self, prompt_state, ReasoningDelta, ReasoningFormat, ReasoningOptions, ReasoningParser,
};

fn format_of(parser: &str) -> PyResult<ReasoningFormat> {
    parser.parse::<ReasoningFormat>().map_err(crate::errors::parser)
}

fn delta_to_dict<'py>(py: Python<'py>, d: &ReasoningDelta) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item(intern!(py, "reasoning_text"), &d.reasoning)?;
    out.set_item(intern!(py, "normal_text"), &d.content)?;
    Ok(out)
}

/// Options from the keyword arguments; `prompt` (when given) decides what was left unset.
fn options(
    format: ReasoningFormat,
    prompt: Option<&str>,
    prompt_opened_reasoning: Option<bool>,
    thinking_disabled: bool,
) -> ReasoningOptions {
    let from_prompt = prompt.map(|p| prompt_state(format, p)).unwrap_or_default();
    ReasoningOptions {
        prompt_opened_reasoning: prompt_opened_reasoning.unwrap_or(from_prompt.prompt_opened_reasoning),
        thinking_disabled: thinking_disabled || from_prompt.thinking_disabled,
        // `prompt_opened_reasoning=False` says so explicitly: honour it over a format's implied
        // opening.
        reasoning_not_started: prompt_opened_reasoning == Some(false),
    }
}

/// Split a complete model output into reasoning and visible text.
///
/// `parser` is a reasoning parser name (see `list_reasoning_parsers()`; SMG/SGLang aliases are
/// accepted). `prompt_opened_reasoning=True` says the prompt already opened the reasoning block;
/// `thinking_disabled=True` makes everything visible text. Returns
/// `{"reasoning_text": str, "normal_text": str}`. Raises `ValueError` for an unknown parser.
#[pyfunction]
#[pyo3(signature = (text, parser, *, prompt_opened_reasoning = None, thinking_disabled = false))]
fn parse_reasoning_complete<'py>(
    py: Python<'py>,
    text: &str,
    parser: &str,
    prompt_opened_reasoning: Option<bool>,
    thinking_disabled: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let format = format_of(parser)?;
    let opts = options(format, None, prompt_opened_reasoning, thinking_disabled);
    let d = crate::parsers::parse_text(py, text, || reasoning::parse_complete(text, format, opts));
    delta_to_dict(py, &d)
}

/// Canonical reasoning parser names (vLLM's `--reasoning-parser` names where vLLM has the format).
#[pyfunction]
fn list_reasoning_parsers() -> Vec<&'static str> {
    ReasoningFormat::ALL.iter().map(|f| f.name()).collect()
}

/// The reasoning parser for a model id or path (case-insensitive, most specific pattern wins),
/// or `None` when the model is unknown or does not reason.
#[pyfunction]
fn reasoning_parser_for_model(model: &str) -> Option<&'static str> {
    ReasoningFormat::for_model(model).map(|f| f.name())
}

/// Streaming reasoning parser for one response.
///
/// `ReasoningStream(parser, *, prompt=None, prompt_opened_reasoning=None, thinking_disabled=False,
/// keep_tool_calls=False)`. Given the rendered `prompt`, its tail decides whether the output
/// starts inside reasoning or thinking was switched off; explicit keywords win.
/// `keep_tool_calls=True`: a tool-call parser reads `normal_text` next, so gpt-oss tool-call
/// messages stay in it (without, they are shown to no one). `feed(delta)` returns what can be emitted
/// now (text that may start a marker is held back); `finish()` flushes the rest. Both return
/// `{"reasoning_text": str, "normal_text": str}`.
#[pyclass(name = "ReasoningStream", module = "smgpy._native")]
struct PyReasoningStream {
    inner: ReasoningParser,
    /// Reused by every `feed`: its strings keep their capacity, so a feed allocates only the
    /// Python objects it returns.
    out: ReasoningDelta,
}

impl From<ReasoningParser> for PyReasoningStream {
    fn from(inner: ReasoningParser) -> Self {
        Self {
            inner,
            out: ReasoningDelta::default(),
        }
    }
}

#[pymethods]
impl PyReasoningStream {
    #[new]
    #[pyo3(signature = (parser, *, prompt = None, prompt_opened_reasoning = None, thinking_disabled = false, keep_tool_calls = false))]
    fn new(
        parser: &str,
        prompt: Option<&str>,
        prompt_opened_reasoning: Option<bool>,
        thinking_disabled: bool,
        keep_tool_calls: bool,
    ) -> PyResult<Self> {
        let format = format_of(parser)?;
        let opts = options(format, prompt, prompt_opened_reasoning, thinking_disabled);
        Ok(ReasoningParser::new(format, opts)
            .keep_tool_calls(keep_tool_calls)
            .into())
    }

    /// Feed the next piece of output; returns `{"reasoning_text", "normal_text"}` to emit now.
    fn feed<'py>(&mut self, py: Python<'py>, delta: &str) -> PyResult<Bound<'py, PyDict>> {
        self.out.reasoning.clear();
        self.out.content.clear();
        self.inner.push_into(delta, &mut self.out);
        delta_to_dict(py, &self.out)
    }

    /// End of output: flush everything held back.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.inner.finish();
        delta_to_dict(py, &d)
    }

    /// Whether the stream is currently inside a reasoning block.
    #[getter]
    fn in_reasoning(&self) -> bool {
        self.inner.in_reasoning()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_reasoning_complete, m)?)?;
    m.add_function(wrap_pyfunction!(list_reasoning_parsers, m)?)?;
    m.add_function(wrap_pyfunction!(reasoning_parser_for_model, m)?)?;
    m.add_class::<PyReasoningStream>()?;
    Ok(())
}
