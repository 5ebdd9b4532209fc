//! What a long run shows and leaves behind. Interrupted, ferrite leaves nothing: SIGINT,
//! SIGTERM, SIGHUP and SIGABRT remove its private temporary directory (`$TMPDIR/ferrite-PID-N`,
//! with the PM directories, their copies for `--explore` and crash testing's images in it) and
//! end ferrite with status 128+N, even while rayon workers are running guests in it; a single
//! `ferrite run` (or its `--explore N`) first stops its guests and ends with its findings and
//! report. Watched
//! through a pipe or a log file, a crash campaign prints plain progress lines.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// What ferrite left in `tmp`.
fn leftovers(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// Starts `ferrite ARGS` with `TMPDIR=tmp`, waits until its temporary directory is not empty
/// (a PM directory exists: the guests are running), sends `sig`, and returns its exit status
/// and stderr.
fn interrupt(args: &[&str], tmp: &Path, sig: i32) -> (i32, String) {
    interrupt_after(args, tmp, sig, Duration::from_millis(300))
}

/// [`interrupt`], letting the guests run for `wait` before the signal.
fn interrupt_after(args: &[&str], tmp: &Path, sig: i32, wait: Duration) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .env("TMPDIR", tmp)
        .current_dir(tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    // The private directory, then a PM directory in it.
    loop {
        let busy = std::fs::read_dir(tmp)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("ferrite-"))
            .any(|e| std::fs::read_dir(e.path()).map(|mut d| d.next().is_some()).unwrap_or(false));
        if busy {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "ferrite ended before it was interrupted");
        assert!(start.elapsed() < Duration::from_secs(30), "ferrite made no temporary directory");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the guests run a little.
    std::thread::sleep(wait);
    // SAFETY: kill(2) of the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("ferrite did not end within 30 s of signal {sig}");
        }
    };
    (shell_status(out.status), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn signals_remove_the_temporary_directory() {
    let endless = guest("endless_loop");
    let endless = endless.to_str().unwrap();
    for (sig, args) in [
        (libc::SIGINT, vec!["run", "--env-clear", "--", endless]),
        // Four schedules at once: rayon workers, each in its own copy of the PM directory.
        (libc::SIGTERM, vec!["run", "--env-clear", "--explore", "4", "--", endless]),
        (libc::SIGHUP, vec!["run", "--env-clear", "--", endless]),
        (libc::SIGABRT, vec!["run", "--env-clear", "--explore", "2", "--", endless]),
    ] {
        let tmp = scratch();
        let (code, stderr) = interrupt(&args, tmp.path(), sig);
        assert_eq!(code, 128 + sig, "signal {sig}: ferrite's status\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(leftovers(tmp.path()), Vec::<String>::new(), "signal {sig} left files behind\n{stderr}");
    }
}

#[test]
fn an_interrupted_run_ends_with_its_findings_and_replays_to_the_same_point() {
    // A service that never ends, racing from its first rounds: a harness's SIGTERM (or the
    // user's Ctrl-C) stops the run at its next block, and the run ends as at a budget, with the
    // races seen so far, its report, status 128+N, and nothing left behind but the report.
    let prog = guest("omp_forever_yes");
    let prog = prog.to_str().unwrap();
    let marked = [
        u64::from(marker_line("omp_forever_yes.c", "/* RACE: producer, under critical(fill) */")),
        u64::from(marker_line("omp_forever_yes.c", "/* RACE: consumer, under critical(drain) */")),
    ];
    for (sig, wait) in [(libc::SIGTERM, 300), (libc::SIGINT, 300), (libc::SIGTERM, 3000)] {
        let tmp = scratch();
        let args = [
            "run",
            "--env-clear",
            "--env",
            "OMP_NUM_THREADS=2",
            "--analyses",
            "hmtrace",
            "--report",
            "r.json",
            "--",
            prog,
            "forever",
        ];
        let (code, stderr) = interrupt_after(&args, tmp.path(), sig, Duration::from_millis(wait));
        assert_eq!(code, 128 + sig, "{stderr}");
        assert!(stderr.contains("ferrite: interrupted by SIG"), "{stderr}");
        assert_eq!(leftovers(tmp.path()), ["r.json"], "{stderr}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("r.json")).unwrap()).unwrap();
        assert_eq!(report["run"]["exit"]["interrupted"], sig, "{}", report["run"]);
        let stopped = report["run"]["instructions"].as_u64().unwrap();
        assert!(stopped > 0);
        let findings = report["findings"].as_array().unwrap();
        // On a loaded machine the first signals may come before the threads have raced; the
        // last comes seconds into the run (its guest races within milliseconds of starting).
        assert!(!findings.is_empty() || wait < 3000, "no race before the interrupt: {stderr}");
        for f in findings {
            assert_eq!(f["analysis"], "hmtrace", "only the races, no hang: {f}");
            let lines: Vec<u64> =
                f["locations"].as_array().unwrap().iter().filter_map(|l| l["line"].as_u64()).collect();
            assert!(lines.iter().any(|l| marked.contains(l)), "{f}");
        }
        // The replay runs to the same instruction, ends the same way, with the same trace.
        let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(["replay", "r.json", "--report-out", "again.json"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(shell_status(out.status), 128 + sig, "{err}");
        assert!(err.contains("replay reproduced the run"), "{err}");
        let again: serde_json::Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("again.json")).unwrap()).unwrap();
        assert_eq!(again["run"]["instructions"], stopped);
        assert_eq!(again["run"]["exit"], report["run"]["exit"]);
        assert_eq!(again["findings"], report["findings"]);
    }
}

#[test]
fn an_interrupted_exploration_keeps_the_schedules_that_ended_and_each_finding_replays() {
    // Far more schedules than can run before the signal: the schedules under way stop, none
    // starts after, and the report holds those that ended (and the first, wherever it stopped).
    let racy = guest("thr_racy_counter");
    let lost = guest("thr_lost_update");
    let pmrace = guest("pr_clht");
    let random = ["--analyses", "hmtrace", "--explore", "100000", "--", racy.to_str().unwrap()];
    // PMRace's search: its runs hold readers; only the first run may be kept stopped.
    let targeted = [
        "--analyses",
        "pmrace",
        "--strategy",
        "pmrace",
        "--explore",
        "100000",
        "--",
        pmrace.to_str().unwrap(),
        "/mnt/pmem0/pool",
    ];
    let exhaustive = [
        "--analyses",
        "hmtrace",
        "--strategy",
        "exhaustive",
        "--preempt",
        "all",
        "--max-preemptions",
        "2",
        "--explore",
        "100000",
        "--",
        lost.to_str().unwrap(),
    ];
    for how in [&random[..], &exhaustive[..], &targeted[..]] {
        let tmp = scratch();
        let args: Vec<&str> = ["run", "--env-clear", "--report", "r.json"].iter().chain(how).copied().collect();
        let (code, stderr) = interrupt_after(&args, tmp.path(), libc::SIGINT, Duration::from_millis(3000));
        assert_eq!(code, 128 + libc::SIGINT, "{how:?}\n{stderr}");
        assert!(stderr.contains("ferrite: interrupted by SIGINT:"), "{stderr}");
        assert_eq!(leftovers(tmp.path()), ["r.json"], "{stderr}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("r.json")).unwrap()).unwrap();
        assert_eq!(report["run"]["interrupted"], libc::SIGINT, "{}", report["run"]);
        let ran = report["run"]["schedules"].as_u64().unwrap();
        assert!((1..100000).contains(&ran), "{}", report["run"]);
        let findings = report["findings"].as_array().unwrap();
        // The programs race in every schedule; only a first schedule stopped early (a slow
        // debug build on a loaded machine) may not have raced yet.
        assert!(!findings.is_empty() || ran == 1, "{how:?}: {stderr}");
        assert_each_replays(tmp.path(), findings.iter());
    }
}

/// `ferrite replay r.json --finding ID` in `dir` reproduces each of `findings`.
#[track_caller]
fn assert_each_replays<'a>(dir: &Path, findings: impl Iterator<Item = &'a serde_json::Value>) {
    for f in findings {
        let id = f["id"].as_u64().unwrap().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(["replay", "r.json", "--finding", &id])
            .current_dir(dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("replay reproduced finding {id}")), "{err}");
    }
}

#[test]
fn a_pm_service_stopped_by_its_budget_keeps_the_races_seen() {
    // A PM service that never ends: the run stops at the budget (as at an interrupt), and the
    // races hawkset, vardalith and oscs saw by then stand; hawkset and vardalith are silent on
    // the fixed twin.
    let marked =
        [marker_line("pm_service_race.c", "/* BUG:"), marker_line("pm_service_race.c", "/* LOAD:")].map(u64::from);
    for (program, racy) in [("pm_service_race", true), ("pm_service_race_fixed", false)] {
        let run = Ferrite::run(&guest(program))
            .opts(&["--analyses", "hawkset,vardalith,oscs", "--report", "r.json", "--max-instructions", "3000000"])
            .args(&["/mnt/pmem0/p", "forever"])
            .go();
        assert_eq!(run.code, 66, "{}", run.describe());
        let report = run.json("r.json");
        assert_eq!(report["run"]["exit"]["hang"], true, "{}", report["run"]);
        let findings: Vec<&serde_json::Value> = report["findings"].as_array().unwrap().iter().collect();
        let of = |a: &str| findings.iter().filter(|f| f["analysis"] == a).copied().collect::<Vec<_>>();
        for pass in ["hawkset", "vardalith"] {
            let found = of(pass);
            if racy {
                assert_eq!(found.len(), 1, "{pass}: {}", show_findings(&findings));
                let lines = finding_lines(found[0]);
                assert!(marked.iter().all(|m| lines.contains(m)), "{pass}: {}", show_findings(&found));
            } else {
                assert!(found.is_empty(), "{pass}: {}", show_findings(&found));
            }
        }
        // The counter's critical sections are order-sensitive in both (OSCS's class).
        assert!(!of("oscs").is_empty(), "{}", show_findings(&findings));
    }
}

#[test]
fn a_second_interrupt_ends_a_run_whose_guest_waits_on_the_host() {
    // `cat` waits in a host read that never returns: the run cannot reach its next block, so
    // the first interrupt changes nothing visible, and the second ends ferrite at once.
    let tmp = scratch();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["run", "--env-clear", "--", "/bin/cat"])
        .env("TMPDIR", tmp.path())
        .current_dir(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) of the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the first interrupt ended a run that cannot stop");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the second interrupt did not end ferrite");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(shell_status(status), 128 + libc::SIGINT);
    drop(child.stdin.take());
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

#[test]
fn an_interrupted_crash_campaign_leaves_nothing() {
    // Recoveries of every crash image of a workload that makes many, interrupted while the
    // images' directories exist.
    let prog = guest("pm_log");
    let prog = prog.to_str().unwrap();
    let recover = format!("{prog} /mnt/pmem0/log check");
    let tmp = scratch();
    let args = [
        "crash",
        "--env-clear",
        "--jobs",
        "2",
        "--crash-points",
        "stores",
        "--recover",
        &recover,
        "--",
        prog,
        "/mnt/pmem0/log",
    ];
    let (code, stderr) = interrupt(&args, tmp.path(), libc::SIGTERM);
    // The campaign may have ended by itself before the signal came (status 66, findings).
    assert!(code == 128 + libc::SIGTERM || code == 66, "status {code}\n{stderr}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new(), "{stderr}");
}

#[test]
fn an_interrupted_crash_campaign_keeps_its_failures_and_each_replays() {
    // Far more schedules than can run before the signal: pm_log fails recoveries in its first
    // schedule, and its later schedules find those images recovered already. The campaign stops
    // where it is (a harness's timeout), reports what it found and says so; each failure replays.
    let prog = guest("pm_log");
    let prog = prog.to_str().unwrap();
    let recover = format!("{prog} /mnt/pmem0/log check");
    let tmp = scratch();
    let args = [
        "crash",
        "--env-clear",
        "--explore",
        "100000",
        "--recover",
        &recover,
        "--report",
        "r.json",
        "--",
        prog,
        "/mnt/pmem0/log",
    ];
    let (code, stderr) = interrupt_after(&args, tmp.path(), libc::SIGTERM, Duration::from_millis(4000));
    assert_eq!(code, 128 + libc::SIGTERM, "{stderr}");
    assert!(stderr.contains("ferrite: interrupted by SIGTERM: crash testing stopped"), "{stderr}");
    assert_eq!(leftovers(tmp.path()), ["r.json"], "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(tmp.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(report["crash"]["interrupted"], libc::SIGTERM, "{}", report["crash"]);
    let ran = report["run"]["schedules"].as_u64().unwrap();
    assert!((1..100000).contains(&ran), "{}", report["run"]);
    let failures: Vec<&serde_json::Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["analysis"] == "crash").collect();
    // Failing images of one shape are one finding (its occurrences count them).
    assert_eq!(failures.is_empty(), report["crash"]["failures"] == 0, "{}", report["crash"]);
    // Only a first schedule the signal stopped (a slow debug build on a loaded machine) may
    // have found nothing yet.
    assert!(!failures.is_empty() || ran == 1, "{stderr}");
    assert_each_replays(tmp.path(), failures.into_iter());
}

#[test]
fn an_interrupted_comparison_scores_what_ran_in_full() {
    // The whole suite cannot run in the time before the signal: no run starts after it, the
    // runs under way are dropped, and the report scores the pairs that ran and says so.
    let tmp = scratch();
    let suite = repo().join("guests/manifest.ron");
    let args =
        ["compare", "--suite", suite.to_str().unwrap(), "--analyses", "hawkset", "--jobs", "1", "--report", "c.json"];
    let (code, stderr) = interrupt_after(&args, tmp.path(), libc::SIGINT, Duration::from_millis(3000));
    assert_eq!(code, 128 + libc::SIGINT, "{stderr}");
    assert!(stderr.contains("ferrite: interrupted by SIGINT:"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(tmp.path().join("c.json")).unwrap()).unwrap();
    assert_eq!(report["interrupted"], libc::SIGINT);
    let hawkset = &report["detectors"][0];
    let planned = report["cases"].as_array().unwrap().len() as u64;
    assert!(hawkset["cases"].as_u64().unwrap() < planned, "{hawkset}");
    // Each scored case has a cell; the others are blank (no cell for the detector).
    let scored = report["cases"].as_array().unwrap().iter().filter(|c| !c["detectors"]["hawkset"].is_null()).count();
    assert_eq!(scored as u64, hawkset["cases"].as_u64().unwrap(), "{hawkset}");
}

#[test]
fn a_crash_campaign_prints_progress_lines_on_a_pipe() {
    let prog = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    let run = Ferrite::crash(&prog)
        .opts(&["--analyses", "none", "--crash-points", "stores", "--recover", &recover])
        .args(&["/mnt/pmem0/log"])
        .host_env("FERRITE_PROGRESS_SECS", "0.01")
        .go();
    run.assert_code(66);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| {
            l.strip_prefix("ferrite: crash testing: ")
                .and_then(|rest| rest.split_once(' '))
                .and_then(|(count, _)| count.split_once('/'))
                .is_some_and(|(done, total)| done.parse::<u64>().is_ok() && total.parse::<u64>().is_ok())
        })
        .collect();
    assert!(!lines.is_empty(), "no progress line\n{}", run.describe());
    // With --quiet, none.
    let quiet = Ferrite::crash(&prog)
        .opts(&["--quiet", "--analyses", "none", "--crash-points", "stores", "--recover", &recover])
        .args(&["/mnt/pmem0/log"])
        .host_env("FERRITE_PROGRESS_SECS", "0.01")
        .go();
    assert_eq!(quiet.stderr, "", "{}", quiet.describe());
}
