//! Where a sync goes: a remote of the project's repository by name (its URL read from the
//! config as a plain file, nothing in it run), or a URL; and whether git reaches it by running
//! its other end on this machine.

use crate::error::{Error, Result};
use crate::evidence::notes::redact;
use crate::evidence::notes::repo::run_git;
use crate::state::project::Project;
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::time::Deadline;

/// Where a sync goes: a URL, and whether it was read from the project's config (a remote's
/// name), which the agent writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Remote {
    pub url: String,
    pub from_config: bool,
}

/// Where a sync goes: a remote of the project's repository by name, or a URL. Read within
/// `deadline`.
pub(crate) fn remote_url(project: &Project, remote: &str, deadline: Deadline) -> Result<Remote> {
    let (url, from_config) = remote_url_unchecked(project, remote, deadline)?;
    // git reads a URL that starts with `-` as an option (`--upload-pack=CMD` runs CMD).
    if url.starts_with('-') || url.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "the remote {:?} names {:?}, which is not a URL; refused",
            redact(remote),
            redact(&url)
        )));
    }
    Ok(Remote { url, from_config })
}

/// The most of the project's git config read for a remote's URL.
const MAX_CONFIG: u64 = 1 << 20;

fn remote_url_unchecked(
    project: &Project,
    remote: &str,
    deadline: Deadline,
) -> Result<(String, bool)> {
    let is_name = !remote.is_empty()
        && remote
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !is_name {
        return Ok((remote.to_string(), false));
    }
    let repository = Repository::locate(&project.dir)?;
    // A linked worktree keeps its config in the common directory.
    // Read as the config is: a FIFO or /dev/zero there is refused, not waited on or read on.
    let commondir = repository.git_dir.join("commondir");
    let common = match files::open_regular(&commondir) {
        Ok(file) => {
            let bytes = files::read_capped(file, 4096, "the commondir file", &commondir)?;
            repository
                .git_dir
                .join(String::from_utf8_lossy(&bytes).trim())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => repository.git_dir.clone(),
        Err(e) => return Err(Error::io("read", &commondir, &e)),
    };
    let config = common.join("config");
    // Opened here (a FIFO or a device in its place is refused, not waited on), handed to git
    // on stdin, and read as a plain file of settings: nothing in it is run or included.
    let file = files::open_regular(&config).map_err(|e| Error::io("read", &config, &e))?;
    let bytes = files::read_capped(file, MAX_CONFIG, "the repository's config", &config)?;
    let ran = run_git(
        None,
        &[
            "config",
            "--file",
            "-",
            "--no-includes",
            "--get",
            &format!("remote.{remote}.url"),
        ],
        Some(bytes),
        deadline,
        MAX_CONFIG as usize,
        None,
    );
    let url = match ran {
        Ok(ran) if ran.status.success() => String::from_utf8_lossy(&ran.stdout).trim().to_string(),
        Ok(_) => String::new(),
        Err(e) => return Err(e),
    };
    if url.is_empty() {
        return Err(Error::input(format!(
            "the repository has no remote {remote:?} ({}); name another with --remote NAME or URL",
            config.display()
        )));
    }
    Ok((url, true))
}

/// Whether git reaches `url` by running its other end on this machine (a path, or `file://`):
/// then that repository's hooks run as you when it is pushed to.
pub(crate) fn is_local(url: &str) -> bool {
    if url.starts_with("file:") {
        return true;
    }
    if url.contains("://") {
        return false;
    }
    // `host:path` is ssh; a `/` before the first `:` makes it a path.
    url.find(':').is_none_or(|colon| url[..colon].contains('/'))
}
