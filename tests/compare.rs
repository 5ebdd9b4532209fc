//! `ferrite compare` on a small suite written here (docs/compare.md): the JSON, CSV and SVG it
//! writes, the scores it gives (unpersisted finds pm_log's entry store at its BUG line and
//! reports nothing on the fixed twin; crash finds the harmful bug; hmtrace is scored k/N over
//! seeds), that every run's findings are exactly what `ferrite run` / `ferrite crash` give on
//! the case alone, the options a case gives one detector (`pass_options`), and the errors for a
//! missing binary, a marker that is not in the sources and an unknown bug class.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use common::*;

/// A manifest over the repository's guests (built by [`guest`]).
fn suite(cases: &str) -> String {
    let g = repo().join("guests");
    format!(
        "(\n  build: \"{}\",\n  sources: \"{}\",\n  cases: [\n{cases}\n  ],\n)\n",
        g.join("build").display(),
        g.join("src").display()
    )
}

const SMALL: &str = r#"
    (name: "pm_log", program: "pm_log", args: ["{pool}"], pool: "/mnt/pmem0/log",
     analyses: ["unpersisted"],
     crash: (recover: ["{guest}", "{pool}", "check"]),
     truth: Bugs([(class: "unpersisted-store",
                   at: [Marker("pm_log.c", "/* BUG: entry stored but never persisted */")], harmful: true)])),
    (name: "pm_log_fixed", program: "pm_log_fixed", args: ["{pool}"], pool: "/mnt/pmem0/log",
     analyses: ["unpersisted"],
     crash: (recover: ["{guest}", "{pool}", "check"]),
     truth: BugFree),
    (name: "pm_unflushed_fence", program: "pm_unflushed_fence", analyses: ["unpersisted"],
     truth: Bugs([
        (class: "flush-without-fence", at: [Marker("pm_unflushed_fence.c", "/* BUG: flush without fence */")]),
        (class: "unpersisted-store", at: [Marker("pm_unflushed_fence.c", "/* STORE: unfenced line */")]),
     ])),
    (name: "thr_racy_counter", program: "thr_racy_counter", seeds: [0, 1], analyses: ["hmtrace"],
     truth: Bugs([(class: "data-race", at: [Marker("thr_racy_counter.c", "/* RACE: read */"),
                                            Marker("thr_racy_counter.c", "/* RACE: write */")])])),
"#;

/// `ferrite compare --suite m.ron ARGS` in a fresh scratch directory holding the manifest.
fn compare(manifest: &str, args: &[&str]) -> Run {
    let dir = scratch();
    std::fs::write(dir.path().join("m.ron"), manifest).unwrap();
    let mut cmd = ferrite();
    cmd.arg("compare").arg("--suite").arg("m.ron").args(args);
    let out =
        cmd.current_dir(dir.path()).stdin(std::process::Stdio::null()).output().expect("cannot start ferrite compare");
    Run {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: shell_status(out.status),
        dir,
        cmdline: format!("ferrite compare --suite m.ron {}", args.join(" ")),
    }
}

fn case<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["cases"]
        .as_array()
        .expect("cases is an array")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case `{name}` in the report"))
}

fn summary<'a>(report: &'a Value, detector: &str, class: &str) -> &'a Value {
    report["summary"]
        .as_array()
        .expect("summary is an array")
        .iter()
        .find(|r| r["detector"] == detector && r["class"] == class)
        .unwrap_or_else(|| panic!("no summary row {detector}/{class}"))
}

/// (kind, lines) of each finding of `analysis` in a `ferrite run`/`crash` report.
fn finding_lines(report: &Value, analysis: &str) -> BTreeSet<(String, Vec<String>)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["analysis"] == analysis)
        .map(|f| {
            let lines = f["locations"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|l| {
                    let file = l.get("file")?.as_str()?;
                    Some(format!("{}:{}", file.rsplit('/').next().unwrap(), l.get("line")?.as_u64()?))
                })
                .collect::<Vec<_>>();
            let mut dedup = lines.clone();
            dedup.dedup();
            (f["kind"].as_str().unwrap().to_string(), dedup)
        })
        .collect()
}

