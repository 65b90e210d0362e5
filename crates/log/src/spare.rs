//! A spare WAL segment: a file of a segment's full size, every block written with zeros and
//! synced, ready to be renamed into the WAL's next segment.
//!
//! Appending into blocks a file does not have yet makes every fdatasync commit metadata too
//! (the new size, the new blocks): on ext4 a journal commit, which the WAL's members on one
//! file system share, so that one member's slow commit holds up the others' syncs at the same
//! moment. Overwriting blocks the file already has, as in a recycled segment (see
//! [`crate::segment`]), syncs the data alone. Recycled segments only exist once snapshots
//! have purged old ones, and a busy log can outrun them; the spare covers the rest.
//!
//! The writer asks for a spare when its segment is half full, and only then: a log that never
//! fills a segment never writes one. A thread of its own writes the zeros a small chunk at a
//! time, each on the disk before the next, and rests between chunks, so that the WAL's own
//! syncs find at most one chunk ahead of them, and seldom. At this pace a spare takes about
//! four times as long as the disk needs for it (0.3 s for 64 MiB here); a log that fills
//! half a segment faster than that appends its next segment as a new file, as without a
//! spare, and has the spare for the one after. Nothing here is needed for correctness: recovery never
//! reads a spare (its name is a recycled segment's), and a spare that cannot be made (a full
//! disk, say) only means that the next segment is appended as a new file, as before.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::error::{IoContext, LogError};
use crate::fsutil::fsync_dir;
use crate::recovery::spare_file_name;
use crate::segment::recycled_files;

/// Zeros written at a time: a WAL sync that arrives while a chunk is being written waits for
/// it, so the chunk is small (about a tenth of a millisecond of this disk's writes).
const CHUNK_BYTES: usize = 128 * 1024;

/// After each chunk the thread rests this many times as long as the chunk took, so that the
/// zeros take at most a quarter of the disk's time. Written flat out, a 64 MiB spare kept
/// this host's disk busy for 70 ms, and a quarter of a run's slowest creates fell in them.
const REST_PER_WRITE: u32 = 3;

/// What the spare is written as until it is whole: a name that is neither a segment's nor a
/// recycled one's, so that neither recovery nor the writer ever takes a part-written spare.
const UNFINISHED_FILE_NAME: &str = "spare-segment.unfinished";

/// Prepares spares on its own thread when asked; stops (abandoning an unfinished spare) when
/// dropped.
#[derive(Debug)]
pub(crate) struct SparePreparer {
    requests: Option<SyncSender<()>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SparePreparer {
    /// Starts the thread that prepares spares of `file_bytes` bytes in `wal_dir`. It first
    /// deletes what an earlier process left unfinished.
    pub fn start(wal_dir: PathBuf, file_bytes: u64) -> Result<Self, LogError> {
        let (requests, requested) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("zoolog-wal-spare".into())
            .spawn(move || serve_requests(&wal_dir, file_bytes, &requested, &stopping))
            .context(|| "spawn the WAL's spare segment thread".to_string())?;
        Ok(SparePreparer {
            requests: Some(requests),
            stop,
            thread: Some(thread),
        })
    }

    /// Asks for a spare unless one is already asked for; never blocks. The thread makes one
    /// only if there is no recycled segment (a spare included) when it gets to it.
    pub fn request(&self) {
        if let Some(requests) = &self.requests {
            let _ = requests.try_send(());
        }
    }
}

impl Drop for SparePreparer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            // At most a chunk's write and sync away: it checks `stop` between chunks.
            let _ = thread.join();
        }
    }
}

fn serve_requests(wal_dir: &Path, file_bytes: u64, requested: &Receiver<()>, stop: &AtomicBool) {
    let unfinished = wal_dir.join(UNFINISHED_FILE_NAME);
    if let Err(error) = remove_if_present(&unfinished) {
        tracing::warn!(%error, "cannot delete an unfinished spare WAL segment");
    }
    while requested.recv().is_ok() {
        match prepare_spare(wal_dir, file_bytes, stop) {
            Ok(Some(path)) => tracing::debug!(path = %path.display(), "spare WAL segment ready"),
            Ok(None) => {}
            Err(error) => tracing::warn!(
                %error,
                "cannot prepare a spare WAL segment; the next segment is a new file"
            ),
        }
    }
}

/// Writes a spare unless a recycled segment is there to be reused; returns its path, or
/// `None` if none was needed or `stop` was set part-way (the unfinished file is then deleted).
fn prepare_spare(
    wal_dir: &Path,
    file_bytes: u64,
    stop: &AtomicBool,
) -> Result<Option<PathBuf>, LogError> {
    if !recycled_files(wal_dir)?.is_empty() {
        return Ok(None);
    }
    let unfinished = wal_dir.join(UNFINISHED_FILE_NAME);
    if !write_zeros(&unfinished, file_bytes, stop)? {
        remove_if_present(&unfinished)?;
        return Ok(None);
    }
    let spare = wal_dir.join(spare_file_name());
    fs::rename(&unfinished, &spare)
        .context(|| format!("rename {} to {}", unfinished.display(), spare.display()))?;
    fsync_dir(wal_dir)?;
    Ok(Some(spare))
}

