//! Instruction classification: each translated block decoded once with capstone and cached.
//!
//! Unicorn tells the machine little about what a block does: flushes and fences produce no hook at
//! all, a non-temporal store is indistinguishable from a cached one, privileged instructions simply
//! run (the guest is at ring 0), and a block's hook carries only its address and byte size. The
//! first time a block is entered, its bytes are decoded and the result kept: instruction boundaries
//! (to count retired instructions exactly when a block stops early), how the block ends (calls and
//! returns drive the shadow call stack), and the instructions that need a code hook of their own
//! ([`Special`]). The cache is keyed by (address, size), so a block re-translated with other
//! boundaries gets its own entry; it is dropped for a range whenever the guest's code there
//! changes.
//!
//! Decoding is a sixth of a short run's CPU (capstone decodes and prints every instruction of
//! libc's start-up), and the runs of one process mostly run the same code: `ferrite compare` runs
//! each case once per detector, an exploration or a crash campaign runs one program many times,
//! each on a machine of its own. So every decoding is also kept in one cache for the process
//! ([`SHARED`]), keyed by the block's address and its bytes: a machine that enters a block some
//! machine of the process decoded before copies the result instead of decoding it again (a
//! block's decoding is a function of its address and bytes alone).

use capstone::arch::x86::{ArchMode, X86OperandType};
use capstone::arch::{ArchOperand, BuildsCapstone, DetailsArchInsn};
use capstone::{Capstone, RegId};
use rustc_hash::FxHashMap;
use unicorn_engine::RegisterX86 as Reg;

use crate::client;

/// A memory operand, enough to compute its effective address from the registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemRef {
    /// The base register, if any.
    pub base: Option<Reg>,
    /// The index register, if any.
    pub index: Option<Reg>,
    /// What the index is multiplied by: 1, 2, 4 or 8 (0 when there is no index).
    pub scale: u8,
    /// The displacement, sign-extended.
    pub disp: i64,
    /// RIP-relative: the base is the address of the next instruction.
    pub next_pc: Option<u64>,
    /// An `fs:`/`gs:` segment override adds that segment's base.
    pub segment: Option<Reg>,
}

/// An instruction the machine must see executed, in program order, from a code hook at its PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// Would succeed at ring 0 but raises #GP in user mode on Linux.
    Privileged,
    /// RDRAND/RDSEED: hidden in CPUID, emulated from the seed if executed anyway.
    Rand {
        /// `rdseed` rather than `rdrand`.
        seed_insn: bool,
    },
    /// A cache-line flush of the line holding the operand's address.
    Flush(FlushOp, MemRef),
    /// A fence: `sfence`, `mfence`, or a locked instruction or `xchg` with memory, seen before it
    /// executes (its store also reaches the memory hook).
    Fence(FenceOp),
    /// A locked `cmpxchg` or an `xchg` with memory: a fence like [`Special::Fence`] with
    /// [`FenceOp::Locked`], with the word it changes (`size` bytes: 1, 2, 4 or 8), so that a lock
    /// built from atomics on a DRAM word can be followed (`Interest::LOCK_WORDS`).
    LockedRmw {
        /// The memory operand.
        word: MemRef,
        /// Its width in bytes.
        size: u8,
    },
    /// The `xchg rbx, rbx` of a Valgrind client request ([`crate::client`]): preceded by the
    /// preamble `rol rdi, 3; rol rdi, 13; rol rdi, 61; rol rdi, 51` in this block, or by as
    /// much of its end as the block holds when the block starts inside the sequence (the
    /// translator may end a block anywhere, near a page boundary or at its size limit). The
    /// machine checks the whole preamble in guest memory before answering.
    ClientRequest,
    /// `pause`, the spin-wait hint: a yield when another thread can run, so that a thread
    /// spinning on a flag lets the thread it waits for in.
    Pause,
    /// A plain load or store in code compiled from C++'s `std::atomic`, or naming one of a C
    /// program's static `_Atomic` objects (a release store or an acquire load is a plain `mov`
    /// on x86): an access to an atomic object, which orders threads (`Interest::ATOMICS`).
    /// Found only where the machine is told which code or objects are atomic
    /// ([`Decoder::atomic_accesses`], [`Decoder::object_accesses`]), not by
    /// [`Decoder::insert`]'s decoding.
    AtomicAccess {
        /// The memory operand.
        mem: MemRef,
        /// Its width in bytes.
        size: u8,
        /// Whether the instruction writes it (a release) rather than only reads it (an acquire).
        store: bool,
    },
}

/// Which flush instruction a [`Special::Flush`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushOp {
    /// `clflush`: flushes and invalidates, ordered with stores to the same line.
    Clflush,
    /// `clflushopt`: flushes and invalidates, weakly ordered.
    Clflushopt,
    /// `clwb`: writes the line back, may keep it cached.
    Clwb,
}

/// Which fence a [`Special::Fence`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceOp {
    /// `sfence`: orders stores, flushes and NT stores.
    Sfence,
    /// `mfence`: orders loads and stores as well.
    Mfence,
    /// A locked read-modify-write or `xchg` with memory: a full fence on x86.
    Locked,
}

/// How a block ends, as far as the shadow call stack cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// A call at `pc`; the callee returns to `ret`.
    Call {
        /// Address of the call instruction.
        pc: u64,
        /// Its return address: the next instruction's.
        ret: u64,
    },
    /// A `ret`: the shadow call stack pops.
    Ret,
    /// Anything else (a jump, a fall-through, a block cut short by the translator).
    Other,
}

/// The memory-access character of one instruction, for the event stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AccessKind {
    /// An ordinary access (or none).
    #[default]
    Plain,
    /// A non-temporal store.
    NonTemporal,
    /// One element of a `rep movs`/`rep stos`.
    RepString,
    /// A locked read-modify-write or `xchg` with memory.
    Locked,
    /// A locked compare-and-exchange: when it fails it writes the unchanged value back.
    LockedCmpxchg,
}

