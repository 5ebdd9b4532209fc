//! `ferrite crash`: the PM log that persists its counter but not its entries fails recovery's
//! check, minimised to the entry's line and replayable; its fixed twin passes every crash image;
//! results do not depend on `--jobs`; the user's PM directory is never changed.

mod common;

use common::*;
use serde_json::Value;

fn crash_run(prog: &str, extra: &[&str], pm: Option<&std::path::Path>) -> Run {
    let g = guest(prog);
    let recover = format!("{} /mnt/pmem0/log check", g.display());
    let mut opts: Vec<String> = vec!["--quiet".into(), "--report".into(), "r.json".into(), "--recover".into(), recover];
    if let Some(p) = pm {
        opts.push("--pm-dir".into());
        opts.push(p.display().to_string());
    }
    opts.extend(extra.iter().map(|s| s.to_string()));
    Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/log"]).go()
}

/// The source lines of a crash finding's lost stores.
fn lost_lines(f: &Value) -> Vec<u64> {
    f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["role"] == "lost store")
        .map(|l| l["line"].as_u64().unwrap())
        .collect()
}

fn crash_findings(report: &Value) -> Vec<&Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["analysis"] == "crash").collect()
}

#[test]
fn unpersisted_log_entry_fails_recovery_minimised_to_its_line() {
    let bug = u64::from(marker_line("pm_log.c", "/* BUG: entry stored but never persisted */"));
    let run = crash_run("pm_log", &[], None);
    run.assert_code(66);
    let report = run.json("r.json");
    let c = &report["crash"];
    assert!(c["failures"].as_u64().unwrap() > 0, "{c}");
    assert!(c["unique_images"].as_u64().unwrap() <= c["images"].as_u64().unwrap());
    let found = crash_findings(&report);
    assert!(!found.is_empty());
    for f in &found {
        assert_eq!(f["kind"], "recovery-failed");
        let lost = lost_lines(f);
        assert_eq!(lost, vec![bug], "minimised to the entry's store: {f}");
        assert!(f["message"].as_str().unwrap().contains("one line"), "{f}");
        assert!(f["crash_image"]["choice"].is_array());
    }
    // The finding replays: the image is rebuilt from a fresh workload run and recovery fails again.
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", &found[0]["id"].to_string()]).go();
    replay.assert_code(66);
    assert!(replay.stderr.contains("replay reproduced finding"), "{}", replay.describe());
}

#[test]
fn fixed_log_passes_every_crash_image() {
    let run = crash_run("pm_log_fixed", &[], None);
    run.assert_code(0);
    let report = run.json("r.json");
    assert_eq!(report["crash"]["failures"], 0);
    assert!(report["crash"]["unique_images"].as_u64().unwrap() > 1);
    assert!(report["crash"]["crash_points"].as_u64().unwrap() > 5);
    assert!(crash_findings(&report).is_empty());
}

#[test]
fn jobs_do_not_change_the_report_and_the_users_pool_is_untouched() {
    let pm = scratch();
    // Start from an existing pool, as a user recovering a real one would.
    let pool = pm.path().join("log");
    std::fs::write(&pool, vec![7u8; 4096]).unwrap();
    let before = std::fs::read(&pool).unwrap();
    let one = crash_run("pm_log", &["--jobs", "1"], Some(pm.path()));
    let two = crash_run("pm_log", &["--jobs", "2"], Some(pm.path()));
    one.assert_code(66);
    two.assert_code(66);
    let (a, b) = (one.json("r.json"), two.json("r.json"));
    assert_eq!(a["crash"], b["crash"]);
    assert_eq!(a["findings"], b["findings"]);
    assert_eq!(std::fs::read(&pool).unwrap(), before, "the user's pool is byte-for-byte unchanged");
}

