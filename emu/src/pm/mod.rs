//! The virtual persistent-memory (PM) device: which stores a power failure could lose.
//!
//! The emulator feeds the device every PM store, flush, fence and persisting system call, in
//! program order (guest threads run one at a time, so events are totally ordered). The device
//! answers two kinds of question: is this byte durable yet (`durable_hw`, `durable_own`,
//! `persist_info`, `unpersisted`, ...), and which PM contents could a crash right now leave
//! behind (`crash_space`). The model, with its sources, is `docs/pm-model.md`; in short:
//!
//! - **Lines and versions** (Px86, Raad et al. POPL'20). PM is split into 64-byte lines. Every
//!   cached store creates a new *version* of its line; stores to one line persist in program
//!   order, different lines independently. A crash leaves each line at any version between its
//!   *floor* (the newest version known persisted) and its current one. A store crossing a line
//!   boundary is split; within a line nothing tears (`Atomicity::Line`), or, with
//!   `Atomicity::Word8` (PMDK's 8-byte power-fail atomicity, what pmreorder assumes), each aligned
//!   8-byte word picks its version independently.
//! - **Flushes and fences.** `clwb`/`clflushopt` by thread T *capture* the line's current version
//!   for T; T's next fence (sfence, mfence, any locked instruction or `xchg` with memory) raises
//!   the floor to what T captured. Another thread's fence completes nothing of T's. `clflush`
//!   persists at once under `FlushModel::Intel` (sound because threads run one at a time:
//!   Khyzha & Lahav POPL'21) and is a plain capture under `FlushModel::Strict`.
//! - **Whose flush counts.** The floor follows the hardware: any thread's flush + that thread's
//!   fence persists every version visible then (`durable_hw`). `durable_own` additionally needs
//!   the *writer's* own flush and fence (or clflush, persist_range, eADR) — the assumption of
//!   HawkSet and Vardalith. Each latest store remembers who made it durable by each rule.
//! - **Non-temporal stores** (Raad, Maranget & Vafeiadis POPL'22). An NT store first acts as a
//!   clflushopt of its line's current version by its thread; its own data waits as one *chunk*
//!   per aligned 8-byte word it touches. Until the issuing thread's next fence, each chunk
//!   independently may or may not have reached PM, and may land after any younger writeback
//!   (pending chunks are not ordered with later cached stores or clflush). At that fence the
//!   chunk becomes durable at its program-order position.
//! - **rep movs / rep stos** (SDM Vol.3A §8.2.4). The stores of one string instruction may become
//!   visible out of order: within one line, its 8-byte words persist as an unordered set.
//! - **eADR.** Cached stores are durable when they execute; NT chunks still wait for a fence.
//!
//! # The exact crash image
//! For each line: choose a version `v` in [floor, current] (a rep-string version may be any
//! non-empty subset of its words; under `Word8`, choose `v` separately per word). The line's image
//! is `base` with, in program order, every cached store up to `v` and every *completed* NT chunk
//! applied; then each *pending* chunk the crash chooses to include is overlaid (in program order).
//! Lines the device does not list are durable: guest memory holds their image. See `CrashSpace`.
//!
//! # How the emulator calls it
//! Addresses are *device addresses*: `(file id << 40) | offset in the PM file` ([`device_addr`]);
//! the emulator translates guest virtual addresses, so two mappings of a file share lines.
//! The device keeps line contents only while a line has something undurable, and a line whose
//! only undurable state is one small cached store as a compact record without history
//! (`table.rs`): host memory follows the lines with undurable data, never the size of the PM
//! files. When a store hits a line it does not track, it asks the `read_line` callback of
//! [`PmDevice::store`] for the line's 64 bytes as guest memory holds them; the bytes of the
//! stored range may be either before or after the store (the device overwrites them with `old`),
//! the others must be current. So the emulator may call `store` from its write hook (before
//! Unicorn writes) or right after.
//!
//! Per instruction (the full table is in `docs/pm-model.md`): plain and SSE stores → `store`
//! (`Cached`, one call per access); `rep movs`/`rep stos` → one `RepString { seq }` store per
//! element; `movnti`/`movntdq`/`movntps`/`movntpd`/`movntq`/`maskmovdqu` → `NonTemporal`;
//! locked RMW and `xchg` with memory → `fence(Locked)` then the store (a failed `lock cmpxchg` is
//! the fence only); `clflush`/`clflushopt`/`clwb` → `flush`; `sfence`/`mfence` → `fence`; `lfence`,
//! `pause`, `cpuid` → nothing. Kernel writes: `read()` into PM → stores; `pwrite` to a PM file →
//! stores then `persist_range`; `msync`/`fsync` → `persist_range`; truncate/unlink →
//! `discard_range`. Crash points clone the device (`snapshot`) and call `crash_space`.
//!
//! # What it cannot model
//! - Store buffering (x86-TSO): the emulator is sequentially consistent, so a load never sees an
//!   older value than the last store, and persistence order equals execution order per line. Bugs
//!   that need a store to stay invisible to another thread are out of reach (of every pass).
//! - Spontaneous cache evictions are covered (any version may be the persisted one), but the
//!   device never *chooses* one: it has no cache capacity model.
//! - A clwb that captures a *younger* version than the one current when it executed (allowed by
//!   Px86) only persists more, so it gives a subset of the images already listed.
//! - Pending NT chunks that overlap only partially: a crash overlays the included chunks in
//!   program order, so an image in which an older chunk lands after a younger one that it
//!   partially overlaps is not listed (identical or disjoint chunks, the normal case, are exact).
//! - A completed NT chunk lands at its program-order position: the state in which a younger
//!   cached store to the same bytes was written back *before* the fenced chunk landed is not
//!   listed (hardware flushes a write-combining buffer before a same-line cached store anyway).
//! - Under eADR the elements of a rep instruction persist in execution order.
//! - The version limit ([`PmDevice::set_version_limit`]) merges old versions of a line that was
//!   stored to more than `limit` times without a persist; each merge drops one intermediate crash
//!   state (never adds an impossible one) and is counted in [`PmStats::merged_versions`] and
//!   [`LineSpace::merged`].
//! - The device knows no PCs, backtraces or files other than PM: it returns store ids and the
//!   emulator maps them. Non-PM files (as of their last fsync) are the crash engine's business.

