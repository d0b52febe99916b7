//! One engine output dict (see `smgpy.engine`) read into an [`EngineOutput`].
//!
//! This runs once per token per stream, on the event loop with the GIL held, so each dict is
//! read in one pass over its items instead of one hash lookup per field the contract knows:
//! an output carries 3-4 of the 5 top-level fields and 4 of the 6 `meta_info` fields, and a
//! lookup of an absent key costs as much as one of a present key. Keys are matched by identity
//! with interned names first (string literals in the engine's source are interned), then by
//! text, so any `str` key works.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use smgpy_server::engine::{EngineFinish, EngineOutput, MatchedBy, TokenLogprobs};

/// The top-level fields of an output dict, as found in one pass.
pub struct OutputFields<'py> {
    pub index: Option<Bound<'py, PyAny>>,
    delta: Option<Bound<'py, PyAny>>,
    text: Option<Bound<'py, PyAny>>,
    output_ids: Option<Bound<'py, PyAny>>,
    meta_info: Option<Bound<'py, PyAny>>,
}

struct MetaFields<'py> {
    prompt_tokens: Option<Bound<'py, PyAny>>,
    completion_tokens: Option<Bound<'py, PyAny>>,
    cached_tokens: Option<Bound<'py, PyAny>>,
    finish_reason: Option<Bound<'py, PyAny>>,
    output_token_logprobs: Option<Bound<'py, PyAny>>,
    output_top_logprobs: Option<Bound<'py, PyAny>>,
}

/// Which of `names` the key `k` is: by identity first, then by text.
fn which(k: &Bound<'_, PyAny>, names: &[&Bound<'_, PyString>]) -> Option<usize> {
    if let Some(i) = names.iter().position(|n| n.as_ptr() == k.as_ptr()) {
        return Some(i);
    }
    let text = k.cast::<PyString>().ok()?.to_str().ok()?;
    names.iter().position(|n| n.to_str().ok() == Some(text))
}

/// The values of `names` in dict `d`, read in one pass over its items.
fn read_fields<'py, const N: usize>(
    d: &Bound<'py, PyDict>,
    names: [&Bound<'py, PyString>; N],
) -> [Option<Bound<'py, PyAny>>; N] {
    let mut out: [Option<Bound<'py, PyAny>>; N] = std::array::from_fn(|_| None);
    for (k, v) in d.iter() {
        if let Some(slot) = which(&k, &names).and_then(|i| out.get_mut(i)) {
            *slot = Some(v);
        }
    }
    out
}

/// Build struct `$ty` from dict `$d` in one pass, each field read from the key of its own name.
macro_rules! read_struct {
    ($d:expr, $ty:ident { $($field:ident),* $(,)? }) => {{
        let py = $d.py();
        let [$($field),*] = read_fields($d, [$(intern!(py, stringify!($field))),*]);
        $ty { $($field),* }
    }};
}

impl<'py> OutputFields<'py> {
    /// Read the fields of output dict `d` (unknown keys are ignored).
    pub fn read(d: &Bound<'py, PyDict>) -> Self {
        read_struct!(
            d,
            Self {
                delta,
                output_ids,
                meta_info,
                text,
                index
            }
        )
    }
}

fn read_meta<'py>(d: &Bound<'py, PyDict>) -> MetaFields<'py> {
    read_struct!(
        d,
        MetaFields {
            prompt_tokens,
            completion_tokens,
            finish_reason,
            cached_tokens,
            output_token_logprobs,
            output_top_logprobs,
        }
    )
}

/// What a choice has forwarded so far, for engines that yield cumulative `text` / `output_ids`.
#[derive(Debug, Default)]
pub struct Seen {
    /// Bytes of cumulative text already forwarded.
    text: usize,
    /// Token ids already forwarded.
    ids: usize,
}

fn not_none<'a, 'py>(v: &'a Option<Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.as_ref().filter(|v| !v.is_none())
}

impl Seen {
    /// The [`EngineOutput`] of one output's fields: `delta` mode when the dict has a `delta` key
    /// (even `None`), cumulative `text` / `output_ids` otherwise.
    pub fn convert(&mut self, f: &OutputFields<'_>) -> PyResult<EngineOutput> {
        let mut o = EngineOutput::default();
        let delta_mode = f.delta.is_some();
        if delta_mode {
            if let Some(delta) = not_none(&f.delta) {
                o.text_delta = delta.extract()?;
            }
        } else if let Some(text) = not_none(&f.text) {
            let s: pyo3::pybacked::PyBackedStr = text.extract()?;
            o.text_delta = new_suffix(&s, &mut self.text).to_string();
        }
        if let Some(ids) = not_none(&f.output_ids) {
            let ids: Vec<i64> = ids.extract()?;
            if delta_mode {
                o.token_ids = ids;
            } else {
                o.token_ids = ids.get(self.ids..).map(<[i64]>::to_vec).unwrap_or_default();
                self.ids = self.ids.max(ids.len());
            }
        }
        if let Some(meta) = f.meta_info.as_ref().and_then(|m| m.cast::<PyDict>().ok()) {
            convert_meta(&read_meta(meta), &mut o, delta_mode)?;
        }
        Ok(o)
    }
}

