//! The `ferrite` command: parses the command line and dispatches to a subcommand
//! ([`cmd`]). Running guests is the `driver` crate's business, crash testing the `crashtest`
//! crate's; the subcommands turn options into their calls and their results into reports,
//! messages and exit statuses.

mod cli;
mod cmd;
mod compare;
mod gdb;
mod host_memory;
mod part;
mod report;
mod signals;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{Cli, Command};

/// The system allocator, counting allocations and live bytes: `ferrite bench` shows how many
/// allocations the emulator makes per guest instruction (its hot path should make none), tests
/// check that the count does not grow with the instructions a guest executes, and the live bytes
/// are what `--max-host-memory` bounds ([`host_memory`]).
struct CountingAlloc;

static HOST_ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter has no effect on memory.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        host_memory::grew(layout.size() as u64);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        host_memory::grew(layout.size() as u64);
        // SAFETY: as above.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Wrapping: a shrink adds the difference's two's complement.
        host_memory::grew((new_size as u64).wrapping_sub(layout.size() as u64));
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        host_memory::LIVE.fetch_sub(layout.size() as u64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

fn main() -> ExitCode {
    // Before ferrite writes anything: host files modified since are this run's (`stat` of them
    // shows virtual times).
    syscalls::fs::host_start();
    // A file-size limit (`ulimit -f`) reached by a report would otherwise kill ferrite with
    // SIGXFSZ mid-write; ignored, the write fails with EFBIG and is one `error:` line (status 2),
    // and the report is written whole or not at all ([`report::write_whole`]). Guests are not
    // affected: their signals are the emulated kernel's.
    // SAFETY: signal(2) with SIG_IGN installs no handler; nothing else runs yet.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let cli = Cli::parse();
    // From here on the kernel lets ferrite write only where it means to (docs/sandbox.md).
    let _tmp = match confine(&cli.command) {
        Ok(t) => t,
        Err(e) => {
            driver::say!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let limit = cli.max_host_memory.unwrap_or_else(host_memory::default_limit);
    host_memory::LIMIT.store(limit, std::sync::atomic::Ordering::Relaxed);
    host_memory::watch(limit, host_memory::what_grows(&cli.command), _tmp.path().to_path_buf());
    let res = match cli.command {
        Command::Run(a) => cmd::run::run(a),
        Command::Replay(a) => cmd::replay::replay(a),
        Command::Crash(a) => cmd::crash::crash(a),
        Command::Bench(a) => cmd::bench::bench(a),
        Command::Compare(a) => cmd::compare::compare(a),
        Command::Merge(a) => cmd::merge::merge(a),
        Command::Slurm(a) => cmd::slurm::slurm(a),
        Command::Triage(a) => cmd::triage::triage(a.report, a.top),
    };
    match res {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            // ferrite's own failures (bad input, unreadable files): one `error:` line, with the
            // context each step added, and status 2.
            driver::say!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Restricts ferrite's own writes with Landlock before anything runs: the working directory, the
/// PM directory, the directories of the files the command writes, and a private temporary
/// directory (removed when the returned guard goes) in which every later temporary directory
/// is made (docs/sandbox.md). Without Landlock, a warning.
fn confine(cmd: &Command) -> anyhow::Result<syscalls::landlock::TempRoot> {
    use std::path::{Path, PathBuf};
    let tmp = syscalls::landlock::TempRoot::new().with_context(|| {
        format!(
            "cannot make ferrite's private temporary directory in `{}` ($TMPDIR, else /tmp): set TMPDIR to a writable directory",
            std::env::temp_dir().display()
        )
    })?;
    if let Err(e) = signals::remove_on_signals(tmp.path().to_path_buf()) {
        driver::say!("warning: {} may be left behind if ferrite is interrupted: {e}", tmp.path().display());
    }
    let _ = tempfile::env::override_temp_dir(tmp.path());
    let dir_of = |f: &Option<PathBuf>| {
        f.as_ref().map(|f| f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf())
    };
    if matches!(cmd, Command::Bench(a) if !a.snapshots) {
        // bench only starts processes: the program natively, and ferrite runs that confine
        // themselves. Its own Landlock domain would be inherited by them and refuse each one its
        // private temporary directory.
        return Ok(tmp);
    }
    let mut writable = vec![PathBuf::from(".")];
    writable.extend(
        match cmd {
            Command::Run(a) => vec![dir_of(&a.opts.report), dir_of(&a.host_stats), a.opts.pm_dir.clone()],
            Command::Crash(a) => vec![dir_of(&a.opts.report), a.opts.pm_dir.clone()],
            Command::Replay(a) => vec![dir_of(&a.report_out), a.pm_dir.clone()],
            Command::Compare(a) => vec![dir_of(&a.report)],
            Command::Merge(a) => vec![dir_of(&Some(a.report.clone()))],
            Command::Slurm(a) => vec![Some(a.dir.clone()), dir_of(&Some(a.dir.clone()))],
            Command::Bench(_) | Command::Triage(_) => vec![],
        }
        .into_iter()
        .flatten(),
    );
    let alone = "ferrite's own writes are confined by its path checks alone";
    match syscalls::landlock::confine(&writable, &tmp) {
        Ok(syscalls::landlock::Confinement::None) if std::env::var_os("FERRITE_NO_LANDLOCK").is_none() => {
            driver::say!("warning: the kernel has no Landlock; {alone}")
        }
        Err(e) => driver::say!("warning: {e}; {alone}"),
        Ok(_) => {}
    }
    Ok(tmp)
}
