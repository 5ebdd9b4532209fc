//! Crash testing (`ferrite crash`): every crash image the PM model allows at every crash point,
//! recovered by running the program (or `--recover CMD`) on a private copy of the PM files; and
//! post-failure validation of the findings of passes that ask for it.
//!
//! 1. **Workload run** ([`record`]). The program runs once, deterministically, with a recorder
//!    among its passes. At every crash point (just before a fence or locked instruction with
//!    flushes or NT stores pending, a clflush, msync/fsync or a durable write, and at exit; with
//!    `--crash-points stores`, also after every PM store) the recorder takes the device's crash
//!    space (each non-durable line's allowed versions, each pending NT chunk), the PM files'
//!    bytes, and what a crash keeps of the files the workload changed in its working directory:
//!    their content as of their last fsync (`syscalls::fs::Durable`, handed over by the run
//!    loop whenever it changes; each such change is a crash point too). Consecutive identical
//!    states are recorded once. The workload's working directory is private
//!    (`syscalls::vfs::PRIVATE_CWD`): it never writes the user's files.
//! 2. **Images** ([`space`]). A point whose space has at most `--max-images` images is
//!    enumerated exhaustively; a larger one is sampled, targeted images first: each line alone
//!    left at each older version (a store persisted without the stores after it), then pairs of
//!    lines, up to the limit, and the covered fraction is reported (log2 of the space). With
//!    `--lazy`, Jaaru's refinement instead ([`lazy`]).
//! 3. **Recovery** ([`files`], [`recover`]). Each image is materialised as files (the point's PM
//!    files with the chosen line versions written in, and the working directory's files as of
//!    their last fsync, in the private working directory the recovery gets over the user's,
//!    which it only reads), deduplicated by the hash of those bytes (computed from the point's
//!    and the lines the image changes, without building it: [`files::image_key`]), and
//!    recovered once, in parallel (at most `--jobs` workers, one per
//!    [`campaign::IMAGES_PER_WORKER`] images), by a deterministic run restored from a warm snapshot
//!    ([`driver::warm`]). It fails on a non-zero exit, a signal (fault, abort), a deadlock, or a
//!    hang (an instruction budget from the workload's). `--check CMD` runs a checker on the
//!    recovered files afterwards.
//! 4. **Minimisation** ([`campaign`]). For a failing image, ddmin finds a smallest set of lines
//!    that must be left unpersisted for recovery to fail (failing images in parallel, on the
//!    recovery workers); the finding names the crash point,
//!    those lines' lost stores, and where recovery failed, and carries the point and image so
//!    that `ferrite replay --finding` rebuilds it.

#![deny(missing_docs)]

pub mod campaign;
pub mod files;
pub mod lazy;
pub mod paged;
pub mod progress;
pub mod record;
pub mod recover;
pub mod space;
pub mod validate;
pub mod workloads;

use serde::{Deserialize, Serialize};

pub use campaign::{
    crash_point_of, recovery_of, replay, test, test_all, workload, Campaign, Options, Replayed, Served, Tested,
};
pub use record::CrashLog;
pub use recover::{Plan, Verdict};
pub use validate::Validate;

/// Why crash testing could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A run could not be made.
    #[error(transparent)]
    Run(#[from] driver::SessionError),
    /// A temporary directory or an image's files could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Anything else, said in full.
    #[error("{0}")]
    Other(String),
}

/// The instruction budget of one recovery: ten times the workload's instructions, at least 20
/// million, at most `--max-instructions` (`ferrite crash`, its replay, `ferrite compare`, and
/// post-failure validation).
pub fn recovery_budget(workload: u64, max_instructions: u64) -> u64 {
    workload.saturating_mul(10).max(20_000_000).min(max_instructions)
}

/// What `ferrite crash` did: the `crash` section of its report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CrashSummary {
    /// Distinct crash points of the workload run.
    pub crash_points: u64,
    /// Images tried over all points (before deduplication).
    pub images: u64,
    /// Images with distinct file contents.
    pub unique_images: u64,
    /// Recovery runs, minimisation included.
    pub recoveries: u64,
    /// Unique images whose recovery failed.
    pub failures: u64,
    /// Points whose space was sampled rather than enumerated.
    pub sampled_points: u64,
    /// log2 of the largest crash space met.
    pub max_space_log2: f64,
    /// How recovery was run, for replay.
    pub recover: Vec<String>,
    /// The checker, for replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Vec<String>>,
    /// `--crash-points`.
    pub crash_point_mode: String,
    /// `--max-images`.
    pub max_images: usize,
    /// `--crash-at N`: the one crash point, after N instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_at: Option<u64>,
    /// `--remap`: recovery mapped the PM files elsewhere.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remap: bool,
    /// `--dedup-points`: one crash point per instruction and call stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dedup_points: bool,
    /// `--lazy`: images were explored by Jaaru's refinement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// `--lazy`: log2 of the images of the points explored to the end, each covered by some
    /// recovery (the recoveries read only the lines that tell them apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_log2: Option<f64>,
    /// The user interrupted the campaign with this signal (SIGINT, SIGTERM, SIGHUP): the counts
    /// are of what ran before it, no recovery started after it, and failures found by then are
    /// reported without minimising them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<i32>,
}
