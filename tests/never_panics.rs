//! Hostile input never panics, aborts or hangs ferrite (issue 20): thousands of mutated
//! reports through `ferrite replay`'s set-up (the fuzz target's body, `fuzz/replay_setup.rs`,
//! in-process), a sample of them through the binary, option values at and past every bound,
//! and special files (devices, FIFOs, directories, /proc files) in every role a file plays.
//! Each through the binary ends with the guest's status or one `error:` line and status 2,
//! never 101 (a panic) or 134 (an abort), and within a time limit.

mod common;

#[path = "../fuzz/replay_setup.rs"]
mod replay_setup;
#[allow(dead_code)]
#[path = "../src/report.rs"]
mod report;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// A small deterministic generator (xorshift64*), so every run tests the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values at and past the bounds of every type a report holds.
fn hostile_values() -> Vec<Value> {
    vec![
        json!(0),
        json!(-1),
        json!(1),
        json!(3),
        json!(255),
        json!(256),
        json!(4097),
        json!(2147483647),
        json!(2147483648u64),
        json!(4294967295u64),
        json!(4294967296u64),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1.5),
        json!(1e308),
        json!(""),
        json!(" "),
        json!("bogus"),
        json!("/"),
        json!("../x"),
        json!("a\u{0}b"),
        json!("é".repeat(5000)),
        Value::Null,
        json!(true),
        json!([]),
        json!({}),
        json!([[0]]),
        json!({"a": 1}),
    ]
}

/// Real reports: a plain run, a run with findings, an exploration, a crash campaign.
fn seeds() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.json"]).go();
    out.push(("exit_status".into(), run.json("r.json")));
    let run = Ferrite::run(&guest("pm_log")).opts(&["--quiet", "--report", "r.json"]).args(&["/mnt/pmem0/log"]).go();
    out.push(("pm_log".into(), run.json("r.json")));
    let run = Ferrite::run(&guest("thr_lost_update"))
        .opts(&[
            "--quiet",
            "--strategy",
            "exhaustive",
            "--analyses",
            "hmtrace",
            "--explore",
            "20",
            "--report",
            "r.json",
        ])
        .go();
    out.push(("thr_lost_update exhaustive".into(), run.json("r.json")));
    out.push(("pm_log crash".into(), pm_log_crash().json("r.json")));
    out
}

