//! ESSAY

use std::collections::BTreeMap;

use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use rustc_hash::FxHashMap;

use crate::sync::{Edges, HappensBefore, Mode, SyncAdapter, SyncBracket, SyncOp, VectorClock};
use crate::{Analysis, CodeInfo, RawFinding, RawLocation};

/// Bytes per granule: MTE's tag granule, the unit whose owner the pass records.
const GRANULE: u64 = 16;
const GRANULE_SHIFT: u32 = 4;
/// Shadow pages: 4 KiB of guest memory, 256 granules.
const PAGE_SHIFT: u32 = 12;
const GRANULES_PER_PAGE: usize = 1 << (PAGE_SHIFT - GRANULE_SHIFT);
/// Most access records one granule keeps; beyond it the oldest record of another thread is
/// forgotten (a possible missed race, never a false one).
const MAX_ENTRIES: usize = 32;
/// A thread's stack block as glibc lays it out: the thread descriptor (the handle) at the top,
/// the static TLS and the stack below it, `RLIMIT_STACK` (8 MiB) in all.
const STACK_SPAN: u64 = 8 << 20;
const TCB_SPAN: u64 = 4096;
/// Happens-before objects of sync locations live in their own key space (bit 63: no guest
/// address has it, nor an object of [`SyncAdapter`]); a lock's release objects too (bit 47:
/// written by exclusive holders, bit 48: by shared ones).
const SYNC_KEY: u64 = 1 << 63;
const LOCK_W: u64 = SYNC_KEY | 1 << 47;
const LOCK_R: u64 = SYNC_KEY | 1 << 48;
/// Locations remembered per report for the end-of-run sync-location filter.
const MAX_CONFLICTS: usize = 16;

/// An interned lockset (0 is the empty set).
type LsId = u32;

/// Locksets held at accesses, interned: sorted `(lock, mode)` lists.
struct LockSets {
    sets: Vec<Vec<(u64, Mode)>>,
    index: FxHashMap<Vec<(u64, Mode)>, LsId>,
    excludes: FxHashMap<(LsId, LsId), bool>,
    common: FxHashMap<(LsId, LsId), bool>,
    meet: FxHashMap<(LsId, LsId), LsId>,
}

impl LockSets {
    fn new() -> LockSets {
        let mut index = FxHashMap::default();
        index.insert(Vec::new(), 0);
        LockSets {
            sets: vec![Vec::new()],
            index,
            excludes: FxHashMap::default(),
            common: FxHashMap::default(),
            meet: FxHashMap::default(),
        }
    }

    fn intern(&mut self, set: Vec<(u64, Mode)>) -> LsId {
        if let Some(id) = self.index.get(&set) {
            return *id;
        }
        let id = self.sets.len() as LsId;
        self.sets.push(set.clone());
        self.index.insert(set, id);
        id
    }

    /// Whether two accesses made holding `a` and `b` exclude each other: some lock is in both
    /// sets and held exclusively in at least one (two read locks of a rwlock do not).
    fn excludes(&mut self, a: LsId, b: LsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        if let Some(v) = self.excludes.get(&(a, b)) {
            return *v;
        }
        let v = self.sets[a as usize].iter().any(|(l, ma)| {
            self.sets[b as usize].iter().any(|(k, mb)| k == l && (*ma == Mode::Exclusive || *mb == Mode::Exclusive))
        });
        self.excludes.insert((a, b), v);
        v
    }

    /// Whether the two sets share a lock in any mode.
    fn common(&mut self, a: LsId, b: LsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        if let Some(v) = self.common.get(&(a, b)) {
            return *v;
        }
        let v = self.sets[a as usize].iter().any(|(l, _)| self.sets[b as usize].iter().any(|(k, _)| k == l));
        self.common.insert((a, b), v);
        v
    }

