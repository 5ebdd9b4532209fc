//! Snapshots of a whole run at any instruction (`Session::checkpoint`, `Session::rewind`): a run
//! stopped at instruction N, snapshotted, and run to its end makes the trace hash, instruction
//! count and schedule of the uninterrupted run; restored to N, it makes them again, as many
//! times as it is restored. Multi-threaded guests, PM mappings, stops in the middle of a quantum
//! and while threads wait on a futex, and several snapshots of one run restored out of order.

mod common;

use common::*;
use driver::session::{Checkpoint, Driven};
use driver::{RunSpec, Session};

/// What identifies a run's path: trace hash, instructions, the scheduler's decisions.
#[derive(Debug, PartialEq, Eq)]
struct Path {
    hash: String,
    instructions: u64,
    decisions: String,
}

fn spec(guest_name: &str, args: &[&str], seed: u64, pm: &std::path::Path) -> RunSpec {
    let program = guest(guest_name);
    let mut argv = vec![program.display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut s = RunSpec::new(program, argv, pm.to_path_buf());
    s.analyses = Vec::new();
    s.seed = seed;
    s.discard_output = true;
    s.quiet = true;
    s
}

fn to_end(s: &mut Session) -> Path {
    let end = s.drive_to_end();
    let out = s.finish(end).outcome;
    Path { hash: out.trace_hash, instructions: out.instructions, decisions: format!("{:?}", out.decisions) }
}

fn uninterrupted(name: &str, args: &[&str], seed: u64) -> Path {
    let pm = scratch();
    let mut s = Session::start(&spec(name, args, seed, pm.path()), None, Vec::new(), false, None).unwrap();
    to_end(&mut s)
}

/// Runs the session to exactly instruction `n`.
fn run_to(s: &mut Session, n: u64) {
    s.machine_mut().stop_at(Some(n));
    loop {
        match s.drive_debug() {
            Driven::Machine(emu::DebugStop::Reached) => break,
            Driven::End(e) => panic!("the run ended ({e:?}) before instruction {n}"),
            _ => {}
        }
    }
    assert_eq!(s.machine().icount(), n);
    s.machine_mut().stop_at(None);
}

/// Whether some live thread is blocked (in a futex wait, a join) at the session's stop.
fn someone_waits(s: &Session) -> bool {
    s.kernel().runnable_count() < s.kernel().live_threads()
}

/// For each of `points` (fractions of the run, in 1/1000): stop there, snapshot, run to the
/// end, restore and run to the end twice; every path must be the uninterrupted one. Returns
/// how many of the stops found a thread waiting.
fn check(name: &str, args: &[&str], seed: u64, points: &[u64]) -> usize {
    let whole = uninterrupted(name, args, seed);
    let mut waiting = 0;
    for &p in points {
        let n = whole.instructions * p / 1000;
        let pm = scratch();
        let mut s = Session::start(&spec(name, args, seed, pm.path()), None, Vec::new(), false, None).unwrap();
        s.enable_debugging();
        run_to(&mut s, n);
        waiting += usize::from(someone_waits(&s));
        let c = s.checkpoint().unwrap_or_else(|| panic!("{name}: no snapshot at instruction {n}"));
        assert_eq!(c.icount(), n);
        assert_eq!(to_end(&mut s), whole, "{name} seed {seed}: snapshotted at {n}, first run on");
        for again in 1..=2 {
            s.rewind(&c).unwrap();
            assert_eq!(s.machine().icount(), n);
            assert_eq!(to_end(&mut s), whole, "{name} seed {seed}: restored at {n}, run {again}");
        }
    }
    waiting
}

#[test]
fn four_threads_on_pm_restore_to_the_same_run() {
    // pm_bench: 4 threads storing to and flushing a shared PM pool, switched at every quantum.
    check("pm_bench", &["3000", "/mnt/pmem0/bench"], 0, &[1, 137, 500, 731, 999]);
}

#[test]
fn futex_waits_restore_to_the_same_run() {
    // thr_mutex: threads blocking on mutexes (futex waits) and being woken.
    let mut waiting = 0;
    for seed in [0, 3] {
        waiting += check("thr_mutex", &[], seed, &[50, 200, 333, 450, 600, 777, 900]);
    }
    assert!(waiting > 0, "no stop found a thread waiting");
}

#[test]
fn racy_counter_restores_to_the_same_run() {
    check("thr_racy_counter_n", &["4", "20000"], 7, &[10, 250, 500, 990]);
}

#[test]
fn several_snapshots_of_one_run_restore_in_any_order() {
    let (name, args, seed) = ("pm_bench", &["2000", "/mnt/pmem0/bench"][..], 5);
    let whole = uninterrupted(name, args, seed);
    let pm = scratch();
    let mut s = Session::start(&spec(name, args, seed, pm.path()), None, Vec::new(), false, None).unwrap();
    s.enable_debugging();
    let mut snaps: Vec<Checkpoint> = Vec::new();
    for k in 1..=4 {
        run_to(&mut s, whole.instructions * k / 5);
        snaps.push(s.checkpoint().unwrap());
    }
    assert_eq!(to_end(&mut s), whole);
    for i in [2, 0, 3, 1, 0] {
        s.rewind(&snaps[i]).unwrap();
        assert_eq!(to_end(&mut s), whole, "restored snapshot {i}");
    }
    // From an earlier snapshot to a later point, and back.
    s.rewind(&snaps[0]).unwrap();
    run_to(&mut s, snaps[3].icount() + 1);
    s.rewind(&snaps[2]).unwrap();
    assert_eq!(to_end(&mut s), whole);
}

#[test]
fn a_run_with_passes_gives_no_snapshot() {
    let pm = scratch();
    let mut sp = spec("thr_racy_counter_n", &["2", "100"], 0, pm.path());
    sp.analyses = vec!["hmtrace".into()];
    let mut s = Session::start(&sp, None, Vec::new(), false, None).unwrap();
    s.enable_debugging();
    run_to(&mut s, 10_000);
    assert!(s.checkpoint().is_none());
}
