//! Exploration strategies: many runs of one spec, their findings merged.
//!
//! - [`random`]: `--explore N` schedules derived from the seed, in parallel (one engine per
//!   worker), each worker's going on from one snapshot of their common start ([`schedules`]);
//! - [`exhaustive`]: `--strategy exhaustive`, every schedule up to a preemption bound, depth
//!   first, optionally partial-order reduced ([`por`]);
//! - [`targeted`]: `--strategy pmrace`, PMRace's PM-aware interleaving exploration;
//! - [`sharded`]: the first two split into shards of a job array (`--shard I/N`).
//!
//! Every run starts from a private copy of the PM directory ([`exploration_run`]), so that all
//! of them start from the same pool and none changes the user's. Each finding keeps what
//! reproduces it: its seed, its schedule, its interleaving.

pub mod exhaustive;
pub mod por;
pub mod schedules;
pub mod sharded;
pub mod targeted;

use crate::report::RunReport;
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::Runner;

/// The seed of exploration run `i` (run 0 uses the base seed itself).
pub fn explore_seed(base: u64, i: u64) -> u64 {
    if i == 0 {
        return base;
    }
    let mut z = base ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Copies the PM directory's files, so that every exploration run starts from the same pool
/// and none changes the user's.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            std::fs::create_dir_all(&dst)?;
            copy_dir(&e.path(), &dst)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

/// A fresh temporary copy of `spec`'s PM directory (removed when the guard is dropped).
pub fn pm_copy(spec: &RunSpec) -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("ferrite-pm-").tempdir()?;
    copy_dir(&spec.pm_dir, dir.path())?;
    Ok(dir)
}

/// Run `i` of a PMRace exploration: its seed (program and schedule alike) derived from the
/// spec's, a private copy of the PM directory (kept while the directory guard lives), and only
/// run 0's output and warnings shown. (`--explore` under the random strategies, and `ferrite
/// crash --explore`, vary only the schedule seed: [`schedules`].)
pub fn exploration_run(spec: &RunSpec, i: u64) -> std::io::Result<(tempfile::TempDir, RunSpec)> {
    let dir = pm_copy(spec)?;
    let mut s = spec.clone();
    s.seed = explore_seed(spec.seed, i);
    s.pm_dir = dir.path().to_path_buf();
    // Runs execute in parallel: each writes its own overlay of the working directory.
    s.private_cwd = true;
    s.discard_output |= i > 0;
    s.quiet |= i > 0;
    Ok((dir, s))
}

/// Runs `n` schedules derived from the spec's seed in parallel (one engine per worker) and
/// merges their findings; each finding keeps the schedule seed of the run that exposed it. The
/// first run's output passes through; the others' is discarded. `snapshots`: schedules go on
/// from a snapshot of their common start ([`schedules`]); the report is the same without.
pub fn random(
    runner: &Runner,
    spec: &RunSpec,
    n: u32,
    snapshots: bool,
) -> Result<(RunReport, RunOutcome), SessionError> {
    let indices: Vec<u64> = (0..u64::from(n)).collect();
    let (runs, counts) = schedules::run(runner, spec, &indices, snapshots)?;
    let ran = runs.len() as u32;
    let mut all = runs.into_iter();
    let (_, mut report, first) = all.next().ok_or(SessionError::NoRun)?;
    let mut first = first.ok_or(SessionError::NoRun)?;
    let mut findings = report.findings.clone();
    for (_, r, _) in all {
        findings.extend(r.findings);
        for (k, v) in r.stats {
            *report.stats.entry(k).or_insert(0) += v;
        }
        report.discarded.extend(r.discarded);
    }
    report.findings = analyses::Finding::merge(findings);
    report.discarded = analyses::Finding::merge(std::mem::take(&mut report.discarded));
    report.run.seed = spec.seed;
    report.run.schedules = ran;
    if ran < n || report.run.exit.interrupted.is_some() {
        report.run.interrupted = emu::interrupt::requested();
    }
    if !spec.quiet && snapshots && n > 1 {
        say!("{}", counts.summary("schedule"));
    }
    first.branching = Some(counts);
    Ok((report, first))
}
