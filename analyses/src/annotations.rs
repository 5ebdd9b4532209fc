//! What a program declares about its PM through Valgrind's client requests, as pmemcheck would
//! keep it, in device addresses, for the passes that honour it.
//!
//! PMDK built with Valgrind support tells pmemcheck which PM it leaves unpersisted on purpose
//! ([`emu::client`] answers it so that it does, and the machine turns the requests into
//! events). Two declarations decide whether pmemcheck reports a store as "not made persistent":
//!
//! - **Clean** ([`EventKind::SetClean`], `VALGRIND_PMC_SET_CLEAN`): pmemcheck drops the
//!   stores it holds for those bytes. Stores made there *before* the declaration are no
//!   durability problem; later ones are judged afresh. Kept as disjoint ranges, each with the
//!   store-id bound of its latest declaration (store ids grow with time, so "before" is "id
//!   below the bound").
//! - **Withdrawn** ([`EventKind::PmRegister`] then [`EventKind::PmUnregister`],
//!   `REGISTER_PMEM_MAPPING`/`REMOVE_PMEM_MAPPING`): pmemcheck tracks a store only if it
//!   overlaps a registered mapping, so stores to bytes the program registered and then removed
//!   are never tracked while they stay removed. PMDK removes its pool's run-time state this way
//!   (lock words, the run-time fields of the pool header). Here a store is withdrawn if it
//!   lies wholly in bytes that were registered once and overlaps none registered now: PM the
//!   program never registered stays checked, because what is PM is decided by the PM mount
//!   (pmemcheck would not check it at all).
//!
//! Transactions (`START_TX`, `ADD_TO_TX`, ...) never excuse a store from being persisted (PMDK
//! flushes a transaction's ranges at commit, with instructions ferrite sees); pmemcheck uses
//! them only for its transaction check, kept here as [`Transactions`].

use std::collections::{BTreeMap, BTreeSet};

use emu::events::{Event, EventKind};
use emu::pm::{DurabilityRule, PmDevice, UnpersistedStore};

/// Disjoint, non-adjacent `[start, end)` ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    fn insert(&mut self, mut lo: u64, mut hi: u64) {
        if lo >= hi {
            return;
        }
        // Merge with every range overlapping or touching [lo, hi).
        while let Some((&s, &e)) = self.0.range(..=hi).next_back().filter(|(_, &e)| e >= lo) {
            self.0.remove(&s);
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.0.insert(lo, hi);
    }

    fn remove(&mut self, lo: u64, hi: u64) {
        while let Some((&s, &e)) = self.0.range(..hi).next_back().filter(|(_, &e)| e > lo) {
            self.0.remove(&s);
            if s < lo {
                self.0.insert(s, lo);
            }
            if e > hi {
                self.0.insert(hi, e);
            }
            if s < lo {
                break;
            }
        }
    }

    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        self.0.range(..hi).next_back().is_some_and(|(_, &e)| e > lo)
    }

    fn covers(&self, lo: u64, hi: u64) -> bool {
        self.0.range(..=lo).next_back().is_some_and(|(_, &e)| e >= hi)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a race pass does with an event, given the program's declarations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// Not a declaration, and not an access to withdrawn PM: the pass handles it.
    Keep,
    /// An access to PM the program withdrew from checking (PMDK's run-time state): not PM for
    /// the pass.
    Withdrawn,
    /// The program declared the event's bytes clean: the pass ends its store windows there.
    Clean,
}

/// The program's declarations so far. Feed it every PM store and every `SetClean`,
/// `PmRegister` and `PmUnregister` event ([`Annotations::on_event`]).
#[derive(Clone, Debug, Default)]
pub struct Annotations {
    /// The highest store id seen.
    last_store: u64,
    /// Declared-clean ranges: start → (end, bound): stores there with an id below `bound`
    /// are clean. Disjoint.
    clean: BTreeMap<u64, (u64, u64)>,
    /// Ranges registered now.
    registered: Ranges,
    /// Ranges registered at some point.
    ever: Ranges,
    /// Accesses [`Annotations::screen`] found withdrawn (a race pass's `withdrawn_accesses`).
    pub withdrawn_accesses: u64,
}

