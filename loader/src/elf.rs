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
//! The parsing is goblin's: [`Elf::parse_header`] reads the ELF header,
//! [`ProgramHeader::parse`] the program header table and [`Dynamic::parse`]
//! the `PT_DYNAMIC` entries (for `DF_1_PIE`), and the ELF constants are
//! goblin's too. goblin reads what the bytes say and no more, so ferrite
//! checks on top of it:
//! - the identification bytes, before goblin sees the file, so that a file
//!   cut off inside `e_ident` still gets the specific error (32-bit, which
//!   machine a big-endian file is for) rather than "truncated";
//! - that `e_phentsize` is 56 and the table is no larger than Linux
//!   accepts, before goblin reads it;
//! - that every range a segment claims lies inside the file, telling a
//!   cut-off file ([`LoadError::Truncated`]) from a corrupt one by whether
//!   the section header table at the end of the file is still there;
//! - segment sizes (`p_filesz <= p_memsz`, at most 1 TiB, no wrap-around),
//!   address order and overlap of the `PT_LOAD`s, the user-space limit
//!   after relocation, and that the entry point is in an executable
//!   segment;
//! - the `PT_INTERP` path as Linux does (NUL-terminated, no inner NUL, at
//!   most `PATH_MAX`), and that it is UTF-8.
//!
//! goblin's errors are mapped onto [`LoadError`]: bad magic is
//! [`LoadError::NotElf`], a read past the end of the file goes through the
//! same truncated-or-corrupt test as ferrite's own range checks, and any
//! other complaint becomes [`LoadError::Corrupt`].
//!
//! goblin's all-in-one [`Elf::parse`] is not used: it also reads section
//! headers, symbol tables and relocations, which the kernel never looks at,
//! and fails on a file whose section headers are cut off although Linux
//! runs it. Only goblin's bounds-checked readers for the three structures
//! above are called: the program header table once ferrite has capped its
//! size at Linux's limit, the dynamic section only as far as the file goes
//! (goblin checks that), so that no input, however mangled, can make
//! loading panic or allocate more than the file's own size.
//!
//! Left out: section headers (the kernel never reads them, so neither do
//! we, except to tell a cut-off file from a corrupt one), relocation, the
//! contents of `PT_DYNAMIC` beyond the PIE flag, `PT_GNU_PROPERTY` (IBT and
//! shadow stacks), `PT_GNU_RELRO`, and `p_align` beyond the page size.

use std::fmt;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::dynamic::DF_1_PIE;
use goblin::elf::header::{
    EI_CLASS, EI_DATA, ELFCLASS32, ELFCLASS64, ELFDATA2LSB, ELFDATA2MSB, ELFMAG, EM_X86_64, ET_CORE, ET_DYN, ET_EXEC,
    ET_REL,
};
use goblin::elf::program_header::{PT_DYNAMIC, PT_GNU_STACK, PT_INTERP, PT_LOAD, PT_PHDR, PT_TLS};
use goblin::elf::{Dynamic, Elf, Header, ProgramHeader};
use goblin::elf64::header::SIZEOF_EHDR;
use goblin::elf64::program_header::SIZEOF_PHDR;

use crate::LoadError;

/// The page size the loader aligns to, as on x86-64 Linux.
pub const PAGE_SIZE: u64 = 4096;

/// One past the highest user-space address on x86-64 Linux with 4-level
/// paging (`TASK_SIZE`); no segment may reach past it.
pub const USER_ADDRESS_LIMIT: u64 = 0x7fff_ffff_f000;

/// Sizes above this are treated as corruption: no real program has a
/// terabyte segment, and the emulator would try to allocate it.
const MAX_SIZE: u64 = 1 << 40;

/// The size of one program header, as a `u64` for offset arithmetic.
const PHDR_SIZE: u64 = SIZEOF_PHDR as u64;
/// Linux refuses program header tables larger than this (`elf_read_phdrs`).
const MAX_PHDR_TABLE: u64 = 65536;
/// Linux's `PATH_MAX`, the longest interpreter path it accepts.
const MAX_INTERP_LEN: u64 = 4096;

