//! A crash-testing campaign: the workload run with the recorder, then every crash point's
//! images recovered (eagerly, or lazily with `--lazy`), deduplicated across points and
//! schedules, failures minimised; and the replay of one failing image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

use analyses::{CrashImageRef, Finding};
use driver::{RunOutcome, RunReport, RunSpec, Runner};

use crate::files::{files_key, image_files, image_key, key_base};
use crate::progress::Progress;
use crate::record::{CrashLog, PointData, Recording};
use crate::recover::{finding_for, open_bytes, read_open_finding, recover, Plan, Verdict};
use crate::space::{ddmin, images_of, log2_add, persisted, stale_dims, with_only, Image};
use crate::{CrashSummary, Error};

/// What testing found and covered.
#[derive(Default)]
pub struct Tested {
    /// Findings: failed recoveries and cross-failure reads.
    pub findings: Vec<Finding>,
    /// The unit of each finding (its image's position among the unique images to recover),
    /// which orders the findings of shards when they are merged.
    pub units: Vec<u64>,
    /// Images tried (before deduplication).
    pub images: u64,
    /// Images with distinct file contents.
    pub unique_images: u64,
    /// Recovery runs, minimisation included.
    pub recoveries: u64,
    /// Unique images whose recovery failed.
    pub failures: u64,
    /// Points whose space was sampled rather than enumerated.
    pub sampled_points: u64,
    /// log2 of the largest crash space met.
    pub max_space_log2: f64,
    /// Recoveries restored from a snapshot rather than run fresh (depends on `--jobs`: each
    /// worker runs a command fresh once).
    pub restored: u64,
    /// `--lazy`: log2 of the images of the points explored to the end, every one covered by a
    /// recovery.
    pub covered_log2: Option<f64>,
}

/// Tests every crash point of the workload run. Images whose files are in `seen` (recovered for
/// another schedule of the same workload) are not recovered again; the new ones are added.
pub fn test_all(log: &CrashLog, plan: &Plan, seen: &mut std::collections::BTreeSet<String>) -> Result<Tested, Error> {
    test_shard(log, plan, seen, driver::shard::Shard::WHOLE, 0)
}

