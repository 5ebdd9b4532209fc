//! ferrite's findings, and the detectors that produce them as passes over one execution.
//!
//! A [`Finding`] is what every part of ferrite reports: the machine (a guest fault, a hang), crash
//! testing (a failed recovery) and each detector pass. It names the analysis that found it, a
//! stable kind, a one-line message, the seed of the run that exposed it, and its source
//! locations with backtraces. Findings are deduplicated by [`Finding::key`], which leaves out
//! everything that may differ between runs that hit the same bug (thread ids, instruction counts).
//!
//! A detector is an [`Analysis`]: it declares which events it needs, observes them in program
//! order, and at the end returns [`RawFinding`]s whose locations are PCs and interned stacks; the
//! caller symbolises them. [`Passes`] runs the selected analyses side by side over one execution
//! as the machine's single [`Observer`], so the machine builds only events some pass wants.
//!
//! Every pass has one row in the registry ([`PASSES`]): its name, its options, whether `all`
//! includes it, the bug classes it claims, whether its findings are validated on crash images.
//! The rest of ferrite (the `--analyses` builder, `ferrite compare`'s claims, the command-line
//! shorthands, post-failure validation) asks the registry, never a pass's name.

#![deny(missing_docs)]

pub mod alias;
pub mod annotations;
pub mod group;
pub mod hawkset;
pub mod hmtrace;
mod inferred_locks;
mod irh;
mod options;
pub mod oscs;
mod pair;
mod persist;
pub mod pmrace;
mod registry;
mod screen;
pub mod shadow;
mod spaces;
pub mod sync;
#[cfg(test)]
mod testkit;
pub mod unpersisted;
pub mod vardalith;

pub use registry::{available, build, class_of_kind, info, PassInfo, PASSES};

use emu::callstack::StackId;
use emu::events::{Event, Interest, MemoryWant, Observer};
use emu::pm::PmDevice;
use serde::{Deserialize, Serialize};

/// A place in the program before symbolisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawLocation {
    /// What the place is in the finding (`store`, `load`, `fault`, ...).
    pub role: &'static str,
    /// The instruction.
    pub pc: u64,
    /// Its interned call stack.
    pub stack: StackId,
    /// The thread.
    pub tid: u32,
}

/// A finding before symbolisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFinding {
    /// The pass's name.
    pub analysis: &'static str,
    /// A stable kind (`unpersisted-store`, ...).
    pub kind: &'static str,
    /// One line saying what was found.
    pub message: String,
    /// How many events this finding stands for (stores left unpersisted, flushes, ...).
    pub occurrences: u64,
    /// The places that make the finding.
    pub locations: Vec<RawLocation>,
    /// Post-failure validation the pass asks for (PMRace): recover a crash image it captured
    /// and see whether recovery repairs what the finding is about.
    pub validation: Option<Validation>,
    /// For a finding that groups occurrences by site ([`group::Grouper`]): its class, key
    /// locations and every distinct combination of call stacks.
    pub group: Option<group::RawGroup>,
}

/// A request to validate a finding on a crash image ([`ImageSink`]) by running the program's
/// recovery on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    /// The image, as the sink numbered it.
    pub image: u32,
    /// Device byte ranges `(address, length)` holding the inconsistent data: the finding is a
    /// false positive if recovery overwrites every byte before reading any.
    pub overwritten: Vec<(u64, u32)>,
    /// A synchronisation variable `(device address, size, initial value)`: the finding is a
    /// false positive if recovery leaves it at its initial value.
    pub reset: Option<(u64, u32, u64)>,
    /// Device lines (address / 64) the image keeps at their newest version; every other line
    /// not yet durable is at its oldest allowed version (lost).
    pub newest_lines: Vec<u64>,
}

/// Where a pass can capture the PM state as a crash image: the image a crash at this moment
/// leaves when everything not yet durable is lost.
pub trait ImageSink {
    /// Captures the image now; its number, for [`Validation::image`].
    fn capture(&mut self, ev: &Event, device: &PmDevice) -> Option<u32>;
}

/// Settings of a run that passes may use (from `--config`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// PMRace's annotated synchronisation variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sync_vars: Vec<SyncVar>,
    /// PMRace's allow-list: functions or `file:line`s whose findings recovery repairs in ways
    /// validation cannot see (lazy recovery, checksums, redo logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pmrace_allow: Vec<String>,
}

/// A synchronisation variable in PM (PMRace's `pm_sync_var_hint`): at `offset` of every PM file
/// (a pool), `size` bytes (1, 2, 4 or 8) that recovery expects to find at `init`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncVar {
    /// Offset in the PM file.
    pub offset: u64,
    /// Bytes: 1, 2, 4 or 8.
    pub size: u32,
    #[serde(default)]
    /// The value recovery expects.
    pub init: u64,
}

