//! Explorations split into shards ([`crate::shard`]): each shard runs its share of the
//! schedules and keeps every run's results apart, each with its place in the unsharded
//! exploration's order, so that merging the shards' runs in that order gives the unsharded
//! report (`ferrite merge`).
//!
//! - `--explore N` ([`random`]): the units are the N schedules; run `i` has schedule seed
//!   `explore_seed(seed, i)` whichever shard runs it (and each shard's workers go on from
//!   snapshots of their own).
//! - `--strategy exhaustive` ([`exhaustive`]): every shard runs the root schedule (one run
//!   each: what tells the shards the top-level branches), and the root's alternatives are the
//!   units; a shard explores, depth first as unsharded, the subtrees of the branches it owns,
//!   going on from snapshots of its current path as the unsharded exploration does.
//!   Without `--por` the subtrees are disjoint and, when the exploration is complete (not cut
//!   by `--explore`), the shards together run exactly the unsharded set of schedules, in the
//!   unsharded order once merged. With `--por`, a race found in one branch can ask for an
//!   alternative in another (DPOR's backtrack sets): the shard explores it too, so shards may
//!   run a schedule twice (merge keeps each schedule's findings once); the result covers what
//!   the unsharded search covers only as far as DPOR's choices do not depend on the order.

use std::collections::BTreeMap;

use analyses::Finding;
use serde::{Deserialize, Serialize};

use super::exhaustive::Tree;
use crate::report::RunReport;
use crate::shard::Shard;
use crate::spec::{RunSpec, SessionError};
use crate::Runner;

/// One run of a sharded exploration, with its place in the unsharded order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Piece {
    /// The sort key: `[i]` for random run `i`; `[0]` for the exhaustive root, `[1, B, k]` for
    /// the `k`-th run of top-level branch `B` (counted from the last-pushed, which runs first).
    pub key: Vec<u64>,
    /// The schedule (exhaustive): what makes two shards' runs the same run.
    #[serde(default)]
    pub schedule: Vec<u32>,
    /// Its findings (not merged).
    pub findings: Vec<Finding>,
    /// Its passes' counters.
    pub stats: BTreeMap<String, u64>,
    /// Its findings discarded by validation.
    pub discarded: Vec<Finding>,
}

impl Piece {
    fn of(key: Vec<u64>, schedule: Vec<u32>, r: &RunReport) -> Piece {
        Piece { key, schedule, findings: r.findings.clone(), stats: r.stats.clone(), discarded: r.discarded.clone() }
    }
}

/// What a shard of an exploration ran.
#[derive(Clone, Debug)]
pub struct ShardRuns {
    /// The first run's report (random run 0, or the exhaustive root), if this shard ran it.
    pub first: Option<RunReport>,
    /// Every run of the shard.
    pub pieces: Vec<Piece>,
    /// Whether the shard explored everything it owns (not cut by the limit).
    pub complete: bool,
}

/// The runs of `--explore n` that `shard` owns (`snapshots`: from a snapshot of their common
/// start, [`super::schedules`]).
pub fn random(
    runner: &Runner,
    spec: &RunSpec,
    n: u32,
    shard: Shard,
    snapshots: bool,
) -> Result<ShardRuns, SessionError> {
    let mine: Vec<u64> = (0..u64::from(n)).filter(|&i| shard.owns(i)).collect();
    let (runs, _) = super::schedules::run(runner, spec, &mine, snapshots)?;
    let mut out = ShardRuns { first: None, pieces: Vec::new(), complete: true };
    for (i, r, _) in runs {
        out.pieces.push(Piece::of(vec![i], Vec::new(), &r));
        if i == 0 {
            out.first = Some(r);
        }
    }
    Ok(out)
}

/// The exhaustive exploration of the top-level branches `shard` owns, up to `limit` runs (the
/// root included), going on from snapshots of the current path as the unsharded exploration
/// does (`snapshot_budget`: the bytes they may take; `None`, every run from the start).
pub fn exhaustive(
    runner: &Runner,
    spec: &RunSpec,
    limit: u32,
    max_preemptions: u32,
    por: bool,
    shard: Shard,
    snapshot_budget: Option<u64>,
) -> Result<ShardRuns, SessionError> {
    let mut tree = Tree::new(runner, spec, por, snapshot_budget);
    let (root, _, children) = tree.step(&[], &[], &mut Vec::new, false, max_preemptions)?;
    let mut seen: std::collections::BTreeSet<Vec<u32>> = std::collections::BTreeSet::new();
    // The root's alternatives, numbered in the order they would run (the last pushed first).
    let mut branches: Vec<Vec<u32>> = Vec::new();
    for c in children {
        let c = c.prefix();
        if seen.insert(c.clone()) {
            branches.push(c);
        }
    }
    let count = branches.len() as u64;
    let mut pending: Vec<(u64, Vec<u32>)> = branches
        .into_iter()
        .enumerate()
        .map(|(k, c)| (count - 1 - k as u64, c))
        .filter(|(b, _)| shard.owns(*b))
        .collect();
    let mut out = ShardRuns { first: None, pieces: vec![Piece::of(vec![0], Vec::new(), &root)], complete: true };
    out.first = Some(root);
    let mut runs = 1u32;
    let mut seq = 0u64;
    while let Some((branch, prefix)) = pending.pop() {
        if runs >= limit {
            out.complete = false;
            break;
        }
        runs += 1;
        let wanted = if snapshot_budget.is_some() {
            let waiting = pending.iter().rev().map(|(_, p)| (&p[..], p.len().saturating_sub(1)));
            super::exhaustive::branch_points_of(waiting, &prefix)
        } else {
            Vec::new()
        };
        let mut live = || {
            let waiting = pending.iter().rev().map(|(_, p)| (&p[..], p.len().saturating_sub(1)));
            super::exhaustive::live_points_of(waiting, &prefix)
        };
        let (report, _, children) = tree.step(&prefix, &wanted, &mut live, true, max_preemptions)?;
        out.pieces.push(Piece::of(vec![1, branch, seq], prefix, &report));
        seq += 1;
        for c in children {
            let c = c.prefix();
            if seen.insert(c.clone()) {
                pending.push((branch, c));
            }
        }
    }
    Ok(out)
}

/// The report of a whole exploration from its shards' runs: the first run's report with every
/// run's findings merged in the unsharded order (and, for random exploration, every run's
/// counters summed and discarded findings kept), and the number of schedules run.
pub fn merge(first: RunReport, mut pieces: Vec<Piece>, random: bool) -> RunReport {
    pieces.sort_by(|a, b| a.key.cmp(&b.key));
    // Exhaustive: the root (the empty schedule, first in order) ran in every shard, and with
    // --por two shards can run one schedule.
    if !random {
        let mut seen = std::collections::BTreeSet::new();
        pieces.retain(|p| seen.insert(p.schedule.clone()));
    }
    let mut report = first;
    report.run.schedules = pieces.len() as u32;
    if random {
        report.stats = BTreeMap::new();
        for p in &pieces {
            for (k, v) in &p.stats {
                *report.stats.entry(k.clone()).or_insert(0) += v;
            }
        }
        report.discarded = Finding::merge(pieces.iter().flat_map(|p| p.discarded.clone()).collect());
    }
    report.findings = Finding::merge(pieces.into_iter().flat_map(|p| p.findings).collect());
    report
}
