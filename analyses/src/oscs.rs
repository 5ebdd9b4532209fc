//! ESSAY

use std::collections::BTreeMap;

use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use emu::sync::SyncKind;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::sync::{Edges, HappensBefore, SyncAdapter, SyncBracket, SyncOp, VectorClock};
use crate::{Analysis, CodeInfo, RawFinding, RawLocation};

/// Threads whose latest read and latest write each location remembers in the optimised variant
/// (OSCS-Opt: "the two most recent reads and two most recent writes from different threads").
const OPT_THREADS: usize = 2;
/// Addresses read or written in a critical section that the `condflag` heuristic remembers per
/// thread (the most recent ones).
const CS_TOUCHED: usize = 64;

/// An interned critical-section list (0 is the empty list): the `(mutex, instance)` pairs a
/// thread is inside, outermost first.
type CsId = u32;

/// Options of the pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// OSCS-Base: the latest read and write of every thread per location, instead of the two
    /// most recent threads' (OSCS-Opt).
    pub full_history: bool,
    /// The redundant-write filter: a write that leaves the byte's value unchanged conflicts
    /// with nothing.
    pub redundant_write: bool,
    /// Suppresses pairs on condition flags: locations read in a critical section that then waits
    /// on a condition variable, or written in one that then signals or broadcasts.
    pub condflag: bool,
}

impl Options {
    /// Parses `--analyses oscs:KEY=VALUE[:KEY=VALUE]...`: `history=opt|full`,
    /// `redundant=on|off`, `condflag=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("`{kv}`: expected KEY=VALUE"))?;
            match k {
                "history" => {
                    o.full_history = match v {
                        "opt" => false,
                        "full" => true,
                        _ => return Err(format!("history={v}: expected opt or full")),
                    }
                }
                "redundant" => o.redundant_write = on_off(k, v)?,
                "condflag" => o.condflag = on_off(k, v)?,
                _ => return Err(format!("unknown oscs option `{k}` (history, redundant, condflag)")),
            }
        }
        Ok(o)
    }
}

/// `on`/`off` (or `1`/`0`, `true`/`false`, `yes`/`no`).
pub(crate) fn on_off(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => Err(format!("{key}={v}: expected on or off")),
    }
}

/// The most recent read or write of a location by one thread (`PrevRead*`/`PrevWrite*`).
#[derive(Clone, Copy, Debug)]
struct Access {
    tid: u32,
    slot: u32,
    /// The thread's own clock component at the access (`PrevReadVClk`/`PrevWriteVClk`).
    epoch: u32,
    cs: CsId,
    /// A write that did not change the byte (only with the redundant-write filter).
    redundant: bool,
    pc: u64,
    stack: StackId,
}

/// Per thread and location: `CSRWFlag` and the critical-section list of its latest read (kept
/// even when the optimised history has dropped the read itself).
#[derive(Clone, Copy, Debug)]
struct Flag {
    tid: u32,
    rw: bool,
    last_read_cs: CsId,
}

/// One byte's history.
#[derive(Default, Debug)]
struct Loc {
    /// Most recent first, one per thread.
    reads: Vec<Access>,
    writes: Vec<Access>,
    flags: Vec<Flag>,
}

impl Loc {
    fn flag(&self, tid: u32) -> Option<&Flag> {
        self.flags.iter().find(|f| f.tid == tid)
    }
}

