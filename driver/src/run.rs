//! Running a spec: a session to its end, then the steps after it.
//!
//! Every run of ferrite — `ferrite run`, each schedule of an exploration, a crash-testing
//! workload, a recovery — goes through a [`Runner`]. What the runner adds to a bare session is
//! configured once by the binary (post-failure validation: [`Runner::validating`]), so that an
//! exploration of many runs validates each the same way.

use analyses::Analysis;

use crate::report::RunReport;
use crate::session::{Probe, Session};
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::validation::{self, Validator};

/// Runs specs: sessions and the steps after them.
#[derive(Clone, Copy, Default)]
pub struct Runner<'a> {
    validator: Option<&'a dyn Validator>,
}

impl<'a> Runner<'a> {
    /// A runner whose runs validate the findings of passes that ask for it with `v`.
    pub fn validating(v: &'a dyn Validator) -> Runner<'a> {
        Runner { validator: Some(v) }
    }

    /// The validator of `spec`'s runs, if any: without a recovery command no image is ever
    /// validated, so none is captured (each holds the state of every PM file, a large pool's
    /// worth).
    pub(crate) fn validator_for(&self, spec: &RunSpec) -> Option<&'a dyn Validator> {
        self.validator.filter(|_| spec.recover.is_some())
    }

    /// A session of `spec` followed by `probe`, with `extra` passes, started as
    /// [`Runner::run_with`] starts it, for a caller that drives it (and may checkpoint it);
    /// [`validation::complete`] completes its finished run as `run_with` does.
    pub fn start(
        &self,
        spec: &RunSpec,
        probe: Option<Box<dyn Probe>>,
        extra: Vec<Box<dyn Analysis>>,
    ) -> Result<Session, SessionError> {
        Session::start(spec, probe, extra, false, self.validator_for(spec))
    }

    /// Runs `spec` to its end.
    pub fn run(&self, spec: &RunSpec) -> Result<RunOutcome, SessionError> {
        self.run_with(spec, None, Vec::new())
    }

    /// A run followed by `probe` (crash testing's recorder), with `extra` passes besides the
    /// selected analyses.
    pub fn run_with(
        &self,
        spec: &RunSpec,
        probe: Option<Box<dyn Probe>>,
        extra: Vec<Box<dyn Analysis>>,
    ) -> Result<RunOutcome, SessionError> {
        let mut s = self.start(spec, probe, extra)?;
        let end = s.drive_to_end();
        Ok(validation::complete(spec, s.finish(end)))
    }

    /// [`Runner::run`], with its report.
    pub fn execute(&self, spec: &RunSpec) -> Result<(RunReport, RunOutcome), SessionError> {
        self.execute_with(spec, None, Vec::new())
    }

    /// [`Runner::run_with`], with its report.
    pub fn execute_with(
        &self,
        spec: &RunSpec,
        probe: Option<Box<dyn Probe>>,
        extra: Vec<Box<dyn Analysis>>,
    ) -> Result<(RunReport, RunOutcome), SessionError> {
        let out = self.run_with(spec, probe, extra)?;
        Ok((RunReport::of(spec, &out), out))
    }
}
