//! Template maps built from key-value pairs whose keys are known to be unique (Python dicts,
//! JSON objects): a plain pair list when small.
use minijinja::value::{Enumerator, Object, ObjectExt, ObjectRepr};
use std::sync::Arc;

/// Dicts with at most this many keys are kept as [`PairDict`]; larger ones become minijinja maps.
const PAIR_DICT_MAX: usize = 16;

/// A dict as its `(key, value)` pairs in order.
///
/// Chat messages, tool calls and schema nodes have a handful of keys. Building minijinja's own
/// map hashes every key (SipHash) into an index table, which made up much of the cost of
/// converting a long conversation; a pair list is one allocation, and a linear scan over a few
/// string keys finds one as fast as hashing it would. Python dict keys are unique, so a scan
/// finds the same value a map would. Behaves as a map everywhere (iteration yields keys, `items()`,
/// `|tojson`, `in`, equality).
#[derive(Debug)]
pub(crate) struct PairDict(Vec<(minijinja::Value, minijinja::Value)>);

impl PairDict {
    /// The value under a string key, borrowed.
    pub(crate) fn get(&self, key: &str) -> Option<&minijinja::Value> {
        self.0.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
    }

    /// Every `(key, value)` pair in order.
    pub(crate) fn pairs(&self) -> &[(minijinja::Value, minijinja::Value)] {
        &self.0
    }
}

impl Object for PairDict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        match key.as_str() {
            Some(k) => self.get_value_by_str(k),
            None => self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        }
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<minijinja::Value> {
        self.get(key).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_enumerator(|this| Box::new(this.0.iter().map(|(k, _)| k.clone())))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// A template map from pairs with unique keys, in order: a [`PairDict`] when small.
pub(crate) fn pair_dict(pairs: Vec<(minijinja::Value, minijinja::Value)>) -> minijinja::Value {
    if pairs.len() <= PAIR_DICT_MAX {
        minijinja::Value::from_object(PairDict(pairs))
    } else {
        pairs.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::{context, Environment};

    #[test]
    fn a_pair_dict_behaves_as_a_map() {
        let small = pair_dict(vec![("role".into(), "user".into()), ("n".into(), 2.into())]);
        let big = pair_dict((0..20).map(|i| (format!("k{i}").into(), i.into())).collect());
        let env = Environment::new();
        let src = "{{ d.role }} {{ d['n'] }} {{ 'role' in d }} {{ 'x' in d }} {{ d|length }} \
                   {% for k in d %}{{ k }},{% endfor %} {% for k, v in d|items %}{{ k }}={{ v }};{% endfor %} \
                   {{ d.missing is defined }} {{ b.k19 }} {{ b|length }} {{ d == d }}";
        let out = env.render_str(src, context! { d => small, b => big }).unwrap();
        assert_eq!(out, "user 2 True False 2 role,n, role=user;n=2; False 19 20 True");
    }
}
