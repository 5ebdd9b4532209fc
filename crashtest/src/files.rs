//! A crash image as files: the PM files with the image's line versions written in, and the
//! working-directory files as a crash there keeps them; how they are written for a recovery,
//! and the hash that deduplicates images by what they leave.
//!
//! An image's PM files are the point's [`PagedFile`]s with the image's lines written over them:
//! they share every other page with the point, so an image costs the pages its lines land in,
//! and it is written for a recovery as a sparse file. Its hash ([`files_key`]) is built from
//! the files' [`Sum`]s, which [`image_key`] gets from the point's and the lines the image
//! changes: deduplicating a point's images builds none of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::paged::{line_term, page_term, PagedFile, Sum, LINE, PAGE};
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

/// The hash of an image's files: equal hashes recover identically. It is made of each PM
/// file's path, length and [`Sum`], and the working-directory files, so that
/// [`image_key`] gets the same hash from a point's sums without building the image.
pub fn files_key(files: &Files) -> String {
    let pm = files.pm.iter().map(|(rel, f)| (rel.as_path(), f.len(), f.sum()));
    key_of(pm, cwd_digest(&files.cwd))
}

/// What the keys of a point's images are computed from: each PM file with its sum, the PM file
/// ids' places among them, and the working-directory files' hash (the same in every image of
/// the point).
pub struct KeyBase<'a> {
    files: Vec<(&'a Path, &'a PagedFile, Sum)>,
    ids: BTreeMap<u32, usize>,
    cwd: Option<[u8; 32]>,
}

/// [`KeyBase`] of `point`, whose files are those of `file_paths` (PM file id → path).
pub fn key_base<'a>(point: &'a PointData, file_paths: &BTreeMap<u32, PathBuf>) -> KeyBase<'a> {
    let files: Vec<_> = point.files.iter().map(|(rel, f)| (rel.as_path(), f, f.sum())).collect();
    let ids = file_paths
        .iter()
        .filter_map(|(&id, path)| files.iter().position(|(rel, _, _)| *rel == path.as_path()).map(|i| (id, i)))
        .collect();
    KeyBase { files, ids, cwd: cwd_digest(&point.cwd) }
}

/// `files_key(&image_files(point, choice, file_paths)?)`, from the point's sums and the image's
/// lines: no page is copied or hashed, and only the lines the image changes are hashed, so
/// enumerating a point's images to find the unique ones costs a walk over the crash space's
/// lines and the hashes of the changed ones, not their pages.
pub fn image_key(point: &PointData, base: &KeyBase, choice: &[u32]) -> Option<String> {
    // By (file, offset): two file ids can name one path, and the later line wins there, as it
    // does when the image is written.
    let mut lines: BTreeMap<(usize, u64), [u8; LINE]> = BTreeMap::new();
    for (line, mut content) in point.space.image(choice).ok()? {
        let dev = line * LINE as u64;
        let Some(&file) = base.ids.get(&((dev >> emu::pm::FILE_SHIFT) as u32)) else { continue };
        let off = dev & ((1 << emu::pm::FILE_SHIFT) - 1);
        let len = base.files[file].1.len();
        if off >= len {
            continue;
        }
        // As `PagedFile::write_at`: bytes past the end are dropped.
        if let Ok(keep) = usize::try_from(len - off) {
            content[keep.min(LINE)..].fill(0);
        }
        lines.insert((file, off), content);
    }
    // Each changed page's lines' sum, before and after.
    let mut pages: BTreeMap<(usize, u64), (Sum, Sum)> = BTreeMap::new();
    for ((file, off), new) in lines {
        let f = base.files[file].1;
        let old = f.line(off);
        if old == new {
            continue;
        }
        let index = off / PAGE as u64;
        let page = pages.entry((file, index)).or_insert_with(|| {
            let sum = f.page_sum(index);
            (sum, sum)
        });
        let in_page = (off % PAGE as u64) as usize / LINE;
        page.1.sub(line_term(in_page, &old));
        page.1.add(line_term(in_page, &new));
    }
    let mut sums: Vec<Sum> = base.files.iter().map(|f| f.2).collect();
    for ((file, index), (before, after)) in pages {
        sums[file].sub(page_term(index, before));
        sums[file].add(page_term(index, after));
    }
    let pm = base.files.iter().zip(sums).map(|((rel, f, _), sum)| (*rel, f.len(), sum));
    Some(key_of(pm, base.cwd))
}