/// A detector: a pass over the event stream.
///
/// # The contract
///
/// Before the first event the session calls [`Analysis::configure`] (the run's settings),
/// [`Analysis::set_image_sink`] (only for passes whose registry row wants images) and
/// [`Analysis::set_code`] (again whenever the dynamic linker maps a library). Then every event
/// whose kind the pass's [`Analysis::interest`] covers reaches [`Analysis::on_event`], in program
/// order (one thread runs at a time), by reference: the event lives on the machine's stack, and
/// nothing on this path may allocate once the pass has warmed up (`tests/hot_path.rs`). What
/// each interest brings:
///
/// - [`Interest::STORES`] brings PM stores (`Store`, `NtStore`, `RmwStore` with `dev != 0`), the
///   kernel's writes into PM included;
/// - [`Interest::LOADS`] brings PM loads, and the kernel's reads of a PM buffer for `write`/`pwrite`;
/// - [`Interest::PERSIST`] brings `Flush`, `Fence`, and pmemcheck's `SetClean`, `PmRegister`,
///   `PmUnregister`;
/// - [`Interest::SYNC`] brings `SyncEnter`/`SyncReturn` of recognised synchronisation and allocation
///   functions, `ThreadCreate` (and a fork's `SharedMemory` ranges before it), `ThreadExit`,
///   `Syscall` (before the kernel handles it), and
///   pmemcheck's transaction events (`TxBegin`, `TxEnd`, `TxAdd`, `TxRemove`, `TxIgnore`);
/// - [`Interest::MEMORY`] brings every DRAM load and store (`dev == 0`) and every PM access too
///   (a costly hook on every access: such passes are opt-in);
/// - [`Interest::CRASH`] brings the `CrashPoint`s;
/// - [`Interest::TAINT`] turns the taint engine on: [`Analysis::taint_source`] and
///   [`Analysis::on_tainted_store`] are called.
///
/// [`Analysis::finish`] is called once when the guest exited, normally or by a signal; when the
/// run hung (the instruction budget stopped it) or deadlocked, which is no end of the program,
/// only passes whose findings stand without one ([`Analysis::reports_when_stopped`]) are asked.
/// [`Analysis::stats`] follows `finish`, and then the pass is dropped ([`Passes::finish`] keeps
/// only its counters, so that what it held per line is freed before the next pass reports).
/// A pass whose registry row wants images
/// may attach a [`Validation`] to a finding: the driver validates it after the run.
pub trait Analysis {
    /// The pass's name: its registry row's, and the `analysis` of its findings.
    fn name(&self) -> &'static str;
    /// The events it needs (constant for the pass's lifetime).
    fn interest(&self) -> Interest;
    /// One event of the kinds [`Analysis::interest`] covers.
    fn on_event(&mut self, ev: &Event, device: &PmDevice);
    /// The run is over (every thread has exited, or, for a pass that
    /// [`Analysis::reports_when_stopped`], the run stopped); report.
    fn finish(&mut self, device: &PmDevice) -> Vec<RawFinding>;
    /// Whether what the pass found stands when the run stops before the program ends (a hang at
    /// the instruction budget, every thread blocked): true for a pass whose findings are pairs
    /// of accesses that already happened (a data race seen is a race whatever the program would
    /// have done next); false, the default, for one whose findings are judged at the program's
    /// end (stores not yet persisted when it exits, ...).
    fn reports_when_stopped(&self) -> bool {
        false
    }
    /// The run stopped before the program ended (the instruction budget, every thread blocked,
    /// ferrite interrupted); called before [`Analysis::finish`], only for a pass that
    /// [`Analysis::reports_when_stopped`], so that it can say what the stop left open.
    fn stopped(&mut self) {}
    /// What is known of the program's code (before the first event); passes that watch all
    /// memory use it to leave library internals out.
    fn set_code(&mut self, _code: &CodeInfo) {}
    /// See [`Observer::taint_source`] (with [`Interest::TAINT`]).
    fn taint_source(&mut self, _ev: &Event, _device: &PmDevice) -> u32 {
        0
    }
    /// See [`Observer::may_taint`].
    fn may_taint(&self, _ev: &Event, _device: &PmDevice) -> bool {
        true
    }
    /// See [`Observer::wants_memory`] (with [`Interest::MEMORY`]).
    fn wants_memory(&self) -> MemoryWant {
        MemoryWant::Always
    }
    /// See [`Observer::on_tainted_store`].
    fn on_tainted_store(&mut self, _ev: &Event, _content: &[u32], _address: &[u32], _device: &PmDevice) {}
    /// Where to capture crash images for post-failure validation (before the first event).
    fn set_image_sink(&mut self, _sink: std::rc::Rc<std::cell::RefCell<dyn ImageSink>>) {}
    /// The run's settings (before the first event).
    fn configure(&mut self, _settings: &Settings) {}
    /// Counters to report (after [`Analysis::finish`]), as `(name, value)`.
    fn stats(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// A copy of the pass as it is now, which goes on from here as this one would: what a
    /// snapshot of the run holds of the pass, so that a run restored from it (an exploration's
    /// schedule branching off an earlier one) reports what a run from the start does. `None`
    /// (the default) for a pass that cannot be copied (one holding a shared handle: an image
    /// sink, a recorder's log); runs with it are then never snapshotted.
    fn fork(&self) -> Option<Box<dyn Analysis>> {
        None
    }
}

/// The program's code as the session knows it from symbols and the line table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeInfo {
    /// `[start, end)` ranges of library code: functions without source lines (libc, the
    /// dynamic linker), whose internal accesses are not the program's own.
    pub library: Vec<(u64, u64)>,
    /// `[start, end)` ranges of the memory and string functions (memcpy, memmove, memset,
    /// strcpy, ... and their ifunc variants): their accesses count as their caller's.
    pub copy: Vec<(u64, u64)>,
    /// `[start, end)` ranges of the program's code compiled from C++'s `std::atomic` header
    /// (inlined at `-O1` and up, out of line at `-O0`): its accesses are to atomic objects,
    /// plain `mov`s included (a release store, an acquire load).
    pub atomic: Vec<(u64, u64)>,
    /// `[start, end)` ranges of the program's static C11 `_Atomic` objects (from DWARF): the
    /// machine reports its code's accesses to them as atomic ones (`Machine::set_atomic_objects`).
    pub atomic_objects: Vec<(u64, u64)>,
    /// `[start, end)` ranges of the objects (executable, shared objects) that declare them.
    pub atomic_object_code: Vec<(u64, u64)>,
}

