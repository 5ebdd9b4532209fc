//! `ferrite triage REPORT`: a report's findings ranked for a researcher, the shapes that were
//! real bugs in published PM programs first, each with a one-line reason.
//!
//! A race pass on a real index reports tens of findings; the published bugs among them are
//! mostly one shape: a *pointer* stored into PM and loaded by another thread before it is
//! durable (a resize's new table, a split's sibling link, a radix node's child): the reader
//! follows it, and a crash loses what it led to. A pool offset is a pointer too (P-CLHT's table
//! is reached through `ht_off`, libpmemobj's objects through a PMEMoid's `off`): the passes
//! recognise a stored value as one when it is 8-aligned, inside the extent of the PM file it is
//! stored into, and leads to PM some thread accessed ([`analyses::Stored::Offset`]). A site
//! that stored a pointer (or an offset) even once ranks as one: a shared helper such as
//! `movnt64` stores keys and pointers alike. Values come next, counters (a size, a version
//! bumped by one) last: recovery usually recomputes them. The shape of a race's store is what the
//! pass saw it write ([`analyses::Stored`], in the finding's `group.stored`). Other passes' kinds
//! are ranked by what they show: a crash image whose recovery failed, a fault, a lock persisted
//! while held first; performance findings (redundant flushes and fences) last. The ranking reads
//! only the report, so it works on reports of every pass and of any ferrite run.

use std::path::PathBuf;

use analyses::{Finding, Stored};
use anyhow::Result;

use crate::report::Report;

/// `ferrite triage`.
pub fn triage(report: PathBuf, top: Option<usize>) -> Result<i32> {
    let r = Report::read(&report)?;
    let ranked = rank(&r.findings);
    let shown = top.unwrap_or(ranked.len()).min(ranked.len());
    let mut out = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "ferrite triage: {} finding(s) in {}, most likely bugs first{}",
        ranked.len(),
        report.display(),
        if shown < ranked.len() { format!(" (the first {shown})") } else { String::new() }
    );
    for (i, (tier, why, f)) in ranked.iter().take(shown).enumerate() {
        // The key locations, then the first listed load (or the first listed location).
        let listed = &f.locations[key_locations(f)..];
        let first = listed.iter().find(|l| l.role == "load").or(listed.first());
        let sites: Vec<String> = f
            .locations
            .iter()
            .take(key_locations(f))
            .chain(first)
            .map(|l| match (&l.file, l.line) {
                (Some(file), Some(line)) => format!("{} {}:{line}", l.role, short(file)),
                _ => format!("{} {:#x}", l.role, l.pc),
            })
            .collect();
        let more = f.locations.len().saturating_sub(key_locations(f) + 1);
        let stacks = f.stack_count();
        let _ = writeln!(
            out,
            "{:>3}. finding {} [{}] {} (tier {tier}): {}{}  (x{}{})",
            i + 1,
            f.id,
            f.analysis,
            f.kind,
            sites.join(" -> "),
            if more > 0 { format!(" (+{more} more)") } else { String::new() },
            f.occurrences,
            if stacks > 1 { format!(", {stacks} call stacks") } else { String::new() },
        );
        let _ = writeln!(out, "     why: {why}");
    }
    // A reader that stops early (`| head`) is no error.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}

/// The findings in triage order: `(tier, why, finding)`, lower tiers first; within a tier, the
/// findings seen more often first, then by id (stable whatever the report's order).
pub fn rank(findings: &[Finding]) -> Vec<(u8, String, &Finding)> {
    let mut out: Vec<(u8, String, &Finding)> = findings
        .iter()
        .map(|f| {
            let (tier, why) = judge(f);
            (tier, why, f)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.occurrences.cmp(&a.2.occurrences)).then(a.2.id.cmp(&b.2.id)));
    out
}

/// How many leading locations identify the finding (all, unless grouped).
fn key_locations(f: &Finding) -> usize {
    f.group.as_ref().map_or(f.locations.len(), |g| (g.key_locations as usize).min(f.locations.len()))
}