mod crash;
mod files;
mod fx;
mod line;
mod table;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use crash::{CrashSpace, Dim, DimKind, Enumerate, LineSpace, PendingChunk, Version};

use fx::FxHashMap;
use line::{range_mask, Line, Live};
use table::{Compact, LineTable, Slot, COMPACT_BYTES};

/// Bytes per PM line.
pub const LINE_SIZE: u64 = 64;
/// Device addresses are `(file id << FILE_SHIFT) | offset`: 1 TiB per PM file.
pub const FILE_SHIFT: u32 = 40;
/// Default for [`PmDevice::set_version_limit`].
pub const DEFAULT_VERSION_LIMIT: usize = 1024;

/// A guest thread id, as the emulator numbers threads.
pub type Tid = u32;

/// The device address of byte `offset` of PM file `file`.
#[inline]
pub fn device_addr(file: u32, offset: u64) -> u64 {
    debug_assert!(offset < 1 << FILE_SHIFT);
    (u64::from(file) << FILE_SHIFT) | offset
}

/// The line (device address / 64) holding device address `addr`.
#[inline]
pub fn line_of(addr: u64) -> u64 {
    addr / LINE_SIZE
}

/// A store's id: a global sequence number over all device events, so ids are ordered in program
/// order. All elements of one rep-string instruction (consecutive events) share one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StoreId(pub u64);

/// Power-fail atomicity inside a line (`--atomicity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Atomicity {
    /// A line persists as a whole at some version (Px86: no tearing inside a line).
    #[default]
    Line,
    /// Each aligned 8-byte word picks its version independently (PMDK/SNIA, pmreorder).
    Word8,
}

/// What `clflush` means (`--flush-model`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushModel {
    /// clflush persists when it executes; clwb/clflushopt need the same thread's fence.
    #[default]
    Intel,
    /// Every flush, clflush included, needs a fence (HawkSet's convention).
    Strict,
}

/// Where the persistence domain ends (`--persistency`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Persistency {
    /// Caches are volatile: stores need flush + fence.
    #[default]
    Adr,
    /// Caches are persistent: cached stores are durable at once; NT stores still need a fence.
    Eadr,
}

/// The device's configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct PmConfig {
    /// Whether a line persists whole or word by word (`--atomicity`).
    pub atomicity: Atomicity,
    /// What `clflush` means (`--flush-model`).
    pub flush_model: FlushModel,
    /// Where the persistence domain ends (`--persistency`).
    pub persistency: Persistency,
}

/// Errors of this module: a bad option name, or a malformed crash choice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PmError {
    /// A `--atomicity`, `--flush-model` or `--persistency` value that names no option.
    #[error("unknown {what} `{value}` (expected {expected})")]
    UnknownOption {
        /// Which option, as the message names it.
        what: &'static str,
        /// The value given.
        value: String,
        /// The values accepted, for the message.
        expected: &'static str,
    },
    /// A crash choice with a different number of entries than the crash space has dimensions.
    #[error("crash choice has {got} entries, the crash space has {expected} dimensions")]
    ChoiceLength {
        /// Entries in the choice.
        got: usize,
        /// Dimensions of the crash space.
        expected: usize,
    },
    /// A crash choice picking a value outside its dimension.
    #[error("crash choice {value} for dimension {dim} is out of range (size {size})")]
    ChoiceRange {
        /// The dimension's index.
        dim: usize,
        /// The value chosen.
        value: u32,
        /// The dimension's size (valid values are `0..size`).
        size: u32,
    },
}

macro_rules! option_enum {
    ($ty:ident, $what:literal, $expected:literal, $($name:literal => $variant:ident),+) => {
        impl FromStr for $ty {
            type Err = PmError;
            fn from_str(s: &str) -> Result<Self, PmError> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err(PmError::UnknownOption {
                        what: $what,
                        value: s.to_string(),
                        expected: $expected,
                    }),
                }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($ty::$variant => $name,)+ })
            }
        }
    };
}
option_enum!(Atomicity, "atomicity", "line or word8", "line" => Line, "word8" => Word8);
option_enum!(FlushModel, "flush model", "intel or strict", "intel" => Intel, "strict" => Strict);
option_enum!(Persistency, "persistency", "adr or eadr", "adr" => Adr, "eadr" => Eadr);

/// How a store reaches PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoreKind {
    /// Through the cache: every plain, locked or string-less store.
    Cached,
    /// movnti, movntdq, movntps/pd, movntq, maskmovdqu/maskmovq (only the bytes written).
    NonTemporal,
    /// One element of a `rep movs`/`rep stos`; `seq` names the instruction execution (equal for
    /// all its elements, different for the next execution, e.g. the retired-instruction count).
    RepString {
        /// The instruction execution this element belongs to.
        seq: u64,
    },
}

