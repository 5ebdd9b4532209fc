//! ferrite's findings, and the detectors that produce them as passes over one execution.
//!
//! A [`Finding`] is what every part of ferrite reports: the machine (a guest fault, a hang), crash
//! testing (a failed recovery) and each detector pass. It names the analysis that found it, a
//! stable kind, a one-line message, the seed of the run that exposed it, and its source
//! locations with backtraces. Findings are deduplicated by [`Finding::key`], which leaves out
//! everything that may differ between runs that hit the same bug (thread ids, instruction counts).

use serde::{Deserialize, Serialize};

/// One frame of a backtrace, symbolised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub pc: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
}

impl Frame {
    /// `function (file:line)`, as much of it as is known.
    pub fn describe(&self) -> String {
        let f = self.function.as_deref().unwrap_or("??");
        match (&self.file, self.line) {
            (Some(file), Some(line)) => {
                let short = file.rsplit('/').next().unwrap_or(file);
                format!("{f} ({short}:{line})")
            }
            _ => format!("{f} (pc {:#x})", self.pc),
        }
    }
}

/// A place in the program that plays a role in a finding (the faulting instruction, the racing
/// store, the load that observed it, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub role: String,
    pub pc: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
    pub thread: u32,
    pub backtrace: Vec<Frame>,
}

impl Location {
    /// A location whose summary is the innermost frame with a source line (the program's own
    /// code rather than the libc function it called), keeping the whole backtrace.
    pub fn from_backtrace(role: &str, thread: u32, backtrace: Vec<Frame>) -> Location {
        let top = backtrace
            .iter()
            .find(|f| f.line.is_some())
            .or(backtrace.first())
            .cloned()
            .unwrap_or(Frame {
                pc: 0,
                function: None,
                file: None,
                line: None,
            });
        Location {
            role: role.to_string(),
            pc: top.pc,
            function: top.function,
            file: top.file,
            line: top.line,
            thread,
            backtrace,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: u32,
    /// `fault`, `hang`, `deadlock`, `crash`, or a detector's name.
    pub analysis: String,
    /// A stable, analysis-specific kind (`SIGSEGV`, `unpersisted-store`, ...).
    pub kind: String,
    pub message: String,
    pub seed: u64,
    pub locations: Vec<Location>,
}

impl Finding {
    /// What identifies the same bug across runs and schedules.
    pub fn key(&self) -> String {
        let mut k = format!("{}/{}", self.analysis, self.kind);
        for l in &self.locations {
            k.push_str(&format!("|{}@{:#x}", l.role, l.pc));
        }
        k
    }
}