#[test]
fn spinlock_persisted_while_held_hangs_recovery_and_the_reset_twin_passes() {
    let run_with = |prog: &str| {
        let g = guest(prog);
        let recover = format!("{} /mnt/pmem0/pool recover", g.display());
        Ferrite::crash(&g)
            // A small instruction budget makes the hanging recoveries end sooner.
            .opts(&[
                "--quiet",
                "--analyses",
                "none",
                "--max-instructions",
                "3000000",
                "--report",
                "r.json",
                "--recover",
                recover.as_str(),
            ])
            .args(&["/mnt/pmem0/pool"])
            .go()
    };
    let bug = run_with("pm_spinlock");
    bug.assert_code(66);
    let report = bug.json("r.json");
    let found = crash_findings(&report);
    assert!(!found.is_empty());
    assert!(found.iter().all(|f| f["message"].as_str().unwrap().contains("recovery hung")), "{found:?}");
    let fixed = run_with("pm_spinlock_fixed");
    fixed.assert_code(0);
    assert_eq!(fixed.json("r.json")["crash"]["failures"], 0);
}

/// A reader copying a value its writer has not persisted yet into PM (`pr_copy`, PMRace's
/// Figure 1): some crash image keeps the copy and loses the source, and recovery's consistency
/// check fails there, the lost store being the writer's. With `--explore` every schedule is
/// crash-tested (images already recovered are not recovered again); the twin that persists inside
/// the critical section passes every image of every schedule.
#[test]
fn a_reader_copying_an_unpersisted_value_fails_some_image_across_schedules() {
    let source = u64::from(marker_line("pr_copy.c", "/* PR: source store */"));
    let run_on = |name: &str| {
        let recover = format!("{} /mnt/pmem0/pool recover", guest(name).display());
        let opts = ["--quiet", "--analyses", "none", "--explore", "4", "--report", "r.json", "--recover", &recover];
        Ferrite::crash(&guest(name)).opts(&opts).args(&["/mnt/pmem0/pool"]).go()
    };
    let run = run_on("pr_copy");
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(report["run"]["schedules"], 4);
    let found = crash_findings(&report);
    assert!(!found.is_empty(), "{report}");
    assert!(found.iter().all(|f| f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["role"] == "lost store" && l["line"].as_u64() == Some(source))));
    let run = run_on("pr_copy_fixed");
    run.assert_code(0);
    let report = run.json("r.json");
    assert_eq!(report["crash"]["failures"], 0);
    assert!(report["crash"]["unique_images"].as_u64().unwrap() > 0);
}

/// `--crash-at N`: one crash point, after exactly N instructions of the workload (here 2,000
/// before the end of the log's run), recorded in the report and replayable; the buggy log
/// fails there with a lost entry, the fixed one passes and ferrite exits 0.
#[test]
fn crash_at_one_instruction_index() {
    let total = |name: &str| {
        let run = Ferrite::run(&guest(name))
            .opts(&["--analyses", "none", "--report", "n.json"])
            .args(&["/mnt/pmem0/log"])
            .go();
        run.json("n.json")["run"]["instructions"].as_u64().unwrap()
    };
    let n = (total("pm_log") - 2000).to_string();
    let run = crash_run("pm_log", &["--crash-at", &n, "--analyses", "none"], None);
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(report["crash"]["crash_points"], 1, "{report}");
    assert_eq!(report["crash"]["crash_at"].as_u64().map(|v| v.to_string()), Some(n.clone()));
    let found = crash_findings(&report);
    assert!(
        !found.is_empty() && found.iter().all(|f| f["message"].as_str().unwrap().contains(&format!("instruction {n}")))
    );
    assert!(report["findings"].as_array().unwrap().iter().all(|f| f["analysis"] != "hang"), "{report}");
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", &found[0]["id"].to_string()]).go();
    assert!(replay.stderr.contains("replay reproduced finding"), "{}", replay.describe());
    let n = (total("pm_log_fixed") - 2000).to_string();
    let run = crash_run("pm_log_fixed", &["--crash-at", &n, "--analyses", "none"], None);
    run.assert_code(0);
    assert_eq!(run.json("r.json")["crash"]["failures"], 0);
}

