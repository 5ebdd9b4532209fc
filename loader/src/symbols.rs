//! Turning guest addresses into function names and source lines, and
//! symbol names into guest addresses, for one loaded ELF object.
//!
//! Names come from DWARF when the address is covered by debug information
//! (which also knows about inlining) and otherwise from `.symtab` and
//! `.dynsym`; file and line come only from DWARF line tables. Everything is
//! best effort: missing or malformed debug information gives less
//! information, never an error or a panic.
//!
//! An object without `.debug_info` of its own (a distribution's stripped
//! library) may have a separate debug file, found as gdb finds it
//! ([`find_debug_file`]): by build ID under a debug-file directory
//! (`DIR/.build-id/ab/cdef....debug`, accepted only if its own build ID is the
//! same), then by `.gnu_debuglink` next to the object, in its `.debug`
//! directory, and under each debug-file directory followed by the object's
//! directory (accepted only if its CRC-32 is the one the link records). Its
//! `.symtab` and DWARF describe the object at the same link-time addresses, so
//! they are used with the object's load bias, beside the object's own
//! `.dynsym`.
//!
//! Left out: split DWARF (`.dwo`/`.dwp`), dwz supplementary files
//! (`.gnu_debugaltlink`), debuginfod, and symbol versions (`memcpy@GLIBC_2.14` is
//! simply `memcpy`). The call chain of inlined frames beyond the innermost one is read only
//! when asked ([`Symbolizer::inlined_at`]: findings' backtraces), never cached.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use addr2line::Context;
use gimli::{EndianArcSlice, RunTimeEndian};
use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SymbolKind, SymbolSection};

type Reader = EndianArcSlice<RunTimeEndian>;

/// Once this many addresses are cached the cache starts over, so a guest
/// that jumps everywhere cannot make it grow without bound.
const CACHE_LIMIT: usize = 1 << 20;

/// How many symbols before the probe address are considered: enough to
/// step over aliases and nested symbols, few enough to keep lookups cheap.
const BACKWARD_SCAN: usize = 64;

/// Where an address is in the source. Each part is `None` when unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    /// The innermost function (an inlined one if the address is inside an
    /// inlined call), demangled. A function's own body is named by its
    /// best-ranked symbol when DWARF's name is a lesser alias of it (glibc's
    /// `__GI_abort` is `abort`).
    pub function: Option<String>,
    /// The path as DWARF records it: the compilation directory joined with
    /// the file's directory and name. Match on suffixes.
    pub file: Option<String>,
    /// The line.
    pub line: Option<u32>,
}

/// One defined function or object symbol, at its link-time address.
#[derive(Clone, Debug)]
struct Sym {
    name: String,
    addr: u64,
    size: u64,
    /// Where the symbol's extent ends for address lookup: `addr + size`,
    /// or for unsized symbols (hand-written assembly) the next symbol or
    /// the end of the section.
    end: u64,
    rank: Rank,
    /// Only the separate debug file has it (a local function of a stripped
    /// library).
    debug_only: bool,
}

/// Which of several symbols at one address names it best: global before
/// weak before local, then fewer leading underscores (`malloc` over
/// `__libc_malloc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    binding: u8,
    plain: u8,
}

impl Rank {
    fn new(name: &str, global: bool, weak: bool) -> Rank {
        let binding = match (global, weak) {
            (_, true) => 1,
            (true, false) => 2,
            (false, false) => 0,
        };
        let underscores = name.bytes().take_while(|&b| b == b'_').count().min(8) as u8;
        Rank { binding, plain: 8 - underscores }
    }
}

struct Dwarf {
    context: Context<Reader>,
    /// The sections the context reads, for walks of the debugging entries of its own
    /// ([`Symbolizer::atomic_objects`]).
    sections: Arc<gimli::Dwarf<Reader>>,
    cache: HashMap<u64, SourceLoc>,
}

