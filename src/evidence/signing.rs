//! Signed markers (SPEC §5, issue 9): an Ed25519 signature, by a key the agent never sees, over
//! the canonical JSON of every other field of a payload. Verified with public keys that are
//! safe to commit. The cryptography is ed25519-dalek's; vigil only encodes and compares.

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

use crate::error::{Error, Result};
use crate::evidence::payload::{Payload, Signature};
use crate::state::project::Project;
use crate::state::protected;
use crate::sys::atomic;
use crate::sys::digest;
use crate::sys::digest::{hex, sha256_hex};
use crate::sys::files;

const SECRET_TAG: &str = "vigil-ed25519-secret";
const PUBLIC_TAG: &str = "vigil-ed25519-public";
pub(crate) const ALG: &str = "ed25519";

pub(crate) struct SignKey {
    key: SigningKey,
}

#[derive(Clone)]
pub(crate) struct VerifyKey {
    pub id: String,
    key: VerifyingKey,
}

fn key_id(public: &VerifyingKey) -> String {
    sha256_hex(public.as_bytes())[..16].to_string()
}

/// Exactly 2N lowercase hex digits, nothing around them: one spelling per value.
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// `keygen --out DIR`: `DIR/vigil-marker.key` (0600, never overwritten) and
/// `DIR/vigil-marker.pub`. Returns both paths.
pub(crate) fn keygen(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::io::Write;
    fs_err::create_dir_all(dir).map_err(Error::fs)?;
    let secret_path = dir.join("vigil-marker.key");
    let public_path = dir.join("vigil-marker.pub");
    for path in [&secret_path, &public_path] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::input(format!(
                "{} exists; keygen never overwrites a key (move it away to make a new pair)",
                path.display()
            )));
        }
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| Error::Io(format!("no randomness for a key: {e}")))?;
    let public = SigningKey::from_bytes(&seed).verifying_key();
    // Each file is written whole to a temp file, then linked into place, which fails rather
    // than replace anything: a failure leaves no half key, and nothing is ever overwritten.
    let place = |path: &Path, text: String, mode: u32| -> Result<()> {
        // Made owner-only (tempfile's 0600), then given `mode`: never more open than that.
        let mut temp = tempfile::Builder::new()
            .prefix(".vigil-key.")
            .tempfile_in(dir)
            .and_then(|temp| files::set_mode(temp.as_file(), mode).map(|()| temp))
            .map_err(|e| Error::io("create a key in", dir, &e))?;
        temp.write_all(text.as_bytes())
            .and_then(|()| temp.as_file().sync_all())
            .map_err(|e| Error::io("write", path, &e))?;
        fs_err::hard_link(temp.path(), path).map_err(Error::fs)
    };
    place(
        &secret_path,
        format!("{SECRET_TAG} {}\n", hex(&seed)),
        0o600,
    )?;
    if let Err(e) = place(
        &public_path,
        format!("{PUBLIC_TAG} {}\n", hex(public.as_bytes())),
        0o644,
    ) {
        let _ = std::fs::remove_file(&secret_path);
        return Err(e);
    }
    Ok((secret_path, public_path))
}

fn read_tagged(path: &Path, tag: &str) -> Result<String> {
    let file = files::open_regular(path).map_err(|e| Error::io("read", path, &e))?;
    let bytes = files::read_capped(file, 4096, "the key", path)?;
    let text = String::from_utf8_lossy(&bytes);
    text.trim()
        .strip_prefix(tag)
        .map(|rest| rest.trim().to_string())
        .ok_or_else(|| {
            Error::input(format!(
                "{} is not a vigil key ({tag} …); make one with `marker-writer keygen`",
                path.display()
            ))
        })
}

pub(crate) fn load_sign_key(path: &Path) -> Result<SignKey> {
    let seed = unhex::<32>(&read_tagged(path, SECRET_TAG)?)
        .ok_or_else(|| Error::input(format!("{}: the secret key is damaged", path.display())))?;
    Ok(SignKey {
        key: SigningKey::from_bytes(&seed),
    })
}

pub(crate) fn load_verify_key(path: &Path) -> Result<VerifyKey> {
    let bytes = unhex::<32>(&read_tagged(path, PUBLIC_TAG)?)
        .ok_or_else(|| Error::input(format!("{}: the public key is damaged", path.display())))?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|_| Error::input(format!("{}: not an Ed25519 public key", path.display())))?;
    Ok(VerifyKey {
        id: key_id(&key),
        key,
    })
}

