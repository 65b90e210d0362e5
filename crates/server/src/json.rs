//! A small JSON value and writer for the AdminServer's answers. The server only ever writes
//! JSON, never reads it, so this is all it needs (no parser, no serde_json in the tree).

use std::fmt::Write as _;

/// A JSON value; objects keep their keys in insertion order, as ZooKeeper's maps do.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    pub fn str(text: impl Into<String>) -> Json {
        Json::Str(text.into())
    }

    /// A count or size; values past i64::MAX (never seen in practice) saturate.
    pub fn count(value: impl TryInto<i64>) -> Json {
        Json::Int(value.try_into().unwrap_or(i64::MAX))
    }

    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    /// The value as a four-letter word prints it: strings bare, averages with four decimals.
    pub fn to_plain_text(&self) -> String {
        match self {
            Json::Str(text) => text.clone(),
            Json::Float(value) => format!("{value:.4}"),
            other => other.to_json_string(),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(value) => out.push_str(if *value { "true" } else { "false" }),
            Json::Int(value) => {
                let _ = write!(out, "{value}");
            }
            // JSON has no NaN or infinity.
            Json::Float(value) if !value.is_finite() => out.push_str("null"),
            Json::Float(value) => {
                let _ = write!(out, "{value}");
            }
            Json::Str(text) => write_string(text, out),
            Json::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (index, (key, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_values_compactly() {
        let value = Json::object([
            ("command", Json::str("ruok")),
            ("error", Json::Null),
            ("ok", Json::Bool(true)),
            ("list", Json::Array(vec![Json::Int(-1), Json::Float(0.5)])),
        ]);
        assert_eq!(
            value.to_json_string(),
            r#"{"command":"ruok","error":null,"ok":true,"list":[-1,0.5]}"#
        );
    }

    #[test]
    fn escapes_quotes_backslashes_and_control_characters() {
        let value = Json::str("a\"b\\c\nd\u{1}é");
        assert_eq!(value.to_json_string(), r#""a\"b\\c\nd\u0001é""#);
    }

    #[test]
    fn non_finite_floats_become_null() {
        assert_eq!(Json::Float(f64::NAN).to_json_string(), "null");
        assert_eq!(Json::Float(f64::INFINITY).to_json_string(), "null");
    }

    #[test]
    fn plain_text_prints_strings_bare_and_averages_with_four_decimals() {
        assert_eq!(Json::str("standalone").to_plain_text(), "standalone");
        assert_eq!(Json::Float(0.25).to_plain_text(), "0.2500");
        assert_eq!(Json::Int(42).to_plain_text(), "42");
    }
}