/// [`test_all`] for one shard: every shard computes the same unique images (and counts them
/// all, so that every shard's counts of points and images are the whole campaign's), and
/// recovers only the images it owns ([`driver::shard`]); its recoveries and failures are its
/// own. Units are numbered from `base` (the units of earlier schedules). Not with `--lazy`
/// (whose points share what recovery read).
pub fn test_shard(
    log: &CrashLog,
    plan: &Plan,
    seen: &mut std::collections::BTreeSet<String>,
    shard: driver::shard::Shard,
    base: u64,
) -> Result<Tested, Error> {
    use rayon::prelude::*;
    if plan.lazy && !shard.is_whole() {
        return Err(Error::Other("--lazy cannot be sharded (its crash points share what recovery read)".into()));
    }
    let points = log.point_data();
    let mut tested = Tested::default();
    // Lazy exploration's points are explored on `--jobs` workers; the eager images' pool is
    // sized by the images this shard recovers ([`recovery_workers`]).
    let lazy_pool = if plan.lazy { Some(worker_pool(plan.jobs)?) } else { None };
    let restored = std::sync::atomic::AtomicU64::new(0);
    for p in &points {
        tested.max_space_log2 = tested.max_space_log2.max(p.space.count_log2());
    }
    // Every recovered image: its key (the hash of its files), point, choice and verdict, with
    // its unit.
    let mut recovered: Vec<(String, usize, Vec<u32>, Verdict)> = Vec::new();
    let mut recovered_units: Vec<u64> = Vec::new();
    // `--lazy`: points explored by Jaaru's refinement, each distinct point once; the others are
    // enumerated eagerly below.
    let mut eager: Vec<usize> = (0..points.len()).collect();
    if plan.lazy {
        eager.clear();
        let mut todo: Vec<(usize, String)> = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let key = point_key(p, &log.file_paths);
            if !p.space.is_empty() && !seen.contains(&key) && !todo.iter().any(|(_, k)| *k == key) {
                todo.push((i, key));
            }
        }
        let bar = Progress::new(
            plan.quiet,
            todo.len(),
            "exploring {pos}/{len} crash points lazily [{bar:30}] {msg}",
            "crash points explored lazily",
        );
        let pool = lazy_pool.as_ref().expect("built for --lazy");
        let explored: Vec<Result<crate::lazy::Explored, Error>> = pool.install(|| {
            todo.par_iter()
                .map(|(i, _)| {
                    let e = crate::lazy::explore(&points[*i], &log.file_paths, plan);
                    restored.fetch_add(driver::warm::take_counts().restored, std::sync::atomic::Ordering::Relaxed);
                    bar.inc(1);
                    e
                })
                .collect()
        });
        bar.finish_and_clear();
        for ((i, key), e) in todo.into_iter().zip(explored) {
            let e = e?;
            tested.recoveries += e.runs.len() as u64;
            // A point whose recovery reads PM behind the machine's back is enumerated eagerly
            // when its images fit the budget; a larger one keeps its lazy runs as its sample,
            // which follow what recovery reads, where eager sampling draws blind.
            if e.bypassed && points[i].space.count().is_some_and(|n| n <= plan.max_images as u128) {
                eager.push(i);
                continue;
            }
            seen.insert(key);
            if !e.exhaustive {
                tested.sampled_points += 1;
            }
            if e.exhaustive {
                let n = points[i].space.count_log2();
                tested.covered_log2 = Some(tested.covered_log2.map_or(n, |c| log2_add(c, n)));
            }
            for crate::lazy::LazyRun { choice, verdict: v, .. } in e.runs {
                tested.images += 1;
                let Some(files) = image_files(&points[i], &choice, &log.file_paths) else { continue };
                let key = files_key(&files);
                if !recovered.iter().any(|r| r.0 == key) {
                    recovered_units.push(base + recovered.len() as u64);
                    recovered.push((key, i, choice, v));
                }
            }
        }
        tested.unique_images = recovered.len() as u64;
    }
    // Every image of every eager point, deduplicated by the bytes it leaves in the files, whose
    // hash comes from the point's and the lines the image changes ([`image_key`]): every shard
    // must know every unique image to know its share, but builds only the images it recovers.
    // Only the point and choice are kept, so memory does not grow with the number of images.
    let mut unique: BTreeMap<String, (usize, Vec<u32>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for &i in &eager {
        let p = &points[i];
        let (images, exhaustive) = images_of(&p.space, plan.max_images);
        if !exhaustive {
            tested.sampled_points += 1;
        }
        // The image where nothing was lost is the point's own state: recovery must pass on it
        // too (it is what a crash right there with everything flushed leaves).
        let mut all = images;
        all.push(persisted(&p.space));
        let keys = key_base(p, &log.file_paths);
        for choice in all {
            tested.images += 1;
            let Some(key) = image_key(p, &keys, &choice) else { continue };
            if seen.contains(&key) || recovered.iter().any(|r| r.0 == key) {
                continue;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = unique.entry(key.clone()) {
                order.push(key);
                e.insert((i, choice));
            }
        }
    }
    tested.unique_images += unique.len() as u64;
    seen.extend(order.iter().cloned());
    // This shard's images, each with its unit (after the lazy points' images).
    let first_unit = base + recovered.len() as u64;
    let order: Vec<(u64, String)> = order
        .into_iter()
        .enumerate()
        .map(|(n, k)| (first_unit + n as u64, k))
        .filter(|(u, _)| shard.owns(*u))
        .collect();
    let pool = match lazy_pool {
        Some(pool) => pool,
        None => worker_pool(recovery_workers(plan.jobs, order.len()))?,
    };
    let bar = Progress::new(
        plan.quiet,
        order.len(),
        "recovering {pos}/{len} crash images [{bar:30}] {msg}",
        "crash images recovered",
    );
    let failing = std::sync::atomic::AtomicU64::new(0);
    let log_paths = log.file_paths.clone();
    let open: Vec<Vec<(PathBuf, u64, u64)>> =
        points.iter().map(|p| if plan.xfd { open_bytes(&p.space, &log.file_paths) } else { Vec::new() }).collect();
    let verdicts: Vec<Result<Verdict, Error>> = pool.install(|| {
        order
            .par_iter()
            .map(|(_, key)| {
                let (point, choice) = &unique[key];
                let v = match image_files(&points[*point], choice, &log_paths) {
                    Some(files) => recover(plan, &files, &open[*point]),
                    None => Ok(Verdict::Passed),
                };
                restored.fetch_add(driver::warm::take_counts().restored, std::sync::atomic::Ordering::Relaxed);
                if matches!(v, Ok(Verdict::Failed { .. })) {
                    let n = failing.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    bar.set_message(format!("{n} failing"));
                }
                bar.inc(1);
                v
            })
            .collect()
    });
    bar.finish_and_clear();
    // Recoveries an interrupt kept from running (or stopped) count for nothing.
    tested.recoveries += verdicts.iter().filter(|v| !matches!(v, Ok(Verdict::Interrupted))).count() as u64;
    tested.restored = restored.into_inner();
    for ((unit, key), v) in order.into_iter().zip(verdicts) {
        let (point, choice) = unique.remove(&key).expect("ordered keys are unique images");
        recovered_units.push(unit);
        recovered.push((key, point, choice, v?));
    }
    let failed = recovered.iter().filter(|r| r.3.failed()).count();
    let minimising = Progress::new(
        plan.quiet,
        failed,
        "minimising {pos}/{len} failing images [{bar:30}]",
        "failing images minimised",
    );
    // The smallest set of lines that must stay unpersisted for recovery to fail, of each failing
    // image, on the recovery workers: their warm engines serve these recoveries too, where the
    // calling thread would run its first recovery fresh (a fixed cost every shard repeats).
    // Minimising one image takes up to `MINIMISE_TESTS + 1` recoveries: a pool sized for the
    // recoveries above may be too small for that.
    let wanted = recovery_workers(plan.jobs, failed * (MINIMISE_TESTS + 1));
    let larger = if wanted > pool.current_num_threads() { Some(worker_pool(wanted)?) } else { None };
    let minimised: Vec<Result<Minimised, Error>> = larger.as_ref().unwrap_or(&pool).install(|| {
        recovered
            .par_iter()
            .filter(|r| r.3.failed())
            .map(|(_, point, choice, _)| {
                let m = if emu::interrupt::requested().is_some() {
                    // Interrupted: the failure is reported with every line its image lost,
                    // unminimised (its replay rebuilds the same image).
                    Ok(Minimised { minimal: stale_dims(&points[*point].space, choice), recoveries: 0, restored: 0 })
                } else {
                    minimise(plan, &points[*point], choice, &log_paths)
                };
                minimising.inc(1);
                m
            })
            .collect()
    });
    minimising.finish_and_clear();
    let mut minimised = minimised.into_iter();
    for ((_, point, choice, v), unit) in recovered.into_iter().zip(recovered_units) {
        let (what, locations) = match v {
            Verdict::Failed { what, locations } => (what, locations),
            Verdict::ReadOpen { file, offset, location } => {
                tested.findings.push(read_open_finding(log, point, &file, offset, location, plan.base.sched_seed()));
                tested.units.push(unit);
                continue;
            }
            Verdict::Passed | Verdict::Interrupted => continue,
        };
        tested.failures += 1;
        let m = minimised.next().expect("one minimisation per failing image")?;
        tested.recoveries += m.recoveries;
        tested.restored += m.restored;
        let image = Image { point, choice };
        tested.findings.push(finding_for(log, &image, &m.minimal, &what, locations, plan.base.sched_seed()));
        tested.units.push(unit);
    }
    Ok(tested)
}

/// Images a recovery worker is started for: each worker's first recovery runs fresh (it takes
/// the snapshot the others restore, [`driver::warm`]), which costs as much as some 20-30
/// restored ones, so a worker given fewer images than this would spend most of its time
/// starting. `--jobs` is the most workers a campaign uses; a shard with a few dozen images
/// uses one. The report does not depend on it.
pub const IMAGES_PER_WORKER: usize = 64;

/// Recovery workers for `images` images to recover with `--jobs` `jobs`: one per
/// [`IMAGES_PER_WORKER`] images started, at least one, at most `jobs`.
pub fn recovery_workers(jobs: usize, images: usize) -> usize {
    images.div_ceil(IMAGES_PER_WORKER).clamp(1, jobs.max(1))
}

/// A pool of `n` recovery workers.
fn worker_pool(n: usize) -> Result<rayon::ThreadPool, Error> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n.max(1))
        .build()
        .map_err(|e| Error::Other(format!("cannot start {n} recovery workers: {e}")))
}

