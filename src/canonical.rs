//! Canonical JSON: keys sorted at every level, no whitespace. What a hash or a signature is
//! taken over, so that the same value always gives the same bytes.

use serde_json::Value;

/// The canonical text of a value.
pub fn to_string(value: &Value) -> String {
    serde_json::to_string(&sorted(value.clone())).expect("a JSON value serializes")
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
