//! Snapshots of a whole run at any instruction (`Session::checkpoint`, `Session::rewind`): a run
//! stopped at instruction N, snapshotted, and run to its end makes the trace hash, instruction
//! count and schedule of the uninterrupted run; restored to N, it makes them again, as many
//! times as it is restored. Multi-threaded guests, PM mappings, stops in the middle of a quantum
//! and while threads wait on a futex, and several snapshots of one run restored out of order.
//! Passes' state is part of a snapshot (hmtrace restored reports the same races); a pass that
//! cannot be copied gives none. `--strategy exhaustive` branching from snapshots runs the same
//! schedules (trace hashes), with the same report, as running each from the start; so does
//! `--explore` under the random strategies, whose schedules go on from one snapshot of their
//! common start, and a finding of a later schedule replays with its two seeds.

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
    // Guests that create files (proc_exec) leave the test's working directory as it was, and
    // every run of them starts from the same files.
    s.private_cwd = true;
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
/// how many of the stops found a thread waiting, and how many found several processes.
fn check(name: &str, args: &[&str], seed: u64, points: &[u64]) -> (usize, usize) {
    let whole = uninterrupted(name, args, seed);
    let mut waiting = 0;
    let mut processes = 0;
    for &p in points {
        let n = whole.instructions * p / 1000;
        let pm = scratch();
        let mut s = Session::start(&spec(name, args, seed, pm.path()), None, Vec::new(), false, None).unwrap();
        s.enable_debugging();
        run_to(&mut s, n);
        waiting += usize::from(someone_waits(&s));
        processes += usize::from(s.kernel().process_count() > 1);
        let c = s.checkpoint().unwrap_or_else(|| panic!("{name}: no snapshot at instruction {n}"));
        assert_eq!(c.icount(), n);
        assert_eq!(to_end(&mut s), whole, "{name} seed {seed}: snapshotted at {n}, first run on");
        for again in 1..=2 {
            s.rewind(&c).unwrap();
            assert_eq!(s.machine().icount(), n);
            assert_eq!(to_end(&mut s), whole, "{name} seed {seed}: restored at {n}, run {again}");
        }
    }
    (waiting, processes)
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
        waiting += check("thr_mutex", &[], seed, &[50, 200, 333, 450, 600, 777, 900]).0;
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

/// A pass that cannot be copied ([`analyses::Analysis::fork`]'s default): runs with it are
/// never snapshotted.
struct Unforkable;

impl analyses::Analysis for Unforkable {
    fn name(&self) -> &'static str {
        "unforkable"
    }
    fn interest(&self) -> emu::events::Interest {
        emu::events::Interest::SYNC
    }
    fn on_event(&mut self, _ev: &emu::events::Event, _device: &emu::pm::PmDevice) {}
    fn finish(&mut self, _device: &emu::pm::PmDevice) -> Vec<analyses::RawFinding> {
        Vec::new()
    }
}

#[test]
fn a_run_with_a_pass_that_cannot_be_copied_gives_no_snapshot() {
    let pm = scratch();
    let sp = spec("thr_racy_counter_n", &["2", "100"], 0, pm.path());
    let mut s = Session::start(&sp, None, vec![Box::new(Unforkable)], false, None).unwrap();
    s.enable_debugging();
    run_to(&mut s, 10_000);
    assert!(s.checkpoint().is_none());
}

/// Runs `sp` whole, then again snapshotted at each of `tenths` of its instructions, on from the
/// snapshot and twice more restored from it: every one must be the whole run (trace hash,
/// instructions, findings). A point where the session gives no snapshot is shown to `refused`
/// (with the tenth). Returns how many snapshots were taken.
fn restored_runs_are_the_whole_run(sp: &RunSpec, tenths: &[u64], refused: impl Fn(&Session, u64)) -> usize {
    let run = |s: &mut Session| {
        let end = s.drive_to_end();
        let out = driver::validation::complete(sp, s.finish(end));
        let findings: Vec<String> =
            out.findings.iter().map(|f| format!("{} {} {:?}", f.kind, f.message, f.locations)).collect();
        (out.trace_hash, out.instructions, findings)
    };
    let start = |pm: &std::path::Path| {
        let mut sp = sp.clone();
        sp.pm_dir = pm.to_path_buf();
        Session::start(&sp, None, Vec::new(), false, None).unwrap()
    };
    let pm = scratch();
    let whole = run(&mut start(pm.path()));
    assert!(!whole.2.is_empty(), "{:?} finds something", sp.analyses);
    let mut taken = 0;
    for &frac in tenths {
        let pm = scratch();
        let mut s = start(pm.path());
        s.enable_debugging();
        run_to(&mut s, whole.1 * frac / 10);
        let Some(c) = s.checkpoint() else {
            refused(&s, frac);
            continue;
        };
        taken += 1;
        assert_eq!(run(&mut s), whole, "snapshotted at {frac}/10, first run on");
        for again in 1..=2 {
            s.rewind(&c).unwrap();
            assert_eq!(run(&mut s), whole, "restored at {frac}/10, run {again}");
        }
    }
    taken
}

