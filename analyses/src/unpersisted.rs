//! `unpersisted`: the persistence checks of pmemcheck (Valgrind's PM tool), as a baseline.
//!
//! # What it reports
//! - **unpersisted-store**: a store to PM that is still not durable when the program ends (no
//!   flush of its line followed by a fence, no msync, no `pwrite` over it). Durability is the
//!   hardware rule (`durable_hw`): any thread's flush and that thread's fence count; with
//!   `unpersisted:rule=own`, only the writer's own flush and fence (`durable_own`, the assumption
//!   of HawkSet and Vardalith). One finding per store site (PC and call stack).
//! - **flush-without-fence**: a `clwb`/`clflushopt` whose line is still only captured at the end
//!   (the flushing thread never fenced afterwards), at the flush.
//! - **nt-store-without-fence**: a non-temporal store still pending in a write-combining buffer
//!   at the end.
//! - **flush-clean-line**: a flush of a line that had nothing unpersisted (pmemcheck's
//!   "redundant flush"): wasted work, and often a sign that the flush was meant for another
//!   address.
//! - **redundant-fence**: an explicit `sfence`/`mfence` with nothing to order (no flush captured
//!   and no NT store pending for its thread). Locked instructions are fences too but are never
//!   reported: they are there for atomicity.
//!
//! - **store-outside-transaction**: pmemcheck's transaction check. A PM store made by the
//!   program's own code (not a library's: [`CodeInfo::is_library`]) while its thread is inside a
//!   transaction (`START_TX` .. `END_TX`, as PMDK announces `TX_BEGIN` .. `TX_END`), to bytes
//!   not wholly within a range added to the transaction (`ADD_TO_TX`, as `TX_ADD` and
//!   `pmemobj_tx_add_range` announce it, minus `REMOVE_FROM_TX`) nor within the ranges the
//!   program excluded from transaction checking (`ADD_TO_GLOBAL_TX_IGNORE`): the transaction
//!   cannot roll it back. Only PM the program registered is checked (pmemcheck tracks nothing
//!   else). One finding per store site, with the outermost `TX_BEGIN` as a second location.
//!   `unpersisted:tx=off` turns it off.
//!
//! Under `--persistency eadr` the flush and fence lints are not reported: every flush is redundant there by
//! design, and a program written for ADR machines rightly keeps them.
//!
//! # How
//! The device answers every question; the pass only remembers where things came from: the PC and
//! interned stack of each store that is not yet durable (pruned against the device so memory
//! follows what is unpersisted, not how many stores ran), and of the last flush per line.
//!
//! # What it can miss, and why it reports no false positives
//! It checks one execution: stores on paths not taken are not checked, and "durable at exit" says
//! nothing about the order in which things became durable (that is crash testing's question).
//! Every report is a fact about the device's exact model of this execution: a store reported as
//! unpersisted was not durable under the model when the program ended. Whether that is a bug
//! depends on whether recovery needs the data; a program that leaves scratch data unpersisted on
//! purpose will be reported, unless it says so through pmemcheck's client requests.
//!
//! # PMDK's annotations
//! A program annotated for pmemcheck (PMDK is: `emu::client`) is judged by pmemcheck's rules
//! ([`crate::annotations`]): a store it declared clean afterwards (`SET_CLEAN`), or made to PM
//! it registered and then withdrew from checking (`REMOVE_PMEM_MAPPING`: PMDK's lock words and
//! run-time pool fields), is not reported; on PM it registered, the flush and fence lints are
//! off (pmemcheck has no fence check and reports superfluous flushes only under
//! `--flush-check`) unless `unpersisted:lints=all`. These follow the program's word, as
//! pmemcheck does; crash testing does not.

use std::collections::BTreeMap;

use emu::callstack::StackId;
use emu::decode::FenceOp;
use emu::events::{Event, EventKind, Interest};
use emu::pm::{DurabilityRule, PmDevice};
use rustc_hash::FxHashMap;

