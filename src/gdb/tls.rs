//! Thread-local variables for gdb (`p errno`, a program's or a library's `__thread` variables):
//! the `qGetTLSAddr` packet, which gdb 13 sends a remote target for every thread-local symbol,
//! and which the `gdbstub` crate does not know.
//!
//! gdb names the thread, the variable's offset in its module's TLS block and the module's link
//! map (0 for a static program's own variables); the answer is the variable's address in that
//! thread. On x86-64 glibc the thread pointer (`fs_base`) points at the thread's TCB, whose
//! second word is the DTV: entry `m` (16 bytes each, after the vector's generation, with its
//! length just before it) holds the start of module `m`'s block.
//!
//! The module id `m` is found as glibc's `libthread_db` finds it (`td_thr_tlsbase`), from guest
//! memory: the link map's `l_tls_modid`, at the offset glibc publishes for debuggers in the
//! descriptor `_thread_db_link_map_l_tls_modid` (three 32-bit words: size in bits, count,
//! offset), a dynamic symbol of libc (of libpthread before glibc 2.34), looked up through the
//! module's `.gnu.hash` as the dynamic linker does. That follows modules loaded by `dlopen`,
//! whose id may be one an unloaded module freed (so not their rank in the link map). The
//! module's generation in the dynamic linker's slot-info list
//! (`_rtld_global._dl_tls_dtv_slotinfo_list`, through the `_thread_db_*` descriptors of the list
//! and its entries) tells whether the thread's DTV is older than the module: then the slot may
//! still hold a block of an unloaded module that had the id, and, as `libthread_db` does
//! (`TD_TLSDEFER`), nothing is answered, as for a module whose block the thread has not
//! allocated yet (a `dlopen`ed module's, until the thread first uses it). Where the descriptors
//! are missing (a static program, a C library other than glibc, a library without
//! `.gnu.hash`), the id is the module's rank among those with a non-empty `PT_TLS` segment in
//! link-map order (the program first), which is what the dynamic linker gives the modules it
//! loads at start-up; the program's own headers come from its auxiliary vector.
//!
//! [`Sniffer`] takes such packets out of gdb's byte stream before gdbstub sees it; the server's
//! loop ([`super::serve`]) answers them from [`Debuggee::tls_address`].

use super::target::Debuggee;

/// `PT_TLS`.
const PT_TLS: u32 = 7;
/// `AT_PHDR`, `AT_PHNUM` of the auxiliary vector.
const AT_PHDR: u64 = 3;
const AT_PHNUM: u64 = 5;
/// How far a link-map walk goes: a corrupt list must not loop forever.
const MAX_MODULES: usize = 4096;
/// Dynamic-section tags: `DT_NULL`, `DT_STRTAB`, `DT_SYMTAB`, `DT_GNU_HASH`.
const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_GNU_HASH: u64 = 0x6fff_fef5;
/// How many dynamic entries, hash-chain links or name bytes a lookup reads at most.
const MAX_WALK: u64 = 1 << 16;

/// What one byte from gdb amounts to.
pub(super) enum Sniffed {
    /// Part of a packet still being read.
    Wait,
    /// Bytes for gdbstub, in order.
    Forward(Vec<u8>),
    /// A whole `qGetTLSAddr` packet (its arguments), answered by the caller instead.
    TlsQuery(String),
}

/// Follows the framing of gdb's packets (`$payload#cs`) to pick out `qGetTLSAddr`.
#[derive(Default)]
pub(super) struct Sniffer {
    packet: Vec<u8>,
    /// Inside a packet: checksum characters still to come once `#` is seen.
    checksum_left: Option<u8>,
    inside: bool,
    /// gdb turned acknowledgements off (`QStartNoAckMode`, which gdbstub accepts).
    pub no_ack: bool,
}

