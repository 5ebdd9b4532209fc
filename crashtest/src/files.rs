//! A crash image as files: the PM files with the image's line versions written in, and the
//! working-directory files as a crash there keeps them; how they are written for a recovery,
//! and the hash that deduplicates images by what they leave.
//!
//! An image's PM files are the point's [`PagedFile`]s with the image's lines written over them:
//! they share every other page with the point, so an image costs the pages its lines land in,
//! its hash reads each page's hash once, and it is written for a recovery as a sparse file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::paged::PagedFile;
use crate::record::{CwdFiles, PointData};

/// The PM files' contents in a crash image, by path relative to the PM directory.
pub type PmFiles = BTreeMap<PathBuf, PagedFile>;

/// A crash image's files: the PM files, and the working directory's files the workload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files {
    /// The PM files.
    pub pm: PmFiles,
    /// The working-directory files the workload changed, as the crash keeps them.
    pub cwd: Arc<CwdFiles>,
}

/// The point's files with the image's line versions written in.
pub fn image_files(point: &PointData, choice: &[u32], file_paths: &BTreeMap<u32, PathBuf>) -> Option<Files> {
    let mut files: PmFiles = (*point.files).clone();
    for (line, content) in point.space.image(choice).ok()? {
        let dev = line * 64;
        let id = (dev >> emu::pm::FILE_SHIFT) as u32;
        let off = dev & ((1 << emu::pm::FILE_SHIFT) - 1);
        if let Some(file) = file_paths.get(&id).and_then(|p| files.get_mut(p)) {
            file.write_at(off, &content);
        }
    }
    Some(Files { pm: files, cwd: point.cwd.clone() })
}

/// Writes an image's files into `dir`, the recovery's PM directory: the PM files, and the
/// working-directory files into the private working directory it holds
/// ([`syscalls::vfs::PRIVATE_CWD`]: `files/` for the files the image has, an empty mark in
/// `hidden/` for each it lacks), which a run with [`driver::RunSpec::private_cwd`] sees
/// as its working directory over the user's.
pub fn materialise(files: &Files, dir: &Path) -> std::io::Result<()> {
    let write = |p: PathBuf, bytes: &[u8]| -> std::io::Result<()> {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, bytes)
    };
    for (rel, file) in &files.pm {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        file.write_sparse(&p)?;
    }
    let private = dir.join(syscalls::vfs::PRIVATE_CWD);
    for (rel, content) in files.cwd.iter() {
        match content {
            Some(bytes) => write(private.join("files").join(rel), bytes)?,
            // A mark below a marked directory is implied by it.
            None if !rel.ancestors().skip(1).any(|a| files.cwd.get(a) == Some(&None)) => {
                write(private.join("hidden").join(rel), &[])?
            }
            None => {}
        }
    }
    Ok(())
}

/// The hash of an image's files: equal hashes recover identically.
pub fn files_key(files: &Files) -> String {
    let mut h = blake3::Hasher::new();
    for (rel, file) in &files.pm {
        h.update(rel.as_os_str().as_encoded_bytes());
        file.hash_into(&mut h);
    }
    if !files.cwd.is_empty() {
        h.update(b"\0cwd");
        for (rel, content) in files.cwd.iter() {
            h.update(rel.as_os_str().as_encoded_bytes());
            match content {
                Some(bytes) => {
                    h.update(&(bytes.len() as u64).to_le_bytes());
                    h.update(bytes);
                }
                None => {
                    h.update(&u64::MAX.to_le_bytes());
                }
            }
        }
    }
    h.finalize().to_hex().to_string()
}
