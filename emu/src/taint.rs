//! Byte-granular dynamic taint tracking over registers and memory, for passes that follow data
//! from a load to the stores derived from it (PMRace's durable side effects).
//!
//! A *label* names a set of observer-chosen source ids (a candidate load, for PMRace); label 0 is
//! clean. Sets are interned and unions cached, as in DataFlowSanitizer, so each shadow byte is one
//! `u32`. Memory has a byte shadow (pages of labels allocated on first taint); each thread has a
//! 16-byte shadow for each of the 16 general registers and the 16 XMM registers.
//!
//! The machine calls [`Taint::begin`] from a code hook before every instruction and
//! [`Taint::access`] from memory hooks for every access (wider accesses arrive as 8-byte parts).
//! The instruction's effect is applied when the next one begins (or when the machine stops), once
//! all its accesses are known: the instruction's *static* operands come from capstone (cached per
//! PC), its *dynamic* addresses from the hooks. Transfer rules:
//!
//! - data moves (`mov`, `movzx`/`movsx`, SSE moves, `push`/`pop`, string `movs`/`stos`/`lods`,
//!   `xchg`) copy labels byte for byte, so a 16-byte `movdqu` through a DRAM buffer keeps each
//!   byte's label; zero- and sign-extension fill the upper bytes with clean / the top byte's label;
//! - `cmpxchg` with memory moves what it executes: on success the memory gets the new value's
//!   labels (a store like a `mov`) and the accumulator keeps its own; on failure the
//!   accumulator gets the memory's and nothing is stored (Unicorn calls a failed one's write
//!   hook with the unchanged value; the machine's hook tells the engine which happened). The
//!   compared values only decide which, like a branch: a lock's CAS loop over a lock word that
//!   carries taint neither taints the word it takes nor is a tainted store when it fails;
//! - everything else (arithmetic, logic, shuffles, `cmov`, `lea` over its address registers,
//!   `xadd`, `cmpxchg16b`) gives every destination byte the union of all source bytes;
//! - zeroing idioms (`xor r,r`, `pxor x,x`, ...), `cpuid`, `rdtsc`, `rdrand` and `syscall` make
//!   their destinations clean, as do the kernel's writes to guest memory.
//!
//! Only explicit data flow is followed. Flags carry no taint, so a value that only decides a
//! branch (a control dependence) taints nothing, as with DataFlowSanitizer. The registers that
//! form a memory operand's address are not a data source of the access; instead each store
//! reports their labels separately (*address flow*: a store through a pointer computed from the
//! source). x87 and MMX state, and AVX (hidden by ferrite's CPUID), are not tracked.
//!
//! With nothing tainted every instruction costs one hook call and a check; with something tainted,
//! an instruction whose registers and accessed pages hold no taint costs a mask test and a page
//! probe per access (`changes_nothing`). The engine exists only when an observer asks for
//! [`crate::events::Interest::TAINT`].

use capstone::arch::x86::{ArchMode, X86OperandType};
use capstone::arch::{BuildsCapstone, DetailsArchInsn};
use capstone::{Capstone, RegId};
use rustc_hash::FxHashMap;

/// An interned set of source ids; 0 is the empty set.
pub type Label = u32;

/// The most source ids one label keeps (the lowest ones, so the choice is deterministic).
const MAX_SET: usize = 8;

/// Interned label sets.
#[derive(Clone)]
pub struct LabelSets {
    sets: Vec<Box<[u32]>>,
    by_set: FxHashMap<Box<[u32]>, Label>,
    unions: FxHashMap<(Label, Label), Label>,
}

impl Default for LabelSets {
    fn default() -> Self {
        LabelSets { sets: vec![Box::new([])], by_set: FxHashMap::default(), unions: FxHashMap::default() }
    }
}

impl LabelSets {
    fn intern(&mut self, set: Box<[u32]>) -> Label {
        if set.is_empty() {
            return 0;
        }
        if let Some(&l) = self.by_set.get(&set) {
            return l;
        }
        let l = self.sets.len() as Label;
        self.sets.push(set.clone());
        self.by_set.insert(set, l);
        l
    }

    /// The label of the one source `id`.
    pub fn single(&mut self, id: u32) -> Label {
        self.intern(Box::new([id]))
    }

    /// The label of the union of `a`'s and `b`'s sets (cached; capped at the lowest eight ids).
    /// Inlined for the common cases (one side clean or both the same): the engine calls it per
    /// byte moved.
    #[inline]
    pub fn union(&mut self, a: Label, b: Label) -> Label {
        if a == b || b == 0 {
            return a;
        }
        if a == 0 {
            return b;
        }
        self.union_of_two(a, b)
    }

    fn union_of_two(&mut self, a: Label, b: Label) -> Label {
        let key = if a < b { (a, b) } else { (b, a) };
        if let Some(&l) = self.unions.get(&key) {
            return l;
        }
        let mut v: Vec<u32> = self.sets[a as usize].iter().chain(self.sets[b as usize].iter()).copied().collect();
        v.sort_unstable();
        v.dedup();
        v.truncate(MAX_SET);
        let l = self.intern(v.into_boxed_slice());
        self.unions.insert(key, l);
        l
    }

    /// The source ids of a label, ascending.
    pub fn members(&self, l: Label) -> &[u32] {
        self.sets.get(l as usize).map(|s| &s[..]).unwrap_or(&[])
    }
}

const PAGE: u64 = 4096;

/// Entries of the direct-mapped cache of decoded instructions in front of [`Taint`]'s map.
const OP_CACHE: usize = 2048;

/// Freed shadow pages kept for reuse.
const SPARE_PAGES: usize = 16;

/// One page of the memory shadow: a label per byte and how many are tainted.
#[derive(Clone)]
struct ShadowPage {
    labels: Box<[Label; PAGE as usize]>,
    live: u32,
}
/// General registers 0..16 (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15), XMM 16..32.
const NREG: usize = 32;
const RSP: u8 = 4;
type RegShadow = [[Label; 16]; NREG];

/// A byte range of a shadow register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    reg: u8,
    off: u8,
    len: u8,
    /// Writing this slot clears the register's bytes above it (32-bit general registers, scalar
    /// SSE loads).
    zext_to: u8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    /// Nothing written can carry taint.
    #[default]
    Clean,
    /// Byte-for-byte copy from the source operand (register or memory) to the destination.
    Move,
    /// Copy with sign extension: bytes above the source get its top byte's label.
    MoveSx,
    /// Every destination byte gets the union of every source byte.
    Mix,
    /// `xchg`: the two operands trade labels.
    Swap,
    /// `cmpxchg` with a memory destination (`src[0]` the new value, `dst[0]` the accumulator
    /// of the operand's size): when it succeeds the memory gets the new value's labels and the
    /// accumulator keeps its own; when it fails the accumulator gets the memory's labels and
    /// the memory is not written. The comparison only decides which (flags carry no taint).
    CmpXchg,
}

