//! The same seed gives the same output and trace hash whatever the host shows: its stack limit
//! (`ulimit -s`), the PM directory's path, the CPUs ferrite may run on (`taskset`), and the host's
//! time zone and clock (the guest's clock is virtual).

mod common;

use common::*;
use std::process::Command;

/// Runs ferrite through `sh -c "PREFIX ferrite run ..."` and returns (stdout, trace hash).
fn via_shell(prefix: &str, prog: &std::path::Path, args: &[&str], pm: &std::path::Path) -> (Vec<u8>, String) {
    let dir = scratch();
    let report = dir.path().join("r.json");
    let cmd = format!(
        "{prefix} {} run --env-clear --pm-dir {} --report {} -- {} {}",
        env!("CARGO_BIN_EXE_ferrite"),
        pm.display(),
        report.display(),
        prog.display(),
        args.join(" ")
    );
    let out = Command::new("sh").arg("-c").arg(&cmd).current_dir(dir.path()).output().expect("sh runs");
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(3),
        "{cmd}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hash = read_json(&report)["run"]["trace_hash"].as_str().unwrap().to_string();
    (out.stdout, hash)
}

#[test]
fn same_seed_same_run_under_host_variations() {
    let have_taskset =
        Command::new("sh").arg("-c").arg("command -v taskset").output().map(|o| o.status.success()).unwrap_or(false);
    for (prog, args) in
        [("libc_workout", vec!["alpha"]), ("pm_log_fixed", vec!["/mnt/pmem0/log"]), ("thr_condvar", vec![])]
    {
        let g = guest(prog);
        let pm1 = scratch();
        let base = via_shell("", &g, &args, pm1.path());
        let mut variants = vec![
            "ulimit -s 16384;".to_string(),
            "ulimit -s 65536;".to_string(),
            "TZ=Asia/Tokyo".to_string(),
            "TZ=America/Los_Angeles LC_ALL=C".to_string(),
        ];
        if have_taskset {
            variants.push("taskset -c 0".to_string());
        }
        for v in &variants {
            let pm = scratch();
            let got = via_shell(v, &g, &args, pm.path());
            assert_eq!(got.1, base.1, "{prog}: trace hash changed under `{v}`");
            assert_eq!(got.0, base.0, "{prog}: output changed under `{v}`");
        }
    }
}
