//! Reading an x86-64 ELF executable's header and program headers into an
//! [`Image`]: the segments to map, the entry point, the values the auxiliary
//! vector needs, and where `brk` starts.
//!
//! This follows Linux's `load_elf_binary` where the result is observable by
//! the program (segment placement, `AT_PHDR`, the start of the heap, which
//! files are refused) and is stricter where Linux would merely produce a
//! broken process: overlapping or misordered segments, an entry point
//! outside executable code, and sizes past 1 TiB are rejected up front.
//!
//! Left out: section headers (the kernel never reads them, so neither do
//! we, except to tell a cut-off file from a corrupt one), relocation, the
//! contents of `PT_DYNAMIC` beyond the PIE flag, `PT_GNU_PROPERTY` (IBT and
//! shadow stacks), `PT_GNU_RELRO`, and `p_align` beyond the page size. The
//! parser is hand-written with checked reads rather than built on a general
//! ELF library so that no input, however mangled, can make it panic.

use std::fmt;

use crate::LoadError;

/// The page size the loader aligns to, as on x86-64 Linux.
pub const PAGE_SIZE: u64 = 4096;

/// One past the highest user-space address on x86-64 Linux with 4-level
/// paging (`TASK_SIZE`); no segment may reach past it.
pub const USER_ADDRESS_LIMIT: u64 = 0x7fff_ffff_f000;

/// Sizes above this are treated as corruption: no real program has a
/// terabyte segment, and the emulator would try to allocate it.
const MAX_SIZE: u64 = 1 << 40;

const EHDR_SIZE: usize = 64;
const PHDR_SIZE: u64 = 56;
/// Linux refuses program header tables larger than this (`elf_read_phdrs`).
const MAX_PHDR_TABLE: u64 = 65536;
/// Linux's `PATH_MAX`, the longest interpreter path it accepts.
const MAX_INTERP_LEN: u64 = 4096;

const ELFCLASS32: u8 = 1;
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const ELFDATA2MSB: u8 = 2;

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ET_CORE: u16 = 4;

const EM_X86_64: u16 = 62;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;
const PT_TLS: u32 = 7;
const PT_GNU_STACK: u32 = 0x6474_e551;

const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;

const DT_NULL: u64 = 0;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_1_PIE: u64 = 0x0800_0000;

/// Access rights of a segment, from its `p_flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prot {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
}

impl Prot {
    fn from_flags(flags: u32) -> Self {
        Prot {
            read: flags & PF_R != 0,
            write: flags & PF_W != 0,
            exec: flags & PF_X != 0,
        }
    }
}

/// One `PT_LOAD` segment, already moved by the load bias.
#[derive(Clone, PartialEq, Eq)]
pub struct Segment {
    /// Guest address of the first byte: `p_vaddr` plus the load bias. Not
    /// necessarily page aligned; the bytes of the page before it (and after
    /// `vaddr + memsz`) belong to no segment unless another one covers them.
    pub vaddr: u64,
    /// Size in memory. Bytes past `data.len()` are the bss and must read as
    /// zero.
    pub memsz: u64,
    /// The `p_filesz` bytes of the file at `file_offset`.
    pub data: Vec<u8>,
    pub prot: Prot,
    pub file_offset: u64,
}

/// Shows the size of `data` rather than megabytes of it.
impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("vaddr", &format_args!("{:#x}", self.vaddr))
            .field("memsz", &format_args!("{:#x}", self.memsz))
            .field("data", &format_args!("<{:#x} bytes>", self.data.len()))
            .field("prot", &self.prot)
            .field("file_offset", &format_args!("{:#x}", self.file_offset))
            .finish()
    }
}

impl Segment {
    /// One past the last guest address of the segment. Never overflows:
    /// [`load_elf`] only returns segments below [`USER_ADDRESS_LIMIT`].
    pub fn end(&self) -> u64 {
        self.vaddr.saturating_add(self.memsz)
    }
}

/// What sort of program an [`Image`] is, which decides who does the
/// relocation and whether an interpreter must be loaded too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC` without `PT_INTERP`: runs where it was linked, needs nothing.
    Static,
    /// `ET_DYN` without `PT_INTERP` that is marked as a PIE (`DF_1_PIE`), or
    /// has no `PT_DYNAMIC` at all: relocates itself from `_start`.
    StaticPie,
    /// Has `PT_INTERP` (`ET_EXEC` or `ET_DYN`): the emulator must also load
    /// [`Image::interp`] and start there, with `AT_BASE` set to its base.
    Dynamic,
    /// `ET_DYN` without `PT_INTERP` and without the PIE flag: a shared
    /// library with an entry point, such as `ld.so` or `libc.so.6` run
    /// directly. It is loaded exactly like a [`ElfKind::StaticPie`]; the
    /// distinction is only for messages and for loading the interpreter.
    SharedObject,
}