impl CodeInfo {
    fn within(ranges: &[(u64, u64)], pc: u64) -> bool {
        let i = ranges.partition_point(|r| r.0 <= pc);
        i > 0 && pc < ranges[i - 1].1
    }

    /// Sorts the ranges (call once before [`CodeInfo::is_library`]).
    pub fn sorted(mut self) -> CodeInfo {
        self.library.sort_unstable();
        self.copy.sort_unstable();
        self.atomic.sort_unstable();
        self.atomic_objects.sort_unstable();
        self.atomic_objects.dedup();
        self.atomic_object_code.sort_unstable();
        self
    }

    /// Whether an access at `pc` is compiled from C++'s `std::atomic` (an atomic object's load
    /// or store).
    pub fn is_atomic(&self, pc: u64) -> bool {
        !self.atomic.is_empty() && CodeInfo::within(&self.atomic, pc)
    }

    /// Whether `addr` is in one of the program's static C11 `_Atomic` objects.
    pub fn is_atomic_object(&self, addr: u64) -> bool {
        !self.atomic_objects.is_empty() && CodeInfo::within(&self.atomic_objects, addr)
    }

    /// Whether an access at `pc` is a library's own (not a copy made for the caller).
    pub fn is_library(&self, pc: u64) -> bool {
        !self.library.is_empty() && CodeInfo::within(&self.library, pc) && !CodeInfo::within(&self.copy, pc)
    }
}

/// The selected analyses, fed side by side.
pub struct Passes {
    passes: Vec<(Interest, Box<dyn Analysis>)>,
    tally: LockTally,
}

/// How often each custom lock function (by entry address) was called, and how many of its
/// calls acquired the lock: so that a lock configuration that does not say what the program
/// does shows (a try-lock whose success value is wrong acquires never, or always).
#[derive(Clone, Debug, Default)]
pub struct LockTally {
    /// Entry address → (calls, acquisitions, failed attempts).
    counts: std::collections::BTreeMap<u64, [u64; 3]>,
    /// Per thread, the custom lock calls it is in (entry addresses).
    open: rustc_hash::FxHashMap<u32, Vec<u64>>,
}

impl LockTally {
    fn observe(&mut self, ev: &Event) {
        use emu::events::EventKind;
        use emu::sync::{CustomOp, SyncKind};
        match ev.kind {
            EventKind::SyncEnter(SyncKind::Custom(_)) => {
                self.counts.entry(ev.pc).or_default()[0] += 1;
                self.open.entry(ev.tid).or_default().push(ev.pc);
            }
            EventKind::SyncReturn(k @ SyncKind::Custom(c)) => {
                let Some(entry) = self.open.get_mut(&ev.tid).and_then(|v| v.pop()) else { return };
                if c.op != CustomOp::Release {
                    let n = self.counts.entry(entry).or_default();
                    if k.succeeded(ev.new) {
                        n[1] += 1;
                    } else {
                        n[2] += 1;
                    }
                }
            }
            EventKind::ThreadExit => {
                self.open.remove(&ev.tid);
            }
            _ => {}
        }
    }
}

