//! Programs with thousands of mappings or threads run at the speed of programs with ten: Unicorn
//! holds a bounded working set of the address space's regions, and a region it does not hold is
//! mapped in by the access that reaches it (emu/src/memory.rs, docs/architecture.md "Memory").
//! What the guest sees never depends on which regions Unicorn holds: the output is the native
//! one, the trace hash is the same with a tiny bound and a large one, a `PROT_NONE` page still
//! faults where it should, and fork and exploration's snapshots keep the working set consistent.
//!
//! The bound is `FERRITE_UC_REGIONS` (128 by default), set here in ferrite's own environment (the
//! guest's is cleared); runs compared by trace hash use values of the same length all the same.

mod common;

use std::time::Duration;

use common::*;

/// Most regions Unicorn may hold at once with the default bound, whatever the program does: the
/// bound and a quarter (the machine stops at the next block to trim past that), and room for
/// the regions one block's accesses fault in.
const HELD_AT_MOST: u64 = 192;

fn host_stat(run: &Run, key: &str) -> u64 {
    let s = read_json(&run.path("h.json"));
    s[key].as_u64().unwrap_or_else(|| panic!("--host-stats has no {key}: {s}"))
}

#[test]
fn a_few_thousand_mappings_run_as_natively_with_a_bounded_working_set() {
    for program in ["many_mappings", "many_mappings.dyn"] {
        let native = native(&guest(program), &["1500"], &[]);
        let run = Ferrite::run(&guest(program))
            .opts(&["--quiet", "--analyses", "none", "--host-stats", "h.json"])
            .args(&["1500"])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), native.stdout_str(), "{program}\n{}", run.describe());
        let peak = host_stat(&run, "regions_peak");
        assert!(peak <= HELD_AT_MOST, "{program}: Unicorn held {peak} regions at once");
        assert!(host_stat(&run, "regions_faulted_in") > 0, "{program}: no region was faulted in");
    }
}

#[test]
fn a_thousand_live_threads_run_as_natively_with_a_bounded_working_set() {
    for program in ["many_threads", "many_threads.dyn"] {
        let native = native(&guest(program), &["1000"], &[]);
        let run = Ferrite::run(&guest(program))
            .opts(&["--quiet", "--analyses", "none", "--max-threads", "1001", "--host-stats", "h.json"])
            .args(&["1000"])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), native.stdout_str(), "{program}\n{}", run.describe());
        let peak = host_stat(&run, "regions_peak");
        assert!(peak <= HELD_AT_MOST, "{program}: Unicorn held {peak} regions at once");
    }
}

/// The trace hash and findings of `program args` with `FERRITE_UC_REGIONS=bound`.
fn traced(program: &str, args: &[&str], opts: &[&str], bound: &str) -> (String, u64, serde_json::Value) {
    let run = Ferrite::run(&guest(program))
        .host_env("FERRITE_UC_REGIONS", bound)
        .opts(&["--quiet", "--seed", "5", "--report", "r.json", "--host-stats", "h.json"])
        .opts(opts)
        .args(args)
        .go_within(Duration::from_secs(300));
    let r = run.json("r.json");
    let hash = r["run"]["trace_hash"].as_str().expect("a trace hash").to_string();
    (hash, host_stat(&run, "regions_faulted_in"), r["findings"].clone())
}

#[test]
fn the_working_set_changes_nothing_the_guest_or_the_passes_see() {
    // Same-length values: 6 regions (constant faults and evictions, code included) and 9999
    // (every region held, as before the bound).
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("many_mappings", &["300"], &["--analyses", "none"]),
        ("many_mappings", &["100"], &["--analyses", "all"]),
        ("thr_mutex", &[], &["--analyses", "hawkset,vardalith,hmtrace"]),
        ("proc_fork", &[], &["--analyses", "none"]),
        ("libc_workout.dyn", &["a", "b"], &["--analyses", "none"]),
    ];
    for (program, args, opts) in cases {
        let (small, faults, f_small) = traced(program, args, opts, "0006");
        let (large, none, f_large) = traced(program, args, opts, "9999");
        assert!(faults > 0 && none == 0, "{program}: {faults} and {none} regions faulted in");
        assert_eq!(small, large, "{program} {opts:?}: trace hashes differ with 6 regions held and with all");
        assert_eq!(f_small, f_large, "{program} {opts:?}: findings differ");
    }
}

#[test]
fn an_exploration_above_the_bound_gives_the_same_traces() {
    // Its schedules go on from snapshots, whose restores re-enter regions into Unicorn.
    let opts = ["--strategy", "pct", "--explore", "6", "--analyses", "hmtrace"];
    let (small, faults, f_small) = traced("thr_mutex", &[], &opts, "0006");
    assert!(faults > 0, "no region was faulted in");
    let (large, _, f_large) = traced("thr_mutex", &[], &opts, "9999");
    assert_eq!(small, large, "exploration's trace hashes differ with 6 regions held and with all");
    assert_eq!(f_small, f_large);
}

#[test]
fn a_prot_none_page_above_the_bound_is_still_a_sigsegv_at_its_line() {
    let line = marker_line("many_mappings.c", "// FAULT");
    for bound in ["0006", "9999"] {
        let run = Ferrite::run(&guest("many_mappings"))
            .host_env("FERRITE_UC_REGIONS", bound)
            .opts(&["--quiet", "--analyses", "none", "--report", "r.json"])
            .args(&["300", "fault"])
            .go_within(Duration::from_secs(120));
        run.assert_code(139);
        let r = run.json("r.json");
        let f = &r["findings"].as_array().expect("findings")[0];
        assert_eq!(f["kind"], "SIGSEGV", "{f}");
        assert_eq!(f["locations"][0]["line"].as_u64(), Some(u64::from(line)), "bound {bound}: {f}");
        assert!(run.stdout_str().contains("300 blocks, checksum"), "{}", run.describe());
    }
}
