//! A real Slurm cluster (docs/campaigns.md): `.ci/slurm-local` starts munged, slurmctld and
//! slurmd on localhost from Debian's packages, with a configuration in a temporary directory;
//! `ferrite slurm` writes the batch scripts of a compare campaign over a few cases of the
//! bundled suite and of a crash campaign, in 4 shards each; `bash` submits each array and its
//! dependent merge job; the merged reports must be what the unsharded commands write. Skipped,
//! saying why, only where the cluster cannot start (not root, Slurm or munge not installed).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// The cluster, stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
}

impl Cluster {
    fn script() -> std::path::PathBuf {
        repo().join(".ci/slurm-local")
    }

    /// Starts it, or says why it cannot.
    fn up() -> Result<Cluster, String> {
        let dir = scratch();
        let out =
            Command::new("bash").arg(Self::script()).arg("up").arg(dir.path()).output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(Cluster { dir })
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    fn conf(&self) -> std::path::PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// Waits until no job is queued or running.
    fn wait(&self, limit: Duration) {
        let start = Instant::now();
        loop {
            let out = Command::new("squeue").arg("-h").env("SLURM_CONF", self.conf()).output().expect("squeue");
            assert!(out.status.success(), "squeue: {}", String::from_utf8_lossy(&out.stderr));
            if out.stdout.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "jobs still queued after {limit:?}:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(Self::script()).arg("down").arg(self.dir.path()).status();
    }
}

/// `ferrite slurm --shards 4 --dir DIR -- CAMPAIGN`, then `bash DIR/campaign.sbatch`.
fn submit(cluster: &Cluster, cwd: &Path, dir: &Path, campaign: &[&str]) {
    let out = ferrite()
        .args(["slurm", "--shards", "4", "--cpus", "1", "--mem", "1G", "--dir"])
        .arg(dir)
        .arg("--")
        .args(campaign)
        .current_dir(cwd)
        .output()
        .expect("cannot start ferrite slurm");
    assert!(out.status.success(), "ferrite slurm: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("bash")
        .arg(dir.join("campaign.sbatch"))
        .env("SLURM_CONF", cluster.conf())
        .current_dir(cwd)
        .output()
        .expect("cannot run the campaign script");
    assert!(out.status.success(), "submitting: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn job_arrays_merge_into_the_unsharded_reports() {
    let cluster = match Cluster::up() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIPPED: a local Slurm cluster cannot start here ({why}); CI installs slurm-wlm and munge");
            return;
        }
    };
    for g in ["pm_log", "pm_log_fixed", "pm_unflushed_fence", "thr_racy_counter"] {
        guest(g);
    }
    let work = scratch();
    let suite = repo().join("guests/manifest.ron").display().to_string();
    let compare =
        ["compare", "--suite", &suite, "--cases", "pm_log,pm_log_fixed,pm_unflushed_fence,thr_racy_counter", "-q"];
    let log = guest("pm_log").display().to_string();
    let recover = format!("{log} /mnt/pmem0/log check");
    let crash = ["crash", "--env-clear", "--quiet", "--recover", &recover, "--", &log, "/mnt/pmem0/log"];
    submit(&cluster, work.path(), &work.path().join("cmp"), &compare);
    submit(&cluster, work.path(), &work.path().join("crash"), &crash);

    // Meanwhile, the same campaigns unsharded.
    let run = |args: &[&str], report: &str| {
        let out = ferrite()
            .args(&args[..1])
            .args(["--report", report])
            .args(&args[1..])
            .args(if args[0] == "compare" { &["--jobs", "1"][..] } else { &[][..] })
            .current_dir(work.path())
            .output()
            .expect("cannot start ferrite");
        assert!(matches!(out.status.code(), Some(0 | 66)), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run(&compare, "whole-compare.json");
    run(&crash, "whole-crash.json");

    cluster.wait(Duration::from_secs(600));
    let logs = |d: &str| {
        let mut s = String::new();
        for f in ["merge.log", "shard-0.log", "shard-1.log", "shard-2.log", "shard-3.log"] {
            s += &format!("--- {f}\n{}\n", std::fs::read_to_string(work.path().join(d).join(f)).unwrap_or_default());
        }
        s
    };
    let merged = work.path().join("cmp/compare.json");
    assert!(merged.is_file(), "no merged compare report:\n{}", logs("cmp"));
    let (a, b) =
        (without_timings(&read_json(&work.path().join("whole-compare.json"))), without_timings(&read_json(&merged)));
    assert!(a == b, "the merged compare report differs from the unsharded one");
    assert!(read_json(&work.path().join("cmp/part-3.json"))["body"]["runs"].as_array().is_some_and(|r| !r.is_empty()));
    let merged = work.path().join("crash/crash.json");
    assert!(merged.is_file(), "no merged crash report:\n{}", logs("crash"));
    let whole = std::fs::read(work.path().join("whole-crash.json")).unwrap();
    let got = std::fs::read(&merged).unwrap();
    assert!(got == whole, "the merged crash report differs:\n{}", diff(&whole, &got, "unsharded", "merged"));
}