/// How goblin is to read the file: 64-bit, little-endian.
const CTX: Ctx = Ctx { container: Container::Big, le: Endian::Little };

/// Access rights of a segment, from its `p_flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prot {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
}

impl Prot {
    fn from_phdr(ph: &ProgramHeader) -> Self {
        Prot { read: ph.is_read(), write: ph.is_write(), exec: ph.is_executable() }
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
    /// Its access rights.
    pub prot: Prot,
    /// `p_offset`: where its bytes are in the file (mappings of the file name it).
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
            NotExecutableKind::SharedLibrary => f.write_str("a shared library without an entry point"),
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
    /// `p_offset` of the `PT_TLS` segment.
    pub file_offset: u64,
    /// Bytes of initialised data; the rest up to `memsz` (`.tbss`) is zero.
    pub filesz: u64,
    /// Bytes of the whole block (`.tdata` and `.tbss`).
    pub memsz: u64,
    /// Alignment of the block.
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
    /// Static, static-PIE or dynamic.
    pub kind: ElfKind,
    /// Whether `PT_GNU_STACK` asks for an executable stack. Without
    /// `PT_GNU_STACK`, x86-64 Linux gives a non-executable stack, and so
    /// does this.
    pub stack_exec: bool,
    /// The `PT_TLS` template, if the program has thread-local storage.
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
    let header = parse_header(bytes)?;
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

/// Checks the identification bytes, then has goblin read the ELF header,
/// and refuses anything that is not an x86-64 program.
fn parse_header(bytes: &[u8]) -> Result<Header, LoadError> {
    if !bytes.starts_with(ELFMAG) {
        return Err(LoadError::NotElf);
    }
    // goblin wants all of `e_ident` and then the whole header before it
    // says anything; the class and byte order are looked at first so that
    // a 32-bit file gets the helpful error however short it is.
    match bytes.get(EI_CLASS) {
        None => return Err(LoadError::Truncated),
        Some(&ELFCLASS64) => {}
        Some(&ELFCLASS32) => return Err(LoadError::Class32),
        Some(&class) => return Err(corrupt(format!("unknown ELF class {class}"))),
    }
    match bytes.get(EI_DATA) {
        None => return Err(LoadError::Truncated),
        Some(&ELFDATA2LSB) => {}
        Some(&ELFDATA2MSB) => {
            // Every big-endian ELF is for some other machine; say which,
            // even when the file ends soon after `e_machine`.
            let machine = match Elf::parse_header(bytes) {
                Ok(header) => header.e_machine,
                Err(_) => bytes.get(18..20).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or(LoadError::Truncated)?,
            };
            // A little-endian x86-64 file with only its data-encoding byte changed reads as
            // machine 0x3e00: name what it is, not a machine type nobody has heard of.
            return if machine == EM_X86_64 || machine.swap_bytes() == EM_X86_64 {
                Err(corrupt("big-endian ELF file claims to be x86-64"))
            } else if machine_description(machine).starts_with("programs for machine type") {
                Err(corrupt(format!(
                    "big-endian ELF file for an unknown machine type {machine}; ferrite runs little-endian x86-64 programs"
                )))
            } else {
                Err(LoadError::WrongMachine(machine))
            };
        }
        Some(&data) => return Err(corrupt(format!("unknown ELF data encoding {data}"))),
    }
    if bytes.len() < SIZEOF_EHDR {
        return Err(LoadError::Truncated);
    }
    let header = Elf::parse_header(bytes).map_err(|e| from_goblin(e, || LoadError::Truncated))?;
    if header.e_machine != EM_X86_64 {
        return Err(LoadError::WrongMachine(header.e_machine));
    }
    match header.e_type {
        ET_EXEC | ET_DYN => Ok(header),
        ET_REL => Err(LoadError::NotExecutable(NotExecutableKind::Relocatable)),
        ET_CORE => Err(LoadError::NotExecutable(NotExecutableKind::Core)),
        other => Err(LoadError::NotExecutable(NotExecutableKind::Other(other))),
    }
}

/// One program header as goblin read it, with its index in the table for
/// messages.
#[derive(Clone, Copy)]
struct Phdr<'a> {
    index: usize,
    ph: &'a ProgramHeader,
}

impl std::ops::Deref for Phdr<'_> {
    type Target = ProgramHeader;

