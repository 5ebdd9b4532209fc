//! Determinism: the same program, inputs and seed give the same execution — identical stdout,
//! instruction count and trace hash — across runs, fresh scratch directories and PM directories;
//! another seed may take another path but the guest's deterministic output stays the native one.

mod common;

use serde_json::Value;

use common::*;

/// Runs libc_workout under ferrite with `seed` and a JSON report.
fn workout(seed: &str) -> (Run, Value) {
    let run = Ferrite::run(&guest("libc_workout"))
        .opts(&["--seed", seed, "--report", "r.json"])
        .args(&["alpha", "beta"])
        .env("FERRITE_TEST", "hello")
        .go();
    run.assert_code(3);
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.seed").as_u64(), Some(seed.parse().unwrap()));
    (run, report)
}

fn trace_hash(report: &Value) -> &str {
    let h = get(report, "run.trace_hash").as_str().unwrap();
    assert!(!h.is_empty(), "empty trace hash");
    h
}

fn instructions(report: &Value) -> u64 {
    get(report, "run.instructions").as_u64().unwrap()
}

#[test]
fn same_seed_same_execution() {
    let (a, ra) = workout("7");
    let (b, rb) = workout("7");
    assert_same_bytes("stdout of two runs with seed 7", &a, &a.stdout, &b, &b.stdout);
    assert_eq!(trace_hash(&ra), trace_hash(&rb), "trace hash differs");
    assert_eq!(instructions(&ra), instructions(&rb), "instruction count differs");
    assert!(instructions(&ra) > 0);
}

/// `--trace-syscalls` shows every call with its arguments and result, and changes nothing in
/// the run.
#[test]
fn tracing_system_calls_changes_nothing() {
    let (plain, rp) = workout("7");
    let traced = Ferrite::run(&guest("libc_workout"))
        .opts(&["--seed", "7", "--report", "r.json", "--trace-syscalls"])
        .args(&["alpha", "beta"])
        .env("FERRITE_TEST", "hello")
        .go();
    traced.assert_code(3);
    let rt = traced.json("r.json");
    assert_eq!(trace_hash(&rp), trace_hash(&rt), "tracing changed the run");
    assert_same_bytes("stdout with and without the trace", &plain, &plain.stdout, &traced, &traced.stdout);
    let err = &traced.stderr;
    assert!(
        err.contains(
            "[1000] openat(AT_FDCWD, \"does-not-exist.txt\", 0x0, 0x0) = -1 ENOENT (No such file or directory)"
        ),
        "{err}"
    );
    assert!(err.contains("[1000] creat(\"created.txt\", 0x1a4) = "), "{err}");
    assert!(err.contains(") = ? (the process exits)"), "{err}");
    assert!(!plain.stderr.contains("[1000] "), "{}", plain.stderr);
}

#[test]
fn other_seed_same_deterministic_output() {
    let prog = guest("libc_workout");
    let nat = native(&prog, &["alpha", "beta"], &[("FERRITE_TEST", "hello")]);
    for seed in ["0", "1", "12345678901234"] {
        let (run, _) = workout(seed);
        assert_same_stdout(&nat, &run);
        assert_same_status(&nat, &run);
    }
}

#[test]
fn cpu_bound_is_repeatable() {
    let prog = guest("cpu_bound");
    let runs: Vec<(Run, Value)> = (0..3)
        .map(|_| {
            let run = Ferrite::run(&prog).args(&["0.01"]).opts(&["--report", "r.json"]).go();
            run.assert_code(0);
            let report = run.json("r.json");
            (run, report)
        })
        .collect();
    let (first, r0) = &runs[0];
    for (run, r) in &runs[1..] {
        assert_eq!(trace_hash(r0), trace_hash(r));
        assert_eq!(instructions(r0), instructions(r));
        assert_same_bytes("stdout", first, &first.stdout, run, &run.stdout);
    }
}

#[test]
fn output_destination_does_not_matter() {
    // The guest cannot tell a pipe from /dev/null (ferrite does not pass the host's stdout
    // through to what the guest observes), so the execution is the same.
    let prog = guest("write_stderr");
    let mut hashes = Vec::new();
    for null in [false, true] {
        let dir = scratch();
        let mut cmd = ferrite();
        cmd.args(["run", "--env-clear", "--report", "r.json", "--"])
            .arg(&prog)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null());
        if null {
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        } else {
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let report = read_json(&dir.path().join("r.json"));
        hashes.push(trace_hash(&report).to_string());
    }
    assert_eq!(hashes[0], hashes[1]);
}

#[test]
fn pm_dir_location_does_not_matter() {
    let prog = guest("pm_log_fixed");
    // Two PM directories at different host paths (one nested, so the paths differ in length).
    let outer = scratch();
    let nested = outer.path().join("a/much/deeper/pm/directory");
    std::fs::create_dir_all(&nested).unwrap();
    let plain = scratch();
    let mut hashes = Vec::new();
    for pm in [plain.path(), nested.as_path()] {
        let run = Ferrite::run(&prog)
            .opts(&["--pm-dir".as_ref(), pm.as_os_str()])
            .opts(&["--report", "r.json"])
            .args(&["/mnt/pmem0/pool"])
            .go();
        run.assert_code(0);
        assert!(pm.join("pool").is_file(), "the pool was not created in {pm:?}");
        let report = run.json("r.json");
        hashes.push((trace_hash(&report).to_string(), instructions(&report), run.stdout));
    }
    assert_eq!(hashes[0], hashes[1], "the PM directory's host path leaked into the run");
}

#[test]
fn existing_pool_contents_are_an_input() {
    // The trace hash tells executions apart: check mode of pm_log_fixed over a pool written by a
    // normal run (5 entries) and over a zeroed pool (0 entries) succeeds both times, by
    // different paths, so the hashes differ.
    let prog = guest("pm_log_fixed");
    let full = scratch();
    Ferrite::run(&prog)
        .opts(&["--pm-dir".as_ref(), full.path().as_os_str()])
        .args(&["/mnt/pmem0/pool"])
        .go()
        .assert_code(0);
    let empty = scratch();
    std::fs::write(empty.path().join("pool"), vec![0u8; 4096]).unwrap();
    let mut seen = Vec::new();
    for pm in [&full, &empty] {
        let run = Ferrite::run(&prog)
            .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
            .opts(&["--report", "r.json"])
            .args(&["/mnt/pmem0/pool", "check"])
            .go();
        run.assert_code(0);
        seen.push((trace_hash(&run.json("r.json")).to_string(), run.stdout_str()));
    }
    assert_eq!(seen[0].1, "recovery ok: 5 entries\n");
    assert_eq!(seen[1].1, "recovery ok: 0 entries\n");
    assert_ne!(seen[0].0, seen[1].0, "different executions share a trace hash");
}
