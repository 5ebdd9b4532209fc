//! Guests of the labelled suite (guests/manifest.ron, docs/compare.md) written from published bug
//! descriptions, each checked against what its label claims: PMDK misuse without PMDK (an
//! NT-stored payload, then a clflushed commit flag with no sfence between: `pm_nt_commit`), CCEH's
//! leaking directory doubling (`pm_cceh_leak`), an allocator that reuses memory across threads
//! (`pm_reuse_alloc`), a reader that flushes what it reads (`pm_flush_on_read`) and a YCSB-like
//! hash table workload (`pm_ycsb_hash`). guests/README.md describes them.

mod common;

use std::collections::BTreeSet;

use serde_json::Value;

use common::*;

const POOL: &str = "/mnt/pmem0/pool";

/// `ferrite run --analyses spec --seed seed [extra] -- guest POOL`: checks the exit status (66 with
/// findings, 0 without) and returns the JSON report.
fn run_report(guest_name: &str, spec: &str, seed: u64, extra: &[&str]) -> Value {
    let seed = seed.to_string();
    let mut opts = vec!["--analyses", spec, "--seed", &seed, "--report", "r.json"];
    opts.extend_from_slice(extra);
    let run = Ferrite::run(&guest(guest_name)).opts(&opts).args(&[POOL]).go();
    let report = run.json("r.json");
    let n = get(&report, "findings").as_array().map_or(0, Vec::len);
    run.assert_code(if n == 0 { 0 } else { 66 });
    report
}

/// `ferrite crash --analyses none --recover "guest POOL mode" -- guest POOL`: the run and its report.
fn crash(guest_name: &str, mode: &str) -> (Run, Value) {
    let g = guest(guest_name);
    let recover = format!("{} {POOL} {mode}", g.display());
    let run = Ferrite::crash(&g)
        .opts(&["--quiet", "--analyses", "none", "--report", "r.json", "--recover", recover.as_str()])
        .args(&[POOL])
        .go();
    let report = run.json("r.json");
    (run, report)
}

fn findings<'a>(report: &'a Value, analysis: &str) -> Vec<&'a Value> {
    get(report, "findings")
        .as_array()
        .expect("findings is an array")
        .iter()
        .filter(|f| f.get("analysis").and_then(Value::as_str) == Some(analysis))
        .collect()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// The lines of `file` at which `finding` has a location with `role`.
fn lines_of(finding: &Value, role: &str, file: &str) -> BTreeSet<u32> {
    get(finding, "locations")
        .as_array()
        .expect("locations")
        .iter()
        .filter(|l| l.get("role").and_then(Value::as_str) == Some(role))
        .filter(|l| {
            l.get("file").and_then(Value::as_str).is_some_and(|f| f == file || f.ends_with(&format!("/{file}")))
        })
        .filter_map(|l| l.get("line").and_then(Value::as_u64).map(|n| n as u32))
        .collect()
}

/// Every `crash` finding of `report` is a failed recovery whose crash point is on one of the
/// lines marked `markers` of `file`, and some finding's is on the first marker's line.
#[track_caller]
fn assert_crash_points(report: &Value, file: &str, markers: &[&str]) {
    let allowed: BTreeSet<u32> = markers.iter().map(|m| marker_line(file, m)).collect();
    let found = findings(report, "crash");
    assert!(!found.is_empty(), "no crash finding:\n{}", pretty(report));
    let mut points = BTreeSet::new();
    for f in &found {
        assert_eq!(f["kind"], "recovery-failed", "{}", pretty(f));
        let at = lines_of(f, "crash point", file);
        assert!(!at.is_empty() && at.is_subset(&allowed), "crash point outside {allowed:?}: {}", pretty(f));
        points.extend(at);
    }
    let first = marker_line(file, markers[0]);
    assert!(points.contains(&first), "no crash point at {file}:{first} (the BUG line): {points:?}");
}

/// Crash testing passes every image of `guest`.
#[track_caller]
fn assert_crash_passes(guest_name: &str, mode: &str) {
    let (run, report) = crash(guest_name, mode);
    run.assert_code(0);
    assert_eq!(report["crash"]["failures"], 0, "{}", pretty(&report["crash"]));
    assert!(report["crash"]["recoveries"].as_u64().unwrap() > 1, "{}", pretty(&report["crash"]));
    assert!(findings(&report, "crash").is_empty(), "{}", pretty(&report));
}

