//! libFuzzer target: arbitrary bytes as a report for `ferrite replay` ([`replay_setup`]).
//! Seed the corpus with real reports (`ferrite run --report r.json`, `ferrite crash --report`),
//! each prefixed with a format byte (0: JSON, 1: RON); docs/testing.md says how.

#![no_main]

#[allow(dead_code)]
#[path = "../../src/report.rs"]
mod report;
#[path = "../replay_setup.rs"]
mod replay_setup;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    replay_setup::replay_setup(data);
});
