//! Reading the files ferrite itself takes as input (programs, interpreters, configuration,
//! reports, suites, debug files), bounded: a file is read only if it is a regular file, and only
//! up to a size cap, so that a hostile or mistaken path (`/dev/zero`, a FIFO nobody writes,
//! a terminal, a directory, a 100 GB file) is an error at once instead of a read that never ends
//! or an allocation that aborts the process.
//!
//! The file is opened with `O_NONBLOCK` (opening a FIFO for reading would otherwise wait for a
//! writer) and `O_NOCTTY`, and its type is taken from the open descriptor (`fstat`), not from
//! the path, so a path swapped between the check and the read cannot slip a device in. The guest's
//! own reads go through the system-call layer and are not concerned.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Largest program or interpreter ferrite reads: 1 GiB (real executables and `ld.so` are far
/// smaller; a guest's memory is 4 GiB by default).
pub const PROGRAM_CAP: u64 = 1 << 30;
/// Largest separate debug file ferrite reads: 4 GiB.
pub const DEBUG_FILE_CAP: u64 = 4 << 30;
/// Largest report ferrite reads (`ferrite replay`): 256 MiB.
pub const REPORT_CAP: u64 = 256 << 20;
/// Largest `--config` file or `ferrite compare` suite manifest ferrite reads: 16 MiB.
pub const CONFIG_CAP: u64 = 16 << 20;

/// Reads the regular file at `path`, at most `cap` bytes. Anything else (a directory, a FIFO, a
/// socket, a character or block device) and a file larger than `cap` is an error
/// ([`std::io::ErrorKind::InvalidInput`]) whose message says which; errors opening or reading
/// are passed on.
pub fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let (file, md) = open_regular(path)?;
    if md.len() > cap {
        return Err(too_large(cap));
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    // The file may grow while it is read (or lie about its size, as files in /proc do).
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(cap));
    }
    Ok(bytes)
}

/// Opens the regular file at `path` for reading, with its metadata. Anything else is an error
/// ([`std::io::ErrorKind::InvalidInput`]) saying what it is: a FIFO is opened without blocking
/// and refused (reading it would wait for a writer for ever), as are `/dev/zero` (it never
/// ends), directories, sockets and devices.
pub fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let md = file.metadata()?;
    let ft = md.file_type();
    if ft.is_file() {
        return Ok((file, md));
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a file"
    };
    Err(invalid(format!("not a regular file ({what})")))
}

/// [`read_regular`], as UTF-8 text.
pub fn read_regular_text(path: &Path, cap: u64) -> std::io::Result<String> {
    String::from_utf8(read_regular(path, cap)?).map_err(|_| invalid("not UTF-8 text".to_string()))
}

fn invalid(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, msg)
}

fn too_large(cap: u64) -> std::io::Error {
    invalid(format!("larger than the {} ferrite reads", human_size(cap)))
}

/// `cap` in the largest binary unit that divides it (`256 MiB`, `1 GiB`).
fn human_size(cap: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if cap >= 1 << shift && cap.is_multiple_of(1 << shift) {
            return format!("{} {unit}", cap >> shift);
        }
    }
    format!("{cap} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_and_large_files_are_refused() {
        let err = |p: &str, cap: u64| read_regular(Path::new(p), cap).unwrap_err().to_string();
        assert_eq!(err("/dev/zero", 10), "not a regular file (a character device)");
        assert_eq!(err("/", 10), "not a regular file (a directory)");
        let dir = std::env::temp_dir().join(format!("ferrite-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that lives through the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Refused at once: the open does not wait for a writer.
        assert_eq!(err(fifo.to_str().unwrap(), 10), "not a regular file (a FIFO)");
        let file = dir.join("f");
        std::fs::write(&file, [7u8; 2048]).unwrap();
        assert_eq!(read_regular(&file, 2048).unwrap().len(), 2048);
        assert_eq!(err(file.to_str().unwrap(), 1024), "larger than the 1 KiB ferrite reads");
        assert_eq!(err(file.to_str().unwrap(), 2047), "larger than the 2047 bytes ferrite reads");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