/// Why a well-formed ELF file is not something ferrite can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotExecutableKind {
    /// `ET_REL`: an object file from `gcc -c`.
    Relocatable,
    /// `ET_CORE`: a core dump.
    Core,
    /// `ET_DYN` without `PT_INTERP`, PIE flag or entry point: a library.
    SharedLibrary,
    /// Any other `e_type`, such as `ET_NONE` or an OS-specific value.
    Other(u16),
}

impl fmt::Display for NotExecutableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotExecutableKind::Relocatable => {
                f.write_str("a relocatable object file (ET_REL); link it into a program first")
            }
            NotExecutableKind::Core => f.write_str("a core dump (ET_CORE)"),
            NotExecutableKind::SharedLibrary => {
                f.write_str("a shared library without an entry point")
            }
            NotExecutableKind::Other(t) => write!(f, "an ELF file of unknown type {t:#x}"),
        }
    }
}

/// The `PT_TLS` segment: the template each thread's TLS block is made from.
/// The loader does nothing with it (libc sets TLS up itself); it is here so
/// that analyses can recognise TLS addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsTemplate {
    /// Guest address of the initialisation image (`.tdata`), relocated.
    pub vaddr: u64,
    pub file_offset: u64,
    /// Bytes of initialised data; the rest up to `memsz` (`.tbss`) is zero.
    pub filesz: u64,
    pub memsz: u64,
    pub align: u64,
}

/// A program ready to be mapped: everything the emulator needs from the
/// ELF file to set up memory, registers and the auxiliary vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The `PT_LOAD` segments in ascending, non-overlapping address order,
    /// without empty ones.
    pub segments: Vec<Segment>,
    /// Relocated entry point (`AT_ENTRY`), inside an executable segment.
    pub entry: u64,
    /// Guest address of the program headers (`AT_PHDR`): `PT_PHDR` if
    /// present, else found through the `PT_LOAD` that contains `e_phoff`,
    /// else 0, as Linux does.
    pub phdr_addr: u64,
    /// `AT_PHENT`: always 56.
    pub phent: u64,
    /// `AT_PHNUM`.
    pub phnum: u64,
    /// What was added to every `p_vaddr`: 0 for `ET_EXEC`, for `ET_DYN`
    /// whatever puts the lowest segment's page at the requested base. Add it
    /// with wrapping arithmetic: it is "negative" for an `ET_DYN` linked
    /// above the requested base.
    pub load_bias: u64,
    /// Page-aligned start of the lowest segment.
    pub lowest: u64,
    /// Page-aligned end of the highest segment.
    pub highest: u64,
    /// Where the heap starts, as Linux's `mm->start_brk` without
    /// randomisation: equal to [`Image::highest`].
    pub brk_start: u64,
    /// The `PT_INTERP` path, without its terminating NUL.
    pub interp: Option<String>,
    pub kind: ElfKind,
    /// Whether `PT_GNU_STACK` asks for an executable stack. Without
    /// `PT_GNU_STACK`, x86-64 Linux gives a non-executable stack, and so
    /// does this.
    pub stack_exec: bool,
    pub tls: Option<TlsTemplate>,
}

/// Parses an x86-64 ELF executable and lays it out in the guest address
/// space.
///
/// `ET_EXEC` files go where they were linked. `ET_DYN` files (PIEs, and
/// interpreters such as `ld.so`) are moved so that the page of their lowest
/// segment starts at `pie_base` rounded down to a page; Linux would
/// randomise that address.
pub fn load_elf(bytes: &[u8], pie_base: u64) -> Result<Image, LoadError> {
    let header = Header::parse(bytes)?;
    let file = File { bytes, header };
    file.load(pie_base)
}

/// A human name for an `e_machine` value, for [`LoadError::WrongMachine`].
pub(crate) fn machine_description(machine: u16) -> String {
    let name = match machine {
        0 => return "programs with no machine type".to_string(),
        2 => "SPARC",
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "s390",
        40 => "ARM",
        43 => "SPARC64",
        50 => "IA-64",
        183 => "AArch64",
        243 => "RISC-V",
        247 => "BPF",
        258 => "LoongArch",
        _ => return format!("programs for machine type {machine}"),
    };
    format!("programs for {name} (machine type {machine})")
}