fn convert_meta(m: &MetaFields<'_>, o: &mut EngineOutput, delta_mode: bool) -> PyResult<()> {
    // Counts past 2^32 - 1 saturate: usage never wraps around to a small number.
    let u32_of = |v: &Option<Bound<'_, PyAny>>| -> PyResult<Option<u32>> {
        not_none(v)
            .map(|v| v.extract::<u64>().map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
            .transpose()
    };
    o.prompt_tokens = u32_of(&m.prompt_tokens)?;
    o.completion_tokens = u32_of(&m.completion_tokens)?;
    o.cached_tokens = u32_of(&m.cached_tokens)?;
    if let Some(f) = &m.finish_reason {
        o.finish = finish_of(f)?;
    }
    if let Some(lp) = not_none(&m.output_token_logprobs) {
        o.logprobs = logprobs_of(lp, m.output_top_logprobs.as_ref(), delta_mode, o.token_ids.len())?;
    }
    Ok(())
}

/// The part of cumulative `text` not forwarded yet (tolerates an engine that re-decoded the tail).
fn new_suffix<'a>(text: &'a str, seen: &mut usize) -> &'a str {
    let start = if text.is_char_boundary(*seen) && *seen <= text.len() {
        *seen
    } else {
        text.len()
    };
    *seen = text.len().max(*seen);
    &text[start..]
}

fn finish_of(f: &Bound<'_, PyAny>) -> PyResult<Option<EngineFinish>> {
    if f.is_none() {
        return Ok(None);
    }
    let py = f.py();
    type Parts<'py> = (String, Option<Bound<'py, PyAny>>, Option<String>, Option<u16>);
    let (kind, matched, message, status): Parts<'_> = if let Ok(d) = f.cast::<PyDict>() {
        let kind = d
            .get_item(intern!(py, "type"))?
            .map(|k| k.extract::<String>())
            .transpose()?
            .unwrap_or_default();
        let matched = d.get_item(intern!(py, "matched"))?.filter(|m| !m.is_none());
        let message = d
            .get_item(intern!(py, "message"))?
            .filter(|m| !m.is_none())
            .map(|m| m.str().map(|s| s.to_string()))
            .transpose()?;
        // SGLang's `FINISH_ABORT` carries an HTTP status; one that is no status is ignored.
        let status = d
            .get_item(intern!(py, "status_code"))?
            .and_then(|s| s.extract::<u16>().ok())
            .filter(|s| (100..600).contains(s));
        (kind, matched, message, status)
    } else {
        (f.extract::<String>()?, None, None, None)
    };
    let matched = match matched {
        None => None,
        Some(m) => match m.extract::<i64>() {
            Ok(t) => Some(MatchedBy::Token(t)),
            Err(_) => Some(MatchedBy::Text(m.str()?.to_string())),
        },
    };
    Ok(Some(match kind.as_str() {
        "length" => EngineFinish::Length,
        "abort" => EngineFinish::Abort { message, status },
        _ => EngineFinish::Stop { matched },
    }))
}

fn logprobs_of(
    lp: &Bound<'_, PyAny>,
    tops: Option<&Bound<'_, PyAny>>,
    delta_mode: bool,
    new_tokens: usize,
) -> PyResult<Vec<TokenLogprobs>> {
    type Entry = (f64, i64, Option<String>);
    let all: Vec<Entry> = lp.extract()?;
    let tops: Vec<Option<Vec<Entry>>> = match tops {
        Some(t) if !t.is_none() => t.extract()?,
        _ => Vec::new(),
    };
    let skip = if delta_mode {
        0
    } else {
        all.len().saturating_sub(new_tokens)
    };
    Ok(all
        .into_iter()
        .enumerate()
        .skip(skip)
        .map(|(i, (logprob, token_id, token))| TokenLogprobs {
            token_id,
            token,
            logprob: logprob as f32,
            top: tops
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or_default()
                .into_iter()
                .map(|(l, id, t)| (id, t, l as f32))
                .collect(),
        })
        .collect())
}