/// What one instruction does to taint, from its static operands.
#[derive(Clone, Copy, Debug, Default)]
struct Op {
    kind: Kind,
    dst: [Slot; 2],
    ndst: u8,
    src: [Slot; 4],
    nsrc: u8,
    /// General registers forming the memory operand's address (address flow of its stores).
    addr: [u8; 2],
    naddr: u8,
    /// The address registers' labels join the loaded bytes' (not for string instructions,
    /// whose one address register is the destination's).
    ptr_load: bool,
    /// A bit per register the instruction reads or writes (operands and address registers),
    /// computed once when it is decoded ([`Op::reg_mask`]).
    regs: u32,
}

impl Op {
    fn reg_mask(&self) -> u32 {
        let mut regs = 0u32;
        for s in self.src[..usize::from(self.nsrc)].iter().chain(&self.dst[..usize::from(self.ndst)]) {
            regs |= 1 << s.reg;
        }
        for r in &self.addr[..usize::from(self.naddr)] {
            regs |= 1 << r;
        }
        regs
    }
}

/// A store of the instruction just applied that carries taint.
#[derive(Clone, Copy, Debug)]
pub struct TaintedWrite {
    /// The storing instruction.
    pub pc: u64,
    /// First byte stored.
    pub addr: u64,
    /// Bytes stored by this access (one memory-hook access: a wider store comes in parts).
    pub size: u32,
    /// Union of the stored bytes' labels (content flow).
    pub content: Label,
    /// Union of the address registers' labels (address flow).
    pub address: Label,
}

#[derive(Clone, Copy, Debug)]
struct Access {
    addr: u64,
    size: u32,
}

/// The taint engine: shadows of memory and of every thread's registers, and the label sets.
/// Created by the machine only when an observer asks for taint.
pub struct Taint {
    /// The interned label sets; resolve a [`Label`] to its source ids here.
    pub sets: LabelSets,
    cs: Capstone,
    ops: FxHashMap<u64, Op>,
    /// The last instructions looked up in `ops`, direct-mapped by PC (`u64::MAX`: empty): the
    /// engine asks for the instruction at every instruction, and a loop's few PCs hit here
    /// instead of probing the map (once to know whether to decode, once to apply).
    op_cache: Box<[(u64, Op)]>,
    /// The memory shadow, two levels: page number → the page's labels, allocated when a byte of
    /// the page is first tainted and freed when its last tainted byte is cleaned or the page is
    /// unmapped, so untainted memory (most of a large PM pool) costs nothing.
    mem: FxHashMap<u64, ShadowPage>,
    /// Tainted bytes in memory.
    mem_live: u64,
    /// The most shadow pages allocated at once.
    pages_peak: u64,
    /// Freed shadow pages (clean) kept for reuse, so that a page whose only tainted byte comes
    /// and goes does not allocate each time.
    spare: Vec<Box<[Label; PAGE as usize]>>,
    regs: Box<RegShadow>,
    /// Bit per register with any tainted byte.
    reg_mask: u32,
    parked: FxHashMap<u32, (Box<RegShadow>, u32)>,
    tid: u32,
    /// The instruction whose accesses are being collected.
    pending: Option<u64>,
    reads: Vec<Access>,
    writes: Vec<Access>,
    /// Source labels put on bytes the pending instruction loads: (addr, size, label).
    sources: Vec<(u64, u32, Label)>,
    /// Whether the pending compare-exchange failed (its write left memory as it was), as the
    /// machine's memory hook saw it ([`Taint::access`], [`Taint::cmpxchg_outcome`]).
    cas_failed: Option<bool>,
    /// Scratch for byte sequences.
    bytes: Vec<Label>,
    out: Vec<TaintedWrite>,
}

impl Default for Taint {
    fn default() -> Self {
        Taint::new()
    }
}

/// What the taint engine holds of one run, for a machine snapshot ([`Taint::save`]): the label
/// sets (labels are indices into them, so a restored run must number new sets as the original
/// did), the memory shadow and every thread's register shadow. Not what it decoded: that belongs
/// to the code at each PC, which the machine keeps across restores and forgets where the code
/// changed (`Machine::code_changed`). Taken at a stop, when no instruction is pending
/// ([`Taint::settle`] ran).
#[derive(Clone)]
pub struct TaintState {
    sets: LabelSets,
    mem: FxHashMap<u64, ShadowPage>,
    mem_live: u64,
    pages_peak: u64,
    regs: Box<RegShadow>,
    reg_mask: u32,
    parked: FxHashMap<u32, (Box<RegShadow>, u32)>,
    tid: u32,
}

impl TaintState {
    /// Host bytes of shadow it holds (memory pages and registers), roughly.
    pub fn bytes(&self) -> usize {
        (self.mem.len() * PAGE as usize + (1 + self.parked.len()) * NREG * 16) * std::mem::size_of::<Label>()
    }
}

impl Taint {
    /// An engine with nothing tainted (label 0 everywhere).
    pub fn new() -> Taint {
        let cs = Capstone::new().x86().mode(ArchMode::Mode64).detail(true).build().expect("capstone supports x86-64");
        Taint {
            sets: LabelSets::default(),
            cs,
            ops: FxHashMap::default(),
            op_cache: vec![(u64::MAX, Op::default()); OP_CACHE].into_boxed_slice(),
            mem: FxHashMap::default(),
            mem_live: 0,
            pages_peak: 0,
            spare: Vec::new(),
            regs: Box::new([[0; 16]; NREG]),
            reg_mask: 0,
            parked: FxHashMap::default(),
            tid: 0,
            pending: None,
            reads: Vec::with_capacity(64),
            writes: Vec::with_capacity(64),
            sources: Vec::with_capacity(8),
            cas_failed: None,
            bytes: Vec::with_capacity(64),
            out: Vec::with_capacity(8),
        }
    }

    /// The run's taint as it is now, at a stop ([`TaintState`]).
    pub fn save(&self) -> TaintState {
        TaintState {
            sets: self.sets.clone(),
            mem: self.mem.clone(),
            mem_live: self.mem_live,
            pages_peak: self.pages_peak,
            regs: self.regs.clone(),
            reg_mask: self.reg_mask,
            parked: self.parked.clone(),
            tid: self.tid,
        }
    }

    /// Puts the run's taint back as it was at `s` (what the engine decoded stays). The pages of
    /// the shadow being replaced are kept for reuse, up to the usual few.
    pub fn restore(&mut self, s: &TaintState) {
        self.drop_pending();
        self.out.clear();
        self.sets = s.sets.clone();
        let old = std::mem::replace(&mut self.mem, s.mem.clone());
        for (_, p) in old {
            self.release_page(p);
        }
        self.mem_live = s.mem_live;
        self.pages_peak = s.pages_peak;
        self.regs = s.regs.clone();
        self.reg_mask = s.reg_mask;
        self.parked = s.parked.clone();
        self.tid = s.tid;
    }