/// The key of PM files given as (path, length, sum), in path order, and of the
/// working-directory files' digest.
fn key_of<'a>(pm: impl Iterator<Item = (&'a Path, u64, Sum)>, cwd: Option<[u8; 32]>) -> String {
    let mut h = blake3::Hasher::new();
    for (rel, len, sum) in pm {
        let rel = rel.as_os_str().as_encoded_bytes();
        h.update(&(rel.len() as u64).to_le_bytes());
        h.update(rel);
        h.update(&len.to_le_bytes());
        h.update(&sum.to_bytes());
    }
    if let Some(cwd) = cwd {
        h.update(b"\0cwd");
        h.update(&cwd);
    }
    h.finalize().to_hex().to_string()
}

/// The hash of the working-directory files an image keeps (none when the workload changed
/// none).
fn cwd_digest(cwd: &CwdFiles) -> Option<[u8; 32]> {
    if cwd.is_empty() {
        return None;
    }
    let mut h = blake3::Hasher::new();
    for (rel, content) in cwd.iter() {
        let rel = rel.as_os_str().as_encoded_bytes();
        h.update(&(rel.len() as u64).to_le_bytes());
        h.update(rel);
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
    Some(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu::pm::{PmConfig, PmDevice, StoreKind};

    /// A point of a device with a 3-page PM file (id 0) and a 100-byte one (id 1, ending inside
    /// a line), whose lines were stored to without a fence: some twice, some back to what they
    /// held, some to zeros, one past the end of its file.
    fn point() -> (PointData, BTreeMap<u32, PathBuf>) {
        let mut bytes = [vec![0u8; 3 * PAGE], vec![7u8; 100]];
        bytes[0][70] = 1;
        bytes[0][PAGE + 5] = 2;
        let mut dev = PmDevice::new(PmConfig::default());
        let at = |id: u64, off: u64| (id << emu::pm::FILE_SHIFT) + off;
        // The last store is wholly past the end of `b` (a mapping longer than its file).
        let stores: [(u64, u64, &[u8]); 8] = [
            (0, 64, &[5]),
            (0, 70, &[9]),
            (0, PAGE as u64 + 5, &[0]),
            (0, 2 * PAGE as u64 + 128, &[3, 4]),
            (1, 64, &[8; 36]),
            (1, 64, &[7; 36]),
            (0, 64, &[0]),
            (1, 128, &[6]),
        ];
        for (id, off, new) in stores {
            let file = &mut bytes[id as usize];
            let o = off as usize;
            let old = file.get(o..o + new.len()).map_or(vec![0; new.len()], <[u8]>::to_vec);
            let line = |n: u64| {
                let mut l = [0u8; LINE];
                let start = ((n * LINE as u64) & ((1 << emu::pm::FILE_SHIFT) - 1)) as usize;
                let end = (start + LINE).min(file.len());
                if start < end {
                    l[..end - start].copy_from_slice(&file[start..end]);
                }
                l
            };
            dev.store(0, at(id, off), &old, new, StoreKind::Cached, line);
            if let Some(dst) = file.get_mut(o..o + new.len()) {
                dst.copy_from_slice(new);
            }
        }
        let files = BTreeMap::from([
            (PathBuf::from("a"), PagedFile::from_bytes(&bytes[0])),
            (PathBuf::from("b"), PagedFile::from_bytes(&bytes[1])),
        ]);
        let paths = BTreeMap::from([(0, PathBuf::from("a")), (1, PathBuf::from("b"))]);
        (PointData { files: Arc::new(files), cwd: Arc::new(CwdFiles::new()), space: dev.crash_space() }, paths)
    }

    #[test]
    fn image_keys_are_the_built_images_keys() {
        let (p, paths) = point();
        let (images, exhaustive) = crate::space::images_of(&p.space, 4096);
        assert!(exhaustive && images.len() >= 16, "{} images", images.len());
        let base = key_base(&p, &paths);
        let mut keys = std::collections::BTreeSet::new();
        let mut contents = std::collections::BTreeSet::new();
        for choice in &images {
            let files = image_files(&p, choice, &paths).expect("an image");
            let key = files_key(&files);
            assert_eq!(image_key(&p, &base, choice).as_ref(), Some(&key), "image {choice:?}");
            keys.insert(key);
            contents.insert(files.pm.iter().map(|(r, f)| (r.clone(), f.to_vec())).collect::<Vec<_>>());
        }
        // Equal contents, one key; distinct ones, distinct keys.
        assert!(contents.len() < images.len(), "some images leave the same bytes");
        assert_eq!(keys.len(), contents.len());
    }
}