/// A cache-line flush instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlushKind {
    /// Flushes and invalidates; persists at once under [`FlushModel::Intel`], needs a fence under
    /// [`FlushModel::Strict`].
    Clflush,
    /// Weakly ordered flush and invalidate: captures the line for the issuing thread's next fence.
    Clflushopt,
    /// Writeback without invalidating: like `Clflushopt` for the device.
    Clwb,
}

/// An instruction that orders (and so completes) the issuing thread's flushes and NT stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FenceKind {
    /// `sfence`.
    Sfence,
    /// `mfence`.
    Mfence,
    /// A lock-prefixed read-modify-write or `xchg` with memory (on PM or not).
    Locked,
}

/// What made a store durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PersistCause {
    /// A fence completing flushes (or NT chunks) of the fencing thread.
    Fence(FenceKind),
    /// A clflush under `FlushModel::Intel`.
    Clflush,
    /// `persist_range` (msync, fsync, a durable pwrite).
    Range,
    /// The store itself, under eADR.
    Eadr,
}

/// Which thread's event made a store durable, and which event (`seq`: the device's global event
/// sequence number, the same counter as store ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Persister {
    /// The thread whose flush and fence (or persisting call, or store under eADR) made it durable.
    pub tid: Tid,
    /// The event's sequence number.
    pub seq: u64,
    /// Which kind of event it was.
    pub cause: PersistCause,
}

/// What a flush found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushOutcome {
    /// The line flushed (device address / 64).
    pub line: u64,
    /// The line had a cached version above its floor (something for a writeback to write). False
    /// means "flush of a clean line" (pending NT chunks do not count: flushes do not drain
    /// write-combining buffers).
    pub dirty: bool,
    /// The same thread had already captured the current version and not fenced since.
    pub already_captured: bool,
    /// The flush persisted the line by itself (clflush under `FlushModel::Intel`, line dirty).
    pub persisted: bool,
}

/// What a fence (or `persist_range`) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceOutcome {
    /// The event's sequence number (as in [`Persister::seq`]).
    pub seq: u64,
    /// The thread had nothing captured and no pending NT chunk (for a fence), or the range held
    /// nothing undurable (for `persist_range`).
    pub redundant: bool,
    /// Lines whose floor rose.
    pub lines_persisted: u32,
    /// Latest stores (per line) that became durable under the hardware rule.
    pub stores_hw: u32,
    /// Latest stores (per line) that became durable by their writer's own persist.
    pub stores_own: u32,
    /// NT chunks completed.
    pub nt_completed: u32,
}

/// A latest store that just became durable, reported by the `*_with` operations. A store that
/// spans two lines is reported once per line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    /// The store, by id.
    pub store: StoreId,
    /// The thread that made it.
    pub writer: Tid,
    /// The line (device address / 64) this report is about.
    pub line: u64,
    /// Bytes of the line for which this is still the latest store.
    pub mask: u64,
    /// It became durable under the hardware rule at this event.
    pub hw: bool,
    /// It became durable by its writer's own persist at this event.
    pub own: bool,
}

/// What the device knows about the latest store to one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistInfo {
    /// The store, by id.
    pub store: StoreId,
    /// The thread that made it.
    pub writer: Tid,
    /// Whether it was a non-temporal store.
    pub nt: bool,
    /// Who made it durable under the hardware rule.
    pub hw: Option<Persister>,
    /// Who made it durable by the writer's own rule (always the writer).
    pub own: Option<Persister>,
    /// `durable_hw` of this byte (false also when an older pending NT chunk could still land on
    /// it).
    pub durable_hw: bool,
    /// `durable_own` of this byte.
    pub durable_own: bool,
}

/// Which durability predicate a question uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityRule {
    /// Any thread's flush + that thread's fence (the hardware).
    #[default]
    Hw,
    /// The writer's own flush + fence (HawkSet, Vardalith).
    Own,
}

/// A store some of whose bytes are still the latest and not durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnpersistedStore {
    /// The store, by id.
    pub store: StoreId,
    /// The thread that made it.
    pub tid: Tid,
    /// Lowest such byte.
    pub addr: u64,
    /// From `addr` to the highest such byte (overwritten bytes in between are included).
    pub len: u64,
    /// Number of such bytes.
    pub bytes: u64,
    /// Whether it was a non-temporal store.
    pub nt: bool,
}

/// A flush whose fence never came: the thread captured `captured` of `line` and has not fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfencedFlush {
    /// The thread that flushed and has not fenced since.
    pub tid: Tid,
    /// The line (device address / 64) it flushed.
    pub line: u64,
    /// The captured version, named by the store that made it.
    pub captured: StoreId,
}

/// An NT store with chunks still waiting for its thread's fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingNt {
    /// The store, by id.
    pub store: StoreId,
    /// The thread whose fence the chunks wait for.
    pub tid: Tid,
    /// Lowest pending byte.
    pub addr: u64,
    /// From `addr` to the highest pending byte.
    pub len: u64,
}

/// Size of the device's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmStats {
    /// Lines with state (something not durable by some rule).
    pub lines: usize,
    /// Of `lines`, those held compactly (one small cached store above the floor, no history).
    pub compact_lines: usize,
    /// Log entries (versions and completed chunks) above the floors.
    pub versions: usize,
    /// Pending NT chunks.
    pub pending_chunks: usize,
    /// Latest stores not yet durable by both rules.
    pub live_stores: usize,
    /// Versions merged away by the version limit since the device was created.
    pub merged_versions: u64,
}