/// A pair waiting for the end of the current thread's outermost critical section
/// (`DetectionList`).
#[derive(Clone, Copy, Debug)]
struct Pending {
    addr: u64,
    prev: Access,
    prev_write: bool,
    cur: Side,
    cur_cs: CsId,
    lock: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Side {
    pc: u64,
    stack: StackId,
    write: bool,
}

#[derive(Debug)]
struct Report {
    first_tid: u32,
    second_tid: u32,
    addr: u64,
    lock: u64,
    first_instance: u64,
    second_instance: u64,
    first_rw: bool,
    second_rw: bool,
    count: u64,
    addrs: Vec<u64>,
}

#[derive(Default)]
struct ThreadState {
    /// `(mutex, instance)`, outermost first.
    cs: Vec<(u64, u64)>,
    cs_id: CsId,
    detection: Vec<Pending>,
    /// Addresses read (`false`) or written (`true`) in the current outermost critical section,
    /// for the condflag heuristic.
    touched: Vec<(u64, bool)>,
}

/// The `oscs` pass.
pub struct Oscs {
    opts: Options,
    code: CodeInfo,
    adapter: SyncAdapter,
    bracket: SyncBracket,
    hb: HappensBefore,
    threads: FxHashMap<u32, ThreadState>,
    cs_lists: Vec<Vec<(u64, u64)>>,
    next_instance: u64,
    locs: FxHashMap<u64, Loc>,
    /// Pages (4 KiB) holding any location with history: accesses outside critical sections
    /// elsewhere need no lookup.
    pages: FxHashSet<u64>,
    condflags: FxHashSet<u64>,
    reports: BTreeMap<(Side, Side), Report>,
    ops: Vec<SyncOp>,
}

impl Default for Oscs {
    fn default() -> Oscs {
        Oscs::new(Options::default())
    }
}

impl Oscs {
    pub fn new(opts: Options) -> Oscs {
        Oscs {
            opts,
            code: CodeInfo::default(),
            adapter: SyncAdapter::default(),
            bracket: SyncBracket::default(),
            hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: false }),
            threads: FxHashMap::default(),
            cs_lists: vec![Vec::new()],
            next_instance: 1,
            locs: FxHashMap::default(),
            pages: FxHashSet::default(),
            condflags: FxHashSet::default(),
            reports: BTreeMap::new(),
            ops: Vec::new(),
        }
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadState {
        self.threads.entry(tid).or_default()
    }

    fn recompute_cs(&mut self, tid: u32) {
        let list = self.thread(tid).cs.clone();
        let id = if list.is_empty() {
            0
        } else {
            self.cs_lists.push(list);
            (self.cs_lists.len() - 1) as CsId
        };
        self.thread(tid).cs_id = id;
    }

    /// A mutex both lists hold (across threads: the same mutex object).
    fn common_lock(&self, a: CsId, b: CsId) -> Option<u64> {
        if a == 0 || b == 0 {
            return None;
        }
        let (la, lb) = (&self.cs_lists[a as usize], &self.cs_lists[b as usize]);
        la.iter().find(|(m, _)| lb.iter().any(|(n, _)| n == m)).map(|(m, _)| *m)
    }

    /// Whether both lists share a critical-section instance (within a thread).
    fn same_instance(&self, a: CsId, b: CsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        let (la, lb) = (&self.cs_lists[a as usize], &self.cs_lists[b as usize]);
        la.iter().any(|x| lb.contains(x))
    }

    fn instance_of(&self, cs: CsId, lock: u64) -> u64 {
        self.cs_lists[cs as usize].iter().find(|(m, _)| *m == lock).map(|(_, i)| *i).unwrap_or(0)
    }

    fn apply(&mut self, tid: u32, op: SyncOp) {
        match op {
            SyncOp::Acquire { lock, .. } => {
                let inst = self.next_instance;
                self.next_instance += 1;
                self.thread(tid).cs.push((lock, inst));
                self.recompute_cs(tid);
            }
            SyncOp::Release { lock } => {
                let t = self.thread(tid);
                let Some(i) = t.cs.iter().rposition(|(m, _)| *m == lock) else {
                    return;
                };
                t.cs.remove(i);
                let outermost = t.cs.is_empty();
                self.recompute_cs(tid);
                if outermost {
                    self.flush_detection(tid);
                    self.thread(tid).touched.clear();
                }
            }
            SyncOp::Exit => {
                self.flush_detection(tid);
                self.hb.apply(tid, op);
            }
            _ => self.hb.apply(tid, op),
        }
    }

    /// The outermost critical section ended: re-check the deferred pairs with the flags as they
    /// are now.
    fn flush_detection(&mut self, tid: u32) {
        let pending = std::mem::take(&mut self.thread(tid).detection);
        for p in pending {
            let loc = self.locs.get(&p.addr);
            let prev_rw = loc.and_then(|l| l.flag(p.prev.tid)).is_some_and(|f| f.rw);
            let cur_rw = loc.and_then(|l| l.flag(tid)).is_some_and(|f| f.rw);
            if !prev_rw || !cur_rw {
                self.report(p.addr, &p.prev, p.prev_write, tid, p.cur, p.cur_cs, p.lock, (prev_rw, cur_rw));
            }
        }
    }

