//! The initialization removal heuristic (IRH) of HawkSet (Oliveira, Gonçalves & Matos, EuroSys
//! 2025, §3.1.3), shared by the passes that pair PM stores with other threads' loads (`hawkset`,
//! `vardalith`).
//!
//! A program initialises data (a fresh node, a new pool's root) with plain stores, persists
//! them, and only then publishes them to other threads — often through synchronisation no pass
//! sees as such (a plain store of a pointer, an `xchg` of a root). Without a rule for that, every
//! field of every published node is a race with every later reader.
//!
//! - [`Publication`] is HawkSet's bookkeeping: a byte is *published* once `threshold + 1` distinct
//!   threads have accessed it. HawkSet drops a store persisted (or overwritten) before its bytes
//!   were published — in the order this run happened to take (`irh_order=observed`).
//! - [`HeldStores`] is the causal rule (`irh_order=causal`, the default): such a store is *held*,
//!   with its writer's epoch at the persist, until the access that publishes its bytes, and
//!   dropped only if the persist *happens before* that access. The edges that count are program
//!   order, create/join, locks (a lock released after the persist and acquired before the
//!   access), post/wait and futex hand-offs, and a PM reads-from edge (the access's thread loaded
//!   bytes stored after the persist: how lock-free code publishes a node). A reads-from edge is
//!   from the store of the bytes the load read (not from the line's last store: a node's child
//!   slots share lines), and carries the storing thread's whole clock at the store (x86 stores
//!   release): a thread that copies a published pointer into a node of its own publishes the
//!   first writer's persist too. A store the
//!   access is not ordered after was never initialisation: in another schedule of the same
//!   program the reader comes first. HawkSet's rule loses the simplest race (a writer that
//!   persists after its unlock, a reader under the same lock) in every schedule where the writer
//!   finished first.
//!
//! Under the causal rule, accesses the first thread makes before it creates any other (a pool
//! formatted by `main`) publish nothing: they happen before every access of every other thread
//! ([`Publication::touch`]); its stores still pending at that creation count.
//!
//! [`ReadsFrom`] keeps the same per-byte reads-from edges for hawkset's race check
//! (`reads_from=on`), without lock edges.
//!
//! # What it can miss
//! The causal order sees only the synchronisation the passes recognise, C++ atomics in DRAM
//! among it (the machine's `AtomicAccess` events): a hand-off through another DRAM flag (C's
//! `__atomic` builtins, a `volatile`), or through a PM word the reader loads before the writer's
//! persist, is no edge, so a store published that way is reported (more reports, not fewer). Memory freed and allocated
//! again is new only when the passes see the free (`pmemobj_free`, their `frees=on`, which
//! forgets who touched the bytes) or the allocation (`fresh_allocs`); a program's own allocator
//! reuses memory unseen, and a store to a node persisted inside its lock then pairs with the
//! unlocked initialisation of another node later allocated at its address. A store whose bytes nobody
//! else ever touches is held to the end and never reported, as under HawkSet's rule.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::persist::ShadowLines;
use crate::sync::{Edges, HappensBefore, Sparse, SyncAdapter, SyncOp, PMDK_PSEUDO_LOCK};

/// Publication state of one line for the IRH: 12 bytes in the line's shadow block. Most lines
/// are only ever touched by one thread (a thread's own data, initialisation) and have nothing
/// published: that thread and its bytes are inline. A line a second thread touched keeps its
/// published bytes and every thread's unpublished ones in [`Publication::shared`], and `who`
/// names that entry instead of a thread.
#[derive(Clone, Copy, Default, Debug)]
#[repr(C, packed(4))]
struct IrhLine {
    /// Unpublished bytes the inline thread touched (0: none); while `who` is [`SHARED`], the
    /// line's published bytes (most accesses to a shared line ask only that, without a second
    /// memory access).
    mask: u64,
    /// The inline thread's id, or [`SHARED`] with the index of the line's entry in
    /// [`Publication::shared`].
    who: u32,
}

/// [`IrhLine::who`]'s flag: the line's state is in [`Publication::shared`] (no thread id
/// reaches it).
const SHARED: u32 = 1 << 31;

/// Threads that touched unpublished bytes of a line, with those bytes.
type Seen = SmallVec<[(u32, u64); 4]>;

/// A line more than one thread touched: the threads' unpublished bytes (its published ones are
/// in its [`IrhLine`]).
type SharedLine = SmallVec<[(u32, u64); 2]>;

