//! Symbols and source lines for every object the guest has loaded: the program, its interpreter
//! and the libraries the dynamic linker mapped, each with its own symbolizer at its load bias.
//!
//! Libraries are discovered from the machine's mapping table: every file mapped executable is an
//! object, loaded at (start of its first mapping − that mapping's file offset), which is where
//! ld.so puts a library whose segments have `p_vaddr == p_offset`, as linkers lay them out.
//! [`Objects::refresh`] adds the ones mapped since the last call.
//!
//! An object without DWARF of its own gets its lines from its separate debug file if one is found
//! (by build ID under the `--debug-dir` directories, or through `.gnu_debuglink`:
//! [`loader::find_debug_file`]). Those lines only describe frames: which code is the program's
//! own for the passes ([`Objects::code_info`]) is decided by the objects' own DWARF, so what the
//! host happens to have installed under `/usr/lib/debug` changes how findings read, never which
//! findings there are. Debug files are read by ferrite, not the guest, and are not run inputs.
//!
//! A program a process starts with `execve` is a new *image*: its objects are learnt apart from
//! the other processes' (two programs are loaded at the same addresses, each in its own process).
//! Every thread belongs to one image, its process's since its last `execve`
//! ([`Objects::exec`], [`Objects::thread_created`]); a location is symbolised in its thread's
//! image, and the code information the passes get is the running process's image's
//! ([`Objects::switch_to`]). A thread that exec'ed is symbolised in its new image, events from
//! before its `execve` too (between a `fork` and its `execve` a shell's child runs the shell's
//! code only briefly).

use analyses::{CodeInfo, Finding, Frame, InObject, InlinedAt, Location, RawFinding};
use emu::sync::{CustomLock, SyncKind};
use emu::{Backing, Machine};
use loader::Symbolizer;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

struct Object {
    /// The image it belongs to.
    image: u32,
    path: String,
    /// The load bias: a PC less it is the address in the file.
    bias: u64,
    start: u64,
    end: u64,
    sym: Arc<Symbolizer>,
}

/// The objects a guest has loaded, with their symbols and lines.
#[derive(Default)]
pub struct Objects {
    objects: Vec<Object>,
    /// Host directories searched for separate debug files by build ID and debug link.
    debug_dirs: Vec<PathBuf>,
    /// The running process's image: where objects mapped now are learnt.
    image: u32,
    /// Images made so far (the first program's is 0).
    images: u32,
    /// Each thread's image, for threads of an image other than 0.
    thread_image: BTreeMap<u32, u32>,
    /// Each image's code information and synchronisation functions, computed once (a process
    /// switch hands them over again, and reading them from the symbols costs milliseconds).
    image_code: BTreeMap<u32, ImageCode>,
}

/// Where [`Objects`] stood at a snapshot ([`Objects::mark`]).
#[derive(Clone, Debug)]
pub struct ObjectsMark {
    objects: usize,
    image: u32,
    images: u32,
    thread_image: BTreeMap<u32, u32>,
}

/// What the passes and the machine are told of one image's code.
type ImageCode = (CodeInfo, Vec<(u64, SyncKind)>);

/// The debug-file directories of `--debug-dir` (empty entries dropped; the option without a value
/// searches none), or [`loader::DEFAULT_DEBUG_DIR`] when it is not given.
pub fn debug_dirs(given: Option<&[PathBuf]>) -> Vec<PathBuf> {
    match given {
        Some(dirs) => dirs.iter().filter(|d| !d.as_os_str().is_empty()).cloned().collect(),
        None => vec![PathBuf::from(loader::DEFAULT_DEBUG_DIR)],
    }
}

/// Which object a symbolizer describes: its path, load bias, contents and the debug-file
/// directories it was looked up with.
type CacheKey = (String, u64, blake3::Hash, Vec<PathBuf>);

/// Distinct objects kept in [`symbolizer`]'s cache before it starts over.
const CACHE_OBJECTS: usize = 256;