/// Where [`find_debug_file`] looks when no other debug-file directory is
/// given, as gdb's default `debug-file-directory`.
pub const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// A separate debug file of an object: `objcopy --only-keep-debug`'s output,
/// or what a distribution's `-dbg`/`-dbgsym` package installs.
#[derive(Clone, Debug)]
pub struct DebugFile {
    /// The host path it was read from.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Address and name lookups for one loaded ELF object.
///
/// `Send` and `Sync`: the DWARF state and the lookup cache sit behind one
/// mutex, so lookups from several threads serialise.
pub struct Symbolizer {
    load_bias: u64,
    /// Function symbols sorted by address, best-ranked last among equals.
    functions: Vec<Sym>,
    /// Every defined function or object symbol by exact name, the best
    /// ranked one for duplicated names.
    by_name: HashMap<String, (u64, Rank)>,
    /// The same for the symbols of the separate debug file.
    debug_names: HashMap<String, (u64, Rank)>,
    /// The DWARF sections that answer lookups (the object's own or its
    /// debug file's) as the file holds them, compressed or not, with the
    /// file's byte order, kept until the first lookup parses them: a run
    /// that never looks into a library never decompresses its debug
    /// information. Only these sections are copied out of the file, not the
    /// whole file (a static program's code and libc's symbols are most of
    /// it, and every run of a program pays for the copy).
    dwarf_sections: Mutex<Option<(gimli::DwarfSections<RawSection>, RunTimeEndian)>>,
    /// Whether that file has a `.debug_info` section.
    has_dwarf: bool,
    dwarf: OnceLock<Option<Mutex<Dwarf>>>,
    /// The separate debug file in use, if any.
    debug_file: Option<PathBuf>,
    /// Caches [`Symbolizer::symbol_lookup`] (every lookup when there is no
    /// DWARF; with DWARF, `dwarf` holds the cache).
    symbol_cache: Mutex<HashMap<u64, SourceLoc>>,
}

impl Symbolizer {
    /// Reads the symbol tables and debug information of `elf_bytes`, an
    /// object loaded with `load_bias` added to its link-time addresses (see
    /// [`crate::Image::load_bias`]).
    ///
    /// Never fails: without DWARF it knows only symbols, without symbols it
    /// knows nothing, and bytes that are not an ELF file give a symbolizer
    /// that answers every lookup with an empty [`SourceLoc`].
    pub fn new(elf_bytes: impl AsRef<[u8]>, load_bias: u64) -> Self {
        Symbolizer::with_debug_file(elf_bytes, None, load_bias)
    }

    /// [`Symbolizer::new`], with the object's separate debug file (see
    /// [`find_debug_file`], which checks that it belongs to the object): its
    /// `.symtab` joins the object's symbols and its DWARF gives the lines.
    /// The debug file is ignored when the object has DWARF of its own or when
    /// it is not an ELF file.
    pub fn with_debug_file(elf_bytes: impl AsRef<[u8]>, debug: Option<DebugFile>, load_bias: u64) -> Self {
        let bytes = elf_bytes.as_ref();
        let mut symbolizer = Symbolizer {
            load_bias,
            functions: Vec::new(),
            by_name: HashMap::new(),
            debug_names: HashMap::new(),
            dwarf_sections: Mutex::new(None),
            has_dwarf: false,
            dwarf: OnceLock::new(),
            debug_file: None,
            symbol_cache: Mutex::new(HashMap::new()),
        };
        let Ok(file) = ElfFile64::<Endianness>::parse(bytes) else {
            return symbolizer;
        };
        let debug = debug.filter(|_| file.section_by_name(".debug_info").is_none());
        let debug_elf = debug.as_ref().and_then(|d| ElfFile64::<Endianness>::parse(&d.bytes[..]).ok());
        // The debug file's `.dynsym` is an empty NOBITS section: the object's
        // own stands for it.
        let debug_symbols = debug_elf.iter().flat_map(|f| f.symbols().map(move |s| (f, true, s)));
        symbolizer
            .read_symbols(file.symbols().chain(file.dynamic_symbols()).map(|s| (&file, false, s)).chain(debug_symbols));
        match (&debug_elf, &debug) {
            (Some(elf), Some(d)) => {
                symbolizer.debug_file = Some(d.path.clone());
                symbolizer.has_dwarf = elf.section_by_name(".debug_info").is_some();
                if symbolizer.has_dwarf {
                    *lock(&symbolizer.dwarf_sections) = Some(raw_dwarf(elf));
                }
            }
            _ => {
                symbolizer.has_dwarf = file.section_by_name(".debug_info").is_some();
                if symbolizer.has_dwarf {
                    *lock(&symbolizer.dwarf_sections) = Some(raw_dwarf(&file));
                }
            }
        }
        symbolizer
    }