/// What the machine needs to know about one translated block, decoded once and cached.
#[derive(Clone, Debug)]
pub struct BlockInfo {
    /// Start address of each instruction, in order.
    pub insns: Box<[u64]>,
    /// How the block ends, for the shadow call stack.
    pub term: Term,
    /// Instructions that need a code hook of their own, by PC, in order.
    pub specials: Box<[(u64, Special)]>,
    /// Instructions whose memory accesses are not plain, by PC.
    pub access: Box<[(u64, AccessKind)]>,
}

impl BlockInfo {
    /// Instructions of this block that retire before the one at `pc`.
    pub fn retired_before(&self, pc: u64) -> u64 {
        self.insns.partition_point(|a| *a < pc) as u64
    }

    /// [`retired_before`](Self::retired_before), starting from `hint`, the index the block's
    /// previous access was at: a block's accesses mostly come in address order, so the answer is
    /// usually at or just past it.
    pub fn retired_before_from(&self, pc: u64, hint: usize) -> usize {
        let mut i = hint.min(self.insns.len());
        if i > 0 && self.insns[i - 1] >= pc {
            return self.insns.partition_point(|a| *a < pc);
        }
        while i < self.insns.len() && self.insns[i] < pc {
            i += 1;
        }
        i
    }

    /// How the instruction at `pc` accesses memory (`Plain` unless it is listed in `access`).
    pub fn access_kind(&self, pc: u64) -> AccessKind {
        self.access.iter().find(|(p, _)| *p == pc).map(|(_, k)| *k).unwrap_or_default()
    }
}

/// The decoded-block cache and the two capstone handles that fill it.
pub struct Decoder {
    cs: Capstone,
    /// With operand details, for the few instructions whose operands the machine needs.
    detailed: Capstone,
    /// Decoded blocks in slots that stay put, so the block hook can name the running block by
    /// its slot and the memory hooks find it without hashing ([`Decoder::at`]).
    slots: Vec<Option<BlockInfo>>,
    /// Slots by block (address and size).
    index: FxHashMap<u64, u32>,
    /// Slots freed by [`Decoder::invalidate`], to be reused.
    free: Vec<u32>,
    /// The address space's memory that is both writable and executable, as sorted, disjoint
    /// ranges (a JIT's code cache; nothing for ordinary programs). The guest's own stores can
    /// rewrite code there without any system call: Unicorn notices and translates such code
    /// again, but a decoding cached by address and size would then describe the old
    /// instructions, so blocks there keep their bytes ([`Decoder::rewritten`]). Shared files'
    /// executable views are here too ([`Decoder::aliased_code`]).
    writable_code: Vec<(u64, u64)>,
    /// The part of [`Decoder::writable_code`] that is executable but not writable through its
    /// own address: a file mapped shared and executable (a JIT's dual mapping writes code
    /// through another view, or `pwrite`s it). Unicorn sees no store to those addresses, so
    /// its translations there go stale when the code changes: a block found rewritten is
    /// translated again by the block hook (`hooks::forget_if_rewritten`).
    aliased_code: Vec<(u64, u64)>,
    /// The bytes each block decoded in writable code had, by slot.
    code_bytes: FxHashMap<u32, Box<[u8]>>,
}

/// The decodings made by every machine of the process, by [`key`], each with its block's bytes
/// (two programs may have different code at one address): [`Decoder::decode`] looks here first.
static SHARED: std::sync::OnceLock<std::sync::Mutex<SharedBlocks>> = std::sync::OnceLock::new();

/// The blocks in [`SHARED`]; it starts over past [`SHARED_BLOCKS`] of them, so that a process
/// running many different programs keeps a bounded cache (at most a few MiB).
#[derive(Default)]
struct SharedBlocks {
    blocks: FxHashMap<u64, Vec<SharedBlock>>,
    count: usize,
}

/// A block's bytes and their decoding.
type SharedBlock = (Box<[u8]>, BlockInfo);

/// How many decoded blocks [`SHARED`] keeps before it starts over: a large program's working
/// set (libc's start-up is about a thousand blocks).
const SHARED_BLOCKS: usize = 1 << 15;

fn shared() -> std::sync::MutexGuard<'static, SharedBlocks> {
    // A panic while holding the lock leaves a consistent cache behind (entries are inserted
    // whole).
    SHARED.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn key(addr: u64, size: u32) -> u64 {
    // User-space addresses fit in 48 bits; blocks are at most a few KiB.
    addr ^ (u64::from(size) << 48)
}

impl Default for Decoder {
    fn default() -> Self {
        let cs = Capstone::new().x86().mode(ArchMode::Mode64).build().expect("capstone supports x86-64");
        let detailed =
            Capstone::new().x86().mode(ArchMode::Mode64).detail(true).build().expect("capstone supports x86-64");
        Decoder {
            cs,
            detailed,
            slots: Vec::new(),
            index: FxHashMap::default(),
            free: Vec::new(),
            writable_code: Vec::new(),
            aliased_code: Vec::new(),
            code_bytes: FxHashMap::default(),
        }
    }
}

impl Decoder {
    /// The cached decoding of the block at `addr` of `size` bytes, if it has been inserted.
    pub fn get(&self, addr: u64, size: u32) -> Option<&BlockInfo> {
        self.at(self.slot(addr, size)?)
    }

    /// The slot of the block at `addr` of `size` bytes, if it has been inserted.
    pub fn slot(&self, addr: u64, size: u32) -> Option<u32> {
        self.index.get(&key(addr, size)).copied()
    }