impl Passes {
    /// The passes, fed in this order.
    pub fn new(passes: Vec<Box<dyn Analysis>>) -> Passes {
        Passes { passes: passes.into_iter().map(|p| (p.interest(), p)).collect(), tally: LockTally::default() }
    }

    /// Calls of each custom lock function seen (when some pass watched synchronisation), by
    /// entry address: `(address, calls, acquisitions, failed attempts)`.
    pub fn lock_calls(&self) -> Vec<(u64, u64, u64, u64)> {
        self.tally.counts.iter().map(|(&a, &[c, ok, no])| (a, c, ok, no)).collect()
    }

    /// A copy of every pass as it is now ([`Analysis::fork`]), or `None` if some pass cannot be
    /// copied.
    pub fn fork(&self) -> Option<Passes> {
        let passes = self.passes.iter().map(|(i, p)| Some((*i, p.fork()?))).collect::<Option<Vec<_>>>()?;
        Some(Passes { passes, tally: self.tally.clone() })
    }

    /// Whether there is no pass.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Every pass's findings, pass by pass ([`Analysis::finish`]). Each pass is dropped once it
    /// has reported, keeping only its counters ([`Finished`]): what it held per touched line is
    /// given back before the next pass builds what it reports from, so the run's peak of host
    /// memory is its state during the run, not that plus every pass's report-time scratch.
    pub fn finish(&mut self, device: &PmDevice) -> Vec<RawFinding> {
        let mut raws = Vec::new();
        for (_, p) in &mut self.passes {
            raws.extend(p.finish(device));
            Finished::replace(p);
        }
        raws
    }

    /// The findings of the passes whose findings stand when the run stopped before the
    /// program's end ([`Analysis::reports_when_stopped`]), pass by pass; every pass is dropped
    /// as in [`Passes::finish`] (the others first: they report nothing).
    pub fn finish_stopped(&mut self, device: &PmDevice) -> Vec<RawFinding> {
        for (_, p) in &mut self.passes {
            if !p.reports_when_stopped() {
                Finished::replace(p);
            }
        }
        let mut raws = Vec::new();
        for (_, p) in &mut self.passes {
            if p.reports_when_stopped() {
                p.stopped();
                raws.extend(p.finish(device));
                Finished::replace(p);
            }
        }
        raws
    }

    /// Hands every pass what is known of the program's code.
    pub fn set_code(&mut self, code: &CodeInfo) {
        for (_, p) in &mut self.passes {
            p.set_code(code);
        }
    }

    /// Whether some pass validates findings on crash images ([`PassInfo::wants_images`]).
    pub fn wants_images(&self) -> bool {
        self.passes.iter().any(|(_, p)| info(p.name()).is_some_and(|i| i.wants_images))
    }

    /// Hands every pass the sink for crash images ([`Analysis::set_image_sink`]).
    pub fn set_image_sink(&mut self, sink: std::rc::Rc<std::cell::RefCell<dyn ImageSink>>) {
        for (_, p) in &mut self.passes {
            p.set_image_sink(sink.clone());
        }
    }

    /// Hands every pass the run's settings ([`Analysis::configure`]).
    pub fn configure(&mut self, settings: &Settings) {
        for (_, p) in &mut self.passes {
            p.configure(settings);
        }
    }

    /// Every pass's counters, as `pass.name`.
    pub fn stats(&self) -> Vec<(String, u64)> {
        self.passes
            .iter()
            .flat_map(|(_, p)| p.stats().into_iter().map(|(k, v)| (format!("{}.{k}", p.name()), v)))
            .collect()
    }
}

/// What is left of a pass after [`Passes::finish`]: its name, interest and counters
/// ([`Analysis::stats`], asked after `finish`), and none of its per-line or per-access state.
struct Finished {
    name: &'static str,
    interest: Interest,
    stats: Vec<(&'static str, u64)>,
    reports_when_stopped: bool,
}

impl Finished {
    /// Replaces `p` (which has reported, or never will) by what is left of it, dropping it.
    fn replace(p: &mut Box<dyn Analysis>) {
        let done = Finished {
            name: p.name(),
            interest: p.interest(),
            stats: p.stats(),
            reports_when_stopped: p.reports_when_stopped(),
        };
        *p = Box::new(done);
    }
}

impl Analysis for Finished {
    fn name(&self) -> &'static str {
        self.name
    }
    fn interest(&self) -> Interest {
        self.interest
    }
    fn on_event(&mut self, _ev: &Event, _device: &PmDevice) {}
    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
    fn reports_when_stopped(&self) -> bool {
        self.reports_when_stopped
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.stats.clone()
    }
}