/// A run watched by hmtrace (all memory, vector clocks, locksets) snapshotted mid-run reports
/// the same races, trace hash and schedule from the snapshot, every time it is restored.
#[test]
fn a_run_with_passes_restores_with_their_state() {
    let mut sp = spec("thr_racy_counter_n", &["3", "300"], 2, std::path::Path::new("/nonexistent"));
    sp.analyses = vec!["hmtrace".into()];
    let taken = restored_runs_are_the_whole_run(&sp, &[1, 6, 8, 9], |s, frac| {
        // Not before the second thread exists: hmtrace watches all memory from then on only.
        assert_eq!(s.kernel().live_threads(), 1, "at {frac}/10: hmtrace's state can be copied");
    });
    assert!(taken >= 2, "{taken} snapshots");
}

/// A run watched by oscs, whose all-memory hooks are in only while a critical section can matter
/// (in and out again around glibc's own sections, then for good): a snapshot holds whether they
/// were in, and a run restored from one taken anywhere after the second thread reports the same
/// pairs, trace hash and schedule, every time.
#[test]
fn a_run_with_oscs_restores_with_its_memory_hooks() {
    let mut sp = spec("os_balance", &[], 0, std::path::Path::new("/nonexistent"));
    sp.analyses = vec!["oscs".into()];
    let taken = restored_runs_are_the_whole_run(&sp, &[1, 5, 7, 9], |_, _| {});
    assert!(taken >= 2, "{taken} snapshots");
}

/// A run watched by pmrace (taint tracking: label sets, memory and register shadows, the taint
/// hooks put in at the first source) snapshotted anywhere reports the same findings, counters,
/// trace hash and schedule from the snapshot, every time it is restored.
#[test]
fn a_run_with_taint_tracking_restores_with_its_taint() {
    fn spec_pr(pm: &std::path::Path) -> RunSpec {
        let mut sp = spec("pr_mc_incr", &["/mnt/pmem0/pool"], 0, pm);
        sp.analyses = vec!["pmrace".into()];
        sp
    }
    let run = |s: &mut Session| {
        let end = s.drive_to_end();
        let out = driver::validation::complete(&spec_pr(std::path::Path::new("/nonexistent")), s.finish(end));
        let findings: Vec<String> =
            out.findings.iter().map(|f| format!("{} {} {:?}", f.kind, f.message, f.locations)).collect();
        (out.trace_hash, out.instructions, findings, out.stats)
    };
    let start = |pm: &std::path::Path| Session::start(&spec_pr(pm), None, Vec::new(), false, None).unwrap();
    let pm = scratch();
    let whole = run(&mut start(pm.path()));
    assert!(whole.2.iter().any(|f| f.starts_with("inter-thread-inconsistency")), "{:?}", whole.2);
    assert!(whole.3.get("pmrace.inter_candidates").is_some_and(|&n| n > 0), "{:?}", whole.3);
    for frac in [1, 3, 5, 7, 9] {
        let pm = scratch();
        let mut s = start(pm.path());
        s.enable_debugging();
        run_to(&mut s, whole.1 * frac / 10);
        let c = s.checkpoint().unwrap_or_else(|| panic!("at {frac}/10: pmrace and its taint can be copied"));
        assert_eq!(run(&mut s), whole, "snapshotted at {frac}/10, first run on");
        for again in 1..=2 {
            s.rewind(&c).unwrap();
            assert_eq!(run(&mut s), whole, "restored at {frac}/10, run {again}");
        }
    }
}