/// Writes `file_bytes` zeros into a new file at `path` and syncs it; false if `stop` was set
/// before the end. The zeros go straight to the disk (`O_DIRECT`), a chunk at a time, where
/// the file system allows it: through the page cache they would cost this machine's CPUs the
/// copying and the writeback of every page, which the WAL's own writes wait for on a small
/// machine. Elsewhere (tmpfs, say) each chunk is written and synced in turn.
fn write_zeros(path: &Path, file_bytes: u64, stop: &AtomicBool) -> Result<bool, LogError> {
    let context = || format!("write spare WAL segment {}", path.display());
    let open = |flags| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(flags)
            .open(path)
    };
    let (file, direct) = match open(libc::O_DIRECT) {
        Ok(file) => (file, true),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            (open(0).context(context)?, false)
        }
        Err(error) => return Err(error).context(context),
    };
    let zeros = AlignedZeros::new();
    let mut written_bytes = 0;
    while written_bytes < file_bytes {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let chunk_bytes = (file_bytes - written_bytes).min(CHUNK_BYTES as u64) as usize;
        // A direct write takes whole blocks: the last chunk rounds up to a page, which the
        // segment writer's own whole-page writes would have done anyway.
        let write_bytes = if direct {
            chunk_bytes.next_multiple_of(DIRECT_ALIGN_BYTES)
        } else {
            chunk_bytes
        };
        let writing = Instant::now();
        file.write_all_at(&zeros.bytes()[..write_bytes], written_bytes)
            .context(context)?;
        if !direct {
            file.sync_data().context(context)?;
        }
        written_bytes += chunk_bytes as u64;
        std::thread::sleep(writing.elapsed() * REST_PER_WRITE);
    }
    // The blocks' allocation and the file's size, and the disk's write cache.
    file.sync_all().context(context)?;
    Ok(true)
}

/// Memory and file offsets of a direct write must be multiples of the disk's logical block
/// size; a page is a multiple of every common one.
const DIRECT_ALIGN_BYTES: usize = 4096;

/// A chunk of zeros whose start is aligned for direct writes.
struct AlignedZeros {
    buffer: Vec<u8>,
    start: usize,
}

impl AlignedZeros {
    fn new() -> Self {
        let buffer = vec![0u8; CHUNK_BYTES + DIRECT_ALIGN_BYTES];
        let start = buffer.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        assert!(start < DIRECT_ALIGN_BYTES, "a byte buffer can be aligned");
        AlignedZeros { buffer, start }
    }

    fn bytes(&self) -> &[u8] {
        &self.buffer[self.start..self.start + CHUNK_BYTES]
    }
}

fn remove_if_present(path: &Path) -> Result<(), LogError> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(error).context(|| format!("delete {}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::recycled_file_name;

    fn names(dir: &Path) -> Vec<String> {
        let mut names = crate::fsutil::file_names(dir).unwrap();
        names.sort();
        names
    }

    #[test]
    fn a_spare_is_a_file_of_zeros_under_a_recycled_name_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let file_bytes = 2 * CHUNK_BYTES as u64 + 8192;
        let spare = prepare_spare(dir.path(), file_bytes, &AtomicBool::new(false))
            .unwrap()
            .expect("no recycled segment: a spare is needed");
        assert_eq!(names(dir.path()), vec![spare_file_name()]);
        let bytes = fs::read(&spare).unwrap();
        assert_eq!(bytes.len() as u64, file_bytes);
        assert!(bytes.iter().all(|&byte| byte == 0));
    }

    #[test]
    fn a_length_off_the_block_size_rounds_up_to_a_page_at_most() {
        let dir = tempfile::tempdir().unwrap();
        let file_bytes = CHUNK_BYTES as u64 + 100;
        let spare = prepare_spare(dir.path(), file_bytes, &AtomicBool::new(false))
            .unwrap()
            .unwrap();
        let length = fs::metadata(spare).unwrap().len();
        assert!(
            (file_bytes..file_bytes + DIRECT_ALIGN_BYTES as u64).contains(&length),
            "{length}"
        );
    }

    #[test]
    fn no_spare_while_a_retired_segment_waits_for_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let recycled = recycled_file_name(7);
        fs::write(dir.path().join(&recycled), b"old records").unwrap();
        let prepared = prepare_spare(dir.path(), 4096, &AtomicBool::new(false)).unwrap();
        assert_eq!(prepared, None);
        assert_eq!(names(dir.path()), vec![recycled]);
    }

    #[test]
    fn a_stopped_preparation_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let prepared = prepare_spare(dir.path(), 4096, &AtomicBool::new(true)).unwrap();
        assert_eq!(prepared, None);
        assert_eq!(names(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn the_thread_deletes_an_unfinished_spare_then_prepares_one_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(UNFINISHED_FILE_NAME), b"cut short").unwrap();
        let preparer = SparePreparer::start(dir.path().to_path_buf(), 8192).unwrap();
        preparer.request();
        let spare = dir.path().join(spare_file_name());
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while !spare.exists() {
            assert!(Instant::now() < deadline, "no spare was prepared");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(preparer);
        assert_eq!(names(dir.path()), vec![spare_file_name()]);
        assert_eq!(fs::metadata(spare).unwrap().len(), 8192);
    }

    #[test]
    fn a_directory_it_cannot_write_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let error = prepare_spare(&missing, 4096, &AtomicBool::new(false)).unwrap_err();
        assert!(error.to_string().contains("gone"), "{error}");
    }
}
