//! Files the tests read: the repository's own, fixtures and samples, JSON and its schemas.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub fn fixture(relative: &str) -> PathBuf {
    repo_path("tests/fixtures").join(relative)
}

pub fn read_fixture(relative: &str) -> String {
    std::fs::read_to_string(fixture(relative)).unwrap()
}

/// A sample hook payload with fields replaced (or removed, with `Value::Null`).
pub fn sample_payload(name: &str, changes: &[(&str, Value)]) -> String {
    let mut payload: Value =
        serde_json::from_str(&read_fixture(&format!("samples/{name}"))).unwrap();
    let object = payload.as_object_mut().unwrap();
    for (key, value) in changes {
        if value.is_null() {
            object.remove(*key);
        } else {
            object.insert((*key).to_string(), value.clone());
        }
    }
    payload.to_string()
}

/// `path` is itself a symbolic link (not followed).
pub fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_symlink()
}

/// Writes a Codex `config.toml` at `config`: `settings`, then the table that trusts `project`
/// (by its canonical path, as Codex keys it).
pub fn write_codex_config_trusting(config: &Path, settings: &str, project: &Path) {
    let project = std::fs::canonicalize(project).unwrap();
    std::fs::write(
        config,
        format!(
            "{settings}[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            project.display()
        ),
    )
    .unwrap();
}

/// Writes `contents` at `path`, making its directories first.
pub fn write_file(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// The string `field` of each object in the JSON array `items`.
pub fn fields_of<'a>(items: &'a Value, field: &str) -> Vec<&'a str> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap())
        .collect()
}

/// A JSON file, parsed.
pub fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The `additionalContext` of a hook's output (`hookSpecificOutput`), which must be there.
pub fn additional_context(output: &Value) -> &str {
    output["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
}

/// A hand edit of the settings file `settings`: `extra` appended to the command of its first
/// Stop handler.
pub fn append_to_stop_command(settings: &Path, extra: &str) {
    let mut value = json_of(settings);
    let command = value["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    value["hooks"]["Stop"][0]["hooks"][0]["command"] = Value::String(format!("{command} {extra}"));
    std::fs::write(settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// Validates a value against a schema in `schemas/`, panicking with every error.
pub fn assert_valid(schema_name: &str, instance: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(schema_name);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{instance} does not match {schema_name}: {errors:?}"
    );
}

/// The entries of `dir` (not below it) whose name ends `.EXTENSION`, sorted; none where `dir`
/// is missing.
pub fn files_ending(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// Every file below `dir`, as paths relative to it, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Makes a FIFO at `path` (with `mkfifo`, which must succeed).
pub fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Makes `path` executable by its owner and everyone (0755).
#[cfg(unix)]
pub fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