/// The same, from one run (seed) of a detector on a case in the compare report.
fn compare_lines(case: &Value, detector: &str, seed: u64) -> BTreeSet<(String, Vec<String>)> {
    let runs = case["detectors"][detector]["runs"].as_array().expect("runs");
    let run = runs.iter().find(|r| r["seed"] == seed).unwrap_or_else(|| panic!("no run with seed {seed}"));
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let lines = f["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect();
            (f["kind"].as_str().unwrap().to_string(), lines)
        })
        .collect()
}

#[test]
fn a_small_suite_is_scored_and_matches_each_run_alone() {
    for g in ["pm_log", "pm_log_fixed", "pm_unflushed_fence", "thr_racy_counter"] {
        guest(g);
    }
    let run = compare(&suite(SMALL), &["--analyses", "unpersisted,hmtrace,crash", "--report", "out/cmp.json"]);
    // The report's directory must exist.
    run.assert_code(2);
    assert!(error_lines(&run.stderr)[0].contains("does not exist"), "{}", run.describe());
    std::fs::create_dir(run.path("out")).unwrap();
    let mut cmd = ferrite();
    cmd.args(["compare", "--suite", "m.ron", "--analyses", "unpersisted,hmtrace,crash", "--report", "out/cmp.json"]);
    let out = cmd.current_dir(run.dir.path()).stdin(std::process::Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(shell_status(out.status), 0, "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    // The tables: one per class, then the matrix.
    for heading in ["## unpersisted-store", "## data-race", "## crash-consistency", "## cases", "## cost"] {
        assert!(stdout.contains(heading), "`{heading}` missing:\n{stdout}");
    }
    // Guest output never reaches the tables.
    assert!(!stdout.contains("log has 5 entries"), "{stdout}");

    let report = read_json(&run.path("out/cmp.json"));
    assert_eq!(report["cases"].as_array().unwrap().len(), 4);
    for c in report["cases"].as_array().unwrap() {
        for key in ["name", "program", "args", "seeds", "truth", "detectors"] {
            assert!(c.get(key).is_some(), "case without `{key}`: {c}");
        }
        for (_, d) in c["detectors"].as_object().unwrap() {
            for key in ["verdict", "tp", "fp", "fn", "bugs", "time_s", "runs"] {
                assert!(d.get(key).is_some(), "detector entry without `{key}`: {d}");
            }
        }
    }
    for row in report["summary"].as_array().unwrap() {
        for key in [
            "detector",
            "class",
            "cases",
            "bugs",
            "tp",
            "fp",
            "fn",
            "precision",
            "recall",
            "f1",
            "time_s",
            "peak_rss_mib",
        ] {
            assert!(row.get(key).is_some(), "summary row without `{key}`: {row}");
        }
    }
    let detectors: Vec<&str> =
        report["detectors"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(detectors, ["unpersisted", "hmtrace", "crash"]);

    // unpersisted: a true positive on pm_log at the BUG line, nothing on the fixed twin.
    let bug = marker_line("pm_log.c", "/* BUG: entry stored but never persisted */");
    let pm_log = case(&report, "pm_log");
    assert_eq!(pm_log["truth"][0]["lines"][0], format!("pm_log.c:{bug}"));
    let u = &pm_log["detectors"]["unpersisted"];
    assert_eq!(u["verdict"], "found", "{u}");
    assert_eq!((u["tp"].as_f64(), u["fp"].as_f64(), u["fn"].as_f64()), (Some(1.0), Some(0.0), Some(0.0)));
    let f = &u["runs"][0]["findings"][0];
    assert_eq!(f["lines"][0], format!("pm_log.c:{bug}"));
    assert_eq!(f["matches"][0], "pm_log#1");
    let fixed = &case(&report, "pm_log_fixed")["detectors"]["unpersisted"];
    assert_eq!(fixed["verdict"], "clean", "{fixed}");
    assert_eq!(fixed["fp"].as_f64(), Some(0.0));
    // hmtrace does not run on PM cases not meant for it, unpersisted not on the racy counter.
    assert!(pm_log["detectors"].get("hmtrace").is_none());
    assert!(case(&report, "thr_racy_counter")["detectors"].get("unpersisted").is_none());

    // Two classes of unpersisted on pm_unflushed_fence, each found.
    let fence = &case(&report, "pm_unflushed_fence")["detectors"]["unpersisted"];
    assert_eq!(fence["verdict"], "found", "{fence}");
    assert_eq!(fence["bugs"].as_array().unwrap().len(), 2);
    let row = summary(&report, "unpersisted", "unpersisted-store");
    assert_eq!((row["tp"].as_f64(), row["fp"].as_f64(), row["fn"].as_f64()), (Some(2.0), Some(0.0), Some(0.0)));
    assert_eq!(row["precision"].as_f64(), Some(1.0));
    assert_eq!(summary(&report, "unpersisted", "flush-without-fence")["tp"].as_f64(), Some(1.0));
    // No bug of the class anywhere and nothing reported: no precision, no recall.
    let rf = summary(&report, "unpersisted", "redundant-flush");
    assert_eq!((rf["tp"].as_f64(), rf["fp"].as_f64(), rf["fn"].as_f64()), (Some(0.0), Some(0.0), Some(0.0)));
    assert!(rf["precision"].is_null() && rf["f1"].is_null(), "{rf}");

    // crash: the harmful bug fails recovery, the fixed twin passes every image.
    let c = &pm_log["detectors"]["crash"];
    assert_eq!(c["verdict"], "found", "{c}");
    assert_eq!(case(&report, "pm_log_fixed")["detectors"]["crash"]["verdict"], "clean");
    assert!(case(&report, "pm_unflushed_fence")["detectors"].get("crash").is_none(), "no recovery, no crash run");

    // hmtrace: one run per seed, the race found in each.
    let h = &case(&report, "thr_racy_counter")["detectors"]["hmtrace"];
    assert_eq!(h["runs"].as_array().unwrap().len(), 2);
    assert_eq!(h["bugs"][0]["found"], 2);
    assert_eq!(h["bugs"][0]["of"], 2);

    // Every number comes from runs that `ferrite run` and `ferrite crash` reproduce alone.
    let alone = Ferrite::run(&guest("pm_log"))
        .opts(&["--analyses", "unpersisted", "--seed", "0", "--report", "r.json"])
        .args(&["/mnt/pmem0/log"])
        .go();
    alone.assert_code(66);
    assert_eq!(finding_lines(&alone.json("r.json"), "unpersisted"), compare_lines(pm_log, "unpersisted", 0));
    let racy = case(&report, "thr_racy_counter");
    let alone = Ferrite::run(&guest("thr_racy_counter"))
        .opts(&["--analyses", "hmtrace", "--seed", "1", "--report", "r.json"])
        .go();
    assert_eq!(finding_lines(&alone.json("r.json"), "hmtrace"), compare_lines(racy, "hmtrace", 1));
    let recover = format!("{} /mnt/pmem0/log check", guest("pm_log").display());
    let alone = Ferrite::crash(&guest("pm_log"))
        .opts(&["--quiet", "--analyses", "none", "--recover", &recover, "--report", "r.json"])
        .args(&["/mnt/pmem0/log"])
        .go();
    alone.assert_code(66);
    assert_eq!(finding_lines(&alone.json("r.json"), "crash"), compare_lines(pm_log, "crash", 0));
    // The command a run reproduces with is in the report.
    let cmdline = u["runs"][0]["command"].as_str().unwrap();
    assert!(cmdline.starts_with("ferrite run --env-clear --analyses unpersisted --seed 0 -- "), "{cmdline}");

    // CSV and SVG next to the JSON.
    let csv = std::fs::read_to_string(run.path("out/cmp.csv")).unwrap();
    assert!(csv.starts_with("detector,class,cases,bugs,tp,fp,fn,precision,recall,f1,time_s,peak_rss_mib\n"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + report["summary"].as_array().unwrap().len());
    assert!(csv.contains("\nunpersisted,unpersisted-store,3,2,2.0000,0.0000,0.0000,1.0000,1.0000,1.0000,"), "{csv}");
    let svg = std::fs::read_to_string(run.path("out/cmp.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("hmtrace") && svg.contains("</svg>"), "{svg}");
}

#[test]
fn a_missing_binary_or_marker_is_an_error_before_anything_runs() {
    guest("pm_log");
    let missing = suite(r#"(name: "x", program: "no_such_guest", truth: BugFree),"#);
    let run = compare(&missing, &[]);
    run.assert_code(2);
    let errors = error_lines(&run.stderr);
    assert_eq!(errors.len(), 1, "{}", run.describe());
    assert!(errors[0].contains("no_such_guest") && errors[0].contains("make -C guests"), "{}", run.describe());

    let marker = suite(
        r#"(name: "pm_log", program: "pm_log", truth: Bugs([(class: "unpersisted-store", at: [Marker("pm_log.c", "/* NOT THERE */")])])),"#,
    );
    let run = compare(&marker, &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("/* NOT THERE */") && run.stderr.contains("pm_log"), "{}", run.describe());

    let class = suite(
        r#"(name: "pm_log", program: "pm_log", truth: Bugs([(class: "bad-vibes", at: [Line("pm_log.c", 1)])])),"#,
    );
    let run = compare(&class, &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("unknown bug class `bad-vibes`"), "{}", run.describe());

    let run = compare(&suite(SMALL), &["--analyses", "nonesuch"]);
    run.assert_code(2);
    assert!(run.stderr.contains("nonesuch"), "{}", run.describe());
    assert!(Path::new(&run.path("m.ron")).is_file());
}

/// A bug a detector's definition cannot report (`beyond`) is not scored for it: no TP, no FN,
/// and its findings naming the bug are no false positives; what it found is listed apart. Other
/// detectors are scored on it as usual. A `beyond` naming an unknown detector, or giving no
/// reason, is an error.
#[test]
fn a_bug_beyond_a_detectors_definition_is_not_scored_for_it() {
    let cases = r#"
    (name: "hs_irh_writer", program: "hs_irh_writer", args: ["{pool}"], seeds: [0, 1, 2],
     analyses: ["hawkset", "vardalith"],
     truth: Bugs([(class: "persistence-race",
                   at: [Marker("hs_irh_writer.c", "/* STORE:"), Marker("hs_irh_writer.c", "/* LOAD:")],
                   beyond: [("vardalith", "the load happens before the store in some seeds")])])),
"#;
    let run = compare(&suite(cases), &["--analyses", "hawkset,vardalith", "--report", "c.json", "--jobs", "1"]);
    run.assert_code(0);
    let r = run.json("c.json");
    let v = summary(&r, "vardalith", "persistence-race");
    assert_eq!(
        (v["bugs"].as_u64(), v["tp"].as_f64(), v["fp"].as_f64(), v["fn"].as_f64()),
        (Some(0), Some(0.0), Some(0.0), Some(0.0)),
        "{v:#}"
    );
    let h = summary(&r, "hawkset", "persistence-race");
    assert_eq!((h["bugs"].as_u64(), h["tp"].as_f64()), (Some(1), Some(1.0)), "{h:#}");
    let c = &case(&r, "hs_irh_writer")["detectors"]["vardalith"];
    let beyond = c["beyond"].as_array().expect("beyond listed");
    assert_eq!(beyond.len(), 1, "{c:#}");
    assert_eq!(beyond[0]["of"].as_u64(), Some(3));
    assert!(run.stdout_str().contains("(beyond "), "{}", run.stdout_str());

    for (bad, msg) in [
        (r#"beyond: [("nonesuch", "why")]"#, "unknown detector `nonesuch` in `beyond`"),
        (r#"beyond: [("vardalith", " ")]"#, "`beyond` gives no reason for `vardalith`"),
    ] {
        let m = suite(&format!(
            r#"(name: "x", program: "hs_irh_writer", truth: Bugs([(class: "persistence-race", at: [Line("hs_irh_writer.c", 1)], {bad})])),"#
        ));
        let run = compare(&m, &[]);
        run.assert_code(2);
        assert!(run.stderr.contains(msg), "{}", run.describe());
    }
}

/// A run's findings do not depend on what other runs of the campaign wrote: `pm_fsync_log`
/// writes its log to the working directory, and its crash finding (the crash point's
/// instruction count in the message) was another when the `unpersisted` run of the same case
/// had left that log in the shared scratch directory before the crash campaign ran.
#[test]
fn a_run_does_not_see_the_files_other_runs_wrote() {
    guest("pm_fsync_log");
    let cases = r#"
    (name: "pm_fsync_log", program: "pm_fsync_log", args: ["{pool}"],
     analyses: ["unpersisted", "crash"],
     crash: (recover: ["{guest}", "{pool}", "recover"]),
     truth: Bugs([(class: "crash-consistency", at: [Marker("pm_fsync_log.c", "/* BUG")], harmful: true)])),
"#;
    let findings = |analyses: &str| {
        let run = compare(&suite(cases), &["--analyses", analyses, "--report", "c.json", "--jobs", "1"]);
        run.assert_code(0);
        let r = run.json("c.json");
        let runs = case(&r, "pm_fsync_log")["detectors"]["crash"]["runs"].as_array().expect("crash runs").clone();
        let f: Vec<Value> = runs.iter().map(|r| r["findings"].clone()).collect();
        assert!(f.iter().any(|f| !f.as_array().unwrap().is_empty()), "crash finds the bug: {f:#?}");
        f
    };
    assert_eq!(findings("crash"), findings("unpersisted,crash"));
}

/// A seed a case lists twice runs once: `seeds: [1, 0, 1]` is seeds 1 and 0, in that order (the
/// base dropped only adjacent repeats and ran seed 1 twice, scoring it twice).
#[test]
fn a_seed_listed_twice_runs_once() {
    guest("thr_racy_counter");
    let cases = r#"
    (name: "thr_racy_counter", program: "thr_racy_counter", seeds: [1, 0, 1], analyses: ["hmtrace"],
     truth: Bugs([(class: "data-race", at: [Marker("thr_racy_counter.c", "/* RACE: read */"),
                                            Marker("thr_racy_counter.c", "/* RACE: write */")])])),
"#;
    let run = compare(&suite(cases), &["--analyses", "hmtrace", "--report", "cmp.json"]);
    run.assert_code(0);
    let report: Value = serde_json::from_slice(&std::fs::read(run.path("cmp.json")).unwrap()).unwrap();
    let c = case(&report, "thr_racy_counter");
    assert_eq!(c["seeds"], serde_json::json!([1, 0]), "{c:#}");
    let seeds: Vec<u64> =
        c["detectors"]["hmtrace"]["runs"].as_array().unwrap().iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [1, 0], "{c:#}");
}

/// A case's `pass_options` go to one detector's runs only (after the case's `options`), and a
/// `--explore` among them keeps `compare --explore` from that detector; an unknown detector
/// there is an error.
#[test]
fn a_case_gives_one_detector_options_of_its_own() {
    guest("thr_racy_counter");
    let cases = r#"
    (name: "thr_racy_counter", program: "thr_racy_counter", analyses: ["hmtrace", "oscs"],
     options: ["--max-instructions", "50000000"],
     pass_options: {"oscs": ["--explore", "2"]},
     truth: Bugs([(class: "data-race", at: [Marker("thr_racy_counter.c", "/* RACE: read */"),
                                            Marker("thr_racy_counter.c", "/* RACE: write */")])])),
"#;
    let run =
        compare(&suite(cases), &["--analyses", "hmtrace,oscs", "--explore", "3", "--report", "c.json", "--jobs", "1"]);
    run.assert_code(0);
    let r = run.json("c.json");
    let command = |d: &str| {
        let runs = case(&r, "thr_racy_counter")["detectors"][d]["runs"].as_array().expect("runs").clone();
        runs[0]["command"].as_str().unwrap().to_string()
    };
    let (oscs, hmtrace) = (command("oscs"), command("hmtrace"));
    assert!(oscs.contains("--max-instructions 50000000 --explore 2 --"), "{oscs}");
    assert!(!oscs.contains("--explore 3"), "{oscs}");
    assert!(hmtrace.contains("--explore 3") && !hmtrace.contains("--explore 2"), "{hmtrace}");

    let m = suite(r#"(name: "x", program: "thr_racy_counter", pass_options: {"nonesuch": []}, truth: BugFree),"#);
    let run = compare(&m, &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("unknown detector `nonesuch` in `pass_options`"), "{}", run.describe());
}