/// The fields of the ELF header the loader uses.
struct Header {
    e_type: u16,
    e_entry: u64,
    e_phoff: u64,
    e_shoff: u64,
    e_phentsize: u16,
    e_phnum: u16,
    e_shentsize: u16,
    e_shnum: u16,
}

impl Header {
    fn parse(bytes: &[u8]) -> Result<Header, LoadError> {
        if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err(LoadError::NotElf);
        }
        // The class decides how long the header is, so it is checked before
        // demanding a 64-byte header: a 32-bit file gets the helpful error.
        match bytes.get(4) {
            None => return Err(LoadError::Truncated),
            Some(&ELFCLASS64) => {}
            Some(&ELFCLASS32) => return Err(LoadError::Class32),
            Some(&class) => return Err(corrupt(format!("unknown ELF class {class}"))),
        }
        match bytes.get(5) {
            None => return Err(LoadError::Truncated),
            Some(&ELFDATA2LSB) => {}
            Some(&ELFDATA2MSB) => {
                // Every big-endian ELF is for some other machine; say which.
                return match read_u16_be(bytes, 18) {
                    None => Err(LoadError::Truncated),
                    Some(EM_X86_64) => Err(corrupt("big-endian ELF file claims to be x86-64")),
                    Some(machine) => Err(LoadError::WrongMachine(machine)),
                };
            }
            Some(&data) => return Err(corrupt(format!("unknown ELF data encoding {data}"))),
        }
        if bytes.len() < EHDR_SIZE {
            return Err(LoadError::Truncated);
        }
        let h = |off| read_u16(bytes, off).ok_or(LoadError::Truncated);
        let q = |off| read_u64(bytes, off).ok_or(LoadError::Truncated);
        let header = Header {
            e_type: h(16)?,
            e_entry: q(24)?,
            e_phoff: q(32)?,
            e_shoff: q(40)?,
            e_phentsize: h(54)?,
            e_phnum: h(56)?,
            e_shentsize: h(58)?,
            e_shnum: h(60)?,
        };
        let machine = h(18)?;
        if machine != EM_X86_64 {
            return Err(LoadError::WrongMachine(machine));
        }
        match header.e_type {
            ET_EXEC | ET_DYN => {}
            ET_REL => return Err(LoadError::NotExecutable(NotExecutableKind::Relocatable)),
            ET_CORE => return Err(LoadError::NotExecutable(NotExecutableKind::Core)),
            other => return Err(LoadError::NotExecutable(NotExecutableKind::Other(other))),
        }
        Ok(header)
    }
}

/// One program header.
#[derive(Clone, Copy)]
struct Phdr {
    index: u16,
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}

impl Phdr {
    /// One past the last byte of the segment's file image, if that is
    /// representable at all.
    fn file_end(&self) -> Option<u64> {
        self.p_offset.checked_add(self.p_filesz)
    }
}

struct File<'a> {
    bytes: &'a [u8],
    header: Header,
}

