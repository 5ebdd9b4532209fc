//! Reports: the JSON report carries the documented contract fields with the right types and the
//! fault's source location; `.ron` and `.sarif` reports are well formed (SARIF 2.1.0 with one
//! result per finding); and `ferrite replay` reproduces a recorded run or finding, and notices
//! when a report does not match the execution.

mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

/// Runs null_deref with `--seed 5 --report <report>`.
fn null_deref(report: &str) -> Run {
    let run = Ferrite::run(&guest("null_deref")).opts(&["--seed", "5", "--report", report]).go();
    run.assert_code(139);
    run
}

#[track_caller]
fn assert_str(v: &Value, path: &str) -> String {
    let s = get(v, path);
    s.as_str().unwrap_or_else(|| panic!("`{path}` should be a string, not {s}")).to_string()
}

#[track_caller]
fn assert_u64(v: &Value, path: &str) -> u64 {
    let n = get(v, path);
    n.as_u64().unwrap_or_else(|| panic!("`{path}` should be an unsigned integer, not {n}"))
}

/// Checks an optional frame field has the right type when present.
#[track_caller]
fn assert_optional(frame: &Value, key: &str, ok: fn(&Value) -> bool) {
    if let Some(v) = frame.get(key) {
        assert!(ok(v), "frame field `{key}` has the wrong type: {frame}");
    }
}

#[test]
fn json_report_has_the_contract_fields() {
    let line = marker_line("null_deref.c", "/* FAULT */");
    let prog = guest("null_deref");
    let run = null_deref("r.json");
    let r = run.json("r.json");

    assert_eq!(assert_str(&r, "run.program"), prog.display().to_string());
    assert_eq!(get(&r, "run.args"), &serde_json::json!([prog.display().to_string()]));
    assert_eq!(assert_u64(&r, "run.seed"), 5);
    assert_eq!(get(&r, "run.exit.signal").as_i64(), Some(11));
    assert!(r["run"]["exit"].get("code").is_none());
    assert!(assert_u64(&r, "run.instructions") > 1000);
    assert!(assert_u64(&r, "run.threads") >= 1);
    let hash = assert_str(&r, "run.trace_hash");
    assert!(!hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()), "trace hash {hash:?}");

    let findings = get(&r, "findings").as_array().unwrap();
    assert_eq!(findings.len(), 1);
    let f = &findings[0];
    assert_eq!(assert_u64(f, "id"), 1);
    assert_eq!(assert_str(f, "analysis"), "fault");
    assert_eq!(assert_str(f, "kind"), "SIGSEGV");
    assert!(!assert_str(f, "message").is_empty());
    assert_eq!(assert_u64(f, "seed"), 5);

    let loc = get(f, "locations.0");
    assert!(!assert_str(loc, "role").is_empty());
    let pc = assert_u64(loc, "pc");
    assert_eq!(assert_str(loc, "function"), "poke");
    assert!(assert_str(loc, "file").ends_with("null_deref.c"));
    assert_eq!(assert_u64(loc, "line"), u64::from(line));
    assert!(assert_u64(loc, "thread") >= 1);
    let bt = get(loc, "backtrace").as_array().unwrap();
    assert!(bt.len() >= 2, "backtrace too short: {bt:?}");
    for frame in bt {
        assert!(get(frame, "pc").is_u64(), "frame without a pc: {frame}");
        assert_optional(frame, "function", Value::is_string);
        assert_optional(frame, "file", Value::is_string);
        assert_optional(frame, "line", Value::is_u64);
    }
    // The innermost frame is the faulting instruction itself.
    assert_eq!(assert_u64(&bt[0], "pc"), pc);
    assert_eq!(assert_u64(&bt[0], "line"), u64::from(line));
    // main's frame, in the guest's own code, has full debug information.
    let main = bt
        .iter()
        .find(|fr| fr.get("function").and_then(Value::as_str) == Some("main"))
        .unwrap_or_else(|| panic!("no main in {bt:?}"));
    assert!(assert_str(main, "file").ends_with("null_deref.c"));
    assert!(main.get("line").is_some_and(Value::is_u64));
}