impl Sniffer {
    pub(super) fn push(&mut self, byte: u8) -> Sniffed {
        if !self.inside {
            if byte != b'$' {
                return Sniffed::Forward(vec![byte]);
            }
            self.inside = true;
            self.checksum_left = None;
            self.packet.clear();
        }
        self.packet.push(byte);
        match self.checksum_left {
            None if byte == b'#' => self.checksum_left = Some(2),
            None => {}
            Some(n) => self.checksum_left = Some(n - 1),
        }
        if self.checksum_left != Some(0) {
            return Sniffed::Wait;
        }
        self.inside = false;
        let packet = std::mem::take(&mut self.packet);
        let payload = &packet[1..packet.len() - 3];
        if let Some(args) = payload.strip_prefix(b"qGetTLSAddr:") {
            return Sniffed::TlsQuery(String::from_utf8_lossy(args).into_owned());
        }
        if payload == b"QStartNoAckMode" {
            self.no_ack = true;
        }
        Sniffed::Forward(packet)
    }
}

/// `payload` framed as a packet, with its checksum.
pub(super) fn packet(payload: &str) -> Vec<u8> {
    let sum = payload.bytes().fold(0u8, |s, b| s.wrapping_add(b));
    format!("${payload}#{sum:02x}").into_bytes()
}

/// The reply to `qGetTLSAddr:THREAD,OFFSET,LM` (hex fields; THREAD may be `pPID.TID`): the
/// address in hex, or `E01` where it cannot be found.
pub(super) fn reply(d: &Debuggee, args: &str) -> String {
    let parse = |s: &str| u64::from_str_radix(s, 16).ok();
    let mut fields = args.split(',');
    let (Some(thread), Some(offset), Some(lm)) = (fields.next(), fields.next(), fields.next()) else {
        return "E01".into();
    };
    let thread = thread.rsplit('.').next().unwrap_or(thread).trim_start_matches('p');
    match (parse(thread), parse(offset), parse(lm)) {
        (Some(tid), Some(offset), Some(lm)) => u32::try_from(tid)
            .ok()
            .and_then(|tid| d.tls_address(tid, offset, lm))
            .map_or_else(|| "E01".into(), |a| format!("{a:x}")),
        _ => "E01".into(),
    }
}

/// Where glibc keeps what finding a module's TLS block needs, from the descriptors it publishes
/// for `libthread_db` (offsets in bytes).
struct ThreadDb {
    /// `link_map.l_tls_modid`.
    modid: u64,
    /// The address of `_rtld_global._dl_tls_dtv_slotinfo_list` (a pointer to the first list).
    slotinfo_list: u64,
    /// `dtv_slotinfo_list`: `len`, `next`, and the entries `slotinfo[]`.
    list_len: u64,
    list_next: u64,
    list_entries: u64,
    /// `dtv_slotinfo`: its size, `gen` and `map`.
    entry_size: u64,
    entry_gen: u64,
    entry_map: u64,
}

impl Debuggee {
    /// Where thread `tid`'s variable at `offset` in the TLS block of the module whose link map
    /// is at `lm` (0: the program itself) is, if its block exists.
    pub fn tls_address(&self, tid: u32, offset: u64, lm: u64) -> Option<u64> {
        let m = self.timeline.session().machine();
        let tp = m.thread_registers(tid)?.fs_base;
        let db = if lm == 0 { None } else { self.thread_db(lm) };
        let modid = match (&db, lm) {
            (_, 0) => 1,
            (Some(db), _) => m.read_u64(lm.checked_add(db.modid)?).ok().filter(|&id| id != 0)?,
            (None, _) => self.tls_module_id(lm)?,
        };
        let dtv = m.read_u64(tp.checked_add(8)?).ok()?;
        let slots = m.read_u64(dtv.checked_sub(16)?).ok()?;
        if modid > slots {
            return None;
        }
        if let Some(db) = &db {
            // The thread's DTV older than the module: its slot is not the module's yet.
            let (generation, map) = self.slotinfo(db, modid)?;
            if map != lm || generation > m.read_u64(dtv).ok()? {
                return None;
            }
        }
        let block = m.read_u64(dtv.checked_add(16 * modid)?).ok()?;
        // 0: not set up; all ones: TLS_DTV_UNALLOCATED (a dlopen'ed module's, until first use).
        if block == 0 || block == u64::MAX {
            return None;
        }
        block.checked_add(offset)
    }