/// Paths (`/run/cpus`, `/findings/0/seed`) to every value of `v` at most `depth` levels down.
fn paths(v: &Value, depth: usize, prefix: String, out: &mut Vec<String>) {
    out.push(prefix.clone());
    if depth == 0 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                // JSON Pointer's escapes: a part's inputs are named by paths.
                paths(x, depth - 1, format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(2) {
                paths(x, depth - 1, format!("{prefix}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Structural mutations of `seed`: each value (to some depth) replaced by each hostile value or
/// removed, and finding-level additions (an interleaving, a crash image, a schedule).
fn structural(seed: &Value, rng: &mut Rng) -> Vec<Value> {
    let mut ps = Vec::new();
    paths(seed, 4, String::new(), &mut ps);
    let values = hostile_values();
    let mut out = Vec::new();
    for p in ps.iter().filter(|p| !p.is_empty()) {
        // Every value for the `run` and `crash` sections (what replay is built from), a sample
        // of them elsewhere.
        let every = p.starts_with("/run/") || p.starts_with("/crash/");
        for (i, h) in values.iter().enumerate() {
            if !every && rng.below(4) != 0 && i > 0 {
                continue;
            }
            let mut m = seed.clone();
            *m.pointer_mut(p).unwrap() = h.clone();
            out.push(m);
        }
        let (parent, key) = p.rsplit_once('/').unwrap();
        let mut m = seed.clone();
        if let Some(Value::Object(o)) = m.pointer_mut(parent) {
            o.remove(&key.replace("~1", "/").replace("~0", "~"));
            out.push(m);
        }
    }
    for extra in [
        json!({"loads": [1, 0], "dev": 0, "len": 8, "privileged": 0}),
        json!({"loads": [], "dev": u64::MAX, "len": 2, "privileged": 4294967295u64}),
        json!({"loads": [4096], "dev": 0, "len": u64::MAX, "privileged": 0}),
    ] {
        let mut m = seed.clone();
        if let Some(f) = m.pointer_mut("/findings/0").and_then(Value::as_object_mut) {
            f.insert("interleaving".into(), extra);
            out.push(m);
        }
    }
    for image in [json!({"point": 4294967295u64, "choice": []}), json!({"point": 0, "choice": vec![4294967295u64; 64]})]
    {
        let mut m = seed.clone();
        if let Some(f) = m.pointer_mut("/findings/0").and_then(Value::as_object_mut) {
            f.insert("crash_image".into(), image);
            out.push(m);
        }
    }
    let mut m = seed.clone();
    if let Some(f) = m.pointer_mut("/findings/0").and_then(Value::as_object_mut) {
        f.insert("schedule".into(), json!([u32::MAX, 0, 7, u32::MAX]));
        out.push(m);
    }
    out
}

/// Byte mutations of `text`: flips, insertions, deletions, duplications and truncations.
fn bytewise(text: &[u8], rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    bytewise_with(text, rng, n, b"{}[]\",:0-9e.\\nu \x00\xff")
}

/// [`bytewise`] with the bytes that matter to another syntax (RON's `()`, YAML's `- : # & *`).
fn bytewise_with(text: &[u8], rng: &mut Rng, n: usize, special: &[u8]) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut t = text.to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(t.len());
                match rng.below(5) {
                    0 => t[at] = special[rng.below(special.len())],
                    1 => t.insert(at, special[rng.below(special.len())]),
                    2 => {
                        t.remove(at);
                    }
                    3 => {
                        let end = (at + 1 + rng.below(64)).min(t.len());
                        let piece = t[at..end].to_vec();
                        t.splice(at..at, piece);
                    }
                    _ => t.truncate(at),
                }
                if t.is_empty() {
                    break;
                }
            }
            t
        })
        .collect()
}

#[test]
fn mutated_reports_never_panic_the_replay_setup() {
    let mut rng = Rng(0x5eed_f00d);
    let (mut tried, mut accepted) = (0usize, 0usize);
    let mut failures: Vec<String> = Vec::new();
    let mut try_one = |name: &str, data: Vec<u8>| {
        tried += 1;
        match catch_unwind(AssertUnwindSafe(|| replay_setup::replay_setup(&data))) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                if failures.len() < 5 {
                    let text = String::from_utf8_lossy(&data[1..]);
                    failures.push(format!("{name}: {msg}\n{}", &text[..text.len().min(2000)]));
                }
            }
        }
    };
    for (name, seed) in seeds() {
        let json_text = serde_json::to_vec(&seed).unwrap();
        let mut data = vec![0u8];
        data.extend(&json_text);
        // The real report is accepted as it is: the mutations below start from reports that pass.
        assert!(replay_setup::replay_setup(&data), "{name}: the real report is refused");
        let parsed = report::Report::from_text(std::str::from_utf8(&json_text).unwrap(), true).unwrap();
        let ron_text = ron::ser::to_string(&parsed).unwrap();
        let mut data = vec![1u8];
        data.extend(ron_text.as_bytes());
        assert!(replay_setup::replay_setup(&data), "{name}: the real report is refused as RON");
        for m in structural(&seed, &mut rng) {
            let mut data = vec![0u8];
            data.extend(serde_json::to_vec(&m).unwrap());
            try_one(&name, data);
        }
        for m in bytewise(&json_text, &mut rng, 400) {
            try_one(&name, [&[0u8][..], &m].concat());
        }
        for m in bytewise(ron_text.as_bytes(), &mut rng, 200) {
            try_one(&name, [&[1u8][..], &m].concat());
        }
    }
    eprintln!("{tried} mutated reports, {accepted} accepted");
    assert!(failures.is_empty(), "the replay set-up panicked:\n{}", failures.join("\n\n"));
    assert!(tried >= 2000, "only {tried} mutated reports");
    // Some mutations are harmless (a seed changed, an unknown field): the checks let real
    // variations through, not only the reports ferrite wrote.
    assert!(accepted > 0);
}