/// `--remap`: recovery maps the pool 64 GiB lower than the workload did. A list linked by
/// absolute addresses, persisted in order, passes every image without it and fails with it
/// (recovery follows a stale pointer: the fault is located); the twin linked by offsets passes
/// both ways.
#[test]
fn remap_exposes_absolute_pointers_stored_in_pm() {
    let deref = u64::from(marker_line("pm_abs_pointer.c", "/* DEREF: follows the stored address */"));
    let crash = |name: &str, remap: bool| {
        let recover = format!("{} /mnt/pmem0/pool check", guest(name).display());
        let mut opts = vec!["--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover];
        if remap {
            opts.push("--remap");
        }
        Ferrite::crash(&guest(name)).opts(&opts).args(&["/mnt/pmem0/pool"]).go()
    };
    crash("pm_abs_pointer", false).assert_code(0);
    let run = crash("pm_abs_pointer", true);
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(report["crash"]["remap"], true);
    let found = crash_findings(&report);
    assert!(!found.is_empty());
    assert!(found.iter().all(|f| f["message"].as_str().unwrap().contains("SIGSEGV")
        && f["locations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["role"] == "recovery fault" && l["line"].as_u64() == Some(deref))));
    crash("pm_abs_pointer_fixed", false).assert_code(0);
    crash("pm_abs_pointer_fixed", true).assert_code(0);
}

/// `--xfd` (XFDetector's cross-failure races): a recovery that passes but reads, before writing
/// it, a PM byte whose value depended on the crash is reported, with the recovery's load and the
/// store the crash may lose. The fixed log's recovery reads its count, the commit variable, which
/// is such a byte at the points where the count is being published: reported with `--xfd`, never
/// without (the commit-variable reads XFDetector's annotations would excuse).
#[test]
fn xfd_reports_recovery_reads_of_bytes_the_crash_decides() {
    let read = u64::from(marker_line("pm_log_fixed.c", "uint64_t n = p->count;"));
    let run = crash_run("pm_log_fixed", &["--xfd", "--analyses", "none"], None);
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(report["crash"]["failures"], 0);
    let found: Vec<&Value> =
        crash_findings(&report).into_iter().filter(|f| f["kind"] == "cross-failure-read").collect();
    assert!(!found.is_empty(), "{report}");
    assert!(found.iter().all(|f| f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["role"] == "recovery read" && l["line"].as_u64() == Some(read))));
    crash_run("pm_log_fixed", &["--analyses", "none"], None).assert_code(0);
}

/// Under eADR every PM store is durable when it executes, so every store is a crash point (with
/// crashes only at fences there would be one, at exit); the log, which writes its entries before
/// the count, passes them all.
#[test]
fn under_eadr_every_store_is_a_crash_point() {
    let run = crash_run("pm_log", &["--persistency", "eadr", "--analyses", "none"], None);
    run.assert_code(0);
    let report = run.json("r.json");
    assert!(report["crash"]["crash_points"].as_u64().unwrap() > 5, "{report}");
    assert_eq!(report["crash"]["failures"], 0);
}

/// `--dedup-points` (Mumak): one crash point per instruction and call stack. The log's loop of
/// appends fences at the same sites, so fewer points are tested, and the missing flush is still
/// found at its line.
#[test]
fn dedup_points_keeps_one_point_per_site_and_still_finds_the_bug() {
    let bug = u64::from(marker_line("pm_log.c", "/* BUG: entry stored but never persisted */"));
    let all = crash_run("pm_log", &["--analyses", "none"], None).json("r.json");
    let run = crash_run("pm_log", &["--analyses", "none", "--dedup-points"], None);
    run.assert_code(66);
    let report = run.json("r.json");
    assert!(report["crash"]["crash_points"].as_u64() < all["crash"]["crash_points"].as_u64(), "{report}");
    assert_eq!(report["crash"]["dedup_points"], true);
    assert!(crash_findings(&report).iter().any(|f| f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["role"] == "lost store" && l["line"].as_u64() == Some(bug))));
}

/// Recoveries restored from a snapshot in a warm engine (the default) give exactly the report
/// that fresh machines give (`--fresh-recoveries`): failing recoveries with minimisation, hanging
/// ones stopped by the budget, a dynamically linked program, one and two workers.
#[test]
fn recoveries_from_a_snapshot_report_exactly_what_fresh_ones_do() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("pm_log", "/mnt/pmem0/log check", &["--jobs", "2"]),
        ("pm_log.dyn", "/mnt/pmem0/log check", &["--jobs", "1"]),
        ("pm_spinlock", "/mnt/pmem0/pool recover", &["--max-instructions", "3000000", "--jobs", "2"]),
    ];
    for (prog, recover_args, extra) in cases {
        let g = guest(prog);
        let pool = recover_args.split(' ').next().unwrap();
        let recover = format!("{} {recover_args}", g.display());
        let run = |fresh: bool| {
            let mut opts: Vec<&str> = vec!["--analyses", "none", "--report", "r.json", "--recover", &recover];
            opts.extend_from_slice(extra);
            if fresh {
                opts.push("--fresh-recoveries");
            }
            Ferrite::crash(&g).opts(&opts).args(&[pool]).go()
        };
        let (warm, fresh) = (run(false), run(true));
        warm.assert_code(66);
        fresh.assert_code(66);
        let (a, b) = (warm.json("r.json"), fresh.json("r.json"));
        assert_eq!(a["crash"], b["crash"], "{prog}");
        assert_eq!(a["findings"], b["findings"], "{prog}");
        assert_eq!(a["run"]["trace_hash"], b["run"]["trace_hash"], "{prog}");
        // Most recoveries came from the snapshot; none did when asked for fresh machines.
        let restored = |r: &Run| -> u64 {
            let s = r.stderr.split(" from a snapshot").next().unwrap();
            s.rsplit('(').next().unwrap().parse().unwrap()
        };
        let recoveries = a["crash"]["recoveries"].as_u64().unwrap();
        assert!(restored(&warm) * 2 > recoveries, "{prog}: {}", warm.describe());
        assert_eq!(restored(&fresh), 0, "{prog}");
    }
}