/// The `exploration` counters of `--host-stats`.
fn exploration(run: &Run) -> serde_json::Value {
    run.json("h.json")["exploration"].clone()
}

/// `--strategy exhaustive` going on from snapshots finds the same schedules (the chained trace
/// hashes of every schedule run), findings and report as running every schedule from the
/// start (`--no-snapshots`), with and without `--por`, with no pass, hmtrace and hawkset; with
/// `--por` it runs at least 3× fewer guest instructions.
#[test]
fn exploration_from_snapshots_runs_the_same_schedules() {
    let base = ["--strategy", "exhaustive", "--preempt", "all", "--max-preemptions", "1", "--quiet"];
    for (analyses, por) in [("none", true), ("hmtrace", true), ("hawkset", true), ("none", false), ("hmtrace", false)] {
        let mut opts: Vec<&str> = base.to_vec();
        opts.extend(["--analyses", analyses, "--report", "r.json", "--host-stats", "h.json"]);
        // Without reduction the space is 390 schedules: the first 60 of them.
        opts.extend(if por { &["--por", "--explore", "400"][..] } else { &["--explore", "60"][..] });
        let with = Ferrite::run(&guest("thr_lost_update")).opts(&opts).go();
        let without = Ferrite::run(&guest("thr_lost_update")).opts(&opts).opts(&["--no-snapshots"]).go();
        let what = format!("--analyses {analyses}, por {por}");
        assert_eq!(with.code, without.code, "{what}\n{}", with.describe());
        assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{what}");
        let (a, b) = (exploration(&with), exploration(&without));
        assert_eq!(a["trace_hashes"], b["trace_hashes"], "{what}: the schedules' trace hashes");
        assert_eq!(a["instructions_from_start"], b["instructions"], "{what}");
        assert_eq!(b["from_snapshot"], 0, "{what}");
        let runs = a["from_start"].as_u64().unwrap() + a["from_snapshot"].as_u64().unwrap();
        assert_eq!(a["from_start"], 1, "{what}: only the first schedule runs from the start\n{a}");
        assert!(runs > 5, "{what}: {a}");
        // With an empty environment (the tests'), the lost update's start-up before its first
        // decision is about two thirds of a run (with a shell's environment, four fifths).
        let ratio = a["instructions_from_start"].as_f64().unwrap() / a["instructions"].as_f64().unwrap();
        assert!(ratio >= if por { 2.5 } else { 1.5 }, "{what}: {ratio:.2}x fewer instructions\n{a}");
        let findings = with.json("r.json")["findings"].as_array().unwrap().len();
        // Without reduction the failing schedules are past the first 60.
        assert!(!por || findings > 0, "{what}: the lost update is found");
    }
}

/// `--strategy exhaustive --analyses pmrace` goes on from snapshots too (issue 23): the taint
/// engine's shadows and label sets are in the machine's snapshot and pmrace's candidates, recent
/// stores and inconsistencies in the pass's copy, so the report (findings and pmrace's counters)
/// and the schedules' chained trace hashes are those of running every schedule from the start,
/// with fewer guest instructions run; a finding replays.
#[test]
fn exhaustive_exploration_with_pmrace_branches_from_snapshots() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--preempt",
        "all",
        "--max-preemptions",
        "1",
        "--por",
        "--explore",
        "20",
        "--analyses",
        "pmrace",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let go =
        |extra: &[&str]| Ferrite::run(&guest("pr_mc_incr")).opts(&opts).opts(extra).args(&["/mnt/pmem0/pool"]).go();
    let (with, without) = (go(&[]), go(&["--no-snapshots"]));
    with.assert_code(66);
    let r = with.json("r.json");
    assert_eq!(without_timings(&r), without_timings(&without.json("r.json")));
    let (a, b) = (exploration(&with), exploration(&without));
    assert_eq!(a["trace_hashes"], b["trace_hashes"], "the schedules' trace hashes");
    assert_eq!(a["instructions_from_start"], b["instructions"], "{a}");
    assert_eq!(a["from_start"], 1, "{a}");
    assert!(a["from_snapshot"].as_u64().unwrap() > 5, "{a}");
    assert!(a["instructions"].as_u64().unwrap() * 2 < b["instructions"].as_u64().unwrap(), "{a}\n{b}");
    assert!(r["stats"]["pmrace.inter_candidates"].as_u64().unwrap() > 0, "{}", r["stats"]);
    let f = &r["findings"].as_array().unwrap()[0];
    assert_eq!(f["kind"], "inter-thread-inconsistency", "{f}");
    let id = f["id"].as_u64().unwrap().to_string();
    let replay = Ferrite::replay(&with.path("r.json")).opts(&["--finding", id.as_str()]).in_dir(with.dir).go();
    assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
}