/// ferrite's status and stderr for `args` in `dir`, failing the test past `limit` (a hang).
fn ferrite_within(args: &[&std::ffi::OsStr], dir: &Path, limit: Duration) -> (i32, String) {
    use std::process::Stdio;
    let child = ferrite()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => {
            let out = out.unwrap();
            (shell_status(out.status), String::from_utf8_lossy(&out.stderr).into_owned())
        }
        Err(_) => {
            // SAFETY: kill(2) of the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("hang: `ferrite {args:?}` did not end within {limit:?}");
        }
    }
}

/// A clean end: no panic (101), no abort (134 with ferrite's own message), and an `error:`
/// line exactly when the status is 2.
#[track_caller]
fn assert_clean(what: &str, code: i32, stderr: &str) {
    assert!(!stderr.contains("panicked") && code != 101, "{what}: panic (status {code})\n{stderr}");
    assert!(!stderr.contains("memory allocation of"), "{what}: abort (status {code})\n{stderr}");
    assert!(!stderr.contains("fatal runtime error"), "{what}: abort (status {code})\n{stderr}");
    if code == 2 {
        assert_eq!(error_lines(stderr).len(), 1, "{what}: not one error line\n{stderr}");
    }
}

/// Runs `cases` (argument lists) through the binary, two at a time.
fn through_the_binary(cases: Vec<Vec<std::ffi::OsString>>, limit: Duration) -> usize {
    let n = cases.len();
    let queue = std::sync::Mutex::new(cases);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some(args) = queue.lock().unwrap().pop() else { break };
                let dir = scratch();
                let a: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
                let (code, stderr) = ferrite_within(&a, dir.path(), limit);
                assert_clean(&format!("ferrite {args:?}"), code, &stderr);
            });
        }
    });
    n
}

#[test]
fn mutated_reports_replay_or_fail_cleanly() {
    // A sample through the binary: the report of a short run with one field of `run` replaced.
    let seed = seeds().swap_remove(0).1;
    let dir = scratch();
    let mut cases = Vec::new();
    let mut rng = Rng(7);
    let fields: Vec<String> = seed["run"].as_object().unwrap().keys().cloned().collect();
    let values = hostile_values();
    for (i, field) in fields.iter().enumerate() {
        for _ in 0..2 {
            let mut m = seed.clone();
            m["run"][field] = values[rng.below(values.len())].clone();
            let p = dir.path().join(format!("r{i}-{}.json", cases.len()));
            std::fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
            cases.push(vec!["replay".into(), p.into_os_string()]);
        }
    }
    let n = through_the_binary(cases, Duration::from_secs(60));
    assert!(n >= 40, "{n}");
}