/// Per-thread state: what its flushes captured and where its NT chunks wait.
#[derive(Clone, Debug, Default)]
struct ThreadState {
    /// Line → newest version captured by a clwb/clflushopt/NT store since the last fence.
    captures: FxHashMap<u64, u64>,
    /// Lines where this thread may have pending NT chunks (may repeat, may be stale).
    nt_lines: Vec<u64>,
}

/// The PM device. Cheap to clone relative to the undurable data it holds (`snapshot`).
#[derive(Clone, Debug)]
pub struct PmDevice {
    config: PmConfig,
    version_limit: usize,
    lines: LineTable,
    threads: FxHashMap<Tid, ThreadState>,
    /// Next event sequence number (store ids come from it; 0 is never used).
    next_event: u64,
    /// The last rep-string element: (tid, seq, id). The next element reuses the id if no other
    /// event happened in between (`id + 1 == next_event`).
    last_rep: Option<(Tid, u64, u64)>,
    merged_versions: u64,
    /// Reused by `fence` to avoid allocating.
    scratch: Vec<(u64, u64)>,
    /// The PM files, read for the durable contents of compact lines.
    files: files::FileViews,
}

impl Default for PmDevice {
    fn default() -> Self {
        PmDevice::new(PmConfig::default())
    }
}

impl PmDevice {
    /// A device with nothing stored, `config` fixed for its lifetime and the default version limit.
    pub fn new(config: PmConfig) -> Self {
        PmDevice {
            config,
            version_limit: DEFAULT_VERSION_LIMIT,
            lines: LineTable::default(),
            threads: FxHashMap::default(),
            next_event: 1,
            last_rep: None,
            merged_versions: 0,
            scratch: Vec::new(),
            files: files::FileViews::default(),
        }
    }

    /// Lets the device read PM file `id` (a descriptor of its own, duplicated from `file`): the
    /// common unpersisted line then costs 40 bytes instead of 96, its durable bytes being read
    /// back from the file when needed. The emulator attaches each PM file it maps; a device that
    /// cannot read a file keeps copies of its lines. Every change to the file's contents must
    /// reach the device (stores, [`discard_range`](Self::discard_range)) — they do when the
    /// file is the guest's PM.
    pub fn attach_file(&mut self, id: u32, file: &std::fs::File) -> std::io::Result<()> {
        self.files.attach(id, file)
    }

    /// The configuration the device was created with.
    pub fn config(&self) -> PmConfig {
        self.config
    }

    /// At most `limit` versions are kept above a line's floor (0: unlimited). Beyond it, adjacent
    /// old versions are merged (fewer crash states, never an impossible one). This bounds memory
    /// for a line stored to in a loop and never persisted.
    pub fn set_version_limit(&mut self, limit: usize) {
        self.version_limit = limit;
    }

    /// A copy of the whole device, for crash points (same as `clone`).
    pub fn snapshot(&self) -> Self {
        self.clone()
    }

    fn bump(&mut self) -> u64 {
        let e = self.next_event;
        self.next_event += 1;
        e
    }

    /// A store of `new` (previously `old`, same length) at device address `addr` by `tid`.
    ///
    /// `read_line(line)` is called only for a line the device does not track yet, and must return
    /// its 64 bytes as guest memory holds them; bytes inside the stored range may be before or
    /// after this store (they are replaced by `old`). The store is split at line boundaries.
    /// Returns the store's id (elements of one rep instruction share it).
    ///
    /// Panics if `old` and `new` differ in length.
    pub fn store<F>(
        &mut self,
        tid: Tid,
        addr: u64,
        old: &[u8],
        new: &[u8],
        kind: StoreKind,
        mut read_line: F,
    ) -> StoreId
    where
        F: FnMut(u64) -> [u8; 64],
    {
        assert_eq!(old.len(), new.len(), "store: old and new differ in length");
        let id = match (kind, self.last_rep) {
            (StoreKind::RepString { seq }, Some((t, s, id))) if t == tid && s == seq && id + 1 == self.next_event => id,
            (StoreKind::RepString { seq }, _) => {
                let id = self.bump();
                self.last_rep = Some((tid, seq, id));
                id
            }
            _ => self.bump(),
        };
        let mut off = 0;
        while off < new.len() {
            let a = addr + off as u64;
            let lo = (a % LINE_SIZE) as usize;
            let n = (LINE_SIZE as usize - lo).min(new.len() - off);
            self.store_piece(tid, id, a / LINE_SIZE, lo, &old[off..off + n], &new[off..off + n], kind, &mut read_line);
            off += n;
        }
        StoreId(id)
    }

