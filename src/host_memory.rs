//! ferrite's own memory, bounded (`--max-host-memory`).
//!
//! `--max-memory` bounds what the guest maps; what ferrite itself keeps grows with the run
//! instead: the PM device's line state, the analyses' shadow records, crash points and images,
//! the schedules an exploration remembers. Left alone, a guest well inside its own limit can
//! exhaust the host and be ended by the kernel's OOM killer, with no report and the temporary
//! directory left behind. The binary's allocator counts the bytes live on ferrite's heap
//! ([`LIVE`]); a watchdog thread compares them with the limit every few milliseconds and, when
//! they cross it, ends the run itself: one `error:` line naming what grows in this command and
//! the option to raise, the temporary directory removed, exit status 2. Nothing is checked in
//! the allocator or in Unicorn's hooks (an allocation never fails because of the limit, a hook
//! never stops): the watchdog is the one safe point, and at most one sampling period of growth
//! passes it.
//!
//! The heap is what grows with a run; the guest's own memory (bounded by `--max-memory`),
//! Unicorn's translation cache and the PM files' page cache are not counted.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes live on ferrite's heap (the allocator adds and subtracts).
pub static LIVE: AtomicU64 = AtomicU64::new(0);
/// The limit the watchdog enforces (`--max-host-memory`); what parts of a run that keep
/// state by choice (an exploration's snapshots) size themselves by.
pub static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
/// The most [`LIVE`] has been (`ferrite run --host-stats`: bytes per touched line).
pub static PEAK: AtomicU64 = AtomicU64::new(0);

/// Counts `bytes` more live (from the allocator).
#[inline]
pub fn grew(bytes: u64) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed).wrapping_add(bytes);
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// How often the watchdog looks.
const PERIOD: Duration = Duration::from_millis(5);

/// The default limit: half of the machine's RAM (`MemTotal`), or 8 GiB if it cannot be read.
pub fn default_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    total.map_or(8 << 30, |t| t / 2)
}

/// What grows in each command, for the error message.
pub fn what_grows(command: &crate::cli::Command) -> &'static str {
    use crate::cli::Command;
    match command {
        Command::Run(a) if a.opts.explore > 1 || a.opts.strategy == "exhaustive" => {
            "the schedules the exploration keeps and the PM device's and the analyses' state of each run"
        }
        Command::Run(_) | Command::Replay(_) => "the PM device's line state and the analyses' records",
        Command::Crash(_) => "crash points, crash images and the runs' PM device and analyses state",
        Command::Bench(_) | Command::Compare(_) => "the runs' PM device and analyses state",
        Command::Merge(_) | Command::Triage(_) => "the reports read",
        Command::Slurm(_) => "the campaign's options",
    }
}

/// Starts the watchdog: past `limit` live bytes it removes `tmp` and ends the process.
pub fn watch(limit: u64, what: &'static str, tmp: PathBuf) {
    let spawned = std::thread::Builder::new().name("host-memory".into()).spawn(move || loop {
        std::thread::sleep(PERIOD);
        let live = LIVE.load(Ordering::Relaxed);
        if live > limit {
            driver::say!(
                "error: ferrite's own memory reached {:.1} MiB, over --max-host-memory ({:.1} MiB): what grew is \
                 {what}; raise --max-host-memory, or make the run smaller",
                live as f64 / 1048576.0,
                limit as f64 / 1048576.0
            );
            let _ = std::fs::remove_dir_all(&tmp);
            std::process::exit(2);
        }
    });
    if let Err(e) = spawned {
        driver::say!("warning: --max-host-memory is not enforced: {e}");
    }
}