use crate::annotations::{Annotations, Transactions};
use crate::group::{Described, Grouper};
use crate::{Analysis, CodeInfo, RawFinding, RawLocation};

type Site = (u64, StackId);

/// `unpersisted:rule=hw|own`: which durability predicate "persisted" means;
/// `unpersisted:lints=all|unannotated`: whether the flush and fence lints cover PM the program
/// registered through pmemcheck's client requests too (default: not, as pmemcheck);
/// `unpersisted:tx=on|off`: pmemcheck's transaction check (default on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Which durability predicate "persisted" means.
    pub rule: DurabilityRule,
    /// The flush and fence lints cover PM the program registered with pmemcheck too.
    pub annotated_lints: bool,
    /// pmemcheck's transaction check.
    pub tx_check: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { rule: DurabilityRule::Hw, annotated_lints: false, tx_check: true }
    }
}

impl Options {
    /// Parses `rule=hw|own:lints=all|unannotated:tx=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            match kv {
                "rule=hw" => o.rule = DurabilityRule::Hw,
                "rule=own" => o.rule = DurabilityRule::Own,
                "lints=all" => o.annotated_lints = true,
                "lints=unannotated" => o.annotated_lints = false,
                "tx=on" => o.tx_check = true,
                "tx=off" => o.tx_check = false,
                other => {
                    return Err(format!(
                        "unpersisted: unknown option `{other}` (rule=hw, rule=own, lints=all, lints=unannotated, tx=on or tx=off)"
                    ))
                }
            }
        }
        Ok(o)
    }
}

#[derive(Clone, Default)]
/// The `unpersisted` pass: stores never made durable, and the flush and fence lints.
pub struct Unpersisted {
    options: Options,
    /// Where each not-yet-durable store came from, by store id: an index into `sites`.
    origin: StoreOrigins,
    /// Store sites and their threads, interned for `origin`.
    sites: Vec<(Site, u32)>,
    site_ids: FxHashMap<(Site, u32), u32>,
    inserts_since_prune: usize,
    /// Per thread, the last flush of each line it flushed since its last fence: a fence
    /// completes all of them (the device drains the thread's captures), so the map holds only
    /// what the end-of-run check may still ask about, not every line ever flushed.
    last_flush: FxHashMap<u32, FxHashMap<u64, Site>>,
    clean_flushes: BTreeMap<Site, (u32, u64)>,
    redundant_fences: BTreeMap<Site, (u32, u64)>,
    /// What the program declared through client requests (PMDK's pmemcheck annotations).
    annotations: Annotations,
    /// Stores made where the program had withdrawn PM from checking, by store id (a subset
    /// of `origin`'s keys).
    withdrawn: rustc_hash::FxHashSet<u64>,
    /// The running transactions, as pmemcheck's transaction check keeps them.
    transactions: Transactions,
    /// Where each thread inside a transaction began its outermost one.
    tx_begin: FxHashMap<u32, Site>,
    /// Stores outside the transaction, by site: thread, count, the transaction's begin.
    outside: BTreeMap<Site, (u32, u64, Site)>,
    /// Library code: its stores are the library's business (libpmemobj's own bookkeeping).
    code: CodeInfo,
}

const PRUNE_EVERY: usize = 1 << 16;

/// Which site made each store, by store id. The device hands out store ids in program order, so
/// the stores one site makes in a row (a loop over a pool's lines) are one run `(first id,
/// site)` of 16 bytes, where a map from id to site cost 16 bytes a store and its table's slack.
/// A run stands for the ids from its first to the next run's: ids no longer live may fall in a
/// neighbour's run after a prune, and only live stores are ever looked up.
#[derive(Clone, Default)]
struct StoreOrigins {
    runs: Vec<(u64, u32)>,
    /// The highest id inserted.
    last: Option<u64>,
}

