//! What a long run shows and leaves behind. Interrupted, ferrite leaves nothing: SIGINT,
//! SIGTERM, SIGHUP and SIGABRT remove its private temporary directory (`$TMPDIR/ferrite-PID-N`,
//! with the PM directories, their copies for `--explore` and crash testing's images in it) and
//! end ferrite with status 128+N, even while rayon workers are running guests in it. Watched
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
    std::thread::sleep(Duration::from_millis(300));
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