    /// Whether the object has DWARF debug information (source lines), its
    /// own or in its separate debug file.
    pub fn has_debug_info(&self) -> bool {
        self.has_dwarf
    }

    /// The separate debug file whose symbols and DWARF are used, if any.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_file.as_deref()
    }

    /// The DWARF state, built on first use.
    fn dwarf(&self) -> Option<&Mutex<Dwarf>> {
        self.dwarf
            .get_or_init(|| {
                let (sections, endian) = lock(&self.dwarf_sections).take()?;
                load_dwarf(&sections, endian)
                    .map(|(context, sections)| Mutex::new(Dwarf { context, sections, cache: HashMap::new() }))
            })
            .as_ref()
    }

    /// The function, file and line of the guest address `pc`.
    pub fn lookup(&self, pc: u64) -> SourceLoc {
        // The bias may be "negative" (see `Image::load_bias`), so this is
        // modular arithmetic, not an underflow.
        let addr = pc.wrapping_sub(self.load_bias);
        match self.dwarf() {
            Some(dwarf) => {
                let mut dwarf = lock(dwarf);
                if let Some(loc) = dwarf.cache.get(&addr) {
                    return loc.clone();
                }
                let (mut loc, outer_name) = dwarf_lookup(&dwarf.context, addr);
                if loc.function.is_none() {
                    loc.function = self.symbol_name(addr);
                } else if let Some(alias) = outer_name.and_then(|raw| self.better_alias(addr, &raw)) {
                    loc.function = Some(alias);
                }
                cache_insert(&mut dwarf.cache, addr, &loc);
                loc
            }
            None => self.symbol_lookup(pc),
        }
    }

    /// The calls `pc`'s innermost function was inlined at, innermost first: each the function
    /// that holds the inlined call and the line of that call, up to the function whose own body
    /// it is. Empty where `pc` is in no inlined code or the object has no DWARF. Code of a system
    /// header inlined into the program starts the chain where [`Symbolizer::lookup`] names the
    /// program's line (the header's frames are not repeated).
    pub fn inlined_at(&self, pc: u64) -> Vec<SourceLoc> {
        let addr = pc.wrapping_sub(self.load_bias);
        // addr2line computes `addr + 1` unchecked, and no code lives there.
        let Some(dwarf) = self.dwarf().filter(|_| addr != u64::MAX) else { return Vec::new() };
        let dwarf = lock(dwarf);
        let Ok(mut frames) = dwarf.context.find_frames(addr).skip_all_loads() else { return Vec::new() };
        let mut chain = Vec::new();
        while let Ok(Some(f)) = frames.next() {
            let function = f.function.as_ref().and_then(|n| n.demangle().ok()).map(Cow::into_owned);
            let (file, line) = f.location.map_or((None, None), |l| (l.file.map(str::to_string), l.line));
            chain.push(SourceLoc { function: function.filter(|n| !n.is_empty()), file, line });
        }
        // The frame `lookup` names: the innermost, or for header code the first of the program's.
        let named = match chain.first() {
            Some(first) if first.file.as_deref().is_some_and(in_system_header) => {
                chain.iter().position(|f| f.file.as_deref().is_some_and(|p| !in_system_header(p))).unwrap_or(0)
            }
            _ => 0,
        };
        chain.drain(..(named + 1).min(chain.len()));
        chain
    }

    /// Whether the guest address `pc` has a source line: the same as
    /// `self.lookup(pc).line.is_some()`, without naming the function
    /// (no DWARF function tree, no inlined frames, no demangling, nothing
    /// cached). The passes ask it of every function symbol of an object at
    /// start-up ([`Symbolizer::lookup`]'s line comes from the first unit
    /// holding a line row at the address, whether or not `find_frames`
    /// found a function first, so the line table alone decides).
    pub fn has_line(&self, pc: u64) -> bool {
        let addr = pc.wrapping_sub(self.load_bias);
        let Some(dwarf) = self.dwarf() else { return false };
        let dwarf = lock(dwarf);
        if let Some(loc) = dwarf.cache.get(&addr) {
            return loc.line.is_some();
        }
        // addr2line computes `addr + 1` unchecked, and no code lives there.
        addr != u64::MAX && matches!(dwarf.context.find_location(addr), Ok(Some(l)) if l.line.is_some())
    }

