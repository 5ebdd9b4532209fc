//! The fifth sweep (docs/testing.md): hostile inputs for the subcommands beyond `run` and
//! `replay` (`merge`, `slurm`, `compare` manifests, `--config`), and hostile conditions (a full
//! file system or a file-size limit under the report, closed or full standard streams, two
//! ferrites on one `--pm-dir`, `TMPDIR` not a directory). Each ends ferrite with one `error:`
//! line and status 2, or as it should, within a time limit, and leaves nothing half-written.
//! Every test here failed on the binary before the sweep (a hang, a panic, a kill by SIGXFSZ,
//! an abort, or the bad input accepted); mutated parts, manifests and configurations are in
//! tests/never_panics.rs.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// What one ferrite command did.
struct Out {
    code: i32,
    stderr: String,
    secs: f64,
}

/// Runs `cmd` (a ferrite command) in `dir`, killing it and failing the test past `limit`.
fn within(mut cmd: Command, dir: &Path, limit: Duration) -> Out {
    let shown = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.current_dir(dir).stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hang: {shown} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Out { code: shell_status(status), stderr: reader.join().unwrap(), secs: start.elapsed().as_secs_f64() }
}

/// `ferrite ARGS` in `dir`, stdout discarded, within `limit`.
fn fx<S: AsRef<OsStr>>(args: &[S], dir: &Path, limit: Duration) -> Out {
    let mut cmd = ferrite();
    cmd.args(args).stdout(Stdio::null());
    within(cmd, dir, limit)
}

