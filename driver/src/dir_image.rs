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

/// What a path of an image is.
enum Entry {
    Dir,
    File(FileImage),
    /// A socket file or a FIFO (a guest's `bind` of an `AF_UNIX` path, its `mkfifo`): no
    /// contents, made again with its type and permission bits (`st_mode`).
    Node(u32),
}

impl Entry {
    /// Whether a path of type `t` is this entry's kind (then kept, or rewritten in place).
    fn same_kind(&self, t: &std::fs::FileType) -> bool {
        use std::os::unix::fs::FileTypeExt;
        match self {
            Entry::Dir => t.is_dir(),
            Entry::File(_) => t.is_file(),
            Entry::Node(mode) => {
                (mode & libc::S_IFMT == libc::S_IFSOCK && t.is_socket())
                    || (mode & libc::S_IFMT == libc::S_IFIFO && t.is_fifo())
            }
        }
    }
}

/// The regular files, directories, socket files and FIFOs under a root, by relative path,
/// sorted.
pub struct DirImage {
    entries: Vec<(PathBuf, Entry)>,
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
    /// The files under `root` now. Fails on anything but regular files, directories, socket
    /// files and FIFOs (a symbolic link, a device), which an image does not hold.
    pub fn capture(root: &Path) -> std::io::Result<DirImage> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let mut found = Vec::new();
        walk(root, Path::new(""), &mut found)?;
        let mut entries = Vec::with_capacity(found.len());
        for (rel, t) in found {
            if t.is_dir() {
                entries.push((rel, Entry::Dir));
            } else if t.is_file() {
                let file = FileImage::capture(&root.join(&rel))?;
                entries.push((rel, Entry::File(file)));
            } else if t.is_socket() || t.is_fifo() {
                let mode = std::fs::symlink_metadata(root.join(&rel))?.mode();
                entries.push((rel, Entry::Node(mode)));
            } else {
                return Err(std::io::Error::other(format!("{} is not a regular file", rel.display())));
            }
        }
        Ok(DirImage { entries })
    }

    /// Bytes of file contents held.
    pub fn bytes(&self) -> usize {
        self.entries
            .iter()
            .filter_map(|(_, e)| match e {
                Entry::File(f) => Some(f.bytes()),
                _ => None,
            })
            .sum()
    }

    /// Puts `root` back as it was at the capture: what was created since goes, what was
    /// removed comes back, and files are rewritten in place where they differ.
    pub fn restore(&self, root: &Path) -> std::io::Result<()> {
        let mut now = Vec::new();
        walk(root, Path::new(""), &mut now)?;
        // Deepest first, so a directory is empty when it goes.
        for (rel, t) in now.iter().rev() {
            let keep = self.entries.iter().any(|(r, e)| r == rel && e.same_kind(t));
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
        for (rel, entry) in &self.entries {
            let p = root.join(rel);
            match entry {
                Entry::Dir => {
                    if !p.is_dir() {
                        std::fs::create_dir(&p)?;
                    }
                }
                Entry::File(file) => file.put_back(&p)?,
                Entry::Node(mode) => {
                    if std::fs::symlink_metadata(&p).is_err() {
                        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
                            .map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
                        // SAFETY: `c` is a NUL-terminated path alive for the call.
                        if unsafe { libc::mknod(c.as_ptr(), *mode, 0) } != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        // The bits the process's umask took.
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode & 0o7777))?;
                    }
                }
            }
        }
        Ok(())
    }
}