/// On the racy counter (threads that run longer after their start-up), `--por` with
/// snapshots runs over 3× fewer guest instructions than running every schedule from the start.
#[test]
fn exploration_from_snapshots_saves_most_of_the_racy_counter() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "2",
        "--por",
        "--explore",
        "30",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let with = Ferrite::run(&guest("thr_racy_counter")).opts(&opts).go();
    let without = Ferrite::run(&guest("thr_racy_counter")).opts(&opts).opts(&["--no-snapshots"]).go();
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")));
    let (a, b) = (exploration(&with), exploration(&without));
    assert_eq!(a["trace_hashes"], b["trace_hashes"]);
    let ratio = a["instructions_from_start"].as_f64().unwrap() / a["instructions"].as_f64().unwrap();
    assert!(ratio >= 3.0, "{ratio:.2}x fewer instructions\n{a}");
}

/// A producer handing items to a consumer (`thr_handoff`): DPOR asks for alternatives at
/// hand-offs all along each run, far from the snapshot where its threads start, which is all
/// the session's base snapshotted in runs this short (1.5x fewer instructions than from the
/// start). Runs now snapshot themselves evenly, and where waiting schedules leave them on the
/// way to their own new decision: at least 3x fewer, the same schedules (chained trace
/// hashes) and report as `--no-snapshots`.
#[test]
fn schedules_dpor_asks_for_all_along_a_run_go_on_from_snapshots_near_them() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "1",
        "--por",
        "--explore",
        "20",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let g = guest("thr_handoff");
    let with = Ferrite::run(&g).opts(&opts).args(&["50"]).go();
    let without = Ferrite::run(&g).opts(&opts).opts(&["--no-snapshots"]).args(&["50"]).go();
    assert_eq!(with.code, 0, "{}", with.describe());
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")));
    let (a, b) = (exploration(&with), exploration(&without));
    assert_eq!(a["trace_hashes"], b["trace_hashes"]);
    assert_eq!(a["instructions_from_start"], b["instructions"]);
    assert_eq!(a["from_start"], 1, "{a}");
    assert_eq!(a["from_snapshot"], 19, "{a}");
    let ratio = a["instructions_from_start"].as_f64().unwrap() / a["instructions"].as_f64().unwrap();
    assert!(ratio >= 3.0, "{ratio:.2}x fewer instructions\n{a}");
    // What the schedules re-ran before their new decisions is a small part of what they ran.
    assert!(a["instructions_to_branch"].as_u64().unwrap() * 2 < a["instructions"].as_u64().unwrap(), "{a}");
}

/// Runs of about 12,000 instructions whose DPOR alternatives are a few hundred instructions
/// apart (issue 23's 3x target): with the snapshots where waiting schedules leave a run kept
/// 10,000 instructions apart, the lost update saved 2.9x and the deadlock 2.8x; spaced by the
/// run's length, both save over 3x, with the report and chained trace hashes of
/// `--no-snapshots`.
#[test]
fn short_runs_snapshot_where_waiting_schedules_leave_them() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "1",
        "--por",
        "--explore",
        "20",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    for (name, code) in [("thr_lost_update", 0), ("thr_deadlock", 66)] {
        let with = Ferrite::run(&guest(name)).opts(&opts).go();
        let without = Ferrite::run(&guest(name)).opts(&opts).opts(&["--no-snapshots"]).go();
        assert_eq!(with.code, code, "{}", with.describe());
        assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{name}");
        let (a, b) = (exploration(&with), exploration(&without));
        assert_eq!(a["trace_hashes"], b["trace_hashes"], "{name}");
        assert_eq!(a["instructions_from_start"], b["instructions"], "{name}");
        let ratio = a["instructions_from_start"].as_f64().unwrap() / a["instructions"].as_f64().unwrap();
        assert!(ratio >= 3.0, "{name}: {ratio:.2}x fewer instructions\n{a}");
    }
}