    /// The block in `slot` (none once invalidated).
    pub fn at(&self, slot: u32) -> Option<&BlockInfo> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Decodes `bytes` (the block at `addr`) and caches the result; returns its slot too.
    pub fn insert(&mut self, addr: u64, size: u32, bytes: &[u8]) -> (u32, &BlockInfo) {
        let slot = match self.index.get(&key(addr, size)) {
            Some(&slot) => slot,
            None => {
                let info = self.decode(addr, bytes);
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.slots[slot as usize] = Some(info);
                        slot
                    }
                    None => {
                        self.slots.push(Some(info));
                        (self.slots.len() - 1) as u32
                    }
                };
                self.index.insert(key(addr, size), slot);
                if self.in_writable_code(addr, size) {
                    self.code_bytes.insert(slot, bytes.into());
                }
                slot
            }
        };
        (slot, self.slots[slot as usize].as_ref().expect("an indexed slot holds its block"))
    }

    /// Forgets every block overlapping `[start, end)` (code was rewritten or unmapped).
    pub fn invalidate(&mut self, start: u64, end: u64) {
        self.forget_where(|lo, hi| lo < end && hi > start);
    }

    /// Forgets every block holding an instruction at one of `pcs` (sorted): one pass over the
    /// blocks, whatever their number.
    pub fn invalidate_at(&mut self, pcs: &[u64]) {
        if pcs.is_empty() {
            return;
        }
        self.forget_where(|lo, hi| {
            let i = pcs.partition_point(|&pc| pc < lo);
            pcs.get(i).is_some_and(|&pc| pc < hi)
        });
    }

    /// Forgets every block whose span `[first instruction, last instruction + 16)` `hit` says.
    fn forget_where(&mut self, hit: impl Fn(u64, u64) -> bool) {
        let (slots, free, bytes) = (&mut self.slots, &mut self.free, &mut self.code_bytes);
        self.index.retain(|_, slot| {
            let Some(b) = slots[*slot as usize].as_ref() else { return false };
            let lo = b.insns.first().copied().unwrap_or(0);
            let hi = b.insns.last().map(|a| a + 16).unwrap_or(0);
            let keep = !hit(lo, hi);
            if !keep {
                slots[*slot as usize] = None;
                free.push(*slot);
                bytes.remove(slot);
            }
            keep
        });
    }

    /// The address space's code that may change without a system call is now `ranges`
    /// (sorted, disjoint; writable and executable memory, and `aliased`), of which `aliased`
    /// (sorted, disjoint) is what Unicorn does not see written ([`Decoder::aliased_code`]).
    pub fn set_writable_code(&mut self, ranges: Vec<(u64, u64)>, aliased: Vec<(u64, u64)>) {
        self.writable_code = ranges;
        self.aliased_code = aliased;
    }

    /// The ranges [`Decoder::set_writable_code`] set last.
    pub fn writable_code(&self) -> &[(u64, u64)] {
        &self.writable_code
    }

    /// Whether `addr` is in code that Unicorn does not see written (a shared file's
    /// executable view).
    pub fn in_aliased_code(&self, addr: u64) -> bool {
        let i = self.aliased_code.partition_point(|r| r.1 <= addr);
        self.aliased_code.get(i).is_some_and(|r| r.0 <= addr)
    }

    /// Whether the address space has writable and executable memory.
    pub fn has_writable_code(&self) -> bool {
        !self.writable_code.is_empty()
    }

    /// Whether any of the block at `addr` of `size` bytes lies in writable code. One test of an
    /// empty list for ordinary programs.
    #[inline]
    pub fn in_writable_code(&self, addr: u64, size: u32) -> bool {
        !self.writable_code.is_empty() && {
            let end = addr + u64::from(size.max(1));
            let i = self.writable_code.partition_point(|r| r.1 <= addr);
            self.writable_code.get(i).is_some_and(|r| r.0 < end)
        }
    }

    /// Whether the block in `slot`, decoded in writable code, no longer has the bytes it was
    /// decoded from: `read` fills a buffer of the block's size with its bytes now (false when it
    /// cannot). A block not in writable code is never rewritten behind the machine's back
    /// (every other change of code is a system call: [`Decoder::invalidate`]).
    pub fn rewritten(&self, slot: u32, read: impl FnOnce(&mut [u8]) -> bool) -> bool {
        let Some(old) = self.code_bytes.get(&slot) else { return false };
        // Blocks are short (Unicorn ends one within a page): the copy stays on the stack.
        let mut buf = [0u8; 4096];
        let Some(now) = buf.get_mut(..old.len()) else { return true };
        !read(now) || **old != *now
    }

    /// The decoding of `bytes`, the block at `addr`: from [`SHARED`] when a machine of the
    /// process has decoded the same bytes at the same address, else decoded and added there.
    fn decode(&self, addr: u64, bytes: &[u8]) -> BlockInfo {
        let k = key(addr, bytes.len() as u32);
        if let Some((_, info)) = shared().blocks.get(&k).and_then(|v| v.iter().find(|(b, _)| **b == *bytes)) {
            return info.clone();
        }
        let info = self.decode_uncached(addr, bytes);
        let mut cache = shared();
        if cache.count >= SHARED_BLOCKS {
            *cache = SharedBlocks::default();
        }
        let same = cache.blocks.entry(k).or_default();
        if !same.iter().any(|(b, _)| **b == *bytes) {
            same.push((bytes.into(), info.clone()));
            cache.count += 1;
        }
        info
    }

    fn decode_uncached(&self, addr: u64, bytes: &[u8]) -> BlockInfo {
        let mut insns = Vec::new();
        let mut specials = Vec::new();
        let mut access = Vec::new();
        let mut term = Term::Other;
        // Which preamble instruction each of the last four instructions was, oldest first.
        let mut recent: [Option<usize>; 4] = [None; 4];
        if let Ok(list) = self.cs.disasm_all(bytes, addr) {
            for i in list.iter() {
                let pc = i.address();
                if i.bytes() == client::XCHG_RBX && ends_with_preamble(&recent, insns.len()) {
                    specials.push((pc, Special::ClientRequest));
                }
                recent.rotate_left(1);
                recent[3] = preamble_index(i.bytes());
                insns.push(pc);
                let m = i.mnemonic().unwrap_or("");
                let ops = i.op_str().unwrap_or("");
                let locked = has_lock_prefix(i.bytes());
                let mem = ops.contains('[');
                term = match m {
                    "call" => Term::Call { pc, ret: pc + i.len() as u64 },
                    "ret" => Term::Ret,
                    _ => Term::Other,
                };
                match classify(m, ops, locked, mem) {
                    Some(Special::Flush(op, _)) => {
                        if let Some((r, _)) = self.mem_operand(i.bytes(), pc) {
                            specials.push((pc, Special::Flush(op, r)));
                        }
                    }
                    Some(Special::Fence(FenceOp::Locked)) if m.contains("xchg") => {
                        // The word a lock built from atomics takes and gives back (a DRAM one is
                        // seen nowhere else): where it is, and how wide.
                        let word = self.mem_operand(i.bytes(), pc).filter(|(_, size)| matches!(size, 1 | 2 | 4 | 8));
                        specials.push((
                            pc,
                            word.map_or(Special::Fence(FenceOp::Locked), |(word, size)| Special::LockedRmw {
                                word,
                                size,
                            }),
                        ));
                    }
                    Some(s) => specials.push((pc, s)),
                    None => {}
                }
                let kind = match m {
                    "movnti" | "movntdq" | "movntps" | "movntpd" | "movntq" | "maskmovdqu" | "movntsd" | "movntss" => {
                        AccessKind::NonTemporal
                    }
                    _ if locked && mem && m.contains("cmpxchg") => AccessKind::LockedCmpxchg,
                    _ if (locked || m == "xchg") && mem => AccessKind::Locked,
                    _ if m.starts_with("rep") && (ops.contains("movs") || ops.contains("stos")) => {
                        AccessKind::RepString
                    }
                    _ if m.starts_with("rep") => {
                        // capstone spells `rep movsb` as mnemonic "rep movsb" in some versions.
                        if m.contains("movs") || m.contains("stos") {
                            AccessKind::RepString
                        } else {
                            AccessKind::Plain
                        }
                    }
                    _ => AccessKind::Plain,
                };
                if kind != AccessKind::Plain {
                    access.push((pc, kind));
                }
            }
        }
        BlockInfo {
            insns: insns.into_boxed_slice(),
            term,
            specials: specials.into_boxed_slice(),
            access: access.into_boxed_slice(),
        }
    }
}

