//! `--trace-syscalls`: every system call the guest makes, with its arguments and result, on
//! standard error, one line each, in the order the deterministic scheduler ran them:
//!
//! ```text
//! [1000] openat(AT_FDCWD, "in.txt", 0x0, 0x0) = 3
//! [1000] read(0x3, 0x7fffffffd8a0, 0x1000) = 6
//! [1001] futex(0x4c87a8, 0x80, 0x2, 0x0, 0x0, 0x0) = ? (blocks)
//! [1000] openat(AT_FDCWD, "nope", 0x0, 0x0) = -1 ENOENT (No such file or directory)
//! ```
//!
//! Arguments are shown in hexadecimal, as many as the call takes (all six for calls not listed),
//! except the paths of the calls that take one (read from guest memory before the call runs)
//! and `AT_FDCWD`. The trace shows what the guest asked and
//! what ferrite answered, which is what to compare with `strace` of a native run when a program
//! behaves differently under ferrite.

use emu::Machine;

use crate::{Dispatch, Errno};

/// Which arguments of system call `nr` are paths.
fn path_args(nr: u64) -> &'static [usize] {
    match nr {
        // open, stat, lstat, access, truncate, chdir, rmdir, creat, unlink, readlink, chmod,
        // utime, utimes, statfs, mkdir, chown, lchown, mknod
        2 | 4 | 6 | 21 | 76 | 80 | 84 | 85 | 87 | 89 | 90 | 132 | 235 | 137 | 83 | 92 | 94 | 133 => &[0],
        // rename, link, symlink
        82 | 86 | 88 => &[0, 1],
        // openat, newfstatat, mkdirat, unlinkat, readlinkat, faccessat(2), futimesat,
        // utimensat, fchmodat, statx, fchownat, mknodat
        257 | 262 | 258 | 263 | 267 | 269 | 439 | 261 | 280 | 268 | 332 | 260 | 259 => &[1],
        // renameat, renameat2, linkat
        264 | 316 | 265 => &[1, 3],
        // symlinkat
        266 => &[0, 2],
        // execve
        59 => &[0],
        _ => &[],
    }
}

/// How many arguments system call `nr` takes (6 when not known).
fn arity(nr: u64) -> usize {
    match nr {
        // sched_yield, getpid, getuid, getgid, geteuid, getegid, getppid, getpgrp, setsid,
        // gettid, rt_sigreturn, fork, vfork, sync, pause
        24 | 39 | 102 | 104 | 107 | 108 | 110 | 111 | 112 | 186 | 15 | 57 | 58 | 162 | 34 => 0,
        // close, dup, exit, exit_group, brk, fchdir, umask, uname, sysinfo, pipe, set_tid_address,
        // getpgid, getsid, time, chdir, rmdir, unlink, fsync, fdatasync, alarm, times
        3 | 32 | 60 | 231 | 12 | 81 | 95 | 63 | 99 | 22 | 218 | 121 | 124 | 201 | 80 | 84 | 87 | 74 | 75 | 37 | 100 => {
            1
        }
        // fstat, stat, lstat, access, dup2, munmap, truncate, ftruncate, getcwd, rename, mkdir,
        // link, symlink, chmod, fchmod, flock, kill, listen, clock_gettime, clock_getres,
        // gettimeofday, statfs, fstatfs, set_robust_list, arch_prctl, pipe2, sigaltstack,
        // utime, utimes, getgroups, setpgid, creat, getrlimit, setrlimit, nanosleep, tkill,
        // getrusage; getsockname and getpeername take three, listed below
        5 | 4 | 6 | 21 | 33 | 11 | 76 | 77 | 79 | 82 | 83 | 86 | 88 | 90 | 91 | 73 | 62 | 50 | 228 | 229 | 96 | 137
        | 138 | 273 | 158 | 293 | 131 | 132 | 235 | 115 | 109 | 85 | 97 | 160 | 35 | 200 | 98 => 2,
        // read, write, open, lseek, mprotect, ioctl, readv, writev, madvise, msync, dup3,
        // fcntl, getdents64, readlink, mkdirat, unlinkat, symlinkat, faccessat, getrandom,
        // sched_getaffinity, sched_setaffinity, getcpu, getsockname, getpeername, tgkill,
        // getresuid, getresgid, fchmodat, futimesat, chown, fchown, lchown, mknod
        0 | 1 | 2 | 8 | 10 | 16 | 19 | 20 | 28 | 26 | 292 | 72 | 217 | 89 | 258 | 263 | 266 | 269 | 318 | 204 | 203
        | 309 | 51 | 52 | 234 | 118 | 120 | 268 | 261 | 92 | 93 | 94 | 133 => 3,
        // pread64, pwrite64, rt_sigaction, rt_sigprocmask, openat, newfstatat, renameat,
        // readlinkat, utimensat, fallocate, prlimit64, faccessat2, clock_nanosleep, fadvise64,
        // wait4, mknodat; renameat2 takes five
        17 | 18 | 13 | 14 | 257 | 262 | 264 | 267 | 280 | 285 | 302 | 439 | 230 | 221 | 61 | 259 => 4,
        // mremap, linkat, statx, prctl, renameat2, clone, fchownat
        25 | 265 | 332 | 157 | 316 | 56 | 260 => 5,
        _ => 6,
    }
}

/// The call's text, `[tid] name(args)`.
pub(crate) fn call(m: &Machine, tid: u32, nr: u64, a: [u64; 6]) -> String {
    let paths = path_args(nr);
    let args: Vec<String> = a[..arity(nr)]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if paths.contains(&i) {
                return match m.read_cstr(v, 4096) {
                    Ok(s) => format!("{:?}", String::from_utf8_lossy(&s)),
                    Err(_) => format!("{v:#x}"),
                };
            }
            // The dirfd of the *at calls.
            if i == 0 && paths.first() == Some(&1) && v as i32 == libc::AT_FDCWD {
                return "AT_FDCWD".to_string();
            }
            format!("{v:#x}")
        })
        .collect();
    format!("[{tid}] {}({})", crate::names::name(nr), args.join(", "))
}

/// Prints the call with its outcome.
pub(crate) fn result(call: &str, nr: u64, d: &Dispatch) {
    let out = match d {
        // Addresses (mmap, brk, mremap) in hexadecimal, as strace shows them.
        Dispatch::Ret(Ok(v)) if matches!(nr, 9 | 12 | 25) => format!("= {v:#x}"),
        Dispatch::Ret(Ok(v)) => format!("= {}", *v as i64),
        Dispatch::Ret(Err(Errno(e))) => {
            let msg = std::io::Error::from_raw_os_error(*e).to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
            format!("= -1 {} ({msg})", errno_name(*e))
        }
        Dispatch::Exit(_) => "= ? (the process exits)".to_string(),
        Dispatch::Block => "= ? (blocks)".to_string(),
        Dispatch::Yield => "= 0 (yields)".to_string(),
        Dispatch::ThreadExit => "= ? (the thread exits)".to_string(),
        Dispatch::Restored => "= ? (returns from the signal handler)".to_string(),
    };
    // Not `eprintln!`, which panics when standard error is closed or full.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{call} {out}");
}

/// The symbolic name of the errno values ferrite returns.
fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EOVERFLOW => "EOVERFLOW",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}
