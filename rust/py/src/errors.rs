//! The one place where errors become Python exceptions: every exception the binding raises is
//! made here, from a core crate's error enum or from one of the binding's own kinds below.
//!
//! Bad input (a parser name, a stop list, a template, a constraint, an argument's value) is a
//! `ValueError` or a subclass declared in `_native.pyi`; a Python value of the wrong type is a
//! `TypeError`; a failing system call an `OSError`; using an object in the wrong state a
//! `RuntimeError`.
use pyo3::create_exception;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use smgpy_server::routes::response_store::StoreError;
use smgpy_template::TemplateError as CoreTemplateError;

create_exception!(
    smgpy._native,
    GrammarError,
    PyValueError,
    "A structured-output constraint that cannot be enforced (the message names the keyword, \
     the regex position or the grammar line), or a token the constraint does not allow."
);
create_exception!(
    smgpy._native,
    TemplateError,
    PyValueError,
    "A chat template refused its input (`raise_exception`) or failed to render."
);
create_exception!(
    smgpy._native,
    TemplateSyntaxError,
    PyValueError,
    "A chat template does not compile; `file`, `line` and `reason` say where and why."
);

create_exception!(
    smgpy._native,
    ResponseStoreError,
    PyOSError,
    "The Responses store file (`response_store=`, `--response-store`) cannot be used: another \
     program's database, a newer smgpy's store, a damaged file, or one that cannot be opened. The \
     message names the file and what to do."
);

/// `smgpy_structured` errors: `GrammarError` (a `ValueError`).
pub fn structured(e: smgpy_structured::StructuredError) -> PyErr {
    GrammarError::new_err(e.to_string())
}

/// A constraint the binding itself cannot take (e.g. an unknown key): `GrammarError`.
pub fn grammar(message: String) -> PyErr {
    GrammarError::new_err(message)
}

/// `smgpy_parsers` errors (an unknown parser name, a bad `tool_choice`): `ValueError`.
pub fn parser(e: smgpy_parsers::ParserError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// `smgpy_stop` errors (an empty or oversized stop list): `ValueError`.
pub fn stop(e: smgpy_stop::StopError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// `smgpy_template` errors: `TemplateSyntaxError` (with `file`, `line`, `reason`),
/// `TemplateError`, `FileNotFoundError` or `OSError`.
pub fn template(err: CoreTemplateError) -> PyErr {
    let message = err.to_string();
    match err {
        CoreTemplateError::Syntax { name, line, reason } => Python::attach(|py| {
            let e = TemplateSyntaxError::new_err(message);
            let v = e.value(py);
            let _ = v.setattr("file", name);
            let _ = v.setattr("line", line);
            let _ = v.setattr("reason", reason);
            e
        }),
        CoreTemplateError::NotFound { .. } => PyFileNotFoundError::new_err(message),
        CoreTemplateError::Io { .. } => PyOSError::new_err(message),
        CoreTemplateError::Raised { .. } | CoreTemplateError::Render { .. } => TemplateError::new_err(message),
    }
}

/// Template input past a size or depth limit: `ValueError`.
pub fn too_large(e: smgpy_template::TooLarge) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The Responses store file cannot be opened or used: `ResponseStoreError` (an `OSError`).
pub fn response_store(e: StoreError) -> PyErr {
    ResponseStoreError::new_err(e.to_string())
}

/// An argument with a value the call cannot take: `ValueError`.
pub fn invalid(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// A Python value of the wrong type: `TypeError`.
pub fn wrong_type(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}

/// A system call that failed (a socket, a port): `OSError`.
pub fn os(message: impl Into<String>) -> PyErr {
    PyOSError::new_err(message.into())
}

/// An object used in a state that does not allow the call: `RuntimeError`.
pub fn misuse(message: impl Into<String>) -> PyErr {
    PyRuntimeError::new_err(message.into())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GrammarError", py.get_type::<GrammarError>())?;
    m.add("TemplateError", py.get_type::<TemplateError>())?;
    m.add("TemplateSyntaxError", py.get_type::<TemplateSyntaxError>())?;
    m.add("ResponseStoreError", py.get_type::<ResponseStoreError>())?;
    Ok(())
}