/// `--lazy` (Jaaru's refinement): a recovery that reads 2 of 20 dirty lines covers all 2^20
/// images of the fence in 4 recoveries (eager testing can only sample that point); the buggy log
/// is still minimised to its entry's store; the fixed log's every image is covered, none fails.
#[test]
fn lazy_exploration_covers_every_image_with_one_recovery_per_behaviour() {
    let g = guest("pm_dirty_lines");
    let recover = format!("{} /mnt/pmem0/d 20 check 0 2", g.display());
    let run = |lazy: bool| {
        let mut opts = vec!["--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover];
        if lazy {
            opts.push("--lazy");
        }
        Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/d", "20"]).go()
    };
    let (lazy, eager) = (run(true), run(false));
    lazy.assert_code(0);
    eager.assert_code(0);
    let (l, e) = (lazy.json("r.json"), eager.json("r.json"));
    assert_eq!(l["crash"]["sampled_points"], 0, "{}", l["crash"]);
    assert_eq!(l["crash"]["recoveries"], 4, "{}", l["crash"]);
    assert!(l["crash"]["covered_log2"].as_f64().unwrap() >= 20.0, "{}", l["crash"]);
    assert_eq!(l["crash"]["lazy"], true);
    assert!(e["crash"]["sampled_points"].as_u64().unwrap() > 0, "{}", e["crash"]);

    let bug = u64::from(marker_line("pm_log.c", "/* BUG: entry stored but never persisted */"));
    let buggy = crash_run("pm_log", &["--lazy"], None);
    buggy.assert_code(66);
    let report = buggy.json("r.json");
    let found = crash_findings(&report);
    assert!(!found.is_empty());
    for f in &found {
        let lost = lost_lines(f);
        assert_eq!(lost, vec![bug], "{f}");
    }
    let fixed = crash_run("pm_log_fixed", &["--lazy"], None);
    fixed.assert_code(0);
    let c = &fixed.json("r.json")["crash"];
    assert_eq!(c["failures"], 0);
    assert_eq!(c["sampled_points"], 0, "every image of every point is covered: {c}");
}

/// `--explore N` crash-tests N schedules that share the program seed, each with its own schedule
/// seed (`run.schedule_seed`), and runs their common start once: the later schedules' workload
/// runs go on from a snapshot taken where a second thread can first run, with what the recorder
/// logged up to there. The report is byte for byte the one `--no-snapshots` writes (every
/// schedule's run, log and trace hash the same), with fewer guest instructions run; its shards
/// merge into it; its findings replay.
#[test]
fn crash_exploration_goes_on_from_a_snapshot_of_the_common_start() {
    let dir = scratch();
    let at = |n: &str| dir.path().join(n);
    let g = guest("pr_copy");
    let recover = format!("{} /mnt/pmem0/pool recover", g.display());
    let campaign = |extra: &[&str], report: &str, stats: &str| {
        let mut opts = vec!["--quiet", "--seed", "3", "--explore", "6", "--recover", &recover];
        let (report, stats) = (at(report).display().to_string(), at(stats).display().to_string());
        opts.extend(["--report", &report, "--host-stats", &stats]);
        opts.extend(extra);
        Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/pool"]).go()
    };
    campaign(&[], "with.json", "with-stats.json").assert_code(66);
    campaign(&["--no-snapshots"], "without.json", "without-stats.json").assert_code(66);
    let (with, without) = (std::fs::read(at("with.json")).unwrap(), std::fs::read(at("without.json")).unwrap());
    assert!(with == without, "{}", diff(&without, &with, "without.json", "with.json"));
    let report = read_json(&at("with.json"));
    assert_eq!(report["run"]["seed"], 3);
    assert_eq!(report["run"]["schedule_seed"], 3);
    assert_eq!(report["run"]["schedules"], 6);
    assert!(!crash_findings(&report).is_empty(), "{report}");

    let (a, b) = (read_json(&at("with-stats.json")), read_json(&at("without-stats.json")));
    let (a, b) = (&a["exploration"], &b["exploration"]);
    assert_eq!(
        (a["from_start"].as_u64(), a["from_snapshot"].as_u64(), a["snapshots"].as_u64()),
        (Some(1), Some(5), Some(1))
    );
    assert_eq!((b["from_start"].as_u64(), b["from_snapshot"].as_u64()), (Some(6), Some(0)));
    assert_eq!(a["trace_hashes"], b["trace_hashes"], "the schedules took the same paths");
    assert_eq!(a["instructions_from_start"], b["instructions"]);
    let (ran, all) = (a["instructions"].as_u64().unwrap(), b["instructions"].as_u64().unwrap());
    assert!(ran * 3 < all * 2, "the common start ran once: {ran} of {all} instructions");

    // Shards of it merge into it.
    let parts: Vec<std::path::PathBuf> = (0..2).map(|i| at(&format!("part-{i}.json"))).collect();
    for (i, p) in parts.iter().enumerate() {
        let shard = format!("{i}/2");
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        campaign(&["--shard", &shard], &name, "part-stats.json").assert_code(0);
    }
    let out = ferrite()
        .arg("merge")
        .args(&parts)
        .arg("--report")
        .arg(at("merged.json"))
        .arg("--quiet")
        .output()
        .expect("cannot start ferrite merge");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = std::fs::read(at("merged.json")).unwrap();
    assert!(merged == with, "{}", diff(&with, &merged, "with.json", "merged.json"));

    // Every finding replays, from whichever schedule found it.
    for f in report["findings"].as_array().unwrap() {
        let id = f["id"].to_string();
        let replay = Ferrite::replay(&at("with.json")).opts(&["--finding", &id]).go();
        assert!(replay.stderr.contains("replay reproduced finding"), "finding {id}: {}", replay.describe());
    }
}

#[test]
fn one_bug_reached_from_several_call_sites_is_one_finding_with_every_stack() {
    // put() is called from two places (gcc also unrolls the second's loop): the failing crash
    // points are one fence reached through several call stacks, the lost store one line.
    let g = guest("crash_two_callers");
    let lost = u64::from(marker_line("crash_two_callers.c", "/* LOST: never persisted */"));
    let recover = format!("{} /mnt/pmem0/r check", g.display());
    let run =
        Ferrite::crash(&g).opts(&["--quiet", "--report", "r.json", "--recover", &recover]).args(&["/mnt/pmem0/r"]).go();
    run.assert_code(66);
    let report = run.json("r.json");
    let found = crash_findings(&report);
    assert_eq!(found.len(), 1, "one crash finding: {report}");
    let f = found[0];
    assert_eq!(lost_lines(f), vec![lost]);
    let stacks = f["group"]["stacks"].as_array().unwrap();
    assert!(stacks.len() >= 2, "every call stack kept: {f}");
    let sum: u64 = stacks.iter().map(|s| s["occurrences"].as_u64().unwrap()).sum();
    assert_eq!(sum, f["occurrences"].as_u64().unwrap());
    assert_eq!(f["occurrences"].as_u64().unwrap(), report["crash"]["failures"].as_u64().unwrap());
    // The unpersisted store is one finding too, its call sites kept as stacks.
    let unpersisted: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "unpersisted-store").collect();
    assert_eq!(unpersisted.len(), 1, "{report}");
    assert_eq!(unpersisted[0]["locations"][0]["line"].as_u64(), Some(lost));
    assert!(unpersisted[0]["group"]["stacks"].as_array().unwrap().len() >= 2);
    // A grouped crash finding replays by its key.
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", &f["id"].to_string()]).go();
    replay.assert_code(66);
    assert!(replay.stderr.contains("replay reproduced finding"), "{}", replay.describe());
}

