//! Sharded campaigns (docs/campaigns.md): `ferrite crash` and `ferrite compare` split with
//! `--shard I/N` (or a job array's environment) and put together by `ferrite merge` give the
//! report the unsharded run writes — byte for byte for crash, apart from timings for compare —
//! and merge refuses parts of different campaigns and names the shards missing.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::*;

/// `ferrite merge PARTS --report OUT` (in `dir`).
fn merge(dir: &Path, parts: &[PathBuf], out: &Path) -> std::process::Output {
    ferrite()
        .arg("merge")
        .args(parts)
        .arg("--report")
        .arg(out)
        .arg("--quiet")
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cannot start ferrite merge")
}

fn error_of(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors = error_lines(&stderr);
    assert_eq!(out.status.code(), Some(2), "merge should fail with status 2:\n{stderr}");
    assert_eq!(errors.len(), 1, "one error line:\n{stderr}");
    errors[0].to_string()
}

/// pm_log's crash campaign (its recovery checks the log), sharded or not.
fn crash_log(program: &str, extra: &[&str], report: &Path) -> Ferrite {
    let g = guest(program);
    let recover = format!("{} /mnt/pmem0/log check", g.display());
    let mut opts = vec!["--quiet".to_string(), "--recover".into(), recover, "--report".into()];
    opts.push(report.display().to_string());
    opts.extend(extra.iter().map(|s| s.to_string()));
    Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/log"])
}

#[test]
fn crash_shards_merge_into_the_unsharded_report() {
    let dir = scratch();
    let at = |n: &str| dir.path().join(n);
    let whole = crash_log("pm_log", &[], &at("whole.json")).go();
    assert_eq!(whole.code, 66, "{}", whole.describe());
    let full = std::fs::read(at("whole.json")).unwrap();
    let report: Value = serde_json::from_slice(&full).unwrap();
    assert!(report["crash"]["failures"].as_u64().unwrap() > 0, "pm_log fails some recoveries");
    let unique = report["crash"]["unique_images"].as_u64().unwrap();
    assert!(unique >= 3, "{unique} unique images: too few to shard");

    // Shard 0 from the option, shard 1 from Slurm's variables (an array from 1), shard 2 from a
    // Kubernetes index.
    let parts: Vec<PathBuf> = (0..3).map(|i| at(&format!("part-{i}.json"))).collect();
    let runs = [
        crash_log("pm_log", &["--shard", "0/3"], &parts[0]),
        crash_log("pm_log", &[], &parts[1])
            .host_env("SLURM_ARRAY_TASK_ID", "2")
            .host_env("SLURM_ARRAY_TASK_MIN", "1")
            .host_env("SLURM_ARRAY_TASK_COUNT", "3"),
        crash_log("pm_log", &["--shard-count", "3"], &parts[2]).host_env("JOB_COMPLETION_INDEX", "2"),
    ];
    let mut recoveries = 0;
    for (i, r) in runs.into_iter().enumerate() {
        let run = r.go();
        assert_eq!(run.code, 0, "a shard that wrote its part exits 0\n{}", run.describe());
        let part = read_json(&parts[i]);
        assert_eq!(part["part"]["shard"], i as u64, "{}", run.describe());
        assert_eq!(part["part"]["shards"], 3);
        let done = part["body"]["report"]["crash"]["recoveries"].as_u64().unwrap();
        assert!(done > 0, "shard {i} recovered nothing");
        recoveries += done;
    }
    assert_eq!(recoveries, report["crash"]["recoveries"].as_u64().unwrap(), "no recovery is done twice");

    // In any order; byte for byte the unsharded report.
    let out = merge(dir.path(), &[parts[2].clone(), parts[0].clone(), parts[1].clone()], &at("merged.json"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = std::fs::read(at("merged.json")).unwrap();
    assert!(
        merged == full,
        "merged report differs from the unsharded one:\n{}",
        diff(&full, &merged, "whole.json", "merged.json")
    );

    // A missing shard is named; so is a duplicate.
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), parts[2].clone()], &at("m.json")));
    assert!(e.contains("shard 1/3") && e.contains("missing"), "{e}");
    assert!(!at("m.json").exists(), "nothing is written for an incomplete campaign");
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), parts[0].clone(), parts[1].clone()], &at("m.json")));
    assert!(e.contains("both shard 0/3"), "{e}");

    // Parts of other campaigns: other options, other inputs, not a part at all.
    let seed = at("seed.json");
    assert_eq!(crash_log("pm_log", &["--shard", "1/3", "--seed", "5"], &seed).go().code, 0);
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), seed, parts[2].clone()], &at("m.json")));
    assert!(e.contains("different campaign") && e.contains("seed: 5"), "{e}");
    let fixed = at("fixed.json");
    assert_eq!(crash_log("pm_log_fixed", &["--shard", "1/3"], &fixed).go().code, 0);
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), fixed, parts[2].clone()], &at("m.json")));
    assert!(e.contains("different campaign"), "{e}");
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), at("whole.json")], &at("m.json")));
    assert!(e.contains("not a part"), "{e}");
}