    /// Whether anything is tainted or about to be.
    pub fn is_quiet(&self) -> bool {
        self.mem_live == 0 && self.reg_mask == 0 && self.sources.is_empty()
    }

    /// Whether the instruction at `pc` has been decoded.
    #[inline]
    pub fn knows(&mut self, pc: u64) -> bool {
        self.op(pc).is_some()
    }

    /// The decoded instruction at `pc`, through the cache (a reference: copying the `Op` out
    /// through an `Option` cost a store-forwarding stall per instruction).
    #[inline]
    fn op(&mut self, pc: u64) -> Option<&Op> {
        let i = ((pc ^ (pc >> 11)) as usize) & (OP_CACHE - 1);
        if self.op_cache[i].0 != pc {
            let op = *self.ops.get(&pc)?;
            self.op_cache[i] = (pc, op);
        }
        Some(&self.op_cache[i].1)
    }

    /// Decodes the instruction at `pc` from its bytes (at most 16).
    pub fn learn(&mut self, pc: u64, bytes: &[u8]) {
        let mut op = self.decode(pc, bytes);
        op.regs = op.reg_mask();
        self.ops.insert(pc, op);
        let e = &mut self.op_cache[((pc ^ (pc >> 11)) as usize) & (OP_CACHE - 1)];
        if e.0 == pc {
            e.1 = op;
        }
    }

    /// Code at `[start, end)` changed.
    pub fn forget_code(&mut self, start: u64, end: u64) {
        self.ops.retain(|pc, _| *pc + 16 <= start || *pc >= end);
        for e in self.op_cache.iter_mut() {
            if e.0 != u64::MAX && e.0 + 16 > start && e.0 < end {
                e.0 = u64::MAX;
            }
        }
    }

    /// The instruction at `pc` is about to run; the pending one completed. Returns the pending
    /// instruction's tainted stores.
    pub fn begin(&mut self, pc: u64) {
        self.out.clear();
        self.apply();
        self.pending = Some(pc);
    }

    /// The tainted stores of the instruction applied by the last [`Taint::begin`] or
    /// [`Taint::settle`].
    pub fn applied(&self) -> &[TaintedWrite] {
        &self.out
    }

    /// The instruction at `pc` accessed memory. Returns whether the access is a compare-exchange's
    /// write, whose outcome the caller then gives ([`Taint::cmpxchg_outcome`]): Unicorn calls
    /// the write hook of a failed `cmpxchg` too, with the unchanged value, before memory is
    /// written, so the caller compares it with memory.
    pub fn access(&mut self, addr: u64, size: usize, write: bool) -> bool {
        let Some(pc) = self.pending else { return false };
        if self.is_quiet() {
            // Nothing tainted: the access cannot move taint (a source load records itself).
            return false;
        }
        let a = Access { addr, size: size as u32 };
        if !write && self.sources.iter().any(|s| s.0 == addr) && self.reads.iter().any(|r| r.addr == addr) {
            // The source's own read, recorded by `source` (the machine's hooks may call either
            // first).
            return false;
        }
        if write {
            self.writes.push(a);
            self.op(pc).is_some_and(|op| op.kind == Kind::CmpXchg)
        } else {
            self.reads.push(a);
            false
        }
    }

    /// The pending compare-exchange's write leaves memory as it was (`failed`: the comparison
    /// failed, or it stored the value already there) or changes it.
    pub fn cmpxchg_outcome(&mut self, failed: bool) {
        self.cas_failed = Some(failed);
    }

    /// The pending instruction's load of `[addr, addr+size)` is a source: its bytes carry `id`.
    pub fn source(&mut self, addr: u64, size: u32, id: u32) {
        if self.pending.is_none() || id == 0 {
            return;
        }
        let l = self.sets.single(id);
        self.sources.push((addr, size, l));
        if !self.reads.iter().any(|r| r.addr == addr) {
            self.reads.push(Access { addr, size });
        }
    }

    /// The machine stopped: the pending instruction completed (`true`) or will run again /
    /// faulted (`false`). Returns its tainted stores.
    pub fn settle(&mut self, completed: bool) {
        self.out.clear();
        if completed {
            self.apply();
        } else {
            self.drop_pending();
        }
    }

    /// Switches the register shadow to thread `tid` (new threads start clean).
    pub fn switch_thread(&mut self, tid: u32) {
        if tid == self.tid {
            return;
        }
        let (regs, mask) = self.parked.remove(&tid).unwrap_or_else(|| (Box::new([[0; 16]; NREG]), 0));
        let old = std::mem::replace(&mut self.regs, regs);
        let old_mask = std::mem::replace(&mut self.reg_mask, mask);
        if old_mask != 0 {
            self.parked.insert(self.tid, (old, old_mask));
        }
        self.tid = tid;
    }

    /// The thread is gone.
    pub fn forget_thread(&mut self, tid: u32) {
        self.parked.remove(&tid);
    }

    /// The kernel wrote `[addr, addr+len)`: it holds no program data any more.
    pub fn clean(&mut self, addr: u64, len: u64) {
        if self.mem_live == 0 || len == 0 {
            return;
        }
        let end = addr.saturating_add(len);
        let mut page = addr / PAGE;
        while page * PAGE < end {
            let (s, e) = ((page * PAGE).max(addr), ((page + 1) * PAGE).min(end));
            if s == page * PAGE && e == (page + 1) * PAGE {
                // A whole page: drop its shadow at once.
                if let Some(p) = self.mem.remove(&page) {
                    self.mem_live -= u64::from(p.live);
                    self.release_page(p);
                }
            } else if self.mem.contains_key(&page) {
                for a in s..e {
                    self.set_mem(a, 0);
                }
            }
            if self.mem_live == 0 {
                break;
            }
            page += 1;
        }
    }

    /// `[start, end)` was unmapped: its shadow pages are freed.
    pub fn unmapped(&mut self, start: u64, end: u64) {
        if end <= start || self.mem_live == 0 {
            return;
        }
        if (end - start) / PAGE <= self.mem.len() as u64 {
            self.clean(start, end - start);
            return;
        }
        // Fewer shadow pages than pages unmapped (a large pool): visit the shadow pages instead.
        let pages: Vec<u64> = self.mem.keys().copied().filter(|&p| p * PAGE < end && (p + 1) * PAGE > start).collect();
        for p in pages {
            let (s, e) = ((p * PAGE).max(start), ((p + 1) * PAGE).min(end));
            self.clean(s, e - s);
        }
    }

    /// Memory shadow pages allocated now, and the most allocated at once.
    pub fn shadow_pages(&self) -> (u64, u64) {
        (self.mem.len() as u64, self.pages_peak)
    }

    /// Union of the labels of `[addr, addr+len)`.
    pub fn label_of(&mut self, addr: u64, len: u64) -> Label {
        if self.mem_live == 0 {
            return 0;
        }
        let mut l = 0;
        for a in addr..addr.saturating_add(len) {
            let b = self.mem_label(a);
            l = self.sets.union(l, b);
        }
        l
    }

