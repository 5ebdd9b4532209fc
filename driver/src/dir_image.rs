//! A directory's files as plain data, put back in place: the PM directory's half of a session
//! checkpoint ([`crate::session::Checkpoint`]).
//!
//! A machine snapshot holds the bytes of every page a PM mapping shows, but the kernel reads
//! and writes the same files through descriptors, truncates and creates them: a run restored at
//! an earlier instruction must find them as they were then. Files are put back in place (the
//! same inode, written only where they differ), because the machine's shared mappings and the
//! kernel's reopened descriptors refer to the inode, not the name.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The regular files and directories under a root, by relative path, sorted.
pub struct DirImage {
    /// `None` for a directory.
    entries: Vec<(PathBuf, Option<Vec<u8>>)>,
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
                let bytes = std::fs::read(root.join(&rel))?;
                entries.push((rel, Some(bytes)));
            } else {
                return Err(std::io::Error::other(format!("{} is not a regular file", rel.display())));
            }
        }
        Ok(DirImage { entries })
    }

    /// Bytes of file contents held.
    pub fn bytes(&self) -> usize {
        self.entries.iter().filter_map(|(_, b)| b.as_ref()).map(Vec::len).sum()
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
                Some(bytes) => put_back(&p, bytes)?,
            }
        }
        Ok(())
    }
}

/// Makes the file at `p` hold `bytes`, keeping its inode, writing only if it differs.
fn put_back(p: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p)?;
    let len = f.metadata()?.len();
    if len == bytes.len() as u64 {
        let mut cur = Vec::with_capacity(bytes.len());
        f.read_to_end(&mut cur)?;
        if cur == bytes {
            return Ok(());
        }
        f.seek(SeekFrom::Start(0))?;
    }
    f.set_len(bytes.len() as u64)?;
    f.write_all(bytes)?;
    Ok(())
}