impl File<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The error for a header that points past the end of the file.
    ///
    /// A cut-off download and a scribbled-over offset look the same from
    /// here, so the section header table breaks the tie: linkers put it at
    /// the very end, so if it is missing too the file was cut short.
    fn past_end(&self, what: impl fmt::Display) -> LoadError {
        let sh_size = u64::from(self.header.e_shnum) * u64::from(self.header.e_shentsize);
        let cut = self.header.e_shoff == 0
            || self
                .header
                .e_shoff
                .checked_add(sh_size)
                .is_none_or(|end| end > self.len());
        if cut {
            LoadError::Truncated
        } else {
            corrupt(format!("{what} lies past the end of the file"))
        }
    }

    /// The file bytes `[offset, offset + size)`, or the right error.
    fn range(&self, offset: u64, size: u64, what: impl fmt::Display) -> Result<&[u8], LoadError> {
        let end = offset.checked_add(size).filter(|&end| end <= self.len());
        let Some(end) = end else {
            return Err(self.past_end(what));
        };
        // Both fit in usize: they are at most the slice's length.
        self.bytes
            .get(offset as usize..end as usize)
            .ok_or(LoadError::Truncated)
    }

    fn program_headers(&self) -> Result<Vec<Phdr>, LoadError> {
        let h = &self.header;
        if h.e_phnum == 0 {
            return Err(corrupt("there are no program headers, so nothing to load"));
        }
        if u64::from(h.e_phentsize) != PHDR_SIZE {
            return Err(corrupt(format!(
                "program header entries are {} bytes long instead of {PHDR_SIZE}",
                h.e_phentsize
            )));
        }
        let table_size = u64::from(h.e_phnum) * PHDR_SIZE;
        if table_size > MAX_PHDR_TABLE {
            return Err(corrupt(format!(
                "there are {} program headers, more than Linux accepts",
                h.e_phnum
            )));
        }
        let table = self.range(h.e_phoff, table_size, "the program header table")?;
        let mut phdrs = Vec::with_capacity(usize::from(h.e_phnum));
        for (index, entry) in (0..h.e_phnum).zip(table.chunks_exact(PHDR_SIZE as usize)) {
            let w = |off| read_u32(entry, off).ok_or(LoadError::Truncated);
            let q = |off| read_u64(entry, off).ok_or(LoadError::Truncated);
            phdrs.push(Phdr {
                index,
                p_type: w(0)?,
                p_flags: w(4)?,
                p_offset: q(8)?,
                p_vaddr: q(16)?,
                p_filesz: q(32)?,
                p_memsz: q(40)?,
                p_align: q(48)?,
            });
        }
        Ok(phdrs)
    }

    fn load(&self, pie_base: u64) -> Result<Image, LoadError> {
        let phdrs = self.program_headers()?;

        let mut loads: Vec<Phdr> = Vec::new();
        let mut interp: Option<String> = None;
        let mut phdr_vaddr: Option<u64> = None;
        let mut tls: Option<Phdr> = None;
        let mut dynamic: Option<Phdr> = None;
        let mut stack_exec = false;
        for ph in &phdrs {
            match ph.p_type {
                PT_LOAD => {
                    self.check_load(ph)?;
                    // Empty segments map nothing, so where they claim to be
                    // does not matter.
                    if ph.p_memsz == 0 {
                        continue;
                    }
                    if let Some(prev) = loads.last() {
                        check_order(prev, ph)?;
                    }
                    loads.push(*ph);
                }
                // Like Linux, only the first of each is honoured.
                PT_INTERP if interp.is_none() => interp = Some(self.interp_path(ph)?),
                PT_PHDR if phdr_vaddr.is_none() => phdr_vaddr = Some(ph.p_vaddr),
                PT_TLS if tls.is_none() => tls = Some(self.check_tls(ph)?),
                PT_DYNAMIC if dynamic.is_none() => dynamic = Some(*ph),
                PT_GNU_STACK => stack_exec = ph.p_flags & PF_X != 0,
                _ => {}
            }
        }
        let Some(first) = loads.first() else {
            return Err(corrupt(
                "there is no non-empty PT_LOAD segment, so nothing to load",
            ));
        };
        let first_page = page_down(first.p_vaddr);

        // Every link-time address is moved as `base + (vaddr - first_page)`,
        // which cannot wrap around for addresses at or above `first_page`,
        // unlike adding a (possibly "negative") bias.
        let base = if self.header.e_type == ET_DYN {
            page_down(pie_base)
        } else {
            first_page
        };
        let load_bias = base.wrapping_sub(first_page);
        let relocate = |vaddr: u64, what: &dyn fmt::Display| -> Result<u64, LoadError> {
            vaddr
                .checked_sub(first_page)
                .and_then(|delta| base.checked_add(delta))
                .filter(|&addr| addr < USER_ADDRESS_LIMIT)
                .ok_or_else(|| {
                    corrupt(format!(
                        "{what} at {vaddr:#x} does not fit in the user address space"
                    ))
                })
        };

        let mut segments = Vec::with_capacity(loads.len());
        for ph in &loads {
            let what = format!("PT_LOAD segment {}", ph.index);
            let vaddr = relocate(ph.p_vaddr, &what)?;
            let end = vaddr
                .checked_add(ph.p_memsz)
                .and_then(page_up)
                .filter(|&end| end <= USER_ADDRESS_LIMIT);
            if end.is_none() {
                return Err(corrupt(format!(
                    "{what} at {:#x} with size {:#x} does not fit in the user address space",
                    ph.p_vaddr, ph.p_memsz
                )));
            }
            let data = self.range(ph.p_offset, ph.p_filesz, &what)?.to_vec();
            segments.push(Segment {
                vaddr,
                memsz: ph.p_memsz,
                data,
                prot: Prot::from_flags(ph.p_flags),
                file_offset: ph.p_offset,
            });
        }
        let lowest = segments.first().map_or(0, |s| page_down(s.vaddr));
        // Checked above: every segment's end rounds up without overflow.
        let highest = segments
            .last()
            .and_then(|s| page_up(s.end()))
            .unwrap_or(lowest);

        let pie_flagged = match &dynamic {
            Some(dynamic) => self.has_pie_flag(dynamic),
            None => true,
        };
        let kind = match (&interp, self.header.e_type) {
            (Some(_), _) => ElfKind::Dynamic,
            (None, ET_EXEC) => ElfKind::Static,
            (None, _) if pie_flagged => ElfKind::StaticPie,
            (None, _) => ElfKind::SharedObject,
        };

        let e_entry = self.header.e_entry;
        let in_code = loads.iter().any(|ph| {
            ph.p_flags & PF_X != 0 && ph.p_vaddr <= e_entry && e_entry - ph.p_vaddr < ph.p_memsz
        });
        if !in_code {
            if kind == ElfKind::SharedObject && e_entry == 0 {
                return Err(LoadError::NotExecutable(NotExecutableKind::SharedLibrary));
            }
            return Err(corrupt(format!(
                "the entry point {e_entry:#x} is not inside any executable segment"
            )));
        }
        let entry = relocate(e_entry, &"the entry point")?;

        let phdr_addr = match phdr_vaddr {
            Some(vaddr) => relocate(vaddr, &"the PT_PHDR segment")?,
            None => self.phdr_addr_from_loads(&loads, &relocate)?,
        };

        let tls = match tls {
            Some(ph) => Some(TlsTemplate {
                vaddr: relocate(ph.p_vaddr, &"the PT_TLS segment")?,
                file_offset: ph.p_offset,
                filesz: ph.p_filesz,
                memsz: ph.p_memsz,
                align: ph.p_align,
            }),
            None => None,
        };

        Ok(Image {
            segments,
            entry,
            phdr_addr,
            phent: PHDR_SIZE,
            phnum: u64::from(self.header.e_phnum),
            load_bias,
            lowest,
            highest,
            brk_start: highest,
            interp,
            kind,
            stack_exec,
            tls,
        })
    }

    fn check_load(&self, ph: &Phdr) -> Result<(), LoadError> {
        let i = ph.index;
        if ph.p_filesz > ph.p_memsz {
            return Err(corrupt(format!(
                "PT_LOAD segment {i} has more bytes in the file ({:#x}) than in memory ({:#x})",
                ph.p_filesz, ph.p_memsz
            )));
        }
        if ph.p_memsz > MAX_SIZE {
            return Err(corrupt(format!(
                "PT_LOAD segment {i} has an absurd size of {:#x} bytes",
                ph.p_memsz
            )));
        }
        if ph.p_vaddr.checked_add(ph.p_memsz).is_none() {
            return Err(corrupt(format!(
                "PT_LOAD segment {i} at {:#x} wraps around the address space",
                ph.p_vaddr
            )));
        }
        if ph.file_end().is_none_or(|end| end > self.len()) {
            return Err(self.past_end(format_args!("PT_LOAD segment {i}")));
        }
        Ok(())
    }

    fn check_tls(&self, ph: &Phdr) -> Result<Phdr, LoadError> {
        if ph.p_filesz > ph.p_memsz {
            return Err(corrupt(format!(
                "the PT_TLS segment has more bytes in the file ({:#x}) than in memory ({:#x})",
                ph.p_filesz, ph.p_memsz
            )));
        }
        if ph.p_memsz > MAX_SIZE || ph.p_align > MAX_SIZE {
            return Err(corrupt(
                "the PT_TLS segment has an absurd size or alignment",
            ));
        }
        if ph.file_end().is_none_or(|end| end > self.len()) {
            return Err(self.past_end("the PT_TLS segment"));
        }
        Ok(*ph)
    }

    /// The interpreter path, checked as Linux does: a NUL-terminated string
    /// of at most `PATH_MAX` bytes.
    fn interp_path(&self, ph: &Phdr) -> Result<String, LoadError> {
        if ph.p_filesz < 2 || ph.p_filesz > MAX_INTERP_LEN {
            return Err(corrupt(format!(
                "the PT_INTERP path is {} bytes long, which is not a valid path",
                ph.p_filesz
            )));
        }
        let raw = self.range(ph.p_offset, ph.p_filesz, "the PT_INTERP path")?;
        let Some((0, path)) = raw.split_last() else {
            return Err(corrupt("the PT_INTERP path is not NUL-terminated"));
        };
        if path.contains(&0) {
            return Err(corrupt("the PT_INTERP path contains a NUL byte"));
        }
        String::from_utf8(path.to_vec())
            .map_err(|_| corrupt("the PT_INTERP path is not valid UTF-8"))
    }

    /// Whether `PT_DYNAMIC` carries `DF_1_PIE`. A malformed dynamic section
    /// just means "no": this only picks between two kinds that load alike.
    fn has_pie_flag(&self, dynamic: &Phdr) -> bool {
        let Ok(table) = self.range(dynamic.p_offset, dynamic.p_filesz, "PT_DYNAMIC") else {
            return false;
        };
        for entry in table.chunks_exact(16) {
            let (Some(tag), Some(val)) = (read_u64(entry, 0), read_u64(entry, 8)) else {
                return false;
            };
            match tag {
                DT_NULL => return false,
                DT_FLAGS_1 => return val & DF_1_PIE != 0,
                _ => {}
            }
        }
        false
    }

    /// `AT_PHDR` without `PT_PHDR`: Linux's rule of looking for the
    /// `PT_LOAD` whose file image holds `e_phoff`, or 0 if none does.
    fn phdr_addr_from_loads(
        &self,
        loads: &[Phdr],
        relocate: &dyn Fn(u64, &dyn fmt::Display) -> Result<u64, LoadError>,
    ) -> Result<u64, LoadError> {
        let phoff = self.header.e_phoff;
        for ph in loads {
            let covers = ph.p_offset <= phoff && ph.file_end().is_some_and(|end| phoff < end);
            if covers {
                // Both segment fields were validated, so this cannot
                // overflow unless the segment sits at the very top, which
                // `relocate` rejects.
                let vaddr = ph.p_vaddr.checked_add(phoff - ph.p_offset).ok_or_else(|| {
                    corrupt("the program header table is mapped outside the address space")
                })?;
                return relocate(vaddr, &"the program header table");
            }
        }
        Ok(0)
    }
}