impl Annotations {
    /// Takes a declaration, or notes a store's id. Events outside PM (`dev == 0`) are ignored.
    pub fn on_event(&mut self, ev: &Event) {
        let (lo, hi) = (ev.dev, ev.dev.saturating_add(u64::from(ev.size)));
        match ev.kind {
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore => {
                if let Some(id) = ev.store {
                    self.last_store = self.last_store.max(id.0);
                }
            }
            _ if ev.dev == 0 => {}
            EventKind::SetClean => self.set_clean(lo, hi, self.last_store + 1),
            EventKind::PmRegister => {
                self.registered.insert(lo, hi);
                self.ever.insert(lo, hi);
            }
            EventKind::PmUnregister => self.registered.remove(lo, hi),
            _ => {}
        }
    }

    /// For the race passes (`annotations=on`): takes `ev` and says what the pass does with it.
    pub fn screen(&mut self, ev: &Event) -> Screen {
        self.on_event(ev);
        match ev.kind {
            _ if ev.dev == 0 => Screen::Keep,
            EventKind::SetClean => Screen::Clean,
            EventKind::Load | EventKind::Store | EventKind::RmwStore | EventKind::NtStore
                if self.withdrawn(ev.dev, ev.size) =>
            {
                self.withdrawn_accesses += 1;
                Screen::Withdrawn
            }
            _ => Screen::Keep,
        }
    }

    /// Whether a store of `size` bytes at device address `dev`, made now, is withdrawn from
    /// checking (pmemcheck would not track it).
    pub fn withdrawn(&self, dev: u64, size: u32) -> bool {
        let hi = dev.saturating_add(u64::from(size.max(1)));
        !self.ever.is_empty() && self.ever.covers(dev, hi) && !self.registered.overlaps(dev, hi)
    }

    /// Whether a store of `size` bytes at device address `dev` overlaps PM registered for
    /// checking now (pmemcheck's `is_pmem_access`).
    pub fn registered_now(&self, dev: u64, size: u32) -> bool {
        self.registered.overlaps(dev, dev.saturating_add(u64::from(size.max(1))))
    }

    /// Whether the device address `dev` lies in PM the program registered for checking at
    /// some point.
    pub fn registered_once(&self, dev: u64) -> bool {
        dev != 0 && self.ever.covers(dev, dev + 1)
    }

    /// Whether the program has registered any PM through the protocol: it is annotated for
    /// pmemcheck (every libpmem and libpmemobj mapping is registered).
    pub fn speaks_pmemcheck(&self) -> bool {
        !self.ever.is_empty()
    }

    /// Whether every byte of the unpersisted store `u` that is still its own and not durable
    /// by `rule` was declared clean after the store.
    pub fn is_clean(&self, u: &UnpersistedStore, device: &PmDevice, rule: DurabilityRule) -> bool {
        if self.clean.is_empty() {
            return false;
        }
        let (lo, hi) = (u.addr, u.addr.saturating_add(u.len));
        // The parts of [lo, hi) declared clean after the store, in order.
        let first = self.clean.range(..=lo).next_back().map_or(lo, |(&s, _)| s);
        let parts: Vec<(u64, u64)> = self
            .clean
            .range(first..hi)
            .filter(|(_, &(e, bound))| e > lo && bound > u.store.0)
            .map(|(&s, &(e, _))| (s.max(lo), e.min(hi)))
            .collect();
        let covered: u64 = parts.iter().map(|(s, e)| e - s).sum();
        if covered == 0 {
            return false;
        }
        if covered == hi - lo {
            return true;
        }
        // Partly covered: look at the bytes outside the clean parts that are still this
        // store's and not durable.
        let mut at = lo;
        for (s, e) in parts.iter().copied().chain(std::iter::once((hi, hi))) {
            for b in at..s {
                if let Some(info) = device.persist_info(b) {
                    let durable = match rule {
                        DurabilityRule::Hw => info.durable_hw,
                        DurabilityRule::Own => info.durable_own,
                    };
                    if info.store == u.store && !durable {
                        return false;
                    }
                }
            }
            at = e;
        }
        true
    }