impl Observer for Passes {
    fn interest(&self) -> Interest {
        self.passes.iter().fold(Interest::NONE, |a, (i, _)| a.union(*i))
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        use emu::events::EventKind;
        let kind = match ev.kind {
            // Accesses outside PM reach only passes that asked for all memory.
            EventKind::Load | EventKind::Store | EventKind::RmwStore if ev.dev == 0 => Interest::MEMORY,
            EventKind::Load => Interest::LOADS,
            EventKind::Flush(_)
            | EventKind::Fence(_)
            | EventKind::Persist
            | EventKind::SetClean
            | EventKind::PmRegister
            | EventKind::PmUnregister => Interest::PERSIST,
            EventKind::SyncEnter(_)
            | EventKind::SyncReturn(_)
            | EventKind::ThreadCreate
            | EventKind::SharedMemory
            | EventKind::ThreadExit
            | EventKind::FutexWake
            | EventKind::FutexWoken
            | EventKind::ProcessReaped
            | EventKind::Syscall
            | EventKind::TxBegin
            | EventKind::TxEnd
            | EventKind::TxAdd
            | EventKind::TxRemove
            | EventKind::TxIgnore
            | EventKind::Free => Interest::SYNC,
            EventKind::CrashPoint => Interest::CRASH,
            EventKind::WordAcquire | EventKind::WordRelease => Interest::LOCK_WORDS,
            EventKind::AtomicAccess => Interest::ATOMICS,
            _ => Interest::STORES,
        };
        if kind == Interest::SYNC {
            self.tally.observe(ev);
        }
        let pm_access = kind == Interest::LOADS || kind == Interest::STORES;
        for (i, p) in &mut self.passes {
            if i.has(kind) || (pm_access && i.has(Interest::MEMORY)) {
                p.on_event(ev, device);
            }
        }
    }

    fn taint_source(&mut self, ev: &Event, device: &PmDevice) -> u32 {
        for (i, p) in &mut self.passes {
            if i.has(Interest::TAINT) {
                let id = p.taint_source(ev, device);
                if id != 0 {
                    return id;
                }
            }
        }
        0
    }

    fn may_taint(&self, ev: &Event, device: &PmDevice) -> bool {
        self.passes.iter().any(|(i, p)| i.has(Interest::TAINT) && p.may_taint(ev, device))
    }

    fn wants_memory(&self) -> MemoryWant {
        let watching = self.passes.iter().filter(|(i, _)| i.has(Interest::MEMORY));
        watching.map(|(_, p)| p.wants_memory()).max().unwrap_or(MemoryWant::No)
    }

    fn on_tainted_store(&mut self, ev: &Event, content: &[u32], address: &[u32], device: &PmDevice) {
        for (i, p) in &mut self.passes {
            if i.has(Interest::TAINT) {
                p.on_tainted_store(ev, content, address, device);
            }
        }
    }
}

/// One frame of a backtrace, symbolised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The return address (or, for the innermost frame, the instruction).
    pub pc: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The function, if a symbol covers the PC.
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The source file, if there is line information.
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The source line.
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// For a frame without a source line: the object file the PC is in and the PC's address
    /// in it.
    pub object: Option<InObject>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    /// Where the frame's function was inlined, innermost first: the function holding each
    /// inlined call and the call's line, up to the function whose body the PC is in (what
    /// `addr2line -i` and gdb's `bt` show as frames of their own at the same PC).
    pub inlined_at: Vec<InlinedAt>,
}

/// A call that was inlined: the function it is in and its line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlinedAt {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The function holding the inlined call.
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// Its source file.
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The line of the inlined call.
    pub line: Option<u32>,
}

impl InlinedAt {
    /// `function (file:line)`, as much of it as is known.
    pub fn describe(&self) -> String {
        with_line(&self.function, &self.file, self.line).unwrap_or_else(|| name_or_unknown(&self.function).to_string())
    }
}

/// `function (file:line)` with the file's last component, if the line is known.
fn with_line(function: &Option<String>, file: &Option<String>, line: Option<u32>) -> Option<String> {
    let (file, line) = (file.as_deref()?, line?);
    Some(format!("{} ({}:{line})", name_or_unknown(function), file.rsplit('/').next().unwrap_or(file)))
}

fn name_or_unknown(function: &Option<String>) -> &str {
    function.as_deref().unwrap_or("??")
}

/// Where a PC is in the object file that holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InObject {
    /// The file's path, as the guest named it.
    pub path: String,
    /// The PC less the object's load bias: the address `addr2line -e PATH` or a debugger given
    /// the file wants.
    pub offset: u64,
}

impl Frame {
    /// A frame of `pc` with what symbols say about it.
    pub fn new(pc: u64, function: Option<String>, file: Option<String>, line: Option<u32>) -> Frame {
        Frame { pc, function, file, line, object: None, inlined_at: Vec::new() }
    }

