//! Dynamic partial-order reduction for `--strategy exhaustive --por` (Flanagan & Godefroid,
//! POPL'05, on the executed trace as in source-DPOR, Abdulla et al. POPL'14).
//!
//! A run is cut into *segments* at its scheduling decisions: each segment is what one thread ran
//! between two decisions. A [`Footprint`] pass records every memory access (DRAM and PM, at
//! 8-byte granularity) with its instruction count, so each segment gets a read set and a write
//! set. Two segments of different threads are *dependent* when one writes a word the other reads
//! or writes. Happens-before is program order plus dependence. Two dependent segments `i < j`
//! race when nothing else orders them: no segment after `i` that happens after `i` is program-order
//! or dependence-before `j`. For each race, the decision that started `i` must also try `j`'s
//! thread there (or, if that thread could not run then, every thread that could): that is the
//! backtrack set. The explorer tries only backtrack alternatives instead of every runnable thread.
//!
//! Locks, futexes and atomics are memory accesses like any other (the lock word), so they order
//! segments without a special case. Thread creation orders by enabledness (a thread cannot run
//! before it exists). Combined with the preemption bound, the reduction is not complete (neither
//! is the bound); without it, it explores one schedule per Mazurkiewicz trace at least.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use analyses::{Analysis, RawFinding};
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use emu::sched::Decision;

/// One access: its instruction count, and its 8-byte word with bit 0 set if it writes (16
/// bytes: `--por` keeps one for every access of a run, about 4.5 bytes an instruction of a
/// CPU-bound program at 24 bytes each). The segment, and so the thread, follows from the
/// instruction count.
pub type Access = (u64, u64);

/// An [`Access`] of `word` (8-byte aligned) at `icount`.
pub fn access(icount: u64, word: u64, write: bool) -> Access {
    (icount, word | u64::from(write))
}

/// Records every memory access of a run.
pub struct Footprint(pub Rc<RefCell<Vec<Access>>>);