/// HawkSet's initialization removal heuristic (§3.1.3), per byte: a byte is *published* once
/// `threshold + 1` distinct threads have accessed it. A store persisted (or overwritten) before
/// its bytes were published is initialisation nobody else could have seen in its window. A
/// threshold of 0 disables it (every byte is published).
#[derive(Clone, Debug)]
pub(crate) struct Publication {
    threshold: u32,
    lines: ShadowLines<IrhLine>,
    /// The lines a second thread touched.
    shared: Vec<SharedLine>,
    /// The causal rule's solo phase: `Some(t)` while thread `t` (0: not seen yet) is the only
    /// thread there has been, whose accesses are not counted (see [`Publication::touch`]);
    /// `None` once another thread exists, and always under HawkSet's rule.
    solo: Option<u32>,
}

impl Publication {
    /// The heuristic with this threshold (`irh=N`) and order: with
    /// [`IrhOrder::Causal`], the first thread's accesses before it creates another publish
    /// nothing.
    pub(crate) fn new(threshold: u32, order: IrhOrder) -> Publication {
        let solo = (order == IrhOrder::Causal).then_some(0);
        Publication { threshold, lines: ShadowLines::default(), shared: Vec::new(), solo }
    }

    /// A thread was created: the solo phase is over. Returns the thread it ends (whose stores
    /// still pending, not yet durable, the pass must touch now: their windows span the creation,
    /// so the new thread can see them), the first time only.
    pub(crate) fn created(&mut self) -> Option<u32> {
        self.solo.take().filter(|&t| t != 0)
    }

    /// Registers an access by `tid` to bytes `mask` of `line`, and returns the bytes this access
    /// published.
    ///
    /// Under the causal rule an access made while its thread is the only one there has been is
    /// not counted: every access of every other thread comes after a creation it made later, so
    /// such an access happens before all of them and cannot see, nor be seen in, any other
    /// thread's store window. A pool formatted by `main` (a `memset` of the whole mapping,
    /// `pmemobj_create`) before it starts its workers no longer publishes every byte, so a
    /// worker's node initialised and persisted before it is handed over is initialisation, as
    /// HawkSet means it (the thread's store is the first of the bytes' *concurrent* life).
    /// HawkSet's own rule counts threads whatever ordered them (`irh_order=observed` keeps it).
    pub(crate) fn touch(&mut self, tid: u32, line: u64, mask: u64) -> u64 {
        if self.threshold == 0 {
            return 0;
        }
        if let Some(first) = self.solo {
            if first == tid || first == 0 {
                self.solo = Some(tid);
                return 0;
            }
            // Another thread without a creation the pass saw (a process's first event).
            self.solo = None;
        }
        let e = *self.lines.get_mut(line);
        let (who, inline_mask) = (e.who, e.mask);
        let (before, mut seen, entry, own, others) = if who & SHARED == 0 {
            // Bytes this thread touched before and no other thread has: nothing changes (the
            // common case of a thread's own data, whatever its neighbours on the line do).
            if inline_mask == 0 || who == tid {
                if inline_mask & mask != mask {
                    *self.lines.get_mut(line) = IrhLine { mask: inline_mask | mask, who: tid };
                }
                return 0;
            }
            (0, Seen::from_slice(&[(who, inline_mask)]), None, 0, inline_mask)
        } else {
            let i = who & !SHARED;
            if mask & !inline_mask == 0 {
                return 0;
            }
            // Looked at in place first: most accesses to a shared line change nothing.
            let x = &self.shared[i as usize];
            let (own, others) = x.iter().fold((0, 0), |(o, a), &(t, m)| if t == tid { (m, a) } else { (o, a | m) });
            (inline_mask, Seen::new(), Some(i), own, others)
        };
        let fresh = mask & !before;
        if own & fresh == fresh && others & fresh == 0 {
            // Bytes only this thread touched so far, again.
            return 0;
        }
        if let Some(i) = entry {
            seen.extend(self.shared[i as usize].iter().copied());
        }
        let mut published = before;
        match seen.iter_mut().find(|(t, _)| *t == tid) {
            Some((_, m)) => *m |= fresh,
            None => seen.push((tid, fresh)),
        }
        if self.threshold == 1 {
            // Published: touched by this thread and another.
            published |= fresh & others;
        } else {
            let mut m = fresh;
            while m != 0 {
                let b = m.trailing_zeros();
                m &= m - 1;
                let n = seen.iter().filter(|(_, s)| s >> b & 1 == 1).count();
                if n as u32 > self.threshold {
                    published |= 1 << b;
                }
            }
        }
        for s in &mut seen {
            s.1 &= !published;
        }
        seen.retain(|s| s.1 != 0);
        self.store(line, published, &seen, entry);
        published & !before
    }