/// Shards with a few images each recover them on one worker, and find the campaign's unique
/// images without building them: still the unsharded report, merged. A shard whose share is
/// empty recovers nothing, exits 0, and counts the whole campaign's points and images.
#[test]
fn small_shards_and_empty_ones_merge_into_the_unsharded_report() {
    let dir = scratch();
    let at = |n: &str| dir.path().join(n);
    assert_eq!(crash_log("pm_log", &[], &at("whole.json")).go().code, 66);
    let full = std::fs::read(at("whole.json")).unwrap();
    let whole: Value = serde_json::from_slice(&full).unwrap();
    let unique = whole["crash"]["unique_images"].as_u64().unwrap();
    const N: u64 = 16;
    assert!(unique > N, "{unique} unique images");
    let parts: Vec<PathBuf> = (0..N).map(|i| at(&format!("part-{i}.json"))).collect();
    for (i, p) in parts.iter().enumerate() {
        let run = crash_log("pm_log", &["--shard", &format!("{i}/{N}")], p).go();
        assert_eq!(run.code, 0, "{}", run.describe());
    }
    let out = merge(dir.path(), &parts, &at("merged.json"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = std::fs::read(at("merged.json")).unwrap();
    assert!(merged == full, "{}", diff(&full, &merged, "whole.json", "merged.json"));

    // Shard `unique` of `unique + 1` owns no image.
    let empty = at("empty.json");
    let run = crash_log("pm_log", &["--shard", &format!("{unique}/{}", unique + 1)], &empty).go();
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(error_lines(&run.stderr).is_empty(), "{}", run.describe());
    let crash = &read_json(&empty)["body"]["report"]["crash"];
    assert_eq!(crash["recoveries"], 0, "{}", run.describe());
    assert_eq!(crash["failures"], 0);
    for count in ["crash_points", "images", "unique_images"] {
        assert_eq!(crash[count], whole["crash"][count], "{count}");
    }
}

#[test]
fn shard_options_are_checked() {
    let dir = scratch();
    let g = guest("pm_log");
    for (opts, want) in [
        (vec!["--shard", "3/3", "--report", "p.json"], "from 0 to 2"),
        (vec!["--shard", "1/3"], "--report"),
        (vec!["--shard", "1/3", "--report", "p.ron"], ".json"),
        (vec!["--shard-count", "2", "--report", "p.json"], "JOB_COMPLETION_INDEX"),
        (vec!["--shard", "0/2", "--lazy", "--report", "p.json"], "--lazy"),
    ] {
        let run = Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/log"]).go();
        assert_eq!(run.code, 2, "{}", run.describe());
        let errors = error_lines(&run.stderr);
        assert!(errors.len() == 1 && errors[0].contains(want), "{opts:?}: want `{want}`\n{}", run.describe());
    }
    // `--shard off` runs the whole campaign inside a job array.
    let run = Ferrite::crash(&g)
        .opts(&["--shard", "off", "--report", &dir.path().join("r.json").display().to_string()])
        .host_env("SLURM_ARRAY_TASK_ID", "0")
        .host_env("SLURM_ARRAY_TASK_COUNT", "4")
        .args(&["/mnt/pmem0/log"])
        .go();
    assert_eq!(run.code, 66, "{}", run.describe());
    assert!(read_json(&dir.path().join("r.json"))["crash"].is_object());
}

/// A manifest of a few cases of the bundled suite's guests.
fn small_suite() -> String {
    let g = repo().join("guests");
    format!(
        r#"(
  build: "{}",
  sources: "{}",
  cases: [
    (name: "pm_log", program: "pm_log", args: ["{{pool}}"], pool: "/mnt/pmem0/log",
     analyses: ["unpersisted"],
     crash: (recover: ["{{guest}}", "{{pool}}", "check"]),
     truth: Bugs([(class: "unpersisted-store",
                   at: [Marker("pm_log.c", "/* BUG: entry stored but never persisted */")], harmful: true)])),
    (name: "pm_log_fixed", program: "pm_log_fixed", args: ["{{pool}}"], pool: "/mnt/pmem0/log",
     analyses: ["unpersisted"],
     crash: (recover: ["{{guest}}", "{{pool}}", "check"]),
     truth: BugFree),
    (name: "thr_racy_counter", program: "thr_racy_counter", seeds: [0, 1], analyses: ["hmtrace"],
     truth: Bugs([(class: "data-race", at: [Marker("thr_racy_counter.c", "/* RACE: read */"),
                                            Marker("thr_racy_counter.c", "/* RACE: write */")])])),
  ],
)
"#,
        g.join("build").display(),
        g.join("src").display()
    )
}

#[test]
fn compare_shards_merge_into_the_unsharded_report() {
    let dir = scratch();
    std::fs::write(dir.path().join("m.ron"), small_suite()).unwrap();
    let compare = |extra: &[&str], report: &str| {
        guest("pm_log");
        guest("pm_log_fixed");
        guest("thr_racy_counter");
        let out = ferrite()
            .args(["compare", "--suite", "m.ron", "--jobs", "1", "--quiet", "--report", report])
            .args(extra)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("cannot start ferrite compare");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    compare(&[], "whole.json");
    let parts: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("part-{i}.json"))).collect();
    let mut runs = 0;
    for (i, part) in parts.iter().enumerate() {
        compare(&["--shard", &format!("{i}/3")], &format!("part-{i}.json"));
        runs += read_json(part)["body"]["runs"].as_array().unwrap().len();
    }
    let whole = read_json(&dir.path().join("whole.json"));
    let total: u64 = whole["detectors"].as_array().unwrap().iter().map(|d| d["runs"].as_u64().unwrap()).sum();
    assert_eq!(runs as u64, total, "every run in exactly one part");
    let out = merge(dir.path(), &parts, &dir.path().join("merged.json"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = read_json(&dir.path().join("merged.json"));
    let (a, b) = (without_timings(&whole), without_timings(&merged));
    if a != b {
        let (a, b) = (serde_json::to_string_pretty(&a).unwrap(), serde_json::to_string_pretty(&b).unwrap());
        panic!("merged compare report differs:\n{}", diff(a.as_bytes(), b.as_bytes(), "whole", "merged"));
    }
    assert!(dir.path().join("merged.csv").is_file() && dir.path().join("merged.svg").is_file());
    // A part that is not there is named.
    let e = error_of(&merge(dir.path(), &[parts[0].clone(), dir.path().join("nope.json")], &dir.path().join("m.json")));
    assert!(e.contains("nope.json"), "{e}");
}

/// `ferrite run` explorations: `--explore N` (units: the schedules), and `--strategy
/// exhaustive` with and without `--por` (units: the root schedule's alternatives), on the lost
/// update whose failed assertion some schedules show. Complete explorations merge into the
/// unsharded report byte for byte: the same schedules counted, the same findings in the same
/// order, each with the schedule that exposes it.
#[test]
fn exploration_shards_merge_into_the_unsharded_report() {
    let dir = scratch();
    let at = |n: &str| dir.path().join(n);
    let g = guest("thr_lost_update");
    let exhaustive = ["--strategy", "exhaustive", "--preempt", "all", "--max-preemptions", "1", "--explore", "400"];
    let modes: [(&str, Vec<&str>); 3] = [
        ("random", vec!["--explore", "8", "--preempt", "all", "--analyses", "hmtrace"]),
        ("exhaustive", exhaustive.to_vec()),
        ("por", [&exhaustive[..], &["--por"]].concat()),
    ];
    for (name, opts) in modes {
        let run = |extra: &[&str], report: &Path| {
            let report = report.display().to_string();
            let run = Ferrite::run(&g).opts(&["--quiet", "--report", &report]).opts(&opts).opts(extra).go();
            assert!(matches!(run.code, 0 | 66), "{}", run.describe());
            run
        };
        let whole = run(&[], &at(&format!("{name}.json")));
        let parts: Vec<PathBuf> = (0..3).map(|i| at(&format!("{name}-{i}.json"))).collect();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(run(&["--shard", &format!("{i}/3")], p).code, 0);
        }
        let out = merge(dir.path(), &parts, &at(&format!("{name}-merged.json")));
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let (a, b) = (
            std::fs::read(at(&format!("{name}.json"))).unwrap(),
            std::fs::read(at(&format!("{name}-merged.json"))).unwrap(),
        );
        assert!(a == b, "{name}: merged differs\n{}\n{}", diff(&a, &b, "whole", "merged"), whole.describe());
        let report: Value = serde_json::from_slice(&a).unwrap();
        if name != "random" {
            assert!(
                report["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "SIGABRT"),
                "{name}: the lost update is found"
            );
        }
    }
    // pmrace's exploration is guided by its earlier runs: not shardable.
    let run =
        Ferrite::run(&g).opts(&["--strategy", "pmrace", "--explore", "4", "--shard", "0/2", "--report", "p.json"]).go();
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(error_lines(&run.stderr)[0].contains("pmrace"), "{}", run.describe());
}

/// `ferrite slurm` writes a batch script with the array, the per-task resources and the
/// dependent merge, valid shell; and refuses a campaign it cannot shard or whose options it
/// sets itself, before writing anything.
#[test]
fn slurm_writes_the_batch_script() {
    let dir = scratch();
    let slurm = |args: &[&str]| {
        ferrite()
            .arg("slurm")
            .args(args)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("cannot start ferrite slurm")
    };
    let g = guest("pm_log").display().to_string();
    let out = slurm(&[
        "--shards",
        "4",
        "--cpus",
        "2",
        "--mem",
        "3G",
        "--time",
        "0:30:00",
        "--dir",
        "c",
        "--",
        "crash",
        "--env-clear",
        "--",
        &g,
        "/mnt/pmem0/log",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let script = std::fs::read_to_string(dir.path().join("c/campaign.sbatch")).unwrap();
    for want in [
        "#SBATCH --array=0-3",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=3G",
        "#SBATCH --time=0:30:00",
        "--dependency=afterany:",
        "--shard \"$SLURM_ARRAY_TASK_ID/4\"",
        " merge ",
    ] {
        assert!(script.contains(want), "no `{want}` in\n{script}");
    }
    let syntax =
        std::process::Command::new("bash").arg("-n").arg(dir.path().join("c/campaign.sbatch")).status().unwrap();
    assert!(syntax.success(), "the script is not valid shell:\n{script}");
    for (args, want) in [
        (vec!["--shards", "4", "--", "run", "--", &g], "`crash` and `compare`"),
        (vec!["--shards", "4", "--", "compare", "--report", "x.json"], "sets the report"),
        (vec!["--shards", "4", "--", "compare", "--bogus"], "--bogus"),
        (vec!["--shards", "0", "--", "compare"], "at least one"),
    ] {
        let out = slurm(&args);
        let e = error_of(&out);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}