/// Every numeric option of `run` and `crash` with values at and past its bounds, and the
/// options that take names and commands with empty and odd values. Values that are accepted
/// run a short guest.
#[test]
fn option_values_never_panic() {
    let prog = guest("exit_status").into_os_string();
    let numbers = [
        "0",
        "1",
        "2",
        "3",
        "100",
        "255",
        "256",
        "1024",
        "1025",
        "4096",
        "4097",
        "65536",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "",
        " ",
        "1e3",
        "0x10",
        "+5",
        "٣",
    ];
    let numeric = [
        "--seed",
        "--irh",
        "--max-instructions",
        "--findings-exit-code",
        "--explore",
        "--max-preemptions",
        "--pct-depth",
        "--max-threads",
        "--max-open-files",
        "--cpus",
        "--delay",
        "--delay-decay",
    ];
    let mut cases: Vec<Vec<std::ffi::OsString>> = Vec::new();
    for opt in numeric {
        for v in numbers {
            // An exploration of many schedules is a long run, not a hang: its bound is tested
            // in tests/errors.rs.
            if opt == "--explore"
                && v.parse::<u64>().is_ok_and(|n| n > 4)
                && v.parse::<u64>().is_ok_and(|n| n <= 1_000_000)
            {
                continue;
            }
            let mut c: Vec<std::ffi::OsString> =
                vec!["run".into(), "--env-clear".into(), "--max-instructions".into(), "5000000".into()];
            if opt == "--max-instructions" {
                c.truncate(2);
            }
            c.extend([format!("{opt}={v}").into(), "--".into(), prog.clone()]);
            cases.push(c);
        }
    }
    for v in ["0", "1", "1K", "1M", "4G", "128T", "129T", "16E", "99999999999999999999", "-1", "", "G", "1.5G"] {
        cases.push(vec![
            "run".into(),
            "--env-clear".into(),
            format!("--max-memory={v}").into(),
            "--".into(),
            prog.clone(),
        ]);
    }
    let names: [(&str, &[&str]); 7] = [
        ("--pm-mount", &["", "/", "//", "/mnt/pmem0/", "rel", "/a/./b", "/a/../b", "/proc", "/mnt/x\u{7f}"]),
        ("--env", &["", "=", "=x", "A", "A=", "A==", "PATH=/nowhere", "LD_PRELOAD=/dev/zero"]),
        ("--recover", &["", " ", "/dev/zero", "/nonexistent"]),
        ("--strategy", &["", "bogus", "pct", "fifo", "exhaustive"]),
        (
            "--analyses",
            &["", ",", "none", "bogus", "hawkset:irh=99999999999", "hawkset:irh=-1", "all,all", "oscs:condflag"],
        ),
        ("--config", &["/dev/null", "/", "/nonexistent", "/proc/self/status"]),
        ("--pm-dir", &["/proc/self", "/proc/self/fd", "/sys/kernel", "/dev", "/dev/shm", "/nonexistent", "."]),
    ];
    for (opt, values) in names {
        for v in values {
            cases.push(vec![
                "run".into(),
                "--env-clear".into(),
                "--max-instructions".into(),
                "5000000".into(),
                format!("{opt}={v}").into(),
                "--".into(),
                prog.clone(),
            ]);
        }
    }
    for v in ["0", "1", "256", "257", "100000", "-1", ""] {
        for opt in ["--jobs", "--max-images", "--crash-at"] {
            cases.push(vec!["crash".into(), "--quiet".into(), format!("{opt}={v}").into(), "--".into(), prog.clone()]);
        }
    }
    let n = through_the_binary(cases, Duration::from_secs(60));
    assert!(n >= 340, "only {n} option cases");
}

/// Special files as the program, the interpreter-less recovery, a configuration file, a report
/// (to replay and to triage), a part to merge and a suite: refused at once, each with one error
/// line (merge read a FIFO or `/dev/zero` for ever before the fifth sweep).
#[test]
fn special_files_in_every_role() {
    let dir = scratch();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path alive through the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sock = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let looped = dir.path().join("loop.json");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let mut files: Vec<std::path::PathBuf> = [
        "/dev/zero",
        "/dev/null",
        "/dev/urandom",
        "/dev/full",
        "/proc/self/mem",
        "/proc/self/fd/0",
        "/",
        "/proc/self/status",
        "/nonexistent",
    ]
    .iter()
    .map(Into::into)
    .collect();
    files.extend([fifo, sock, looped]);
    // Names with a report's extension for each (replay looks at the extension first).
    for (i, f) in files.clone().iter().enumerate() {
        let link = dir.path().join(format!("as-report-{i}.json"));
        std::os::unix::fs::symlink(f, &link).unwrap();
        files.push(link);
    }
    let pm_log = guest("pm_log").into_os_string();
    let prog = guest("exit_status").into_os_string();
    let mut cases: Vec<Vec<std::ffi::OsString>> = Vec::new();
    for f in &files {
        let f = f.clone().into_os_string();
        cases.push(vec!["run".into(), "--".into(), f.clone()]);
        cases.push(vec!["run".into(), "--config".into(), f.clone(), "--".into(), prog.clone()]);
        cases.push(vec!["replay".into(), f.clone()]);
        cases.push(vec!["triage".into(), f.clone()]);
        cases.push(vec!["merge".into(), f.clone(), "--report".into(), "m.json".into()]);
        cases.push(vec!["compare".into(), "--suite".into(), f.clone()]);
        let mut recover = std::ffi::OsString::from("--recover=");
        recover.push(&f);
        cases.push(vec![
            "crash".into(),
            "--quiet".into(),
            recover,
            "--".into(),
            pm_log.clone(),
            "/mnt/pmem0/log".into(),
        ]);
    }
    let n = through_the_binary(cases, Duration::from_secs(30));
    assert!(n >= 100, "{n}");
}