impl Analysis for Footprint {
    fn name(&self) -> &'static str {
        "footprint"
    }

    /// The copy shares the record: the explorer cuts it back to what the run had recorded at
    /// the snapshot when it restores one (the accesses before it are those of any run that
    /// agrees with it so far).
    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(Footprint(self.0.clone())))
    }

    fn interest(&self) -> Interest {
        Interest::MEMORY
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        let write = match ev.kind {
            EventKind::Load => false,
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore => true,
            _ => return,
        };
        let first = ev.addr & !7;
        let last = (ev.addr + u64::from(ev.size.max(1)) - 1) & !7;
        let mut v = self.0.borrow_mut();
        let mut w = first;
        while w <= last {
            v.push(access(ev.icount, w, write));
            w += 8;
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
}

/// For each decision of the run, the threads DPOR says must also be tried there.
///
/// Linear in the accesses and the segments: of the earlier accesses of a word by another thread,
/// only that thread's latest read and latest write can race with a new access (its older ones
/// are program-order-before them, and so ordered before the new access through them), so each
/// word keeps those two per thread; and the vector clocks are a flat table (segments by dense
/// thread index). The whole-trace pairing this replaces was quadratic in the segments that touch
/// a hot word, in time and memory (gigabytes for a 0.9 M-instruction counter loop).
pub fn backtracks(decisions: &[Decision], accesses: &[Access]) -> Vec<BTreeSet<u32>> {
    let n = decisions.len() + 1;
    // The thread of each segment: segment 0 is the first thread before any decision.
    let thread: Vec<u32> =
        std::iter::once(decisions.first().map_or(0, |d| d.current)).chain(decisions.iter().map(|d| d.chosen)).collect();
    let mut tids = thread.clone();
    tids.sort_unstable();
    tids.dedup();
    let nt = tids.len();
    let dense: Vec<usize> = thread.iter().map(|t| tids.binary_search(t).unwrap_or(0)).collect();
    let at: Vec<u64> = decisions.iter().map(|d| d.at).collect();
    // Dependent earlier segments of each segment (different threads), as offsets into `deps`.
    let mut deps: Vec<u32> = Vec::new();
    let mut starts: Vec<usize> = vec![0; n + 1];
    // Per word, per dense thread: its latest reading and writing segments, plus one (0: none).
    let mut latest: std::collections::HashMap<u64, Box<[(u32, u32)]>> = std::collections::HashMap::new();
    let mut cur: Vec<u32> = Vec::new();
    let mut seg_of_cur = 0usize;
    let close = |seg: usize, cur: &mut Vec<u32>, deps: &mut Vec<u32>, starts: &mut Vec<usize>| {
        cur.sort_unstable();
        cur.dedup();
        deps.append(cur);
        starts[seg + 1] = deps.len();
    };
    for &(icount, packed) in accesses {
        let (word, write) = (packed & !7, packed & 1 == 1);
        let seg = at.partition_point(|&a| a <= icount);
        while seg_of_cur < seg {
            close(seg_of_cur, &mut cur, &mut deps, &mut starts);
            seg_of_cur += 1;
        }
        let t = dense[seg];
        let e = latest.entry(word).or_insert_with(|| vec![(0, 0); nt].into_boxed_slice());
        for (u, &(r, w)) in e.iter().enumerate() {
            if u != t {
                if w > 0 {
                    cur.push(w - 1);
                }
                if write && r > 0 {
                    cur.push(r - 1);
                }
            }
        }
        if write {
            e[t].1 = seg as u32 + 1;
        } else {
            e[t].0 = seg as u32 + 1;
        }
    }
    drop(latest);
    while seg_of_cur < n {
        close(seg_of_cur, &mut cur, &mut deps, &mut starts);
        seg_of_cur += 1;
    }
    // Vector clocks of each segment (program order and dependence): for each segment and dense
    // thread, the latest segment of that thread known to happen before it, plus one.
    let mut clocks: Vec<u32> = vec![0; n * nt];
    let mut last_of: Vec<Option<usize>> = vec![None; nt];
    let mut out = vec![BTreeSet::new(); decisions.len()];
    let mut c: Vec<u32> = vec![0; nt];
    for j in 0..n {
        let t = dense[j];
        let dj = &deps[starts[j]..starts[j + 1]];
        let clock = |k: usize, u: usize| clocks[k * nt + u] as usize;
        // j's predecessors: its thread's previous segment and the dependent earlier ones.
        let prev = last_of[t];
        for &i in dj {
            let i = i as usize;
            let ti = dense[i];
            // Is i ordered before j by another predecessor of j (not by i itself)?
            let ordered = prev.is_some_and(|p| clock(p, ti) > i)
                || dj.iter().any(|&k| k as usize != i && k as usize > i && clock(k as usize, ti) > i);
            if ordered || i == 0 {
                continue;
            }
            // Race: the decision that started i also tries j's thread.
            let d = &decisions[i - 1];
            if d.runnable.contains(&thread[j]) {
                out[i - 1].insert(thread[j]);
            } else {
                out[i - 1].extend(d.runnable.iter().copied());
            }
        }
        c.iter_mut().for_each(|x| *x = 0);
        for k in prev.into_iter().chain(dj.iter().map(|&k| k as usize)) {
            for (u, x) in c.iter_mut().enumerate() {
                *x = (*x).max(clocks[k * nt + u]);
            }
        }
        c[t] = j as u32 + 1;
        clocks[j * nt..(j + 1) * nt].copy_from_slice(&c);
        last_of[t] = Some(j);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Accesses given as (instruction count, thread, word, write); the thread is for the reader.
    fn accs(v: &[(u64, u32, u64, bool)]) -> Vec<Access> {
        v.iter().map(|&(icount, _thread, word, write)| access(icount, word, write)).collect()
    }

    fn d(runnable: &[u32], current: u32, chosen: u32, at: u64) -> Decision {
        Decision { runnable: runnable.to_vec(), current, chosen, optional: true, at }
    }

    #[test]
    fn independent_segments_need_no_backtrack_and_conflicting_ones_do() {
        // Thread 1 runs [0,10), thread 2 [10,20), thread 1 [20,30).
        let decisions = vec![d(&[1, 2], 1, 2, 10), d(&[1, 2], 2, 1, 20)];
        // Disjoint words: no race.
        let acc = accs(&[(1, 1, 0x100, true), (11, 2, 0x200, true), (21, 1, 0x300, true)]);
        assert!(backtracks(&decisions, &acc).iter().all(BTreeSet::is_empty));
        // Thread 2 writes what thread 1 wrote in segment 0... segment 0 has no decision; thread 1's
        // segment 2 reads what thread 2 wrote in segment 1: the decision that started segment 1
        // must also try thread 1.
        let acc = accs(&[(11, 2, 0x200, true), (21, 1, 0x200, false)]);
        let b = backtracks(&decisions, &acc);
        assert_eq!(b[0], BTreeSet::from([1]));
        assert!(b[1].is_empty());
    }

    #[test]
    fn a_race_ordered_through_a_third_segment_is_no_race() {
        // Segments: 0 (t1) writes A; 1 (t2) reads A, writes B; 2 (t3) reads B, writes A.
        // Segment 2 conflicts with 0 on A, but 0 → 1 → 2 orders them.
        let decisions = vec![d(&[1, 2, 3], 1, 2, 10), d(&[1, 2, 3], 2, 3, 20)];
        let acc = accs(&[
            (1, 1, 0xa0, true),
            (11, 2, 0xa0, false),
            (12, 2, 0xb0, true),
            (21, 3, 0xb0, false),
            (22, 3, 0xa0, true),
        ]);
        let b = backtracks(&decisions, &acc);
        // Only the 1–2 race (on B) backtracks, at the decision starting segment 1.
        assert_eq!(b[0], BTreeSet::from([3]));
        assert!(b[1].is_empty());
    }

    /// The whole-trace pairing `backtracks` replaced (every conflicting pair of segments, maps
    /// for clocks): the linear version must give the same backtrack sets.
    fn reference(decisions: &[Decision], accesses: &[Access]) -> Vec<BTreeSet<u32>> {
        let n = decisions.len() + 1;
        // The thread of each segment: segment 0 is the first thread before any decision.
        let thread: Vec<u32> = std::iter::once(decisions.first().map_or(0, |d| d.current))
            .chain(decisions.iter().map(|d| d.chosen))
            .collect();
        let at: Vec<u64> = decisions.iter().map(|d| d.at).collect();
        // Per word: the segments that read and that write it.
        let mut words: BTreeMap<u64, (BTreeSet<usize>, BTreeSet<usize>)> = BTreeMap::new();
        for &(icount, packed) in accesses {
            let (word, write) = (packed & !7, packed & 1 == 1);
            let seg = at.partition_point(|&a| a <= icount);
            let e = words.entry(word).or_default();
            if write {
                e.1.insert(seg);
            } else {
                e.0.insert(seg);
            }
        }
        // Dependent earlier segments of each segment (different threads).
        let mut deps: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for (reads, writes) in words.values() {
            for &w in writes {
                for &o in reads.iter().chain(writes.iter()) {
                    if o != w && thread[o] != thread[w] {
                        let (a, b) = if o < w { (o, w) } else { (w, o) };
                        deps[b].insert(a);
                    }
                }
            }
        }
        // Vector clocks (by thread id) of each segment: program order and dependence.
        let mut clocks: Vec<BTreeMap<u32, usize>> = Vec::with_capacity(n);
        let mut last_of: BTreeMap<u32, usize> = BTreeMap::new();
        let join = |c: &mut BTreeMap<u32, usize>, o: &BTreeMap<u32, usize>| {
            for (&t, &v) in o {
                let e = c.entry(t).or_insert(0);
                *e = (*e).max(v);
            }
        };
        let mut out = vec![BTreeSet::new(); decisions.len()];
        for j in 0..n {
            let t = thread[j];
            // j's predecessors: its thread's previous segment and the dependent earlier ones.
            let prev = last_of.get(&t).copied();
            for &i in &deps[j] {
                // Is i ordered before j by another predecessor of j (not by i itself)?
                let ordered = prev.is_some_and(|p| clocks[p].get(&thread[i]).copied().unwrap_or(0) > i)
                    || deps[j].iter().any(|&k| k != i && k > i && clocks[k].get(&thread[i]).copied().unwrap_or(0) > i);
                if ordered || i == 0 {
                    continue;
                }
                // Race: the decision that started i also tries j's thread.
                let d = &decisions[i - 1];
                if d.runnable.contains(&t) {
                    out[i - 1].insert(t);
                } else {
                    out[i - 1].extend(d.runnable.iter().copied());
                }
            }
            let mut c = prev.map(|p| clocks[p].clone()).unwrap_or_default();
            for &i in &deps[j] {
                let ci = clocks[i].clone();
                join(&mut c, &ci);
            }
            c.insert(t, j + 1);
            clocks.push(c);
            last_of.insert(t, j);
        }
        out
    }

    #[test]
    fn the_linear_backtracks_match_the_whole_trace_pairing() {
        // A fixed linear congruential generator: the same traces every time.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % m
        };
        for _ in 0..500 {
            let threads = 2 + next(3) as u32;
            let segments = 1 + next(12);
            let mut decisions = Vec::new();
            let mut current = 1;
            for s in 1..segments {
                let runnable: Vec<u32> = (1..=threads).filter(|_| next(4) != 0).collect();
                let runnable = if runnable.is_empty() { vec![current] } else { runnable };
                let chosen = runnable[next(runnable.len() as u64) as usize];
                decisions.push(Decision { runnable, current, chosen, optional: true, at: s * 10 });
                current = chosen;
            }
            let mut accesses = Vec::new();
            for icount in 0..segments * 10 {
                if next(3) == 0 {
                    accesses.push(access(icount, 8 * next(4), next(2) == 0));
                }
            }
            assert_eq!(
                backtracks(&decisions, &accesses),
                reference(&decisions, &accesses),
                "{decisions:?} {accesses:?}"
            );
        }
    }
}