/// Most recoveries ddmin may run to minimise one failing image.
const MINIMISE_TESTS: usize = 24;

/// A failing image minimised: the lines that must stay unpersisted, and the recoveries it took
/// (how many, how many restored from a snapshot).
struct Minimised {
    minimal: Vec<usize>,
    recoveries: u64,
    restored: u64,
}

/// ddmin over the lines the failing image `choice` of point `p` leaves unpersisted.
fn minimise(
    plan: &Plan,
    p: &PointData,
    choice: &[u32],
    file_paths: &BTreeMap<u32, PathBuf>,
) -> Result<Minimised, Error> {
    let stale = stale_dims(&p.space, choice);
    let mut errors = None;
    let mut recoveries = 0;
    let mut fails = |keep: &[usize]| {
        let c = with_only(&p.space, choice, keep);
        let Some(files) = image_files(p, &c, file_paths) else { return false };
        recoveries += 1;
        match recover(plan, &files, &[]) {
            Ok(v) => v.failed(),
            Err(e) => {
                errors = Some(e);
                false
            }
        }
    };
    // Nothing need be lost if the point's own state (everything persisted) fails too.
    let minimal =
        if !stale.is_empty() && fails(&[]) { Vec::new() } else { ddmin(stale.clone(), MINIMISE_TESTS, &mut fails) };
    let restored = driver::warm::take_counts().restored;
    match errors {
        Some(e) => Err(e),
        None => Ok(Minimised { minimal, recoveries, restored }),
    }
}