    /// Writes a line's state back: inline while one thread touched it and nothing is
    /// published, else in its entry of `shared` (kept for good: published bytes stay so, and a
    /// second thread's bytes are unpublished until they are).
    fn store(&mut self, line: u64, published: u64, seen: &[(u32, u64)], entry: Option<u32>) {
        let state = match entry {
            None if published == 0 && seen.len() <= 1 => {
                let (tid, mask) = seen.first().copied().unwrap_or((0, 0));
                IrhLine { mask, who: tid }
            }
            _ => {
                let i = entry.unwrap_or_else(|| {
                    self.shared.push(SharedLine::default());
                    self.shared.len() as u32 - 1
                });
                self.shared[i as usize] = seen.iter().copied().collect();
                IrhLine { mask: published, who: SHARED | i }
            }
        };
        *self.lines.get_mut(line) = state;
    }

    /// Bytes `mask` of `line` were handed out again by an allocator: whoever touched them
    /// touched an object that no longer exists, and the new one is published only when threads
    /// touch it anew. (A store of the old object's life that was held or recorded stays so.)
    pub(crate) fn forget(&mut self, line: u64, mask: u64) {
        let Some(&e) = self.lines.get(line) else { return };
        let (who, inline_mask) = (e.who, e.mask);
        if who & SHARED == 0 {
            let rest = inline_mask & !mask;
            if rest != inline_mask {
                *self.lines.get_mut(line) = IrhLine { mask: rest, who: if rest == 0 { 0 } else { who } };
            }
            return;
        }
        let i = who & !SHARED;
        let seen: Seen =
            self.shared[i as usize].iter().map(|&(t, m)| (t, m & !mask)).filter(|&(_, m)| m != 0).collect();
        self.store(line, inline_mask & !mask, &seen, Some(i));
    }

    /// [`Publication::forget`] for the device bytes `dev..dev + len`.
    pub(crate) fn forget_range(&mut self, dev: u64, len: u64) {
        for (line, mask) in crate::persist::range_pieces(dev, dev.saturating_add(len)) {
            self.forget(line, mask);
        }
    }

    /// Forgets the object a `pmemobj_alloc`-family call hands out, at its return (an object of
    /// PMDK's allocator is fresh: what threads did to its bytes in an earlier life, a freed table
    /// or a reused node, does not publish it). `sizes` is the thread's sizes of the allocation
    /// calls it is in, pushed at their entries.
    pub(crate) fn on_alloc(&mut self, ev: &emu::events::Event, sizes: &mut Vec<u64>, enabled: bool) {
        use emu::events::EventKind;
        use emu::sync::SyncKind;
        match ev.kind {
            EventKind::SyncEnter(SyncKind::PmemobjAlloc) => sizes.push(ev.old),
            EventKind::SyncReturn(SyncKind::PmemobjAlloc) => {
                let size = sizes.pop().unwrap_or(0);
                if ev.dev != 0 && enabled {
                    self.forget_range(ev.dev, size);
                }
            }
            _ => {}
        }
    }

    /// Whether any thread accessed `line` (false with the heuristic off, which keeps nothing).
    pub(crate) fn touched(&self, line: u64) -> bool {
        self.threshold != 0 && self.lines.get(line).is_some_and(|e| ({ e.mask }) != 0 || ({ e.who }) & SHARED != 0)
    }

    /// The bytes of `mask` of `line` that are published.
    pub(crate) fn published(&self, line: u64, mask: u64) -> u64 {
        if self.threshold == 0 {
            return mask;
        }
        match self.lines.get(line) {
            Some(e) if e.who & SHARED != 0 => e.mask & mask,
            _ => 0,
        }
    }
}

/// When a store persisted before its bytes were published counts as initialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrhOrder {
    /// HawkSet's rule: whenever this run persisted it before a second thread touched its
    /// bytes, whatever made that order.
    Observed,
    /// Only when the persist *happens before* the publishing access: by program order,
    /// create/join, a lock released after the persist and acquired before the access, a post
    /// and its wait, or the access's thread having loaded PM data the writer stored after the
    /// persist (the publishing pointer). An order the schedule merely happened to pick removes
    /// nothing.
    Causal,
}

impl IrhOrder {
    /// `observed` or `causal` (the value of an `irh_order=` option).
    pub fn parse(v: &str) -> Result<IrhOrder, String> {
        match v {
            "observed" => Ok(IrhOrder::Observed),
            "causal" => Ok(IrhOrder::Causal),
            _ => Err(format!("irh_order={v}: expected observed or causal")),
        }
    }
}

