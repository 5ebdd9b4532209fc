//! What `ferrite replay` does with a report before it runs anything, as one function of the
//! report's bytes, for fuzzing: parse it (JSON or RON), check it ([`Report::validate`]), and
//! for every finding (and for none, and for an id it does not have) build the run that would
//! replay it and the passes it names. Any panic is a bug; so is a checked report that does not
//! read back the same after it is written.
//!
//! Shared, by `#[path]`, by the cargo-fuzz target `fuzz_targets/replay_setup.rs` (libFuzzer,
//! nightly) and by `tests/never_panics.rs` (a corpus of mutated reports, on stable, in CI).
//! Both include the binary's `src/report.rs` as `crate::report` next to this module.

use std::path::PathBuf;

use crate::report::Report;

/// Feeds `data` to the replay set-up: its first byte picks the format (even: JSON, odd: RON),
/// the rest is the report's text. Returns whether the report was accepted.
pub fn replay_setup(data: &[u8]) -> bool {
    let Some((&format, text)) = data.split_first() else { return false };
    let Ok(text) = std::str::from_utf8(text) else { return false };
    let json = format % 2 == 0;
    let Ok(report) = Report::from_text(text, json) else { return false };
    let ids = std::iter::once(None).chain(report.findings.iter().map(|f| Some(f.id))).chain([Some(u32::MAX)]);
    for id in ids {
        let Ok((spec, wanted)) = report.replay_spec(id, PathBuf::from("/nonexistent-pm-dir")) else {
            assert!(id.is_some_and(|id| report.findings.iter().all(|f| f.id != id)), "finding {id:?} refused");
            continue;
        };
        assert_eq!(spec.argv, report.run.args);
        if let Some(f) = &wanted {
            assert_eq!(spec.seed, f.seed);
            let _ = f.key();
        }
        // The passes are built as the session would build them; bad names or options are an
        // error the session reports, never a panic.
        let _ = analyses::build(&spec.analyses);
        let _ = driver::spec::strategy_name(spec.strategy);
        let _ = crashtest::recovery_budget(report.run.instructions, spec.max_instructions);
    }
    // A checked report reads back the same after it is written (what `--report-out` does).
    let again = serde_json::to_string(&report).expect("a checked report serialises");
    let back = Report::from_text(&again, true).unwrap_or_else(|e| panic!("a written report does not read back: {e}"));
    assert_eq!(back, report, "a report changed on its way through JSON");
    let ron = ron::ser::to_string(&report).expect("a checked report serialises as RON");
    Report::from_text(&ron, false).unwrap_or_else(|e| panic!("a report written as RON does not read back: {e}\n{ron}"));
    true
}