/// The path a flag gives, else a non-empty environment variable's.
fn flag_or_env(flag: Option<&Path>, var: &str) -> Option<PathBuf> {
    flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Where the sign key is: `--sign-key`, else `$VIGIL_SIGN_KEY`, else none (hidden from a
/// confined command).
pub(crate) fn sign_key_path(flag: Option<&Path>) -> Option<PathBuf> {
    flag_or_env(flag, "VIGIL_SIGN_KEY")
}

/// The sign key to use: `--sign-key`, else `$VIGIL_SIGN_KEY`, else none.
pub(crate) fn sign_key(flag: Option<&Path>) -> Result<Option<SignKey>> {
    let path = flag_or_env(flag, "VIGIL_SIGN_KEY");
    path.map(|p| load_sign_key(&p)).transpose()
}

/// The keys a marker's signature is checked against (SPEC §9).
#[derive(Clone, Default)]
pub(crate) struct Trust {
    /// The pinned key (`--verify-key`, `$VIGIL_VERIFY_KEY`), or the keys of the protected
    /// state: this project's and every project's. Empty: markers need no signature.
    pub keys: Vec<VerifyKey>,
    /// Key files in the project's `.vigil/trusted-keys/`: never trusted, since the agent can
    /// write there, but named in a denial so a human can trust one on purpose.
    pub planted: Vec<PathBuf>,
}

impl Trust {
    /// Why a payload's signature does not count, if it does not.
    pub(crate) fn check(&self, payload: &Payload) -> std::result::Result<(), String> {
        if self.keys.is_empty() {
            return match self.planted.first() {
                None => Ok(()),
                Some(file) => Err(format!(
                    "{} is inside the project, where the agent can write, so it is not trusted; if a human put it there, run `marker-writer trust {}`",
                    file.display(),
                    file.display()
                )),
            };
        }
        check(&self.keys, payload).map_err(|why| {
            let signer = payload.signature.as_ref().map(|s| s.key_id.as_str());
            match self.planted.iter().find(|file| {
                load_verify_key(file).is_ok_and(|key| Some(key.id.as_str()) == signer)
            }) {
                Some(file) => format!(
                    "{why}; it is in {}, inside the project, where the agent can write: if a human put it there, run `marker-writer trust {}`",
                    file.display(),
                    file.display()
                ),
                None => why,
            }
        })
    }
}

/// The trusted keys. `--verify-key` (or `$VIGIL_VERIFY_KEY`) pins one key, and then only it.
/// Otherwise the keys `marker-writer trust` put in the protected state, for this project (found
/// from every directory the project's top could be said to be: `protected::key_dirs`) and for
/// all. Keys in the project's own `.vigil/trusted-keys/` are never among them. A
/// directory that exists but cannot be read is an error (the gate denies), never "no keys".
pub(crate) fn trusted_keys(project: &Project, flag: Option<&Path>) -> Result<Trust> {
    let planted = key_files(&project.state.join("trusted-keys"))?;
    if let Some(path) = flag_or_env(flag, "VIGIL_VERIFY_KEY") {
        return Ok(Trust {
            keys: vec![load_verify_key(&path)?],
            planted,
        });
    }
    let mut keys: Vec<VerifyKey> = Vec::new();
    let dirs = protected::key_dirs(&project.dir)
        .into_iter()
        .chain(protected::global_keys());
    for dir in dirs {
        for path in key_files(&dir)? {
            let key = load_verify_key(&path)?;
            if !keys.iter().any(|k| k.id == key.id) {
                keys.push(key);
            }
        }
    }
    Ok(Trust { keys, planted })
}

/// The `*.pub` files of a directory, sorted; none when it does not exist.
fn key_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read the trusted keys in", dir, &e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Error::io("read the trusted keys in", dir, &e))?
            .path();
        if path.extension().is_some_and(|x| x == "pub") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// `marker-writer trust KEYFILE [--global]`: copies a public key into the protected state, for
/// this project or for all. Returns the key's id and where it went.
pub(crate) fn trust(project: &Project, file: &Path, global: bool) -> Result<(String, PathBuf)> {
    let key = load_verify_key(file)?;
    let dir = if global {
        protected::global_keys()
    } else {
        protected::project_keys(&project.dir)
    }
    .ok_or_else(|| {
        Error::input("no state home: set $VIGIL_STATE_HOME, $XDG_STATE_HOME or $HOME")
    })?;
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    if !global && let Some(project_dir) = dir.parent() {
        protected::mark_top(project_dir, &protected::state_top(&project.dir));
    }
    let path = dir.join(format!("{}.pub", key.id));
    let text = format!("{PUBLIC_TAG} {}\n", hex(key.key.as_bytes()));
    atomic::write_atomic(&path, text.as_bytes(), 0o644)
        .map_err(|e| Error::io("write", &path, &e))?;
    Ok((key.id, path))
}

/// The bytes a signature covers: the canonical JSON of the payload without its signature.
fn signed_bytes(payload: &Payload) -> Vec<u8> {
    let mut unsigned = payload.clone();
    unsigned.signature = None;
    let value = serde_json::to_value(&unsigned).expect("a payload serializes");
    digest::canonical_json(&value).into_bytes()
}

/// Signs `payload` in place.
pub(crate) fn sign(key: &SignKey, payload: &mut Payload) {
    let sig = key.key.sign(&signed_bytes(payload));
    payload.signature = Some(Signature {
        alg: ALG.into(),
        key_id: key_id(&key.key.verifying_key()),
        sig: hex(&sig.to_bytes()),
    });
}

/// Checks `payload`'s signature against `keys`; the reason when it does not hold.
fn check(keys: &[VerifyKey], payload: &Payload) -> std::result::Result<(), String> {
    let Some(signature) = &payload.signature else {
        return Err("the marker is not signed, and a verify key is configured".into());
    };
    if signature.alg != ALG {
        return Err(format!(
            "signature algorithm {:?} is not {ALG}",
            signature.alg
        ));
    }
    let Some(key) = keys.iter().find(|k| k.id == signature.key_id) else {
        return Err(format!(
            "signed by key {}, which is not a trusted key",
            signature.key_id
        ));
    };
    let bytes = unhex::<64>(&signature.sig).ok_or("the signature is damaged")?;
    key.key
        .verify_strict(
            &signed_bytes(payload),
            &ed25519_dalek::Signature::from_bytes(&bytes),
        )
        .map_err(|_| format!("the signature by key {} does not match the payload", key.id))
}