    /// Marks the locations the current critical section touched as condition flags, when it
    /// waits (`read` ones) or signals (`written` ones).
    fn mark_condflags(&mut self, tid: u32, written: bool) {
        if let Some(t) = self.threads.get(&tid) {
            for (a, w) in &t.touched {
                if *w == written {
                    self.condflags.insert(*a);
                }
            }
        }
    }

    fn access(&mut self, ev: &Event) {
        let write = !matches!(ev.kind, EventKind::Load);
        let tid = ev.tid;
        let cs = self.threads.get(&tid).map(|t| t.cs_id).unwrap_or(0);
        let size = u64::from(ev.size.max(1));
        if cs == 0 {
            // Outside critical sections only locations with history matter (the flag is
            // cleared, the thread's latest access replaced).
            let (p0, p1) = (ev.addr >> 12, (ev.addr + size - 1) >> 12);
            if !self.pages.contains(&p0) && !self.pages.contains(&p1) {
                return;
            }
        }
        let slot = self.hb.slot(tid) as u32;
        let vc = self.hb.clock(tid).clone();
        for i in 0..size {
            let addr = ev.addr + i;
            let redundant = write && self.opts.redundant_write && i < 8 && {
                let (o, n) = ((ev.old >> (8 * i)) & 0xff, (ev.new >> (8 * i)) & 0xff);
                o == n
            };
            self.access_byte(ev, addr, write, redundant, cs, slot, &vc);
        }
        if cs != 0 && self.opts.condflag {
            let t = self.thread(tid);
            if !t.touched.iter().any(|(a, w)| *a == ev.addr && *w == write) {
                if t.touched.len() >= CS_TOUCHED {
                    t.touched.remove(0);
                }
                t.touched.push((ev.addr, write));
            }
        }
    }

    /// `OSCS_detectCS` for one byte.
    #[allow(clippy::too_many_arguments)]
    fn access_byte(
        &mut self,
        ev: &Event,
        addr: u64,
        write: bool,
        redundant: bool,
        cs: CsId,
        slot: u32,
        vc: &VectorClock,
    ) {
        let tid = ev.tid;
        if cs == 0 && !self.locs.contains_key(&addr) {
            return;
        }
        if cs != 0 {
            self.pages.insert(addr >> 12);
        }
        let epoch = vc.get(slot as usize);
        let mut loc = self.locs.remove(&addr).unwrap_or_default();
        // update_commutative_flag, before the history is updated: a write completes a
        // read-write sequence when the thread's latest read of the byte was in this same
        // critical-section instance; the first read of a section (or one outside) clears it.
        let fi = match loc.flags.iter().position(|f| f.tid == tid) {
            Some(i) => i,
            None => {
                loc.flags.push(Flag { tid, rw: false, last_read_cs: 0 });
                loc.flags.len() - 1
            }
        };
        let same = self.same_instance(cs, loc.flags[fi].last_read_cs);
        if write {
            loc.flags[fi].rw = same;
        } else if !same {
            loc.flags[fi].rw = false;
        }
        let cur = Side { pc: ev.pc, stack: ev.stack, write };
        if cs != 0 && !redundant {
            // Step 1: previous writes of other threads; step 2 (writes only): previous reads.
            let mut cands: Vec<(Access, bool)> = loc.writes.iter().map(|a| (*a, true)).collect();
            if write {
                cands.extend(loc.reads.iter().map(|a| (*a, false)));
            }
            for (prev, prev_write) in cands {
                if prev.tid == tid || prev.redundant {
                    continue;
                }
                let Some(lock) = self.common_lock(cs, prev.cs) else {
                    continue;
                };
                // check_order, corrected: the earlier access is ordered before this one iff
                // its epoch is at most what this thread knows of its thread.
                if prev.epoch <= vc.get(prev.slot as usize) {
                    continue;
                }
                // check_commutative.
                let prev_rw = loc.flag(prev.tid).is_some_and(|f| f.rw);
                let cur_rw = loc.flags[fi].rw;
                if !prev_rw {
                    self.report(addr, &prev, prev_write, tid, cur, cs, lock, (prev_rw, cur_rw));
                } else if !cur_rw {
                    self.thread(tid).detection.push(Pending { addr, prev, prev_write, cur, cur_cs: cs, lock });
                }
            }
        }
        // Step 3: the history.
        let acc = Access { tid, slot, epoch, cs, redundant, pc: ev.pc, stack: ev.stack };
        let cap = if self.opts.full_history { usize::MAX } else { OPT_THREADS };
        let list = if write { &mut loc.writes } else { &mut loc.reads };
        list.retain(|a| a.tid != tid);
        list.insert(0, acc);
        list.truncate(cap);
        if !write {
            loc.flags[fi].last_read_cs = cs;
        }
        self.locs.insert(addr, loc);
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &mut self,
        addr: u64,
        prev: &Access,
        prev_write: bool,
        tid: u32,
        cur: Side,
        cur_cs: CsId,
        lock: u64,
        (prev_rw, cur_rw): (bool, bool),
    ) {
        let first = Side { pc: prev.pc, stack: prev.stack, write: prev_write };
        let first_instance = self.instance_of(prev.cs, lock);
        let second_instance = self.instance_of(cur_cs, lock);
        let r = self.reports.entry((first, cur)).or_insert_with(|| Report {
            first_tid: prev.tid,
            second_tid: tid,
            addr,
            lock,
            first_instance,
            second_instance,
            first_rw: prev_rw,
            second_rw: cur_rw,
            count: 0,
            addrs: Vec::new(),
        });
        r.count += 1;
        if r.addrs.len() < 16 && !r.addrs.contains(&addr) {
            r.addrs.push(addr);
        }
    }
}