/// A clean refusal: status 2, exactly one `error:` line, which mentions `mention`.
#[track_caller]
fn refused(what: &str, o: &Out, mention: &str) {
    assert!(!o.stderr.contains("panicked"), "{what}: panic\n{}", o.stderr);
    assert_eq!(o.code, 2, "{what}: status {}\n{}", o.code, o.stderr);
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{what}: not one error line\n{}", o.stderr);
    assert!(errors[0].contains(mention), "{what}: the error should mention `{mention}`\n{}", o.stderr);
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path alive through the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// The two parts of pm_log's crash campaign in two shards, in `dir`.
fn two_parts(dir: &Path) {
    let g = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", g.display());
    for i in 0..2 {
        let part = dir.join(format!("p{i}.json"));
        let shard = format!("{i}/2");
        let o = fx(
            &["crash", "--quiet", "--env-clear", "--recover", &recover, "--shard", &shard, "--report"]
                .map(OsStr::new)
                .into_iter()
                .chain([part.as_os_str(), OsStr::new("--"), g.as_os_str(), OsStr::new("/mnt/pmem0/log")])
                .collect::<Vec<_>>(),
            dir,
            Duration::from_secs(300),
        );
        assert_eq!(o.code, 0, "shard {i}\n{}", o.stderr);
    }
}

/// A FIFO, `/dev/zero`, a directory and a sparse 2 GiB file as a part: each refused at once.
/// The FIFO and `/dev/zero` hung merge (it read them whole); the sparse file was read into
/// 2 GiB of memory before its first byte was found not to be JSON.
#[test]
fn merge_refuses_special_and_huge_parts_at_once() {
    let dir = scratch();
    let d = dir.path();
    two_parts(d);
    mkfifo(&d.join("fifo.json"));
    std::fs::create_dir(d.join("dir.json")).unwrap();
    let sparse = std::fs::File::create(d.join("sparse.json")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    for (part, mention) in [
        ("fifo.json", "a FIFO"),
        ("/dev/zero", "a character device"),
        ("dir.json", "a directory"),
        ("sparse.json", "line 1 column 1"),
    ] {
        let o = fx(&["merge", part, "p1.json", "--report", "m.json"], d, Duration::from_secs(20));
        refused(&format!("merge {part}"), &o, mention);
        assert!(o.secs < 10.0, "merge {part} took {:.1} s", o.secs);
    }
    // The real parts still merge.
    let o = fx(&["merge", "--quiet", "p0.json", "p1.json", "--report", "m.json"], d, Duration::from_secs(60));
    assert!(matches!(o.code, 0 | 66), "{}", o.stderr);
    assert!(d.join("m.json").is_file());
}

/// A report path that is a directory or in a directory that does not exist is refused before
/// the run: a run that would end at its instruction budget (minutes) is not started.
#[test]
fn an_output_that_cannot_be_written_is_refused_before_the_run() {
    let dir = scratch();
    let d = dir.path();
    std::fs::create_dir(d.join("dir.json")).unwrap();
    let spin = guest("endless_loop");
    let spin = spin.to_str().unwrap();
    let pm_log = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", pm_log.display());
    let pm_log = pm_log.to_str().unwrap();
    for (report, mention) in [("dir.json", "is a directory"), ("no/such/r.json", "does not exist")] {
        let o = fx(&["run", "--report", report, "--", spin], d, Duration::from_secs(20));
        refused(&format!("run --report {report}"), &o, mention);
        let o = fx(
            &["crash", "--recover", &recover, "--report", report, "--", pm_log, "/mnt/pmem0/log"],
            d,
            Duration::from_secs(20),
        );
        refused(&format!("crash --report {report}"), &o, mention);
        let o = fx(&["merge", "x.json", "--report", report], d, Duration::from_secs(20));
        refused(&format!("merge --report {report}"), &o, mention);
    }
    let o = fx(&["compare", "--suite", "none.ron", "--report", "dir.json"], d, Duration::from_secs(20));
    refused("compare --report dir.json", &o, "is a directory");
}

/// A report that does not fit (a file-size limit here; a full file system alike) is one
/// `error:` line and status 2, and the older report at its path is left whole, with no
/// temporary beside it. ferrite was killed by SIGXFSZ (153) with the first 4 KiB of the new
/// report in place of the old one.
#[test]
fn a_report_that_does_not_fit_leaves_the_older_one() {
    use std::os::unix::process::CommandExt as _;
    let dir = scratch();
    let d = dir.path();
    let old = b"{\"an\": \"older report\"}\n";
    std::fs::write(d.join("r.json"), old).unwrap();
    let mut cmd = ferrite();
    cmd.args(["run", "--quiet", "--env-clear", "--report", "r.json", "--"]).arg(guest("pm_log")).arg("/mnt/pmem0/log");
    cmd.stdout(Stdio::null());
    // SAFETY: setrlimit(2) in the child before exec, on a struct alive through the call.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 4096, rlim_max: 4096 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        })
    };
    let o = within(cmd, d, Duration::from_secs(60));
    refused("a report over RLIMIT_FSIZE", &o, "r.json");
    assert_eq!(std::fs::read(d.join("r.json")).unwrap(), old, "the older report was overwritten");
    let names: Vec<String> =
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["r.json"], "a temporary was left behind");
    // A report that fits replaces the older one and keeps the permissions its owner gave it.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(d.join("r.json"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = fx(
        &[
            "run",
            "--quiet",
            "--env-clear",
            "--report",
            "r.json",
            "--",
            guest("pm_log").to_str().unwrap(),
            "/mnt/pmem0/log",
        ],
        d,
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 66, "{}", o.stderr);
    assert_ne!(std::fs::read(d.join("r.json")).unwrap(), old);
    assert_eq!(std::fs::metadata(d.join("r.json")).unwrap().permissions().mode() & 0o777, 0o640);
}