    /// The guest address ranges whose line-table rows name a source file `file` accepts, merged
    /// where they touch, sorted. The rows of code inlined from a header name the header (the
    /// symbolizer's [`Symbolizer::lookup`] then reports the line that inlined it), so this finds
    /// the instructions compiled from a header's functions wherever they were inlined. Read once
    /// at start-up, not per access.
    pub fn ranges_from_files(&self, file: impl Fn(&str) -> bool) -> Vec<(u64, u64)> {
        let Some(dwarf) = self.dwarf() else { return Vec::new() };
        let dwarf = lock(dwarf);
        let Ok(rows) = dwarf.context.find_location_range(0, u64::MAX) else { return Vec::new() };
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (addr, len, loc) in rows {
            if len == 0 || !loc.file.is_some_and(&file) {
                continue;
            }
            let (lo, hi) = (addr.wrapping_add(self.load_bias), addr.wrapping_add(self.load_bias).saturating_add(len));
            out.push((lo, hi));
        }
        merge_ranges(out)
    }

    /// The guest address ranges of the static objects the object's DWARF declares `_Atomic`
    /// (C11): atomic globals and statics, atomic members and elements of global structures and
    /// arrays (`crate::atomics`), sorted and merged. Read once at start-up, not per access.
    pub fn atomic_objects(&self) -> Vec<(u64, u64)> {
        let Some(dwarf) = self.dwarf() else { return Vec::new() };
        let sections = lock(dwarf).sections.clone();
        let bias = self.load_bias;
        crate::atomics::atomic_objects(&sections)
            .into_iter()
            .map(|(lo, hi)| (lo.wrapping_add(bias), hi.wrapping_add(bias)))
            .collect()
    }

    /// The function of the guest address `pc` from the symbol tables alone
    /// (the debug file's included), without file and line: no DWARF is read.
    pub fn symbol_lookup(&self, pc: u64) -> SourceLoc {
        let addr = pc.wrapping_sub(self.load_bias);
        let mut cache = lock(&self.symbol_cache);
        if let Some(loc) = cache.get(&addr) {
            return loc.clone();
        }
        let loc = SourceLoc { function: self.symbol_name(addr), file: None, line: None };
        cache_insert(&mut cache, addr, &loc);
        loc
    }