    /// Eraser's refinement: the locks in both sets, each in the weaker of its two modes.
    fn meet(&mut self, a: LsId, b: LsId) -> LsId {
        if a == b {
            return a;
        }
        if a == 0 || b == 0 {
            return 0;
        }
        if let Some(v) = self.meet.get(&(a, b)) {
            return *v;
        }
        let mut out = Vec::new();
        for (l, ma) in &self.sets[a as usize] {
            if let Some((_, mb)) = self.sets[b as usize].iter().find(|(k, _)| k == l) {
                let m = if *ma == Mode::Exclusive && *mb == Mode::Exclusive { Mode::Exclusive } else { Mode::Shared };
                out.push((*l, m));
            }
        }
        let v = self.intern(out);
        self.meet.insert((a, b), v);
        v
    }
}

/// What the pass knows of a thread.
#[derive(Default)]
struct ThreadState {
    /// Locks held now, with their mode and how often they were taken (recursive mutexes).
    held: Vec<(u64, Mode, u32)>,
    /// `held` as an interned set.
    ls: LsId,
    /// The thread's handle (glibc's descriptor at the top of its stack block), if it was created
    /// by `pthread_create`.
    handle: Option<u64>,
}

/// One access record of a granule: the software tag. `tid` owns the bytes in `mask` for reading
/// or for writing; `epoch` is its own clock component at the access and `ls` the locks it held.
#[derive(Clone, Copy, Debug)]
struct Entry {
    tid: u32,
    slot: u32,
    epoch: u32,
    ls: LsId,
    mask: u16,
    write: bool,
    pc: u64,
    stack: StackId,
}

/// The granule's lockset state (HMTRace's Algorithm 1, with Eraser's exclusive phase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum LsState {
    /// No access yet.
    #[default]
    Virgin,
    /// Every record of another thread happens before the owner's latest access: no check needed.
    Exclusive(u32),
    /// Accessed concurrently by several threads; the candidate lockset (the locks every access
    /// since then held, each in its weakest mode). A check is needed unless the current locks
    /// and the candidate exclude each other.
    Shared(LsId),
}

#[derive(Default)]
struct Granule {
    state: LsState,
    entries: Vec<Entry>,
}

struct Page {
    granules: Box<[Granule]>,
}

impl Page {
    fn new() -> Page {
        Page { granules: (0..GRANULES_PER_PAGE).map(|_| Granule::default()).collect() }
    }
}

/// One side of a reported pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Side {
    pc: u64,
    stack: StackId,
    write: bool,
}

#[derive(Debug)]
struct Report {
    kind: &'static str,
    first_tid: u32,
    second_tid: u32,
    addr: u64,
    len: u32,
    locked: bool,
    count: u64,
    /// Granules and bytes of the conflicts (at most [`MAX_CONFLICTS`]).
    conflicts: Vec<(u64, u16)>,
}

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Report read/read pairs with inconsistent locking (kind `inconsistent-lock-usage`).
    pub ilu: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { ilu: true }
    }
}

impl Options {
    /// Parses `--analyses hmtrace:KEY=VALUE[:KEY=VALUE]...`: `ilu=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("`{kv}`: expected KEY=VALUE"))?;
            match k {
                "ilu" => o.ilu = crate::oscs::on_off(k, v)?,
                _ => return Err(format!("unknown hmtrace option `{k}` (ilu)")),
            }
        }
        Ok(o)
    }
}

/// The `hmtrace` pass.
pub struct Hmtrace {
    opts: Options,
    code: CodeInfo,
    adapter: SyncAdapter,
    bracket: SyncBracket,
    hb: HappensBefore,
    locks: LockSets,
    threads: FxHashMap<u32, ThreadState>,
    /// Shadow memory, by page number.
    pages: FxHashMap<u64, Page>,
    /// Bytes that are sync locations now (touched by a locked instruction), by granule.
    sync_now: FxHashMap<u64, u16>,
    /// Bytes that were sync locations at any time (for the end-of-run filter).
    sync_ever: FxHashMap<u64, u16>,
    /// The running thread's clock, cached between synchronisation operations.
    cur: Option<(u32, VectorClock, u32)>,
    reports: BTreeMap<(&'static str, Side, Side), Report>,
    ops: Vec<SyncOp>,
}

impl Default for Hmtrace {
    fn default() -> Hmtrace {
        Hmtrace::new(Options::default())
    }
}

/// The byte mask of `[lo, hi)` inside the granule starting at `base`.
fn mask_of(base: u64, lo: u64, hi: u64) -> u16 {
    let a = lo.max(base) - base;
    let b = hi.min(base + GRANULE) - base;
    if b <= a {
        return 0;
    }
    let bits = ((1u32 << (b - a)) - 1) << a;
    bits as u16
}

impl Hmtrace {
    pub fn new(opts: Options) -> Hmtrace {
        Hmtrace {
            opts,
            code: CodeInfo::default(),
            adapter: SyncAdapter::default(),
            bracket: SyncBracket::default(),
            hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: false }),
            locks: LockSets::new(),
            threads: FxHashMap::default(),
            pages: FxHashMap::default(),
            sync_now: FxHashMap::default(),
            sync_ever: FxHashMap::default(),
            cur: None,
            reports: BTreeMap::new(),
            ops: Vec::new(),
        }
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadState {
        self.threads.entry(tid).or_default()
    }