/// Two ferrites writing one `--pm-dir` at once: the second is refused (the guests' PM files
/// would mix); a report inside the PM directory is refused too (it would be the next run's
/// input). Both ran on the base.
#[test]
fn one_pm_dir_has_one_writer() {
    let dir = scratch();
    let d = dir.path();
    std::fs::create_dir(d.join("pm")).unwrap();
    let spin = guest("endless_loop");
    let mut first = ferrite();
    first.args(["run", "--quiet", "--pm-dir", "pm", "--"]).arg(&spin);
    let first = first.current_dir(d).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // Killed however the test ends (an assertion failing below would otherwise leave it spinning).
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut first = Reap(first);
    // Until the first holds the directory: a shared lock of the test's own is refused.
    let held = || {
        use std::os::fd::AsRawFd as _;
        let f = std::fs::File::open(d.join("pm")).unwrap();
        // SAFETY: flock(2) on a descriptor alive through the call (closing it releases it).
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
    };
    let start = Instant::now();
    while !held() {
        assert!(start.elapsed() < Duration::from_secs(60), "the first run never locked --pm-dir");
        std::thread::sleep(Duration::from_millis(20));
    }
    let exit_status = guest("exit_status");
    let exit_status = exit_status.to_str().unwrap();
    let o = fx(&["run", "--pm-dir", "pm", "--", exit_status], d, Duration::from_secs(20));
    refused("a second run on the PM directory", &o, "in use by another ferrite");
    let pm_log = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", pm_log.display());
    let o = fx(
        &["crash", "--pm-dir", "pm", "--recover", &recover, "--", pm_log.to_str().unwrap(), "/mnt/pmem0/log"],
        d,
        Duration::from_secs(20),
    );
    refused("a crash campaign reading a PM directory being written", &o, "in use by another ferrite");
    // SAFETY: kill(2) of the child this test started.
    unsafe { libc::kill(first.0.id() as i32, libc::SIGINT) };
    let _ = first.0.wait();
    let o = fx(&["run", "--quiet", "--pm-dir", "pm", "--", exit_status], d, Duration::from_secs(60));
    assert!(error_lines(&o.stderr).is_empty(), "the directory is free again\n{}", o.stderr);
    let o = fx(&["run", "--pm-dir", "pm", "--report", "pm/r.json", "--", exit_status], d, Duration::from_secs(20));
    refused("a report inside --pm-dir", &o, "inside --pm-dir");
    assert!(!d.join("pm/r.json").exists());
}