    /// `function (file:line)`, as much of it as is known; without a line, the object and the
    /// address in it, as the sanitizers print them (`?? (libpmem.so.1+0x1ac30)`).
    pub fn describe(&self) -> String {
        if let Some(s) = with_line(&self.function, &self.file, self.line) {
            return s;
        }
        let f = name_or_unknown(&self.function);
        match &self.object {
            Some(o) => format!("{f} ({}+{:#x})", o.path.rsplit('/').next().unwrap_or(&o.path), o.offset),
            None => format!("{f} (pc {:#x})", self.pc),
        }
    }
}

/// A place in the program that plays a role in a finding (the faulting instruction, the racing
/// store, the load that observed it, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// What the place is in the finding.
    pub role: String,
    /// The summary frame's PC.
    pub pc: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The summary frame's function.
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The summary frame's file.
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    /// The summary frame's line.
    pub line: Option<u32>,
    /// The thread.
    pub thread: u32,
    /// Every frame, innermost first.
    pub backtrace: Vec<Frame>,
}

impl Location {
    /// A location whose summary is the innermost frame with a source line (the program's own
    /// code rather than the libc function it called), keeping the whole backtrace.
    pub fn from_backtrace(role: &str, thread: u32, backtrace: Vec<Frame>) -> Location {
        let top = backtrace
            .iter()
            .find(|f| f.line.is_some())
            .or(backtrace.first())
            .cloned()
            .unwrap_or(Frame::new(0, None, None, None));
        Location {
            role: role.to_string(),
            pc: top.pc,
            function: top.function,
            file: top.file,
            line: top.line,
            thread,
            backtrace,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
/// What ferrite reports: a bug candidate, symbolised.
pub struct Finding {
    /// Its number in the report, from 1.
    pub id: u32,
    /// `fault`, `hang`, `deadlock`, `crash`, or a detector's name.
    pub analysis: String,
    /// A stable, analysis-specific kind (`SIGSEGV`, `unpersisted-store`, ...).
    pub kind: String,
    /// One line saying what was found.
    pub message: String,
    /// The seed of the run that exposed it.
    pub seed: u64,
    /// How many events this finding stands for; findings at the same source lines are merged.
    #[serde(default = "one")]
    pub occurrences: u64,
    /// The places that make it, with backtraces.
    pub locations: Vec<Location>,
    /// For `crash` findings: which crash point and image of the workload run failed recovery,
    /// so that `ferrite replay --finding` can rebuild it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_image: Option<CrashImageRef>,
    /// For findings of `--strategy exhaustive`: the decisions (thread chosen at each scheduling
    /// decision) that lead to the run that exposed it; replay follows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Vec<u32>>,
    /// For findings of `--strategy pmrace`: the targeted interleaving (PMRace's sync-point loads
    /// and their address) of the run that exposed it; replay holds the same loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaving: Option<emu::sched::Hold>,
    /// For findings grouped by site (the race passes): the group's class, which locations make
    /// its key, what the racing store wrote, and every distinct combination of call stacks its
    /// occurrences had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Group>,
}

/// What a finding grouped by site keeps besides its representative `locations` (see
/// [`group::Grouper`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The pass's class of the group, part of the key (`hawkset`: `flushed` or `unflushed`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub class: String,
    /// How many leading locations identify the finding; the others are listed (hawkset's
    /// racing loads, one per site).
    pub key_locations: u32,
    /// What the racing store wrote, when the pass could tell ([`Stored`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<Stored>,
    /// Every distinct combination of locations with their call stacks, with how many
    /// occurrences had it.
    pub stacks: Vec<StackVariant>,
}

impl Group {
    /// The group of one occurrence at `locations` (already symbolised), its first
    /// `key_locations` identifying it: a finding whose other occurrences come later (the crash
    /// findings of other crash points at the same source lines) absorbs them through
    /// [`Finding::merge`].
    pub fn of_one(locations: &[Location], key_locations: usize) -> Group {
        Group {
            class: String::new(),
            key_locations: key_locations.min(locations.len()) as u32,
            stored: None,
            stacks: vec![StackVariant {
                occurrences: 1,
                locations: locations
                    .iter()
                    .map(|l| VariantLocation { role: l.role.clone(), thread: l.thread, backtrace: l.backtrace.clone() })
                    .collect(),
            }],
        }
    }
}

/// One combination of call stacks of a grouped finding's occurrences.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackVariant {
    /// Occurrences with these stacks.
    pub occurrences: u64,
    /// The locations, each with its thread and backtrace (innermost first).
    pub locations: Vec<VariantLocation>,
}

/// A location of a [`StackVariant`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantLocation {
    /// Its role, as in the finding's locations.
    pub role: String,
    /// The thread.
    pub thread: u32,
    /// Every frame, innermost first.
    pub backtrace: Vec<Frame>,
}

