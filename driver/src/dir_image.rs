//! A directory's files as plain data, put back in place: the PM directory's half of a session
//! checkpoint ([`crate::session::Checkpoint`]).
//!
//! A machine snapshot holds the bytes of every page a PM mapping shows, but the kernel reads
//! and writes the same files through descriptors, truncates and creates them: a run restored at
//! an earlier instruction must find them as they were then. Files are put back in place (the
//! same inode, written only where they differ), because the machine's shared mappings and the
//! kernel's reopened descriptors refer to the inode, not the name.
//!
//! A file is held in chunks, an all-zero chunk as nothing: a PM pool is mostly untouched (a
//! libpmemobj pool of 256 MiB holds a few MiB of data), and holding it whole made a snapshot
//! allocate, and fault in, the pool's size each time. A restore reads the file chunk by chunk
//! and writes only the chunks that differ.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes per chunk of a file's image.
const CHUNK: usize = 64 << 10;

/// A regular file's contents: its length, and its chunks (`None`: all zeros; the last one may
/// be short).
struct FileImage {
    len: u64,
    chunks: Vec<Option<Box<[u8]>>>,
}

/// Whether `bytes` are all zeros: 64 bytes at a time with no early exit inside, so the compiler
/// vectorises it (byte by byte with an early exit was a fifth of a small crash campaign's
/// shard, which asks it of every page it reads).
pub fn all_zero(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|c| c.iter().fold(0u8, |a, b| a | b) == 0)
}

/// Fills `buf` from `f` at `at` as far as the file goes; the bytes read.
fn read_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl FileImage {
    fn capture(p: &Path) -> std::io::Result<FileImage> {
        let f = std::fs::File::open(p)?;
        let mut chunks = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        let mut len = 0u64;
        loop {
            let got = read_at(&f, &mut buf, len)?;
            if got == 0 {
                break;
            }
            len += got as u64;
            let bytes = &buf[..got];
            chunks.push((!all_zero(bytes)).then(|| bytes.to_vec().into_boxed_slice()));
            if got < CHUNK {
                break;
            }
        }
        Ok(FileImage { len, chunks })
    }

    fn bytes(&self) -> usize {
        self.chunks.iter().flatten().map(|c| c.len()).sum()
    }

    /// Makes the file at `p` hold this image, keeping its inode, writing only the chunks that
    /// differ.
    fn put_back(&self, p: &Path) -> std::io::Result<()> {
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p)?;
        if f.metadata()?.len() != self.len {
            f.set_len(self.len)?;
        }
        let mut buf = vec![0u8; CHUNK];
        for (i, chunk) in self.chunks.iter().enumerate() {
            let at = (i * CHUNK) as u64;
            let n = ((self.len - at) as usize).min(CHUNK);
            let got = read_at(&f, &mut buf[..n], at)?;
            buf[got..n].fill(0);
            let same = match chunk {
                Some(c) => c[..] == buf[..n],
                None => all_zero(&buf[..n]),
            };
            if !same {
                match chunk {
                    Some(c) => f.write_all_at(c, at)?,
                    None => {
                        buf[..n].fill(0);
                        f.write_all_at(&buf[..n], at)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The regular files and directories under a root, by relative path, sorted.
pub struct DirImage {
    /// `None` for a directory.
    entries: Vec<(PathBuf, Option<FileImage>)>,
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, std::fs::FileType)>) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<Vec<_>, _>>()?;
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let r = rel.join(e.file_name());
        let t = e.file_type()?;
        out.push((r.clone(), t));
        if t.is_dir() {
            walk(root, &r, out)?;
        }
    }
    Ok(())
}

impl DirImage {
    /// The files under `root` now. Fails on anything but regular files and directories (a
    /// symbolic link, a socket), which an image does not hold.
    pub fn capture(root: &Path) -> std::io::Result<DirImage> {
        let mut found = Vec::new();
        walk(root, Path::new(""), &mut found)?;
        let mut entries = Vec::with_capacity(found.len());
        for (rel, t) in found {
            if t.is_dir() {
                entries.push((rel, None));
            } else if t.is_file() {
                let file = FileImage::capture(&root.join(&rel))?;
                entries.push((rel, Some(file)));
            } else {
                return Err(std::io::Error::other(format!("{} is not a regular file", rel.display())));
            }
        }
        Ok(DirImage { entries })
    }

    /// Bytes of file contents held.
    pub fn bytes(&self) -> usize {
        self.entries.iter().filter_map(|(_, b)| b.as_ref()).map(FileImage::bytes).sum()
    }

    /// Puts `root` back as it was at the capture: what was created since goes, what was
    /// removed comes back, and files are rewritten in place where they differ.
    pub fn restore(&self, root: &Path) -> std::io::Result<()> {
        let mut now = Vec::new();
        walk(root, Path::new(""), &mut now)?;
        // Deepest first, so a directory is empty when it goes.
        for (rel, t) in now.iter().rev() {
            let keep = self.entries.iter().any(|(r, b)| r == rel && b.is_none() == t.is_dir());
            if keep {
                continue;
            }
            let p = root.join(rel);
            if t.is_dir() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
        for (rel, bytes) in &self.entries {
            let p = root.join(rel);
            match bytes {
                None => {
                    if !p.is_dir() {
                        std::fs::create_dir(&p)?;
                    }
                }
                Some(file) => file.put_back(&p)?,
            }
        }
        Ok(())
    }
}