    fn set_clean(&mut self, lo: u64, hi: u64, bound: u64) {
        if lo >= hi {
            return;
        }
        // Cut what overlaps [lo, hi) out of the older declarations, then add this one.
        let overlapping: Vec<(u64, (u64, u64))> =
            self.clean.range(..hi).rev().take_while(|(_, &(e, _))| e > lo).map(|(&s, &v)| (s, v)).collect();
        for (s, (e, b)) in overlapping {
            self.clean.remove(&s);
            if s < lo {
                self.clean.insert(s, (lo, b));
            }
            if e > hi {
                self.clean.insert(hi, (e, b));
            }
        }
        self.clean.insert(lo, (hi, bound));
    }
}

/// A `[start, end)` range; empty when `start == end`.
type Range = (u64, u64);

/// One running transaction, as pmemcheck's `tx_info`: a nesting counter and the ranges added
/// to it, the latest one kept apart (pmemcheck's one-range cache, whose quirks decide what a
/// `REMOVE_FROM_TX` takes away).
#[derive(Clone, Debug, Default)]
struct Tx {
    nesting: u32,
    regions: Ranges,
    cached: Option<Range>,
}

/// pmemcheck's `check_overlap(lhs, rhs)`: 0 if they do not overlap, 1 if `lhs` lies within
/// `rhs`, 2 otherwise.
fn check_overlap(lhs: Range, rhs: Range) -> u8 {
    if lhs.1 <= rhs.0 || lhs.0 >= rhs.1 {
        0
    } else if lhs.0 < rhs.0 || lhs.1 > rhs.1 {
        2
    } else {
        1
    }
}

impl Tx {
    fn flush_cache(&mut self) {
        if let Some((lo, hi)) = self.cached.take() {
            self.regions.insert(lo, hi);
        }
    }

    /// pmemcheck's `add_obj_to_tx`.
    fn add(&mut self, reg: Range) {
        if let Some(c) = self.cached {
            match check_overlap(c, reg) {
                0 => self.flush_cache(),
                2 => {
                    self.flush_cache();
                    self.regions.remove(reg.0, reg.1);
                }
                // The new range contains the cached one.
                _ => {}
            }
        }
        self.cached = (reg.0 < reg.1).then_some(reg);
    }

    /// pmemcheck's `remove_obj_from_tx`: the cached range itself is forgotten; a range
    /// overlapping it moves the cached one to the others first (where it is cut) but leaves it
    /// cached too.
    fn remove(&mut self, reg: Range) {
        if self.cached == Some(reg) {
            self.cached = None;
            return;
        }
        if let Some(c) = self.cached.filter(|&c| check_overlap(reg, c) != 0) {
            self.regions.insert(c.0, c.1);
        }
        self.regions.remove(reg.0, reg.1);
    }

    /// pmemcheck's `is_store_in_tx`: wholly within the cached range or within one range.
    fn covers(&mut self, st: Range) -> bool {
        if self.cached.is_some_and(|c| check_overlap(st, c) == 1) {
            return true;
        }
        self.flush_cache();
        self.regions.covers(st.0, st.1)
    }
}

