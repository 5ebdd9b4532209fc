//! Timers on the virtual clock and signals that interrupt blocked calls (issue 25): `alarm`,
//! `setitimer`, POSIX timers with glibc's `SIGEV_THREAD`, `sigtimedwait`, `pause`, sleeps,
//! futex waits and reads cut short by `pthread_kill`, and the masks of `ppoll`, `pselect6` and
//! `epoll_pwait` — the `sig_alarm` guest, compared with its native run, under several
//! schedules, and replayed with the same trace hash; and a periodic timer whose signal nobody
//! takes, which must not hide a deadlock.

mod common;

use std::time::Duration;

use common::*;

fn trace_hash(report: &serde_json::Value) -> String {
    get(report, "run.trace_hash").as_str().expect("trace_hash is a string").to_string()
}

#[test]
fn sig_alarm_matches_native_static_and_dynamic() {
    for name in ["sig_alarm", "sig_alarm.dyn"] {
        let prog = guest(name);
        let nat = native(&prog, &[], &[]);
        nat.assert_code(0);
        assert!(nat.stdout_str().contains("SIGEV_THREAD: 3 callbacks, value 42"), "{}", nat.describe());
        let emu = Ferrite::run(&prog).go_within(Duration::from_secs(120));
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        assert!(!emu.stderr.contains("unsupported"), "{}", emu.describe());
    }
}

#[test]
fn sig_alarm_is_right_under_every_strategy_and_seed() {
    let expected = native(&guest("sig_alarm"), &[], &[]).stdout_str();
    for (strategy, seed) in [("random", 1u64), ("random", 9), ("pct", 3), ("fifo", 1)] {
        let run = Ferrite::run(&guest("sig_alarm"))
            .opts(&["--analyses", "none", "--strategy", strategy, "--seed", &seed.to_string()])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), expected, "{strategy} seed {seed}\n{}", run.describe());
    }
}

#[test]
fn timer_runs_are_deterministic_and_do_not_depend_on_the_analyses() {
    let hash = |analyses: &str| {
        let run = Ferrite::run(&guest("sig_alarm"))
            .opts(&["--seed", "5", "--analyses", analyses, "--report", "r.json"])
            .go_within(Duration::from_secs(180));
        run.assert_code(0);
        trace_hash(&run.json("r.json"))
    };
    let first = hash("none");
    assert_eq!(first, hash("none"), "two runs with one seed");
    assert_eq!(first, hash("all"), "the analyses change the schedule");
}

#[test]
fn a_replayed_timer_run_has_the_same_trace_hash() {
    let run = Ferrite::run(&guest("sig_alarm"))
        .opts(&["--seed", "11", "--report", "r.json"])
        .go_within(Duration::from_secs(120));
    run.assert_code(0);
    let replay = Ferrite::replay(&run.path("r.json")).go_within(Duration::from_secs(120));
    replay.assert_code(0);
    assert!(replay.stderr.contains("replay reproduced the run"), "{}", replay.describe());
}

#[test]
fn a_timer_nobody_takes_does_not_hide_a_deadlock() {
    let line = marker_line("sig_timer_blocked.c", "/* BLOCKED FOREVER */");
    // Natively the guest hangs forever: an endless series of clock jumps must fail, not hang.
    let run =
        Ferrite::run(&guest("sig_timer_blocked")).opts(&["--report", "r.json"]).go_within(Duration::from_secs(60));
    run.assert_code(66);
    assert_eq!(run.stdout_str(), "waiting with a blocked periodic timer\n");
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.deadlock"), &serde_json::Value::Bool(true), "{}", get(&report, "run.exit"));
    assert!(run.stderr.contains(&format!("sig_timer_blocked.c:{line}")), "{}", run.describe());
}

/// Each `(guest, strategy, seed)` run under ferrite exits 0 and prints `expected`, the native
/// run's output.
#[track_caller]
fn assert_as_native(expected: &str, runs: &[(&str, &str, u64)]) {
    for &(name, strategy, seed) in runs {
        let run = Ferrite::run(&guest(name))
            .opts(&["--analyses", "none", "--strategy", strategy, "--seed", &seed.to_string()])
            .go_within(Duration::from_secs(180));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), expected, "{name} {strategy} seed {seed}\n{}", run.describe());
    }
}

/// POSIX timers on a thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`, another thread's
/// `pthread_getcpuclockid` id, with `SIGEV_THREAD_ID`), on a child's `clock_getcpuclockid`
/// clock, and Linux's errors for clocks a timer cannot use (`cpu_timers`), compared with the
/// host under several strategies and seeds. The base refused every such timer with EINVAL.
#[test]
fn timers_on_thread_and_other_process_cpu_clocks_match_native() {
    // Linux checks CPU timers at its ticks, so on a loaded host the native oracle can miss
    // expiries of a 5 ms period ("between 7 and 11 expiries: no"); ferrite's clock is exact. The
    // oracle is run again (up to five times) until the host kept time.
    let nat = (0..5)
        .map(|_| native(&guest("cpu_timers"), &[], &[]))
        .find(|n| !n.stdout_str().contains("expiries: no"))
        .unwrap_or_else(|| native(&guest("cpu_timers"), &[], &[]));
    nat.assert_code(0);
    let expected = nat.stdout_str();
    assert!(expected.contains("another thread's clock: signal SIGUSR2"), "{}", nat.describe());
    assert_as_native(
        &expected,
        &[
            ("cpu_timers", "random", 1),
            ("cpu_timers", "random", 9),
            ("cpu_timers", "pct", 3),
            ("cpu_timers", "fifo", 1),
            ("cpu_timers.dyn", "random", 1),
        ],
    );
}