/// A held store: its bytes, the pass's name for it (a store context, a window), and its writer's
/// epoch at the persist. Sixteen bytes, one inline per line: most lines hold at most one.
type Held = (u64, u32, u32);

/// The last stores of one line's bytes: (bytes, thread, clock id in [`StoreClocks`]), the masks
/// disjoint. One inline: most lines are written by one thread at a time.
type LastStores = SmallVec<[(u64, u32, u32); 1]>;

/// Copies of threads' clocks taken at their stores: a store on x86 is a release, and a load
/// that reads it acquires the storing thread's whole clock, so the edge is transitive (a
/// thread that copied another's freshly persisted node's pointer into a node of its own
/// publishes the first thread's persist with its own store). A thread's stores share one copy
/// until its clock changes; a copy no byte refers to any more, and that is no longer its
/// thread's current one, is reused: they number at most the live entries of `last_store` and
/// one per thread.
#[derive(Clone, Debug, Default)]
struct StoreClocks {
    /// Clock, number of `last_store` entries naming it, whether it is its thread's current copy.
    clocks: Vec<(Sparse, u32, bool)>,
    /// Per copy, the threads (by clock slot, the first 64) that have joined it since it was
    /// taken: a thread that re-reads stores whose copies it has joined joins nothing (clocks
    /// only grow, so a joined copy stays within the reader's clock).
    joined: Vec<u64>,
    free: Vec<u32>,
    /// Thread → its current copy.
    current: FxHashMap<u32, u32>,
}

impl StoreClocks {
    /// The id of a copy of `tid`'s clock now (not counted as named by anything yet).
    fn of(&mut self, tid: u32, causal: &mut HappensBefore) -> u32 {
        let old = self.current.get(&tid).copied();
        if let Some(id) = old {
            if causal.clock_is(tid, &self.clocks[id as usize].0) {
                return id;
            }
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.clocks.push((Sparse::default(), 0, false));
                self.joined.push(0);
                self.clocks.len() as u32 - 1
            }
        };
        self.joined[id as usize] = 0;
        let c = &mut self.clocks[id as usize];
        causal.copy_clock(tid, &mut c.0);
        c.1 = 0;
        c.2 = true;
        self.current.insert(tid, id);
        if let Some(old) = old {
            self.clocks[old as usize].2 = false;
            self.unref(old, 0);
        }
        id
    }

    /// `id` is named `by` fewer times; freed when nothing names it.
    fn unref(&mut self, id: u32, by: u32) {
        let c = &mut self.clocks[id as usize];
        c.1 -= by;
        if c.1 == 0 && !c.2 {
            self.free.push(id);
        }
    }
}

/// Stores held by the causal IRH until their bytes are published; see the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct HeldStores {
    on: bool,
    /// Vector clocks with every edge the program has (locks included).
    causal: HappensBefore,
    /// Line → its bytes' last PM stores while stores are held: disjoint byte masks, each with
    /// the storing thread and its clock at the store in `clocks` (a load of some of those bytes
    /// learns the clock of the store it reads: a reads-from edge). Kept per byte, not per line:
    /// a node's child slots share lines, and the reader of one slot has not read its
    /// neighbour's store.
    last_store: ShadowLines<LastStores>,
    /// The stores' clocks in `last_store`.
    clocks: StoreClocks,
    held: ShadowLines<SmallVec<[Held; 1]>>,
    /// Lists in `held` that are not empty.
    lines: usize,
    /// Stores held, and of those, the ones an unordered access published.
    pub(crate) count: u64,
    pub(crate) unordered: u64,
}

impl HeldStores {
    /// The causal rule when `on`; otherwise nothing is ever held (HawkSet's rule).
    pub(crate) fn new(on: bool) -> HeldStores {
        HeldStores {
            on,
            causal: HappensBefore::new(Edges { create_join: true, objects: true, locks: true }),
            last_store: ShadowLines::default(),
            clocks: StoreClocks::default(),
            held: ShadowLines::default(),
            lines: 0,
            count: 0,
            unordered: 0,
        }
    }

    /// Whether any store is held (everything else here is skipped while none is).
    pub(crate) fn any(&self) -> bool {
        self.lines != 0
    }