impl Decoder {
    /// The accesses to atomic objects in the block at `addr` (`bytes`): each instruction at a PC
    /// `atomic` accepts that reads or writes one memory operand and needs no hook of its own
    /// already (a locked instruction is a [`Special::LockedRmw`] or a fence). Decoded apart from
    /// [`Decoder::insert`] because it depends on what the machine was told about the program, not
    /// on the bytes alone (the shared cache holds only the latter). Stack-frame operands are left
    /// out (`rsp`-based, or `rbp` less a displacement): at -O0 the out-of-line `load` and `store`
    /// spill their arguments there (`this`, the memory order), several times per access, and
    /// no other thread touches those slots. What is lost: an atomic local that `main` shares by
    /// reference, accessed by `main` itself through its frame (its threads reach it through a
    /// pointer, and are seen).
    pub fn atomic_accesses(&self, addr: u64, bytes: &[u8], atomic: impl Fn(u64) -> bool) -> Vec<(u64, Special)> {
        let mut out = Vec::new();
        let Ok(list) = self.cs.disasm_all(bytes, addr) else { return out };
        for i in list.iter() {
            let pc = i.address();
            let (m, ops) = (i.mnemonic().unwrap_or(""), i.op_str().unwrap_or(""));
            if !atomic(pc) || !ops.contains('[') || m == "lea" || m.starts_with("nop") || m.starts_with("prefetch") {
                continue;
            }
            if classify(m, ops, has_lock_prefix(i.bytes()), true).is_some() {
                continue;
            }
            let Some((mem, size)) = self.mem_operand(i.bytes(), pc) else { continue };
            let frame = mem.base == Some(Reg::RSP) || mem.base == Some(Reg::RBP) && mem.index.is_none() && mem.disp < 0;
            if frame {
                continue;
            }
            // Intel syntax names the destination first: a memory destination is written (a
            // `cmp` or `test` only reads it).
            let dest_is_mem = ops.split(',').next().is_some_and(|d| d.contains('['));
            let store =
                dest_is_mem && !matches!(m, "cmp" | "test" | "bt" | "ucomiss" | "ucomisd" | "comiss" | "comisd");
            out.push((pc, Special::AtomicAccess { mem, size, store }));
        }
        out
    }

