//! Thread switches are cheap and always possible: a switch, a quantum end or a scheduling point
//! translates no code (Unicorn's translations survive every switch), and every runnable thread
//! is preempted after at most its quantum under every strategy, so a thread spinning on a plain
//! flag lets the thread it waits for run.
//!
//! Counted, not timed: `ferrite run --host-stats` reports the blocks Unicorn translated and the
//! times its cache was flushed; the costs in seconds are in docs/performance.md.

mod common;

use std::time::Duration;

use common::*;

/// `(switches, blocks translated, cache flushes, instructions)` of one run.
fn engine_stats(program: &str, args: &[&str], opts: &[&str]) -> (u64, u64, u64, u64) {
    let dir = scratch();
    let stats = dir.path().join("host.json");
    let mut all = vec!["--quiet", "--analyses", "none", "--host-stats", stats.to_str().unwrap()];
    all.extend_from_slice(opts);
    Ferrite::run(&guest(program)).opts(&all).args(args).go().assert_code(0);
    let s = read_json(&stats);
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("--host-stats has no {k}: {s}"));
    (n("switches"), n("blocks_translated"), n("cache_flushes"), n("instructions"))
}

#[test]
fn ten_times_the_switches_translate_no_more_blocks() {
    // A lock-heavy PM hash table: switches at PM loads and stores, at locked instructions, at
    // futex waits and at quantum ends. Ten times the operations run the same code.
    for opts in [&[][..], &["--seed", "7"][..], &["--preempt", "all"][..]] {
        let (s1, b1, f1, i1) = engine_stats("pm_hash_locks", &["1000", "/mnt/pmem0/h"], opts);
        let (s10, b10, f10, i10) = engine_stats("pm_hash_locks", &["10000", "/mnt/pmem0/h"], opts);
        assert!(i10 > 5 * i1, "{opts:?}: {i1} then {i10} instructions");
        assert!(s10 > 5 * s1 && s1 > 100, "{opts:?}: {s1} then {s10} switches");
        assert_eq!(f10, f1, "{opts:?}: the cache was flushed {f1} times, then {f10} times");
        // Blocks first reached late in the longer run (a longer chain walked, a rarer branch)
        // are the only new translations allowed: a handful, not one per switch.
        assert!(b10 <= b1 + b1 / 20, "{opts:?}: {b1} blocks translated for {s1} switches, {b10} for {s10} switches");
    }
}

#[test]
fn yields_translate_no_more_blocks_with_more_threads() {
    // The same yields spread over 4 or 64 live threads: switch cost does not depend on how many
    // threads there are, and neither does what the engine translates.
    let (s4, b4, f4, _) = engine_stats("thr_yield_many", &["4", "2000"], &[]);
    let (s64, b64, f64, _) = engine_stats("thr_yield_many", &["64", "125"], &["--max-threads", "128"]);
    assert!(s4 > 2000 && s64 > 2000, "{s4} and {s64} switches");
    assert_eq!(f4, f64, "cache flushes: {f4} with 4 threads, {f64} with 64");
    assert!(b64 <= b4 + b4 / 20, "{b4} blocks translated with 4 threads, {b64} with 64");
}

/// Every strategy, as `ferrite run` options.
const STRATEGIES: &[&[&str]] = &[
    &[],
    &["--strategy", "pct"],
    &["--strategy", "fifo"],
    &["--strategy", "exhaustive"],
    &["--strategy", "pmrace"],
    &["--delay", "2000"],
    &["--preempt", "all"],
];

/// Runs `program args` under every strategy and 16 seeds; each run must end normally with
/// `expected` on stdout well within the budget (a spin that is never preempted would run into
/// `--max-instructions`, a hang).
fn ends_under_every_strategy(program: &str, args: &[&str], expected: &str) {
    for strategy in STRATEGIES {
        for seed in 0..16u64 {
            let seed = seed.to_string();
            let mut opts = vec!["--quiet", "--seed", seed.as_str(), "--max-instructions", "400000000"];
            opts.extend_from_slice(strategy);
            let run = Ferrite::run(&guest(program)).opts(&opts).args(args).go_within(Duration::from_secs(120));
            run.assert_code(0);
            assert!(
                run.stdout_str().contains(expected),
                "{program} {args:?} under {strategy:?}, seed {seed}: expected {expected:?}\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn main_spinning_on_a_flag_its_child_sets_ends() {
    ends_under_every_strategy("thr_spin_flag", &[], "payload 42");
}

#[test]
fn main_spinning_with_pause_ends() {
    ends_under_every_strategy("thr_spin_flag", &["pause"], "payload 42");
}

#[test]
fn threads_passing_a_token_through_plain_flags_end() {
    ends_under_every_strategy("thr_token_pass", &["20"], "token: 40");
}

#[test]
fn threads_passing_a_token_with_pause_end() {
    ends_under_every_strategy("thr_token_pass", &["20", "pause"], "token: 40");
}

#[test]
fn a_spin_with_pause_yields_at_once() {
    // `pause` is a yield when another thread can run: the waiting thread hands the CPU over at
    // its first spin instead of burning a quantum, under the strategies that never preempt
    // otherwise.
    for strategy in ["fifo", "exhaustive"] {
        let (_, _, _, plain) = engine_stats("thr_token_pass", &["20"], &["--strategy", strategy]);
        let (_, _, _, paused) = engine_stats("thr_token_pass", &["20", "pause"], &["--strategy", strategy]);
        assert!(paused * 20 < plain, "{strategy}: {paused} instructions with pause, {plain} without");
    }
}