    /// Holds bytes `mask` of `line`, stored by `writer` (the pass calls it `id`), persisted now
    /// before they were published. Returns false when the store is not held and goes at once:
    /// under HawkSet's rule, and while one thread lives (nothing can publish it before it
    /// inherits the writer's clock: a thread created later happens after the persist).
    pub(crate) fn hold(&mut self, writer: u32, line: u64, mask: u64, id: u32, live: u32) -> bool {
        if !self.on || live <= 1 {
            return false;
        }
        let epoch = self.causal.advance(writer);
        self.count += 1;
        let list = self.held.get_mut(line);
        if list.is_empty() {
            self.lines += 1;
        }
        // The same store held again: the later epoch decides (an access after the later persist
        // is after the earlier one too).
        match list.iter_mut().find(|(m, i, _)| *m == mask && *i == id) {
            Some((_, _, e)) => *e = epoch,
            None => list.push((mask, id, epoch)),
        }
        true
    }

    /// `tid`'s access published bytes `published` of `line`. Each held store there with some of
    /// those bytes is decided, and `(id, bytes, unordered)` appended to `out`: its published bytes
    /// and whether the access is not ordered after its persist (then it was never
    /// initialisation). `writer(id)` names a held store's writer.
    pub(crate) fn publish(
        &mut self,
        tid: u32,
        line: u64,
        published: u64,
        writer: impl Fn(u32) -> u32,
        out: &mut Vec<(u32, u64, bool)>,
    ) {
        if published == 0 || self.lines == 0 {
            return;
        }
        let Some(list) = self.held.get_mut_if(line) else { return };
        if list.is_empty() {
            return;
        }
        let mut list = std::mem::take(list);
        for (mask, id, epoch) in list.iter_mut() {
            let part = *mask & published;
            if part == 0 {
                continue;
            }
            *mask &= !part;
            let w = writer(*id);
            let unordered = w != tid && self.causal.knows(tid, w) < *epoch;
            self.unordered += u64::from(unordered);
            out.push((*id, part, unordered));
        }
        list.retain(|(mask, _, _)| *mask != 0);
        if list.is_empty() {
            self.lines -= 1;
        } else {
            *self.held.get_mut(line) = list;
        }
    }

    /// Forgets held store `id` on `line` (the pass dropped it for a reason of its own).
    pub(crate) fn forget(&mut self, line: u64, id: u32) {
        if self.lines == 0 {
            return;
        }
        let Some(list) = self.held.get_mut_if(line) else { return };
        let before = list.len();
        list.retain(|(_, i, _)| *i != id);
        if before != 0 && list.is_empty() {
            self.lines -= 1;
        }
    }

    /// Forgets the held stores' bytes `mask` of `line` (their memory was freed: they were
    /// initialisation of an object nobody else touched in its life).
    pub(crate) fn forget_bytes(&mut self, line: u64, mask: u64) {
        if self.lines == 0 {
            return;
        }
        let Some(list) = self.held.get_mut_if(line) else { return };
        let before = list.len();
        for (m, _, _) in list.iter_mut() {
            *m &= !mask;
        }
        list.retain(|(m, _, _)| *m != 0);
        if before != 0 && list.is_empty() {
            self.lines -= 1;
        }
    }

    /// `tid` stored bytes `mask` of `line`. Only a store made while stores are held is worth
    /// keeping: a held store's epoch is taken at its persist, and a store made before any is
    /// held cannot carry it.
    pub(crate) fn stored(&mut self, tid: u32, line: u64, mask: u64) {
        if self.lines == 0 {
            return;
        }
        let HeldStores { causal, last_store, clocks, .. } = self;
        note_store(causal, last_store, clocks, tid, line, mask);
    }

    /// `tid` loaded bytes `mask` of `line`: it acquires the clocks of the stores it reads (x86
    /// loads acquire, stores release), a reads-from edge from each of them.
    pub(crate) fn loaded(&mut self, tid: u32, line: u64, mask: u64) {
        if self.lines == 0 {
            return;
        }
        let HeldStores { causal, last_store, clocks, .. } = self;
        read_stores(causal, last_store, clocks, tid, line, mask);
    }

    /// A C++ atomic's access in DRAM ([`emu::events::EventKind::AtomicAccess`]), through
    /// `sync`'s translation (a store posts its word, a load waits for it): an edge of this causal
    /// order only. As a window end or an edge of a pass's race check it would let incidental
    /// atomics (an epoch counter, a statistics word) order the run and hide races other
    /// schedules show (with them `vardalith` lost P-ART's published bugs); for publication it is
    /// what a lock's release and acquisition are.
    pub(crate) fn order_atomic(&mut self, sync: &mut SyncAdapter, ev: &emu::events::Event, live: u32) {
        sync.translate(ev, |op| self.order(ev.tid, op, live));
    }

