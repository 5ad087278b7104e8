//! Git's object ids, computed as git computes them (SPEC §5): a blob is `blob <len>\0<bytes>`,
//! a tree is `tree <len>\0` then its entries sorted as git sorts them, each hashed with SHA-1.
//!
//! The SHA-1 is sha1dc, the collision-detecting SHA-1 that git and gitoxide use: a content
//! built to collide (the chosen-prefix attack, "SHA-1 is a Shambles") is refused, never given
//! the id of the content it imitates. It costs about 11% of plain SHA-1's speed (SECURITY.md).

use crate::error::{Error, Result};
use crate::sys::digest;

pub(crate) type ObjectId = [u8; 20];

/// What a tree entry is, by git's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    File,
    Executable,
    Symlink,
}

impl Mode {
    fn octal(self) -> &'static [u8] {
        match self {
            Mode::File => b"100644",
            Mode::Executable => b"100755",
            Mode::Symlink => b"120000",
        }
    }
}

/// A blob's id, hashed as its bytes arrive: the length is known before the first byte.
pub(crate) struct BlobHasher {
    hasher: sha1dc::Hasher,
    expected: u64,
    seen: u64,
}

impl BlobHasher {
    pub(crate) fn new(len: u64) -> BlobHasher {
        let mut hasher = sha1dc::Hasher::new();
        hasher.update(format!("blob {len}\0").as_bytes());
        BlobHasher {
            hasher,
            expected: len,
            seen: 0,
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        self.hasher.update(bytes);
    }

    /// The id, or `None` when the bytes were not as many as announced (the file changed while
    /// it was read). A collision attack is an error.
    pub(crate) fn finish(self, what: &str) -> Result<Option<ObjectId>> {
        if self.seen != self.expected {
            return Ok(None);
        }
        digest(self.hasher, what).map(Some)
    }
}

pub(crate) fn blob_id(bytes: &[u8]) -> Result<ObjectId> {
    let mut hasher = BlobHasher::new(bytes.len() as u64);
    hasher.update(bytes);
    Ok(hasher.finish("a symlink")?.expect("every byte was hashed"))
}

fn digest(hasher: sha1dc::Hasher, what: &str) -> Result<ObjectId> {
    hasher.finalize().map(Into::into).map_err(|_| {
        Error::input(format!(
            "{what} holds a SHA-1 collision attack; its content cannot be named by a git id"
        ))
    })
}

/// The id of the tree holding `files`: (path, mode, blob id), the paths `/`-separated bytes
/// (as in the index) and sorted as bytes, which is git's order (a directory sorts as if its
/// name ended with `/`, and `/` sorts before every byte a name may hold after it but `-` and
/// `.`, which come before it either way). Directories with no file are no trees.
pub(crate) fn tree_id<'a>(
    files: impl IntoIterator<Item = (&'a [u8], Mode, ObjectId)>,
) -> Result<ObjectId> {
    // The directories open from the root down to the current one, each with where its name
    // ends in `current` and the body of its tree so far.
    let mut open: Vec<(usize, Vec<u8>)> = vec![(0, Vec::new())];
    let mut current: &'a [u8] = &[];
    for (path, mode, id) in files {
        let (dir, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(at) => (&path[..at], &path[at + 1..]),
            None => (&path[..0], path),
        };
        // Close the directories this path is not in, from the deepest up.
        while !within(dir, current) {
            close(&mut open, &mut current)?;
        }
        // Open the ones it is in, below the current one.
        while current.len() < dir.len() {
            let start = if current.is_empty() {
                0
            } else {
                current.len() + 1
            };
            let end = dir[start..]
                .iter()
                .position(|b| *b == b'/')
                .map_or(dir.len(), |n| start + n);
            open.push((end, Vec::new()));
            current = &dir[..end];
        }
        let body = &mut open.last_mut().expect("the root is open").1;
        entry(body, mode.octal(), name, &id);
    }
    while open.len() > 1 {
        close(&mut open, &mut current)?;
    }
    let (_, root) = open.pop().expect("the root is open");
    if root.is_empty() {
        return Ok(EMPTY_TREE);
    }
    object(b"tree", &root)
}

/// Whether directory `dir` is `open` or inside it.
fn within(dir: &[u8], open: &[u8]) -> bool {
    open.is_empty() || dir == open || (dir.starts_with(open) && dir[open.len()] == b'/')
}

/// Ends the innermost open directory: its tree is an entry of its parent (when it holds
/// anything), and `current` is the parent's path.
fn close(open: &mut Vec<(usize, Vec<u8>)>, current: &mut &[u8]) -> Result<()> {
    let (end, body) = open.pop().expect("a directory below the root is open");
    let start = open.last().map_or(
        0,
        |(parent_end, _)| {
            if *parent_end == 0 { 0 } else { parent_end + 1 }
        },
    );
    let name = &current[start..end];
    if !body.is_empty() {
        let id = object(b"tree", &body)?;
        let parent = &mut open.last_mut().expect("the root stays open").1;
        entry(parent, b"40000", name, &id);
    }
    *current = &current[..open.last().map_or(0, |(parent_end, _)| *parent_end)];
    Ok(())
}

fn entry(body: &mut Vec<u8>, mode: &[u8], name: &[u8], id: &ObjectId) {
    body.extend_from_slice(mode);
    body.push(b' ');
    body.extend_from_slice(name);
    body.push(0);
    body.extend_from_slice(id);
}

fn object(kind: &[u8], body: &[u8]) -> Result<ObjectId> {
    let mut hasher = sha1dc::Hasher::new();
    hasher.update(kind);
    hasher.update(format!(" {}\0", body.len()).as_bytes());
    hasher.update(body);
    digest(hasher, "a tree")
}

/// `git hash-object -t tree /dev/null`.
const EMPTY_TREE: ObjectId = [
    0x4b, 0x82, 0x5d, 0xc6, 0x42, 0xcb, 0x6e, 0xb9, 0xa0, 0x60, 0xe5, 0x4b, 0xf8, 0xd6, 0x92, 0x88,
    0xfb, 0xee, 0x49, 0x04,
];

pub(crate) fn hex(id: &ObjectId) -> String {
    digest::hex(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_of(files: &[(&[u8], Mode, ObjectId)]) -> String {
        let mut files = files.to_vec();
        files.sort_by(|a, b| a.0.cmp(b.0));
        hex(&tree_id(files).unwrap())
    }

    #[test]
    fn ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            hex(&blob_id(b"hello\n").unwrap()),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(tree_of(&[]), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        // `git init; echo hello | tee a >b/c; git add -A; git write-tree`
        let hello = blob_id(b"hello\n").unwrap();
        assert_eq!(
            tree_of(&[(b"b/c", Mode::File, hello), (b"a", Mode::File, hello)]),
            "3fd02c6c4f2e5f3fe2792585daa347b65f403f76"
        );
    }

    #[test]
    fn a_directory_sorts_as_if_its_name_ended_with_a_slash() {
        let hello = blob_id(b"hello\n").unwrap();
        // `git init; echo hello | tee a.b a- >a/c; chmod +x a-; git add -A; git write-tree`:
        // `a-` < `a.b` < `a/` in git's order, where plain names would put `a` first.
        assert_eq!(
            tree_of(&[
                (b"a.b", Mode::File, hello),
                (b"a/c", Mode::File, hello),
                (b"a-", Mode::Executable, hello),
            ]),
            "f03289159fe2606e9fc4f262c541d6456c50ab3c"
        );
    }
}