/// `--lazy` on a libpmemobj program, whose recovery (`pmemobj_open`) reads the pool's header
/// with `pread` before mapping it: bytes no load shows. Such points were tested eagerly instead,
/// which on a pool's 2^19,671-image spaces means a blind sample of `--max-images` images, and
/// the never-persisted `stamp` of `pmdk_atomic_api` (written after its constructor, the entry
/// then linked) was never lost in any image drawn. Lazy runs now stay the sample of such a
/// point (marked sampled, not covered): they follow what recovery loads, and an image without
/// the stamp's last version fails the checker, minimised to that one line. The fixed twin
/// (`pmemobj_persist` of the stamp) passes every image.
#[test]
fn lazy_exploration_guides_the_sample_of_a_recovery_that_reads_its_pool_with_pread() {
    let stamp = u64::from(marker_line("pmdk_atomic_api.c", "/* STAMP_BUG:"));
    let run_on = |name: &str| {
        let recover = format!("{} /mnt/pmem0/catalogue check", guest(name).display());
        let opts = [
            "--quiet",
            "--analyses",
            "none",
            "--lazy",
            "--max-images",
            "4",
            "--dedup-points",
            "--report",
            "r.json",
            "--recover",
            &recover,
        ];
        Ferrite::crash(&guest(name)).opts(&opts).args(&["/mnt/pmem0/catalogue"]).go()
    };
    let run = run_on("pmdk_atomic_api");
    run.assert_code(66);
    let report = run.json("r.json");
    let found = crash_findings(&report);
    assert!(!found.is_empty(), "{report}");
    assert!(found.iter().all(|f| f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["role"] == "lost store" && l["line"].as_u64() == Some(stamp))));
    assert!(found.iter().all(|f| lost_lines(f).len() == 1), "{report}");
    let run = run_on("pmdk_atomic_api_fixed");
    run.assert_code(0);
    assert_eq!(run.json("r.json")["crash"]["failures"], 0);
}