/// What identifies a crash point for lazy exploration: its persisted files and its space.
fn point_key(p: &PointData, file_paths: &BTreeMap<u32, PathBuf>) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"lazy");
    if let Some(files) = image_files(p, &persisted(&p.space), file_paths) {
        h.update(files_key(&files).as_bytes());
    }
    h.update(format!("{:?}", p.space).as_bytes());
    h.finalize().to_hex().to_string()
}
/// `ferrite crash`'s workload run (its `--crash-points` mode, `--crash-at`, `--dedup-points`) in
/// `spec.pm_dir`, recording its crash points.
pub fn workload(
    runner: &Runner,
    spec: &RunSpec,
    mode: &str,
    crash_at: Option<u64>,
    dedup_points: bool,
) -> Result<(RunReport, RunOutcome, CrashLog), Error> {
    let mut spec = spec.clone();
    if let Some(n) = crash_at {
        spec.max_instructions = n;
    }
    let log = CrashLog::new(&spec.pm_dir, crate::record::every_store(mode, spec.pm));
    log.borrow_mut().at_end_only = crash_at.is_some();
    log.borrow_mut().dedup_sites = dedup_points;
    let (report, out) = runner.execute_with(&spec, Some(Box::new(Recording(log.clone()))), Vec::new())?;
    let log = Rc::try_unwrap(log).map_err(|_| Error::Other("internal: crash log still shared".into()))?.into_inner();
    Ok((report, out, log))
}

