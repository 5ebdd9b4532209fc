//! `#!` lines, as Linux's `binfmt_script` reads them: the first line (cut at 255 bytes, the
//! `#!` included; ENOEXEC if that may cut the interpreter's name), blanks around it dropped, the
//! interpreter up to the first blank, and the rest as one argument.

/// Bytes of a `#!` line Linux reads (BINPRM_BUF_SIZE).
pub const SHEBANG_LINE: usize = 256;

/// A script's interpreter and the one argument its line gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shebang {
    /// The interpreter's path, as written.
    pub interp: Vec<u8>,
    /// Everything after it on the line, if anything.
    pub arg: Option<Vec<u8>>,
}

/// `None` if `bytes` is no script; `Some(None)` for a `#!` line that names no interpreter, or
/// whose interpreter's name may be cut by the 256-byte buffer (no newline in it, and no blank or
/// NUL after the name before its last byte): ENOEXEC, as Linux's `load_script`; otherwise the
/// interpreter and its argument. A NUL ends the name and the argument (Linux reads them as C
/// strings), and a file shorter than the buffer reads as padded with NULs.
pub fn shebang(bytes: &[u8]) -> Option<Option<Shebang>> {
    if !bytes.starts_with(b"#!") {
        return None;
    }
    let mut buf = [0u8; SHEBANG_LINE];
    let n = bytes.len().min(SHEBANG_LINE);
    buf[..n].copy_from_slice(&bytes[..n]);
    let blank = |b: u8| b == b' ' || b == b'\t';
    let last = SHEBANG_LINE - 1;
    let end = match buf.iter().position(|&b| b == b'\n') {
        Some(i) => i,
        None => {
            // Without a newline the name must end within the buffer, or it may be truncated.
            let Some(name) = (2..=last).find(|&i| !blank(buf[i])) else { return Some(None) };
            if !(name..=last).any(|i| blank(buf[i]) || buf[i] == 0) {
                return Some(None);
            }
            last
        }
    };
    let line = &buf[2..end];
    // Blanks before the end go (a NUL stops that, as it is no blank).
    let line = &line[..line.iter().rposition(|&b| !blank(b)).map_or(0, |i| i + 1)];
    let line = &line[line.iter().position(|&b| !blank(b)).unwrap_or(line.len())..];
    let name_len = line.iter().position(|&b| blank(b) || b == 0).unwrap_or(line.len());
    if name_len == 0 {
        return Some(None);
    }
    let rest = &line[name_len..];
    let rest = &rest[rest.iter().position(|&b| !blank(b)).unwrap_or(rest.len())..];
    let arg = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
    Some(Some(Shebang { interp: line[..name_len].to_vec(), arg: (!arg.is_empty()).then(|| arg.to_vec()) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_linux_does() {
        assert_eq!(shebang(b"\x7fELF"), None);
        assert_eq!(shebang(b"#!  \n"), Some(None));
        let s = shebang(b"#! /bin/sh  -e -x \necho").unwrap().unwrap();
        assert_eq!((s.interp.as_slice(), s.arg.as_deref()), (&b"/bin/sh"[..], Some(&b"-e -x"[..])));
        let s = shebang(b"#!/usr/bin/env\tpython3").unwrap().unwrap();
        assert_eq!(s.arg.as_deref(), Some(&b"python3"[..]));
        assert_eq!(shebang(b"#!/bin/true").unwrap().unwrap().arg, None);
        assert_eq!(shebang(b"#!/bin/sh\0 -x\n").unwrap().unwrap().arg, None);
        assert_eq!(shebang(b"#!/bin/sh -x\0y \n").unwrap().unwrap().arg.as_deref(), Some(&b"-x"[..]));
    }

    #[test]
    fn a_name_the_buffer_may_cut_is_enoexec() {
        // A 300-byte name on a line without a newline in the first 256 bytes: ENOEXEC.
        let long = [b"#!/".as_slice(), &[b'a'; 300], b"\n"].concat();
        assert_eq!(shebang(&long), Some(None));
        // A name that ends (at a blank) before the buffer's last byte: its argument is cut.
        let mut cut = [b"#!/bin/sh ".as_slice(), &[b'x'; 300], b"\n"].concat();
        let s = shebang(&cut).unwrap().unwrap();
        assert_eq!((s.interp.as_slice(), s.arg.map(|a| a.len())), (&b"/bin/sh"[..], Some(SHEBANG_LINE - 1 - 10)));
        // A newline within the buffer: the whole name is there.
        cut.truncate(200);
        cut.push(b'\n');
        assert!(shebang(&cut).unwrap().is_some());
        // A short file without a newline reads as padded with NULs, which end the name.
        assert_eq!(shebang(b"#!/bin/sh").unwrap().unwrap().interp, b"/bin/sh");
    }
}