    /// The edge `op` of `tid` makes in the causal clocks, with `live` threads alive. While one
    /// thread lives no release or post of it can matter: every later thread is created after it,
    /// and inherits its clock. (An acquire or a wait can: it may learn what a thread that has
    /// exited did.)
    ///
    /// While no store is held no edge can matter either: a held store's epoch is taken fresh
    /// (`advance`) at its persist, so only what flows after it can reach it, and a thread that
    /// learns nothing before then loses nothing.
    pub(crate) fn order(&mut self, tid: u32, op: SyncOp, live: u32) {
        if !self.on || self.lines == 0 {
            return;
        }
        match op {
            SyncOp::Create { .. } | SyncOp::Join { .. } | SyncOp::Exit => self.causal.apply(tid, op),
            // The PMDK pseudo-lock is every libpmemobj lock at once: as an edge it would order
            // unrelated critical sections.
            SyncOp::Acquire { lock, .. } | SyncOp::Release { lock } if lock == PMDK_PSEUDO_LOCK => {}
            SyncOp::Acquire { .. } | SyncOp::Wait { .. } => self.causal.apply(tid, op),
            SyncOp::Release { .. } | SyncOp::Post { .. } if live > 1 => self.causal.apply(tid, op),
            _ => {}
        }
    }
}

/// `tid` stored bytes `mask` of `line`: they remember it and a copy of its clock in `causal`
/// now (shared by its stores until its clock changes).
fn note_store(
    causal: &mut HappensBefore,
    last_store: &mut ShadowLines<LastStores>,
    clocks: &mut StoreClocks,
    tid: u32,
    line: u64,
    mask: u64,
) {
    let id = clocks.of(tid, causal);
    let list = last_store.get_mut(line);
    let mut gone: SmallVec<[u32; 2]> = SmallVec::new();
    let mut mine = false;
    for e in list.iter_mut() {
        if e.2 == id {
            e.0 |= mask;
            mine = true;
        } else if e.0 & mask != 0 {
            e.0 &= !mask;
            if e.0 == 0 {
                gone.push(e.2);
            }
        }
    }
    list.retain(|e| e.0 != 0);
    if !mine {
        list.push((mask, tid, id));
        clocks.clocks[id as usize].1 += 1;
    }
    for g in gone {
        clocks.unref(g, 1);
    }
}

/// `tid` loaded bytes `mask` of `line`: it acquires in `causal` the clocks of the other threads'
/// stores it reads (x86 loads acquire, stores release). Returns whether it joined any.
fn read_stores(
    causal: &mut HappensBefore,
    last_store: &ShadowLines<LastStores>,
    clocks: &mut StoreClocks,
    tid: u32,
    line: u64,
    mask: u64,
) -> bool {
    let Some(list) = last_store.get(line) else { return false };
    let mut bit = None;
    let mut any = false;
    for e in list.iter().filter(|e| e.0 & mask != 0 && e.1 != tid) {
        let b = *bit.get_or_insert_with(|| 1u64.checked_shl(causal.slot(tid) as u32).unwrap_or(0));
        let joined = &mut clocks.joined[e.2 as usize];
        if *joined & b != 0 {
            continue;
        }
        causal.acquire_clock(tid, &clocks.clocks[e.2 as usize].0);
        *joined |= b;
        any = true;
    }
    any
}

/// Reads-from edges for hawkset's race check (`reads_from=on`): vector clocks with create and
/// join (and, with `edges=sync`, post/wait) edges and an edge from every PM store to the loads
/// of other threads that read it (from the store of the bytes read, carrying the storing
/// thread's whole clock: transitive). A thread's own component advances at the end of each of
/// its store windows ([`ReadsFrom::window_end`]) when it stored since the last advance, so a
/// load that read a store made inside a window knows an epoch below the window's end, and one
/// that read a store made after it (the pointer published after a node's persist) knows the
/// end's epoch or a later one. Locks make no edge: lock protection is the lockset's business,
/// and an order a lock happened to take in this run is no order in another schedule.
#[derive(Clone, Debug)]
pub(crate) struct ReadsFrom {
    clocks: HappensBefore,
    last_store: ShadowLines<LastStores>,
    copies: StoreClocks,
    /// Threads that stored since their epoch last advanced.
    stored: rustc_hash::FxHashSet<u32>,
}

impl ReadsFrom {
    /// With post/wait edges when `objects`.
    pub(crate) fn new(objects: bool) -> ReadsFrom {
        ReadsFrom {
            clocks: HappensBefore::new(Edges { create_join: true, objects, locks: false }),
            last_store: ShadowLines::default(),
            copies: StoreClocks::default(),
            stored: rustc_hash::FxHashSet::default(),
        }
    }

