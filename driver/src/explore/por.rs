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
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use analyses::{Analysis, RawFinding};
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use emu::sched::Decision;

/// One access: instruction count, thread, 8-byte word, whether it writes.
pub type Access = (u64, u32, u64, bool);

/// Records every memory access of a run.
pub struct Footprint(pub Rc<RefCell<Vec<Access>>>);

impl Analysis for Footprint {
    fn name(&self) -> &'static str {
        "footprint"
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
            v.push((ev.icount, ev.tid, w, write));
            w += 8;
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
}

/// For each decision of the run, the threads DPOR says must also be tried there.
pub fn backtracks(decisions: &[Decision], accesses: &[Access]) -> Vec<BTreeSet<u32>> {
    let n = decisions.len() + 1;
    // The thread of each segment: segment 0 is the first thread before any decision.
    let thread: Vec<u32> =
        std::iter::once(decisions.first().map_or(0, |d| d.current)).chain(decisions.iter().map(|d| d.chosen)).collect();
    let at: Vec<u64> = decisions.iter().map(|d| d.at).collect();
    // Per word: the segments that read and that write it.
    let mut words: BTreeMap<u64, (BTreeSet<usize>, BTreeSet<usize>)> = BTreeMap::new();
    for &(icount, _tid, word, write) in accesses {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn d(runnable: &[u32], current: u32, chosen: u32, at: u64) -> Decision {
        Decision { runnable: runnable.to_vec(), current, chosen, optional: true, at }
    }

    #[test]
    fn independent_segments_need_no_backtrack_and_conflicting_ones_do() {
        // Thread 1 runs [0,10), thread 2 [10,20), thread 1 [20,30).
        let decisions = vec![d(&[1, 2], 1, 2, 10), d(&[1, 2], 2, 1, 20)];
        // Disjoint words: no race.
        let acc = vec![(1, 1, 0x100, true), (11, 2, 0x200, true), (21, 1, 0x300, true)];
        assert!(backtracks(&decisions, &acc).iter().all(BTreeSet::is_empty));
        // Thread 2 writes what thread 1 wrote in segment 0... segment 0 has no decision; thread 1's
        // segment 2 reads what thread 2 wrote in segment 1: the decision that started segment 1
        // must also try thread 1.
        let acc = vec![(11, 2, 0x200, true), (21, 1, 0x200, false)];
        let b = backtracks(&decisions, &acc);
        assert_eq!(b[0], BTreeSet::from([1]));
        assert!(b[1].is_empty());
    }

    #[test]
    fn a_race_ordered_through_a_third_segment_is_no_race() {
        // Segments: 0 (t1) writes A; 1 (t2) reads A, writes B; 2 (t3) reads B, writes A.
        // Segment 2 conflicts with 0 on A, but 0 → 1 → 2 orders them.
        let decisions = vec![d(&[1, 2, 3], 1, 2, 10), d(&[1, 2, 3], 2, 3, 20)];
        let acc = vec![
            (1, 1, 0xa0, true),
            (11, 2, 0xa0, false),
            (12, 2, 0xb0, true),
            (21, 3, 0xb0, false),
            (22, 3, 0xa0, true),
        ];
        let b = backtracks(&decisions, &acc);
        // Only the 1–2 race (on B) backtracks, at the decision starting segment 1.
        assert_eq!(b[0], BTreeSet::from([3]));
        assert!(b[1].is_empty());
    }
}
