//! Thread-local variables for gdb (`p errno`, a program's `__thread` variables): the
//! `qGetTLSAddr` packet, which gdb 13 sends a remote target for every thread-local symbol, and
//! which the `gdbstub` crate does not know.
//!
//! gdb names the thread, the variable's offset in its module's TLS block and the module's link
//! map (0 for a static program's own variables); the answer is the variable's address in that
//! thread. On x86-64 glibc the thread pointer (`fs_base`) points at the thread's TCB, whose
//! second word is the DTV: entry `m` (16 bytes each, after a generation counter, with the
//! vector's length just before it) holds the start of module `m`'s block. The module id is
//! what the dynamic linker gave the module at start-up: 1, 2, ... to the modules with a
//! non-empty `PT_TLS` segment, in link-map order (the program first). The link map's public
//! fields (`l_addr`, `l_next`, `l_prev`) and the modules' program headers in guest memory tell
//! which; the program's own come from its auxiliary vector. Modules loaded later by `dlopen`
//! may reuse freed ids, which this does not follow: their variables are not answered.
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

impl Debuggee {
    /// Where thread `tid`'s variable at `offset` in the TLS block of the module whose link map
    /// is at `lm` (0: the program itself) is, if its block exists.
    pub fn tls_address(&self, tid: u32, offset: u64, lm: u64) -> Option<u64> {
        let m = self.timeline.session().machine();
        let tp = m.thread_registers(tid)?.fs_base;
        let modid = if lm == 0 { 1 } else { self.tls_module_id(lm)? };
        let dtv = m.read_u64(tp.checked_add(8)?).ok()?;
        let slots = m.read_u64(dtv.checked_sub(16)?).ok()?;
        if modid > slots {
            return None;
        }
        let block = m.read_u64(dtv.checked_add(16 * modid)?).ok()?;
        // 0: not set up; all ones: TLS_DTV_UNALLOCATED (a dlopen'ed module's, until first use).
        if block == 0 || block == u64::MAX {
            return None;
        }
        block.checked_add(offset)
    }

    /// The TLS module id of the module whose link map is at `lm`.
    fn tls_module_id(&self, lm: u64) -> Option<u64> {
        let m = self.timeline.session().machine();
        let word = |a: u64| m.read_u64(a).ok();
        let mut head = lm;
        for _ in 0..MAX_MODULES {
            match word(head.checked_add(32)?)? {
                0 => break,
                prev => head = prev,
            }
        }
        let mut id = 0;
        let mut map = head;
        for i in 0..MAX_MODULES {
            if map == 0 {
                return None;
            }
            let has = if i == 0 { self.program_has_tls() } else { self.module_has_tls(word(map)?) };
            id += u64::from(has);
            if map == lm {
                return has.then_some(id);
            }
            map = word(map.checked_add(24)?)?;
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
