//! Removing ferrite's private temporary directory when ferrite is interrupted: SIGINT, SIGTERM
//! and SIGHUP end ferrite with status 128+N, and an abort (a failed allocation, SIGABRT) with
//! 134, after the directory and everything in it (PM copies, crash images, sparse pools of
//! gigabytes) is removed. Without this, the directory's guard ([`syscalls::landlock::TempRoot`])
//! is never dropped on a signal, and each interrupted run leaves its files behind.
//!
//! A signal handler may do little (no allocation, no locks), and ferrite has many threads
//! (rayon workers) any of which may take the signal. So the handler only writes the signal's
//! number to a pipe (the self-pipe trick); a watcher thread blocked on the pipe's other end
//! removes the directory and ends the process. The workers keep running meanwhile: one may
//! create a file in a directory being removed, so removal is tried until the directory is
//! gone. For SIGABRT the handler then waits for the watcher (`abort` would otherwise go on to
//! kill the process as soon as the handler returns), and gives up after a few seconds, if
//! the watcher cannot run (an abort from a corrupt heap), letting the abort kill the process.
//!
//! A single `ferrite run`, its `--explore N`, and `ferrite crash` are gentler
//! ([`stop_run_on_interrupt`]): the first interrupt stops the guest (each schedule's, each
//! recovery's) at its next block start, and the run or campaign ends with what it found and its
//! report (a harness with a timeout keeps it); the second ends ferrite at once.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The pipe's write end, for the handler (-1 before [`remove_on_signals`]).
static PIPE: AtomicI32 = AtomicI32::new(-1);

/// The signals that end ferrite after cleaning up.
const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGABRT];

/// How long an aborting thread waits for the watcher to end the process: 50 ms steps.
const ABORT_WAIT_STEPS: u32 = 100;

extern "C" fn on_signal(sig: libc::c_int) {
    let byte = sig as u8;
    let fd = PIPE.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; `byte` lives through the call.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    if sig == libc::SIGABRT {
        let step = libc::timespec { tv_sec: 0, tv_nsec: 50_000_000 };
        for _ in 0..ABORT_WAIT_STEPS {
            // SAFETY: nanosleep is async-signal-safe; `step` lives through the call.
            unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        }
        // The watcher did not end the process: die of the abort as if there were no handler.
        // SAFETY: signal(2) and raise(3) are async-signal-safe; SIGABRT is blocked while its
        // handler runs, so the raised signal is delivered (with the default action) on return.
        unsafe {
            libc::signal(libc::SIGABRT, libc::SIG_DFL);
            libc::raise(libc::SIGABRT);
        }
    }
}

/// While a run listens for host clients (`--listen`), its first two interrupts go to the guest
/// instead, at the run's next point, so that the run ends with its report and replays
/// ([`syscalls::listen`]); a third ends ferrite as without `--listen`. Returns whether `sig`
/// was passed on.
fn deferred_to_guest(sig: i32) -> bool {
    use syscalls::listen::{INTERRUPTS, INTERRUPT_FD, INTERRUPT_SIGNAL, LISTENING};
    let fd = INTERRUPT_FD.load(Ordering::SeqCst);
    if !LISTENING.load(Ordering::SeqCst) || fd < 0 || sig == libc::SIGABRT || INTERRUPTS.load(Ordering::SeqCst) >= 2 {
        return false;
    }
    if INTERRUPTS.load(Ordering::SeqCst) == 0 {
        INTERRUPT_SIGNAL.store(sig, Ordering::SeqCst);
    }
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes the 8 bytes of `one` to the bridge's eventfd, which wakes its `poll`.
    unsafe { libc::write(fd, one.as_ptr().cast(), 8) };
    true
}

/// Whether the run under way stops at its first interrupt instead of ending ferrite at once
/// ([`stop_run_on_interrupt`]).
static STOP_RUN: AtomicBool = AtomicBool::new(false);

/// From now on (until ferrite ends), the first SIGINT, SIGTERM or SIGHUP stops the run under
/// way at its next block start ([`emu::interrupt`]), which then ends with its findings so far
/// and its report, exit status 128+N; the second ends ferrite at once, as without this. For a
/// single run, `--explore` of the random strategies, exhaustive and PMRace searches (every machine of
/// the process stops, and no schedule starts after), and crash campaigns (no recovery starts
/// after, `crashtest::campaign`) and comparisons (`cmd::compare`); not for shards, whose
/// parts must hold their whole share, nor for runs whose findings recoveries validate.
pub fn stop_run_on_interrupt() {
    STOP_RUN.store(true, Ordering::SeqCst);
}

/// The first interrupt of a run that stops on it ([`stop_run_on_interrupt`]) asks the machine
/// to stop; returns whether it did.
fn stops_the_run(sig: i32) -> bool {
    if !STOP_RUN.load(Ordering::SeqCst) || sig == libc::SIGABRT || emu::interrupt::requested().is_some() {
        return false;
    }
    emu::interrupt::request(sig);
    true
}

/// From now on, SIGINT, SIGTERM, SIGHUP and SIGABRT remove `dir` (and everything in it) and end
/// the process with status 128+N. Call once, early (before any thread is started, so that
/// every thread inherits the handlers' effect). A failure to set this up is only a warning's
/// worth: the run itself is unaffected.
pub fn remove_on_signals(dir: PathBuf) -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read_end, write_end] = fds;
    PIPE.store(write_end, Ordering::Relaxed);
    std::thread::Builder::new().name("ferrite-signals".into()).spawn(move || {
        let mut byte = 0u8;
        loop {
            // SAFETY: `byte` has room for the one byte asked for.
            let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 && (deferred_to_guest(i32::from(byte)) || stops_the_run(i32::from(byte))) {
                continue;
            }
            if n == 1 {
                break;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // The pipe closed: nothing can signal any more.
            return;
        }
        // (A writer renaming its temporary just now may win: the report is then whole.)
        crate::report::remove_unfinished();
        for _ in 0..100 {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => continue,
                _ => break,
            }
        }
        // Nothing else may run now: exit without unwinding or running destructors that would
        // wait for the workers.
        // SAFETY: _exit ends the process at once; no Rust state needs to survive it.
        unsafe { libc::_exit(128 + i32::from(byte)) };
    })?;
    for sig in SIGNALS {
        // SAFETY: `sigaction` is plain data, for which all-zero bytes are a valid value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Interrupted system calls of the other threads go on; the watcher ends them all soon.
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a sigset_t inside `sa`.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: `sa` is a valid sigaction for a handler that only calls async-signal-safe
        // functions; the old action is not asked for.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
