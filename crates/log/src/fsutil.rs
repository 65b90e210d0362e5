//! The few file-system steps every durable write here shares.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError};

/// Makes creations, renames and deletions inside `dir` durable: without it a crash can
/// forget a file whose contents were already fsynced.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .context(|| format!("fsync directory {}", dir.display()))
}

pub(crate) fn create_dir(dir: &Path) -> Result<(), LogError> {
    fs::create_dir_all(dir).context(|| format!("create directory {}", dir.display()))
}

/// File names in `dir`; names that are not UTF-8 are not ours and are skipped.
pub(crate) fn file_names(dir: &Path) -> Result<Vec<String>, LogError> {
    let read_error = || format!("list directory {}", dir.display());
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).context(read_error)? {
        if let Ok(name) = entry.context(read_error)?.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

pub(crate) fn remove_file(path: &Path) -> Result<(), LogError> {
    fs::remove_file(path).context(|| format!("delete {}", path.display()))
}

/// Bytes a purge releases per step, each step synced before the next.
const PURGE_STEP_BYTES: u64 = 1024 * 1024;

/// Deletes a large file without stalling the WAL. Unlinking a 64 MiB segment at once makes
/// ext4 free (and, on a `discard` mount, trim) every block at once; with a journal that lands
/// in the one commit the WAL's next fdatasync waits for. On the unjournaled `discard` mount
/// where this was measured, all writes stalled for ~80 ms at every snapshot all the same.
/// Shrinking the file step by step, each step synced on its own, keeps every release small.
/// A crash part-way leaves a shorter doomed file that the next purge finishes.
pub(crate) fn remove_file_gradually(path: &Path) -> Result<(), LogError> {
    let context = || format!("delete {}", path.display());
    let file = OpenOptions::new().write(true).open(path).context(context)?;
    let mut length = file.metadata().context(context)?.len();
    while length > 0 {
        length = length.saturating_sub(PURGE_STEP_BYTES);
        file.set_len(length).context(context)?;
        file.sync_all().context(context)?;
    }
    drop(file);
    remove_file(path)
}

/// Creates the WAL and snapshot directories and locks both (once when they are the same), so
/// no other log in this or another process writes their files while the locks live.
pub(crate) fn create_and_lock_dirs(
    wal_dir: &Path,
    snapshot_dir: &Path,
) -> Result<Vec<DirLock>, LogError> {
    create_dir(wal_dir)?;
    create_dir(snapshot_dir)?;
    let mut locks = vec![DirLock::acquire(wal_dir)?];
    if !same_dir(wal_dir, snapshot_dir)? {
        locks.push(DirLock::acquire(snapshot_dir)?);
    }
    Ok(locks)
}

/// An exclusive advisory lock on a directory, held for as long as this value lives, so two
/// logs (in one process or two) never write the same files.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<Self, LogError> {
        let lock_file = dir.join("LOCK");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .context(|| format!("open lock file {}", lock_file.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(LogError::Locked {
                dir: dir.to_path_buf(),
                lock_file,
            }),
            Err(TryLockError::Error(source)) => Err(LogError::io(
                format!("lock {}", lock_file.display()),
                source,
            )),
        }
    }
}

/// Whether two paths name the same directory, so it is locked only once.
pub(crate) fn same_dir(a: &Path, b: &Path) -> Result<bool, LogError> {
    let canonical = |path: &Path| -> Result<PathBuf, LogError> {
        path.canonicalize()
            .context(|| format!("resolve {}", path.display()))
    };
    Ok(canonical(a)? == canonical(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradual_removal_deletes_files_larger_than_one_step() {
        let dir = tempfile::tempdir().unwrap();
        for length in [0, 1, PURGE_STEP_BYTES, 2 * PURGE_STEP_BYTES + 17] {
            let path = dir.path().join(format!("f{length}"));
            File::create(&path).unwrap().set_len(length).unwrap();
            remove_file_gradually(&path).unwrap();
            assert!(!path.exists(), "a file of {length} bytes is gone");
        }
    }
}