    fn drop_pending(&mut self) {
        self.pending = None;
        self.cas_failed = None;
        self.reads.clear();
        self.writes.clear();
        self.sources.clear();
    }

    fn mem_label(&self, a: u64) -> Label {
        match self.mem.get(&(a / PAGE)) {
            Some(p) => p.labels[(a % PAGE) as usize],
            None => 0,
        }
    }

    fn set_mem(&mut self, a: u64, l: Label) {
        let page = a / PAGE;
        if l != 0 && !self.mem.contains_key(&page) {
            let labels = self.spare.pop().unwrap_or_else(|| Box::new([0; PAGE as usize]));
            self.mem.insert(page, ShadowPage { labels, live: 0 });
            self.pages_peak = self.pages_peak.max(self.mem.len() as u64);
        }
        let Some(p) = self.mem.get_mut(&page) else { return };
        let slot = &mut p.labels[(a % PAGE) as usize];
        match (*slot != 0, l != 0) {
            (false, true) => {
                p.live += 1;
                self.mem_live += 1;
            }
            (true, false) => {
                p.live -= 1;
                self.mem_live -= 1;
            }
            _ => {}
        }
        *slot = l;
        if p.live == 0 {
            // The page's last tainted byte was cleaned: its shadow goes (kept for reuse, a few).
            if let Some(p) = self.mem.remove(&page) {
                self.release_page(p);
            }
        }
    }

    /// Keeps a freed shadow page (all clean) for the next one, up to [`SPARE_PAGES`].
    fn release_page(&mut self, mut p: ShadowPage) {
        if self.spare.len() < SPARE_PAGES {
            if p.live != 0 {
                p.labels.fill(0);
            }
            self.spare.push(p.labels);
        }
    }

    /// The label a read byte carries: its shadow, plus the pending source label over it.
    fn read_label(&mut self, a: u64) -> Label {
        let mut l = self.mem_label(a);
        for i in 0..self.sources.len() {
            let (s, n, src) = self.sources[i];
            if a >= s && a < s + u64::from(n) {
                l = self.sets.union(l, src);
            }
        }
        l
    }

    /// A slot's byte labels, without allocating (slots are at most 16 bytes).
    /// The labels of the bytes this instruction read from memory, in order, each joined with
    /// `via` (the pointer's), appended to `bytes`.
    fn push_read_labels(&mut self, via: Label, bytes: &mut Vec<Label>) {
        for k in 0..self.reads.len() {
            let a = self.reads[k];
            for b in 0..u64::from(a.size) {
                let l = self.read_label(a.addr + b);
                let l = self.sets.union(l, via);
                bytes.push(l);
            }
        }
    }

    fn slot_labels(&self, s: Slot) -> [Label; 16] {
        let mut out = [0; 16];
        for (i, l) in out.iter_mut().enumerate().take(s.len as usize) {
            *l = self.regs[s.reg as usize][s.off as usize + i];
        }
        out
    }

    fn slot_union(&mut self, s: Slot) -> Label {
        let mut l = 0;
        for i in 0..s.len {
            let b = self.regs[s.reg as usize][(s.off + i) as usize];
            l = self.sets.union(l, b);
        }
        l
    }

    fn write_slot(&mut self, s: Slot, mut byte: impl FnMut(usize) -> Label) {
        let r = s.reg as usize;
        for i in 0..s.len as usize {
            self.regs[r][s.off as usize + i] = byte(i);
        }
        for i in (s.off + s.len) as usize..s.zext_to as usize {
            self.regs[r][i] = 0;
        }
        let any = self.regs[r].iter().any(|&l| l != 0);
        if any {
            self.reg_mask |= 1 << r;
        } else {
            self.reg_mask &= !(1 << r);
        }
    }

    /// Applies the pending instruction.
    fn apply(&mut self) {
        let Some(pc) = self.pending else { return };
        if self.is_quiet() {
            self.drop_pending();
            return;
        }
        let op = match self.op(pc) {
            Some(op) => *op,
            None => Op::default(),
        };
        if self.changes_nothing(&op) {
            self.drop_pending();
            return;
        }
        // Address flow, from the registers as they were before the instruction.
        let mut address = 0;
        for i in 0..op.naddr as usize {
            let s = Slot { reg: op.addr[i], off: 0, len: 8, zext_to: 0 };
            let l = self.slot_union(s);
            address = self.sets.union(address, l);
        }
        // A value loaded through a pointer derived from the source carries the source too
        // (DataFlowSanitizer's default, which PMRace runs with): a thread that follows an
        // unpersisted pointer to a node and loads the node's fields, then stores through them, has
        // a side effect of that pointer however many loads deep.
        let via = if op.ptr_load && !self.reads.is_empty() { address } else { 0 };
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        match op.kind {
            Kind::Clean => {}
            Kind::Move | Kind::MoveSx => {
                // The source bytes in order: the register source, else the memory read.
                if op.nsrc > 0 {
                    let s = op.src[0];
                    for i in 0..s.len as usize {
                        bytes.push(self.regs[s.reg as usize][s.off as usize + i]);
                    }
                } else {
                    self.push_read_labels(via, &mut bytes);
                }
            }
            Kind::Mix | Kind::Swap | Kind::CmpXchg => {}
        }
        let n = bytes.len();
        let top = if op.kind == Kind::MoveSx { bytes.last().copied().unwrap_or(0) } else { 0 };
        match op.kind {
            Kind::Clean => {
                for i in 0..op.ndst as usize {
                    self.write_slot(op.dst[i], |_| 0);
                }
                self.write_memory(|_, _| 0, address);
            }
            Kind::Move | Kind::MoveSx => {
                for i in 0..op.ndst as usize {
                    self.write_slot(op.dst[i], |j| if j < n { bytes[j] } else { top });
                }
                self.write_memory(|j, _| if j < n { bytes[j] } else { top }, address);
            }
            Kind::Mix => {
                let mut u = 0;
                for i in 0..op.nsrc as usize {
                    let l = self.slot_union(op.src[i]);
                    u = self.sets.union(u, l);
                }
                for k in 0..self.reads.len() {
                    let a = self.reads[k];
                    for b in 0..u64::from(a.size) {
                        let l = self.read_label(a.addr + b);
                        u = self.sets.union(u, l);
                    }
                }
                u = self.sets.union(u, via);
                for i in 0..op.ndst as usize {
                    self.write_slot(op.dst[i], |_| u);
                }
                self.write_memory(|_, _| u, address);
            }
            Kind::Swap => {
                // Register with register, or memory with register (dst[0] the register).
                if op.ndst == 2 {
                    let (a, b) = (op.dst[0], op.dst[1]);
                    let (la, lb) = (self.slot_labels(a), self.slot_labels(b));
                    self.write_slot(a, |i| if i < b.len as usize { lb[i] } else { 0 });
                    self.write_slot(b, |i| if i < a.len as usize { la[i] } else { 0 });
                } else if op.ndst == 1 {
                    let r = op.dst[0];
                    let reg = self.slot_labels(r);
                    self.push_read_labels(via, &mut bytes);
                    let m = bytes.len();
                    self.write_slot(r, |i| if i < m { bytes[i] } else { 0 });
                    self.write_memory(|j, _| if j < r.len as usize { reg[j] } else { 0 }, address);
                }
            }
            Kind::CmpXchg => {
                // Without an outcome (no write seen, which Unicorn does not do) the conservative
                // union of both outcomes.
                let (new, acc) = (op.src[0], op.dst[0]);
                let failed = self.cas_failed;
                if failed != Some(false) {
                    // The accumulator loads the memory operand (through its pointer).
                    self.push_read_labels(via, &mut bytes);
                    let old = self.slot_labels(acc);
                    let m = bytes.len();
                    let keep = failed.is_none();
                    let mut ls = [0; 16];
                    for (i, l) in ls.iter_mut().enumerate().take(acc.len as usize) {
                        let b = if i < m { bytes[i] } else { 0 };
                        *l = if keep { self.sets.union(b, old[i]) } else { b };
                    }
                    self.write_slot(acc, |i| ls[i]);
                }
                if failed != Some(true) {
                    // The memory gets the new value: a store like a `mov` from the register.
                    let reg = self.slot_labels(new);
                    if failed.is_none() {
                        // Or keeps its own bytes.
                        let mut ls = [0; 16];
                        let mut j = 0;
                        for k in 0..self.writes.len() {
                            let w = self.writes[k];
                            for b in 0..u64::from(w.size) {
                                if j < 16 {
                                    ls[j] = self.sets.union(reg[j], self.mem_label(w.addr + b));
                                }
                                j += 1;
                            }
                        }
                        self.write_memory(|j, _| if j < 16 { ls[j] } else { 0 }, address);
                    } else {
                        self.write_memory(|j, _| if j < new.len as usize { reg[j] } else { 0 }, address);
                    }
                }
            }
        }
        self.bytes = bytes;
        self.drop_pending();
    }