/// A full snapshot budget (issue 23): `thr_churn` writes fresh memory all the time, so its
/// snapshots fill the 64 MiB budget `--max-host-memory 256M` leaves them in its first runs. The
/// session's base then refused every further snapshot, and the deep schedules went on from
/// shallow ones (1.3x fewer instructions than from the start); now snapshots no waiting schedule
/// can go on from, then every other one of a run's, make room (2.6x): the same schedules
/// (chained trace hashes) and report as `--no-snapshots`, within the budget. The first run
/// leaves the path nowhere (no snapshot before its new decision to drop), so its room is made
/// by thinning its own snapshots (`thinned`); the schedules that go on from those left run as
/// they do under the default budget, where nothing is thinned: the same report and schedules.
#[test]
fn a_full_snapshot_budget_evicts_instead_of_refusing() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "1",
        "--por",
        "--explore",
        "20",
        "--max-host-memory",
        "256M",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let g = guest("thr_churn");
    let with = Ferrite::run(&g).opts(&opts).args(&["30"]).go();
    let without = Ferrite::run(&g).opts(&opts).opts(&["--no-snapshots"]).args(&["30"]).go();
    assert_eq!(with.code, 0, "{}", with.describe());
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")));
    let (a, b) = (exploration(&with), exploration(&without));
    assert_eq!(a["trace_hashes"], b["trace_hashes"]);
    assert_eq!(a["instructions_from_start"], b["instructions"]);
    assert!(a["evicted"].as_u64().unwrap() > 0, "{a}");
    let thinned = a["thinned"].as_u64().unwrap();
    assert!(thinned > 0 && thinned <= a["evicted"].as_u64().unwrap(), "{a}");
    assert_eq!(a["from_snapshot"], 19, "{a}");
    assert!(a["peak_snapshot_bytes"].as_u64().unwrap() <= 64 << 20, "{a}");
    let ratio = a["instructions_from_start"].as_f64().unwrap() / a["instructions"].as_f64().unwrap();
    assert!(ratio >= 2.0, "{ratio:.2}x fewer instructions\n{a}");
    // Under the default budget (a quarter of 5 GiB, 1 GiB at most) nothing is thinned.
    let unbounded: Vec<&str> = opts.iter().copied().filter(|o| *o != "--max-host-memory" && *o != "256M").collect();
    let free = Ferrite::run(&g).opts(&unbounded).opts(&["--max-host-memory", "5G"]).args(&["30"]).go();
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&free.json("r.json")));
    let c = exploration(&free);
    assert_eq!(c["thinned"], 0, "{c}");
    assert_eq!(a["trace_hashes"], c["trace_hashes"]);
}

/// A guest that forks, under every pass and pmrace (taint tracking): both used to keep
/// exhaustive exploration from its snapshots; now every schedule after the first goes on from
/// one, and the report and chained trace hashes are those `--no-snapshots` gives.
#[test]
fn exhaustive_exploration_of_a_forking_guest_with_every_pass_goes_on_from_snapshots() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "1",
        "--explore",
        "6",
        "--analyses",
        "all,pmrace",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let with = Ferrite::run(&guest("proc_pm_race")).opts(&opts).go();
    let without = Ferrite::run(&guest("proc_pm_race")).opts(&opts).opts(&["--no-snapshots"]).go();
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")));
    let a = exploration(&with);
    assert_eq!(a["refused"], 0, "{a}");
    assert!(a["from_snapshot"].as_u64().unwrap() >= 1, "{a}");
    assert_eq!(a["trace_hashes"], exploration(&without)["trace_hashes"]);
}

