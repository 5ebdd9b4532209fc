//! Symbols and source lines for every object the guest has loaded: the program, its interpreter
//! and the libraries the dynamic linker mapped, each with its own symbolizer at its load bias.
//!
//! Libraries are discovered from the machine's mapping table: every file mapped executable is an
//! object, loaded at (start of its first mapping − that mapping's file offset), which is where
//! ld.so puts a library whose segments have `p_vaddr == p_offset`, as linkers lay them out.
//! [`Objects::refresh`] adds the ones mapped since the last call.

use analyses::{CodeInfo, Finding, Frame, Location, RawFinding};
use emu::sync::{CustomLock, SyncKind};
use emu::{Backing, Machine};
use loader::Symbolizer;

struct Object {
    path: String,
    start: u64,
    end: u64,
    sym: Symbolizer,
}

#[derive(Default)]
pub struct Objects {
    objects: Vec<Object>,
}

impl Objects {
    /// An object loaded at `bias`, covering `[start, end)`.
    pub fn add(&mut self, path: &str, bytes: &[u8], bias: u64, start: u64, end: u64) {
        self.objects.push(Object { path: path.to_string(), start, end, sym: Symbolizer::new(bytes, bias) });
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
            if exec == 0 || self.objects.iter().any(|o| o.path == path) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&path) {
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
            COPY.iter().any(|c| base == *c || base.starts_with(&format!("{c}_")))
        };
        let mut info = CodeInfo::default();
        for o in &self.objects {
            if !o.sym.has_debug_info() {
                // A stripped library: all of it, its internal functions without symbols too.
                info.library.push((o.start, o.end));
            }
            for (name, addr, size) in o.sym.symbols() {
                let range = (addr, addr + size.max(1));
                if is_copy(name) {
                    info.copy.push(range);
                } else if o.sym.has_debug_info() && o.sym.lookup(addr).line.is_none() {
                    info.library.push(range);
                }
            }
        }
        info.sorted()
    }

    /// Addresses of the recognised synchronisation functions in every object: the standard ones
    /// and the user's custom locks.
    pub fn sync_functions(&self, custom: &[CustomLock]) -> Vec<(u64, SyncKind)> {
        let mut out = Vec::new();
        for o in &self.objects {
            for (name, kind) in SyncKind::STANDARD {
                if let Some(a) = o.sym.symbol_address(name) {
                    out.push((a, *kind));
                }
            }
            for c in custom {
                if let Some(a) = o.sym.symbol_address(&c.symbol) {
                    out.push((a, c.kind.sync_kind()));
                }
            }
        }
        out
    }

    pub fn frames(&self, pcs: &[u64]) -> Vec<Frame> {
        pcs.iter()
            .map(|&pc| match self.objects.iter().find(|o| pc >= o.start && pc < o.end) {
                Some(o) => {
                    let l = o.sym.lookup(pc);
                    Frame { pc, function: l.function, file: l.file, line: l.line }
                }
                None => Frame { pc, function: None, file: None, line: None },
            })
            .collect()
    }

    /// A raw finding's locations, with backtraces from the interned stacks.
    pub fn finding(&self, m: &Machine, raw: RawFinding, seed: u64) -> Finding {
        let locations = raw
            .locations
            .iter()
            .map(|l| {
                let mut pcs = vec![l.pc];
                pcs.extend(m.stacks().call_sites(l.stack));
                Location::from_backtrace(l.role, l.tid, self.frames(&pcs))
            })
            .collect();
        Finding {
            id: 0,
            analysis: raw.analysis.into(),
            kind: raw.kind.into(),
            message: raw.message,
            seed,
            occurrences: raw.occurrences,
            locations,
            crash_image: None,
            schedule: None,
            interleaving: None,
        }
    }
}
