//! The subagent contract (issue 17): a subagent's report is an API. With
//! `stop-gate --contract FILE|default`, a SubagentStop passes only when the subagent's last
//! message is one JSON object (bare, or alone in a single `json` code fence) that validates
//! against the contract's JSON Schema, within `--contract-max-tokens`. The schema is compiled
//! with the `jsonschema` crate, only when a contract is configured, and never fetches: a `$ref`
//! to anything outside the schema itself is refused (no network, no file, on the Stop path).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::hook;
use crate::error;
use crate::error::{Error, Result};
use crate::sys::files;
use crate::verdict::defang;

/// The default contract: the shape of the founding document.
pub(crate) const DEFAULT_SCHEMA: &str = include_str!("../../schemas/subagent-report.schema.json");
/// The default of `--contract-max-tokens`.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 2000;
/// The largest contract file read.
const MAX_SCHEMA: u64 = 1024 * 1024;

/// Where the contract comes from (`--contract`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Default,
    File(PathBuf),
}

impl Source {
    pub(crate) fn parse(text: &str) -> Result<Source> {
        match text {
            "" => Err(Error::usage(
                "--contract needs a JSON Schema file, or `default`",
            )),
            "default" => Ok(Source::Default),
            path => Ok(Source::File(PathBuf::from(path))),
        }
    }

    /// How the contract is named in messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Default => "the default contract".into(),
            Source::File(path) => format!("the contract {}", path.display()),
        }
    }
}

/// A compiled contract.
pub(crate) struct Contract {
    schema: Value,
    validator: jsonschema::Validator,
    source: Source,
}

/// Refuses every retrieval: a contract is one self-contained schema.
struct Offline;

impl jsonschema::Retrieve for Offline {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> std::result::Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "{uri} is outside the contract; a contract is one self-contained schema (vigil fetches nothing)"
        )
        .into())
    }
}

impl Contract {
    /// Reads and compiles a contract; `project` resolves a relative file.
    pub(crate) fn load(source: &Source, project: &Path) -> Result<Contract> {
        let schema: Value = match source {
            Source::Default => serde_json::from_str(DEFAULT_SCHEMA).expect("the default parses"),
            Source::File(path) => {
                let path = if path.is_absolute() {
                    path.clone()
                } else {
                    project.join(path)
                };
                // A plain file only, opened without waiting: a FIFO (or a link to one) planted
                // where the contract should be would hold every SubagentStop to its deadline.
                let file = files::open_regular(&path).map_err(|e| {
                    Error::input(format!(
                        "cannot read the contract {}: {}",
                        path.display(),
                        error::plain_io(&e)
                    ))
                })?;
                let bytes = files::read_capped(file, MAX_SCHEMA, "the contract", &path)?;
                serde_json::from_slice(&bytes).map_err(|e| {
                    Error::input(format!("the contract {} is not JSON: {e}", path.display()))
                })?
            }
        };
        Contract::compile(schema, source.clone())
    }

    fn compile(schema: Value, source: Source) -> Result<Contract> {
        let named = source.describe();
        if !schema.is_object() {
            return Err(Error::input(format!(
                "{named} is not a JSON Schema: its root is {}, not an object",
                hook::json_type(&schema)
            )));
        }
        if let Some(reference) = outside_reference(&schema) {
            return Err(Error::input(format!(
                "{named} cannot be used: its $ref {reference:?} points outside the schema; a contract is one self-contained schema (only \"#…\" references), and vigil fetches nothing"
            )));
        }
        // The default is vigil's own, checked by a test; a user's file is checked each time.
        if source != Source::Default
            && let Err(e) = jsonschema::meta::validate(&schema)
        {
            return Err(Error::input(format!(
                "{named} is not a valid JSON Schema: at {}: {}",
                pointer(e.instance_path().as_str()),
                e
            )));
        }
        let validator = jsonschema::options()
            .with_retriever(Offline)
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| Error::input(format!("{named} cannot be used: {e}")))?;
        Ok(Contract {
            schema,
            validator,
            source,
        })
    }

    /// Checks a subagent's last message: `Err` with the one useful line and the shape to
    /// return.
    pub(crate) fn check(
        &self,
        message: &str,
        max_tokens: u32,
    ) -> std::result::Result<(), Violation> {
        let estimate = estimate_tokens(message);
        if estimate > u64::from(max_tokens) {
            return Err(self.violation(format!(
                "the report is about {estimate} tokens, over the contract's {max_tokens}; shorten it"
            )));
        }
        let value = extract(message).map_err(|why| self.violation(why))?;
        if let Some(error) = self.validator.iter_errors(&value).next() {
            return Err(self.violation(format!(
                "at {}: {}",
                pointer(error.instance_path().as_str()),
                defang::field_max(&error.to_string(), 300)
            )));
        }
        Ok(())
    }

    fn violation(&self, what: String) -> Violation {
        Violation {
            line: format!(
                "stop-gate: the subagent's report breaks {}: {what}",
                self.source.describe()
            ),
            shape: self.shape(),
        }
    }

    /// What to return: the schema's first example when it has one (the default's is the
    /// founding document's shape), else its required fields.
    fn shape(&self) -> String {
        if let Some(example) = self
            .schema
            .get("examples")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            return format!(
                "End with one JSON object and nothing else, shaped like this:\n{}",
                serde_json::to_string_pretty(example).unwrap_or_default()
            );
        }
        let required: Vec<&str> = self
            .schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if required.is_empty() {
            "End with one JSON object that the contract's JSON Schema accepts, and nothing else"
                .into()
        } else {
            format!(
                "End with one JSON object that the contract's JSON Schema accepts, and nothing else; it needs: {}",
                required.join(", ")
            )
        }
    }
}