/// The symbolizer of an object, with its separate debug file, shared by every run of the process
/// that loads the same object at the same place: `--explore`, `ferrite crash` and `ferrite
/// compare` read a library's symbols and decompress its DWARF once, not once per run.
/// `hash` is the BLAKE3 of `bytes`.
fn symbolizer(path: &str, bytes: &[u8], hash: blake3::Hash, bias: u64, debug_dirs: &[PathBuf]) -> Arc<Symbolizer> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<Symbolizer>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (path.to_string(), bias, hash, debug_dirs.to_vec());
    // A panic while holding the lock leaves a consistent map behind.
    let lock = || cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(sym) = lock().get(&key) {
        return sym.clone();
    }
    let debug = loader::find_debug_file(Path::new(path), bytes, debug_dirs);
    let sym = Arc::new(Symbolizer::with_debug_file(bytes, debug, bias));
    let mut map = lock();
    if map.len() >= CACHE_OBJECTS {
        map.clear();
    }
    map.entry(key).or_insert(sym).clone()
}

impl Objects {
    /// No objects yet; separate debug files are looked for in `debug_dirs` (host paths).
    pub fn new(debug_dirs: &[PathBuf]) -> Objects {
        Objects {
            objects: Vec::new(),
            debug_dirs: debug_dirs.to_vec(),
            image: 0,
            images: 1,
            thread_image: BTreeMap::new(),
            image_code: BTreeMap::new(),
        }
    }

    /// How many objects are known (see [`Objects::keep_first`]).
    pub fn count(&self) -> usize {
        self.objects.len()
    }

    /// Forgets the objects learnt after the first `n` (a run restored from a snapshot taken when
    /// there were `n`).
    pub fn keep_first(&mut self, n: usize) {
        self.objects.truncate(n);
    }

    /// Where the objects and images stand now, for [`Objects::rewind`].
    pub fn mark(&self) -> ObjectsMark {
        ObjectsMark {
            objects: self.objects.len(),
            image: self.image,
            images: self.images,
            thread_image: self.thread_image.clone(),
        }
    }

    /// Back to `mark`, taken of these objects earlier (a run restored from a snapshot): the
    /// objects and images learnt since are forgotten, and so is the code information of every
    /// image that has lost objects (an image made again after the rewind is another program).
    pub fn rewind(&mut self, mark: &ObjectsMark) {
        let lost: std::collections::BTreeSet<u32> =
            self.objects[mark.objects.min(self.objects.len())..].iter().map(|o| o.image).collect();
        self.objects.truncate(mark.objects);
        self.image_code.retain(|&i, _| i < mark.images && !lost.contains(&i));
        self.image = mark.image;
        self.images = mark.images;
        self.thread_image = mark.thread_image.clone();
    }

    /// An object loaded at `bias`, covering `[start, end)`, with its separate debug file if it
    /// has no DWARF of its own.
    pub fn add(&mut self, path: &str, bytes: &[u8], bias: u64, start: u64, end: u64) {
        self.add_hashed(path, bytes, blake3::hash(bytes), bias, start, end);
    }

    /// [`Objects::add`], for a caller that has hashed `bytes` already (`hash`, their BLAKE3):
    /// the run's program, whose hash is the run's `program_hash` too.
    pub fn add_hashed(&mut self, path: &str, bytes: &[u8], hash: blake3::Hash, bias: u64, start: u64, end: u64) {
        let sym = symbolizer(path, bytes, hash, bias, &self.debug_dirs);
        self.objects.push(Object { image: self.image, path: path.to_string(), bias, start, end, sym });
        self.image_code.remove(&self.image);
    }

    /// The running image's code information and synchronisation functions (with the `custom`
    /// locks, the same at every call of a run), computed once per image and its objects.
    pub fn image_code(&mut self, custom: &[CustomLock]) -> &ImageCode {
        if !self.image_code.contains_key(&self.image) {
            let code = (self.code_info(), self.sync_functions(custom));
            self.image_code.insert(self.image, code);
        }
        &self.image_code[&self.image]
    }