/// A float in a report reads back as the very value that was written, whatever digits the text
/// had (serde_json's `float_roundtrip`): a byte-mutated `crash.max_space_log2` with 18
/// significant digits once came back one ulp off after a write and a read (the default parser's
/// approximation), and the replay set-up's check that a report survives JSON failed on it.
#[test]
fn floats_in_reports_read_back_exactly() {
    for text in ["104.759528141041801", "104.075952814104181", "104.715952814104181", "2.2250738585072011e-308"] {
        let x: f64 = serde_json::from_str(text).unwrap();
        let again: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
        assert_eq!(x.to_bits(), again.to_bits(), "{text}");
    }
}

/// Guests that never end on their own end as findings, each quickly (the third sweep): a
/// SIGSEGV handler that returns to its fault (the base looped through faults for hours before
/// `--max-instructions` ended it; now a `hang` of kind `fault-loop` after 100,000 identical
/// faults), every signal blocked and `pause` (a deadlock), and an endless loop without a system
/// call (a `hang` at the budget, whose message says how to stop a guest sooner).
#[test]
fn guests_that_never_end_end_as_findings() {
    let prog = guest("hostile_probe");
    let cases: [(&str, &[&str], &str, &str); 3] = [
        ("segv-loop", &[], "hang", "fault-loop"),
        ("block-pause", &[], "deadlock", ""),
        ("spin", &["--max-instructions", "20000000"], "hang", "instruction-budget"),
    ];
    for (what, opts, analysis, kind) in cases {
        let run = Ferrite::run(&prog).opts(opts).opts(&["--report", "r.json"]).args(&[what]).go();
        assert!(!run.stderr.contains("panicked"), "{what}: {}", run.describe());
        run.assert_code(66);
        let report = run.json("r.json");
        let found = findings_of(&report, analysis);
        assert_eq!(found.len(), 1, "{what}: {}", run.describe());
        if !kind.is_empty() {
            assert_eq!(found[0]["kind"], kind, "{what}: {}", run.describe());
        }
    }
    let spin = Ferrite::run(&prog).opts(&["--max-instructions", "1000000"]).args(&["spin"]).go();
    assert!(spin.stderr.contains("Ctrl-C"), "{}", spin.describe());
}