#[test]
fn ron_report_replays() {
    let run = null_deref("r.ron");
    let text = std::fs::read_to_string(run.path("r.ron")).unwrap();
    assert!(text.contains("trace_hash"), "{text}");
    assert!(text.contains("SIGSEGV"), "{text}");
    let replay = Ferrite::replay(&run.path("r.ron")).go();
    replay.assert_code(139);
    assert!(replay.stderr.contains("replay reproduced"), "{}", replay.describe());
}

#[test]
fn ron_and_json_reports_agree() {
    // The RON report replayed with --report-out .json gives the same run as a JSON report.
    let run = null_deref("r.ron");
    let json_run = null_deref("r.json");
    let replay = Ferrite::replay(&run.path("r.ron")).opts(&["--report-out", "again.json"]).go();
    replay.assert_code(139);
    let again = replay.json("again.json");
    let orig = json_run.json("r.json");
    assert_eq!(get(&again, "run.trace_hash"), get(&orig, "run.trace_hash"));
    assert_eq!(get(&again, "findings"), get(&orig, "findings"));
}

#[test]
fn sarif_report() {
    let line = marker_line("null_deref.c", "/* FAULT */");
    let run = null_deref("r.sarif");
    let s = run.json("r.sarif");
    assert_eq!(get(&s, "version"), "2.1.0");
    assert_eq!(get(&s, "runs.0.tool.driver.name"), "ferrite");
    let results = get(&s, "runs.0.results").as_array().unwrap();
    // One result per finding (the JSON report of the same run has one finding).
    let json = null_deref("r.json").json("r.json");
    assert_eq!(results.len(), get(&json, "findings").as_array().unwrap().len());
    assert_eq!(results.len(), 1);
    let res = &results[0];
    assert_eq!(get(res, "ruleId"), "fault/SIGSEGV");
    assert_eq!(assert_u64(res, "locations.0.physicalLocation.region.startLine"), u64::from(line));
    assert!(assert_str(res, "locations.0.physicalLocation.artifactLocation.uri").ends_with("null_deref.c"));
    // Every result's rule is declared by the driver.
    let rules: Vec<&str> =
        get(&s, "runs.0.tool.driver.rules").as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(rules.contains(&"fault/SIGSEGV"), "{rules:?}");
}

#[test]
fn sarif_report_without_findings() {
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.sarif"]).go();
    run.assert_code(7);
    let s = run.json("r.sarif");
    assert_eq!(get(&s, "version"), "2.1.0");
    assert_eq!(get(&s, "runs.0.results"), &serde_json::json!([]));
}

#[test]
fn replay_reproduces_a_fault() {
    let run = null_deref("r.json");
    let replay = Ferrite::replay(&run.path("r.json")).go();
    replay.assert_code(139);
    assert!(replay.stderr.contains("replay reproduced"), "{}", replay.describe());
    // The guest's output comes through again.
    assert_eq!(replay.stdout, b"about to dereference NULL\n");
}

#[test]
fn replay_reproduces_a_finding() {
    let run = null_deref("r.json");
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", "1"]).go();
    replay.assert_code(139);
    assert!(replay.stderr.contains("replay reproduced finding 1"), "{}", replay.describe());
}

#[test]
fn replay_reproduces_args_and_environment() {
    let run = Ferrite::run(&guest("libc_workout"))
        .opts(&["--seed", "3", "--report", "r.json"])
        .args(&["alpha", "beta"])
        .env("FERRITE_TEST", "hello")
        .go();
    run.assert_code(3);
    // Replayed from another directory, with ferrite's own environment not cleared: the report
    // alone defines the guest's arguments and environment.
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--report-out", "again.json"]).go();
    replay.assert_code(3);
    assert!(replay.stderr.contains("replay reproduced"), "{}", replay.describe());
    assert_same_bytes("stdout", &run, &run.stdout, &replay, &replay.stdout);
    let (a, b) = (run.json("r.json"), replay.json("again.json"));
    assert_eq!(get(&a, "run.trace_hash"), get(&b, "run.trace_hash"));
    assert_eq!(get(&a, "run.env"), get(&b, "run.env"));
    assert_eq!(get(&a, "run.seed"), get(&b, "run.seed"));
}