    /// The running thread's clock and own epoch.
    fn clock(&mut self, tid: u32) -> (VectorClock, u32) {
        if let Some((t, c, e)) = &self.cur {
            if *t == tid {
                return (c.clone(), *e);
            }
        }
        let slot = self.hb.slot(tid);
        let c = self.hb.clock(tid).clone();
        let e = c.get(slot);
        self.cur = Some((tid, c.clone(), e));
        (c, e)
    }

    fn apply(&mut self, tid: u32, op: SyncOp) {
        self.cur = None;
        match op {
            SyncOp::Acquire { lock, mode } => {
                let t = self.thread(tid);
                match t.held.iter_mut().find(|(l, _, _)| *l == lock) {
                    Some(h) => h.2 += 1,
                    None => t.held.push((lock, mode, 1)),
                }
                self.relock(tid);
                // Release-to-acquire order: what writers released, and for a writer also what
                // readers released (readers do not order each other).
                self.hb.apply(tid, SyncOp::Wait { obj: LOCK_W | lock });
                if mode == Mode::Exclusive {
                    self.hb.apply(tid, SyncOp::Wait { obj: LOCK_R | lock });
                }
            }
            SyncOp::Release { lock } => {
                let t = self.thread(tid);
                if let Some(i) = t.held.iter().position(|(l, _, _)| *l == lock) {
                    let mode = t.held[i].1;
                    t.held[i].2 -= 1;
                    if t.held[i].2 == 0 {
                        t.held.remove(i);
                    }
                    let key = if mode == Mode::Exclusive { LOCK_W } else { LOCK_R };
                    self.hb.apply(tid, SyncOp::Post { obj: key | lock });
                }
                self.relock(tid);
            }
            SyncOp::Create { child } => {
                self.hb.apply(tid, op);
                self.thread(child);
            }
            SyncOp::Exit => {
                self.hb.apply(tid, op);
                let handle = self.thread(tid).handle;
                self.threads.remove(&tid);
                if let Some(h) = handle {
                    self.forget(h.saturating_sub(STACK_SPAN), h.saturating_add(TCB_SPAN));
                }
            }
            _ => self.hb.apply(tid, op),
        }
    }

    fn relock(&mut self, tid: u32) {
        let t = self.threads.get(&tid).expect("thread exists");
        let mut set: Vec<(u64, Mode)> = t.held.iter().map(|(l, m, _)| (*l, *m)).collect();
        set.sort_unstable();
        let id = self.locks.intern(set);
        self.thread(tid).ls = id;
    }

    /// Clears every record in `[lo, hi)`: memory that is dead (an exited thread's stack block).
    fn forget(&mut self, lo: u64, hi: u64) {
        for page in (lo >> PAGE_SHIFT)..(hi >> PAGE_SHIFT) {
            self.pages.remove(&page);
            let first = page << (PAGE_SHIFT - GRANULE_SHIFT);
            for g in first..first + GRANULES_PER_PAGE as u64 {
                self.sync_now.remove(&g);
            }
        }
    }

