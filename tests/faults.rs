//! Faults and hangs: a guest killed by SIGSEGV, SIGABRT or SIGFPE, or stopped by the instruction
//! budget, ends ferrite with the shell's status for it and yields exactly one finding whose
//! location is the marked source line of the guest, on stderr and in the JSON report; a guest
//! that ends normally yields no findings and its own status.

mod common;

use serde_json::Value;

use common::*;

/// The single finding of a report, after checking there is exactly one.
#[track_caller]
fn only_finding(report: &Value) -> &Value {
    let findings = get(report, "findings").as_array().unwrap();
    assert_eq!(findings.len(), 1, "expected exactly one finding:\n{}", serde_json::to_string_pretty(report).unwrap());
    &findings[0]
}

/// Checks a finding's first location is `file:line` in the guest's source.
#[track_caller]
fn assert_location(finding: &Value, file: &str, line: u32) {
    let loc = get(finding, "locations.0");
    assert_eq!(get(loc, "line").as_u64(), Some(u64::from(line)), "wrong line in {loc:#}");
    let f = get(loc, "file").as_str().unwrap();
    assert!(f.ends_with(&format!("/{file}")) || f == file, "location file `{f}` is not {file}");
}

/// The function names of a location's backtrace.
fn backtrace_functions(loc: &Value) -> Vec<String> {
    get(loc, "backtrace")
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.get("function").and_then(Value::as_str).unwrap_or("??").to_string())
        .collect()
}

#[test]
fn null_deref_is_sigsegv_at_the_fault_line() {
    let line = marker_line("null_deref.c", "/* FAULT */");
    let run = Ferrite::run(&guest("null_deref")).opts(&["--report", "r.json"]).go();
    run.assert_code(139);
    assert!(run.stderr.contains("SIGSEGV"), "{}", run.describe());
    assert!(
        run.stderr.contains(&format!("null_deref.c:{line}")),
        "stderr should name null_deref.c:{line}\n{}",
        run.describe()
    );

    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.signal").as_i64(), Some(11));
    let f = only_finding(&report);
    assert_eq!(get(f, "analysis"), "fault");
    assert_eq!(get(f, "kind"), "SIGSEGV");
    assert_location(f, "null_deref.c", line);
    let loc = get(f, "locations.0");
    assert_eq!(get(loc, "function"), "poke");
    let funcs = backtrace_functions(loc);
    assert_eq!(funcs.first().map(String::as_str), Some("poke"), "{funcs:?}");
    assert!(funcs.iter().any(|f| f == "main"), "backtrace {funcs:?} lacks main");
}

#[test]
fn assert_fail_is_sigabrt_at_the_assert_line() {
    let line = marker_line("assert_fail.c", "/* ASSERT */");
    let run = Ferrite::run(&guest("assert_fail")).opts(&["--report", "r.json"]).go();
    run.assert_code(134);
    assert!(run.stderr.contains("SIGABRT"), "{}", run.describe());
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.signal").as_i64(), Some(6));
    let f = only_finding(&report);
    assert_eq!(get(f, "analysis"), "fault");
    assert_eq!(get(f, "kind"), "SIGABRT");
    // The abort is raised inside libc; the location is the first frame with source (main).
    assert_location(f, "assert_fail.c", line);
    assert_eq!(get(f, "locations.0.function"), "main");
    let funcs = backtrace_functions(get(f, "locations.0"));
    assert!(funcs.iter().any(|f| f == "abort"), "backtrace {funcs:?} lacks abort");
}

#[test]
fn div_zero_is_sigfpe_at_the_division() {
    let line = marker_line("div_zero.c", "/* DIVZERO */");
    let run = Ferrite::run(&guest("div_zero")).opts(&["--report", "r.json"]).go();
    run.assert_code(136);
    assert!(run.stderr.contains("SIGFPE"), "{}", run.describe());
    assert!(run.stderr.contains(&format!("div_zero.c:{line}")));
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.signal").as_i64(), Some(8));
    let f = only_finding(&report);
    assert_eq!(get(f, "analysis"), "fault");
    assert_eq!(get(f, "kind"), "SIGFPE");
    assert_location(f, "div_zero.c", line);
    assert_eq!(get(f, "locations.0.function"), "main");
}