fn what(write: bool) -> &'static str {
    if write {
        "write"
    } else {
        "read"
    }
}

impl Analysis for Oscs {
    fn name(&self) -> &'static str {
        "oscs"
    }

    fn interest(&self) -> Interest {
        Interest::MEMORY.union(Interest::SYNC)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        match ev.kind {
            EventKind::Load | EventKind::Store | EventKind::NtStore | EventKind::RmwStore => {
                if !self.bracket.inside(ev.tid) && !self.code.is_library(ev.pc) {
                    self.access(ev);
                }
            }
            EventKind::SyncEnter(_) | EventKind::SyncReturn(_) | EventKind::ThreadCreate | EventKind::ThreadExit => {
                if self.opts.condflag {
                    match ev.kind {
                        EventKind::SyncEnter(SyncKind::CondWait) => self.mark_condflags(ev.tid, false),
                        EventKind::SyncEnter(SyncKind::CondSignal | SyncKind::CondBroadcast) => {
                            self.mark_condflags(ev.tid, true)
                        }
                        _ => {}
                    }
                }
                self.bracket.observe(ev);
                let mut ops = std::mem::take(&mut self.ops);
                self.adapter.translate(ev, |op| ops.push(op));
                for op in ops.drain(..) {
                    self.apply(ev.tid, op);
                }
                self.ops = ops;
            }
            _ => {}
        }
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone().sorted();
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for t in tids {
            self.flush_detection(t);
        }
        let mut out = Vec::new();
        for ((first, second), r) in std::mem::take(&mut self.reports) {
            if self.opts.condflag && r.addrs.iter().any(|a| self.condflags.contains(a)) {
                continue;
            }
            let rw = |b: bool| if b { "a read-write sequence" } else { "no read-write sequence" };
            let message = format!(
                "order-sensitive critical sections: {} by thread {} (critical section #{} of mutex {:#x}, {}) and \
                 {} by thread {} (critical section #{}, {}) at {:#x} are not ordered, so their order decides the \
                 byte's value",
                what(first.write),
                r.first_tid,
                r.first_instance,
                r.lock,
                rw(r.first_rw),
                what(second.write),
                r.second_tid,
                r.second_instance,
                rw(r.second_rw),
                r.addr
            );
            let role = |s: &Side, earlier: bool| match (earlier, s.write) {
                (true, true) => "earlier-write",
                (true, false) => "earlier-read",
                (false, true) => "later-write",
                (false, false) => "later-read",
            };
            out.push(RawFinding {
                analysis: "oscs",
                kind: "order-sensitive-critical-sections",
                message,
                occurrences: r.count,
                locations: vec![
                    RawLocation { role: role(&first, true), pc: first.pc, stack: first.stack, tid: r.first_tid },
                    RawLocation { role: role(&second, false), pc: second.pc, stack: second.stack, tid: r.second_tid },
                ],
            });
        }
        out
    }
}
