//! Tool vectors kept across list changes and restarts. Embedding a tool costs milliseconds
//! of model time; a catalog of thousands would cost minutes at every start. So each vector
//! is stored under the hash of the text it was made from ([`Key`]), in memory and in one
//! append-only file per model: a tool whose definition did not change is never embedded
//! again, and a restart reads the file instead of running the model.
//!
//! The file is a header (`MAGIC`, then the vector width as a little-endian `u32`) followed
//! by records: a 32-byte key and the vector's `f32`s, little-endian. A record cut short (a
//! crash mid-write) is dropped when the file is read, and the file truncated to the last
//! whole record. Gateways that share the folder take turns: the file is locked (`flock`)
//! while it is read or appended to. A file that cannot be written leaves the vectors in
//! memory only.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// The hash of the text a vector was made from.
pub type Key = [u8; 32];

/// The first bytes of a vectors file.
const MAGIC: &[u8; 8] = b"mcpgvec1";

/// Vectors by their keys.
type Vectors = HashMap<Key, Arc<[f32]>>;

/// Vectors by key: shared by the embedding task (which adds) and searches (which read).
#[derive(Debug)]
pub struct VectorStore {
    dimension: usize,
    vectors: RwLock<Vectors>,
    /// Where new vectors are appended; none when the file could not be opened.
    file: Mutex<Option<File>>,
}

impl VectorStore {
    /// The store of `path` for vectors of `dimension` numbers: its records read, the file
    /// kept open for appending. A file of another width is started afresh.
    pub fn open(path: &Path, dimension: usize) -> VectorStore {
        let (vectors, file) = match read_and_open(path, dimension) {
            Ok((vectors, file)) => (vectors, Some(file)),
            Err(e) => {
                tracing::warn!(
                    "tool vectors are not kept on disk ({}): {e}",
                    path.display()
                );
                (HashMap::new(), None)
            }
        };
        VectorStore {
            dimension,
            vectors: RwLock::new(vectors),
            file: Mutex::new(file),
        }
    }

    /// The vector of `key`, if it was made.
    pub fn get(&self, key: &Key) -> Option<Arc<[f32]>> {
        self.read().get(key).cloned()
    }

    /// Whether every key has its vector.
    pub fn has_all<'a>(&self, keys: impl IntoIterator<Item = &'a Key>) -> bool {
        let vectors = self.read();
        keys.into_iter().all(|key| vectors.contains_key(key))
    }

    /// Adds vectors, in memory and at the end of the file.
    pub fn insert(&self, made: Vec<(Key, Vec<f32>)>) {
        let mut bytes = Vec::with_capacity(made.len() * (32 + 4 * self.dimension));
        for (key, vector) in &made {
            bytes.extend_from_slice(key);
            for x in vector {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(writer) = file.as_mut()
            && let Err(e) = append(writer, &bytes)
        {
            tracing::warn!("tool vectors are no longer kept on disk: {e}");
            *file = None;
        }
        drop(file);
        let mut vectors = self.vectors.write().unwrap_or_else(|p| p.into_inner());
        for (key, vector) in made {
            vectors.insert(key, vector.into());
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vectors> {
        self.vectors.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// `bytes` at the end of `file`, under its lock.
fn append(file: &mut File, bytes: &[u8]) -> std::io::Result<()> {
    file.lock()?;
    let written = file
        .seek(SeekFrom::End(0))
        .and_then(|_| file.write_all(bytes));
    file.unlock()?;
    written
}

/// The records of `path` (none if it is new or of another width), and the file open,
/// ending with its last whole record.
fn read_and_open(path: &Path, dimension: usize) -> std::io::Result<(Vectors, File)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.lock()?;
    let read = read_records(&mut file, dimension);
    file.unlock()?;
    Ok((read?, file))
}

/// Reads `file` (locked), cuts a record left half-written and starts a file that is new
/// or of another width afresh.
fn read_records(file: &mut File, dimension: usize) -> std::io::Result<Vectors> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(&(dimension as u32).to_le_bytes());
    let mut vectors = HashMap::new();
    if !bytes.starts_with(&header) {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header)?;
        return Ok(vectors);
    }
    let record = 32 + 4 * dimension;
    for chunk in bytes[header.len()..].chunks_exact(record) {
        let (key, numbers) = chunk.split_at(32);
        let vector: Arc<[f32]> = numbers
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            .collect();
        vectors.insert(key.try_into().unwrap_or([0; 32]), vector);
    }
    let whole = header.len() + (bytes.len() - header.len()) / record * record;
    if whole != bytes.len() {
        file.set_len(whole as u64)?;
    }
    Ok(vectors)
}

/// The vectors file of the model `identity` in `dir`.
pub fn path_in(dir: &Path, identity: &str) -> PathBuf {
    dir.join(format!("{identity}.vectors"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_a_reopen_and_a_cut_record_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path(), "m");
        let store = VectorStore::open(&path, 2);
        store.insert(vec![([1; 32], vec![0.5, -1.0]), ([2; 32], vec![3.0, 4.0])]);
        assert_eq!(store.get(&[2; 32]).as_deref(), Some(&[3.0, 4.0][..]));
        drop(store);
        // A crash mid-record: half a key at the end.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[9; 16]).unwrap();
        drop(file);
        let store = VectorStore::open(&path, 2);
        assert_eq!(store.get(&[1; 32]).as_deref(), Some(&[0.5, -1.0][..]));
        assert!(store.has_all(&[[1; 32], [2; 32]]));
        store.insert(vec![([3; 32], vec![1.0, 1.0])]);
        drop(store);
        let store = VectorStore::open(&path, 2);
        assert!(
            store.has_all(&[[1; 32], [2; 32], [3; 32]]),
            "appended after the cut"
        );
        // Another width starts afresh.
        let wider = VectorStore::open(&path, 3);
        assert!(wider.get(&[1; 32]).is_none());
    }

    #[test]
    fn an_unwritable_folder_keeps_vectors_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let store = VectorStore::open(&path_in(&blocker, "m"), 1);
        store.insert(vec![([1; 32], vec![1.0])]);
        assert!(store.has_all(&[[1; 32]]));
    }
}
