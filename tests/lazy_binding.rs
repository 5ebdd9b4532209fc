//! Synchronisation functions reached without a call of their own: dynamically linked programs
//! run with lazy PLT binding, as natively (ferrite no longer sets `LD_BIND_NOW`), so the first
//! call of each function goes through ld.so's resolver, which jumps to the function it bound;
//! and a lock wrapper that tail-jumps to `pthread_mutex_lock`. Both are recognised as entries of
//! the function in the caller's frame (emu/src/machine.rs `on_block`, emu/src/sync.rs), so the
//! lock-based detectors see every lock.

mod common;

use common::*;
use serde_json::Value;

/// ld.so's statistics (`LD_DEBUG=statistics`): relocations processed at start-up and by the end.
fn relocations(stderr: &str) -> (u64, u64) {
    let count = |key: &str| {
        stderr
            .lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(key)?;
                rest.trim().parse::<u64>().ok()
            })
            .unwrap_or_else(|| panic!("no `{key}` in ld.so's statistics:\n{stderr}"))
    };
    (count(" number of relocations:"), count("final number of relocations:"))
}

#[test]
fn dynamic_programs_bind_lazily_and_print_as_natively() {
    // cpu_bound passes floats through the PLT (libm), libc_workout exercises libc broadly.
    for (name, args) in [("cpu_bound.dyn", vec!["0.01"]), ("libc_workout.dyn", vec!["alpha", "beta"])] {
        let prog = guest(name);
        let env = [("FERRITE_TEST", "hello"), ("LD_DEBUG", "statistics")];
        let native = native(&prog, &args, &env);
        let emu = emulated(&prog, &args, &env);
        assert_same_stdout(&native, &emu);
        assert_same_status(&native, &emu);
        // Lazily bound: ld.so resolved more relocations by the end than at start-up, as natively
        // (the counts themselves differ: the emulated CPU selects other IFUNC variants).
        let (start, end) = relocations(&emu.stderr);
        assert!(end > start, "{name}: {start} relocations at start-up, {end} at the end:\n{}", emu.describe());
        let (start, end) = relocations(&native.stderr);
        assert!(end > start, "{name} natively: {start} relocations at start-up, {end} at the end");
    }
}

#[test]
fn the_environment_is_the_guests_own_and_ld_bind_now_is_honoured() {
    let env = Ferrite::run(std::path::Path::new("/usr/bin/env")).env("A", "1").go();
    env.assert_code(0);
    assert_eq!(env.stdout_str(), "A=1\n");
    let prog = guest("thr_mutex.dyn");
    let now = Ferrite::run(&prog).env("LD_BIND_NOW", "1").env("LD_DEBUG", "statistics").go();
    now.assert_code(0);
    let (start, end) = relocations(&now.stderr);
    assert_eq!(start, end, "every relocation at start-up:\n{}", now.describe());
}

fn report(prog: &str, analyses: &str, seed: u64) -> Value {
    let seed = seed.to_string();
    let run = Ferrite::run(&guest(prog))
        .opts(&["--analyses", analyses, "--seed", &seed, "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    let report = run.json("r.json");
    let n = report["findings"].as_array().map_or(0, Vec::len);
    run.assert_code(if n == 0 { 0 } else { 66 });
    report
}

fn lines(f: &Value, role: &str) -> Vec<u64> {
    f["locations"].as_array().unwrap().iter().filter(|l| l["role"] == role).filter_map(|l| l["line"].as_u64()).collect()
}

/// hs_relock (HawkSet's Fig. 2b, dynamically linked): every pthread call goes through a lazily
/// bound PLT entry, the first one through ld.so's resolver. hawkset reports the store and the
/// load at the program's lines, and the fixed twin, whose store and persist are in one critical
/// section, is silent: the first `pthread_mutex_lock` is seen although it was reached by the
/// resolver's jump.
#[test]
fn lock_detectors_see_pthread_locks_through_lazily_bound_plt_entries() {
    let store = u64::from(marker_line("hs_relock.c", "/* BUG:"));
    let load = u64::from(marker_line("hs_relock.c", "/* LOAD:"));
    for seed in [0, 1] {
        for analyses in ["hawkset", "vardalith"] {
            let r = report("hs_relock.dyn", analyses, seed);
            let all = serde_json::to_string_pretty(&r["findings"]).unwrap();
            let found = r["findings"].as_array().unwrap();
            assert_eq!(found.len(), 1, "{analyses}, seed {seed}: {all}");
            assert_eq!(lines(&found[0], "store"), vec![store], "{all}");
            assert_eq!(lines(&found[0], "load"), vec![load], "{all}");
            let fixed = report("hs_relock_fixed.dyn", analyses, seed);
            assert!(fixed["findings"].as_array().unwrap().is_empty(), "{analyses}, seed {seed}: {fixed}");
        }
    }
}

/// sync_tailcall: `my_lock`/`my_unlock` end in `jmp pthread_mutex_lock`/`jmp
/// pthread_mutex_unlock` (gcc's sibling-call optimisation), a block after their entry. The
/// locks they take protect a PM counter and a DRAM counter: no detector reports anything.
/// (Before tail jumps were recognised, hawkset and vardalith reported the PM counter: the
/// wrappers' locks were invisible.)
#[test]
fn locks_reached_by_a_tail_jump_protect() {
    let tail = marker_line("sync_tailcall.c", "/* TAIL: jmp pthread_mutex_lock */");
    assert!(tail > 0);
    for seed in [0, 1, 2] {
        let r = report("sync_tailcall", "hawkset,vardalith,hmtrace", seed);
        assert!(r["findings"].as_array().unwrap().is_empty(), "seed {seed}: {r}");
    }
    let run = Ferrite::run(&guest("sync_tailcall")).opts(&["--analyses", "none"]).args(&["/mnt/pmem0/pool"]).go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "pm 400, dram 400\n");
}