/// Restores that copy back only the pages the kernel saw written (`emu::dirty`) and restores
/// that compare every page (`FERRITE_NO_DIRTY_TRACKING=1`) explore the same schedules: same
/// report, same chained trace hashes, same instructions; `--host-stats` names each one's way.
#[test]
fn exploration_is_the_same_with_and_without_dirty_page_tracking() {
    let opts = [
        "--strategy",
        "exhaustive",
        "--max-preemptions",
        "2",
        "--por",
        "--explore",
        "20",
        "--analyses",
        "hmtrace",
        "--quiet",
        "--report",
        "r.json",
        "--host-stats",
        "h.json",
    ];
    let tracked = Ferrite::run(&guest("thr_racy_counter")).opts(&opts).go();
    let compared = Ferrite::run(&guest("thr_racy_counter")).opts(&opts).host_env("FERRITE_NO_DIRTY_TRACKING", "1").go();
    assert_eq!(tracked.code, compared.code, "{}", tracked.describe());
    assert_eq!(without_timings(&tracked.json("r.json")), without_timings(&compared.json("r.json")));
    let (a, b) = (exploration(&tracked), exploration(&compared));
    assert_eq!(a["trace_hashes"], b["trace_hashes"]);
    assert_eq!(a["instructions"], b["instructions"]);
    assert!(a["from_snapshot"].as_u64().unwrap() > 5, "{a}");
    assert_eq!(compared.json("h.json")["dirty_pages"], "compare");
    let mode = tracked.json("h.json")["dirty_pages"].clone();
    assert!(mode == "uffd-wp" || mode == "compare", "{mode}");
}

/// `--explore N` under the random strategies: each worker's later schedules go on from a
/// snapshot of their common start (where a second thread could first run), reseeded, and run
/// the same schedules (the chained trace hashes), with the same report, as running each from
/// the start (`--no-snapshots`), for `random`, `pct` and `fifo`, with delay injection, with
/// every pass, and on a PMDK program whose single-threaded start (creating a pool) is most of
/// its run; they run fewer guest instructions.
#[test]
fn random_exploration_from_a_snapshot_runs_the_same_schedules() {
    let cases: [(&str, &[&str], &[&str]); 5] = [
        ("thr_racy_counter", &[], &["--analyses", "hmtrace"]),
        ("thr_racy_counter", &[], &["--strategy", "pct", "--analyses", "hmtrace"]),
        ("thr_racy_counter", &[], &["--strategy", "fifo", "--analyses", "none"]),
        ("pr_lockfree", &[], &["--delay", "2000", "--seed", "3"]),
        ("pmdk_mutex", &["/mnt/pmem0/objpool"], &[]),
    ];
    for (name, args, extra) in cases {
        let go = |more: &[&str]| {
            Ferrite::run(&guest(name))
                .opts(&["--explore", "5", "--quiet", "--report", "r.json", "--host-stats", "h.json"])
                .opts(extra)
                .opts(more)
                .args(args)
                .go()
        };
        let (with, without) = (go(&[]), go(&["--no-snapshots"]));
        let what = format!("{name} {extra:?}");
        assert_eq!(with.code, without.code, "{what}\n{}", with.describe());
        assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{what}");
        let (a, b) = (exploration(&with), exploration(&without));
        assert_eq!(a["trace_hashes"], b["trace_hashes"], "{what}: the schedules' trace hashes");
        assert_eq!(a["instructions_from_start"], b["instructions"], "{what}");
        assert_eq!((b["from_start"].as_u64(), b["from_snapshot"].as_u64()), (Some(5), Some(0)), "{what}: {b}");
        assert_eq!(a["refused"], 0, "{what}: {a}");
        assert!(a["from_snapshot"].as_u64().unwrap() >= 1, "{what}: {a}");
        assert!(a["instructions"].as_u64() < a["instructions_from_start"].as_u64(), "{what}: {a}");
        let report = with.json("r.json");
        assert_eq!(report["run"]["schedule_seed"], report["run"]["seed"], "{what}: the first schedule's seed");
    }
}

