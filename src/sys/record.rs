//! A record that is rewritten on every Stop with one sync (SPEC P6, issue 14): two checksummed
//! slots in one file, each holding a sequence number and a whole copy of the record. A write
//! goes into the slot the current copy is not in, with `pwrite` and one `fdatasync`, never a
//! rename: a crash at any instant leaves the old copy or the new one, and a torn slot is told
//! by its checksum. Creating the file is the one atomic write (temp file, rename, directory
//! sync), done once.
//!
//! Slot layout: `VIGILR02`, the sequence number (u64 LE), the payload's length (u32 LE), four
//! zero bytes, the sha256 of sequence number, length and payload, then the payload.

use std::fs::File;
use std::io::{Read as _, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::sys::{atomic, files};

const MAGIC: &[u8; 8] = b"VIGILR02";
const HEADER: usize = 8 + 8 + 4 + 4 + 32;
/// Each slot's size: room for the longest loop prompt (16,000 characters, escaped in JSON)
/// and everything else a session records.
pub const SLOT: usize = 256 * 1024;
/// The largest payload a slot holds.
pub(crate) const MAX_PAYLOAD: usize = SLOT - HEADER;

/// What reading a record found.
#[derive(Debug)]
pub enum Read {
    /// No such file.
    Missing,
    /// The newest whole copy, and its sequence number.
    Found { payload: Vec<u8>, seq: u64 },
    /// A file is there, but no slot holds a whole copy (or it is not a regular file).
    Corrupt(String),
    /// The file could not be read (an I/O error, a refused open): nothing is known of what it
    /// holds, so neither copy may be taken for the newest, nor the file for a damaged one
    /// (issue 44).
    Failed(std::io::Error),
}

/// Reads the newest whole copy. The file is opened never through a symlink and never waiting
/// on a FIFO.
pub fn read(path: &Path) -> Read {
    let file = match files::open_no_follow(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Missing,
        // A link in the record's place is no record vigil wrote (`open_no_follow` refuses it).
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Read::Corrupt("it is a symlink".into());
        }
        Err(e) => return Read::Failed(e),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() && meta.len() == 2 * SLOT as u64 => {}
        Ok(meta) if meta.is_file() => {
            return Read::Corrupt(format!(
                "it is {} bytes, not the {} of a record",
                meta.len(),
                2 * SLOT
            ));
        }
        Ok(_) => return Read::Corrupt("it is not a regular file".into()),
        Err(e) => return Read::Failed(e),
    }
    // Both slots read whole, or nothing is taken: an error on the newest must never make the
    // older copy look like the newest.
    let mut slots = Vec::with_capacity(2);
    for slot in 0..2 {
        match read_slot(&file, slot) {
            Ok(found) => slots.extend(found),
            Err(e) => return Read::Failed(e),
        }
    }
    let newest = slots.into_iter().max_by_key(|(seq, _)| *seq);
    match newest {
        Some((seq, payload)) => Read::Found { payload, seq },
        None => Read::Corrupt("neither of its two copies is whole".into()),
    }
}

/// The copy in `slot`: `Ok(None)` when it is not whole (torn, never written), `Err` when it
/// could not be read.
fn read_slot(file: &File, slot: usize) -> std::io::Result<Option<(u64, Vec<u8>)>> {
    let offset = (slot * SLOT) as u64;
    let mut header = [0u8; HEADER];
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut header)?;
    if &header[..8] != MAGIC || header[20..24] != [0; 4] {
        return Ok(None);
    }
    let seq = u64::from_le_bytes(header[8..16].try_into().expect("eight bytes"));
    let len = u32::from_le_bytes(header[16..20].try_into().expect("four bytes")) as usize;
    if len > MAX_PAYLOAD {
        return Ok(None);
    }
    let mut payload = vec![0u8; len];
    file.read_exact(&mut payload)?;
    Ok((digest(seq, &payload) == header[24..56]).then_some((seq, payload)))
}

fn digest(seq: u64, payload: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(seq.to_le_bytes());
    hasher.update((payload.len() as u32).to_le_bytes());
    hasher.update(payload);
    hasher.finalize().into()
}

fn slot_bytes(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&seq.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&digest(seq, payload));
    bytes.extend_from_slice(payload);
    bytes
}

/// Writes `payload` as copy number `seq` (one more than the copy read, or 1 for a new record).
/// An existing record takes it in the other slot with one `pwrite` and one `fdatasync`; a new
/// one is made whole and renamed into place.
pub fn write(path: &Path, seq: u64, payload: &[u8]) -> std::io::Result<()> {
    if payload.len() > MAX_PAYLOAD {
        return Err(std::io::Error::other(format!(
            "the record would be {} bytes, over the {MAX_PAYLOAD} a slot holds",
            payload.len()
        )));
    }
    let slot = (seq % 2) as usize;
    let bytes = slot_bytes(seq, payload);
    if seq == 1 || std::fs::symlink_metadata(path).is_err() {
        let mut image = vec![0u8; 2 * SLOT];
        image[slot * SLOT..slot * SLOT + bytes.len()].copy_from_slice(&bytes);
        return atomic::write_atomic(path, &image, 0o600);
    }
    let mut file = files::open_write_no_follow(path, false)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != 2 * SLOT as u64 {
        return Err(std::io::Error::other("it is not a record"));
    }
    file.seek(SeekFrom::Start((slot * SLOT) as u64))?;
    file.write_all(&bytes)?;
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: &Path) -> (u64, Vec<u8>) {
        match read(path) {
            Read::Found { payload, seq } => (seq, payload),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_newest_whole_copy_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rec");
        assert!(matches!(read(&path), Read::Missing));
        write(&path, 1, b"one").unwrap();
        assert_eq!(found(&path), (1, b"one".to_vec()));
        write(&path, 2, b"two").unwrap();
        write(&path, 3, b"three").unwrap();
        assert_eq!(found(&path), (3, b"three".to_vec()));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * SLOT as u64);
    }

    #[test]
    fn a_torn_copy_leaves_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rec");
        write(&path, 1, b"old").unwrap();
        write(&path, 2, b"new").unwrap();
        // Tear copy 2 (slot 0): any changed byte of it fails its checksum.
        let mut file = File::options().write(true).open(&path).unwrap();
        let mut tear = |at: usize, byte: &[u8]| {
            file.seek(SeekFrom::Start(at as u64)).unwrap();
            file.write_all(byte).unwrap();
        };
        tear(HEADER + 1, b"X");
        assert_eq!(found(&path), (1, b"old".to_vec()));
        tear(SLOT + 20, b"Y");
        assert!(matches!(read(&path), Read::Corrupt(_)));
    }

    #[test]
    fn a_file_of_another_size_or_kind_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rec");
        std::fs::write(&path, b"{\"status\":\"passed\"}").unwrap();
        assert!(matches!(read(&path), Read::Corrupt(_)));
        assert!(write(&path, 5, b"x").is_err());
        std::fs::remove_file(&path).unwrap();
        // A link is never read through (making one needs a privilege on Windows).
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, vec![0u8; 2 * SLOT]).unwrap();
        let linked = files::symlink(elsewhere.as_os_str(), &path);
        // Wine makes a link it cannot then see as itself (no metadata at all): nothing there
        // to test, as on a Windows that refused to make it.
        let seen = std::fs::symlink_metadata(&path).is_ok();
        if cfg!(unix) || (linked.is_ok() && seen) {
            linked.unwrap();
            let read = read(&path);
            assert!(matches!(read, Read::Corrupt(_)), "{read:?}");
        }
        assert!(write(&path, 1, &vec![0; MAX_PAYLOAD + 1]).is_err());
    }
}
