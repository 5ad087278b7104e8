//! Reading and hashing a file of the working tree, one thread's worth (its buffer): a file's
//! bytes read once, hashed as a blob and, for a snapshot, copied as they are read; a link's
//! target hashed, and in a snapshot made again if it stays inside the tree.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error;
use crate::error::{Error, Result};
use crate::evidence::subject::tree::{self, BlobHasher, Mode, ObjectId};
use crate::evidence::subject::worktree::index::file_mode;
use crate::evidence::subject::worktree::{Hashed, Options, warm};
use crate::sys::files;
use crate::sys::paths;

/// Files are read in pieces of this size, so a large one never sits in memory whole.
const CHUNK: usize = 256 * 1024;

/// Reads and hashes files, one thread's worth: its buffer, and the snapshot it copies to.
pub(super) struct Reader<'a> {
    buffer: Vec<u8>,
    options: &'a Options<'a>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(options: &'a Options<'a>) -> Reader<'a> {
        Reader {
            buffer: vec![0; CHUNK],
            options,
        }
    }

    /// A tracked path the walk did not reach. Gone (or behind a symlink, where git no longer
    /// looks) leaves it out; a special file denies, as `git add` fails on one.
    pub(super) fn tracked(&mut self, top: &Path, relative: &[u8]) -> Result<Option<Hashed>> {
        let mut at = top.to_path_buf();
        let mut parts = relative.split(|b| *b == b'/').peekable();
        while let Some(part) = parts.next() {
            at.push(paths::os_str(part));
            let Ok(meta) = std::fs::symlink_metadata(&at) else {
                return Ok(None);
            };
            if parts.peek().is_some() {
                if !meta.is_dir() {
                    return Ok(None);
                }
                continue;
            }
            if meta.is_dir() {
                return Ok(None);
            }
            if !meta.is_file() && !meta.file_type().is_symlink() {
                return Err(Error::input(format!(
                    "{} is tracked but is now a FIFO, socket or device; git cannot add it, and the worktree subject cannot hash it",
                    String::from_utf8_lossy(relative)
                )));
            }
            let shown = || String::from_utf8_lossy(relative).into_owned();
            let source = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&at).map_err(|e| unreadable(&shown(), &e))?;
                Source::Link(paths::into_bytes(target.into_os_string()))
            } else {
                Source::File(files::open_no_follow(&at).map_err(|e| unreadable(&shown(), &e))?)
            };
            return self.hash(source, relative.to_vec());
        }
        Ok(None)
    }

    /// Where a file goes in the snapshot (in a warm copy, in place of whatever is there).
    fn copy_path(&self, snapshot: &Path, relative: &[u8]) -> Result<PathBuf> {
        if self.options.warm.is_some() {
            warm::place(snapshot, relative)
        } else {
            copy_path(snapshot, relative)
        }
    }

    pub(super) fn hash(&mut self, source: Source, relative: Vec<u8>) -> Result<Option<Hashed>> {
        let shown = || String::from_utf8_lossy(&relative).into_owned();
        let (mode, id) = match source {
            Source::Link(target) => {
                if let Some(snapshot) = self.options.snapshot {
                    // In the copy, a link out of the tree would reach the live file.
                    if leaves_the_tree(&relative, &target) {
                        return Err(Error::input(format!(
                            "{} is a symlink to {}, outside the tree: in a snapshot the command would read the live file, which no marker vouches for; make it relative and inside, or run in place",
                            shown(),
                            String::from_utf8_lossy(&target)
                        )));
                    }
                    let copy = self.copy_path(snapshot, &relative)?;
                    files::symlink(&paths::os_str(&target), &copy)
                        .map_err(|e| Error::io("write", &copy, &e))?;
                }
                (Mode::Symlink, tree::blob_id(&target)?)
            }
            Source::File(file) => match self.file(file, &relative)? {
                Some(found) => found,
                // Swapped for something else between the walk and the read.
                None => {
                    return Err(Error::input(format!(
                        "{} changed while it was hashed; hash again when the worktree is still",
                        shown()
                    )));
                }
            },
        };
        Ok(Some(Hashed {
            path: relative,
            mode,
            id,
            changed: false,
            stat: None,
        }))
    }

    /// A regular file's mode and blob id, read without copying it anywhere; `None` when it
    /// changed under the read (the caller then reads it again, copying).
    pub(super) fn probe(
        &mut self,
        file: &mut File,
        relative: &[u8],
    ) -> Result<Option<(Mode, ObjectId)>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let meta = file.metadata().map_err(|e| unreadable(&shown(), &e))?;
        if !meta.is_file() || meta.len() > self.options.max_file_size {
            return Ok(None);
        }
        let mode = file_mode(files::owner_may_execute(&meta));
        Ok(self
            .hash_bytes(file, meta.len(), None, relative)?
            .map(|id| (mode, id)))
    }

    /// A regular file's mode and blob id, from one read of its bytes; `None` when it changed
    /// under the read.
    fn file(&mut self, mut file: File, relative: &[u8]) -> Result<Option<(Mode, ObjectId)>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let meta = file.metadata().map_err(|e| unreadable(&shown(), &e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let size = meta.len();
        if size > self.options.max_file_size {
            return Err(Error::input(format!(
                "{} is {size} bytes, over the {} of --max-file-size; raise it, or ignore the file",
                shown(),
                self.options.max_file_size
            )));
        }
        let mode = file_mode(files::owner_may_execute(&meta));
        let mut copy = match self.options.snapshot {
            Some(snapshot) => {
                let path = self.copy_path(snapshot, relative)?;
                let perms = if mode == Mode::Executable {
                    0o755
                } else {
                    0o644
                };
                Some(files::create_new(&path, perms).map_err(|e| Error::io("write", &path, &e))?)
            }
            None => None,
        };
        Ok(self
            .hash_bytes(&mut file, size, copy.as_mut(), relative)?
            .map(|id| (mode, id)))
    }

    /// The blob id of the `size` bytes `file` holds, each written to `copy` as it is read;
    /// `None` when they were not `size` bytes (the file changed under the read).
    fn hash_bytes(
        &mut self,
        file: &mut File,
        size: u64,
        mut copy: Option<&mut File>,
        relative: &[u8],
    ) -> Result<Option<ObjectId>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let mut hasher = BlobHasher::new(size);
        let mut left = size;
        loop {
            // One byte more than is left: a read that comes short of it is at the end, so a
            // small file costs one read, and one that grew is still seen.
            let ask = usize::try_from(left.saturating_add(1)).map_or(CHUNK, |n| n.min(CHUNK));
            let n = match file.read(&mut self.buffer[..ask]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(unreadable(&shown(), &e)),
            };
            left = left.saturating_sub(n as u64);
            hasher.update(&self.buffer[..n]);
            if let Some(copy) = copy.as_mut() {
                copy.write_all(&self.buffer[..n]).map_err(|e| {
                    Error::Io(format!("cannot copy {} to the snapshot: {e}", shown()))
                })?;
            }
            if n < ask && left == 0 {
                break;
            }
        }
        hasher.finish(&shown())
    }
}