#[test]
fn replay_reproduces_an_abort() {
    let run = Ferrite::run(&guest("assert_fail")).opts(&["--report", "r.json"]).go();
    run.assert_code(134);
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", "1"]).go();
    replay.assert_code(134);
    assert!(replay.stderr.contains("replay reproduced finding 1"), "{}", replay.describe());
}

#[test]
fn replay_reproduces_a_hang() {
    // The instruction budget is part of the report, so the replay stops at the same place.
    let run = Ferrite::run(&guest("endless_loop")).opts(&["--max-instructions", "3000000", "--report", "r.json"]).go();
    run.assert_code(66);
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", "1", "--report-out", "again.json"]).go();
    replay.assert_code(66);
    assert!(replay.stderr.contains("replay reproduced finding 1"), "{}", replay.describe());
    assert_eq!(get(&replay.json("again.json"), "run.instructions"), get(&run.json("r.json"), "run.instructions"));
}

#[test]
fn report_extension_is_case_insensitive() {
    // The report reader and writer detect the format case-insensitively (`r.JSON` replays), so
    // `run --report r.JSON` must be accepted too.
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.JSON"]).go();
    run.assert_code(7);
    read_json(&run.path("r.JSON"));
    let replay = Ferrite::replay(&run.path("r.JSON")).go();
    replay.assert_code(7);
    assert!(replay.stderr.contains("replay reproduced"));
}

fn edit_report(src: &Path, dst: &Path, edit: impl FnOnce(&mut Value)) {
    let mut r = read_json(src);
    edit(&mut r);
    std::fs::write(dst, serde_json::to_string_pretty(&r).unwrap()).unwrap();
}

#[test]
fn replay_notices_a_wrong_trace_hash() {
    let run = null_deref("r.json");
    let edited = run.path("edited.json");
    edit_report(&run.path("r.json"), &edited, |r| {
        let h = r["run"]["trace_hash"].as_str().unwrap().to_string();
        let flipped: String = h
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    if c == '0' {
                        '1'
                    } else {
                        '0'
                    }
                } else {
                    c
                }
            })
            .collect();
        r["run"]["trace_hash"] = Value::String(flipped);
    });
    let replay = Ferrite::replay(&edited).go();
    replay.assert_code(1);
    assert!(replay.stderr.contains("diverged"), "{}", replay.describe());
    assert!(!replay.stderr.contains("replay reproduced"));
}

#[test]
fn replay_notices_changed_arguments() {
    // A report whose arguments were edited describes another execution: exit_status 9 instead
    // of 7 runs (slightly) differently, so the trace hash cannot match.
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.json"]).go();
    run.assert_code(7);
    let edited = run.path("edited.json");
    edit_report(&run.path("r.json"), &edited, |r| {
        r["run"]["args"].as_array_mut().unwrap().push(Value::String("9".into()));
    });
    let replay = Ferrite::replay(&edited).go();
    replay.assert_code(1);
    assert!(replay.stderr.contains("diverged"), "{}", replay.describe());
}

/// A SARIF code flow steps through the calls a frame's inlined function was inlined at, each
/// at its own line (viewers show what `addr2line -i` would): `pm.h`'s `persist` at `append`'s
/// call of it.
#[test]
fn sarif_code_flows_step_through_inlined_calls() {
    let call = marker_line("pm_log.c", "persist(&p->count, sizeof p->count);");
    let prog = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    let run = Ferrite::crash(&prog)
        .opts(&["--quiet", "--analyses", "none", "--report", "r.sarif", "--recover", &recover])
        .args(&["/mnt/pmem0/log"])
        .go();
    let s = run.json("r.sarif");
    let steps: Vec<&serde_json::Value> = get(&s, "runs.0.results")
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["codeFlows"].as_array().unwrap())
        .flat_map(|f| f["threadFlows"][0]["locations"].as_array().unwrap())
        .collect();
    let i = steps
        .iter()
        .position(|st| st["location"]["message"]["text"].as_str().is_some_and(|t| t.starts_with("persist (pm.h:")))
        .unwrap_or_else(|| panic!("no step in persist: {}", run.describe()));
    let next = &steps[i + 1]["location"];
    assert_eq!(next["message"]["text"], format!("inlined in append (pm_log.c:{call})"));
    assert_eq!(next["physicalLocation"]["region"]["startLine"].as_u64(), Some(u64::from(call)));
}
