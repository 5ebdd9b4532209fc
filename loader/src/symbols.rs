//! Turning guest addresses into function names and source lines, and
//! symbol names into guest addresses, for one loaded ELF object.
//!
//! Names come from DWARF when the address is covered by debug information
//! (which also knows about inlining) and otherwise from `.symtab` and
//! `.dynsym`; file and line come only from DWARF line tables. Everything is
//! best effort: missing or malformed debug information gives less
//! information, never an error or a panic.
//!
//! Left out: split DWARF (`.dwo`/`.dwp`), separate debug files found through
//! `.gnu_debuglink` or build IDs, the call chain of inlined frames beyond
//! the innermost one, and symbol versions (`memcpy@GLIBC_2.14` is simply
//! `memcpy`).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// inlined call), demangled.
    pub function: Option<String>,
    /// The path as DWARF records it: the compilation directory joined with
    /// the file's directory and name. Match on suffixes.
    pub file: Option<String>,
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
    cache: HashMap<u64, SourceLoc>,
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
    dwarf: Option<Mutex<Dwarf>>,
    /// Caches lookups when there is no DWARF, where `dwarf` holds the cache.
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
        let bytes = elf_bytes.as_ref();
        let mut symbolizer = Symbolizer {
            load_bias,
            functions: Vec::new(),
            by_name: HashMap::new(),
            dwarf: None,
            symbol_cache: Mutex::new(HashMap::new()),
        };
        let Ok(file) = ElfFile64::<Endianness>::parse(bytes) else {
            return symbolizer;
        };
        symbolizer.read_symbols(&file);
        symbolizer.dwarf = load_dwarf(&file).map(|context| Mutex::new(Dwarf { context, cache: HashMap::new() }));
        symbolizer
    }

    /// Whether the object carries DWARF debug information (source lines).
    pub fn has_debug_info(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The function, file and line of the guest address `pc`.
    pub fn lookup(&self, pc: u64) -> SourceLoc {
        // The bias may be "negative" (see `Image::load_bias`), so this is
        // modular arithmetic, not an underflow.
        let addr = pc.wrapping_sub(self.load_bias);
        match &self.dwarf {
            Some(dwarf) => {
                let mut dwarf = lock(dwarf);
                if let Some(loc) = dwarf.cache.get(&addr) {
                    return loc.clone();
                }
                let mut loc = dwarf_lookup(&dwarf.context, addr);
                if loc.function.is_none() {
                    loc.function = self.symbol_name(addr);
                }
                cache_insert(&mut dwarf.cache, addr, &loc);
                loc
            }
            None => {
                let mut cache = lock(&self.symbol_cache);
                if let Some(loc) = cache.get(&addr) {
                    return loc.clone();
                }
                let loc = SourceLoc { function: self.symbol_name(addr), file: None, line: None };
                cache_insert(&mut cache, addr, &loc);
                loc
            }
        }
    }

    /// The guest address of the function or object symbol called exactly
    /// `name` (not demangled, no version suffix). For an IFUNC such as
    /// glibc's `memcpy` that is the resolver's address.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).map(|&(addr, _)| addr.wrapping_add(self.load_bias))
    }

    /// Every function symbol as (name, guest address, size), sorted by
    /// address. Names are as in the symbol table, not demangled; aliases
    /// appear once each.
    pub fn symbols(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.functions.iter().map(|s| (s.name.as_str(), s.addr.wrapping_add(self.load_bias), s.size))
    }

    fn read_symbols(&mut self, file: &ElfFile64<'_, Endianness>) {
        let mut functions: Vec<(Sym, Option<u64>)> = Vec::new();
        for symbol in file.symbols().chain(file.dynamic_symbols()) {
            let kind = symbol.kind();
            if !matches!(kind, SymbolKind::Text | SymbolKind::Data) {
                continue;
            }
            // Undefined, absolute and common symbols have no address here.
            let SymbolSection::Section(section_index) = symbol.section() else {
                continue;
            };
            let Ok(name) = symbol.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let rank = Rank::new(name, symbol.is_global(), symbol.is_weak());
            let addr = symbol.address();
            self.by_name
                .entry(name.to_string())
                .and_modify(|best| {
                    if rank > best.1 {
                        *best = (addr, rank);
                    }
                })
                .or_insert((addr, rank));
            if kind == SymbolKind::Text {
                let section_end =
                    file.section_by_index(section_index).ok().and_then(|s| s.address().checked_add(s.size()));
                let size = symbol.size();
                let sym = Sym { name: name.to_string(), addr, size, end: addr.saturating_add(size), rank };
                functions.push((sym, section_end));
            }
        }
        // `.symtab` repeats what `.dynsym` has; keep the best-ranked copy.
        functions.sort_by(|(a, _), (b, _)| (a.addr, &a.name, Reverse(a.rank)).cmp(&(b.addr, &b.name, Reverse(b.rank))));
        functions.dedup_by(|(later, _), (kept, _)| later.addr == kept.addr && later.name == kept.name);
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

    /// The best symbol-table name for the link-time address `addr`.
    fn symbol_name(&self, addr: u64) -> Option<String> {
        let after = self.functions.partition_point(|s| s.addr <= addr);
        let candidates = self.functions.get(..after)?;
        let sym = candidates.iter().rev().take(BACKWARD_SCAN).find(|s| addr < s.end)?;
        Some(addr2line::demangle_auto(Cow::Borrowed(sym.name.as_str()), None).into_owned())
    }
}

/// Builds the DWARF context from the file's debug sections, decompressing
/// them if needed. `None` when there is no usable DWARF.
fn load_dwarf(file: &ElfFile64<'_, Endianness>) -> Option<Context<Reader>> {
    file.section_by_name(".debug_info")?;
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data: Arc<[u8]> = file
            .section_by_name(id.name())
            .and_then(|section| section.uncompressed_data().ok())
            .map(|data| Arc::from(data.as_ref()))
            .unwrap_or_else(|| Arc::from(&[][..]));
        Ok(EndianArcSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    Context::from_dwarf(dwarf).ok()
}

fn dwarf_lookup(context: &Context<Reader>, addr: u64) -> SourceLoc {
    let mut loc = SourceLoc::default();
    // addr2line computes `addr + 1` unchecked, and no code lives there.
    if addr == u64::MAX {
        return loc;
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
        }
    }
    if loc.file.is_none() {
        if let Ok(Some(location)) = context.find_location(addr) {
            loc.file = location.file.map(str::to_string);
            loc.line = location.line;
        }
    }
    loc
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rank_prefers_global_plain_names() {
        assert!(Rank::new("malloc", true, false) > Rank::new("__libc_malloc", true, false));
        assert!(Rank::new("__x", true, false) > Rank::new("x", false, false));
        assert!(Rank::new("x", false, true) > Rank::new("x", false, false));
    }
}