#[test]
fn endless_loop_is_a_hang_at_the_spin_line() {
    let line = marker_line("endless_loop.c", "/* SPIN */");
    let run = Ferrite::run(&guest("endless_loop")).opts(&["--max-instructions", "50000000", "--report", "r.json"]).go();
    run.assert_code(66);
    assert_eq!(run.stdout, b"spinning forever\n");
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.hang"), &Value::Bool(true));
    assert!(report["run"]["exit"].get("code").is_none());
    assert!(report["run"]["exit"].get("signal").is_none());
    // About the budget (exactness is hang_stops_exactly_at_the_budget's business).
    let n = get(&report, "run.instructions").as_u64().unwrap();
    assert!((49_000_000..=50_000_000).contains(&n), "{n} instructions");
    let f = only_finding(&report);
    assert_eq!(get(f, "analysis"), "hang");
    assert_location(f, "endless_loop.c", line);
}

#[test]
fn hang_stops_exactly_at_the_budget() {
    // `--max-instructions N`: "stop the guest after this many retired instructions". A hang is
    // reported after exactly N instructions, not a few before (at a block boundary).
    let prog = guest("endless_loop");
    let mut wrong = Vec::new();
    for budget in [10u64, 99, 1001, 5000, 1_000_001] {
        let run = Ferrite::run(&prog)
            .opts(&["--quiet", "--report", "r.json", "--max-instructions"])
            .opts(&[budget.to_string()])
            .go();
        run.assert_code(66);
        let n = get(&run.json("r.json"), "run.instructions").as_u64().unwrap();
        if n != budget {
            wrong.push(format!("--max-instructions {budget}: stopped after {n}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn budget_of_exactly_the_needed_instructions_is_enough() {
    let prog = guest("exit_status");
    let full = Ferrite::run(&prog).opts(&["--report", "r.json"]).go();
    full.assert_code(7);
    let needed = get(&full.json("r.json"), "run.instructions").as_u64().unwrap();
    Ferrite::run(&prog).opts(&["--max-instructions".to_string(), needed.to_string()]).go().assert_code(7);
    let short = Ferrite::run(&prog).opts(&["--max-instructions".to_string(), (needed - 1).to_string()]).go();
    short.assert_code(66);
    assert!(short.stderr.contains("[hang]"), "{}", short.describe());
}

#[test]
fn hang_uses_the_findings_exit_code() {
    let run = Ferrite::run(&guest("endless_loop"))
        .opts(&["--max-instructions", "5000000", "--findings-exit-code", "42"])
        .go();
    run.assert_code(42);
    assert!(run.stderr.contains("[hang]"), "{}", run.describe());
}

#[test]
fn normal_exit_has_no_findings() {
    let run = Ferrite::run(&guest("exit_status")).args(&["9"]).opts(&["--report", "r.json"]).go();
    run.assert_code(9);
    assert_eq!(run.stdout, b"exiting with status 9\n");
    // No findings: ferrite prints nothing of its own.
    assert_eq!(run.stderr, "");
    let report = run.json("r.json");
    assert_eq!(get(&report, "findings"), &Value::Array(vec![]));
    assert_eq!(get(&report, "run.exit.code").as_i64(), Some(9));
    assert!(report["run"]["exit"].get("signal").is_none());
    assert!(report["run"]["exit"].get("hang").is_none());
}

#[test]
fn quiet_suppresses_the_finding_summary() {
    let run = Ferrite::run(&guest("null_deref")).opts(&["--quiet"]).go();
    run.assert_code(139);
    assert_eq!(run.stderr, "", "{}", run.describe());
}