impl StoreOrigins {
    /// Whether store `id` has an origin: the elements of one `rep` instruction share the id of
    /// its first.
    fn contains(&self, id: u64) -> bool {
        self.last.is_some_and(|l| id <= l) && self.get(id).is_some()
    }

    /// Records that store `id` came from `site`; returns whether a run was added.
    fn insert(&mut self, id: u64, site: u32) -> bool {
        match self.runs.last() {
            Some(&(first, s)) if first <= id && self.last.is_none_or(|l| l < id) => {
                self.last = Some(id);
                if s == site {
                    return false;
                }
                self.runs.push((id, site));
            }
            Some(_) => {
                // Not after every id seen (never from the device, which counts up): keep order.
                let i = self.runs.partition_point(|r| r.0 <= id);
                if i > 0 && self.runs[i - 1].0 == id {
                    self.runs[i - 1].1 = site;
                    return false;
                }
                self.runs.insert(i, (id, site));
                self.last = self.last.max(Some(id));
            }
            None => {
                self.runs.push((id, site));
                self.last = Some(id);
            }
        }
        true
    }

    /// The site of store `id`.
    fn get(&self, id: u64) -> Option<u32> {
        let i = self.runs.partition_point(|r| r.0 <= id);
        (i > 0).then(|| self.runs[i - 1].1)
    }

    /// Keeps the runs holding some id of `live` (sorted).
    fn retain(&mut self, live: &[u64]) {
        let mut j = 0;
        let runs = std::mem::take(&mut self.runs);
        for (i, &(first, site)) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(u64::MAX, |r| r.0);
            j += live[j..].partition_point(|&l| l < first);
            if live.get(j).is_some_and(|&l| l < end) {
                self.runs.push((first, site));
            }
        }
    }
}
/// Capacity of a thread's flush map kept across its fences (beyond it the map is freed).
const LAST_FLUSH_KEEP: usize = 4096;

impl Unpersisted {
    /// The pass with these options.
    pub fn new(options: Options) -> Unpersisted {
        Unpersisted { options, ..Unpersisted::default() }
    }

    fn prune(&mut self, device: &PmDevice) {
        let live = device.unpersisted_ids(self.options.rule);
        self.origin.retain(&live);
        self.withdrawn.retain(|id| live.binary_search(id).is_ok());
        self.inserts_since_prune = 0;
    }
}

impl Unpersisted {
    /// pmemcheck's `handle_tx_store`, for stores the program's own code makes to PM it
    /// registered.
    fn check_transaction(&mut self, ev: &Event) {
        if !self.options.tx_check
            || ev.dev == 0
            || !self.transactions.in_transaction(ev.tid)
            || !self.annotations.registered_now(ev.dev, ev.size)
            || self.code.is_library(ev.pc)
            || !self.transactions.outside(ev.tid, ev.dev, ev.size)
        {
            return;
        }
        let begin = self.tx_begin.get(&ev.tid).copied().unwrap_or((0, StackId(0)));
        self.outside.entry((ev.pc, ev.stack)).or_insert((ev.tid, 0, begin)).1 += 1;
    }
}

fn loc(role: &'static str, site: Site, tid: u32) -> RawLocation {
    RawLocation { role, pc: site.0, stack: site.1, tid }
}