/// A program that never has a second thread never consults its schedule seed: every schedule
/// of `--explore` is its first run, which runs once (the report is the one running each gives).
#[test]
fn random_exploration_of_a_single_threaded_program_runs_it_once_per_worker() {
    let go = |more: &[&str]| {
        Ferrite::run(&guest("pm_log"))
            .opts(&["--explore", "6", "--quiet", "--report", "r.json", "--host-stats", "h.json"])
            .opts(more)
            .args(&["/mnt/pmem0/log"])
            .go()
    };
    let (with, without) = (go(&[]), go(&["--no-snapshots"]));
    assert_eq!(with.code, 66, "{}", with.describe());
    assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")));
    let (a, b) = (exploration(&with), exploration(&without));
    assert_eq!(a["trace_hashes"], b["trace_hashes"]);
    let from_start = a["from_start"].as_u64().unwrap();
    assert_eq!(from_start + a["from_snapshot"].as_u64().unwrap(), 6, "{a}");
    assert!(from_start <= 2, "one run per worker: {a}");
    let one = b["instructions"].as_u64().unwrap() / 6;
    assert_eq!(a["instructions"].as_u64(), Some(one * from_start), "{a}");
}

/// A finding that only a later schedule of `--explore` exposes keeps that schedule's seed; the
/// report names the program seed (`run.seed`) and the first schedule's (`run.schedule_seed`);
/// `ferrite replay --finding` reproduces it, and so does `ferrite run --seed P --schedule-seed
/// S` on its own.
#[test]
fn a_later_schedules_finding_replays_and_runs_alone_with_its_two_seeds() {
    // vardalith reports this writer's race only in schedules where the writer's store comes
    // before main's locked read (docs/analyses/vardalith.md): the first schedule often has none.
    let g = guest("hs_irh_writer");
    let pool = ["/mnt/pmem0/pool"];
    for base in 0..12u64 {
        let seed = base.to_string();
        let opts = ["--explore", "6", "--seed", &seed, "--analyses", "vardalith", "--quiet"];
        let run = Ferrite::run(&g).opts(&opts).opts(&["--report", "r.json"]).args(&pool).go();
        let report = run.json("r.json");
        assert_eq!(report["run"]["seed"].as_u64(), Some(base));
        assert_eq!(report["run"]["schedule_seed"].as_u64(), Some(base));
        let Some(f) = report["findings"].as_array().unwrap().iter().find(|f| f["seed"].as_u64() != Some(base)) else {
            continue;
        };
        let id = f["id"].to_string();
        let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", &id]).go();
        assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
        let schedule = f["seed"].to_string();
        let alone = Ferrite::run(&g)
            .opts(&["--seed", &seed, "--schedule-seed", &schedule, "--analyses", "vardalith", "--quiet"])
            .opts(&["--report", "one.json"])
            .args(&pool)
            .go();
        let one = alone.json("one.json");
        let same = |g: &serde_json::Value| g["analysis"] == f["analysis"] && g["locations"] == f["locations"];
        assert!(one["findings"].as_array().unwrap().iter().any(same), "{}", alone.describe());
        assert!(one["findings"].as_array().unwrap().iter().all(|g| g["seed"] == f["seed"]));
        return;
    }
    panic!("no seed in 0..12 gave a finding of a later schedule only; cannot construct the case");
}

/// Taint tracking (pmrace) and a forking guest (with every pass) no longer keep `--explore` from
/// its snapshot: both go on from the snapshot of their common start, with the report and
/// schedules `--no-snapshots` gives.
#[test]
fn random_exploration_goes_on_from_snapshots_with_taint_and_processes() {
    for (name, analyses) in [("thr_racy_counter", "pmrace"), ("proc_pm_race", "all")] {
        let go = |more: &[&str]| {
            Ferrite::run(&guest(name))
                .opts(&["--explore", "3", "--analyses", analyses, "--quiet", "--report", "r.json"])
                .opts(&["--host-stats", "h.json"])
                .opts(more)
                .go()
        };
        let (with, without) = (go(&[]), go(&["--no-snapshots"]));
        assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{name}");
        let a = exploration(&with);
        assert_eq!(a["refused"], 0, "{name}: {a}");
        assert!(a["from_snapshot"].as_u64().unwrap() >= 1, "{name}: {a}");
        assert_eq!(a["trace_hashes"], exploration(&without)["trace_hashes"], "{name}");
    }
}

/// Machines with several processes: a forking guest (pipes between parent and children,
/// `wait4`) and one that `execve`s (itself, a script, failing programs) restore to the same run
/// from stops before, between and after their forks and execs.
#[test]
fn processes_and_execs_restore_to_the_same_run() {
    let (_, forked) = check("proc_pingpong", &["procs", "200"], 1, &[5, 300, 520, 800, 990]);
    assert!(forked >= 2, "{forked} stops with several processes");
    check("proc_fork", &["pipe", "10"], 1, &[300, 700]);
    let (_, forked) = check("proc_exec", &[], 0, &[100, 500, 750, 800, 850, 950]);
    assert!(forked >= 3, "{forked} stops with several processes");
}