/// The fifth sweep's mutations: a real part of a sharded crash campaign (structurally, as the
/// reports above, and byte by byte) merged with the campaign's other part; a suite manifest
/// (RON, byte by byte) through `ferrite compare`; lock configurations in RON and in HawkSet's
/// YAML through `ferrite run --config`. Each ends cleanly and in time (before the sweep a
/// HawkSet file of nested block sequences overflowed ferrite's stack: tests/hostile.rs).
#[test]
fn mutated_parts_manifests_and_configs_fail_cleanly() {
    let dir = scratch();
    let d = dir.path();
    let pm_log = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", pm_log.display());
    let mut parts = Vec::new();
    for i in 0..2 {
        let name = format!("p{i}.json");
        let run = Ferrite::crash(&pm_log)
            .opts(&["--quiet", "--recover", &recover, "--shard", &format!("{i}/2"), "--report", &name])
            .args(&["/mnt/pmem0/log"])
            .go();
        assert_eq!(run.code, 0, "{}", run.describe());
        std::fs::copy(run.path(&name), d.join(&name)).unwrap();
        parts.push(run.json(&name));
    }
    let mut rng = Rng(0xfe45);
    let mut cases: Vec<Vec<std::ffi::OsString>> = Vec::new();
    let add_part = |bytes: Vec<u8>, cases: &mut Vec<Vec<std::ffi::OsString>>| {
        let p = d.join(format!("m{}.json", cases.len()));
        std::fs::write(&p, bytes).unwrap();
        let out = d.join(format!("out{}.json", cases.len()));
        cases.push(vec![
            "merge".into(),
            "--quiet".into(),
            p.into(),
            d.join("p1.json").into(),
            "--report".into(),
            out.into(),
        ]);
    };
    // The header's fields all, the body's a sample.
    let mut structural_parts = structural(&parts[0], &mut rng);
    structural_parts.retain(|_| rng.below(6) == 0);
    for m in structural_parts {
        add_part(serde_json::to_vec(&m).unwrap(), &mut cases);
    }
    for m in bytewise(&serde_json::to_vec(&parts[0]).unwrap(), &mut rng, 60) {
        add_part(m, &mut cases);
    }
    let g = repo().join("guests");
    let manifest = format!(
        r#"(build: "{}", sources: "{}", cases: [
    (name: "pm_unflushed_fence", program: "pm_unflushed_fence", analyses: ["unpersisted"],
     options: ["--max-instructions", "20000000"],
     truth: Bugs([(class: "unpersisted-store", at: [Marker("pm_unflushed_fence.c", "/* STORE: unfenced line */")]),
                  (class: "flush-without-fence", at: [Offset("pm_unflushed_fence.c", "/* BUG: flush without fence */", 0)])])),
    (name: "exit_status", program: "exit_status", seeds: [0, 1], truth: BugFree),
])
"#,
        g.join("build").display(),
        g.join("src").display()
    );
    for (i, m) in bytewise_with(manifest.as_bytes(), &mut rng, 60, b"()[]\",:0-9_ \n/*").into_iter().enumerate() {
        let p = d.join(format!("s{i}.ron"));
        std::fs::write(&p, m).unwrap();
        cases.push(vec![
            "compare".into(),
            "--quiet".into(),
            "--analyses".into(),
            "unpersisted".into(),
            "--suite".into(),
            p.into(),
        ]);
    }
    let ron_config = r#"(locks: [(symbol: "cas_lock", kind: TryAcquire(success: 1), lock_arg: 0, result_arg: 1, mode: Shared, lock_size: 8),
    (symbol: "cas_unlock", kind: Release)], sync_vars: [(offset: 64, size: 8, init: 0)], pmrace_allow: ["x.c:12"])"#;
    let yaml_config = "mutex_id_size: 8\nadquire:\n  my_lock: { mutex_id_arg: 0, type: regular }\ntry_adquire:\n  my_trylock:\n    mutex_id_arg: 0\n    success_value: 1\n    result_id_arg: 1\n    type: write\nrelease:\n  my_unlock: { mutex_id_arg: 0, type: regular }\n";
    let prog = guest("exit_status");
    let configs = bytewise_with(ron_config.as_bytes(), &mut rng, 50, b"()[]\",:0-9 ")
        .into_iter()
        .map(|m| (m, "ron"))
        .chain(bytewise_with(yaml_config.as_bytes(), &mut rng, 50, b"-:#&*[]{} \n0-9").into_iter().map(|m| (m, "cfg")));
    for (i, (m, ext)) in configs.enumerate() {
        let p = d.join(format!("c{i}.{ext}"));
        std::fs::write(&p, m).unwrap();
        cases.push(vec!["run".into(), "--quiet".into(), "--config".into(), p.into(), "--".into(), prog.clone().into()]);
    }
    let n = through_the_binary(cases, Duration::from_secs(60));
    assert!(n >= 250, "only {n} mutated inputs");
}