/// What `ferrite crash` is asked besides the workload's run specification.
#[derive(Clone, Debug)]
pub struct Options {
    /// The recovery command.
    pub recover: Vec<String>,
    /// The checker run after each successful recovery.
    pub check: Option<Vec<String>>,
    /// `--crash-points`: `fences` or `stores`.
    pub crash_points: String,
    /// `--crash-at N`.
    pub crash_at: Option<u64>,
    /// `--dedup-points`.
    pub dedup_points: bool,
    /// `--max-images`.
    pub max_images: usize,
    /// Recovery workers.
    pub jobs: usize,
    /// `--remap`.
    pub remap: bool,
    /// `--xfd`.
    pub xfd: bool,
    /// `--fresh-recoveries`.
    pub fresh: bool,
    /// `--lazy`.
    pub lazy: bool,
    /// Schedules of the workload to crash-test (`--explore`).
    pub schedules: u32,
    /// The shard of the campaign's unique images to recover ([`test_shard`]).
    pub shard: driver::shard::Shard,
    /// Later schedules' workload runs go on from a snapshot of their common start
    /// ([`crate::workloads`]); the report is the same without.
    pub snapshots: bool,
}

/// What a campaign found.
pub struct Campaign {
    /// The first schedule's run, with every schedule's findings and the crash findings merged.
    pub report: RunReport,
    /// The first schedule's run.
    pub outcome: RunOutcome,
    /// What crash testing covered.
    pub summary: CrashSummary,
    /// Recoveries restored from a snapshot.
    pub restored: u64,
    /// Every finding before merging, with its place in the campaign's order: (schedule, 0, 0)
    /// for the workload run's, (schedule, 1, unit) for a recovery's. The findings of a
    /// campaign's shards, put in this order and merged, are the whole campaign's.
    pub pieces: Vec<((u64, u8, u64), Finding)>,
    /// Unique images over all schedules: the units the shards divide.
    pub units: u64,
    /// How the schedules' workload runs went (from the start, from a snapshot).
    pub workloads: driver::Branching,
}