    /// Thread `tid` exec'ed the program `path`, loaded at `bias` over `[start, end)`: a new image
    /// with that program, the running one from now on.
    pub fn exec(&mut self, tid: u32, path: &str, bytes: &[u8], bias: u64, start: u64, end: u64) {
        self.image = self.images;
        self.images += 1;
        self.thread_image.insert(tid, self.image);
        self.add(path, bytes, bias, start, end);
    }

    /// Thread `tid` was created by the running thread (a thread or a forked process): it runs
    /// the running image.
    pub fn thread_created(&mut self, tid: u32) {
        if self.images > 1 {
            self.thread_image.insert(tid, self.image);
        }
    }

    /// Thread `tid` runs now: its image becomes the running one. Returns whether that changed it.
    pub fn switch_to(&mut self, tid: u32) -> bool {
        let image = self.image_of(tid);
        let changed = image != self.image;
        self.image = image;
        changed
    }

    /// Whether some process exec'ed a program (there are several images).
    pub fn has_images(&self) -> bool {
        self.images > 1
    }

    fn image_of(&self, tid: u32) -> u32 {
        self.thread_image.get(&tid).copied().unwrap_or(0)
    }

    /// The objects of `image`.
    fn of(&self, image: u32) -> impl Iterator<Item = &Object> {
        self.objects.iter().filter(move |o| o.image == image)
    }

    /// Adds the files mapped executable that are not known yet. Returns whether any was added.
    pub fn refresh(&mut self, m: &Machine) -> bool {
        let mut added = false;
        let mut seen: Vec<(String, u64, u64, u64)> = Vec::new();
        for r in m.mem.regions() {
            if let Backing::File { path, offset } = &r.backing {
                match seen.iter_mut().find(|s| &s.0 == path) {
                    Some(s) => {
                        s.2 = s.2.max(r.end);
                        if r.perm.exec() {
                            s.3 = s.3.max(1);
                        }
                    }
                    None => seen.push((path.clone(), r.start.wrapping_sub(*offset), r.end, u64::from(r.perm.exec()))),
                }
            }
        }
        for (path, base, end, exec) in seen {
            if exec == 0 || self.of(self.image).any(|o| o.path == path) {
                continue;
            }
            if let Ok(bytes) = loader::input::read_regular(std::path::Path::new(&path), loader::input::PROGRAM_CAP) {
                self.add(&path, &bytes, base, base, end);
                added = true;
            }
        }
        added
    }

    /// Library code (functions without source lines) and the memory and string functions whose
    /// accesses belong to their caller, for the passes.
    pub fn code_info(&self) -> CodeInfo {
        const COPY: &[&str] = &[
            "memcpy", "memmove", "memset", "mempcpy", "memcmp", "bcmp", "strcpy", "stpcpy", "strncpy", "strcat",
            "strncat", "strlen", "strnlen", "strcmp", "strncmp", "strchr", "strrchr", "memchr", "wmemset",
        ];
        let is_copy = |name: &str| {
            let base = name.trim_start_matches('_');
            COPY.iter().any(|c| base.strip_prefix(c).is_some_and(|rest| rest.is_empty() || rest.starts_with('_')))
        };
        let mut info = CodeInfo::default();
        for o in self.of(self.image) {
            // Lines from a separate debug file do not make a library the program's own.
            let own_lines = o.sym.has_debug_info() && o.sym.debug_file().is_none();
            if !own_lines {
                // A stripped library: all of it, its internal functions without symbols too.
                info.library.push((o.start, o.end));
            } else {
                // The program's own code compiled from `std::atomic`'s header: its plain moves
                // are atomic loads and stores (a library's own atomics are its internals).
                info.atomic.extend(o.sym.ranges_from_files(loader::is_cxx_atomic_header));
                // Its C11 `_Atomic` objects, whose plain accesses are atomic ones too.
                let objects = o.sym.atomic_objects();
                if !objects.is_empty() {
                    info.atomic_objects.extend(objects);
                    info.atomic_object_code.push((o.start, o.end));
                }
            }
            // The object's own symbols: a debug file's local ones (glibc's memcpy variants) would
            // make the passes' view depend on the host's debug packages.
            for (name, addr, size) in o.sym.object_symbols() {
                let range = (addr, addr + size.max(1));
                if is_copy(name) {
                    info.copy.push(range);
                } else if own_lines && !o.sym.has_line(addr) {
                    info.library.push(range);
                }
            }
        }
        info.sorted()
    }

