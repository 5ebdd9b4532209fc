//! Shards of a campaign: which of a campaign's independent units (crash images, compare runs,
//! schedules) one process of a job array does.
//!
//! A campaign lists its units in a deterministic order; shard `I` of `N` does the units whose
//! position `u` has `u % N == I`. Round robin rather than contiguous blocks, because the costly
//! units of a campaign cluster (one detector's phase, one crash point's images): dealt out one
//! by one they spread over the shards. A shard's work is therefore a pure function of the
//! campaign's inputs, its seed, `I` and `N`, and the shards of one campaign together do every
//! unit exactly once — the property `ferrite merge` relies on.
//!
//! The shard comes from `--shard I/N` or, when that is not given, from the job array's
//! environment: Slurm's `SLURM_ARRAY_TASK_ID` (less `SLURM_ARRAY_TASK_MIN`, so that
//! `--array=1-4` works as well as `--array=0-3`) out of `SLURM_ARRAY_TASK_COUNT`, or a
//! Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` out of the count given as `--shard-count`
//! (Kubernetes does not export the completion count). Indices start at 0, as both engines'.

use std::fmt;

/// Shard `index` of `count` (`index < count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 0.
    pub index: u32,
    /// At least 1.
    pub count: u32,
}

impl Shard {
    /// The whole campaign: one shard.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` (0 ≤ I < N).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("`{s}` is not I/N (shard I of N, I from 0)"))?;
        let index: u32 = i.trim().parse().map_err(|_| format!("`{s}`: `{i}` is not a shard index"))?;
        let count: u32 = n.trim().parse().map_err(|_| format!("`{s}`: `{n}` is not a shard count"))?;
        Shard::new(index, count).map_err(|e| format!("`{s}`: {e}"))
    }

    /// Shard `index` of `count`, checked.
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 {
            return Err("a campaign needs at least one shard".into());
        }
        if index >= count {
            return Err(format!("shard indices run from 0 to {} (0-based, as Slurm arrays and Kubernetes)", count - 1));
        }
        Ok(Shard { index, count })
    }

    /// Whether this shard does the unit at position `unit` of the campaign's order.
    pub fn owns(&self, unit: u64) -> bool {
        unit % u64::from(self.count) == u64::from(self.index)
    }

    /// Whether this is the whole campaign.
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where a shard came from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--shard I/N`.
    Option,
    /// `SLURM_ARRAY_TASK_ID` and `SLURM_ARRAY_TASK_COUNT`.
    Slurm,
    /// `JOB_COMPLETION_INDEX` with `--shard-count`.
    Kubernetes,
}

/// The shard of this process: `--shard` (`option`; `off` runs the whole campaign whatever the
/// environment says), else the job array's environment as read by `var`, else none.
/// `count` is `--shard-count`, needed with Kubernetes' index and checked against Slurm's count.
pub fn resolve(
    option: Option<&str>,
    count: Option<u32>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<(Shard, Source)>, String> {
    if let Some(s) = option {
        if s == "off" {
            return Ok(None);
        }
        let shard = Shard::parse(s).map_err(|e| format!("--shard {e}"))?;
        if let Some(n) = count.filter(|&n| n != shard.count) {
            return Err(format!("--shard {s} and --shard-count {n} disagree"));
        }
        return Ok(Some((shard, Source::Option)));
    }
    let number = |name: &str| -> Result<Option<u32>, String> {
        match var(name) {
            None => Ok(None),
            Some(v) if v.trim().is_empty() => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| format!("{name}=`{v}` is not a number")),
        }
    };
    if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        let Some(n) = number("SLURM_ARRAY_TASK_COUNT")? else {
            return Err("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: give --shard I/N".into());
        };
        let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let index = id
            .checked_sub(min)
            .ok_or_else(|| format!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}"))?;
        if let Some(c) = count.filter(|&c| c != n) {
            return Err(format!("--shard-count {c} but the Slurm array has {n} tasks"));
        }
        let shard = Shard::new(index, n).map_err(|e| {
            format!(
                "Slurm array task {id} (of {n}, from {min}): {e}; use a contiguous array such as --array=0-{}",
                n.max(1) - 1
            )
        })?;
        return Ok(Some((shard, Source::Slurm)));
    }
    if let Some(n) = count {
        let Some(index) = number("JOB_COMPLETION_INDEX")? else {
            return Err("--shard-count needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or --shard I/N".into());
        };
        let shard = Shard::new(index, n).map_err(|e| format!("JOB_COMPLETION_INDEX={index}: {e}"))?;
        return Ok(Some((shard, Source::Kubernetes)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(Shard::parse("4/4").unwrap_err().contains("from 0 to 3"));
        assert!(Shard::parse("0/0").is_err());
        assert!(Shard::parse("1").is_err());
        assert!(Shard::parse("a/2").is_err());
    }

    #[test]
    fn shards_partition_the_units() {
        for n in 1..6u32 {
            for u in 0..50u64 {
                let owners = (0..n).filter(|&i| Shard { index: i, count: n }.owns(u)).count();
                assert_eq!(owners, 1, "unit {u} of {n} shards");
            }
        }
    }

    #[test]
    fn environment() {
        assert_eq!(resolve(None, None, env(&[])), Ok(None));
        let slurm = [("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_COUNT", "4"), ("SLURM_ARRAY_TASK_MIN", "1")];
        assert_eq!(resolve(None, None, env(&slurm)), Ok(Some((Shard { index: 2, count: 4 }, Source::Slurm))));
        assert_eq!(resolve(Some("off"), None, env(&slurm)), Ok(None));
        assert_eq!(resolve(Some("0/2"), None, env(&slurm)), Ok(Some((Shard { index: 0, count: 2 }, Source::Option))));
        assert!(resolve(None, Some(3), env(&slurm)).is_err());
        let k8s = [("JOB_COMPLETION_INDEX", "1")];
        assert_eq!(resolve(None, None, env(&k8s)), Ok(None));
        assert_eq!(resolve(None, Some(3), env(&k8s)), Ok(Some((Shard { index: 1, count: 3 }, Source::Kubernetes))));
        assert!(resolve(None, Some(1), env(&k8s)).is_err());
        assert!(resolve(None, Some(2), env(&[])).is_err());
    }
}