    /// The accesses to the program's static atomic objects (`objects`: sorted, disjoint
    /// `[start, end)` ranges, C11 `_Atomic` globals from DWARF) in the block at `addr`
    /// (`bytes`): each instruction whose memory operand addresses one of them, through `rip`,
    /// an absolute address, or a register the block itself loaded with a static address
    /// (`lea rax, [rip + head]`, `mov eax, OFFSET head`), directly or through a frame slot of
    /// `rbp` (-O0 spills the pointer of `atomic_store_explicit(&head, ...)` to its frame and
    /// reloads it in the same statement). An indexed operand (`[rcx + rdi*8]`, an element of
    /// an atomic array) counts when its base and displacement alone fall in an object: an
    /// over-approximation, as the hook checks each access's effective address. A register or slot is forgotten when anything else
    /// writes it, and every register at a call. Pointers that come from elsewhere (an argument,
    /// another block) are not followed: an access to an atomic object through a pointer the
    /// program passed around is not seen. Locked instructions are left out (they are
    /// [`Special::LockedRmw`]s or fences already). Decoded with operand details: called only for
    /// programs with such objects, once per block of the program's own code.
    pub fn object_accesses(&self, addr: u64, bytes: &[u8], objects: &[(u64, u64)]) -> Vec<(u64, Special)> {
        let mut out = Vec::new();
        if objects.is_empty() {
            return out;
        }
        let within = |a: u64| {
            let i = objects.partition_point(|r| r.0 <= a);
            i > 0 && a < objects[i - 1].1
        };
        let Ok(list) = self.detailed.disasm_all(bytes, addr) else { return out };
        // What the block put in each general register and `rbp` slot: a static address.
        let mut regs: [Option<u64>; 16] = [None; 16];
        let mut slots: Vec<(i64, u64)> = Vec::new();
        for i in list.iter() {
            let pc = i.address();
            let (m, ops) = (i.mnemonic().unwrap_or(""), i.op_str().unwrap_or(""));
            let Ok(detail) = self.detailed.insn_detail(i) else {
                regs = [None; 16];
                slots.clear();
                continue;
            };
            let arch = detail.arch_detail();
            let Some(x86) = arch.x86() else { continue };
            let operands: Vec<_> = x86.operands().collect();
            let name = |id: RegId| self.detailed.reg_name(id).unwrap_or_default();
            let mut mem = None;
            for op in &operands {
                if let X86OperandType::Mem(mm) = op.op_type {
                    mem = Some((mm, op.size));
                    break;
                }
            }
            // The static address the memory operand names, if the block knows it.
            let mut target = None;
            let mut frame_slot = None;
            if let Some((mm, _)) = &mem {
                let (base, index, seg) = (name(mm.base()), mm.index().0, mm.segment().0);
                let seg_ok = seg == 0 || !matches!(name(mm.segment()).as_str(), "fs" | "gs");
                // With an index, the object the base names (an element of a global array,
                // `progress[id]`): a candidate, which the hook checks by its effective address.
                if seg_ok {
                    if base == "rip" {
                        target = Some((pc + i.len() as u64).wrapping_add(mm.disp() as u64));
                    } else if mm.base().0 == 0 {
                        target = (index != 0 || mm.disp() > 0).then_some(mm.disp() as u64);
                    } else if base == "rbp" {
                        frame_slot = (index == 0).then_some(mm.disp());
                    } else if let Some(v) = gpr_index(&base).and_then(|r| regs[r]) {
                        target = Some(v.wrapping_add(mm.disp() as u64));
                    }
                }
            }
            let locked = has_lock_prefix(i.bytes());
            let plain = m != "lea" && !m.starts_with("nop") && !m.starts_with("prefetch") && !m.starts_with("clflush");
            if let (Some(t), true) = (target, plain) {
                if within(t) && classify(m, ops, locked, true).is_none() && !m.starts_with("clwb") {
                    if let Some((mem, size)) = self.mem_operand(i.bytes(), pc) {
                        let dest_is_mem = ops.split(',').next().is_some_and(|d| d.contains('['));
                        let store = dest_is_mem
                            && !matches!(m, "cmp" | "test" | "bt" | "ucomiss" | "ucomisd" | "comiss" | "comisd");
                        out.push((pc, Special::AtomicAccess { mem, size, store }));
                    }
                }
            }
            // What the instruction leaves in registers and slots.
            let first_reg = match operands.first().map(|o| &o.op_type) {
                Some(X86OperandType::Reg(r)) => Some(name(*r)),
                _ => None,
            };
            let source = match operands.get(1).map(|o| &o.op_type) {
                Some(X86OperandType::Reg(r)) => gpr_index(&name(*r)).and_then(|g| regs[g]),
                Some(X86OperandType::Imm(v)) if m == "mov" || m == "movabs" => Some(*v as u64),
                Some(X86OperandType::Mem(_)) if m == "lea" => target,
                Some(X86OperandType::Mem(_)) if m == "mov" && mem.is_some_and(|(_, size)| size == 8) => {
                    frame_slot.and_then(|d| slots.iter().find(|s| s.0 == d).map(|s| s.1))
                }
                _ => None,
            };
            // A write of a whole 64-bit register, or of its low half (which clears the rest).
            let full = |r: &str| {
                (r.starts_with('r') && !r.ends_with('d') && !r.ends_with('w') && !r.ends_with('b'))
                    || (r.starts_with('e') && r.len() == 3)
            };
            let mut keep = None;
            if matches!(m, "mov" | "movabs" | "lea") {
                if let Some(r) = first_reg.as_deref().filter(|r| full(r)).and_then(gpr_index) {
                    keep = source.map(|v| (r, v));
                }
            }
            if let (Some(d), Some((_, size))) = (frame_slot, mem) {
                let dest_is_mem = ops.split(',').next().is_some_and(|o| o.contains('['));
                if dest_is_mem {
                    slots.retain(|s| s.0 + 8 <= d || d + i64::from(size.max(1)) <= s.0);
                    let value = match operands.get(1).map(|o| &o.op_type) {
                        Some(X86OperandType::Reg(r)) if m == "mov" && size == 8 => {
                            gpr_index(&name(*r)).and_then(|g| regs[g])
                        }
                        _ => None,
                    };
                    if let Some(v) = value {
                        slots.push((d, v));
                    }
                }
            }
            if m == "call" || m.starts_with("syscall") {
                regs = [None; 16];
            }
            for &w in detail.regs_write() {
                if let Some(g) = gpr_index(&name(w)) {
                    regs[g] = None;
                }
            }
            if let Some((r, v)) = keep {
                regs[r] = Some(v);
            }
        }
        out
    }