    #[allow(clippy::too_many_arguments)]
    fn store_piece<F: FnMut(u64) -> [u8; 64]>(
        &mut self,
        tid: Tid,
        id: u64,
        line: u64,
        lo: usize,
        old: &[u8],
        new: &[u8],
        kind: StoreKind,
        read_line: &mut F,
    ) {
        let mask = range_mask(lo, new.len());
        let mut data = [0u8; 64];
        data[lo..lo + new.len()].copy_from_slice(new);
        let eadr = self.config.persistency == Persistency::Eadr;
        // The line as it was before this store (guest memory may hold the store already).
        let before = |read_line: &mut F| {
            let mut b = read_line(line);
            b[lo..lo + old.len()].copy_from_slice(old);
            b
        };
        if eadr && kind != StoreKind::NonTemporal {
            // Durable at once: only a line that has other state (pending chunks, lives) needs
            // to hear about it.
            let readable = self.files.has(line);
            if let Some(l) = self.lines.full(line, || Some(before(read_line))) {
                l.store_durable(id, tid, mask, &data);
                self.lines.settle(line, readable);
            }
            return;
        }
        let readable = self.files.has(line);
        if kind == StoreKind::Cached && new.len() <= COMPACT_BYTES && !self.lines.contains(line) {
            // The common case: the line's only undurable state is this store. The rest of the
            // line is durable and its file holds it, unless the device cannot read the file.
            let (mut bytes, mut was) = ([0u8; COMPACT_BYTES], [0u8; COMPACT_BYTES]);
            bytes[..new.len()].copy_from_slice(new);
            was[..old.len()].copy_from_slice(old);
            let c = Compact { floor: 0, id, new: bytes, old: was, tid, lo: lo as u8, len: new.len() as u8 };
            let base = (!readable).then(|| before(read_line));
            self.lines.insert_compact(line, c, base);
            return;
        }
        let l = self.lines.full_or_insert(line, || before(read_line));
        match kind {
            StoreKind::Cached => l.store_cached(id, tid, false, mask, &data),
            StoreKind::RepString { .. } => l.store_cached(id, tid, true, mask, &data),
            StoreKind::NonTemporal => {
                let t = self.threads.entry(tid).or_default();
                // The NT store first acts as a clflushopt of the line's current version.
                if !eadr && l.current != 0 {
                    let c = t.captures.entry(line).or_insert(0);
                    *c = (*c).max(l.current);
                }
                l.store_nt(id, tid, lo, new);
                if t.nt_lines.last() != Some(&line) {
                    t.nt_lines.push(line);
                }
            }
        }
        self.merged_versions += l.enforce_limit(self.version_limit);
        // The store may have replaced the line's only other latest store.
        self.lines.settle(line, readable);
    }

    /// If `line` is a compact record written by `tid` and `cap` covers its store, persists it
    /// as a persistence event of `p.tid == tid` would (both rules at once), forgets the line
    /// and reports the store. The full path gives the same outcome; this one allocates nothing
    /// and touches no vector.
    fn persist_compact<S: FnMut(&Persisted)>(
        &mut self,
        line: u64,
        p: Persister,
        cap: u64,
        out: &mut FenceOutcome,
        sink: &mut S,
    ) -> bool {
        let Some(c) = self.lines.compact(line) else {
            return false;
        };
        if c.tid != p.tid || cap < c.id {
            return false;
        }
        out.lines_persisted += 1;
        out.stores_hw += 1;
        out.stores_own += 1;
        sink(&Persisted { store: StoreId(c.id), writer: c.tid, line, mask: c.mask(), hw: true, own: true });
        self.lines.remove(line);
        true
    }

    /// A flush of the line holding `addr` by `tid`.
    pub fn flush(&mut self, tid: Tid, addr: u64, kind: FlushKind) -> FlushOutcome {
        self.flush_with(tid, addr, kind, |_| {})
    }

    /// `flush`, reporting each latest store that becomes durable (only a clflush under
    /// `FlushModel::Intel` persists anything by itself).
    pub fn flush_with<S: FnMut(&Persisted)>(
        &mut self,
        tid: Tid,
        addr: u64,
        kind: FlushKind,
        mut sink: S,
    ) -> FlushOutcome {
        let seq = self.bump();
        let line = line_of(addr);
        let mut out = FlushOutcome { line, dirty: false, already_captured: false, persisted: false };
        let current = match self.lines.get(line) {
            None => return out,
            Some(Slot::Compact(c)) => {
                out.dirty = true;
                c.id
            }
            Some(Slot::Full(l)) => {
                out.dirty = l.has_cached_above_floor();
                l.current
            }
        };
        if self.config.persistency == Persistency::Eadr {
            // Nothing cached is undurable; NT chunks are not in the cache.
            return out;
        }
        if kind == FlushKind::Clflush && self.config.flush_model == FlushModel::Intel {
            let p = Persister { tid, seq, cause: PersistCause::Clflush };
            if self.persist_compact(line, p, u64::MAX, &mut FenceOutcome::default(), &mut sink) {
                out.persisted = true;
                return out;
            }
            let files = &self.files;
            let l = self.lines.full(line, || files.read(line)).expect("tracked");
            out.persisted = l.raise_floor(u64::MAX);
            l.mark(line, p, u64::MAX, &mut FenceOutcome::default(), &mut sink);
            self.lines.settle(line, self.files.has(line));
        } else if current != 0 {
            let cur = current;
            let t = self.threads.entry(tid).or_default();
            let c = t.captures.entry(line).or_insert(0);
            out.already_captured = *c >= cur;
            *c = (*c).max(cur);
        }
        out
    }

    /// A fence by `tid`: raises the floors of the lines it captured, completes its NT chunks.
    pub fn fence(&mut self, tid: Tid, kind: FenceKind) -> FenceOutcome {
        self.fence_with(tid, kind, |_| {})
    }