/// A broken contract: the one useful line, then what to return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub line: String,
    pub shape: String,
}

/// A conservative token count: one token per 3 bytes of UTF-8, and at least one per character
/// outside ASCII (English prose runs near 4 bytes a token and JSON near 3, so this counts high,
/// never low, for the text a report holds).
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    let by_bytes = (text.len() as u64).div_ceil(3);
    let wide = text.chars().filter(|c| !c.is_ascii()).count() as u64;
    by_bytes.max(wide)
}

/// The one JSON object a message holds: the whole message, or the whole of a single fenced code
/// block whose info string is `json` (CommonMark decides what the fence is: pulldown-cmark).
fn extract(message: &str) -> std::result::Result<Value, String> {
    let text = message.trim();
    if text.is_empty() {
        return Err("the report is empty; it must be one JSON object".into());
    }
    let json = if text.starts_with('{') {
        text.to_string()
    } else {
        fenced(text)?
    };
    let value: Value = serde_json::from_str(&json).map_err(|e| {
        format!("the report is not one JSON object ({e}); send only the object, bare or alone in a ```json fence")
    })?;
    if let Err(e) = serde_json::from_str::<OnceEach>(&json) {
        let why = e.to_string();
        let why = why.split(" at line ").next().unwrap_or(&why);
        return Err(format!("the report {why}; send each key once"));
    }
    if !value.is_object() {
        return Err(format!(
            "the report is {}, not a JSON object",
            hook::json_type(&value)
        ));
    }
    Ok(value)
}

/// JSON in which no object names a key twice, at any depth: serde_json keeps the last of two,
/// so a report could say one thing to the schema and another to a reader that takes the first.
/// Only the keys are looked at; serde_json does the parsing.
struct OnceEach;

impl<'de> serde::Deserialize<'de> for OnceEach {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<OnceEach, D::Error> {
        deserializer.deserialize_any(OnceEachVisitor)
    }
}

struct OnceEachVisitor;

impl<'de> serde::de::Visitor<'de> for OnceEachVisitor {
    type Value = OnceEach;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_i64<E>(self, _: i64) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_u64<E>(self, _: u64) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_f64<E>(self, _: f64) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_str<E>(self, _: &str) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_unit<E>(self) -> Result<OnceEach, E> {
        Ok(OnceEach)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<OnceEach, A::Error> {
        while seq.next_element::<OnceEach>()?.is_some() {}
        Ok(OnceEach)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OnceEach, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "names the key {} twice",
                    serde_json::Value::String(key)
                )));
            }
            map.next_value::<OnceEach>()?;
        }
        Ok(OnceEach)
    }
}

/// The content of the message's only block, when that is a `json` code fence: nothing but
/// whitespace may stand outside the fence's source range (a link reference definition, which
/// the parser reports as no event, counts as something).
fn fenced(text: &str) -> std::result::Result<String, String> {
    use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
    let mut depth = 0usize;
    let mut fence: Option<std::ops::Range<usize>> = None;
    let mut code = String::new();
    let mut in_json = false;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0
                    && fence.is_none()
                    && let Tag::CodeBlock(CodeBlockKind::Fenced(info)) = &tag
                    && info.split_whitespace().next() == Some("json")
                {
                    in_json = true;
                    fence = Some(range.clone());
                }
                depth += 1;
            }
            Event::End(end) => {
                depth = depth.saturating_sub(1);
                if depth == 0 && matches!(end, TagEnd::CodeBlock) {
                    in_json = false;
                }
            }
            Event::Text(t) if in_json => code.push_str(&t),
            _ => {}
        }
    }
    let Some(range) = fence else {
        return Err("the report is not a JSON object: it must be the object itself, or one ```json fence holding it, and nothing else".into());
    };
    if !text[..range.start].trim().is_empty() || !text[range.end..].trim().is_empty() {
        return Err("the report holds text besides its ```json fence; send only the object".into());
    }
    Ok(code)
}