/// The guest prints the same under ferrite (with `seed`) as natively, and exits 0 both ways.
#[track_caller]
fn assert_same_as_native(guest_name: &str, seed: u64) {
    let g = guest(guest_name);
    let pm = scratch();
    let pool = pm.path().join("pool");
    let native = native(&g, &[pool.to_str().unwrap()], &[]);
    native.assert_code(0);
    let emu = Ferrite::run(&g).opts(&["--analyses", "none", "--seed", &seed.to_string()]).args(&[POOL]).go();
    emu.assert_code(0);
    assert_same_stdout(&native, &emu);
}

#[test]
fn nt_payload_committed_by_a_clflushed_flag_without_sfence_fails_recovery_and_the_fenced_twin_passes() {
    // Crash testing: the flag is durable (clflush) while the NT payload waits for a fence.
    let (run, report) = crash("pm_nt_commit", "check");
    run.assert_code(66);
    assert_crash_points(
        &report,
        "pm_nt_commit.c",
        &["/* BUG: NT payload not fenced before the commit flag */", "/* DRAIN:"],
    );
    assert!(
        findings(&report, "crash").iter().any(|f| f["message"].as_str().unwrap().contains("non-temporal")),
        "the image lost a pending non-temporal store:\n{}",
        pretty(&report)
    );
    assert_crash_passes("pm_nt_commit_fixed", "check");
    // `unpersisted` sees only the end state: every NT store fenced (late), every flag clflushed.
    for g in ["pm_nt_commit", "pm_nt_commit_fixed"] {
        let r = run_report(g, "unpersisted", 0, &[]);
        assert!(findings(&r, "unpersisted").is_empty(), "{g}:\n{}", pretty(&r));
    }
}

#[test]
fn cceh_doubling_that_allocates_before_linking_leaks_a_segment_and_the_intent_twin_reclaims_it() {
    let (run, report) = crash("pm_cceh_leak", "check");
    run.assert_code(66);
    assert_crash_points(
        &report,
        "pm_cceh_leak.c",
        &[
            "/* BUG: segment allocated before anything durable points to it */",
            "/* SEG: the segment persisted */",
            "/* LINK: the directory entry persisted */",
            "/* PUBLISH: the new entries reachable */",
        ],
    );
    assert_crash_passes("pm_cceh_leak_fixed", "check");
    for g in ["pm_cceh_leak", "pm_cceh_leak_fixed"] {
        let r = run_report(g, "unpersisted", 0, &[]);
        assert!(findings(&r, "unpersisted").is_empty(), "{g}:\n{}", pretty(&r));
    }
}

#[test]
fn an_allocator_reusing_blocks_across_threads_is_bug_free_and_only_hawkset_reports_the_reuse() {
    let file = "pm_reuse_alloc.c";
    let store = marker_line(file, "/* REUSE STORE:");
    let load = marker_line(file, "/* REUSE LOAD:");
    for seed in 0..3 {
        let r = run_report("pm_reuse_alloc", "unpersisted,vardalith,pmrace", seed, &[]);
        assert!(get(&r, "findings").as_array().unwrap().is_empty(), "seed {seed}:\n{}", pretty(&r));
        // HawkSet keys races by address: the block's generation stored by one owner under its own
        // lock and loaded by the next owner under the other lock (a false positive, labelled
        // bug-free in the manifest). Nothing else.
        let r = run_report("pm_reuse_alloc", "hawkset", seed, &[]);
        for f in findings(&r, "hawkset") {
            assert_eq!(lines_of(f, "store", file), BTreeSet::from([store]), "{}", pretty(f));
            assert_eq!(lines_of(f, "load", file), BTreeSet::from([load]), "{}", pretty(f));
        }
    }
    assert_crash_passes("pm_reuse_alloc", "check");
    assert_same_as_native("pm_reuse_alloc", 1);
}