    /// The memory operand of the single instruction in `bytes` at `pc`.
    /// The instruction's memory operand and its size in bytes.
    fn mem_operand(&self, bytes: &[u8], pc: u64) -> Option<(MemRef, u8)> {
        let list = self.detailed.disasm_count(bytes, pc, 1).ok()?;
        let insn = list.iter().next()?;
        let detail = self.detailed.insn_detail(insn).ok()?;
        let arch = detail.arch_detail();
        let x86 = arch.x86()?;
        let reg = |id: RegId| -> Option<Reg> {
            if id.0 == 0 {
                return None;
            }
            reg_by_name(&self.detailed.reg_name(id)?)
        };
        for op in x86.operands() {
            if let X86OperandType::Mem(m) = op.op_type {
                let base_name = self.detailed.reg_name(m.base()).unwrap_or_default();
                let next_pc = (base_name == "rip").then(|| pc + insn.len() as u64);
                let r = MemRef {
                    base: if next_pc.is_some() { None } else { reg(m.base()) },
                    index: reg(m.index()),
                    scale: m.scale() as u8,
                    disp: m.disp(),
                    next_pc,
                    segment: reg(m.segment()).filter(|r| matches!(r, Reg::FS | Reg::GS)),
                };
                return Some((r, op.size));
            }
        }
        let _ = ArchOperand::X86Operand;
        None
    }
}

/// Which of the preamble's four `rol` instructions `insn` is.
fn preamble_index(insn: &[u8]) -> Option<usize> {
    (0..4).find(|&k| client::PREAMBLE[4 * k..4 * k + 4] == *insn)
}

/// Whether the instructions before an `xchg rbx, rbx` (`recent`: which preamble instruction
/// each of the last four was, oldest first; `before`: how many instructions of the block precede
/// it) end with the preamble, or with as much of its end as the block holds.
fn ends_with_preamble(recent: &[Option<usize>; 4], before: usize) -> bool {
    let k = before.min(4);
    (0..k).all(|t| recent[4 - k + t] == Some(4 - k + t))
}

/// The general register (0 = `rax` .. 15 = `r15`, in capstone's naming order of `rax`, `rcx`,
/// `rdx`, `rbx`, `rsp`, `rbp`, `rsi`, `rdi`, `r8`..`r15`) that a register name of any width is
/// part of.
fn gpr_index(name: &str) -> Option<usize> {
    gpr_part(name).map(|(r, _)| r)
}

/// A general register's name of any width as (register, width): register 0 = `rax` .. 15 =
/// `r15` in capstone's naming order (`rax`, `rcx`, `rdx`, `rbx`, `rsp`, `rbp`, `rsi`, `rdi`,
/// `r8`..`r15`), width 0 = 64 bits, 1 = 32, 2 = 16, 3 = the low byte, 4 = the high byte (`ah`).
pub(crate) fn gpr_part(name: &str) -> Option<(usize, usize)> {
    const GPR: [[&str; 5]; 16] = [
        ["rax", "eax", "ax", "al", "ah"],
        ["rcx", "ecx", "cx", "cl", "ch"],
        ["rdx", "edx", "dx", "dl", "dh"],
        ["rbx", "ebx", "bx", "bl", "bh"],
        ["rsp", "esp", "sp", "spl", ""],
        ["rbp", "ebp", "bp", "bpl", ""],
        ["rsi", "esi", "si", "sil", ""],
        ["rdi", "edi", "di", "dil", ""],
        ["r8", "r8d", "r8w", "r8b", ""],
        ["r9", "r9d", "r9w", "r9b", ""],
        ["r10", "r10d", "r10w", "r10b", ""],
        ["r11", "r11d", "r11w", "r11b", ""],
        ["r12", "r12d", "r12w", "r12b", ""],
        ["r13", "r13d", "r13w", "r13b", ""],
        ["r14", "r14d", "r14w", "r14b", ""],
        ["r15", "r15d", "r15w", "r15b", ""],
    ];
    GPR.iter().enumerate().find_map(|(r, names)| names.iter().position(|n| !n.is_empty() && *n == name).map(|w| (r, w)))
}

/// Unicorn's register for a capstone register name (64-bit general registers and segments).
fn reg_by_name(name: &str) -> Option<Reg> {
    Some(match name {
        "rax" => Reg::RAX,
        "rbx" => Reg::RBX,
        "rcx" => Reg::RCX,
        "rdx" => Reg::RDX,
        "rsi" => Reg::RSI,
        "rdi" => Reg::RDI,
        "rbp" => Reg::RBP,
        "rsp" => Reg::RSP,
        "r8" => Reg::R8,
        "r9" => Reg::R9,
        "r10" => Reg::R10,
        "r11" => Reg::R11,
        "r12" => Reg::R12,
        "r13" => Reg::R13,
        "r14" => Reg::R14,
        "r15" => Reg::R15,
        "eax" => Reg::EAX,
        "ebx" => Reg::EBX,
        "ecx" => Reg::ECX,
        "edx" => Reg::EDX,
        "esi" => Reg::ESI,
        "edi" => Reg::EDI,
        "ebp" => Reg::EBP,
        "esp" => Reg::ESP,
        "fs" => Reg::FS,
        "gs" => Reg::GS,
        _ => return None,
    })
}

fn has_lock_prefix(bytes: &[u8]) -> bool {
    for b in bytes {
        match b {
            0xf0 => return true,
            0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x66 | 0x67 => continue,
            0x40..=0x4f => continue,
            _ => return false,
        }
    }
    false
}

fn classify(m: &str, ops: &str, locked: bool, mem: bool) -> Option<Special> {
    let m = m.strip_prefix("lock ").unwrap_or(m);
    Some(match m {
        "clflush" => Special::Flush(FlushOp::Clflush, MemRef::default()),
        "clflushopt" => Special::Flush(FlushOp::Clflushopt, MemRef::default()),
        "clwb" => Special::Flush(FlushOp::Clwb, MemRef::default()),
        "sfence" => Special::Fence(FenceOp::Sfence),
        "mfence" => Special::Fence(FenceOp::Mfence),
        "rdrand" => Special::Rand { seed_insn: false },
        "rdseed" => Special::Rand { seed_insn: true },
        "pause" => Special::Pause,
        "hlt" | "cli" | "sti" | "in" | "out" | "insb" | "insw" | "insd" | "outsb" | "outsw" | "outsd" | "lgdt"
        | "lidt" | "lldt" | "ltr" | "lmsw" | "clts" | "invd" | "wbinvd" | "invlpg" | "rdmsr" | "wrmsr" | "swapgs"
        | "sysret" | "sysexit" | "monitor" | "mwait" | "iretq" | "iretd" | "iret" | "invpcid" | "xsetbv" => {
            Special::Privileged
        }
        "mov" if ops.contains("cr") && !mem || ops.contains("dr") && !mem && mov_debug(ops) => Special::Privileged,
        "xchg" if mem => Special::Fence(FenceOp::Locked),
        _ if locked && mem => Special::Fence(FenceOp::Locked),
        _ => return None,
    })
}