    fn access(&mut self, ev: &Event) {
        let tid = ev.tid;
        let write = !matches!(ev.kind, EventKind::Load);
        let locked = matches!(ev.kind, EventKind::RmwStore);
        // Library internals take part only through their synchronisation.
        let library = self.code.is_library(ev.pc);
        let (lo, hi) = (ev.addr, ev.addr.saturating_add(u64::from(ev.size.max(1))));
        let mut gi = lo >> GRANULE_SHIFT;
        while gi << GRANULE_SHIFT < hi {
            let base = gi << GRANULE_SHIFT;
            let m = mask_of(base, lo, hi);
            if locked {
                // A locked read-modify-write: the bytes become a sync location, and the
                // instruction an acquire and a release of it.
                *self.sync_now.entry(gi).or_insert(0) |= m;
                *self.sync_ever.entry(gi).or_insert(0) |= m;
                if let Some(p) = self.pages.get_mut(&(base >> PAGE_SHIFT)) {
                    let g = &mut p.granules[(gi as usize) & (GRANULES_PER_PAGE - 1)];
                    for e in &mut g.entries {
                        e.mask &= !m;
                    }
                    g.entries.retain(|e| e.mask != 0);
                }
                let key = SYNC_KEY | (ev.addr & !7);
                self.apply(tid, SyncOp::Wait { obj: key });
                self.apply(tid, SyncOp::Post { obj: key });
            } else {
                let sync = self.sync_now.get(&gi).copied().unwrap_or(0) & m;
                if sync != 0 {
                    // A plain access to a sync location: a release store or an acquire load
                    // (C11 atomics compile to plain moves on x86).
                    let key = SYNC_KEY | ((base + u64::from(sync.trailing_zeros())) & !7);
                    let op = if write { SyncOp::Post { obj: key } } else { SyncOp::Wait { obj: key } };
                    self.apply(tid, op);
                }
                let plain = m & !sync;
                if plain != 0 && !library {
                    self.check(ev, gi, plain, write);
                }
            }
            gi += 1;
        }
    }