impl Analysis for Unpersisted {
    fn name(&self) -> &'static str {
        "unpersisted"
    }

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(self.clone()))
    }

    fn interest(&self) -> Interest {
        let i = Interest::STORES.union(Interest::PERSIST);
        if self.options.tx_check {
            i.union(Interest::SYNC)
        } else {
            i
        }
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone();
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        let site = (ev.pc, ev.stack);
        match ev.kind {
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore => {
                self.annotations.on_event(ev);
                self.check_transaction(ev);
                if let Some(id) = ev.store {
                    // Elements of one rep instruction share an id: withdrawn if all are.
                    if self.annotations.withdrawn(ev.dev, ev.size) {
                        if !self.origin.contains(id.0) {
                            self.withdrawn.insert(id.0);
                            self.inserts_since_prune += 1;
                        }
                    } else if !self.withdrawn.is_empty() {
                        self.withdrawn.remove(&id.0);
                    }
                    if !self.origin.contains(id.0) {
                        let next = self.sites.len() as u32;
                        let s = *self.site_ids.entry((site, ev.tid)).or_insert(next);
                        if s == next {
                            self.sites.push((site, ev.tid));
                        }
                        if self.origin.insert(id.0, s) {
                            self.inserts_since_prune += 1;
                        }
                    }
                    // Amortised: a prune asks the device for every live store.
                    if self.inserts_since_prune >= PRUNE_EVERY.max(self.origin.runs.len()) {
                        self.prune(device);
                    }
                }
            }
            EventKind::Flush(_) => {
                self.last_flush.entry(ev.tid).or_default().insert(ev.dev / 64, site);
                // Under eADR every flush and fence is redundant by design; a program written
                // for ADR machines keeps them, and saying so is noise.
                let eadr = device.config().persistency == emu::pm::Persistency::Eadr;
                // PM the program annotates for pmemcheck gets pmemcheck's report, which has
                // superfluous flushes only under `--flush-check`.
                let annotated = !self.options.annotated_lints && self.annotations.registered_once(ev.dev);
                if let (Some(f), false, false) = (ev.flush, eadr, annotated) {
                    if !f.dirty || f.already_captured {
                        self.clean_flushes.entry(site).or_insert((ev.tid, 0)).1 += 1;
                    }
                }
            }
            EventKind::SetClean | EventKind::PmRegister | EventKind::PmUnregister => self.annotations.on_event(ev),
            EventKind::TxBegin | EventKind::TxEnd | EventKind::TxAdd | EventKind::TxRemove | EventKind::TxIgnore
                if self.options.tx_check =>
            {
                let was = self.transactions.in_transaction(ev.tid);
                self.transactions.on_event(ev);
                match (was, self.transactions.in_transaction(ev.tid)) {
                    (false, true) => {
                        self.tx_begin.insert(ev.tid, site);
                    }
                    (true, false) => {
                        self.tx_begin.remove(&ev.tid);
                    }
                    _ => {}
                }
            }
            EventKind::Fence(op) => {
                if let Some(m) = self.last_flush.get_mut(&ev.tid) {
                    // Kept for the next batch of flushes unless a burst made it large.
                    if m.capacity() > LAST_FLUSH_KEEP {
                        *m = FxHashMap::default();
                    } else {
                        m.clear();
                    }
                }
                let eadr = device.config().persistency == emu::pm::Persistency::Eadr;
                // pmemcheck reports no fences: nor does this pass for a program that annotates
                // its PM for pmemcheck.
                let annotated = !self.options.annotated_lints && self.annotations.speaks_pmemcheck();
                if let (Some(f), false, false) = (ev.fence, eadr, annotated) {
                    if f.redundant && matches!(op, FenceOp::Sfence | FenceOp::Mfence) {
                        self.redundant_fences.entry(site).or_insert((ev.tid, 0)).1 += 1;
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, device: &PmDevice) -> Vec<RawFinding> {
        // Every kind is grouped by its sites' instructions, not their call stacks (the same
        // unpersisted store reached from four call sites is one finding with four stacks), as
        // the race passes group theirs ([`Grouper`]); the key's first part orders the kinds.
        let mut groups: Grouper<(u8, u64, u64)> = Grouper::new(0);
        // Unpersisted stores: the device's pieces, counted per store site.
        let mut by_site: BTreeMap<Site, (u32, u64, bool)> = BTreeMap::new();
        for u in device.unpersisted_iter(self.options.rule) {
            // Declared clean after it was made, or made where the program had withdrawn PM
            // from checking: pmemcheck would not report it.
            if self.withdrawn.contains(&u.store.0) || self.annotations.is_clean(&u, device, self.options.rule) {
                continue;
            }
            let (site, tid) = self.origin.get(u.store.0).map_or(((0, StackId(0)), u.tid), |s| self.sites[s as usize]);
            let e = by_site.entry(site).or_insert((tid, 0, false));
            e.1 += 1;
            e.2 |= u.nt;
        }
        for (site, (tid, n, nt)) in by_site {
            groups.add((u8::from(nt), site.0, 0), &[loc("store", site, tid)], 1, n);
        }
        let mut unfenced: BTreeMap<Site, (u32, u64)> = BTreeMap::new();
        for tid in device.threads_with_pending() {
            for f in device.unfenced_flushes(tid) {
                if let Some(site) = self.last_flush.get(&tid).and_then(|m| m.get(&f.line)) {
                    unfenced.entry(*site).or_insert((tid, 0)).1 += 1;
                }
            }
        }
        for (site, (tid, n)) in unfenced {
            groups.add((2, site.0, 0), &[loc("flush", site, tid)], 1, n);
        }
        for (site, (tid, n)) in std::mem::take(&mut self.clean_flushes) {
            groups.add((3, site.0, 0), &[loc("flush", site, tid)], 1, n);
        }
        for (site, (tid, n, begin)) in std::mem::take(&mut self.outside) {
            groups.add((4, site.0, begin.0), &[loc("store", site, tid), loc("transaction", begin, tid)], 2, n);
        }
        for (site, (tid, n)) in std::mem::take(&mut self.redundant_fences) {
            groups.add((5, site.0, 0), &[loc("fence", site, tid)], 1, n);
        }
        groups.finish(|&(kind, _, _), _, _| {
            let (kind, message) = match kind {
                0 => ("unpersisted-store", "store to PM never made durable (no flush and fence of its line) before the program ended"),
                1 => (
                    "nt-store-without-fence",
                    "non-temporal store to PM still pending without a fence before the program ended",
                ),
                2 => ("flush-without-fence", "flushed line never fenced afterwards: the flush may not have completed"),
                3 => (
                    "flush-clean-line",
                    "flush of a line with nothing left to flush: clean, or already flushed and not yet fenced (redundant flush)",
                ),
                4 => (
                    "store-outside-transaction",
                    "store to PM inside a transaction, to bytes not added to it (the transaction cannot roll it back)",
                ),
                _ => ("redundant-fence", "fence with no flush or non-temporal store to order (redundant fence)"),
            };
            Described { analysis: "unpersisted", kind, message: message.into(), class: "", stored: None }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StoreOrigins;

    #[test]
    fn a_sites_stores_in_a_row_are_one_run_and_pruning_keeps_the_live_ones() {
        let mut o = StoreOrigins::default();
        assert!(!o.contains(1));
        assert!(o.insert(1, 7));
        for id in 2..1000 {
            assert!(!o.contains(id));
            assert!(!o.insert(id, 7), "the same site's next store extends its run");
        }
        assert!(o.contains(999) && o.contains(5));
        assert!(o.insert(1000, 8));
        assert!(o.insert(1001, 7));
        assert_eq!(o.runs.len(), 3);
        assert_eq!(
            (o.get(0), o.get(1), o.get(999), o.get(1000), o.get(5000)),
            (None, Some(7), Some(7), Some(8), Some(7))
        );
        // Store 1000 is no longer live: its run goes, the others stay.
        o.retain(&[3, 1001]);
        assert_eq!(o.runs, vec![(1, 7), (1001, 7)]);
        assert_eq!((o.get(3), o.get(1001)), (Some(7), Some(7)));
        // Nothing live: nothing kept, and later ids start afresh.
        o.retain(&[]);
        assert!(o.runs.is_empty() && !o.contains(3));
        assert!(o.insert(1002, 9));
        assert_eq!(o.get(1002), Some(9));
        // An id below the highest seen (not what the device does) still lands in order.
        assert!(o.insert(10, 4));
        assert_eq!((o.get(10), o.get(1002)), (Some(4), Some(9)));
    }
}