/// Whether a register-to-register `mov` names a debug register (`dr0`..`dr7`), not e.g. `edx`.
fn mov_debug(ops: &str) -> bool {
    ops.split([',', ' ']).any(|w| w.len() == 3 && w.starts_with("dr") && w.as_bytes()[2].is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_code_names_its_loads_and_stores() {
        let d = Decoder::default();
        // mov rax, [rdi]; mov [rsi+8], rdx; cmp byte ptr [rdi], 0; lock cmpxchg [rdi], ecx;
        // lea rax, [rdi]; mov [rbp-0x18], rdi; mov rax, [rsp+8]; mov [rdi], eax (outside the
        // atomic range)
        let code = [
            0x48, 0x8b, 0x07, 0x48, 0x89, 0x56, 0x08, 0x80, 0x3f, 0x00, 0xf0, 0x0f, 0xb1, 0x0f, 0x48, 0x8d, 0x07, 0x48,
            0x89, 0x7d, 0xe8, 0x48, 0x8b, 0x44, 0x24, 0x08, 0x89, 0x07,
        ];
        let got = d.atomic_accesses(0x1000, &code, |pc| pc < 0x101a);
        let rdi = MemRef { base: Some(Reg::RDI), scale: 1, ..MemRef::default() };
        let rsi8 = MemRef { base: Some(Reg::RSI), scale: 1, disp: 8, ..MemRef::default() };
        assert_eq!(
            got,
            vec![
                (0x1000, Special::AtomicAccess { mem: rdi, size: 8, store: false }),
                (0x1003, Special::AtomicAccess { mem: rsi8, size: 8, store: true }),
                (0x1007, Special::AtomicAccess { mem: rdi, size: 1, store: false }),
            ]
        );
    }

    #[test]
    fn static_atomic_objects_are_found_through_rip_registers_and_frame_slots() {
        let d = Decoder::default();
        // 0x1000 mov rax, [rip+0x100]      the object at 0x1107: a load
        // 0x1007 lea rdx, [rip+0xf9]       rdx = 0x1107
        // 0x100e mov [rbp-0x20], rdx       the slot holds it (-O0's spill)
        // 0x1012 mov rcx, [rbp-0x20]       and rcx
        // 0x1016 mov [rcx], rsi            a store through it
        // 0x1019 mov eax, 0x2000           an absolute address (non-PIE)
        // 0x101e mov [rax+8], edi          the member at 0x2008: a store
        // 0x1021 mov [rcx+8], rsi          past the object: nothing
        // 0x1025 mov [rcx+rdi*8], rsi      an element of an array at rcx: a candidate
        // 0x1029 cmp qword ptr [rip+0xd6], 0   reads 0x1107
        // 0x1031 call 0x1036               forgets the registers
        // 0x1036 mov [rcx], rsi            rcx unknown now: nothing
        let code = [
            0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x48, 0x8d, 0x15, 0xf9, 0x00, 0x00, 0x00, 0x48, 0x89, 0x55, 0xe0,
            0x48, 0x8b, 0x4d, 0xe0, 0x48, 0x89, 0x31, 0xb8, 0x00, 0x20, 0x00, 0x00, 0x89, 0x78, 0x08, 0x48, 0x89, 0x71,
            0x08, 0x48, 0x89, 0x34, 0xf9, 0x48, 0x83, 0x3d, 0xd6, 0x00, 0x00, 0x00, 0x00, 0xe8, 0x00, 0x00, 0x00, 0x00,
            0x48, 0x89, 0x31,
        ];
        let objects = [(0x1100, 0x1108), (0x2008, 0x200c)];
        let got: Vec<(u64, u8, bool)> = d
            .object_accesses(0x1000, &code, &objects)
            .into_iter()
            .map(|(pc, s)| match s {
                Special::AtomicAccess { size, store, .. } => (pc, size, store),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![(0x1000, 8, false), (0x1016, 8, true), (0x101e, 4, true), (0x1025, 8, true), (0x1029, 8, false)]
        );
        // No objects, nothing decoded.
        assert!(d.object_accesses(0x1000, &code, &[]).is_empty());
    }

    #[test]
    fn locked_exchanges_name_their_word() {
        let mut d = Decoder::default();
        // lock cmpxchg [rdi], ecx; xchg [rsi+8], al; lock xadd [rdi], eax
        let code = [0xf0, 0x0f, 0xb1, 0x0f, 0x86, 0x46, 0x08, 0xf0, 0x0f, 0xc1, 0x07];
        let b = d.insert(0x1000, code.len() as u32, &code).1.clone();
        let s: Vec<Special> = b.specials.iter().map(|x| x.1).collect();
        let rdi = MemRef { base: Some(Reg::RDI), scale: 1, ..MemRef::default() };
        let rsi8 = MemRef { base: Some(Reg::RSI), scale: 1, disp: 8, ..MemRef::default() };
        assert_eq!(
            s,
            vec![
                Special::LockedRmw { word: rdi, size: 4 },
                Special::LockedRmw { word: rsi8, size: 1 },
                Special::Fence(FenceOp::Locked),
            ]
        );
    }

    #[test]
    fn classifies_persistence_and_privileged_instructions() {
        let mut d = Decoder::default();
        // clwb [rdi]; sfence; lock xadd [rdi], eax; hlt; mov rax, cr0; call +0; ret
        let code = [
            0x66, 0x0f, 0xae, 0x37, // clwb [rdi]
            0x0f, 0xae, 0xf8, // sfence
            0xf0, 0x0f, 0xc1, 0x07, // lock xadd [rdi], eax
            0xf4, // hlt
            0x0f, 0x20, 0xc0, // mov rax, cr0
            0x48, 0x0f, 0xc3, 0x07, // movnti [rdi], rax
            0x48, 0x89, 0xd0, // mov rax, rdx (not privileged)
            0xe8, 0, 0, 0, 0, // call
        ];
        let b = d.insert(0x1000, code.len() as u32, &code).1.clone();
        assert_eq!(b.insns.len(), 8);
        let s: Vec<Special> = b.specials.iter().map(|x| x.1).collect();
        let rdi = MemRef { base: Some(Reg::RDI), scale: 1, ..MemRef::default() };
        assert_eq!(
            s,
            vec![
                Special::Flush(FlushOp::Clwb, rdi),
                Special::Fence(FenceOp::Sfence),
                Special::Fence(FenceOp::Locked),
                Special::Privileged,
                Special::Privileged,
            ]
        );
        assert_eq!(b.access_kind(0x1000 + 15), AccessKind::NonTemporal);
        assert_eq!(b.access_kind(0x1000 + 7), AccessKind::Locked);
        assert!(matches!(b.term, Term::Call { ret, .. } if ret == 0x1000 + code.len() as u64));
        assert_eq!(b.retired_before(0x1000 + 11), 3);
    }

    /// `lea rax, [rsp]; xor edx, edx`, the magic sequence, `mov rax, rdx`: a client request.
    fn client_request_block() -> Vec<u8> {
        let mut code = vec![0x48, 0x8d, 0x04, 0x24, 0x31, 0xd2];
        code.extend_from_slice(&client::PREAMBLE);
        code.extend_from_slice(&client::XCHG_RBX);
        code.extend_from_slice(&[0x48, 0x89, 0xd0]);
        code
    }

    #[test]
    fn finds_client_requests_at_their_xchg() {
        let mut d = Decoder::default();
        let code = client_request_block();
        let b = d.insert(0x1000, code.len() as u32, &code).1.clone();
        let xchg = 0x1000 + 6 + 16;
        assert_eq!(&b.specials[..], &[(xchg, Special::ClientRequest)]);
        assert_eq!(b.insns.len(), 8);
        // A block that starts inside the sequence (after a page boundary) still has it, from
        // the second rol, the last one, or the xchg itself: the machine checks the rest.
        for skip in [6 + 4, 6 + 12, 6 + 16] {
            let at = 0x1000 + skip as u64;
            let b = d.insert(at, (code.len() - skip) as u32, &code[skip..]).1.clone();
            assert_eq!(&b.specials[..], &[(xchg, Special::ClientRequest)], "block from +{skip}");
        }
    }

    #[test]
    fn an_xchg_without_the_preamble_is_no_request() {
        let mut d = Decoder::default();
        // Preamble with the rotations out of order.
        let mut code = client_request_block();
        code.swap(6 + 3, 6 + 7);
        let b = d.insert(0x1000, code.len() as u32, &code).1.clone();
        assert!(b.specials.is_empty(), "{:?}", b.specials);
        // A plain `xchg rbx, rbx` after ordinary instructions, and one after a partial preamble.
        let code = [0x48, 0x89, 0xd0, 0x31, 0xd2, 0x48, 0x89, 0xd0, 0x31, 0xd2, 0x48, 0x87, 0xdb];
        assert!(d.insert(0x2000, code.len() as u32, &code).1.specials.is_empty());
        let mut code = vec![0x31, 0xd2, 0x31, 0xd2, 0x31, 0xd2, 0x31, 0xd2];
        code.extend_from_slice(&client::PREAMBLE[4..]);
        code.extend_from_slice(&client::XCHG_RBX);
        assert!(d.insert(0x3000, code.len() as u32, &code).1.specials.is_empty());
        // Natively the rotations leave rdi unchanged: 3 + 13 + 61 + 51 = 128.
        assert_eq!((3 + 13 + 61 + 51) % 64, 0);
    }
    /// Blocks another machine of the process decoded come from the shared cache only when
    /// their bytes are the same: other code at the same address of the same size (another
    /// program) is decoded for itself.
    #[test]
    fn the_shared_cache_answers_only_for_the_same_bytes() {
        // An address no other test uses: tests share the process's cache.
        let at = 0x7777_0000;
        let fences = |fence: u8| [0x0f, 0xae, fence, 0x0f, 0xae, 0x38]; // [sm]fence; clflush [rax]
        let (sfence, mfence) = (fences(0xf8), fences(0xf0));
        let mut first = Decoder::default();
        let a = first.insert(at, 6, &sfence).1.clone();
        let mut second = Decoder::default();
        let b = second.insert(at, 6, &sfence).1.clone();
        let c = second.get(at, 6).unwrap().clone();
        let rax = MemRef { base: Some(Reg::RAX), scale: 1, ..MemRef::default() };
        let want = [(at, Special::Fence(FenceOp::Sfence)), (at + 3, Special::Flush(FlushOp::Clflush, rax))];
        for x in [&a, &b, &c] {
            assert_eq!(&x.specials[..], &want);
            assert_eq!(&x.insns[..], &[at, at + 3]);
        }
        let mut third = Decoder::default();
        let d = third.insert(at, 6, &mfence).1.clone();
        assert_eq!(d.specials[0], (at, Special::Fence(FenceOp::Mfence)));
        let fresh = third.decode_uncached(at, &mfence);
        assert_eq!((&fresh.insns, &fresh.specials, &fresh.access), (&d.insns, &d.specials, &d.access));
        // Both are kept: the first program's block still decodes as its own.
        assert_eq!(Decoder::default().insert(at, 6, &sfence).1.specials[0].1, Special::Fence(FenceOp::Sfence));
    }
}
