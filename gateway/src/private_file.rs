//! Files only this user may read (sealed sign-ins, approved tool definitions), written so
//! that a reader never sees half of one and nobody can redirect the write: a new private
//! file (mode 0600, never one that exists, never through a symbolic link) beside the
//! target, then a rename over it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` whole to `path` through the new private file `temporary` and a rename;
/// the temporary file is removed when anything fails.
pub fn replace(path: &Path, temporary: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let written = write_new(temporary, bytes).and_then(|()| std::fs::rename(temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(temporary);
    }
    written
}

/// Writes `bytes` to a new private file at `path`: never one that exists, never through a
/// symbolic link.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)?;
    out.write_all(bytes)?;
    out.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_replaced_file_is_private_whole_and_its_temporary_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, temporary) = (dir.path().join("f"), dir.path().join("f.tmp"));
        std::fs::write(&path, b"old").unwrap();
        replace(&path, &temporary, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!temporary.exists());
    }

    #[test]
    fn a_new_file_is_never_one_that_exists_nor_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        for path in [&victim, &link, &dangling] {
            assert!(write_new(path, b"token").is_err(), "{}", path.display());
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(!dir.path().join("nowhere").exists());
    }
}
