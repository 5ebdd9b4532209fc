//! The PM files as the device reads them: a line's present bytes, from the file itself.
//!
//! A guest's PM mapping is a shared mapping of its host file, and every change to a PM line —
//! a guest store, the kernel writing on the guest's behalf, a truncation — reaches the device
//! in program order. So the file always holds each line's present contents, and the device need
//! not keep a copy of them: for a line whose only undurable state is one small store, the file
//! plus the bytes that store overwrote give the durable contents a crash may fall back to. That
//! is what keeps the common unpersisted line at 40 bytes of host memory instead of 96
//! (`table.rs`).
//!
//! Reads use `pread` on a descriptor of the device's own, not a mapping: a host mapping of a
//! file the guest truncates raises SIGBUS in ferrite when touched, a read past the end returns
//! zeros. They happen when a compact line needs its full history (a second store, another
//! thread's persist), at crash points, and for consistency checks — never on the store path.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::FILE_SHIFT;

/// Descriptors of the PM files, by device file id. Cloning shares them: a clone of the device
/// (a machine snapshot) reads the files as they are when it reads, so whoever restores one
/// restores the files' contents too.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileViews {
    files: Vec<Option<Arc<File>>>,
}

impl FileViews {
    /// Reads file `id` from now on through a descriptor of its own (a device restored from a
    /// snapshot may hold one of another file under the same id: it is replaced).
    pub fn attach(&mut self, id: u32, file: &File) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let i = id as usize;
        if let Some(Some(f)) = self.files.get(i) {
            let (a, b) = (f.metadata()?, file.metadata()?);
            if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
                return Ok(());
            }
        }
        let f = Arc::new(file.try_clone()?);
        if self.files.len() <= i {
            self.files.resize(i + 1, None);
        }
        self.files[i] = Some(f);
        Ok(())
    }

    fn file_of(line: u64) -> (usize, u64) {
        let dev = line * super::LINE_SIZE;
        ((dev >> FILE_SHIFT) as usize, dev & ((1 << FILE_SHIFT) - 1))
    }

    /// Whether the device can read `line` (a line index: device address / 64) from its file.
    #[inline]
    pub fn has(&self, line: u64) -> bool {
        let (i, _) = Self::file_of(line);
        self.files.get(i).is_some_and(Option::is_some)
    }

    /// The present bytes of `line`, zeros past the file's end; `None` without a descriptor.
    pub fn read(&self, line: u64) -> Option<[u8; 64]> {
        let (i, off) = Self::file_of(line);
        let f = self.files.get(i)?.as_ref()?;
        let mut buf = [0u8; 64];
        let mut got = 0;
        while got < buf.len() {
            match f.read_at(&mut buf[got..], off + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        Some(buf)
    }
}