fn short(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// A finding's tier (0 = most likely a harmful bug) and the reason.
fn judge(f: &Finding) -> (u8, String) {
    let stored = f.group.as_ref().and_then(|g| g.stored);
    let race = matches!(f.kind.as_str(), "persistence-induced-race" | "inter-thread-inconsistency");
    if race {
        let validated = if f.analysis == "pmrace" { " (recovery did not repair it)" } else { "" };
        return match stored {
            Some(Stored::Pointer) => (
                0,
                format!(
                    "a pointer into PM is stored and another thread loads it before it is durable: the reader follows \
                     it, and a crash loses what it led to{validated}"
                ),
            ),
            Some(Stored::Offset) => (
                0,
                format!(
                    "an offset into a PM pool (a PMEMoid-like value the program adds to the pool's base) is stored and \
                     another thread loads it before it is durable: the reader follows it, and a crash loses what it \
                     led to{validated}"
                ),
            ),
            Some(Stored::Counter) => (
                2,
                format!(
                    "a counter (moved by a little) is loaded by another thread before it is durable: usually \
                     recomputed by recovery{validated}"
                ),
            ),
            Some(Stored::Value) => (
                1,
                format!("a value is loaded by another thread before it is durable: the reader can act on data a crash loses{validated}"),
            ),
            None => (1, format!("another thread loads PM data before it is durable{validated}")),
        };
    }
    match f.kind.as_str() {
        k if f.crash_image.is_some() || k.starts_with("recovery") || f.analysis == "crash" => {
            (0, "a crash image on which the program's own recovery failed: shown harmful".into())
        }
        "sync-inconsistency" => {
            (0, "a lock in PM became durable while held: after a crash no thread releases it".into())
        }
        _ if f.analysis == "fault" || f.analysis == "machine" => (0, "the program faulted, hung or deadlocked".into()),
        "unpersisted-store" => (1, "a PM store never made durable: a crash at exit loses it".into()),
        "intra-thread-inconsistency" => {
            (2, "a thread acted durably on its own unpersisted store: harmful only if a crash falls between".into())
        }
        "data-race" | "order-sensitive-critical-sections" | "inconsistent-lock-usage" => {
            (2, "a concurrency bug of volatile state: not PM-specific".into())
        }
        "flush-without-fence" | "nt-store-without-fence" => {
            (2, "a flush never fenced: durable only if something later fences".into())
        }
        "flush-clean-line" | "redundant-fence" | "redundant-flush" => (4, "performance: nothing to persist".into()),
        _ => (3, format!("{} finding", f.kind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyses::{Group, Location};

    fn finding(id: u32, kind: &str, stored: Option<Stored>, occurrences: u64) -> Finding {
        let loc = |role: &str, line: u32| Location {
            role: role.into(),
            pc: 0x400000 + u64::from(line),
            function: None,
            file: Some("/src/t.c".into()),
            line: Some(line),
            thread: 1,
            backtrace: Vec::new(),
        };
        Finding {
            id,
            analysis: "hawkset".into(),
            kind: kind.into(),
            message: String::new(),
            seed: 0,
            occurrences,
            locations: vec![loc("store", id * 10), loc("fence", id * 10 + 1), loc("load", id * 10 + 2)],
            crash_image: None,
            schedule: None,
            interleaving: None,
            group: Some(Group { class: "unflushed".into(), key_locations: 2, stored, stacks: Vec::new() }),
        }
    }

    #[test]
    fn pointers_first_then_values_then_counters_then_performance() {
        let fs = vec![
            finding(1, "persistence-induced-race", Some(Stored::Counter), 50),
            finding(2, "redundant-fence", None, 100),
            finding(3, "persistence-induced-race", Some(Stored::Value), 1),
            finding(4, "persistence-induced-race", Some(Stored::Pointer), 2),
            finding(5, "persistence-induced-race", Some(Stored::Value), 9),
            finding(6, "persistence-induced-race", Some(Stored::Offset), 1),
        ];
        let order: Vec<u32> = rank(&fs).iter().map(|(_, _, f)| f.id).collect();
        // A pool offset ranks with the pointers (seen less often, so after this one).
        assert_eq!(order, vec![4, 6, 5, 3, 1, 2]);
        assert!(rank(&fs)[0].1.contains("pointer"));
        assert!(rank(&fs)[1].1.contains("offset"));
    }
}