/// `sh -c 'kv_server --serve POOL unix:kv.sock & kv_client unix:kv.sock N; wait'`: a PM server
/// and its client, two processes a shell started, talking over a socket.
fn kv_pair(requests: u32) -> Vec<String> {
    let cmd = format!(
        "{} --serve /mnt/pmem0/kv unix:kv.sock & {} unix:kv.sock {requests}; wait",
        guest("kv_server").display(),
        guest("kv_client").display()
    );
    vec!["-c".into(), cmd]
}

/// Explorations of programs with several processes go on from snapshots of them and run the
/// same schedules (the chained trace hashes), with the same report and exit status, as running
/// every schedule from the start (`--no-snapshots`): `--explore N` of a shell's server and
/// client from the snapshot of their common start (the shell's first fork), and
/// `--strategy exhaustive` of a forking guest talking over pipes and of the server and client
/// (sockets, the shell waiting for its children) from snapshots along each path.
#[test]
fn explorations_of_processes_go_on_from_snapshots() {
    let pair = kv_pair(4);
    let fork_args = ["pipe".to_string(), "6".to_string()];
    let cases: [(&std::path::Path, &[String], &[&str]); 3] = [
        (std::path::Path::new("/bin/sh"), &pair, &["--explore", "4"]),
        (&guest("proc_fork"), &fork_args, &["--strategy", "exhaustive", "--max-preemptions", "1", "--explore", "10"]),
        (
            std::path::Path::new("/bin/sh"),
            &pair,
            &["--strategy", "exhaustive", "--max-preemptions", "1", "--explore", "8"],
        ),
    ];
    for (program, args, extra) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let go = |more: &[&str]| {
            Ferrite::run(program)
                .opts(&["--quiet", "--analyses", "none", "--report", "r.json", "--host-stats", "h.json"])
                .opts(extra)
                .opts(more)
                .args(&args)
                .go_within(std::time::Duration::from_secs(300))
        };
        let (with, without) = (go(&[]), go(&["--no-snapshots"]));
        let what = format!("{} {extra:?}", program.display());
        assert_eq!(with.code, 0, "{what}\n{}", with.describe());
        assert_eq!(without.code, 0, "{what}\n{}", without.describe());
        assert_eq!(with.stdout, without.stdout, "{what}: the first schedule's output");
        assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{what}");
        let (a, b) = (exploration(&with), exploration(&without));
        assert_eq!(a["trace_hashes"], b["trace_hashes"], "{what}: the schedules' trace hashes");
        assert_eq!(a["instructions_from_start"], b["instructions"], "{what}");
        assert_eq!(a["refused"], 0, "{what}: {a}");
        assert!(a["from_snapshot"].as_u64().unwrap() >= 2, "{what}: {a}");
        assert!(a["instructions"].as_u64() < a["instructions_from_start"].as_u64(), "{what}: {a}");
    }
}

/// A memfd reopened by a snapshot is the same memory, so a run restored from it would read what
/// an earlier run wrote after the snapshot: explorations of a guest with a memfd open run every
/// schedule from the start (saying why), and each schedule is the run alone.
#[test]
fn a_guest_holding_a_memfd_is_not_snapshotted() {
    let opts = ["--explore", "4", "--report", "r.json", "--host-stats", "h.json"];
    let with = Ferrite::run(&guest("memfd_shared")).opts(&opts).go();
    with.assert_code(0);
    assert_eq!(with.stdout_str(), "b\n");
    let e = exploration(&with);
    assert_eq!(e["from_snapshot"], 0, "{e}");
    assert!(e["refused_why"].as_str().is_some_and(|w| w.contains("memfd")), "{e}");
    let without = Ferrite::run(&guest("memfd_shared")).opts(&opts).opts(&["--no-snapshots"]).go();
    assert_eq!(exploration(&with)["trace_hashes"], exploration(&without)["trace_hashes"]);
}