    /// Addresses of the recognised functions in every object: the standard synchronisation
    /// functions, the user's custom locks, libgomp's entry points and gcc's outlined OpenMP
    /// bodies ([`SyncKind::omp`]), and the C library's string and memory routines
    /// ([`SyncKind::Reads`]: library code only, found by the object's own symbols, so a
    /// program's own `strlen_utf8` is not one).
    pub fn sync_functions(&self, custom: &[CustomLock]) -> Vec<(u64, SyncKind)> {
        let mut out = Vec::new();
        for o in self.of(self.image) {
            for (name, kind) in SyncKind::STANDARD {
                if let Some(a) = o.sym.symbol_address(name) {
                    out.push((a, *kind));
                }
            }
            for c in custom {
                if let Some(a) = o.sym.symbol_address(&c.symbol) {
                    out.push((a, c.sync_kind()));
                }
            }
            let own_lines = o.sym.has_debug_info() && o.sym.debug_file().is_none();
            for (name, addr, _) in o.sym.object_symbols() {
                // libgomp's entry points and the bodies gcc outlined for it, by symbol: the
                // static library's, the shared one's (versioned names), the program's own
                // `main._omp_fn.0`.
                if let Some(kind) = SyncKind::omp(name) {
                    out.push((addr, kind));
                    continue;
                }
                if let Some(contract) = emu::sync::ReadContract::of_symbol(name) {
                    if !own_lines || !o.sym.has_line(addr) {
                        out.push((addr, SyncKind::Reads(contract)));
                    }
                }
            }
        }
        // A custom lock named like a routine (or a standard function) is the user's.
        out.sort_by_key(|&(a, k)| (a, !matches!(k, SyncKind::Custom(_))));
        out.dedup_by_key(|e| e.0);
        out
    }

