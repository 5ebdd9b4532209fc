//! ferrite's own memory (issue 18): `--max-host-memory` ends a run that grows past it with an
//! `error:` line, exit status 2 and no temporary directory left behind, instead of the kernel's
//! OOM killer; a guest that dies (or gives up with a failure status) after `--max-memory`
//! refused it memory is told so; and a 1 GiB libpmemobj pool with a small workload crash-tests
//! in memory that follows the lines touched, not the pool (each crash point and image used to
//! hold a whole copy of every PM file).
//!
//! Peak RSS is the kernel's (`getrusage(RUSAGE_CHILDREN)`: the largest of this test process's
//! children). The other tests here run small children, so the bound holds whatever order the
//! tests run in.

mod common;

use common::*;

/// The largest peak RSS (bytes) of any child this process has waited for.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes into the struct it is given and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    assert_eq!(rc, 0);
    ru.ru_maxrss as u64 * 1024
}

#[test]
fn growing_past_max_host_memory_ends_the_run_with_an_error() {
    // 64 MiB of PM, every line stored to and never persisted: the device keeps about 130 B a
    // line, some 140 MiB in all.
    let tmp = scratch();
    let touch = |limit: &str| {
        Ferrite::run(&guest("pm_touch_lines"))
            .opts(&["--analyses", "none", "--max-host-memory", limit])
            .args(&["/mnt/pmem0/touch", "64M", "1", "store"])
            .host_env("TMPDIR", tmp.path().to_str().unwrap())
            .go()
    };
    let r = touch("24M");
    r.assert_code(2);
    let errors = error_lines(&r.stderr);
    assert_eq!(errors.len(), 1, "{}", r.describe());
    assert!(
        errors[0].contains("--max-host-memory") && errors[0].contains("PM device"),
        "the error names the option and what grew: {}",
        r.describe()
    );
    assert!(!r.stdout_str().contains("touched"), "the run was stopped before the guest finished: {}", r.describe());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
    // The same run within a limit it fits in.
    let r = touch("1G");
    r.assert_code(0);
    assert!(r.stdout_str().contains("touched 1048576 lines"), "{}", r.describe());
    // Bad values are the option parser's error.
    let r = touch("lots");
    r.assert_code(2);
}

#[test]
fn a_guest_refused_memory_by_max_memory_is_told_so() {
    let run = |mib: &str| {
        Ferrite::run(&guest("mem_too_big")).opts(&["--analyses", "none", "--max-memory", "64M"]).args(&[mib]).go()
    };
    let r = run("100");
    r.assert_code(128 + 11);
    let warning: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("ferrite: warning:")).collect();
    assert_eq!(warning.len(), 1, "{}", r.describe());
    assert!(
        warning[0].contains("ENOMEM") && warning[0].contains("--max-memory") && warning[0].contains("104857600"),
        "{}",
        r.describe()
    );
    // Within the limit: no fault, no warning.
    let r = run("10");
    r.assert_code(0);
    assert!(!r.stderr.contains("warning"), "{}", r.describe());
}

/// A guest that checks its mmap and gives up with a failure status (a PM program told "Cannot
/// allocate memory" for its pool) is told which limit it met too.
#[test]
fn a_guest_that_gives_up_after_max_memory_refused_it_is_told_so() {
    let r = Ferrite::run(&guest("pm_touch_lines"))
        .opts(&["--analyses", "none", "--max-memory", "64M"])
        .args(&["/mnt/pmem0/pool", "128M", "1", "store"])
        .go();
    r.assert_code(2);
    let warning: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("ferrite: warning:")).collect();
    assert_eq!(warning.len(), 1, "{}", r.describe());
    assert!(
        warning[0].contains("exited with status 2")
            && warning[0].contains("ENOMEM")
            && warning[0].contains("--max-memory")
            && warning[0].contains("134217728"),
        "{}",
        r.describe()
    );
    // A pool within the limit: no warning.
    let r = Ferrite::run(&guest("pm_touch_lines"))
        .opts(&["--analyses", "none", "--max-memory", "64M"])
        .args(&["/mnt/pmem0/pool", "1M", "1", "store"])
        .go();
    r.assert_code(0);
    assert!(!r.stderr.contains("warning"), "{}", r.describe());
}

#[test]
fn a_one_gib_pool_crash_tests_in_memory_that_follows_the_lines_touched() {
    let program = guest("pmdk_big_pool");
    let recover = format!("{} /mnt/pmem0/pool 1G 2 check", program.display());
    let r = Ferrite::crash(&program)
        .opts(&[
            "--analyses",
            "none",
            "--jobs",
            "1",
            "--max-images",
            "2",
            "--recover",
            recover.as_str(),
            "--report",
            "c.json",
        ])
        .args(&["/mnt/pmem0/pool", "1G", "2"])
        .go();
    r.assert_code(0);
    assert_eq!(r.stdout_str().lines().next(), Some("inserted 2"), "{}", r.describe());
    let c = get(&r.json("c.json"), "crash").clone();
    assert_eq!(c["failures"].as_u64(), Some(0), "{c}");
    let points = c["crash_points"].as_u64().unwrap();
    assert!(points >= 20 && c["recoveries"].as_u64().unwrap() >= points, "{c}");
    // A whole copy of the pool per crash point was 1 GiB each; the workload and the recoveries
    // touch a few MiB of it.
    let peak = children_peak_rss();
    eprintln!("pmdk_big_pool 1G: {c}, peak RSS {} MiB", peak >> 20);
    assert!(peak < 1 << 30, "peak RSS {} MiB", peak >> 20);
}