    /// `fence`, reporting each latest store that becomes durable, in line order.
    pub fn fence_with<S: FnMut(&Persisted)>(&mut self, tid: Tid, kind: FenceKind, mut sink: S) -> FenceOutcome {
        let seq = self.bump();
        let mut out = FenceOutcome { seq, redundant: true, ..FenceOutcome::default() };
        let Some(t) = self.threads.get_mut(&tid) else {
            return out;
        };
        if t.captures.is_empty() && t.nt_lines.is_empty() {
            return out;
        }
        out.redundant = false;
        let p = Persister { tid, seq, cause: PersistCause::Fence(kind) };
        let mut work = std::mem::take(&mut self.scratch);
        work.clear();
        work.extend(t.captures.drain());
        work.extend(t.nt_lines.drain(..).map(|l| (l, 0)));
        // Sorted by line (then capture), so reports come out in a deterministic order.
        work.sort_unstable();
        let mut i = 0;
        while i < work.len() {
            let line = work[i].0;
            let mut cap = 0;
            while i < work.len() && work[i].0 == line {
                cap = cap.max(work[i].1);
                i += 1;
            }
            if self.persist_compact(line, p, cap, &mut out, &mut sink) {
                continue;
            }
            let files = &self.files;
            if let Some(l) = self.lines.full(line, || files.read(line)) {
                out.nt_completed += l.complete_nt(tid);
                if l.raise_floor(cap) {
                    out.lines_persisted += 1;
                }
                l.fold();
                l.mark(line, p, cap, &mut out, &mut sink);
                self.lines.settle(line, self.files.has(line));
            }
        }
        self.scratch = work;
        out
    }

    /// Every line overlapping `[start, start + len)` becomes durable at its current version, as
    /// after msync/fsync of a PM mapping or a pwrite to the PM file, done by `tid`: its cached
    /// stores are durable by the hardware rule, and by the own rule for those `tid` wrote; `tid`'s
    /// pending NT chunks in those lines complete (other threads' stay pending in their
    /// write-combining buffers).
    pub fn persist_range(&mut self, tid: Tid, start: u64, len: u64) -> FenceOutcome {
        self.persist_range_with(tid, start, len, |_| {})
    }

    /// `persist_range`, reporting each latest store that becomes durable, in line order.
    pub fn persist_range_with<S: FnMut(&Persisted)>(
        &mut self,
        tid: Tid,
        start: u64,
        len: u64,
        mut sink: S,
    ) -> FenceOutcome {
        let seq = self.bump();
        let mut out = FenceOutcome { seq, redundant: true, ..FenceOutcome::default() };
        let p = Persister { tid, seq, cause: PersistCause::Range };
        for line in self.lines_in(start, len) {
            out.redundant = false;
            if self.persist_compact(line, p, u64::MAX, &mut out, &mut sink) {
                continue;
            }
            let files = &self.files;
            let l = self.lines.full(line, || files.read(line)).expect("listed by lines_in");
            out.nt_completed += l.complete_nt(tid);
            if l.raise_floor(u64::MAX) {
                out.lines_persisted += 1;
            }
            l.fold();
            l.mark(line, p, u64::MAX, &mut out, &mut sink);
            self.lines.settle(line, self.files.has(line));
        }
        out
    }

    /// Forgets every line overlapping the range, as if durable (the file was truncated or
    /// deleted: its old contents can no longer matter after a crash).
    pub fn discard_range(&mut self, start: u64, len: u64) {
        self.bump();
        for line in self.lines_in(start, len) {
            self.lines.remove(line);
        }
    }

    /// Tracked lines overlapping the byte range, sorted.
    fn lines_in(&self, start: u64, len: u64) -> Vec<u64> {
        if len == 0 {
            return Vec::new();
        }
        let first = line_of(start);
        let last = line_of(start.saturating_add(len - 1));
        let span = last - first + 1;
        if span <= self.lines.len() as u64 {
            (first..=last).filter(|&l| self.lines.contains(l)).collect()
        } else {
            let mut v: Vec<u64> = self.lines.keys().filter(|l| (first..=last).contains(l)).collect();
            v.sort_unstable();
            v
        }
    }

    /// Calls `f(line, mask)` for each line piece of `[addr, addr + len)`.
    fn for_pieces(addr: u64, len: u64, mut f: impl FnMut(u64, u64) -> bool) -> bool {
        let mut off = 0;
        while off < len {
            let a = addr + off;
            let lo = (a % LINE_SIZE) as usize;
            let n = (LINE_SIZE - lo as u64).min(len - off);
            if !f(a / LINE_SIZE, range_mask(lo, n as usize)) {
                return false;
            }
            off += n;
        }
        true
    }

    /// Every byte's latest store is durable by the hardware rule, and no pending NT chunk
    /// covers it: every crash image holds the current value.
    pub fn durable_hw(&self, addr: u64, len: u64) -> bool {
        Self::for_pieces(addr, len, |line, mask| self.open(line, false) & mask == 0)
    }

    /// `durable_hw`, and every byte's latest store was persisted by its writer's own flush and
    /// fence (or clflush, persist_range, eADR).
    pub fn durable_own(&self, addr: u64, len: u64) -> bool {
        Self::for_pieces(addr, len, |line, mask| self.open(line, true) & mask == 0)
    }

    /// The bytes of `line` that are not durable by the hardware rule (`own`: or by the own rule).
    #[inline]
    fn open(&self, line: u64, own: bool) -> u64 {
        match self.lines.get(line) {
            None => 0,
            Some(Slot::Compact(c)) => c.mask(),
            Some(Slot::Full(l)) if own => l.hw_open | l.own_open,
            Some(Slot::Full(l)) => l.hw_open,
        }
    }

