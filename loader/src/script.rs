//! `#!` lines, as Linux's `binfmt_script` reads them: the first line (cut at 256 bytes, the
//! `#!` included), blanks around it dropped, the interpreter up to the first blank, and the rest
//! as one argument.

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

/// `None` if `bytes` is no script; `Some(None)` for a `#!` line that names no interpreter
/// (ENOEXEC); otherwise the interpreter and its argument.
pub fn shebang(bytes: &[u8]) -> Option<Option<Shebang>> {
    let line = bytes.strip_prefix(b"#!")?;
    let line = &line[..line.len().min(SHEBANG_LINE - 2)];
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
    let line = &line[start..];
    let end = line.iter().rposition(|b| !blank(b)).map_or(0, |i| i + 1);
    let line = &line[..end];
    if line.is_empty() {
        return Some(None);
    }
    let split = line.iter().position(blank).unwrap_or(line.len());
    let arg = &line[split..];
    let arg = &arg[arg.iter().position(|b| !blank(b)).unwrap_or(arg.len())..];
    Some(Some(Shebang { interp: line[..split].to_vec(), arg: (!arg.is_empty()).then(|| arg.to_vec()) }))
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
    }
}