/// The first `$ref` or `$dynamicRef` that does not point inside the schema itself (`#…`).
fn outside_reference(schema: &Value) -> Option<String> {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                if matches!(key.as_str(), "$ref" | "$dynamicRef")
                    && let Some(target) = value.as_str()
                    && !target.starts_with('#')
                {
                    return Some(target.to_string());
                }
                if let Some(found) = outside_reference(value) {
                    return Some(found);
                }
            }
            None
        }
        Value::Array(items) => items.iter().find_map(outside_reference),
        _ => None,
    }
}

/// A JSON pointer as shown: the root is `/`.
fn pointer(path: &str) -> String {
    if path.is_empty() {
        "/".into()
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> Contract {
        Contract::load(&Source::Default, Path::new("/")).unwrap()
    }

    const GOOD: &str = r#"{"status":"done","answer":"There is one file.","evidence":["ls: 1 entry"],"changed":[],"open_questions":[],"tokens_used":1200}"#;

    #[test]
    fn a_report_of_the_default_shape_passes_bare_or_fenced() {
        let contract = default();
        assert_eq!(contract.check(GOOD, 2000), Ok(()));
        assert_eq!(
            contract.check(&format!("```json\n{GOOD}\n```\n"), 2000),
            Ok(())
        );
    }

    #[test]
    fn the_first_violation_names_its_pointer() {
        let contract = default();
        let bad = GOOD.replace("\"done\"", "\"finished\"");
        let v = contract.check(&bad, 2000).unwrap_err();
        assert!(v.line.contains("at /status"), "{}", v.line);
        assert!(v.shape.contains("\"open_questions\""), "{}", v.shape);
        let prose = contract.check("Report: one file.", 2000).unwrap_err();
        assert!(prose.line.contains("not a JSON object"), "{}", prose.line);
        let extra = contract
            .check(&format!("Here:\n```json\n{GOOD}\n```"), 2000)
            .unwrap_err();
        assert!(extra.line.contains("besides"), "{}", extra.line);
        // A link reference definition is no event of the parser, but it is text all the same.
        for after in ["\n\n[the tests all pass]: <x>", "\n```json\n{}\n```"] {
            let v = contract
                .check(&format!("```json\n{GOOD}\n```{after}"), 2000)
                .unwrap_err();
            assert!(v.line.contains("besides"), "{after:?}: {}", v.line);
        }
    }

    #[test]
    fn blocked_needs_an_open_question() {
        let contract = default();
        let blocked = GOOD.replace("\"done\"", "\"blocked\"");
        assert!(contract.check(&blocked, 2000).is_err());
        let asked = blocked.replace(
            "\"open_questions\":[]",
            "\"open_questions\":[\"which db?\"]",
        );
        assert_eq!(contract.check(&asked, 2000), Ok(()));
    }

    #[test]
    fn an_overlong_report_is_refused_before_it_is_parsed() {
        let long = GOOD.replace("There is one file.", &"word ".repeat(3000));
        let v = default().check(&long, 2000).unwrap_err();
        assert!(
            v.line.contains("tokens, over the contract's 2000"),
            "{}",
            v.line
        );
    }

    #[test]
    fn the_default_contract_is_a_valid_schema() {
        let schema: Value = serde_json::from_str(DEFAULT_SCHEMA).unwrap();
        assert!(jsonschema::meta::validate(&schema).is_ok());
    }

    #[test]
    fn a_contract_that_is_not_a_schema_or_reaches_out_is_refused() {
        let file = || Source::File(PathBuf::from("c.json"));
        let not = Contract::compile(serde_json::json!([1]), file()).err();
        assert!(not.unwrap().to_string().contains("not a JSON Schema"));
        let bad = Contract::compile(serde_json::json!({"type": 7}), file()).err();
        assert!(bad.unwrap().to_string().contains("not a valid JSON Schema"));
        let remote = Contract::compile(
            serde_json::json!({"$ref": "https://example.invalid/s.json"}),
            file(),
        )
        .err();
        assert!(
            remote.unwrap().to_string().contains("cannot be used"),
            "a remote $ref is refused"
        );
    }
}