/// pmemcheck's transaction check ("stores made without adding to transactions"): while a thread
/// takes part in a transaction, each of its PM stores must lie wholly within a range added to
/// one of its transactions, or wholly within the ranges excluded for the whole run
/// (`ADD_TO_GLOBAL_TX_IGNORE`). Feed it the `Tx*` events ([`Transactions::on_event`]) and ask
/// about each store ([`Transactions::outside`]).
///
/// As in pmemcheck, a transaction is named by an id: `START_TX` (PMDK's) uses the running
/// thread's id, the `_N` forms the program's (one namespace, as pmemcheck has); a thread takes
/// part in every transaction it began until the transaction's outermost end, and a range added
/// by a thread that takes no part in the transaction is ignored. Ranges are in device
/// addresses: only PM is checked, so pieces outside PM are dropped.
#[derive(Clone, Debug, Default)]
pub struct Transactions {
    txs: BTreeMap<u64, Tx>,
    /// The transactions each thread takes part in.
    threads: BTreeMap<u32, BTreeSet<u64>>,
    excluded: Ranges,
}

impl Transactions {
    fn id(ev: &Event) -> u64 {
        if ev.new == 0 {
            u64::from(ev.tid)
        } else {
            ev.new
        }
    }

    fn member(&mut self, ev: &Event) -> Option<&mut Tx> {
        let id = Transactions::id(ev);
        if !self.threads.get(&ev.tid).is_some_and(|s| s.contains(&id)) {
            return None;
        }
        self.txs.get_mut(&id)
    }

    /// Takes a `TxBegin`, `TxEnd`, `TxAdd`, `TxRemove` or `TxIgnore` event; ignores the rest.
    pub fn on_event(&mut self, ev: &Event) {
        let reg = (ev.dev, ev.dev.saturating_add(u64::from(ev.size)));
        match ev.kind {
            EventKind::TxBegin => {
                let id = Transactions::id(ev);
                self.txs.entry(id).or_default().nesting += 1;
                self.threads.entry(ev.tid).or_default().insert(id);
            }
            EventKind::TxEnd => {
                let id = Transactions::id(ev);
                let Some(tx) = self.txs.get_mut(&id) else { return };
                tx.nesting = tx.nesting.saturating_sub(1);
                if tx.nesting == 0 {
                    self.txs.remove(&id);
                    self.threads.retain(|_, s| {
                        s.remove(&id);
                        !s.is_empty()
                    });
                }
            }
            _ if ev.dev == 0 => {}
            EventKind::TxAdd => {
                if let Some(tx) = self.member(ev) {
                    tx.add(reg);
                }
            }
            EventKind::TxRemove => {
                if let Some(tx) = self.member(ev) {
                    tx.remove(reg);
                }
            }
            EventKind::TxIgnore => self.excluded.insert(reg.0, reg.1),
            _ => {}
        }
    }

    /// Whether the thread `tid` takes part in a transaction now.
    pub fn in_transaction(&self, tid: u32) -> bool {
        self.threads.contains_key(&tid)
    }