    /// The guest address of the function or object symbol called exactly
    /// `name` (not demangled, no version suffix). For an IFUNC such as
    /// glibc's `memcpy` that is the resolver's address. Only the object's
    /// own symbol tables count, not its debug file's.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).map(|&(addr, _)| addr.wrapping_add(self.load_bias))
    }

    /// Every function symbol as (name, guest address, size), sorted by
    /// address. Names are as in the symbol table, not demangled; aliases
    /// appear once each.
    pub fn symbols(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.functions.iter().map(|s| (s.name.as_str(), s.addr.wrapping_add(self.load_bias), s.size))
    }

    /// Every function symbol of the object itself as (name, guest address,
    /// size), as [`Symbolizer::symbols`] but without those only its separate
    /// debug file has.
    pub fn object_symbols(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.functions
            .iter()
            .filter(|s| !s.debug_only)
            .map(|s| (s.name.as_str(), s.addr.wrapping_add(self.load_bias), s.size))
    }

    /// Reads symbols, each with the file it comes from (the object or its
    /// debug file: both describe the same link-time addresses) and whether
    /// that is the debug file.
    fn read_symbols<'a, 'd: 'a>(
        &mut self,
        symbols: impl Iterator<
            Item = (&'a ElfFile64<'d, Endianness>, bool, object::read::elf::ElfSymbol64<'d, 'a, Endianness>),
        >,
    ) {
        let mut functions: Vec<(Sym, Option<u64>)> = Vec::new();
        for (file, debug_only, symbol) in symbols {
            let kind = symbol.kind();
            if !matches!(kind, SymbolKind::Text | SymbolKind::Data) {
                continue;
            }
            // Undefined, absolute and common symbols have no address here.
            let SymbolSection::Section(section_index) = symbol.section() else {
                continue;
            };
            let Ok(name) = symbol.name() else { continue };
            // `.symtab` spells versioned symbols `__libc_start_main@GLIBC_2.2.5`.
            let name = name.split('@').next().unwrap_or(name);
            if name.is_empty() {
                continue;
            }
            let rank = Rank::new(name, symbol.is_global(), symbol.is_weak());
            let addr = symbol.address();
            let names = if debug_only { &mut self.debug_names } else { &mut self.by_name };
            names
                .entry(name.to_string())
                .and_modify(|best| {
                    if rank > best.1 {
                        *best = (addr, rank);
                    }
                })
                .or_insert((addr, rank));
            if kind == SymbolKind::Text {
                // A debug file's sections are NOBITS but keep their addresses and sizes.
                let section_end =
                    file.section_by_index(section_index).ok().and_then(|s| s.address().checked_add(s.size()));
                let size = symbol.size();
                let sym = Sym { name: name.to_string(), addr, size, end: addr.saturating_add(size), rank, debug_only };
                functions.push((sym, section_end));
            }
        }
        // `.symtab` repeats what `.dynsym` has (and a debug file's `.symtab`
        // the object's); keep the best-ranked copy.
        functions.sort_by(|(a, _), (b, _)| (a.addr, &a.name, Reverse(a.rank)).cmp(&(b.addr, &b.name, Reverse(b.rank))));
        functions.dedup_by(|(later, _), (kept, _)| {
            let same = later.addr == kept.addr && later.name == kept.name;
            if same {
                kept.debug_only &= later.debug_only;
            }
            same
        });
        functions.sort_by_key(|(s, _)| (s.addr, s.rank));

        // Unsized symbols reach up to the next symbol, within their section.
        let starts: Vec<u64> = functions.iter().map(|(s, _)| s.addr).collect();
        for (sym, section_end) in &mut functions {
            if sym.size != 0 {
                continue;
            }
            let next = starts.partition_point(|&a| a <= sym.addr);
            let next_start = starts.get(next).copied().unwrap_or(u64::MAX);
            let limit = section_end.unwrap_or(sym.addr.saturating_add(1));
            sym.end = next_start.min(limit).max(sym.addr.saturating_add(1));
        }
        self.functions = functions.into_iter().map(|(s, _)| s).collect();
    }

    /// The best-ranked function symbol whose extent holds the link-time
    /// address `addr`.
    fn symbol_at(&self, addr: u64) -> Option<&Sym> {
        let after = self.functions.partition_point(|s| s.addr <= addr);
        let candidates = self.functions.get(..after)?;
        candidates.iter().rev().take(BACKWARD_SCAN).find(|s| addr < s.end)
    }

    /// The best symbol-table name for the link-time address `addr`.
    fn symbol_name(&self, addr: u64) -> Option<String> {
        let sym = self.symbol_at(addr)?;
        Some(addr2line::demangle_auto(Cow::Borrowed(sym.name.as_str()), None).into_owned())
    }

    /// A better name than DWARF's `raw` for the function holding `addr`:
    /// when `raw` is a worse-ranked alias of the symbol there (glibc's
    /// `__GI_abort`, a local alias of the global `abort`), the symbol's name.
    fn better_alias(&self, addr: u64, raw: &str) -> Option<String> {
        let sym = self.symbol_at(addr)?;
        let &(alias_addr, alias_rank) = self.by_name.get(raw).or_else(|| self.debug_names.get(raw))?;
        (sym.name != raw && alias_addr == sym.addr && sym.rank > alias_rank)
            .then(|| addr2line::demangle_auto(Cow::Borrowed(sym.name.as_str()), None).into_owned())
    }
}