    /// Whether applying the pending instruction `op` would change nothing: no source among its
    /// loads, and every register it reads or writes (operands and address registers) and every
    /// byte of memory it reads or writes clean, so that every label it would write is 0 over 0
    /// and none of its stores is tainted. Most instructions after the first source are of this
    /// kind (a program's taint stays in a few registers and lines), and this costs a mask test
    /// and a page probe per access instead of a label union and a shadow probe per byte.
    fn changes_nothing(&self, op: &Op) -> bool {
        if !self.sources.is_empty() {
            return false;
        }
        if self.reg_mask & op.regs != 0 {
            return false;
        }
        self.mem_live == 0
            || self.reads.iter().chain(&self.writes).all(|a| {
                let (first, last) = (a.addr / PAGE, (a.addr + u64::from(a.size.max(1)) - 1) / PAGE);
                !self.mem.contains_key(&first) && (first == last || !self.mem.contains_key(&last))
            })
    }

    /// Gives the pending instruction's written bytes their labels (`byte(index in the written
    /// sequence, address)`) and records the tainted stores.
    fn write_memory(&mut self, mut byte: impl FnMut(usize, u64) -> Label, address: Label) {
        let mut j = 0;
        for k in 0..self.writes.len() {
            let w = self.writes[k];
            let mut content = 0;
            for b in 0..u64::from(w.size) {
                let a = w.addr + b;
                let l = byte(j, a);
                j += 1;
                self.set_mem(a, l);
                content = self.sets.union(content, l);
            }
            if content != 0 || address != 0 {
                let pc = self.pending.unwrap_or(0);
                self.out.push(TaintedWrite { pc, addr: w.addr, size: w.size, content, address });
            }
        }
    }