    /// `tid` stored bytes `mask` of `line`.
    pub(crate) fn stored(&mut self, tid: u32, line: u64, mask: u64) {
        let ReadsFrom { clocks, last_store, copies, stored } = self;
        note_store(clocks, last_store, copies, tid, line, mask);
        stored.insert(tid);
    }

    /// `tid` loaded bytes `mask` of `line`; whether its clock may have changed.
    pub(crate) fn loaded(&mut self, tid: u32, line: u64, mask: u64) -> bool {
        let ReadsFrom { clocks, last_store, copies, .. } = self;
        read_stores(clocks, last_store, copies, tid, line, mask)
    }

    /// A window of `tid`'s store ends now: its epoch, advanced first if it stored since.
    pub(crate) fn window_end(&mut self, tid: u32) -> u32 {
        if self.stored.remove(&tid) {
            self.clocks.advance(tid)
        } else {
            self.clocks.own(tid)
        }
    }

    /// The thread's own epoch now.
    pub(crate) fn own(&mut self, tid: u32) -> u32 {
        self.clocks.own(tid)
    }

    /// How much of thread `of`'s time thread `tid` knows now.
    pub(crate) fn knows(&mut self, tid: u32, of: u32) -> u32 {
        self.clocks.knows(tid, of)
    }

    /// The thread's clock now, dense by slot.
    pub(crate) fn clock(&mut self, tid: u32) -> Vec<u32> {
        self.clocks.clock(tid).0
    }

    /// The dense slot of `tid` in the clocks.
    pub(crate) fn slot(&mut self, tid: u32) -> usize {
        self.clocks.slot(tid)
    }