    fn deref(&self) -> &ProgramHeader {
        self.ph
    }
}

impl Phdr<'_> {
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
        let cut =
            self.header.e_shoff == 0 || self.header.e_shoff.checked_add(sh_size).is_none_or(|end| end > self.len());
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
        self.bytes.get(offset as usize..end as usize).ok_or(LoadError::Truncated)
    }

    /// The program header table, read by goblin once its size is known to
    /// be sane.
    fn program_headers(&self) -> Result<Vec<ProgramHeader>, LoadError> {
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
            return Err(corrupt(format!("there are {} program headers, more than Linux accepts", h.e_phnum)));
        }
        // goblin takes a `usize` offset; one that does not fit is past the
        // end of any file.
        let Ok(offset) = usize::try_from(h.e_phoff) else {
            return Err(self.past_end("the program header table"));
        };
        ProgramHeader::parse(self.bytes, offset, usize::from(h.e_phnum), CTX)
            .map_err(|e| from_goblin(e, || self.past_end("the program header table")))
    }

    fn load(&self, pie_base: u64) -> Result<Image, LoadError> {
        let phdrs = self.program_headers()?;

        let mut loads: Vec<Phdr> = Vec::new();
        let mut interp: Option<String> = None;
        let mut phdr_vaddr: Option<u64> = None;
        let mut tls: Option<Phdr> = None;
        let mut has_dynamic = false;
        let mut stack_exec = false;
        for (index, ph) in phdrs.iter().enumerate() {
            let ph = Phdr { index, ph };
            match ph.p_type {
                PT_LOAD => {
                    self.check_load(&ph)?;
                    // Empty segments map nothing, so where they claim to be
                    // does not matter.
                    if ph.p_memsz == 0 {
                        continue;
                    }
                    if let Some(prev) = loads.last() {
                        check_order(prev, &ph)?;
                    }
                    loads.push(ph);
                }
                // Like Linux, only the first of each is honoured.
                PT_INTERP if interp.is_none() => interp = Some(self.interp_path(&ph)?),
                PT_PHDR if phdr_vaddr.is_none() => phdr_vaddr = Some(ph.p_vaddr),
                PT_TLS if tls.is_none() => tls = Some(self.check_tls(&ph)?),
                PT_DYNAMIC => has_dynamic = true,
                PT_GNU_STACK => stack_exec = ph.is_executable(),
                _ => {}
            }
        }
        let Some(first) = loads.first() else {
            return Err(corrupt("there is no non-empty PT_LOAD segment, so nothing to load"));
        };
        let first_page = page_down(first.p_vaddr);

        // Every link-time address is moved as `base + (vaddr - first_page)`,
        // which cannot wrap around for addresses at or above `first_page`,
        // unlike adding a (possibly "negative") bias.
        let base = if self.header.e_type == ET_DYN { page_down(pie_base) } else { first_page };
        let load_bias = base.wrapping_sub(first_page);
        let relocate = |vaddr: u64, what: &dyn fmt::Display| -> Result<u64, LoadError> {
            vaddr
                .checked_sub(first_page)
                .and_then(|delta| base.checked_add(delta))
                .filter(|&addr| addr < USER_ADDRESS_LIMIT)
                .ok_or_else(|| corrupt(format!("{what} at {vaddr:#x} does not fit in the user address space")))
        };

        let mut segments = Vec::with_capacity(loads.len());
        for ph in &loads {
            let what = format!("PT_LOAD segment {}", ph.index);
            let vaddr = relocate(ph.p_vaddr, &what)?;
            let end = vaddr.checked_add(ph.p_memsz).and_then(page_up).filter(|&end| end <= USER_ADDRESS_LIMIT);
            if end.is_none() {
                return Err(corrupt(format!(
                    "{what} at {:#x} with size {:#x} does not fit in the user address space",
                    ph.p_vaddr, ph.p_memsz
                )));
            }
            // The bytes the file has (checked above: the rest lie in its last page and are zero,
            // as the bss after them is).
            let have = self.len().saturating_sub(ph.p_offset).min(ph.p_filesz);
            let data = if have == 0 { Vec::new() } else { self.range(ph.p_offset, have, &what)?.to_vec() };
            segments.push(Segment {
                vaddr,
                memsz: ph.p_memsz,
                data,
                prot: Prot::from_phdr(ph),
                file_offset: ph.p_offset,
            });
        }
        let lowest = segments.first().map_or(0, |s| page_down(s.vaddr));
        // Checked above: every segment's end rounds up without overflow.
        let highest = segments.last().and_then(|s| page_up(s.end())).unwrap_or(lowest);

        let kind = match (&interp, self.header.e_type) {
            (Some(_), _) => ElfKind::Dynamic,
            (None, ET_EXEC) => ElfKind::Static,
            (None, _) if !has_dynamic || self.has_pie_flag(&phdrs) => ElfKind::StaticPie,
            (None, _) => ElfKind::SharedObject,
        };

        let e_entry = self.header.e_entry;
        let in_code =
            loads.iter().any(|ph| ph.is_executable() && ph.p_vaddr <= e_entry && e_entry - ph.p_vaddr < ph.p_memsz);
        if !in_code {
            if kind == ElfKind::SharedObject && e_entry == 0 {
                return Err(LoadError::NotExecutable(NotExecutableKind::SharedLibrary));
            }
            return Err(corrupt(format!("the entry point {e_entry:#x} is not inside any executable segment")));
        }
        let entry = relocate(e_entry, &"the entry point")?;

        let phdr_addr = match phdr_vaddr {
            Some(vaddr) => relocate(vaddr, &"the PT_PHDR segment")?,
            None => self.phdr_addr_from_loads(&loads, &relocate)?,
        };

        // Linux never reads PT_TLS, and ld.so reads only its `p_filesz` bytes at `p_vaddr`:
        // Go's linker writes a `.tbss`-only PT_TLS at address 0, below every segment of a
        // non-PIE program, and such programs run. So an address that does not relocate is kept
        // as the plain sum, never refused.
        let tls = tls.map(|ph| TlsTemplate {
            vaddr: relocate(ph.p_vaddr, &"the PT_TLS segment").unwrap_or(ph.p_vaddr.wrapping_add(load_bias)),
            file_offset: ph.p_offset,
            filesz: ph.p_filesz,
            memsz: ph.p_memsz,
            align: ph.p_align,
        });

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
            return Err(corrupt(format!("PT_LOAD segment {i} has an absurd size of {:#x} bytes", ph.p_memsz)));
        }
        if ph.p_vaddr.checked_add(ph.p_memsz).is_none() {
            return Err(corrupt(format!("PT_LOAD segment {i} at {:#x} wraps around the address space", ph.p_vaddr)));
        }
        // Linux maps a segment's file pages whatever the file's length: bytes past its end
        // in the file's last page read as zero, and only a whole page past it would fault
        // (SIGBUS) when touched. So a file cut inside its last page runs, as natively; one cut
        // by whole pages is refused as truncated.
        let room = page_up(self.len()).unwrap_or(u64::MAX);
        if ph.file_end().is_none_or(|end| end > room) {
            return Err(self.past_end(format_args!("PT_LOAD segment {i}")));
        }
        Ok(())
    }

    fn check_tls<'a>(&self, ph: &Phdr<'a>) -> Result<Phdr<'a>, LoadError> {
        if ph.p_filesz > ph.p_memsz {
            return Err(corrupt(format!(
                "the PT_TLS segment has more bytes in the file ({:#x}) than in memory ({:#x})",
                ph.p_filesz, ph.p_memsz
            )));
        }
        if ph.p_memsz > MAX_SIZE || ph.p_align > MAX_SIZE {
            return Err(corrupt("the PT_TLS segment has an absurd size or alignment"));
        }
        if ph.file_end().is_none_or(|end| end > self.len()) {
            return Err(self.past_end("the PT_TLS segment"));
        }
        Ok(*ph)
    }

    /// The interpreter path, checked as Linux does: a NUL-terminated string
    /// of at most `PATH_MAX` bytes, which ends at its first NUL.
    ///
    /// goblin's `Elf::parse` would take the `p_filesz - 1` bytes as the path
    /// without looking at the terminator, so this reads the bytes itself.
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
        // Linux opens it as a C string: a NUL inside ends the path there.
        let path = path.split(|&b| b == 0).next().unwrap_or_default();
        if path.is_empty() {
            return Err(corrupt("the PT_INTERP path is empty"));
        }
        String::from_utf8(path.to_vec()).map_err(|_| corrupt("the PT_INTERP path is not valid UTF-8"))
    }

    /// Whether the first `PT_DYNAMIC` carries `DF_1_PIE`, as goblin reads
    /// it (up to the first `DT_NULL`). A malformed dynamic section just
    /// means "no": this only picks between two kinds that load alike.
    fn has_pie_flag(&self, phdrs: &[ProgramHeader]) -> bool {
        match Dynamic::parse(self.bytes, phdrs, CTX) {
            Ok(Some(dynamic)) => dynamic.info.flags_1 & DF_1_PIE != 0,
            Ok(None) | Err(_) => false,
        }
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
                let vaddr = ph
                    .p_vaddr
                    .checked_add(phoff - ph.p_offset)
                    .ok_or_else(|| corrupt("the program header table is mapped outside the address space"))?;
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

/// Maps an error from goblin onto a [`LoadError`].
///
/// goblin reports a read past the end of the bytes as a scroll error or as
/// `BufferTooShort`; `past_end` says whether that is truncation or
/// corruption where the error happened. goblin's own messages are made to
/// follow [`LoadError`]'s rules: one line, lowercase start, no period.
fn from_goblin(err: goblin::error::Error, past_end: impl FnOnce() -> LoadError) -> LoadError {
    use goblin::error::Error;
    match err {
        Error::BadMagic(_) => LoadError::NotElf,
        Error::Scroll(_) | Error::BufferTooShort(..) => past_end(),
        Error::Malformed(msg) => corrupt(as_clause(&msg)),
        other => corrupt(as_clause(&other.to_string())),
    }
}

/// `msg` as one line starting in lowercase, without a trailing period.
fn as_clause(msg: &str) -> String {
    let line = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line.trim_end_matches('.');
    let mut chars = line.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "goblin could not read the file".to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goblin_errors_map_onto_load_errors() {
        use goblin::error::Error;
        let truncated = || LoadError::Truncated;
        assert_eq!(from_goblin(Error::BadMagic(0), truncated), LoadError::NotElf);
        assert_eq!(from_goblin(Error::BufferTooShort(9, "program headers"), truncated), LoadError::Truncated);
        let scroll = Elf::parse_header(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0")
            .expect_err("goblin read a header from 18 bytes");
        assert_eq!(from_goblin(scroll, truncated), LoadError::Truncated);
        assert_eq!(
            from_goblin(Error::Malformed("Invalid PT_DYNAMIC size.\nSorry.".into()), truncated),
            LoadError::Corrupt("invalid PT_DYNAMIC size. Sorry".into())
        );
    }
}
