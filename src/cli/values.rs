//! Value parsers for the command line's numbers, paths and commands: each refuses what ferrite
//! cannot honour (a number outside [`driver::spec::limits`], a PM directory on a pseudo file
//! system, an empty command) when the command line is parsed, so that the error is clap's one
//! `error:` line naming the option, its value and what is allowed (status 2), before anything
//! runs.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;

use driver::spec::limits;

/// A parser of numbers in `range`.
pub fn ranged<T>(range: RangeInclusive<T>) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let v: T = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a whole number in {}..={}", range.start(), range.end()))?;
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is not in {}..={}", range.start(), range.end()))
        }
    }
}

/// `--max-memory`: a size ([`super::parse_size`]) in [`limits::MAX_MEMORY`].
pub fn max_memory(s: &str) -> Result<u64, String> {
    let v = super::parse_size(s)?;
    if limits::MAX_MEMORY.contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} bytes is not in 1M..=128T ({}..={})", limits::MAX_MEMORY.start(), limits::MAX_MEMORY.end()))
    }
}

/// `--pm-mount`: an absolute guest path ([`limits::pm_mount`]).
pub fn pm_mount(s: &str) -> Result<String, String> {
    limits::pm_mount(s).map(|()| s.to_string())
}

/// `--env KEY=VALUE`: a non-empty key.
pub fn env(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.is_empty() => Ok(s.to_string()),
        Some(_) => Err("the variable's name is empty; use KEY=VALUE".into()),
        None => Err("no `=`; use KEY=VALUE".into()),
    }
}

/// `--recover`, `--check`, `bench --recover`: a command with at least a program.
pub fn command(s: &str) -> Result<String, String> {
    if s.split_whitespace().next().is_none() {
        Err("the command is empty; give a program and its arguments".into())
    } else {
        Ok(s.to_string())
    }
}

/// `--pm-dir`: an existing directory on a file system that stores files. Pseudo file systems
/// are refused: a guest's PM files under `/proc/self` would be ferrite's own memory and
/// descriptors, under `/sys` or `/dev` the host's devices.
pub fn pm_dir(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    let canon = std::fs::canonicalize(&p).map_err(|e| format!("`{s}`: {e}"))?;
    if !canon.is_dir() {
        return Err(format!("`{s}` is not a directory"));
    }
    if let Some(fs) = pseudo_file_system(&canon) {
        return Err(format!("`{s}` is on {fs}, not a file system that stores files"));
    }
    Ok(p)
}

/// The name of the pseudo file system `dir` is on, if it is on one (`statfs`'s magic number;
/// `/dev` by its path, since devtmpfs reports tmpfs's number).
fn pseudo_file_system(dir: &std::path::Path) -> Option<&'static str> {
    if dir.starts_with("/dev") && !dir.starts_with("/dev/shm") {
        return Some("/dev (devtmpfs)");
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `statfs` is plain data, for which all-zero bytes are a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a struct statfs, both alive through the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(match st.f_type as u64 {
        0x9fa0 => "procfs",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb => "cgroupfs",
        0x6367_7270 => "cgroup2",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpffs",
        0x6165_676c => "pstore",
        0xde5e_81e4 => "efivarfs",
        0x6265_6570 => "configfs",
        0x6573_5543 => "fusectl",
        0x4249_4e4d => "binfmt_misc",
        _ => return None,
    })
}

/// The default of `--jobs`: the CPUs, within [`limits::JOBS`].
pub fn default_jobs() -> usize {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    cpus.clamp(*limits::JOBS.start(), *limits::JOBS.end())
}