    /// Whether a PM store by `tid` of `size` bytes at device address `dev`, made now, is made
    /// inside a transaction but outside every range added to the thread's transactions and
    /// outside the excluded ranges (pmemcheck's "store made without adding to transaction").
    pub fn outside(&mut self, tid: u32, dev: u64, size: u32) -> bool {
        let st = (dev, dev.saturating_add(u64::from(size.max(1))));
        let Some(ids) = self.threads.get(&tid) else { return false };
        if self.excluded.covers(st.0, st.1) {
            return false;
        }
        let txs = &mut self.txs;
        !ids.iter().any(|id| txs.get_mut(id).is_some_and(|tx| tx.covers(st)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu::callstack::StackId;
    use emu::pm::{StoreId, StoreKind};

    fn ev(kind: EventKind, dev: u64, size: u32, store: Option<u64>) -> Event {
        Event {
            kind,
            tid: 1,
            pc: 0,
            addr: dev,
            dev,
            size,
            old: 0,
            new: 0,
            stack: StackId(0),
            icount: 0,
            store: store.map(StoreId),
            flush: None,
            fence: None,
        }
    }

    const BASE: u64 = 1 << 40;

    #[test]
    fn ranges_merge_split_and_answer() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(20, 30);
        r.insert(40, 50);
        assert_eq!(r.0.len(), 2);
        assert!(r.covers(12, 30) && !r.covers(12, 31));
        r.remove(15, 45);
        assert_eq!(r.0.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(), vec![(10, 15), (45, 50)]);
        assert!(r.overlaps(14, 16) && !r.overlaps(15, 45));
    }

    #[test]
    fn withdrawn_means_registered_once_and_removed_now() {
        let mut a = Annotations::default();
        assert!(!a.withdrawn(BASE, 8), "nothing registered: everything is checked");
        a.on_event(&ev(EventKind::PmRegister, BASE, 4096, None));
        a.on_event(&ev(EventKind::PmUnregister, BASE + 64, 64, None));
        assert!(a.withdrawn(BASE + 64, 8));
        assert!(!a.withdrawn(BASE + 60, 8), "overlaps a registered byte");
        assert!(!a.withdrawn(BASE + 8192, 8), "never registered: still PM");
        a.on_event(&ev(EventKind::PmRegister, BASE + 64, 64, None));
        assert!(!a.withdrawn(BASE + 64, 8));
    }

    #[test]
    fn clean_covers_only_earlier_stores() {
        let mut dev = PmDevice::default();
        let mut a = Annotations::default();
        let store = |dev: &mut PmDevice, a: &mut Annotations, at: u64| {
            let id = dev.store(1, at, &[0; 8], &[1; 8], StoreKind::Cached, |_| [0; 64]);
            a.on_event(&ev(EventKind::Store, at, 8, Some(id.0)));
        };
        store(&mut dev, &mut a, BASE);
        store(&mut dev, &mut a, BASE + 64);
        a.on_event(&ev(EventKind::SetClean, BASE, 128, None));
        store(&mut dev, &mut a, BASE + 128);
        // A store after the declaration, to a byte it covered.
        a.on_event(&ev(EventKind::SetClean, BASE + 128, 8, None));
        store(&mut dev, &mut a, BASE + 64);
        let rule = DurabilityRule::Hw;
        let un = dev.unpersisted(rule);
        let clean: Vec<(u64, bool)> = un.iter().map(|u| (u.addr - BASE, a.is_clean(u, &dev, rule))).collect();
        assert_eq!(clean, vec![(0, true), (128, true), (64, false)]);
    }

    fn tx(kind: EventKind, tid: u32, dev: u64, size: u32, txn: u64) -> Event {
        Event { tid, new: txn, ..ev(kind, dev, size, None) }
    }

    #[test]
    fn stores_inside_a_transaction_must_be_added_to_it() {
        let mut t = Transactions::default();
        assert!(!t.outside(1, BASE, 8), "no transaction: nothing to check");
        t.on_event(&tx(EventKind::TxBegin, 1, 0, 0, 0));
        assert!(t.in_transaction(1) && !t.in_transaction(2));
        t.on_event(&tx(EventKind::TxAdd, 1, BASE, 8, 0));
        assert!(!t.outside(1, BASE, 8));
        assert!(t.outside(1, BASE + 8, 8), "the next field was not added");
        assert!(t.outside(1, BASE + 4, 8), "only partly added");
        assert!(!t.outside(2, BASE + 8, 8), "thread 2 takes no part in the transaction");
        // Adjacent ranges merge: a store across both is inside.
        t.on_event(&tx(EventKind::TxAdd, 1, BASE + 8, 8, 0));
        assert!(!t.outside(1, BASE + 4, 8));
        // Nested: the inner end keeps the transaction.
        t.on_event(&tx(EventKind::TxBegin, 1, 0, 0, 0));
        t.on_event(&tx(EventKind::TxEnd, 1, 0, 0, 0));
        assert!(t.in_transaction(1) && !t.outside(1, BASE, 16));
        t.on_event(&tx(EventKind::TxEnd, 1, 0, 0, 0));
        assert!(!t.in_transaction(1) && !t.outside(1, BASE + 64, 8));
        // A new transaction starts with nothing added.
        t.on_event(&tx(EventKind::TxBegin, 1, 0, 0, 0));
        assert!(t.outside(1, BASE, 8));
    }

    #[test]
    fn removed_ranges_and_global_excludes() {
        let mut t = Transactions::default();
        t.on_event(&tx(EventKind::TxBegin, 1, 0, 0, 0));
        t.on_event(&tx(EventKind::TxAdd, 1, BASE, 64, 0));
        t.on_event(&tx(EventKind::TxRemove, 1, BASE, 64, 0));
        assert!(t.outside(1, BASE, 8), "the cached range removed exactly");
        t.on_event(&tx(EventKind::TxAdd, 1, BASE, 64, 0));
        t.on_event(&tx(EventKind::TxAdd, 1, BASE + 128, 64, 0));
        t.on_event(&tx(EventKind::TxRemove, 1, BASE + 16, 16, 0));
        assert!(t.outside(1, BASE + 16, 8) && !t.outside(1, BASE, 16) && !t.outside(1, BASE + 32, 8));
        assert!(!t.outside(1, BASE + 128, 8));
        // Outside PM: ignored.
        t.on_event(&tx(EventKind::TxAdd, 1, 0, 64, 0));
        t.on_event(&tx(EventKind::TxIgnore, 1, BASE + 4096, 256, 0));
        assert!(!t.outside(1, BASE + 4096 + 8, 8));
        assert!(t.outside(1, BASE + 4096 + 252, 8), "partly excluded");
        assert!(!t.outside(2, BASE + 16, 8));
    }

    #[test]
    fn named_transactions_are_shared_by_the_threads_that_begin_them() {
        let mut t = Transactions::default();
        t.on_event(&tx(EventKind::TxBegin, 1, 0, 0, 7));
        t.on_event(&tx(EventKind::TxBegin, 2, 0, 0, 7));
        t.on_event(&tx(EventKind::TxAdd, 2, BASE, 8, 7));
        assert!(!t.outside(1, BASE, 8), "added by the other thread to the shared transaction");
        // A range added by a thread outside the transaction is ignored.
        t.on_event(&tx(EventKind::TxAdd, 3, BASE + 64, 8, 7));
        assert!(t.outside(1, BASE + 64, 8));
        t.on_event(&tx(EventKind::TxEnd, 1, 0, 0, 7));
        assert!(t.in_transaction(2), "one begin still open");
        t.on_event(&tx(EventKind::TxEnd, 2, 0, 0, 7));
        assert!(!t.in_transaction(1) && !t.in_transaction(2));
    }

    #[test]
    fn a_store_partly_declared_clean_is_judged_by_its_other_bytes() {
        let mut dev = PmDevice::default();
        let mut a = Annotations::default();
        let id = dev.store(1, BASE, &[0; 8], &[1; 8], StoreKind::Cached, |_| [0; 64]);
        a.on_event(&ev(EventKind::Store, BASE, 8, Some(id.0)));
        a.on_event(&ev(EventKind::SetClean, BASE, 4, None));
        let rule = DurabilityRule::Hw;
        let u = dev.unpersisted(rule)[0];
        assert!(!a.is_clean(&u, &dev, rule));
        // The other half overwritten by a later store that is itself declared clean.
        let id2 = dev.store(1, BASE + 4, &[1; 4], &[2; 4], StoreKind::Cached, |_| [0; 64]);
        a.on_event(&ev(EventKind::Store, BASE + 4, 4, Some(id2.0)));
        a.on_event(&ev(EventKind::SetClean, BASE + 4, 4, None));
        for u in dev.unpersisted(rule) {
            assert!(a.is_clean(&u, &dev, rule), "{u:?}");
        }
    }
}