    /// HMTRace's check of one granule (Algorithm 2 with the tag compare made explicit), then the
    /// tag update.
    fn check(&mut self, ev: &Event, gi: u64, m: u16, write: bool) {
        let tid = ev.tid;
        let (vc, epoch) = self.clock(tid);
        let slot = self.hb.slot(tid) as u32;
        let ls = self.thread(tid).ls;
        let page = self.pages.entry(gi >> (PAGE_SHIFT - GRANULE_SHIFT)).or_insert_with(Page::new);
        let g = &mut page.granules[(gi as usize) & (GRANULES_PER_PAGE - 1)];
        let ordered = |e: &Entry| e.epoch <= vc.get(e.slot as usize);
        let unordered_others = g.entries.iter().any(|e| e.tid != tid && !ordered(e));
        let need_check = if !unordered_others {
            g.state = LsState::Exclusive(tid);
            false
        } else {
            match g.state {
                LsState::Shared(c) => {
                    let skip = self.locks.excludes(c, ls);
                    g.state = LsState::Shared(self.locks.meet(c, ls));
                    !skip
                }
                _ => {
                    g.state = LsState::Shared(ls);
                    true
                }
            }
        };
        let mut found: Vec<(&'static str, Entry, u16)> = Vec::new();
        if need_check {
            for e in &g.entries {
                let both = e.mask & m;
                if e.tid == tid || both == 0 || ordered(e) {
                    continue;
                }
                if e.write || write {
                    if !self.locks.excludes(e.ls, ls) {
                        found.push(("data-race", *e, both));
                    }
                } else if self.opts.ilu && e.ls != 0 && ls != 0 && !self.locks.common(e.ls, ls) {
                    found.push(("inconsistent-lock-usage", *e, both));
                }
            }
        }
        // The tag update: a write makes the thread the only owner of its bytes; a read adds it
        // as a reader and leaves the writer's tag in place (a read under a reader-shared lock
        // inherits the tag).
        if write {
            for e in &mut g.entries {
                e.mask &= !m;
            }
        } else {
            for e in &mut g.entries {
                if e.tid == tid && !e.write {
                    e.mask &= !m;
                }
            }
        }
        g.entries.retain(|e| e.mask != 0);
        let new = Entry { tid, slot, epoch, ls, mask: m, write, pc: ev.pc, stack: ev.stack };
        match g.entries.iter_mut().find(|e| {
            e.tid == tid && e.write == write && e.epoch == epoch && e.ls == ls && e.pc == ev.pc && e.stack == ev.stack
        }) {
            Some(e) => e.mask |= m,
            None => g.entries.push(new),
        }
        if g.entries.len() > MAX_ENTRIES {
            if let Some(i) = g.entries.iter().position(|e| e.tid != tid) {
                g.entries.remove(i);
            }
        }
        for (kind, e, both) in found {
            self.report(kind, &e, ev, write, gi, both);
        }
    }

    fn report(&mut self, kind: &'static str, e: &Entry, ev: &Event, write: bool, gi: u64, both: u16) {
        let first = Side { pc: e.pc, stack: e.stack, write: e.write };
        let second = Side { pc: ev.pc, stack: ev.stack, write };
        let locked = e.ls != 0 || self.threads.get(&ev.tid).is_some_and(|t| t.ls != 0);
        let r = self.reports.entry((kind, first, second)).or_insert_with(|| Report {
            kind,
            first_tid: e.tid,
            second_tid: ev.tid,
            addr: (gi << GRANULE_SHIFT) + u64::from(both.trailing_zeros()),
            len: both.count_ones(),
            locked,
            count: 0,
            conflicts: Vec::new(),
        });
        r.count += 1;
        if r.conflicts.len() < MAX_CONFLICTS && !r.conflicts.contains(&(gi, both)) {
            r.conflicts.push((gi, both));
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

impl Analysis for Hmtrace {
    fn name(&self) -> &'static str {
        "hmtrace"
    }

    fn interest(&self) -> Interest {
        Interest::MEMORY.union(Interest::SYNC)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        match ev.kind {
            EventKind::Load | EventKind::Store | EventKind::NtStore | EventKind::RmwStore => {
                if !self.bracket.inside(ev.tid) {
                    self.access(ev);
                }
            }
            EventKind::SyncEnter(_) | EventKind::SyncReturn(_) | EventKind::ThreadCreate | EventKind::ThreadExit => {
                self.bracket.observe(ev);
                if ev.kind == EventKind::ThreadCreate && ev.addr != 0 {
                    self.thread(ev.new as u32).handle = Some(ev.addr);
                }
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
        let mut out = Vec::new();
        for ((kind, first, second), r) in std::mem::take(&mut self.reports) {
            // A location touched by a locked instruction at any time is a sync location: its
            // plain accesses were atomics' loads and stores, not races.
            let live = r.conflicts.iter().any(|(gi, m)| m & !self.sync_ever.get(gi).copied().unwrap_or(0) != 0);
            if !live {
                continue;
            }
            let message = if kind == "data-race" {
                format!(
                    "data race: {} by thread {} and {} by thread {} of {} byte(s) at {:#x}, not ordered by \
                     happens-before and {}",
                    what(first.write),
                    r.first_tid,
                    what(second.write),
                    r.second_tid,
                    r.len,
                    r.addr,
                    if r.locked { "holding no lock in common" } else { "with no lock held" }
                )
            } else {
                format!(
                    "inconsistent lock usage: reads by thread {} and thread {} of {} byte(s) at {:#x}, not \
                     ordered by happens-before, each holding locks but none in common",
                    r.first_tid, r.second_tid, r.len, r.addr
                )
            };
            let role = |s: &Side, earlier: bool| match (earlier, s.write) {
                (true, true) => "earlier-write",
                (true, false) => "earlier-read",
                (false, true) => "later-write",
                (false, false) => "later-read",
            };
            out.push(RawFinding {
                analysis: "hmtrace",
                kind: r.kind,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(mask_of(0, 0, 4), 0xf);
        assert_eq!(mask_of(0, 12, 20), 0xf000);
        assert_eq!(mask_of(16, 12, 20), 0xf);
        assert_eq!(mask_of(0, 0, 16), 0xffff);
    }
}
