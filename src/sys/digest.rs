//! Digests: sha256 in hex, and the canonical JSON a hash or a signature is taken over, so
//! that the same value always gives the same bytes.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The sha256 of everything a reader yields, read in 1 MiB chunks (never all at once).
pub(crate) fn sha256_reader(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => hasher.update(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex(&hasher.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Canonical JSON: keys sorted at every level, no whitespace. What a hash or a signature is
/// taken over, so that the same value always gives the same bytes.
pub fn canonical_json(value: &Value) -> String {
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