#[test]
fn a_reader_that_flushes_what_it_reads_leaves_no_inconsistent_image() {
    let file = "pm_flush_on_read.c";
    // The ground truth: no crash image holds y without the x it came from.
    assert_crash_passes("pm_flush_on_read", "recover");
    // PMRace sees the unpersisted load and its side effect, but the reader made the source
    // durable before storing: no crash separates them, so nothing is reported (counted).
    let g = guest("pm_flush_on_read");
    let recover = format!("{} {POOL} recover", g.display());
    let r = run_report("pm_flush_on_read", "pmrace", 0, &["--recover", recover.as_str()]);
    assert!(findings(&r, "pmrace").is_empty(), "{}", pretty(&r));
    assert!(get(&r, "stats")["pmrace.source_durable_first"].as_u64().unwrap_or(0) >= 1, "{}", pretty(&r));
    // HawkSet and Vardalith see the load before the writer's own persist, whichever thread's
    // persist they accept (the reader's flush comes after its load).
    let (store, load) = (marker_line(file, "/* STORE:"), marker_line(file, "/* LOAD:"));
    for owner in ["own", "any"] {
        let r = run_report("pm_flush_on_read", "hawkset,vardalith", 0, &["--persist-owner", owner]);
        for pass in ["hawkset", "vardalith"] {
            let f = findings(&r, pass);
            assert!(
                f.iter()
                    .any(|f| lines_of(f, "store", file).contains(&store) && lines_of(f, "load", file).contains(&load)),
                "{pass} with persist_owner={owner}:\n{}",
                pretty(&r)
            );
        }
    }
}

#[test]
fn the_ycsb_hash_workload_is_bug_free_deterministic_and_small() {
    let r = run_report("pm_ycsb_hash", "unpersisted,hawkset,vardalith", 0, &[]);
    assert!(get(&r, "findings").as_array().unwrap().is_empty(), "{}", pretty(&r));
    let insns = get(&r, "run.instructions").as_u64().unwrap();
    assert!(insns > 500_000 && insns < 3_000_000, "{insns} instructions");
    // pmrace: nothing of the classes it is scored on (its intra-thread reports on the resize's
    // rehash are not one of them).
    let r = run_report("pm_ycsb_hash", "pmrace", 1, &[]);
    for f in findings(&r, "pmrace") {
        let kind = f["kind"].as_str().unwrap();
        assert!(kind != "inter-thread-inconsistency" && kind != "sync-inconsistency", "{}", pretty(f));
    }
    assert_same_as_native("pm_ycsb_hash", 2);
}

/// The bundled manifest labels these cases at the marked lines, and the fast detectors agree.
#[test]
fn the_bundled_manifest_labels_these_cases() {
    for g in ["pm_nt_commit", "pm_cceh_leak", "pm_reuse_alloc", "pm_flush_on_read", "pm_ycsb_hash"] {
        guest(g);
    }
    let dir = scratch();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let manifest = repo().join("guests/manifest.ron");
    let out = ferrite()
        .args(["compare", "--quiet", "--suite"])
        .arg(&manifest)
        .args([
            "--analyses",
            "unpersisted,vardalith",
            "--cases",
            "pm_nt_commit*,pm_cceh_leak*,pm_reuse_alloc,pm_flush_on_read,pm_ycsb_hash",
            "--report",
            "out/cmp.json",
        ])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cannot start ferrite compare");
    assert!(out.status.success(), "compare failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = read_json(&dir.path().join("out/cmp.json"));
    let case = |name: &str| -> &Value {
        get(&report, "cases")
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    };
    let truth_lines = |name: &str| -> BTreeSet<String> {
        case(name)["truth"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has bugs"))
            .iter()
            .flat_map(|b| b["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()))
            .collect()
    };
    let at = |file: &str, marker: &str| format!("{file}:{}", marker_line(file, marker));
    let nt = truth_lines("pm_nt_commit");
    assert!(nt.contains(&at("pm_nt_commit.c", "/* BUG: NT payload not fenced before the commit flag */")), "{nt:?}");
    let leak = truth_lines("pm_cceh_leak");
    assert!(
        leak.contains(&at("pm_cceh_leak.c", "/* BUG: segment allocated before anything durable points to it */")),
        "{leak:?}"
    );
    for name in ["pm_nt_commit", "pm_cceh_leak"] {
        let bug = &case(name)["truth"][0];
        assert_eq!(bug["class"], "crash-consistency");
        assert_eq!(bug["harmful"], true);
    }
    for name in ["pm_nt_commit_fixed", "pm_cceh_leak_fixed", "pm_reuse_alloc", "pm_flush_on_read", "pm_ycsb_hash"] {
        assert_eq!(case(name)["truth"], "bug-free", "{name}");
    }
    // unpersisted and vardalith report nothing on any of them (pm_flush_on_read is meant for
    // pmrace only: neither runs there).
    for c in get(&report, "cases").as_array().unwrap() {
        for (d, v) in c["detectors"].as_object().unwrap() {
            assert_eq!(v["verdict"], "clean", "{} {d}: {}", c["name"], pretty(v));
        }
    }
}
