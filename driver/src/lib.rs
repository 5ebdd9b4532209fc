//! Running guests: a run's definition ([`RunSpec`]), the session that runs it (the machine, the
//! kernel and the passes meeting in one loop), the symbols that turn PCs into source lines, the
//! run's report, warm snapshots for many runs of one command, and the exploration strategies
//! that make many runs of one spec.
//!
//! The driver sits between the library crates below it (`loader`, `emu`, `syscalls`,
//! `analyses`) and what uses runs above it (`crashtest`, the `ferrite` binary). It knows no pass
//! by name — what it needs of a pass it asks the registry ([`analyses::PassInfo`]) — and nothing
//! of crash testing: a crash-testing workload is a run with a [`Probe`], post-failure validation
//! a [`Validator`] the binary gives the [`Runner`].

#![deny(missing_docs)]

/// Like `eprintln!`, but a closed or full standard error never panics ferrite.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Like `println!`, without panicking on a closed pipe.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

pub mod dir_image;
pub mod explore;
pub mod report;
mod run;
pub mod session;
pub mod shard;
pub mod spec;
pub mod symbols;
pub mod validation;
pub mod warm;

pub use report::{print_findings, ExitInfo, RunInfo, RunReport};
pub use run::Runner;
pub use session::{Probe, Session};
pub use spec::{strategy, Branching, GuestEnd, RunOutcome, RunSpec, SessionError};
pub use symbols::Objects;
pub use validation::{ImageStore, Validator, Verdict};
