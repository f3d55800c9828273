//! The JSON documents `cmwq` prints: each starts with its `"schema"` tag
//! (`cmwq-<what>/<n>`, SCHEMA.md), then the document's own fields.
//!
//! A document built with `serde_json::json!` has its keys sorted (serde_json
//! keeps objects in a `BTreeMap`), so a `"schema"` among them lands wherever
//! the alphabet puts it; every command prints through here instead, which
//! writes the tag first whatever the document is.

use serde::Serialize;

/// A document: its `"schema"` tag first, then the fields of `doc` (a struct
/// or a JSON object) in their own order.
#[derive(Serialize)]
pub struct Tagged<'a, T: Serialize + ?Sized> {
    /// The tag, e.g. `cmwq-dump/1`.
    pub schema: &'a str,
    /// The document's fields.
    #[serde(flatten)]
    pub doc: &'a T,
}

/// `doc` under `schema`, pretty-printed.
pub fn document<T: Serialize + ?Sized>(schema: &str, doc: &T) -> Result<String, String> {
    serde_json::to_string_pretty(&Tagged { schema, doc }).map_err(|e| format!("{schema}: {e}"))
}

/// Prints `doc` under `schema`, pretty, on stdout.
pub fn print<T: Serialize + ?Sized>(schema: &str, doc: &T) -> Result<(), String> {
    println!("{}", document(schema, doc)?);
    Ok(())
}

/// `doc` under `schema` on one line (JSON lines, `cmwq monitor --json`).
pub fn line<T: Serialize + ?Sized>(schema: &str, doc: &T) -> Result<String, String> {
    serde_json::to_string(&Tagged { schema, doc }).map_err(|e| format!("{schema}: {e}"))
}

/// A document made elsewhere (the lab's `to_json`) that carries its tag
/// among its fields: the same document with the tag moved first.
#[derive(Debug, Serialize)]
pub struct SchemaFirst {
    schema: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

/// Moves `doc`'s `"schema"` first; a document without one (or not an
/// object) is an error naming what it is, never printed untagged.
pub fn schema_first(doc: serde_json::Value) -> Result<SchemaFirst, String> {
    let serde_json::Value::Object(mut rest) = doc else {
        return Err(format!("a JSON document must be an object, not {doc}"));
    };
    match rest.remove("schema") {
        Some(serde_json::Value::String(schema)) => Ok(SchemaFirst { schema, rest }),
        other => Err(format!("a JSON document without a schema tag ({other:?})")),
    }
}

/// [`schema_first`] on one line.
pub fn line_first(doc: serde_json::Value) -> Result<String, String> {
    serde_json::to_string(&schema_first(doc)?).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_comes_first_whatever_the_keys() {
        let v = serde_json::json!({ "a": 1, "processes": [], "zz": { "b": 2 } });
        let doc = document("cmwq-x/1", &v).unwrap();
        assert!(
            doc.starts_with("{\n  \"schema\": \"cmwq-x/1\",\n  \"a\": 1,"),
            "{doc}"
        );
        let l = line("cmwq-x/1", &v).unwrap();
        assert!(l.starts_with(r#"{"schema":"cmwq-x/1","a":1"#), "{l}");
        let moved = schema_first(serde_json::json!({ "config": 1, "schema": "cmwq-y/1" })).unwrap();
        let s = serde_json::to_string(&moved).unwrap();
        assert_eq!(s, r#"{"schema":"cmwq-y/1","config":1}"#);
        assert!(schema_first(serde_json::json!({ "config": 1 })).is_err());
        assert!(schema_first(serde_json::json!([1])).is_err());
    }
}
