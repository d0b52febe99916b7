//! Literal grammars that are not JSON: Python call lists (`[f(a=1, b="x")]`), Python dict
//! lists (Sarashina) and Gemma's `call:NAME{key:<|"|>text<|"|>}` objects. One small
//! recursive-descent reader covers all three; `delim` switches to Gemma's string delimiter.
use super::body::{compact, valid_name, Call};
use serde_json::{Map, Number, Value};

/// Nesting limit, so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 64;

struct Reader<'a> {
    s: &'a str,
    pos: usize,
    /// Gemma string delimiter; `None` for Python quoting.
    delim: Option<&'a str>,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<&'a str> {
        self.ws();
        let r = self.rest();
        let n = r
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(r.len());
        (n > 0).then(|| {
            self.pos += n;
            &r[..n]
        })
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        if let Some(d) = self.delim {
            if let Some(r) = self.rest().strip_prefix(d) {
                let end = r.find(d)?;
                self.pos += d.len() * 2 + end;
                return Some(Value::String(r[..end].to_string()));
            }
        }
        let r = self.rest();
        let c = r.chars().next()?;
        match c {
            '[' | '(' => {
                self.pos += 1;
                let close = if c == '[' { ']' } else { ')' };
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Some(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                        return None;
                    }
                }
            }
            '{' => {
                self.pos += 1;
                Some(Value::Object(self.entries(depth, '}')?))
            }
            '"' | '\'' if self.delim.is_none() || c == '"' => self.string(c),
            _ => self.scalar(),
        }
    }

    /// `key: value` entries up to `close`; keys may be bare words (Gemma) or literals.
    fn entries(&mut self, depth: usize, close: char) -> Option<Map<String, Value>> {
        let mut map = Map::new();
        loop {
            if self.eat(close) {
                return Some(map);
            }
            self.ws();
            let key = match self.rest().chars().next()? {
                '"' | '\'' => match self.value(depth + 1)? {
                    Value::String(s) => s,
                    _ => return None,
                },
                _ if self.delim.is_some_and(|d| self.rest().starts_with(d)) => match self.value(depth + 1)? {
                    Value::String(s) => s,
                    _ => return None,
                },
                _ => self.ident()?.to_string(),
            };
            if !self.eat(':') {
                return None;
            }
            map.insert(key, self.value(depth + 1)?);
            if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                return None;
            }
        }
    }

    fn string(&mut self, quote: char) -> Option<Value> {
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        let (open_len, close) = if self.rest().starts_with(&triple) {
            (3, triple.as_str())
        } else {
            (1, &triple[..1])
        };
        self.pos += open_len;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\\' {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    'u' => {
                        let hex: String = (0..4).filter_map(|_| chars.next().map(|(_, h)| h)).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    other => out.push(other),
                }
            } else if self.rest()[i..].starts_with(close) {
                self.pos += i + close.len();
                return Some(Value::String(out));
            } else {
                out.push(c);
            }
        }
        None
    }

    fn scalar(&mut self) -> Option<Value> {
        let r = self.rest();
        let n = r
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')))
            .unwrap_or(r.len());
        let word = &r[..n];
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some(match word {
            "True" | "true" => Value::Bool(true),
            "False" | "false" => Value::Bool(false),
            "None" | "null" => Value::Null,
            _ => {
                let digits = word.replace('_', "");
                if let Ok(i) = digits.parse::<i64>() {
                    Value::Number(i.into())
                } else if let Some(f) = digits.parse::<f64>().ok().and_then(Number::from_f64) {
                    Value::Number(f)
                } else if self.delim.is_some() {
                    // Gemma writes enum-like bare words.
                    Value::String(word.to_string())
                } else {
                    return None;
                }
            }
        })
    }
}

/// A whole Python literal.
pub(crate) fn python_value(text: &str) -> Option<Value> {
    let mut r = Reader {
        s: text,
        pos: 0,
        delim: None,
    };
    let v = r.value(0)?;
    r.ws();
    r.rest().is_empty().then_some(v)
}

/// `[f(a=1), g()]`, or calls separated by commas or newlines without brackets.
pub(crate) fn pythonic_calls(text: &str) -> Option<Vec<Call>> {
    let mut r = Reader {
        s: text,
        pos: 0,
        delim: None,
    };
    let bracketed = r.eat('[');
    let mut out = Vec::new();
    loop {
        while r.eat(',') {}
        r.ws();
        if r.rest().is_empty() {
            if bracketed {
                return None;
            }
            break;
        }
        if bracketed && r.eat(']') {
            r.ws();
            if !r.rest().is_empty() {
                return None;
            }
            break;
        }
        let name = valid_name(r.ident()?)?;
        if !r.eat('(') {
            return None;
        }
        let mut args = Map::new();
        loop {
            if r.eat(')') {
                break;
            }
            let key = r.ident()?.to_string();
            if !r.eat('=') {
                return None;
            }
            args.insert(key, r.value(1)?);
            if !r.eat(',') && !r.rest().trim_start().starts_with(')') {
                return None;
            }
        }
        out.push(Call {
            id: None,
            name,
            arguments: compact(&Value::Object(args)),
        });
    }
    (!out.is_empty()).then_some(out)
}

/// Gemma `call:NAME{k:v,...}`, possibly several in a row.
pub(crate) fn gemma_calls(text: &str, delim: &str) -> Option<Vec<Call>> {
    let mut r = Reader {
        s: text,
        pos: 0,
        delim: Some(delim),
    };
    let mut out = Vec::new();
    loop {
        r.ws();
        if r.rest().is_empty() {
            break;
        }
        r.pos += "call:".len() * usize::from(r.rest().starts_with("call:"));
        let name = valid_name(r.ident()?)?;
        if !r.eat('{') {
            return None;
        }
        let args = r.entries(1, '}')?;
        out.push(Call {
            id: None,
            name,
            arguments: compact(&Value::Object(args)),
        });
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::body::calls_from_values;

    fn python_dict_calls(text: &str) -> Option<Vec<Call>> {
        calls_from_values(&[python_value(text)?])
    }

    #[test]
    fn pythonic() {
        let c = pythonic_calls(r#"[get_weather(city="Paris", days=3, opts={'a': [1, 2.5, None]}), noop()]"#).unwrap();
        assert_eq!(c[0].arguments, r#"{"city":"Paris","days":3,"opts":{"a":[1,2.5,null]}}"#);
        assert_eq!((c[1].name.as_str(), c[1].arguments.as_str()), ("noop", "{}"));
        assert!(pythonic_calls("[not a call]").is_none());
        assert!(pythonic_calls("[f(1)]").is_none());
    }

    #[test]
    fn gemma_and_dicts() {
        let c = gemma_calls(r#"call:get{city:<|"|>Paris, "FR"<|"|>,n:42,ok:true,l:[1,2]}"#, "<|\"|>").unwrap();
        assert_eq!(c[0].arguments, r#"{"city":"Paris, \"FR\"","n":42,"ok":true,"l":[1,2]}"#);
        let c = python_dict_calls("[{'name': 'f', 'arguments': {'x': 'y'}}]").unwrap();
        assert_eq!(c[0].arguments, r#"{"x":"y"}"#);
    }
}