/// A crash point inside a helper the compiler inlined (`pm.h`'s `persist`) names the call it was
/// inlined at, as `addr2line -i` and gdb's `bt` do: the report's frame lists it, and the text
/// output prints it under the frame.
#[test]
fn a_crash_point_in_inlined_code_names_the_call_it_was_inlined_at() {
    let run = pm_log_crash();
    let call = marker_line("pm_log.c", "persist(&p->count, sizeof p->count);");
    let r = run.json("r.json");
    let point = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["locations"].as_array().unwrap())
        .find(|l| l["role"] == "crash point" && l["backtrace"][0]["function"] == "persist")
        .unwrap_or_else(|| panic!("no crash point in persist: {}", run.describe()));
    let frame = &point["backtrace"][0];
    assert!(frame["file"].as_str().unwrap().ends_with("pm.h"), "{frame}");
    let at = &frame["inlined_at"][0];
    assert_eq!(at["function"], "append", "{frame}");
    assert!(at["file"].as_str().unwrap().ends_with("pm_log.c"), "{frame}");
    assert_eq!(at["line"].as_u64(), Some(u64::from(call)), "{frame}");
    let prog = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    let text =
        Ferrite::crash(&prog).opts(&["--analyses", "none", "--recover", &recover]).args(&["/mnt/pmem0/log"]).go();
    assert!(text.stderr.contains(&format!("inlined in append (pm_log.c:{call})")), "{}", text.stderr);
}
