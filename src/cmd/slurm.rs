//! `ferrite slurm`: writes a ready batch script that runs a `crash` or `compare` campaign as a
//! Slurm job array of shards and merges their parts in a job that waits for the array
//! (docs/campaigns.md). ferrite schedules nothing itself: Slurm does, and the same shards run
//! under any engine that hands out an index (`--shard I/N`).
//!
//! The script is both things at once: `sbatch` runs it as the array (each task one shard,
//! `--shard $SLURM_ARRAY_TASK_ID/N` with N written in, so that `sbatch --array=2` re-runs just
//! shard 2 of the same campaign), and `bash` submits that array and then the merge job,
//! dependent on the array with `afterany` so that a failed shard is named by the merge rather
//! than leaving the merge pending forever.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Parser as _;
use driver::say;

use crate::cli::{Cli, SlurmArgs};
use crate::compare::suite::quote_all;

/// `ferrite slurm`.
pub fn slurm(a: SlurmArgs) -> Result<i32> {
    let n = a.shards;
    if n == 0 {
        bail!("--shards needs at least one shard");
    }
    if n > 4_000_001 {
        bail!("--shards {n}: a Slurm job array has at most 4000001 tasks (the largest MaxArraySize Slurm accepts)");
    }
    let sub = a.command[0].as_str();
    if !matches!(sub, "crash" | "compare") {
        bail!("`{sub}`: ferrite slurm shards `crash` and `compare` campaigns (give the subcommand first)");
    }
    let rest = &a.command[1..];
    if let Some(o) = rest.iter().find(|o| {
        ["--report", "--shard", "--shard-count", "--jobs"].iter().any(|f| *o == f || o.starts_with(&format!("{f}=")))
    }) {
        bail!("`{o}`: ferrite slurm sets the report, the shard and the workers of each task itself");
    }
    if a.cpus == 0 {
        bail!("--cpus needs at least one CPU");
    }
    // The values go into `#SBATCH` lines and the script's own `sbatch` calls, where a newline
    // or a `;` would be a line or a command of the script (`--mem '4G\nrm -rf ~'`).
    slurm_value("--mem", &a.mem, "")?;
    if let Some(t) = &a.time {
        slurm_value("--time", t, "")?;
    }
    if let Some(p) = &a.partition {
        slurm_value("--partition", p, ",")?;
    }
    let abs = std::path::absolute(&a.dir).unwrap_or_else(|_| a.dir.clone());
    if let Some(c) =
        abs.to_string_lossy().chars().find(|c| c.is_whitespace() || c.is_control() || "%\"'`$\\".contains(*c))
    {
        bail!(
            "--dir `{}`: a Slurm directive (`#SBATCH --output=DIR/shard-%a.log`) cannot carry {c:?}; choose a directory without it",
            abs.display()
        );
    }
    // The campaign's command line must parse before anything is submitted.
    let mut probe: Vec<String> = vec!["ferrite".into(), sub.into()];
    let at = rest.iter().position(|x| x == "--").unwrap_or(rest.len());
    probe.extend(rest[..at].iter().cloned());
    probe.extend(["--shard".into(), format!("0/{n}"), "--report".into(), "part.json".into()]);
    probe.extend(rest[at..].iter().cloned());
    let parsed = match Cli::try_parse_from(&probe) {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            let first =
                msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim_start_matches("error: ").to_string();
            bail!("the campaign `ferrite {}`: {first}", quote_all(&a.command));
        }
    };
    // What every shard would fail on at once is said now, not by a merge after a queue's wait.
    // (The tasks run here, in this directory, and a program is a path, never looked up in PATH.)
    let needed = match &parsed.command {
        crate::cli::Command::Compare(c) => {
            Some(("suite", c.suite.clone().unwrap_or_else(crate::compare::suite::default_suite)))
        }
        crate::cli::Command::Crash(c) => c.command.first().map(|p| ("program", std::path::PathBuf::from(p))),
        _ => None,
    };
    if let Some((what, path)) = needed {
        if !path.exists() {
            bail!("the campaign's {what} `{}` does not exist", path.display());
        }
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let dir = std::path::absolute(&a.dir).unwrap_or_else(|_| a.dir.clone());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let exe = std::env::current_exe().context("cannot find the ferrite executable")?;
    let script = dir.join("campaign.sbatch");
    let report = dir.join(if sub == "compare" { "compare.json" } else { "crash.json" });
    let text = script_text(&a, &exe, &cwd, &dir, &report);
    crate::report::write_whole(&script, text.as_bytes())
        .with_context(|| format!("cannot write `{}`", script.display()))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make `{}` executable", script.display()))?;
    say!(
        "ferrite: wrote {}: `bash {0}` submits {n} shards and their merge into {}",
        script.display(),
        report.display()
    );
    Ok(0)
}