/// Finds the separate debug file of the object at `object_path` (a host
/// path) whose bytes are `elf_bytes`, as gdb does: first by build ID,
/// `DIR/.build-id/ab/cdef....debug` for each of `debug_dirs`, accepted only
/// if the candidate carries the same build ID; then by `.gnu_debuglink`,
/// `OBJDIR/NAME`, `OBJDIR/.debug/NAME` and `DIR/OBJDIR/NAME` for each of
/// `debug_dirs`, accepted only if the candidate's CRC-32 is the one the link
/// records. `OBJDIR` is the object's directory as given and, if different,
/// with symbolic links resolved.
///
/// `None` when the object has `.debug_info` of its own, names no debug file,
/// or no candidate exists, can be read, is an ELF file and matches. Reads
/// only regular files.
pub fn find_debug_file(object_path: &Path, elf_bytes: &[u8], debug_dirs: &[PathBuf]) -> Option<DebugFile> {
    let file = ElfFile64::<Endianness>::parse(elf_bytes).ok()?;
    if file.section_by_name(".debug_info").is_some() {
        return None;
    }
    let own = std::fs::canonicalize(object_path).ok();
    let read = |path: &Path| -> Option<Vec<u8>> {
        // The object itself is no debug file, whatever it calls itself.
        if own.is_some() && std::fs::canonicalize(path).ok() == own {
            return None;
        }
        let bytes = crate::input::read_regular(path, crate::input::DEBUG_FILE_CAP).ok()?;
        ElfFile64::<Endianness>::parse(&bytes[..]).is_ok().then_some(bytes)
    };
    if let Some(id) = file.build_id().ok().flatten() {
        for path in build_id_candidates(id, debug_dirs) {
            let Some(bytes) = read(&path) else { continue };
            let matches = ElfFile64::<Endianness>::parse(&bytes[..])
                .ok()
                .and_then(|f| f.build_id().ok().flatten().map(|other| other == id))
                .unwrap_or(false);
            if matches {
                return Some(DebugFile { path, bytes });
            }
        }
    }
    if let Some((name, crc)) = file.gnu_debuglink().ok().flatten() {
        for path in debuglink_candidates(object_path, OsStr::from_bytes(name), debug_dirs) {
            let Some(bytes) = read(&path) else { continue };
            if crc32fast::hash(&bytes) == crc {
                return Some(DebugFile { path, bytes });
            }
        }
    }
    None
}

/// `DIR/.build-id/ab/cdef....debug` for each directory: the first byte of the
/// build ID names the subdirectory, the rest the file. Build IDs shorter than
/// two bytes name nothing.
fn build_id_candidates(id: &[u8], debug_dirs: &[PathBuf]) -> Vec<PathBuf> {
    if id.len() < 2 {
        return Vec::new();
    }
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let (first, rest) = (hex(&id[..1]), hex(&id[1..]));
    debug_dirs.iter().map(|dir| dir.join(".build-id").join(&first).join(format!("{rest}.debug"))).collect()
}