/// `ferrite slurm` values that would become lines or commands of the batch script, and an
/// array larger than Slurm allows, are refused; the base wrote them into the script.
#[test]
fn slurm_values_that_would_be_script_lines_are_refused() {
    let dir = scratch();
    let d = dir.path();
    let g = guest("pm_log");
    let g = g.to_str().unwrap();
    let campaign = ["--", "crash", "--recover", g, "--", g];
    let cases: [(&[&str], &str); 6] = [
        (&["--shards", "2", "--dir", "s", "--mem", "4G\nrm -rf ~"], "--mem"),
        (&["--shards", "2", "--dir", "s", "--time", "1:00;reboot"], "--time"),
        (&["--shards", "2", "--dir", "s", "--partition", "a b"], "--partition"),
        (&["--shards", "2", "--dir", "s\n#SBATCH --x"], "--dir"),
        (&["--shards", "2", "--dir", "s%a"], "--dir"),
        (&["--shards", "4000002", "--dir", "s"], "4000001"),
    ];
    for (extra, mention) in cases {
        let mut args = vec!["slurm"];
        args.extend(extra);
        args.extend(campaign);
        let o = fx(&args, d, Duration::from_secs(20));
        refused(&format!("slurm {extra:?}"), &o, mention);
    }
    // A campaign every shard would fail at once: said now, not by the merge after the queue.
    let missing: [(&[&str], &str); 2] = [
        (&["--", "compare", "--suite", "no-such-suite.ron"], "no-such-suite.ron"),
        (&["--", "crash", "--", "./no-such-program", "x"], "./no-such-program"),
    ];
    for (campaign, mention) in missing {
        let mut args = vec!["slurm", "--shards", "2", "--dir", "s"];
        args.extend(campaign);
        let o = fx(&args, d, Duration::from_secs(20));
        refused(&format!("slurm {campaign:?}"), &o, mention);
    }
    // Zero schedules is refused by `run` as by `compare`.
    let o = fx(&["run", "--explore", "0", "--", g], d, Duration::from_secs(20));
    refused("run --explore 0", &o, "--explore");
    assert!(!d.join("s").exists(), "a script was written");
    // Slurm's own notation passes.
    let mut args =
        vec!["slurm", "--shards", "2", "--dir", "s", "--mem", "4G", "--time", "2:00:00", "--partition", "a,b"];
    args.extend(campaign);
    let o = fx(&args, d, Duration::from_secs(20));
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// Suite manifests naming files out of their build and source directories, a line 0, names
/// `--cases` cannot select, and no cases at all: each refused when the suite is read (the base
/// ran them, or scored nothing with status 0).
#[test]
fn suite_manifests_out_of_their_directories_are_refused() {
    let dir = scratch();
    let d = dir.path();
    let g = repo().join("guests");
    let suite = |cases: &str| {
        format!(
            "(build: \"{}\", sources: \"{}\", cases: [{cases}])\n",
            g.join("build").display(),
            g.join("src").display()
        )
    };
    let bug = |site: &str| {
        format!(
            r#"(name: "a", program: "pm_log", analyses: ["unpersisted"], truth: Bugs([(class: "unpersisted-store", at: [{site}])])),"#
        )
    };
    let cases = [
        (suite(r#"(name: "a", program: "../../../../bin/true", truth: BugFree),"#), "../../../../bin/true"),
        (suite(r#"(name: "a", program: "/bin/true", truth: BugFree),"#), "/bin/true"),
        (suite(r#"(name: "a", program: "", truth: BugFree),"#), "not a file name"),
        (suite(&bug(r#"Marker("../../../../etc/passwd", "root")"#)), "../../../../etc/passwd"),
        (suite(&bug(r#"Line("pm_log.c", 0)"#)), "start at 1"),
        (suite(r#"(name: "", program: "pm_log", truth: BugFree),"#), "name"),
        (suite(r#"(name: "a,b", program: "pm_log", truth: BugFree),"#), "commas"),
        (suite(""), "has no cases"),
    ];
    for (i, (text, mention)) in cases.iter().enumerate() {
        let m = d.join(format!("m{i}.ron"));
        std::fs::write(&m, text).unwrap();
        let o = fx(&[OsStr::new("compare"), OsStr::new("--suite"), m.as_os_str()], d, Duration::from_secs(30));
        refused(&format!("compare --suite {text}"), &o, mention);
    }
}

/// HawkSet's YAML nested 50,000 block sequences deep: ferrite overflowed its stack (an abort,
/// 134); now refused by its depth before it is loaded.
#[test]
fn a_deeply_nested_hawkset_config_is_one_error_line() {
    let dir = scratch();
    let d = dir.path();
    let deep = format!("adquire:\n  {}x\n", "- ".repeat(50_000));
    std::fs::write(d.join("deep.cfg"), deep).unwrap();
    let o =
        fx(&["run", "--config", "deep.cfg", "--", guest("exit_status").to_str().unwrap()], d, Duration::from_secs(30));
    refused("a deep YAML configuration", &o, "nested deeper than");
}

/// Standard error full or closed, standard output full: no panic. `--trace-syscalls`' lines
/// panicked (101) with standard error on `/dev/full`.
#[test]
fn full_or_closed_standard_streams_never_panic() {
    let dir = scratch();
    let d = dir.path();
    let prog = guest("pm_log");
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let run = |stdout: Stdio, stderr: Stdio, extra: &[&str]| {
        let mut cmd = ferrite();
        cmd.args(["run", "--env-clear"]).args(extra).arg("--").arg(&prog).arg("/mnt/pmem0/log");
        cmd.current_dir(d).stdin(Stdio::null()).stdout(stdout).stderr(stderr);
        shell_status(cmd.status().unwrap())
    };
    // Findings (66) are the run's status whatever became of the lines that said so.
    assert_eq!(run(Stdio::null(), Stdio::from(full()), &["--trace-syscalls"]), 66);
    assert_eq!(run(Stdio::from(full()), Stdio::from(full()), &["--trace-syscalls"]), 66);
    // A closed standard error: the child's descriptor 2 is a pipe whose reader is gone.
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    assert_eq!(run(Stdio::null(), Stdio::from(w), &["--trace-syscalls"]), 66);
    // triage's table into a full standard output: its one error line, status 2.
    let o = fx(
        &["run", "--quiet", "--report", "r.json", "--", prog.to_str().unwrap(), "/mnt/pmem0/log"],
        d,
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 66, "{}", o.stderr);
    let mut cmd = ferrite();
    cmd.args(["triage", "r.json"]).stdout(Stdio::from(full()));
    let o = within(cmd, d, Duration::from_secs(20));
    refused("triage into /dev/full", &o, "No space left");
}

/// `TMPDIR` naming a file: the error says it is `TMPDIR` (it said "temporary directory: Not a
/// directory").
#[test]
fn a_tmpdir_that_is_not_a_directory_is_named() {
    let dir = scratch();
    let d = dir.path();
    std::fs::write(d.join("file"), b"").unwrap();
    let mut cmd = ferrite();
    cmd.args(["run", "--"]).arg(guest("exit_status")).env("TMPDIR", d.join("file")).stdout(Stdio::null());
    let o = within(cmd, d, Duration::from_secs(20));
    refused("TMPDIR a file", &o, "TMPDIR");
}

/// A size whose suffix overflows 64 bits says so (it said "is not a size").
#[test]
fn sizes_past_64_bits_say_so() {
    let dir = scratch();
    let prog = guest("exit_status");
    for size in ["99999999999G", "18446744073709551615K", "99999999999999999999"] {
        let o = fx(&["run", "--max-memory", size, "--", prog.to_str().unwrap()], dir.path(), Duration::from_secs(20));
        refused(&format!("--max-memory {size}"), &o, "more than 2^64");
    }
}

/// A shard's part records its PM directory's files as inputs: a FIFO in it hung the shard
/// (its hash read the FIFO), a link to `..` would have been walked for ever.
#[test]
fn a_shard_with_special_files_in_its_pm_dir_ends() {
    let dir = scratch();
    let d = dir.path();
    std::fs::create_dir(d.join("pm")).unwrap();
    mkfifo(&d.join("pm/fifo"));
    std::os::unix::fs::symlink("..", d.join("pm/up")).unwrap();
    let prog = guest("pm_log_fixed");
    let o = fx(
        &["run", "--quiet", "--pm-dir", "pm", "--explore", "2", "--shard", "0/2", "--report", "part.json", "--"]
            .map(OsStr::new)
            .into_iter()
            .chain([prog.as_os_str(), OsStr::new("/mnt/pmem0/log")])
            .collect::<Vec<_>>(),
        d,
        Duration::from_secs(120),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(d.join("part.json").is_file());
}

/// A report on a read-only mount is refused before the run (the base ran the whole program,
/// then could not write it). Needs root for the mount; skipped, saying so, otherwise.
#[test]
fn a_report_on_a_read_only_mount_is_refused_before_the_run() {
    let dir = scratch();
    let d = dir.path();
    let ro = d.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let mount =
        |args: &[&OsStr]| Command::new("mount").args(args).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !mount(&[OsStr::new("--bind"), ro.as_os_str(), ro.as_os_str()]) {
        eprintln!("skipped: cannot bind-mount (not root?)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(ro.clone());
    assert!(mount(&[OsStr::new("-o"), OsStr::new("remount,bind,ro"), ro.as_os_str()]), "cannot remount read-only");
    let o = fx(
        &["run", "--report", "ro/r.json", "--", guest("endless_loop").to_str().unwrap()],
        d,
        Duration::from_secs(20),
    );
    refused("a report on a read-only mount", &o, "not writable");
}

/// A `ferrite bench` configuration that ferrite itself refuses names why in bench's own error
/// line (the base said only "exited with exit status: 2, natively 7").
#[test]
fn bench_says_why_a_configuration_failed() {
    let dir = scratch();
    let g = guest("exit_status");
    let o = fx(
        &["bench", "--runs", "1", "--config", "none --cpus 0", "--", g.to_str().unwrap()],
        dir.path(),
        Duration::from_secs(60),
    );
    refused("bench --config 'none --cpus 0'", &o, "--cpus");
}