    /// `durable_hw` or `durable_own`.
    pub fn durable(&self, rule: DurabilityRule, addr: u64, len: u64) -> bool {
        match rule {
            DurabilityRule::Hw => self.durable_hw(addr, len),
            DurabilityRule::Own => self.durable_own(addr, len),
        }
    }

    /// The latest store to the byte at `addr`, while it is not durable by both rules. `None`:
    /// that store is durable by both rules (the device then forgets it) or there is none. The
    /// byte itself may still be open if an older NT chunk is pending on it: ask `durable_hw`.
    pub fn persist_info(&self, addr: u64) -> Option<PersistInfo> {
        Self::persist_info_in(self.lines.get(line_of(addr))?, (addr % LINE_SIZE) as usize)
    }

    /// The first byte of `[addr, addr + len)` in address order whose
    /// [`PmDevice::persist_info`] `pick` accepts, with that info: the line table is probed once
    /// per line, not once per byte (a pass asks this at every PM load).
    pub fn find_persist_info(
        &self,
        addr: u64,
        len: u64,
        mut pick: impl FnMut(u64, &PersistInfo) -> bool,
    ) -> Option<(u64, PersistInfo)> {
        let end = addr.saturating_add(len);
        let mut a = addr;
        while a < end {
            let line_end = ((line_of(a) + 1) * LINE_SIZE).min(end);
            if let Some(slot) = self.lines.get(line_of(a)) {
                for x in a..line_end {
                    if let Some(info) = Self::persist_info_in(slot, (x % LINE_SIZE) as usize) {
                        if pick(x, &info) {
                            return Some((x, info));
                        }
                    }
                }
            }
            a = line_end;
        }
        None
    }

    fn persist_info_in(slot: Slot<'_>, b: usize) -> Option<PersistInfo> {
        let l = match slot {
            Slot::Compact(c) => {
                let live = c.live();
                return (live.mask >> b & 1 == 1).then_some(PersistInfo {
                    store: StoreId(live.id),
                    writer: live.tid,
                    nt: false,
                    hw: None,
                    own: None,
                    durable_hw: false,
                    durable_own: false,
                });
            }
            Slot::Full(l) => l,
        };
        let live = l.live_at(b)?;
        Some(PersistInfo {
            store: StoreId(live.id),
            writer: live.tid,
            nt: live.nt,
            hw: live.hw,
            own: live.own,
            durable_hw: l.hw_open >> b & 1 == 0,
            durable_own: (l.hw_open | l.own_open) >> b & 1 == 0,
        })
    }

    /// Calls `f(line, live)` for each latest store of a line whose bytes there are not durable
    /// by `rule`, in no particular order.
    fn for_each_undurable(&self, rule: DurabilityRule, mut f: impl FnMut(u64, &Live)) {
        for line in self.lines.keys() {
            match self.lines.get(line).expect("listed") {
                Slot::Compact(c) => {
                    let live = c.live();
                    if undurable(&live, rule) {
                        f(line, &live);
                    }
                }
                Slot::Full(l) => l.lives.iter().filter(|live| undurable(live, rule)).for_each(|live| f(line, live)),
            }
        }
    }

    /// Every store that is still the latest for some bytes that are not durable by `rule`, once
    /// per store id, in program order (store id). For the exit check; see
    /// [`PmDevice::unpersisted_iter`].
    pub fn unpersisted(&self, rule: DurabilityRule) -> Vec<UnpersistedStore> {
        self.unpersisted_iter(rule).collect()
    }