    fn decode(&self, pc: u64, bytes: &[u8]) -> Op {
        let Ok(list) = self.cs.disasm_count(bytes, pc, 1) else { return Op::default() };
        let Some(insn) = list.iter().next() else { return Op::default() };
        let Ok(detail) = self.cs.insn_detail(insn) else { return Op::default() };
        let arch = detail.arch_detail();
        let Some(x86) = arch.x86() else { return Op::default() };
        let m = insn.mnemonic().unwrap_or("");
        let m = m.rsplit(' ').next().unwrap_or(m); // drop rep/lock prefixes
        let name = |id: RegId| self.cs.reg_name(id).unwrap_or_default();
        let mut op = Op::default();
        let ops: Vec<_> = x86.operands().collect();
        let mut mem_ops = 0;
        let mut reg_dst: Vec<Slot> = Vec::new();
        let mut reg_src: Vec<Slot> = Vec::new();
        for o in &ops {
            match o.op_type {
                X86OperandType::Reg(r) => {
                    let Some(mut s) = slot(&name(r)) else { continue };
                    s.len = s.len.min(o.size.max(1));
                    let acc = o.access;
                    let (rd, wr) = match acc {
                        Some(a) => (a.is_readable(), a.is_writable()),
                        None => (true, false),
                    };
                    if wr {
                        reg_dst.push(s);
                    }
                    if rd {
                        reg_src.push(s);
                    }
                }
                X86OperandType::Mem(mm) => {
                    mem_ops += 1;
                    for r in [mm.base(), mm.index()] {
                        if r.0 != 0 {
                            if let Some(s) = slot(&name(r)) {
                                if s.reg < 16 && (op.naddr as usize) < 2 {
                                    op.addr[op.naddr as usize] = s.reg;
                                    op.naddr += 1;
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let xmm_operand = ops.iter().any(|o| matches!(o.op_type, X86OperandType::Reg(r) if name(r).starts_with("xmm")));
        let string = matches!(
            m,
            "movsb" | "movsw" | "movsq" | "stosb" | "stosw" | "stosd" | "stosq" | "lodsb" | "lodsw" | "lodsd" | "lodsq"
        ) || m == "movsd" && !xmm_operand;
        op.ptr_load = mem_ops > 0 && !string;
        // Implicit registers: data only for the arithmetic that uses rax/rdx implicitly, and
        // rax for stos/lods.
        if string {
            op.naddr = 0;
            if m.starts_with("stos") {
                op.addr = [7, 0];
                op.naddr = 1;
            }
            if m.starts_with("movs") {
                op.addr = [7, 0];
                op.naddr = 1;
            }
            reg_src.retain(|s| s.reg >= 16 || !matches!(s.reg, 1 | 6 | 7));
            reg_dst.retain(|s| s.reg >= 16 || !matches!(s.reg, 1 | 6 | 7));
        } else {
            // capstone lists every register read, address registers included; those are data
            // only when an explicit operand says so (handled above).
            let addr_regs = &op.addr[..op.naddr as usize];
            for r in detail.regs_read() {
                if let Some(s) = slot(&name(*r)) {
                    if s.reg != RSP && !addr_regs.contains(&s.reg) && !reg_src.iter().any(|x| x.reg == s.reg) {
                        reg_src.push(s);
                    }
                }
            }
            for r in detail.regs_write() {
                if let Some(s) = slot(&name(*r)) {
                    if s.reg != RSP && !reg_dst.iter().any(|x| x.reg == s.reg) {
                        reg_dst.push(s);
                    }
                }
            }
        }
        if m.starts_with("stos") {
            let len = match m {
                "stosb" => 1,
                "stosw" => 2,
                "stosd" => 4,
                _ => 8,
            };
            reg_src = vec![Slot { reg: 0, off: 0, len, zext_to: 0 }];
        }
        if m.starts_with("lods") {
            let len = match m {
                "lodsb" => 1,
                "lodsw" => 2,
                "lodsd" => 4,
                _ => 8,
            };
            reg_dst = vec![Slot { reg: 0, off: 0, len, zext_to: if len == 4 { 8 } else { 0 } }];
            reg_src.clear();
        }
        reg_dst.retain(|s| s.reg != RSP);
        reg_src.retain(|s| s.reg != RSP);
        let same_regs = ops.len() == 2
            && matches!((ops[0].op_type.clone(), ops[1].op_type.clone()), (X86OperandType::Reg(a), X86OperandType::Reg(b)) if a == b);
        op.kind = match m {
            "cpuid" | "rdtsc" | "rdtscp" | "rdrand" | "rdseed" | "syscall" | "xgetbv" | "call" | "ret" | "leave"
            | "nop" | "endbr64" => Kind::Clean,
            "xor" | "sub" | "sbb" | "pxor" | "xorps" | "xorpd" | "psubb" | "psubw" | "psubd" | "psubq" | "pcmpeqb"
            | "pcmpeqw" | "pcmpeqd" | "pcmpgtb" | "pcmpgtw" | "pcmpgtd"
                if same_regs =>
            {
                Kind::Clean
            }
            "mov" | "movabs" | "movzx" | "movd" | "movq" | "movdqu" | "movdqa" | "movups" | "movaps" | "movupd"
            | "movapd" | "lddqu" | "movss" | "movlps" | "movhps" | "movlpd" | "movhpd" | "movnti" | "movntdq"
            | "movntps" | "movntpd" | "movntq" | "push" | "pop" | "movbe" => Kind::Move,
            "movsd" if !string => Kind::Move,
            "movsx" | "movsxd" => Kind::MoveSx,
            "xchg" => Kind::Swap,
            "cmpxchg" if mem_ops == 1 => Kind::CmpXchg,
            _ if string => Kind::Move,
            "lea" => {
                // The address is the value: its registers are data.
                for i in 0..op.naddr as usize {
                    reg_src.push(Slot { reg: op.addr[i], off: 0, len: 8, zext_to: 0 });
                }
                op.naddr = 0;
                Kind::Mix
            }
            _ => Kind::Mix,
        };
        // A move's destination is not also its source (capstone marks partial-register
        // destinations, `movss xmm, xmm` or `movlps`, as read too).
        if matches!(op.kind, Kind::Move | Kind::MoveSx) {
            let dsts = reg_dst.clone();
            reg_src.retain(|s| !dsts.contains(s));
        }
        // Zero extension: 32-bit general destinations, scalar SSE loads from memory, movd/movq,
        // movzx.
        for d in reg_dst.iter_mut() {
            if d.reg < 16 && d.len == 4 && d.off == 0 {
                d.zext_to = 8;
            }
            if d.reg >= 16 && (matches!(m, "movd" | "movq") || matches!(m, "movss" | "movsd") && mem_ops > 0) {
                d.zext_to = 16;
            }
            if m == "movzx" && d.reg < 16 {
                d.zext_to = d.zext_to.max(d.len);
            }
        }
        reg_dst.dedup();
        reg_src.dedup();
        if op.kind == Kind::CmpXchg {
            // The new value is the explicit register operand; the accumulator (rax's bytes of the
            // operand's size) is implicit. `cmpxchg8b`/`cmpxchg16b` are other mnemonics (`Mix`).
            let new = ops.iter().find_map(|o| match o.op_type {
                X86OperandType::Reg(r) => slot(&name(r)).map(|mut s| {
                    s.len = s.len.min(o.size.max(1));
                    s
                }),
                _ => None,
            });
            match new {
                Some(n) if n.reg < 16 => {
                    reg_src = vec![n];
                    reg_dst = vec![Slot { reg: 0, off: 0, len: n.len, zext_to: if n.len == 4 { 8 } else { 0 } }];
                }
                _ => op.kind = Kind::Mix,
            }
        }
        for (i, s) in reg_dst.iter().take(2).enumerate() {
            op.dst[i] = *s;
            op.ndst = i as u8 + 1;
        }
        for (i, s) in reg_src.iter().take(4).enumerate() {
            op.src[i] = *s;
            op.nsrc = i as u8 + 1;
        }
        op
    }
}

/// The shadow slot of a register named by capstone.
fn slot(name: &str) -> Option<Slot> {
    if let Some((reg, width)) = crate::decode::gpr_part(name) {
        let (off, len) = [(0, 8), (0, 4), (0, 2), (0, 1), (1, 1)][width];
        return Some(Slot { reg: reg as u8, off, len, zext_to: 0 });
    }
    let n: u8 = name.strip_prefix("xmm")?.parse().ok()?;
    (n < 16).then_some(Slot { reg: 16 + n, off: 0, len: 16, zext_to: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one instruction (its bytes at `pc`) with the given accesses.
    fn step(t: &mut Taint, pc: u64, code: &[u8], reads: &[(u64, usize)], writes: &[(u64, usize)]) -> Vec<TaintedWrite> {
        t.learn(pc, code);
        t.begin(pc);
        for &(a, n) in reads {
            t.access(a, n, false);
        }
        for &(a, n) in writes {
            t.access(a, n, true);
        }
        t.settle(true);
        t.applied().to_vec()
    }

    fn taint_load(t: &mut Taint, code: &[u8], addr: u64, size: usize, id: u32) {
        t.learn(0x100, code);
        t.begin(0x100);
        t.access(addr, size, false);
        t.source(addr, size as u32, id);
        t.settle(true);
    }

    /// `lock cmpxchg [rdi], rdx` at `pc` over the 8 bytes at `addr` (their load the source
    /// `id` unless 0), succeeding or failing as the machine's hook would tell.
    fn cmpxchg(t: &mut Taint, pc: u64, addr: u64, id: u32, failed: bool) -> Vec<TaintedWrite> {
        t.learn(pc, &[0xf0, 0x48, 0x0f, 0xb1, 0x17]);
        t.begin(pc);
        t.access(addr, 8, false);
        t.source(addr, 8, id);
        if t.access(addr, 8, true) {
            t.cmpxchg_outcome(failed);
        }
        t.settle(true);
        t.applied().to_vec()
    }

    /// A compare-exchange moves data as it executes: a successful one stores its new value (the
    /// compared word's labels go nowhere: the comparison only decides), a failed one loads the
    /// word into the accumulator and writes nothing, so it is no tainted store, whatever the
    /// word carries (a lock word a CAS loop keeps trying: not a side effect of anything).
    #[test]
    fn a_compare_exchange_stores_its_new_value_or_loads_the_word_and_stores_nothing() {
        let mut t = Taint::new();
        // Something tainted elsewhere, so that the engine is not quiet.
        taint_load(&mut t, &[0x48, 0x8b, 0x1f], 0x5000, 8, 1); // mov rbx, [rdi]
                                                               // Succeeds over an unpersisted word (source 7), new value clean: nothing tainted.
        assert!(cmpxchg(&mut t, 0x200, 0x1000, 7, false).is_empty());
        assert_eq!(t.label_of(0x1000, 8), 0);
        // mov [rsi], rax: the accumulator kept its own (clean) labels.
        assert!(step(&mut t, 0x208, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]).is_empty());
        // Fails over it: the accumulator got the word's labels; memory is not written.
        assert!(cmpxchg(&mut t, 0x200, 0x1000, 7, true).is_empty());
        assert_eq!(t.label_of(0x1000, 8), 0);
        let w = step(&mut t, 0x208, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[7]);
        // A tainted new value (rdx from source 9) stored by a successful one: a tainted store.
        t.learn(0x210, &[0x48, 0x8b, 0x17]); // mov rdx, [rdi]
        t.begin(0x210);
        t.access(0x3000, 8, false);
        t.source(0x3000, 8, 9);
        t.settle(true);
        let w = cmpxchg(&mut t, 0x200, 0x1000, 0, false);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[9]);
        let l = t.label_of(0x1000, 8);
        assert_eq!(t.sets.members(l), &[9]);
        // A failed one over that word reports no store and leaves its labels.
        assert!(cmpxchg(&mut t, 0x200, 0x1000, 0, true).is_empty());
        let l = t.label_of(0x1000, 8);
        assert_eq!(t.sets.members(l), &[9]);
    }

    #[test]
    fn a_loaded_value_flows_through_registers_and_memory_to_a_store() {
        let mut t = Taint::new();
        // mov rax, [rdi]   (source 7)
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 7);
        // add rax, 1
        step(&mut t, 0x104, &[0x48, 0x83, 0xc0, 0x01], &[], &[]);
        // mov rbx, rax
        step(&mut t, 0x108, &[0x48, 0x89, 0xc3], &[], &[]);
        // mov [rsi], rbx
        let w = step(&mut t, 0x10c, &[0x48, 0x89, 0x1e], &[], &[(0x2000, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[7]);
        assert_eq!(w[0].address, 0);
        // xor eax, eax clears rax entirely; a store of it is clean.
        step(&mut t, 0x110, &[0x31, 0xc0], &[], &[]);
        let w = step(&mut t, 0x112, &[0x48, 0x89, 0x06], &[], &[(0x3000, 8)]);
        assert!(w.is_empty());
    }

    /// The shortcut for instructions that touch nothing tainted (`changes_nothing`) must not
    /// skip one that does: a clean store over a tainted byte cleans it, a load from a tainted
    /// page picks its label up, and a store through a tainted pointer is reported.
    #[test]
    fn code_forgotten_leaves_the_instruction_cache_too() {
        let mut t = Taint::new();
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 7);
        // mov [rsi], rax: a tainted store.
        let w = step(&mut t, 0x200, &[0x48, 0x89, 0x06], &[], &[(0x3000, 8)]);
        assert_eq!(w.len(), 1);
        assert!(t.knows(0x200));
        t.forget_code(0x1f8, 0x201);
        assert!(!t.knows(0x200), "the cached decoding went with the code");
        // New code at the same PC: mov [rsi], rbx (clean) is applied, not the old instruction.
        let w = step(&mut t, 0x200, &[0x48, 0x89, 0x1e], &[], &[(0x3000, 8)]);
        assert!(w.is_empty());
        assert_eq!(t.label_of(0x3000, 8), 0);
    }

    #[test]
    fn clean_instructions_are_skipped_and_tainted_ones_are_not() {
        let mut t = Taint::new();
        // mov rax, [rdi]   (source 5); mov [rsi], rax → 0x2000 tainted.
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 5);
        step(&mut t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]);
        // Clean operands, clean memory elsewhere: nothing changes.
        assert!(step(&mut t, 0x108, &[0x48, 0x89, 0x19], &[], &[(0x8000, 8)]).is_empty());
        assert_eq!(t.label_of(0x8000, 8), 0);
        // mov rbx, [rcx] from the tainted page's other bytes: clean; from the tainted bytes: 5.
        step(&mut t, 0x10c, &[0x48, 0x8b, 0x19], &[(0x2008, 8)], &[]);
        let w = step(&mut t, 0x110, &[0x48, 0x89, 0x1a], &[], &[(0x9000, 8)]);
        assert!(w.is_empty(), "the page's clean bytes carry nothing");
        step(&mut t, 0x114, &[0x48, 0x8b, 0x19], &[(0x2000, 8)], &[]);
        let w = step(&mut t, 0x118, &[0x48, 0x89, 0x1a], &[], &[(0x9000, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[5]);
        // xor ebx, ebx; mov [rdx], rbx over the tainted 0x9000 cleans it.
        step(&mut t, 0x11c, &[0x31, 0xdb], &[], &[]);
        step(&mut t, 0x11e, &[0x48, 0x89, 0x1a], &[], &[(0x9000, 8)]);
        assert_eq!(t.label_of(0x9000, 8), 0);
        // rax still holds 5: a constant store through it is address flow.
        let w = step(&mut t, 0x121, &[0xc7, 0x00, 0x01, 0x00, 0x00, 0x00], &[], &[(0xa000, 4)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].address), &[5]);
    }

    #[test]
    fn sse_copy_through_a_buffer_keeps_byte_labels() {
        let mut t = Taint::new();
        // movdqu xmm0, [rsi] reading 16 bytes of which the first 8 are source 3.
        t.learn(0x100, &[0xf3, 0x0f, 0x6f, 0x06]);
        t.begin(0x100);
        t.access(0x1000, 8, false);
        t.access(0x1008, 8, false);
        t.source(0x1000, 8, 3);
        t.settle(true);
        // movdqu [rdi], xmm0 → DRAM buffer
        let w = step(&mut t, 0x104, &[0xf3, 0x0f, 0x7f, 0x07], &[], &[(0x5000, 8), (0x5008, 8)]);
        assert_eq!(w.len(), 1, "only the first half is tainted");
        assert_eq!(w[0].addr, 0x5000);
        // movdqu xmm1, [rdi]; movdqu [rdx], xmm1 (to PM)
        step(&mut t, 0x108, &[0xf3, 0x0f, 0x6f, 0x0f], &[(0x5000, 8), (0x5008, 8)], &[]);
        let w = step(&mut t, 0x10c, &[0xf3, 0x0f, 0x7f, 0x0a], &[], &[(0x9000, 8), (0x9008, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[3]);
    }

    #[test]
    fn address_flow_is_reported_for_a_constant_store_through_a_tainted_pointer() {
        let mut t = Taint::new();
        // mov rax, [rdi] (source 1); add rax, rbx; mov qword [rax+8], 1
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 1);
        step(&mut t, 0x104, &[0x48, 0x01, 0xd8], &[], &[]);
        let w = step(&mut t, 0x108, &[0x48, 0xc7, 0x40, 0x08, 0x01, 0, 0, 0], &[], &[(0x7008, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].content, 0);
        assert_eq!(t.sets.members(w[0].address), &[1]);
    }

    #[test]
    fn a_value_loaded_through_a_tainted_pointer_carries_the_pointer_label() {
        let mut t = Taint::new();
        // mov rax, [rdi] (source 1: an unpersisted pointer); mov rbx, [rax+8] (a clean field of
        // the node it points to); mov [rsi], rbx: content flow of 1, one load deeper.
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 1);
        step(&mut t, 0x104, &[0x48, 0x8b, 0x58, 0x08], &[(0x7008, 8)], &[]);
        let w = step(&mut t, 0x108, &[0x48, 0x89, 0x1e], &[], &[(0x2000, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[1]);
        // mov qword [rbx], 1: a store through the loaded field is address flow of 1.
        let w = step(&mut t, 0x10c, &[0x48, 0xc7, 0x03, 0x01, 0, 0, 0], &[], &[(0x9000, 8)]);
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].address), &[1]);
        // A store through a clean pointer of a clean value stays clean, and its memory does too.
        step(&mut t, 0x114, &[0x31, 0xdb], &[], &[]); // xor ebx, ebx
        let w = step(&mut t, 0x116, &[0x48, 0x89, 0x1e], &[], &[(0x2000, 8)]);
        assert!(w.is_empty());
        assert_eq!(t.label_of(0x2000, 8), 0);
    }

    #[test]
    fn shadow_pages_are_freed_when_clean_or_unmapped() {
        let mut t = Taint::new();
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 1);
        // mov [rsi], rax into two pages; then clean one byte range and unmap the other page.
        step(&mut t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x20_0000, 8)]);
        step(&mut t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x30_0ff8, 8)]);
        assert_eq!(t.shadow_pages(), (2, 2));
        t.clean(0x20_0000, 8);
        assert_eq!(t.shadow_pages().0, 1, "the page's only tainted bytes were cleaned");
        t.unmapped(0x10_0000, 0x4000_0000);
        assert_eq!(t.shadow_pages().0, 0);
        assert_eq!(t.label_of(0x30_0ff8, 8), 0);
        // A freed page is reused.
        step(&mut t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x50_0000, 8)]);
        assert_eq!(t.shadow_pages(), (1, 2));
    }

    #[test]
    fn a_compare_and_branch_taints_nothing() {
        let mut t = Taint::new();
        // mov rax, [rdi] (source 1); test al, 1; mov ecx, 7; mov [rsi], ecx
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 1);
        step(&mut t, 0x104, &[0xa8, 0x01], &[], &[]);
        step(&mut t, 0x106, &[0xb9, 0x07, 0, 0, 0], &[], &[]);
        let w = step(&mut t, 0x10b, &[0x89, 0x0e], &[], &[(0x2000, 4)]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_faulting_instruction_leaves_no_taint_and_threads_have_own_registers() {
        let mut t = Taint::new();
        t.learn(0x100, &[0x48, 0x8b, 0x07]);
        t.begin(0x100);
        t.access(0x1000, 8, false);
        t.source(0x1000, 8, 1);
        t.settle(false);
        assert!(t.is_quiet());
        taint_load(&mut t, &[0x48, 0x8b, 0x07], 0x1000, 8, 1);
        assert!(!t.is_quiet());
        t.switch_thread(2);
        let w = step(&mut t, 0x10c, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]);
        assert!(w.is_empty(), "thread 2's rax is clean");
        t.switch_thread(0);
        let w = step(&mut t, 0x10c, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]);
        assert_eq!(w.len(), 1);
        t.clean(0x2000, 8);
        assert_eq!(t.label_of(0x2000, 8), 0);
    }

    /// A saved state restored gives back the labels and the label numbering: a run restored from
    /// it interns new sets as the uninterrupted run did, whatever ran between.
    #[test]
    fn a_saved_state_restores_labels_and_their_numbering() {
        let prefix = |t: &mut Taint| {
            taint_load(t, &[0x48, 0x8b, 0x07], 0x1000, 8, 3); // mov rax, [rdi] (source 3)
            step(t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8)]); // mov [rsi], rax
        };
        let go_on = |t: &mut Taint| {
            taint_load(t, &[0x48, 0x8b, 0x1f], 0x1100, 8, 4); // mov rbx, [rdi] (source 4)
            step(t, 0x108, &[0x48, 0x01, 0xd8], &[], &[]); // add rax, rbx
            let w = step(t, 0x10c, &[0x48, 0x89, 0x06], &[], &[(0x3000, 8)]); // mov [rsi], rax
            (w[0].content, t.sets.members(w[0].content).to_vec(), t.label_of(0x2000, 8), t.shadow_pages())
        };
        let mut whole = Taint::new();
        prefix(&mut whole);
        let expected = go_on(&mut whole);
        assert_eq!(expected.1, vec![3, 4]);
        let mut t = Taint::new();
        prefix(&mut t);
        let saved = t.save();
        // Something else: other sources and unions, the tainted bytes overwritten, another thread.
        taint_load(&mut t, &[0x48, 0x8b, 0x1f], 0x1200, 8, 6); // mov rbx, [rdi] (source 6)
        step(&mut t, 0x108, &[0x48, 0x01, 0xd8], &[], &[]); // add rax, rbx
        step(&mut t, 0x104, &[0x48, 0x89, 0x06], &[], &[(0x2000, 8), (0x9000, 8)]);
        t.switch_thread(2);
        t.restore(&saved);
        let l = t.label_of(0x2000, 8);
        assert_eq!(t.sets.members(l), &[3]);
        assert_eq!(t.label_of(0x9000, 8), 0);
        assert_eq!(go_on(&mut t), expected, "the same labels, numbered the same");
    }

    #[test]
    fn rep_movs_copies_each_element() {
        let mut t = Taint::new();
        // movsb with a tainted source byte.
        taint_load(&mut t, &[0x8a, 0x07], 0x1000, 1, 9); // mov al, [rdi]
        step(&mut t, 0x104, &[0x88, 0x06], &[], &[(0x3000, 1)]); // mov [rsi], al
        let w = step(&mut t, 0x108, &[0xf3, 0xa4], &[(0x3000, 1)], &[(0x4000, 1)]); // rep movsb
        assert_eq!(w.len(), 1);
        assert_eq!(t.sets.members(w[0].content), &[9]);
    }
}