    /// The edge `op` of `tid` makes (create, join, exit; post and wait with `objects`).
    pub(crate) fn apply(&mut self, tid: u32, op: SyncOp) {
        match op {
            SyncOp::Create { .. } | SyncOp::Join { .. } | SyncOp::Exit | SyncOp::Post { .. } | SyncOp::Wait { .. } => {
                self.clocks.apply(tid, op)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HeldStores, IrhOrder, Publication};

    #[test]
    fn bytes_are_published_by_the_threshold_plus_one_th_thread() {
        let mut p = Publication::new(1, IrhOrder::Observed);
        assert_eq!(p.touch(1, 3, 0xff), 0);
        assert_eq!(p.touch(1, 3, 0xff00), 0, "one thread's own bytes stay unpublished");
        assert_eq!(p.touch(2, 3, 0xf0f0), 0xf0f0);
        assert_eq!(p.published(3, u64::MAX), 0xf0f0);
        assert_eq!(p.touch(3, 3, 0xff), 0x0f, "thread 1 touched them: thread 3 is the second");
        assert_eq!(p.touch(2, 3, 0x0f00), 0x0f00);
        assert_eq!(p.published(3, u64::MAX), 0xffff);
        // A second thread moves the line to a side entry, which keeps every thread's bytes.
        let mut p = Publication::new(2, IrhOrder::Observed);
        for t in 1..=2 {
            assert_eq!(p.touch(t, 9, 0xff), 0);
        }
        assert_eq!(p.shared.len(), 1);
        assert_eq!(p.touch(3, 9, 0x01), 0x01);
        assert_eq!(p.touch(3, 9, 0xfe), 0xfe);
        assert_eq!(p.published(9, u64::MAX), 0xff);
        assert_eq!(p.touch(1, 9, 0xff), 0, "published bytes stay so");
        assert_eq!(p.touch(4, 10, 0x1), 0);
        assert_eq!(p.touch(4, 10, 0x2), 0);
        assert_eq!(p.shared.len(), 1, "one thread's line stays inline");
        assert_eq!(p.published(10, u64::MAX), 0);
        assert_eq!(std::mem::size_of::<super::IrhLine>(), 12);
        assert_eq!(Publication::new(0, IrhOrder::Causal).touch(1, 1, 1), 0);
    }
    use crate::sync::{Mode, SyncOp};

    #[test]
    fn the_first_threads_accesses_before_a_creation_publish_nothing() {
        let mut p = Publication::new(1, IrhOrder::Causal);
        assert_eq!(p.touch(1, 3, 0xff), 0);
        assert_eq!(p.created(), Some(1), "the solo phase ends at the first creation");
        assert_eq!(p.created(), None);
        assert_eq!(p.touch(2, 3, 0xff), 0, "main's formatting is not a touch");
        assert_eq!(p.touch(1, 3, 0x0f), 0x0f, "main's access after the creation is");
        // A second thread seen without a creation (another process) ends it too.
        let mut p = Publication::new(1, IrhOrder::Causal);
        assert_eq!(p.touch(1, 3, 0xff), 0);
        assert_eq!(p.touch(2, 3, 0xff), 0);
        assert_eq!(p.touch(1, 3, 0xff), 0xff);
        // HawkSet's rule counts every thread.
        let mut p = Publication::new(1, IrhOrder::Observed);
        assert_eq!(p.touch(1, 3, 0xff), 0);
        assert_eq!(p.created(), None);
        assert_eq!(p.touch(2, 3, 0xff), 0xff);
    }

    /// A store held at its persist, published by a thread that did or did not acquire the lock its
    /// writer released after the persist.
    fn published_after(relock: bool) -> Vec<(u32, u64, bool)> {
        let (writer, reader, lock) = (1, 2, 0x1000);
        let mut h = HeldStores::new(true);
        h.order(writer, SyncOp::Create { child: reader }, 2);
        assert!(h.hold(writer, 7, 0xff, 42, 2));
        h.order(writer, SyncOp::Release { lock }, 2);
        if relock {
            h.order(reader, SyncOp::Acquire { lock, mode: Mode::Exclusive }, 2);
        }
        let mut out = Vec::new();
        h.publish(reader, 7, 0x0f, |_| writer, &mut out);
        assert!(h.any(), "bytes not yet published stay held");
        h.publish(reader, 7, 0xf0, |_| writer, &mut out);
        assert!(!h.any());
        out
    }

    #[test]
    fn a_persist_ordered_before_the_publication_was_initialisation() {
        assert_eq!(published_after(true), [(42, 0x0f, false), (42, 0xf0, false)]);
    }

    #[test]
    fn a_publication_unordered_with_the_persist_is_a_store_like_any_other() {
        assert_eq!(published_after(false), [(42, 0x0f, true), (42, 0xf0, true)]);
    }

    #[test]
    fn a_reads_from_edge_orders_a_lock_free_publication() {
        let (writer, reader) = (1, 2);
        let mut h = HeldStores::new(true);
        h.order(writer, SyncOp::Create { child: reader }, 2);
        assert!(h.hold(writer, 7, 0xff, 42, 2));
        h.stored(writer, 9, 0xff); // the pointer to the node, stored after the node's persist
        h.loaded(reader, 9, 0xff);
        let mut out = Vec::new();
        h.publish(reader, 7, 0xff, |_| writer, &mut out);
        assert_eq!(out, [(42, 0xff, false)]);
    }

    /// The reader loads the bytes the writer stored, though a third thread stored other bytes
    /// of the line since: the edge is from the writer.
    #[test]
    fn a_reads_from_edge_is_from_the_store_of_the_bytes_read() {
        let (writer, other, reader) = (1, 3, 2);
        for (read, ordered) in [(0xff, true), (0xff00, false)] {
            let mut h = HeldStores::new(true);
            h.order(writer, SyncOp::Create { child: reader }, 3);
            assert!(h.hold(writer, 7, 0xff, 42, 3));
            h.stored(writer, 9, 0xff);
            h.stored(other, 9, 0xff00);
            h.loaded(reader, 9, read);
            let mut out = Vec::new();
            h.publish(reader, 7, 0xff, |_| writer, &mut out);
            assert_eq!(out, [(42, 0xff, !ordered)], "read {read:#x}");
        }
    }

    /// A relay: a second thread reads the writer's pointer and stores one of its own, which the
    /// reader loads: the reader learns what the relay had learnt from the writer.
    #[test]
    fn a_reads_from_edge_carries_the_storing_threads_whole_clock() {
        let (writer, relay, reader) = (1, 3, 2);
        let mut h = HeldStores::new(true);
        assert!(h.hold(writer, 7, 0xff, 42, 3));
        h.stored(writer, 9, 0xff);
        h.loaded(relay, 9, 0xff);
        h.stored(relay, 11, 0xff);
        h.stored(writer, 9, 0xff); // the writer's later stores change nothing the relay sent
        h.loaded(reader, 11, 0xff);
        let mut out = Vec::new();
        h.publish(reader, 7, 0xff, |_| writer, &mut out);
        assert_eq!(out, [(42, 0xff, false)]);
        // The copies of clocks are reused once no byte names them.
        assert!(h.clocks.clocks.len() <= 4, "{} copies", h.clocks.clocks.len());
    }

    #[test]
    fn nothing_is_held_under_hawksets_rule_or_with_one_thread() {
        assert!(!HeldStores::new(false).hold(1, 7, 0xff, 42, 2));
        assert!(!HeldStores::new(true).hold(1, 7, 0xff, 42, 1));
    }
}