/// What a racing store wrote, judged from its values ([`Stored::of`]): what the race can do to a
/// reader that acts on it before it is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stored {
    /// An address into the PM the program maps: a reader follows it.
    Pointer,
    /// Data.
    Value,
    /// The old value plus or minus a little: a count.
    Counter,
    /// An offset into a PM file the program maps (a pool offset, the `off` of a PMEMoid): a
    /// reader adds it to the mapping's base and follows it, as it would a pointer.
    Offset,
}

impl Stored {
    /// What a store of `size` bytes that replaced `old` with `new` wrote: a pointer if it is 8
    /// bytes into `[pm_lo, pm_hi)` (the guest addresses of the program's PM accesses so far), a
    /// counter if it moved the old value by 1 to 16, else a value.
    pub fn of(size: u32, old: u64, new: u64, pm_lo: u64, pm_hi: u64) -> Stored {
        if size == 8 && new >= pm_lo && new < pm_hi {
            return Stored::Pointer;
        }
        let bits = 8 * size.clamp(1, 8);
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let d = new.wrapping_sub(old) & mask;
        let back = old.wrapping_sub(new) & mask;
        if (1..=16).contains(&d) || (1..=16).contains(&back) {
            Stored::Counter
        } else {
            Stored::Value
        }
    }
}

/// Counts of what the stores of one site wrote ([`Stored`]), for [`RawGroup`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoredCounts(pub [u64; 4]);

impl StoredCounts {
    /// One more store of that shape.
    pub fn add(&mut self, s: Stored) {
        self.0[s as usize] += 1;
    }

    /// The worst shape the site's stores had: a pointer if any of them stored one, else an
    /// offset if any did, else the commoner of values and counters (a value wins a tie). One
    /// store instruction can serve many fields (a non-inlined helper such as P-CLHT's
    /// `movnt64` stores keys, overflow links and the table's offset): a race on it can lose a
    /// pointer if it ever stored one, however many values it stored besides.
    pub fn shape(&self) -> Option<Stored> {
        let [p, v, c, o] = self.0;
        if p + v + c + o == 0 {
            None
        } else if p > 0 {
            Some(Stored::Pointer)
        } else if o > 0 {
            Some(Stored::Offset)
        } else if v >= c {
            Some(Stored::Value)
        } else {
            Some(Stored::Counter)
        }
    }
}

/// A crash image of a workload run: the crash point's index and the value of each dimension of
/// its crash space (see `emu::pm::CrashSpace`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashImageRef {
    /// The crash point's index in the workload run.
    pub point: u32,
    /// A value per dimension of the point's crash space.
    pub choice: Vec<u32>,
}

fn one() -> u64 {
    1
}

impl Location {
    /// `role@file:line`, or `role@pc` without a line.
    pub fn site_key(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(n)) => format!("|{}@{f}:{n}", self.role),
            _ => format!("|{}@{:#x}", self.role, self.pc),
        }
    }
}

impl Finding {
    /// What identifies the same bug across runs and schedules: the analysis, the kind, and each
    /// location's role, source line (or PC without one) and callers. A finding grouped by site
    /// ([`Finding::group`]) is identified by its class and its key locations' lines alone: its
    /// call stacks are what it groups.
    pub fn key(&self) -> String {
        let mut k = format!("{}/{}", self.analysis, self.kind);
        if let Some(g) = &self.group {
            if !g.class.is_empty() {
                k.push_str(&format!("#{}", g.class));
            }
            // As a set, and a pair pass's `earlier-`/`later-` left out: the same two sites seen in
            // the other order in another run (or shard) are the same finding.
            let mut sites: Vec<String> = self
                .locations
                .iter()
                .take(g.key_locations as usize)
                .map(|l| {
                    let s = l.site_key();
                    s.replacen("|earlier-", "|", 1).replacen("|later-", "|", 1)
                })
                .collect();
            sites.sort_unstable();
            for s in sites {
                k.push_str(&s);
            }
            return k;
        }
        for l in &self.locations {
            k.push_str(&l.site_key());
            for fr in l.backtrace.iter().skip(1) {
                k.push_str(&format!(",{:#x}", fr.pc));
            }
        }
        k
    }

    /// How many distinct call-stack combinations it stands for (1 unless grouped).
    pub fn stack_count(&self) -> usize {
        self.group.as_ref().map_or(1, |g| g.stacks.len().max(1))
    }