    /// The generation and link map of TLS module `modid` in the dynamic linker's slot-info list.
    fn slotinfo(&self, db: &ThreadDb, modid: u64) -> Option<(u64, u64)> {
        let m = self.timeline.session().machine();
        let word = |a: u64| m.read_u64(a).ok();
        let mut list = word(db.slotinfo_list)?;
        let mut index = modid;
        for _ in 0..MAX_MODULES {
            if list == 0 {
                return None;
            }
            let len = word(list.checked_add(db.list_len)?)?;
            if index < len {
                let entry = list.checked_add(db.list_entries)?.checked_add(index.checked_mul(db.entry_size)?)?;
                return Some((word(entry.checked_add(db.entry_gen)?)?, word(entry.checked_add(db.entry_map)?)?));
            }
            index -= len;
            list = word(list.checked_add(db.list_next)?)?;
        }
        None
    }

    /// glibc's descriptors for debuggers, looked up in the modules of the link map holding `lm`.
    fn thread_db(&self, lm: u64) -> Option<ThreadDb> {
        let m = self.timeline.session().machine();
        let modules = self.link_map(lm)?;
        let symbol = |name: &str| modules.iter().find_map(|&map| self.dynamic_symbol(map, name));
        // A descriptor's third word is the field's offset; a size's only word the size.
        let field = |name: &str| -> Option<u64> {
            let a = symbol(name)?;
            Some(u64::from(m.read_u32(a.checked_add(8)?).ok()?))
        };
        let size = |name: &str| -> Option<u64> { Some(u64::from(m.read_u32(symbol(name)?).ok()?)) };
        let rtld = symbol("_rtld_global")?;
        Some(ThreadDb {
            modid: field("_thread_db_link_map_l_tls_modid")?,
            slotinfo_list: rtld.checked_add(field("_thread_db_rtld_global__dl_tls_dtv_slotinfo_list")?)?,
            list_len: field("_thread_db_dtv_slotinfo_list_len")?,
            list_next: field("_thread_db_dtv_slotinfo_list_next")?,
            list_entries: field("_thread_db_dtv_slotinfo_list_slotinfo")?,
            entry_size: size("_thread_db_sizeof_dtv_slotinfo")?,
            entry_gen: field("_thread_db_dtv_slotinfo_gen")?,
            entry_map: field("_thread_db_dtv_slotinfo_map")?,
        })
    }

    /// The link maps of the list holding `lm`, from its head, in order.
    fn link_map(&self, lm: u64) -> Option<Vec<u64>> {
        let m = self.timeline.session().machine();
        let word = |a: u64| m.read_u64(a).ok();
        let mut head = lm;
        for _ in 0..MAX_MODULES {
            match word(head.checked_add(32)?)? {
                0 => break,
                prev => head = prev,
            }
        }
        let mut maps = Vec::new();
        let mut map = head;
        while map != 0 && maps.len() < MAX_MODULES {
            maps.push(map);
            map = word(map.checked_add(24)?)?;
        }
        Some(maps)
    }

    /// The address of the dynamic symbol `name` of the module whose link map is at `lm`
    /// (`l_addr`, and `l_ld`: its dynamic section), through its GNU hash table as the dynamic
    /// linker looks symbols up (`_dl_lookup_symbol_x`); undefined symbols are not found.
    fn dynamic_symbol(&self, lm: u64, name: &str) -> Option<u64> {
        let m = self.timeline.session().machine();
        let word = |a: u64| m.read_u64(a).ok();
        let half = |a: u64| m.read_u32(a).ok().map(u64::from);
        let base = word(lm)?;
        let ld = word(lm.checked_add(16)?)?;
        let (mut strtab, mut symtab, mut gnu_hash) = (None, None, None);
        for i in 0..MAX_WALK {
            let entry = ld.checked_add(16 * i)?;
            let (tag, value) = (word(entry)?, word(entry.checked_add(8)?)?);
            // The dynamic linker rewrites the addresses of loaded modules in place; the vDSO's
            // and its own before relocation are relative to where the module is.
            let value = if value < base { value.checked_add(base)? } else { value };
            match tag {
                DT_NULL => break,
                DT_STRTAB => strtab = Some(value),
                DT_SYMTAB => symtab = Some(value),
                DT_GNU_HASH => gnu_hash = Some(value),
                _ => {}
            }
        }
        let (strtab, symtab, table) = (strtab?, symtab?, gnu_hash?);
        let hash = name.bytes().fold(5381u32, |h, b| h.wrapping_mul(33).wrapping_add(u32::from(b)));
        let (nbuckets, symoffset, bloom_size) = (half(table)?, half(table + 4)?, half(table + 8)?);
        if nbuckets == 0 {
            return None;
        }
        let buckets = table.checked_add(16)?.checked_add(8 * bloom_size)?;
        let chains = buckets.checked_add(4 * nbuckets)?;
        let first = half(buckets.checked_add(4 * (u64::from(hash) % nbuckets))?)?;
        if first < symoffset {
            return None;
        }
        for index in first..first.saturating_add(MAX_WALK) {
            let link = half(chains.checked_add(4 * (index - symoffset))?)?;
            if link | 1 == u64::from(hash | 1) {
                let sym = symtab.checked_add(24 * index)?;
                let name_at = strtab.checked_add(half(sym)?)?;
                // Section index 0: an undefined symbol (a reference, not the definition).
                let defined = half(sym.checked_add(4)?)? >> 16 != 0;
                if defined && self.name_is(name_at, name) {
                    return base.checked_add(word(sym.checked_add(8)?)?);
                }
            }
            if link & 1 == 1 {
                return None;
            }
        }
        None
    }