    /// [`PmDevice::unpersisted`], one store at a time. It holds one 24-byte piece (store, line,
    /// bytes) per line and store, sorted, and merges a store's pieces as it goes (an unaligned or
    /// rep store across lines is one entry: lowest byte, highest byte, bytes summed): a run
    /// ending with a million unpersisted lines needs 24 bytes a line for its exit check.
    pub fn unpersisted_iter(&self, rule: DurabilityRule) -> impl Iterator<Item = UnpersistedStore> + '_ {
        // Most lines have one latest store: reserved once, never grown by copying.
        let mut pieces: Vec<(u64, u64, u64)> = Vec::with_capacity(self.lines.len());
        self.for_each_undurable(rule, |line, live| pieces.push((live.id, line, live.mask)));
        pieces.sort_unstable();
        let mut i = 0;
        std::iter::from_fn(move || {
            let &(id, line, mask) = pieces.get(i)?;
            let (tid, nt) = self.writer_of(line, id);
            let extent = |line: u64, mask: u64| {
                let lo = line * LINE_SIZE + u64::from(mask.trailing_zeros());
                (lo, line * LINE_SIZE + 64 - u64::from(mask.leading_zeros()))
            };
            let (mut lo, mut hi) = extent(line, mask);
            let mut bytes = u64::from(mask.count_ones());
            i += 1;
            while let Some(&(next, line, mask)) = pieces.get(i) {
                if next != id {
                    break;
                }
                let (l, h) = extent(line, mask);
                (lo, hi) = (lo.min(l), hi.max(h));
                bytes += u64::from(mask.count_ones());
                i += 1;
            }
            Some(UnpersistedStore { store: StoreId(id), tid, addr: lo, len: hi - lo, bytes, nt })
        })
    }

    /// The writer of store `id`, the latest on some bytes of `line`, and whether it was
    /// non-temporal.
    fn writer_of(&self, line: u64, id: u64) -> (Tid, bool) {
        match self.lines.get(line).expect("listed") {
            Slot::Compact(c) => (c.tid, false),
            Slot::Full(l) => l.lives.iter().find(|l| l.id == id).map_or((0, false), |l| (l.tid, l.nt)),
        }
    }

    /// The ids of the stores [`PmDevice::unpersisted`] would list, sorted: 8 bytes a store, for
    /// passes that only prune what they keep per store.
    pub fn unpersisted_ids(&self, rule: DurabilityRule) -> Vec<u64> {
        let mut ids = Vec::with_capacity(self.lines.len());
        self.for_each_undurable(rule, |_, live| ids.push(live.id));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Flushes `tid` issued and never fenced that would still persist something (a version above
    /// the floor, or a store of `tid`'s not yet durable by its own rule), sorted by line.
    pub fn unfenced_flushes(&self, tid: Tid) -> Vec<UnfencedFlush> {
        let Some(t) = self.threads.get(&tid) else {
            return Vec::new();
        };
        let mut v: Vec<UnfencedFlush> = t
            .captures
            .iter()
            .filter(|(&line, &cap)| match self.lines.get(line) {
                None => false,
                Some(Slot::Compact(c)) => cap.min(c.id) > c.floor || (c.tid == tid && c.id <= cap),
                Some(Slot::Full(l)) => {
                    cap.min(l.current) > l.floor
                        || l.lives.iter().any(|lv| lv.tid == tid && !lv.nt && lv.id <= cap && lv.own.is_none())
                }
            })
            .map(|(&line, &cap)| UnfencedFlush { tid, line, captured: StoreId(cap) })
            .collect();
        v.sort_unstable_by_key(|u| u.line);
        v
    }

    /// NT stores of `tid` with chunks still pending (no fence since), in program order.
    pub fn pending_nt(&self, tid: Tid) -> Vec<PendingNt> {
        let Some(t) = self.threads.get(&tid) else {
            return Vec::new();
        };
        let mut lines = t.nt_lines.clone();
        lines.sort_unstable();
        lines.dedup();
        let mut acc: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for line in lines {
            let Some(Slot::Full(l)) = self.lines.get(line) else {
                continue;
            };
            for c in l.pending.iter().filter(|c| c.tid == tid) {
                let m = c.line_mask();
                let lo = line * LINE_SIZE + u64::from(m.trailing_zeros());
                let hi = line * LINE_SIZE + 63 - u64::from(m.leading_zeros());
                acc.entry(c.id)
                    .and_modify(|e| {
                        e.0 = e.0.min(lo);
                        e.1 = e.1.max(hi);
                    })
                    .or_insert((lo, hi));
            }
        }
        acc.into_iter()
            .map(|(id, (lo, hi))| PendingNt { store: StoreId(id), tid, addr: lo, len: hi - lo + 1 })
            .collect()
    }

    /// Threads with unfenced flushes or pending NT chunks, sorted.
    pub fn threads_with_pending(&self) -> Vec<Tid> {
        let mut v: Vec<Tid> = self
            .threads
            .keys()
            .copied()
            .filter(|&t| !self.unfenced_flushes(t).is_empty() || !self.pending_nt(t).is_empty())
            .collect();
        v.sort_unstable();
        v
    }

    /// The device's view of a tracked line's current contents (everything applied in program
    /// order); `None` if untracked (guest memory is then the truth). For consistency checks.
    pub fn current_line(&self, line: u64) -> Option<[u8; 64]> {
        self.lines.get(line).map(|s| match s {
            Slot::Compact(c) => c.current(self.lines.compact_base(line, c, || self.files.read(line))),
            Slot::Full(l) => l.current_content(),
        })
    }

    /// Tracked lines, sorted (lines with something not durable by some rule).
    pub fn tracked_lines(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.lines.keys().collect();
        v.sort_unstable();
        v
    }

    /// The size of the device's state now: what host memory follows (see [`PmStats`]).
    pub fn stats(&self) -> PmStats {
        let mut s = PmStats { lines: self.lines.len(), merged_versions: self.merged_versions, ..PmStats::default() };
        for line in self.lines.keys() {
            match self.lines.get(line).expect("listed") {
                Slot::Compact(_) => {
                    s.compact_lines += 1;
                    s.versions += 1;
                    s.live_stores += 1;
                }
                Slot::Full(l) => {
                    s.versions += l.log.len();
                    s.pending_chunks += l.pending.len();
                    s.live_stores += l.lives.len();
                }
            }
        }
        s
    }

    /// Every crash image the model allows right now, as independent per-line choices.
    pub fn crash_space(&self) -> CrashSpace {
        let mut keys: Vec<u64> = self.lines.keys().collect();
        keys.sort_unstable();
        let lines: Vec<(u64, std::borrow::Cow<'_, Line>)> = keys
            .into_iter()
            .map(|k| match self.lines.get(k).expect("listed") {
                Slot::Compact(c) => {
                    (k, std::borrow::Cow::Owned(c.expand(self.lines.compact_base(k, c, || self.files.read(k)))))
                }
                Slot::Full(l) => (k, std::borrow::Cow::Borrowed(l)),
            })
            .collect();
        CrashSpace::build(self.config.atomicity, lines.iter().map(|(k, l)| (*k, l.as_ref())))
    }
}

/// Whether `live`'s bytes are not durable by `rule`.
fn undurable(live: &Live, rule: DurabilityRule) -> bool {
    match rule {
        DurabilityRule::Hw => live.hw.is_none(),
        DurabilityRule::Own => live.own.is_none(),
    }
}

#[cfg(test)]
mod tests;