fn q(p: &Path) -> String {
    quote_all(&[p.display().to_string()])
}

/// Refuses a Slurm value that is not Slurm's notation: letters, digits, `:._+-` and the characters in `also`.
fn slurm_value(option: &str, v: &str, also: &str) -> Result<()> {
    let ok = |c: char| c.is_ascii_alphanumeric() || ":._+-".contains(c) || also.contains(c);
    if v.is_empty() || !v.chars().all(ok) {
        bail!("{option} {v:?}: Slurm's notation is letters, digits and `:._+-{also}` (`4G`, `2:00:00`, `gpu`)");
    }
    Ok(())
}

fn script_text(a: &SlurmArgs, exe: &Path, cwd: &Path, dir: &Path, report: &Path) -> String {
    let n = a.shards;
    let sub = &a.command[0];
    let rest = &a.command[1..];
    let at = rest.iter().position(|x| x == "--").unwrap_or(rest.len());
    let (opts, tail) = (quote_all(&rest[..at]), quote_all(&rest[at..]));
    let mut sb = vec![
        format!("#SBATCH --job-name=ferrite-{sub}"),
        format!("#SBATCH --array=0-{}", n - 1),
        format!("#SBATCH --cpus-per-task={}", a.cpus),
        format!("#SBATCH --mem={}", a.mem),
        format!("#SBATCH --output={}/shard-%a.log", dir.display()),
    ];
    sb.extend(a.time.as_ref().map(|t| format!("#SBATCH --time={t}")));
    sb.extend(a.partition.as_ref().map(|p| format!("#SBATCH --partition={p}")));
    let mut submit_opts = String::new();
    if let Some(p) = &a.partition {
        submit_opts.push_str(&format!(" --partition={}", quote_all(std::slice::from_ref(p))));
    }
    let parts = PathBuf::from(dir).join("part-*.json");
    let merge = format!("{} merge {} --report {}", q(exe), parts.display(), q(report));
    format!(
        r#"#!/bin/bash
# A ferrite campaign in {n} shards, written by `ferrite slurm` (docs/campaigns.md):
#   ferrite {command}
#
# `bash {script}` submits the {n} shards as a job array, then their merge (which runs
#   when every shard has ended, and names any shard that failed);
# `sbatch {script}` submits only the array; merge later with
#   {merge}
# `sbatch --array=I {script}` runs shard I again (then merge again).
{sbatch}
set -euo pipefail
FERRITE={exe}
cd {cwd}
if [ -z "${{SLURM_ARRAY_TASK_ID:-}}" ]; then
  array=$(sbatch --parsable{submit_opts} {script})
  array=${{array%%;*}}
  merge=$(sbatch --parsable{submit_opts} --job-name=ferrite-merge --dependency=afterany:"$array" \
    --cpus-per-task=1 --mem={mem} --output={dir}/merge.log \
    --wrap "cd {cwd} && {merge_escaped}")
  echo "ferrite: shards are job $array, their merge job ${{merge%%;*}}: {report}"
  exit 0
fi
exec "$FERRITE" {sub} {opts} --shard "$SLURM_ARRAY_TASK_ID/{n}" --jobs "${{SLURM_CPUS_PER_TASK:-{cpus}}}" \
  --report {dir}/part-"$SLURM_ARRAY_TASK_ID".json {tail}
"#,
        command = quote_all(&a.command),
        script = q(&dir.join("campaign.sbatch")),
        sbatch = sb.join("\n"),
        exe = q(exe),
        cwd = q(cwd),
        mem = a.mem,
        dir = q(dir),
        report = report.display(),
        merge_escaped = merge.replace('\\', "\\\\").replace('"', "\\\""),
        cpus = a.cpus,
    )
}