/// Crash-tests `o.schedules` schedules of the workload `base` (seeds as for `ferrite run
/// --explore`: the program seed shared, a schedule seed each), each on a copy of the PM
/// directory: the user's is never changed. Later schedules' workload runs go on from a snapshot
/// of their common start ([`crate::workloads`]). Images already recovered for an earlier
/// schedule are not recovered again.
pub fn test(runner: &Runner, base: &RunSpec, o: &Options) -> Result<Campaign, Error> {
    let schedules = o.schedules.max(1);
    let mut seen = std::collections::BTreeSet::new();
    let mut first: Option<(RunReport, RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut summary = CrashSummary {
        crash_points: 0,
        images: 0,
        unique_images: 0,
        recoveries: 0,
        failures: 0,
        sampled_points: 0,
        max_space_log2: 0.0,
        recover: o.recover.clone(),
        check: o.check.clone(),
        crash_point_mode: o.crash_points.clone(),
        max_images: o.max_images,
        crash_at: o.crash_at,
        remap: o.remap,
        dedup_points: o.dedup_points,
        lazy: o.lazy,
        covered_log2: None,
        interrupted: None,
    };
    let mut restored = 0;
    let mut pieces = Vec::new();
    let mut units = 0;
    let rec = crate::workloads::Recorded { mode: &o.crash_points, crash_at: o.crash_at, dedup_points: o.dedup_points };
    let mut runs = crate::workloads::Workloads::new(runner, base, rec, schedules, o.snapshots);
    let mut ran = 0;
    for i in 0..u64::from(schedules) {
        let crate::workloads::Workload { dir: _work, spec, report, outcome: out, log } = runs.run(i)?;
        let plan = Plan {
            recover: o.recover.clone(),
            check: o.check.clone(),
            base: RunSpec { analyses: vec!["none".into()], discard_output: true, quiet: true, ..spec.clone() },
            budget: crate::recovery_budget(out.instructions, base.max_instructions),
            jobs: o.jobs,
            max_images: o.max_images,
            quiet: base.quiet,
            remap: o.remap,
            xfd: o.xfd,
            fresh: o.fresh,
            lazy: o.lazy,
        };
        let tested = test_shard(&log, &plan, &mut seen, o.shard, units)?;
        units += tested.unique_images;
        pieces.extend(report.findings.iter().map(|f| ((i, 0, 0), f.clone())));
        pieces.extend(tested.units.iter().zip(&tested.findings).map(|(&u, f)| ((i, 1, u), f.clone())));
        findings.extend(report.findings.iter().cloned());
        findings.extend(tested.findings);
        summary.crash_points += log.points.len() as u64;
        summary.images += tested.images;
        summary.unique_images += tested.unique_images;
        summary.recoveries += tested.recoveries;
        summary.failures += tested.failures;
        summary.sampled_points += tested.sampled_points;
        summary.max_space_log2 = summary.max_space_log2.max(tested.max_space_log2);
        if let Some(c) = tested.covered_log2 {
            let total = summary.covered_log2.map_or(c, |t| log2_add(t, c));
            summary.covered_log2 = Some(total);
        }
        restored += tested.restored;
        if first.is_none() {
            first = Some((report, out));
        }
        ran += 1;
        if let Some(s) = emu::interrupt::requested() {
            // No schedule starts after an interrupt; what ran stands.
            summary.interrupted = Some(s);
            break;
        }
    }
    let (mut report, outcome) = first.ok_or_else(|| Error::Other("no workload run".into()))?;
    report.findings = analyses::Finding::merge(findings);
    report.run.seed = base.seed;
    report.run.schedules = ran;
    Ok(Campaign { report, outcome, summary, restored, pieces, units, workloads: runs.counts })
}

/// What replaying a crash finding showed.
pub enum Replayed {
    /// Recovery failed again on the rebuilt image: how.
    Reproduced(String),
    /// The image could not be rebuilt: why.
    Diverged(String),
    /// Recovery passed on the rebuilt image.
    Passed,
}

/// Rebuilds a crash finding's image from a fresh workload run of `spec` (on a copy of its PM
/// directory) and recovers it again, as the campaign `c` did.
pub fn replay(runner: &Runner, spec: &RunSpec, c: &CrashSummary, image: &CrashImageRef) -> Result<Replayed, Error> {
    let (plan, files) = match rebuild(runner, spec, c, image)? {
        Ok(rebuilt) => rebuilt,
        Err(why) => return Ok(Replayed::Diverged(why)),
    };
    Ok(match recover(&plan, &files, &[])? {
        Verdict::Failed { what, .. } => Replayed::Reproduced(what),
        Verdict::Passed | Verdict::ReadOpen { .. } => Replayed::Passed,
        Verdict::Interrupted => Replayed::Diverged("ferrite was interrupted before the recovery ended".into()),
    })
}

/// A crash finding's image rebuilt from a fresh workload run of `spec`: the recovery plan and
/// the image's files, or why the workload no longer gives that image.
fn rebuild(
    runner: &Runner,
    spec: &RunSpec,
    c: &CrashSummary,
    image: &CrashImageRef,
) -> Result<Result<(Plan, crate::files::Files), String>, Error> {
    // A report is anyone's file: a crash section without a recovery command cannot be replayed.
    if c.recover.first().is_none_or(|p| p.is_empty()) {
        return Err(Error::Other("the report's crash section has no recovery command".into()));
    }
    let work = tempfile::Builder::new().prefix("ferrite-crash-").tempdir()?;
    driver::explore::copy_dir(&spec.pm_dir, work.path())?;
    let spec = RunSpec { pm_dir: work.path().to_path_buf(), ..spec.clone() };
    let (_, out, log) = workload(runner, &spec, &c.crash_point_mode, c.crash_at, c.dedup_points)?;
    let points = log.point_data();
    let Some(point) = points.get(image.point as usize) else {
        return Ok(Err(format!("the workload has {} crash points, not {}", points.len(), u64::from(image.point) + 1)));
    };
    let Some(files) = image_files(point, &image.choice, &log.file_paths) else {
        return Ok(Err(format!("crash point {} has another crash space", image.point)));
    };
    let plan = Plan {
        recover: c.recover.clone(),
        check: c.check.clone(),
        base: RunSpec { analyses: vec!["none".into()], discard_output: false, quiet: true, ..spec.clone() },
        budget: crate::recovery_budget(out.instructions, spec.max_instructions),
        jobs: 1,
        max_images: c.max_images,
        quiet: true,
        remap: c.remap,
        xfd: false,
        fresh: false,
        lazy: c.lazy,
    };
    Ok(Ok((plan, files)))
}

/// Where a crash finding's crash point is in a fresh run of the workload (as [`recovery_of`]
/// rebuilds its image): the instructions retired before it and the thread at it, or why the
/// workload no longer has that point.
pub fn crash_point_of(
    runner: &Runner,
    spec: &RunSpec,
    c: &CrashSummary,
    image: &CrashImageRef,
) -> Result<Result<(u64, u32), String>, Error> {
    let work = tempfile::Builder::new().prefix("ferrite-crash-").tempdir()?;
    driver::explore::copy_dir(&spec.pm_dir, work.path())?;
    let spec = RunSpec { pm_dir: work.path().to_path_buf(), ..spec.clone() };
    let (_, _, log) = workload(runner, &spec, &c.crash_point_mode, c.crash_at, c.dedup_points)?;
    Ok(match log.points.get(image.point as usize) {
        Some(p) => Ok((p.icount, p.tid)),
        None => Err(format!("the workload has {} crash points, not {}", log.points.len(), u64::from(image.point) + 1)),
    })
}

/// What a debugger is served of a crash finding: the run that failed on its rebuilt crash
/// image ([`recovery_of`]).
pub struct Served {
    /// The failing run: the recovery's, or the checker's on what the recovery left.
    pub spec: RunSpec,
    /// The directory holding the image (which the spec's PM directory is).
    pub dir: tempfile::TempDir,
    /// The recovery's command when `spec` is the checker's (the recovery passed on the image,
    /// so the finding is the checker's failure).
    pub after: Option<Vec<String>>,
}

/// A crash finding's failing run on its rebuilt crash image, for a debugger, or why the
/// workload no longer gives that image. With a checker (`--check`), the recovery is run first,
/// as the campaign ran it: if it passes, the finding is the checker's, which is served on the
/// files (and working directory) the recovery left; if it fails, the recovery is served on a
/// fresh copy of the image.
pub fn recovery_of(
    runner: &Runner,
    spec: &RunSpec,
    c: &CrashSummary,
    image: &CrashImageRef,
) -> Result<Result<Served, String>, Error> {
    let (plan, files) = match rebuild(runner, spec, c, image)? {
        Ok(rebuilt) => rebuilt,
        Err(why) => return Ok(Err(why)),
    };
    let fresh = || -> Result<tempfile::TempDir, Error> {
        let dir = tempfile::Builder::new().prefix("ferrite-recovery-").tempdir()?;
        crate::files::materialise(&files, dir.path())?;
        Ok(dir)
    };
    let dir = fresh()?;
    if let Some(check) = &plan.check {
        let recovered = crate::recover::run_on(&plan, &plan.recover, dir.path())?;
        if matches!(crate::recover::verdict_of(&recovered, "recovery"), Verdict::Passed) {
            let spec = crate::recover::recovery_spec(&plan, check, dir.path());
            return Ok(Ok(Served { spec, dir, after: Some(plan.recover.clone()) }));
        }
        // The recovery failed (or, if the image no longer fails, is what is served): on an
        // image it has not run on.
        let dir = fresh()?;
        let spec = crate::recover::recovery_spec(&plan, &plan.recover, dir.path());
        return Ok(Ok(Served { spec, dir, after: None }));
    }
    let spec = crate::recover::recovery_spec(&plan, &plan.recover, dir.path());
    Ok(Ok(Served { spec, dir, after: None }))
}