/// The ELF specification requires `PT_LOAD`s sorted by address; the
/// emulator relies on it, and overlap would make "which bytes win" depend
/// on mapping order.
fn check_order(prev: &Phdr, ph: &Phdr) -> Result<(), LoadError> {
    // `prev` passed `check_load`, so its end does not overflow.
    let prev_end = prev.p_vaddr.saturating_add(prev.p_memsz);
    if ph.p_vaddr < prev.p_vaddr {
        return Err(corrupt(format!(
            "PT_LOAD segment {} at {:#x} comes after segment {} at {:#x}, out of address order",
            ph.index, ph.p_vaddr, prev.index, prev.p_vaddr
        )));
    }
    if ph.p_vaddr < prev_end {
        return Err(corrupt(format!(
            "PT_LOAD segment {} at {:#x} overlaps segment {} ending at {:#x}",
            ph.index, ph.p_vaddr, prev.index, prev_end
        )));
    }
    Ok(())
}

fn corrupt(msg: impl Into<String>) -> LoadError {
    LoadError::Corrupt(msg.into())
}

fn page_down(addr: u64) -> u64 {
    addr & !(PAGE_SIZE - 1)
}

fn page_up(addr: u64) -> Option<u64> {
    addr.checked_add(PAGE_SIZE - 1).map(page_down)
}

fn read_array<const N: usize>(bytes: &[u8], off: usize) -> Option<[u8; N]> {
    bytes.get(off..off.checked_add(N)?)?.try_into().ok()
}

fn read_u16(bytes: &[u8], off: usize) -> Option<u16> {
    read_array(bytes, off).map(u16::from_le_bytes)
}

fn read_u16_be(bytes: &[u8], off: usize) -> Option<u16> {
    read_array(bytes, off).map(u16::from_be_bytes)
}

fn read_u32(bytes: &[u8], off: usize) -> Option<u32> {
    read_array(bytes, off).map(u32::from_le_bytes)
}

fn read_u64(bytes: &[u8], off: usize) -> Option<u64> {
    read_array(bytes, off).map(u64::from_le_bytes)
}