/// Whether a symlink at `relative` (from the top) with `target` points outside the tree, read
/// as written: absolute, or climbing above the top with `..`.
fn leaves_the_tree(relative: &[u8], target: &[u8]) -> bool {
    if target.first() == Some(&b'/') {
        return true;
    }
    let mut depth = relative.iter().filter(|b| **b == b'/').count();
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." if depth == 0 => return true,
            b".." => depth -= 1,
            _ => depth += 1,
        }
    }
    false
}

/// What a path holds: a file opened for reading, or a symlink's target.
pub(super) enum Source {
    File(File),
    Link(Vec<u8>),
}

pub(super) fn unreadable(shown: &str, e: &std::io::Error) -> Error {
    Error::input(format!(
        "cannot read {shown}: {}; the worktree subject hashes every file that is not ignored",
        error::plain_io(e)
    ))
}

/// Where a file goes in the snapshot; its directories are made on the way.
fn copy_path(snapshot: &Path, relative: &[u8]) -> Result<PathBuf> {
    let path = snapshot.join(paths::os_str(relative));
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(Error::fs)?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_leaves_the_tree_when_absolute_or_climbing_above_the_top() {
        assert!(leaves_the_tree(b"a", b"/etc/passwd"));
        assert!(leaves_the_tree(b"a", b"../x"));
        assert!(leaves_the_tree(b"d/a", b"../../x"));
        assert!(leaves_the_tree(b"d/a", b"x/../../../y"));
        assert!(!leaves_the_tree(b"d/a", b"../x"));
        assert!(!leaves_the_tree(b"a", b"./b"));
        assert!(!leaves_the_tree(b"d/e/a", b"../../f/g"));
    }
}
