//! A short run of the system-call fuzzer (random numbers and arguments from a seeded guest) on
//! every CI run: ferrite never panics and ends every run with a status it documents. The long
//! run (10 minutes) is recorded in docs/testing.md.

mod common;

use common::*;

#[test]
fn random_system_calls_never_panic_ferrite() {
    let prog = guest("syscall_fuzz");
    for seed in 1..=6 {
        let run = Ferrite::run(&prog)
            .opts(&["--quiet", "--max-instructions", "300000000"])
            .args(&[seed.to_string(), "1500".to_string()])
            .allow_unsupported()
            .go();
        assert!(!run.stderr.contains("panicked"), "seed {seed}\n{}", run.describe());
        // 0: it ran to the end; 128+N: a random call took memory from under it (a fault
        // finding); 66: a hang or deadlock finding.
        assert!(run.code == 0 || run.code == 66 || run.code > 128, "seed {seed}\n{}", run.describe());
        assert!(!run.stderr.lines().any(|l| l.starts_with("error:")), "seed {seed}\n{}", run.describe());
    }
}