    /// Adds `other` (a finding with the same key) to this one: occurrences add up; a grouped
    /// finding also gains the other's listed locations it lacks (up to `max_listed`) and its
    /// stack combinations.
    fn absorb(&mut self, other: Finding, max_listed: usize) {
        self.occurrences += other.occurrences;
        let (Some(g), Some(o)) = (self.group.as_mut(), other.group) else { return };
        let key = g.key_locations as usize;
        for l in other.locations.into_iter().skip(key) {
            let listed = self.locations.len() - key.min(self.locations.len());
            if listed < max_listed && !self.locations.iter().skip(key).any(|m| m.site_key() == l.site_key()) {
                self.locations.push(l);
            }
        }
        for v in o.stacks {
            match g.stacks.iter_mut().find(|w| same_stacks(w, &v)) {
                Some(w) => w.occurrences += v.occurrences,
                None => g.stacks.push(v),
            }
        }
        if g.stored.is_none() {
            g.stored = o.stored;
        }
    }

    /// A grouped finding lists each racing source line once: several instructions of one line
    /// (the two 8-byte loads of a 16-byte `PMEMoid`) are one listed location, the first, and one
    /// stack combination ([`same_stacks`]).
    fn dedup_listed(&mut self) {
        let Some(g) = &mut self.group else { return };
        let mut stacks: Vec<StackVariant> = Vec::with_capacity(g.stacks.len());
        for v in std::mem::take(&mut g.stacks) {
            match stacks.iter_mut().find(|w| same_stacks(w, &v)) {
                Some(w) => w.occurrences += v.occurrences,
                None => stacks.push(v),
            }
        }
        g.stacks = stacks;
        let key = (g.key_locations as usize).min(self.locations.len());
        let mut seen: Vec<String> = Vec::new();
        let mut i = key;
        while i < self.locations.len() {
            let k = self.locations[i].site_key();
            if seen.contains(&k) {
                self.locations.remove(i);
            } else {
                seen.push(k);
                i += 1;
            }
        }
    }

    /// Merges findings with the same [`key`](Finding::key) (several instructions of one source
    /// line, say), keeping the first and adding up occurrences (and, for grouped findings,
    /// their listed locations and stack combinations), and numbers them from 1.
    pub fn merge(findings: Vec<Finding>) -> Vec<Finding> {
        let mut out: Vec<Finding> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for mut f in findings {
            f.dedup_listed();
            let key = f.key();
            match index.get(&key) {
                Some(&i) => out[i].absorb(f, MAX_LISTED),
                None => {
                    index.insert(key, out.len());
                    out.push(f);
                }
            }
        }
        for (i, f) in out.iter_mut().enumerate() {
            f.id = i as u32 + 1;
        }
        out
    }
}

/// Most listed (non-key) locations a merged grouped finding keeps (its stack combinations keep
/// them all).
pub const MAX_LISTED: usize = 16;

/// Whether two stack combinations are the same: roles, threads aside, the innermost frame's
/// source line (its PC without one: several instructions of a line, a struct copy's moves, are
/// one place) and every caller's PC.
fn same_stacks(a: &StackVariant, b: &StackVariant) -> bool {
    let same_place = |f: &Frame, g: &Frame| match (&f.file, f.line, &g.file, g.line) {
        (Some(ff), Some(fl), Some(gf), Some(gl)) => ff == gf && fl == gl,
        _ => f.pc == g.pc,
    };
    a.locations.len() == b.locations.len()
        && a.locations.iter().zip(&b.locations).all(|(x, y)| {
            x.role == y.role
                && x.backtrace.len() == y.backtrace.len()
                && x.backtrace.iter().zip(&y.backtrace).enumerate().all(|(i, (f, g))| {
                    if i == 0 {
                        same_place(f, g)
                    } else {
                        f.pc == g.pc
                    }
                })
        })
}

#[cfg(test)]
mod finding_tests {
    use super::*;

    fn at(role: &str, line: u32) -> Location {
        Location {
            role: role.into(),
            pc: u64::from(line),
            function: None,
            file: Some("a.c".into()),
            line: Some(line),
            thread: 1,
            backtrace: Vec::new(),
        }
    }

    fn pair(first: Location, second: Location) -> Finding {
        Finding {
            id: 0,
            analysis: "hmtrace".into(),
            kind: "data-race".into(),
            message: String::new(),
            seed: 0,
            occurrences: 1,
            locations: vec![first, second],
            crash_image: None,
            schedule: None,
            interleaving: None,
            group: Some(Group { class: String::new(), key_locations: 2, stored: None, stacks: Vec::new() }),
        }
    }

    #[test]
    fn a_pair_of_sites_in_either_order_is_one_finding_across_runs() {
        let one = pair(at("earlier-read", 20), at("later-write", 22));
        let other = pair(at("earlier-write", 22), at("later-read", 20));
        let both_writes = pair(at("earlier-write", 22), at("later-write", 22));
        assert_eq!(one.key(), other.key());
        let merged = Finding::merge(vec![one, other, both_writes]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].occurrences, 2);
    }
}