    /// The custom locks of `custom` that no loaded object has a symbol for.
    pub fn missing_locks<'a>(&self, custom: &'a [CustomLock]) -> Vec<&'a str> {
        custom
            .iter()
            .filter(|c| !self.objects.iter().any(|o| o.sym.symbol_address(&c.symbol).is_some()))
            .map(|c| c.symbol.as_str())
            .collect()
    }

    /// The name of the custom lock at `addr`, if one of `custom` is there.
    pub fn custom_lock_at<'a>(&self, custom: &'a [CustomLock], addr: u64) -> Option<&'a str> {
        custom
            .iter()
            .find(|c| self.objects.iter().any(|o| o.sym.symbol_address(&c.symbol) == Some(addr)))
            .map(|c| c.symbol.as_str())
    }

    /// The frames of a backtrace of PCs in the running image.
    pub fn frames(&self, pcs: &[u64]) -> Vec<Frame> {
        self.frames_with(self.image, pcs, false)
    }

    /// The frames of a backtrace of PCs of thread `tid`.
    pub fn frames_of(&self, tid: u32, pcs: &[u64]) -> Vec<Frame> {
        self.frames_with(self.image_of(tid), pcs, false)
    }

    /// [`Objects::frames`] with lines only from the objects' own DWARF, not from separate debug
    /// files (whose DWARF is not even read for them), for backtraces summarised later by
    /// [`Location::from_backtrace`] (the crash log's): a library line there would become the
    /// location's summary.
    pub fn own_frames(&self, pcs: &[u64]) -> Vec<Frame> {
        self.frames_with(self.image, pcs, true)
    }

    fn frames_with(&self, image: u32, pcs: &[u64], own_only: bool) -> Vec<Frame> {
        pcs.iter()
            .map(|&pc| match self.of(image).find(|o| pc >= o.start && pc < o.end) {
                Some(o) => {
                    let l = if own_only && o.sym.debug_file().is_some() {
                        o.sym.symbol_lookup(pc)
                    } else {
                        o.sym.lookup(pc)
                    };
                    let mut f = Frame::new(pc, l.function, l.file, l.line);
                    if f.line.is_none() {
                        f.object = Some(InObject { path: o.path.clone(), offset: pc.wrapping_sub(o.bias) });
                    } else {
                        f.inlined_at = o
                            .sym
                            .inlined_at(pc)
                            .into_iter()
                            .map(|c| InlinedAt { function: c.function, file: c.file, line: c.line })
                            .collect();
                    }
                    f
                }
                None => Frame::new(pc, None, None, None),
            })
            .collect()
    }

    /// Whether the frame at `pc` has its line from its object's own DWARF, not from a separate
    /// debug file: the program's own code, as for [`Objects::code_info`].
    fn own_line(&self, image: u32, f: &Frame) -> bool {
        f.line.is_some()
            && self.of(image).find(|o| f.pc >= o.start && f.pc < o.end).is_some_and(|o| o.sym.debug_file().is_none())
    }

    /// The frame that summarises a backtrace: the innermost with a line of the program's own code
    /// (not a library's line from a debug file) outside the system's headers, else the innermost
    /// with a line of its own code, else the innermost with any line, else the first.
    pub fn summary<'a>(&self, frames: &'a [Frame]) -> Option<&'a Frame> {
        self.own_frame(self.image, frames)
            .map(|i| &frames[i])
            .or_else(|| frames.iter().find(|f| f.line.is_some()))
            .or(frames.first())
    }

    /// The innermost frame with a line of `image`'s own code outside the system's headers, else
    /// the innermost with a line of its own code.
    fn own_frame(&self, image: u32, frames: &[Frame]) -> Option<usize> {
        frames
            .iter()
            .position(|f| self.own_line(image, f) && !from_system_header(f))
            .or_else(|| frames.iter().position(|f| self.own_line(image, f)))
    }

    /// A location summarised by [`Objects::summary`], keeping the whole backtrace.
    pub fn location(&self, role: &str, tid: u32, frames: Vec<Frame>) -> Location {
        let image = self.image_of(tid);
        let own = self.own_frame(image, &frames);
        let mut loc = Location::from_backtrace(role, tid, frames);
        if let Some(top) = own.map(|i| loc.backtrace[i].clone()) {
            loc.pc = top.pc;
            loc.function = top.function;
            loc.file = top.file;
            loc.line = top.line;
        }
        loc
    }

    /// A raw finding's locations, with backtraces from the interned stacks (and, for a finding
    /// grouped by site, every stack combination of its occurrences): one finding, or several
    /// when a grouped finding's stack combinations put its key locations on different lines of
    /// the program. A pass groups by instruction; an instruction of a function compiled from a
    /// system header (`std::atomic<T>::load` at `-O0`) is shared by every place of the program
    /// that calls it, and each of those is a site of its own ([`Objects::location`] names the
    /// caller's line). Each split-off finding keeps its own stack combinations, occurrences and
    /// listed locations, and the message of its first combination when the pass gave one.
    pub fn findings(&self, m: &Machine, raw: RawFinding, seed: u64) -> Vec<Finding> {
        let backtrace = |l: &analyses::RawLocation| {
            let mut pcs = vec![l.pc];
            pcs.extend(m.stacks().call_sites(l.stack));
            self.frames_of(l.tid, &pcs)
        };
        let locate = |l: &analyses::RawLocation| self.location(l.role, l.tid, backtrace(l));
        let base = |message: String, occurrences: u64, locations: Vec<Location>, group| Finding {
            id: 0,
            analysis: raw.analysis.into(),
            kind: raw.kind.into(),
            message,
            seed,
            occurrences,
            locations,
            crash_image: None,
            schedule: None,
            interleaving: None,
            group,
        };
        let Some(g) = &raw.group else {
            let locations = raw.locations.iter().map(locate).collect();
            return vec![base(raw.message.clone(), raw.occurrences, locations, None)];
        };
        let key = g.key_locations.min(raw.locations.len());
        let stacks_of = |variants: &[&analyses::group::RawVariant]| -> Vec<analyses::StackVariant> {
            variants
                .iter()
                .map(|v| analyses::StackVariant {
                    occurrences: v.occurrences,
                    locations: v
                        .locations
                        .iter()
                        .map(|l| analyses::VariantLocation {
                            role: l.role.to_string(),
                            thread: l.tid,
                            backtrace: backtrace(l),
                        })
                        .collect(),
                })
                .collect()
        };
        let group = |stacks| analyses::Group {
            class: g.class.to_string(),
            key_locations: key as u32,
            stored: g.stored,
            stacks,
        };
        // The variants by the lines their key locations are attributed to, in the order of each
        // line's first variant. Lines, not roles: a pair pass's occurrences of two sites in
        // either order are one finding.
        type Site = Vec<(Option<String>, Option<u32>, u64)>;
        let site = |locs: &[Location]| -> Site {
            let mut at: Vec<_> = locs
                .iter()
                .map(|l| if l.line.is_some() { (l.file.clone(), l.line, 0) } else { (None, None, l.pc) })
                .collect();
            at.sort_unstable();
            at
        };
        let mut parts: Vec<(Site, Vec<Location>, Vec<&analyses::group::RawVariant>)> = Vec::new();
        for v in &g.variants {
            let keys: Vec<Location> = v.locations.iter().take(key).map(locate).collect();
            let at = site(&keys);
            match parts.iter_mut().find(|p| p.0 == at) {
                Some(p) => p.2.push(v),
                None => parts.push((at, keys, vec![v])),
            }
        }
        if parts.len() <= 1 {
            let variants: Vec<_> = g.variants.iter().collect();
            let locations = raw.locations.iter().map(locate).collect();
            return vec![base(raw.message.clone(), raw.occurrences, locations, Some(group(stacks_of(&variants))))];
        }
        // Split: the part of the first occurrence (the raw finding's own locations and message)
        // first, each other with its first variant's locations and message.
        let representative: Vec<Location> = raw.locations[..key].iter().map(locate).collect();
        let first = site(&representative);
        if let Some(i) = parts.iter().position(|p| p.0 == first) {
            parts[..=i].rotate_right(1);
            parts[0].1 = representative;
        }
        let mut out = Vec::new();
        for (i, (_, keys, variants)) in parts.into_iter().enumerate() {
            // Listed locations: the raw finding's, those some variant of this part had.
            let listed = raw.locations[key..]
                .iter()
                .filter(|l| variants.iter().any(|v| v.locations.iter().skip(key).any(|w| w.pc == l.pc)))
                .map(locate);
            let occurrences = variants.iter().map(|v| v.occurrences).sum();
            let message = match i {
                0 => raw.message.clone(),
                _ => variants.iter().find_map(|v| v.message.clone()).unwrap_or_else(|| raw.message.clone()),
            };
            let locations = keys.into_iter().chain(listed).collect();
            out.push(base(message, occurrences, locations, Some(group(stacks_of(&variants)))));
        }
        out
    }
}

/// Whether a frame's line is in a system header compiled into the program: C++'s library
/// templates (`std::atomic<T>::load` in `/usr/include/c++/12/bits/atomic_base.h`), the compiler's
/// intrinsics (`_mm_stream_si64` in `/usr/lib/gcc/.../include/emmintrin.h`). At `-O0` they are
/// functions of the program's own code with lines of their own, and a summary there would name
/// the header for every atomic access the program makes; its caller's line is the program's.
/// (Inlined, at `-O1` and up, the symbolizer already gives the line that inlined them.)
fn from_system_header(f: &Frame) -> bool {
    f.file.as_deref().is_some_and(loader::in_system_header)
}
