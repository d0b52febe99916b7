//! Filters that return generators in jinja2.
//!
//! jinja2's `map`, `select`, `selectattr`, `reject`, `rejectattr`, `unique` and `items` yield lazily, so
//! their results have no `length` and cannot go through `tojson`; templates that forget `| list` fail in
//! transformers. Their results here are [`Generator`] objects, which the `length` filter and `tojson`
//! refuse the same way, while loops (including `loop.last`) work as in jinja2.

use minijinja::value::{Enumerator, Kwargs, Object, ObjectExt, ObjectRepr, Rest, Value, ValueKind};
use minijinja::{filters, Environment, Error, State};
use std::borrow::Cow;
use std::sync::Arc;

/// The result of a generator filter.
#[derive(Debug)]
pub struct Generator(Vec<Value>);

impl Object for Generator {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_enumerator(|this| Box::new(this.0.clone().into_iter()))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }

    fn is_true(self: &Arc<Self>) -> bool {
        // A Python generator object is always truthy.
        true
    }
}

/// Is `v` a generator (no `len()`, not JSON serialisable)?
pub fn is_generator(v: &Value) -> bool {
    v.downcast_object_ref::<Generator>().is_some()
}

pub(crate) fn generator(items: Vec<Value>) -> Value {
    Value::from_object(Generator(items))
}

/// jinja2's `select`/`map` family start with `if value:`, so `None` and empty inputs give nothing.
fn falsy(value: &Value) -> bool {
    !value.is_true()
}

/// minijinja's `select`/`reject` (value, test name, test arguments).
type TestFilter = fn(&State, Value, Option<Cow<'_, str>>, Rest<Value>) -> Result<Vec<Value>, Error>;
/// minijinja's `selectattr`/`rejectattr` (value, attribute, test name, test arguments).
type AttrTestFilter = fn(&State, Value, Cow<'_, str>, Option<Cow<'_, str>>, Rest<Value>) -> Result<Vec<Value>, Error>;

/// Replace the built-in filters with generator-returning versions.
pub fn register(env: &mut Environment<'static>) {
    env.add_filter("map", |state: &State, value: Value, args: Rest<Value>| {
        if falsy(&value) {
            // Still validate arguments the way the real filter would by running it on an empty list.
            return filters::map(state, Value::from(Vec::<Value>::new()), args).map(generator);
        }
        filters::map(state, value, args).map(generator)
    });
    // `select`/`reject` and their `attr` forms: nothing to test for a falsy value.
    for (name, filter) in [("select", filters::select as TestFilter), ("reject", filters::reject)] {
        env.add_filter(
            name,
            move |state: &State, value: Value, test: Option<Cow<'_, str>>, args: Rest<Value>| {
                if falsy(&value) {
                    return Ok(generator(Vec::new()));
                }
                filter(state, value, test, args).map(generator)
            },
        );
    }
    for (name, filter) in [
        ("selectattr", filters::selectattr as AttrTestFilter),
        ("rejectattr", filters::rejectattr),
    ] {
        env.add_filter(
            name,
            move |state: &State, value: Value, attr: Cow<'_, str>, test: Option<Cow<'_, str>>, args: Rest<Value>| {
                if falsy(&value) {
                    return Ok(generator(Vec::new()));
                }
                filter(state, value, attr, test, args).map(generator)
            },
        );
    }
    env.add_filter(
        "unique",
        |state: &State, value: Value, kwargs: Kwargs| -> Result<Value, Error> {
            let unique = filters::unique(state, value, kwargs)?;
            Ok(generator(unique.try_iter()?.collect()))
        },
    );
    env.add_filter("items", items_filter);
}

/// jinja2's `items` filter: a generator of `(key, value)` tuples; nothing for undefined.
pub(crate) fn items_filter(value: &Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(generator(Vec::new()));
    }
    items_of(value).map(generator)
}

/// A mapping's `(key, value)` pairs as tuples.
pub(crate) fn items_of(value: &Value) -> Result<Vec<Value>, Error> {
    if value.kind() != ValueKind::Map {
        return Err(Error::new(
            minijinja::ErrorKind::InvalidOperation,
            "items filter needs a mapping",
        ));
    }
    let mut pairs = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        pairs.push(crate::tuple::pair(key, item));
    }
    Ok(pairs)
}