/// A thread computing without system calls while another sleeps: the sleeper wakes at its
/// deadline (the machine's timer stop), where the base never woke it and reported a hang.
#[test]
fn a_sleeper_wakes_while_the_only_other_thread_computes() {
    for name in ["sleep_beside_spin", "sleep_beside_spin.dyn"] {
        let run = Ferrite::run(&guest(name)).opts(&["--analyses", "none"]).go_within(Duration::from_secs(60));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), "the sleeper woke and stopped the spinner\n", "{name}");
    }
}

/// Which blocking calls a handled signal restarts, with and without `SA_RESTART`
/// (`sig_restart`): as Linux decides by the call's restart code — descriptors, `wait4`,
/// `flock`, futex waits without a timeout and futex2's with one restarted; the classic futex
/// wait with a timeout, sleeps, poll/epoll/select, `sigtimedwait` and socket calls with
/// `SO_RCVTIMEO`/`SO_SNDTIMEO` EINTR — and the socket timeouts themselves (EAGAIN when they
/// pass, Linux's rounding and errors), compared with the host under several strategies. The
/// base returned EINTR from futex2's timed wait, restarted the socket calls with a timeout, and
/// never timed a socket out (a deadlock).
#[test]
fn a_handled_signal_restarts_the_calls_linux_restarts() {
    let nat = native(&guest("sig_restart"), &[], &[]);
    nat.assert_code(0);
    let expected = nat.stdout_str();
    assert!(expected.contains("futex_wait, timeout                  SA_RESTART:    0"), "{}", nat.describe());
    assert_as_native(
        &expected,
        &[
            ("sig_restart", "random", 1),
            ("sig_restart", "pct", 3),
            ("sig_restart", "fifo", 1),
            ("sig_restart.dyn", "random", 1),
        ],
    );
}

/// A sleep or a timed `FUTEX_WAIT` woken for a signal that then has no handler to run goes on
/// for the time it had left, as Linux's restart block (`hrtimer_nanosleep_restart`,
/// `futex_wait_restart`) makes it, and a stop and continue leaves it its deadline
/// (`restart_left`, compared with the host). A signal ignored right after it was sent may be
/// taken by the handler first on Linux (EINTR, early) or be gone (the call goes on, about its
/// time in all): either is Linux's; the base made the sleep last its whole time again (1.3 s).
#[test]
fn a_call_made_again_after_an_undelivered_signal_waits_only_for_the_time_left() {
    let nat = native(&guest("restart_left"), &[], &[]);
    nat.assert_code(0);
    let lines = |out: &str| out.lines().map(str::to_string).collect::<Vec<_>>();
    let expected = lines(&nat.stdout_str());
    assert!(expected[0].ends_with(": 0, about its time"), "{}", nat.describe());
    for (name, strategy, seed) in [
        ("restart_left", "random", 1u64),
        ("restart_left", "pct", 3),
        ("restart_left", "fifo", 1),
        ("restart_left.dyn", "random", 2),
    ] {
        let run = Ferrite::run(&guest(name))
            .opts(&["--analyses", "none", "--strategy", strategy, "--seed", &seed.to_string()])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        let got = lines(&run.stdout_str());
        assert_eq!(got.len(), expected.len(), "{name} {strategy}\n{}", run.describe());
        // Stops and continues, and the handled signal's time left: as natively.
        assert_eq!(got[..4], expected[..4], "{name} {strategy}\n{}", run.describe());
        for (line, call) in got[4..].iter().zip(["nanosleep", "FUTEX_WAIT"]) {
            let gone = if call == "nanosleep" { "0" } else { "Connection timed out" };
            let allowed = [
                format!("{call} of 1 s, its signal ignored once sent: {gone}, about its time"),
                format!("{call} of 1 s, its signal ignored once sent: Interrupted system call, early"),
            ];
            assert!(allowed.contains(line), "{name} {strategy}: {line:?} is not Linux's\n{}", run.describe());
        }
    }
}

/// `clock_nanosleep` on another thread's, the process's own and a child's CPU clock
/// (`cpu_nsleep`): the sleeper wakes once that clock has advanced by the time asked, however
/// long its thread was blocked first; a signal cuts it short with the CPU time left; Linux's
/// errors. The base slept on the boot clock (and said EINVAL for a descriptor's clock).
#[test]
fn a_sleep_on_a_cpu_clock_lasts_until_that_clock_gets_there() {
    for name in ["cpu_nsleep", "cpu_nsleep.dyn"] {
        let nat = native(&guest(name), &[], &[]);
        nat.assert_code(0);
        let expected = nat.stdout_str();
        assert!(
            expected.contains("relative sleep on another thread's clock: 0, it ran >= 20 ms: 1"),
            "{}",
            nat.describe()
        );
        assert_as_native(&expected, &[(name, "random", 1), (name, "pct", 3), (name, "fifo", 1)]);
    }
}