/// Where a `.gnu_debuglink` name may be, in gdb's order. The name must be a
/// plain file name: one with a `/` names nothing.
fn debuglink_candidates(object_path: &Path, name: &OsStr, debug_dirs: &[PathBuf]) -> Vec<PathBuf> {
    if name.is_empty() || name.as_bytes().contains(&b'/') {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    let given = object_path.parent().map(Path::to_path_buf).filter(|d| !d.as_os_str().is_empty());
    dirs.push(given.unwrap_or_else(|| PathBuf::from(".")));
    if let Some(real) = std::fs::canonicalize(object_path).ok().and_then(|p| p.parent().map(Path::to_path_buf)) {
        if !dirs.contains(&real) {
            dirs.push(real);
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in &dirs {
        out.push(dir.join(name));
        out.push(dir.join(".debug").join(name));
    }
    for debug_dir in debug_dirs {
        for dir in dirs.iter().filter(|d| d.is_absolute()) {
            let relative = dir.strip_prefix("/").unwrap_or(dir);
            out.push(debug_dir.join(relative).join(name));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// One DWARF section as its file holds it (compressed or not): empty when
/// the file has no such section.
struct RawSection {
    format: object::CompressionFormat,
    data: Arc<[u8]>,
    uncompressed_size: u64,
}

impl Default for RawSection {
    fn default() -> Self {
        RawSection { format: object::CompressionFormat::None, data: Arc::from(&[][..]), uncompressed_size: 0 }
    }
}

/// Copies the DWARF sections addr2line reads out of `file`, without
/// decompressing them, with the file's byte order.
fn raw_dwarf(file: &ElfFile64<'_, Endianness>) -> (gimli::DwarfSections<RawSection>, RunTimeEndian) {
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let raw = |id: gimli::SectionId| -> Result<RawSection, std::convert::Infallible> {
        // addr2line reads no location lists: they are not kept.
        if matches!(id, gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists) {
            return Ok(RawSection::default());
        }
        Ok(file
            .section_by_name(id.name())
            .and_then(|section| section.compressed_data().ok())
            .map(|c| RawSection { format: c.format, data: c.data.into(), uncompressed_size: c.uncompressed_size })
            .unwrap_or_default())
    };
    let Ok(sections) = gimli::DwarfSections::load(raw);
    (sections, endian)
}

/// Builds the DWARF context from the debug sections [`raw_dwarf`] copied,
/// decompressing them if needed (a section that does not decompress is
/// empty). `None` when there is no usable DWARF.
fn load_dwarf(
    sections: &gimli::DwarfSections<RawSection>,
    endian: RunTimeEndian,
) -> Option<(Context<Reader>, Arc<gimli::Dwarf<Reader>>)> {
    let dwarf = sections.borrow(|raw| {
        if raw.format == object::CompressionFormat::None {
            return EndianArcSlice::new(raw.data.clone(), endian);
        }
        let compressed =
            object::CompressedData { format: raw.format, data: &raw.data, uncompressed_size: raw.uncompressed_size };
        let data = compressed.decompress().map(|d| Arc::from(d.as_ref())).unwrap_or_else(|_| Arc::from(&[][..]));
        EndianArcSlice::new(data, endian)
    });
    let dwarf = Arc::new(dwarf);
    Context::from_arc_dwarf(dwarf.clone()).ok().map(|c| (c, dwarf))
}

/// The location of `addr`, and the function's raw (linkage) name when the
/// innermost frame is a function's own body rather than an inlined call.
fn dwarf_lookup(context: &Context<Reader>, addr: u64) -> (SourceLoc, Option<String>) {
    let mut loc = SourceLoc::default();
    let mut outer_name = None;
    // addr2line computes `addr + 1` unchecked, and no code lives there.
    if addr == u64::MAX {
        return (loc, None);
    }
    // Split DWARF is not supported, so every load request is declined.
    if let Ok(mut frames) = context.find_frames(addr).skip_all_loads() {
        // The first frame is the innermost: the inlined function the
        // instruction belongs to, with the instruction's own location.
        if let Ok(Some(frame)) = frames.next() {
            loc.function = frame
                .function
                .as_ref()
                .and_then(|name| name.demangle().ok())
                .map(Cow::into_owned)
                .filter(|name| !name.is_empty());
            if let Some(location) = frame.location {
                loc.file = location.file.map(str::to_string);
                loc.line = location.line;
            }
            let mut outer = Vec::new();
            while let Ok(Some(f)) = frames.next() {
                outer.push(f);
            }
            // Code of a system header inlined into the program (std::atomic<T>::store at -O1,
            // an intrinsic): the instruction is the program's, at the line that inlined it.
            if loc.file.as_deref().is_some_and(in_system_header) {
                let program = outer.iter().find_map(|f| {
                    let l = f.location.as_ref()?;
                    (!in_system_header(l.file?)).then_some((f, l))
                });
                if let Some((f, l)) = program {
                    loc.file = l.file.map(str::to_string);
                    loc.line = l.line;
                    if let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                        loc.function = Some(name.into_owned()).filter(|n| !n.is_empty());
                    }
                }
            }
            if outer.is_empty() {
                outer_name = frame.function.as_ref().and_then(|name| name.raw_name().ok()).map(Cow::into_owned);
            }
        }
    }
    if loc.file.is_none() {
        if let Ok(Some(location)) = context.find_location(addr) {
            loc.file = location.file.map(str::to_string);
            loc.line = location.line;
        }
    }
    (loc, outer_name)
}

/// Whether a source path is a system header: C++'s library (`/usr/include/c++/...`), libc's
/// headers, the compiler's intrinsics (`/usr/lib/gcc/.../include/emmintrin.h`, clang's under
/// `/usr/lib/llvm-*`). Their code compiled into a program belongs to the program's line that used
/// it.
pub fn in_system_header(path: &str) -> bool {
    path.starts_with("/usr/include/") || path.starts_with("/usr/lib/gcc/") || path.starts_with("/usr/lib/llvm-")
}

/// Whether `path` is the C++ standard library's header of `std::atomic` (libstdc++'s `<atomic>`
/// and `<bits/atomic_base.h>`, libc++'s `<atomic>` and `<__atomic/...>`). Every memory access
/// compiled from it is an access to an atomic object, even where it is a plain `mov` (a
/// `memory_order_release` store, an `acquire` load): C++ defines those as never racing.
pub fn is_cxx_atomic_header(path: &str) -> bool {
    in_system_header(path)
        && (path.ends_with("/bits/atomic_base.h") || path.ends_with("/atomic") || path.contains("/__atomic/"))
}

fn cache_insert(cache: &mut HashMap<u64, SourceLoc>, addr: u64, loc: &SourceLoc) {
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(addr, loc.clone());
}

/// A panic while holding the lock leaves only a cache behind, which is
/// still consistent, so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `ranges` (half-open), sorted and merged where they overlap or touch.
pub(crate) fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cxx_atomic_headers_are_libstdcxx_and_libcxx_own() {
        assert!(is_cxx_atomic_header("/usr/include/c++/12/bits/atomic_base.h"));
        assert!(is_cxx_atomic_header("/usr/include/c++/12/atomic"));
        assert!(is_cxx_atomic_header("/usr/lib/llvm-16/include/c++/v1/__atomic/atomic_base.h"));
        // A program's own file called `atomic`, other headers with atomic in their name.
        assert!(!is_cxx_atomic_header("/home/u/src/atomic"));
        assert!(!is_cxx_atomic_header("/usr/include/c++/12/bits/shared_ptr_atomic.h"));
        assert!(!is_cxx_atomic_header("/usr/lib/gcc/x86_64-linux-gnu/12/include/stdatomic.h"));
    }

    #[test]
    fn symbolizer_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Symbolizer>();
    }

    #[test]
    fn garbage_gives_empty_answers() {
        for bytes in [&b""[..], b"hello world", b"\x7fELF\x02\x01\x01"] {
            let s = Symbolizer::new(bytes, 0x1000);
            assert_eq!(s.lookup(0x1234), SourceLoc::default());
            assert_eq!(s.symbol_address("main"), None);
            assert_eq!(s.symbols().count(), 0);
        }
    }

    #[test]
    fn build_id_paths_split_the_first_byte() {
        let dirs = [PathBuf::from("/usr/lib/debug"), PathBuf::from("/opt/dbg")];
        assert_eq!(
            build_id_candidates(&[0xab, 0xcd, 0x01], &dirs),
            [
                PathBuf::from("/usr/lib/debug/.build-id/ab/cd01.debug"),
                PathBuf::from("/opt/dbg/.build-id/ab/cd01.debug")
            ]
        );
        assert!(build_id_candidates(&[0xab], &dirs).is_empty());
    }

    #[test]
    fn debug_link_paths_follow_gdb() {
        let dirs = [PathBuf::from("/usr/lib/debug")];
        let got = debuglink_candidates(Path::new("/nonexistent/lib/libx.so"), OsStr::new("libx.so.debug"), &dirs);
        assert_eq!(
            got,
            [
                PathBuf::from("/nonexistent/lib/libx.so.debug"),
                PathBuf::from("/nonexistent/lib/.debug/libx.so.debug"),
                PathBuf::from("/usr/lib/debug/nonexistent/lib/libx.so.debug"),
            ]
        );
        assert_eq!(debuglink_candidates(Path::new("libx.so"), OsStr::new("d"), &[])[0], PathBuf::from("./d"));
        for bad in ["", "../x", "/etc/passwd"] {
            assert!(debuglink_candidates(Path::new("/lib/libx.so"), OsStr::new(bad), &dirs).is_empty(), "{bad}");
        }
    }

    #[test]
    fn no_debug_file_for_garbage() {
        let dirs = [PathBuf::from(DEFAULT_DEBUG_DIR)];
        for bytes in [&b""[..], b"hello world", b"\x7fELF\x02\x01\x01"] {
            assert!(find_debug_file(Path::new("/nonexistent/x"), bytes, &dirs).is_none());
        }
        let debug = DebugFile { path: PathBuf::from("/nonexistent/x.debug"), bytes: b"junk".to_vec() };
        let s = Symbolizer::with_debug_file(b"junk", Some(debug), 0);
        assert_eq!(s.lookup(0x1234), SourceLoc::default());
        assert!(s.debug_file().is_none() && !s.has_debug_info());
    }

    #[test]
    fn rank_prefers_global_plain_names() {
        assert!(Rank::new("malloc", true, false) > Rank::new("__libc_malloc", true, false));
        assert!(Rank::new("__x", true, false) > Rank::new("x", false, false));
        assert!(Rank::new("x", false, true) > Rank::new("x", false, false));
    }
}