    /// Whether the NUL-terminated string at `at` in guest memory is `name`.
    fn name_is(&self, at: u64, name: &str) -> bool {
        let m = self.timeline.session().machine();
        m.read_cstr(at, name.len() + 1).is_ok_and(|s| s == name.as_bytes())
    }

    /// The TLS module id of the module whose link map is at `lm`, by its rank among the
    /// modules with TLS (where glibc's descriptors are missing).
    fn tls_module_id(&self, lm: u64) -> Option<u64> {
        let m = self.timeline.session().machine();
        let word = |a: u64| m.read_u64(a).ok();
        let mut id = 0;
        for (i, map) in self.link_map(lm)?.into_iter().enumerate() {
            let has = if i == 0 { self.program_has_tls() } else { self.module_has_tls(word(map)?) };
            id += u64::from(has);
            if map == lm {
                return has.then_some(id);
            }
        }
        None
    }

    /// Whether the program has a non-empty `PT_TLS` segment (its headers from the auxiliary
    /// vector).
    fn program_has_tls(&self) -> bool {
        let aux = |key: u64| {
            self.auxv.chunks_exact(16).find_map(|kv| {
                let k = u64::from_le_bytes(kv[..8].try_into().ok()?);
                (k == key).then(|| u64::from_le_bytes(kv[8..].try_into().unwrap_or_default()))
            })
        };
        match (aux(AT_PHDR), aux(AT_PHNUM)) {
            (Some(phdr), Some(n)) => self.headers_have_tls(phdr, n, 56),
            _ => false,
        }
    }

    /// Whether the ELF object mapped at `base` (its header there, as for every library) has a
    /// non-empty `PT_TLS` segment.
    fn module_has_tls(&self, base: u64) -> bool {
        let m = self.timeline.session().machine();
        let mut ehdr = [0u8; 64];
        if m.mem.read(base, &mut ehdr).is_err() || ehdr[..4] != *b"\x7fELF" {
            return false;
        }
        let phoff = u64::from_le_bytes(ehdr[32..40].try_into().unwrap_or_default());
        let entsize = u64::from(u16::from_le_bytes([ehdr[54], ehdr[55]]));
        let n = u64::from(u16::from_le_bytes([ehdr[56], ehdr[57]]));
        base.checked_add(phoff).is_some_and(|ph| self.headers_have_tls(ph, n, entsize))
    }

    /// Whether the `n` program headers at `at` (`entsize` bytes each) have a non-empty
    /// `PT_TLS`.
    fn headers_have_tls(&self, at: u64, n: u64, entsize: u64) -> bool {
        let m = self.timeline.session().machine();
        (0..n.min(256)).any(|i| {
            let mut ph = [0u8; 56];
            let ok = entsize >= 56 && m.mem.read(at.wrapping_add(i * entsize), &mut ph).is_ok();
            ok && u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) == PT_TLS
                && u64::from_le_bytes(ph[40..48].try_into().unwrap_or_default()) > 0
        })
    }
}
