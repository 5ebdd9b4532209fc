//! The CPU ferrite presents to its guests: one CPUID table, and everything derived from it.
//!
//! Unicorn's own CPUID answers are unusable as they are (see `shared/docs/unicorn-facts.md`): its
//! Skylake-Server model advertises ERMS, PKU without OSPKE and FSGSBASE, leaves 0xD that list AVX-512
//! state the translator cannot run, RDRAND backed by host randomness, and cache leaves that glibc turns
//! into its non-temporal `memcpy` threshold. So every CPUID executed by a guest is answered from the
//! table below (a raw `UC_HOOK_INSN` that skips the instruction), and the auxiliary vector's
//! `AT_HWCAP`/`AT_HWCAP2` and `/proc/cpuinfo` are derived from the same table, so a guest that asks in
//! any of the three ways sees one CPU.
//!
//! The engine itself runs with Unicorn's `SKYLAKE_SERVER` model selected, because the translator
//! refuses instructions (CLWB, CLFLUSHOPT, SSE4.2, POPCNT) that the selected model lacks. Everything
//! advertised here is a subset of what that model lets the translator execute.
//!
//! Choices, each made so that glibc picks code paths that are both realistic for a PM server and
//! cheap to emulate:
//! - SSE up to SSE4.2 and POPCNT: glibc's x86-64-v2 level. No AVX, AVX2 or AVX-512 (the translator has
//!   none), so no XSAVE/OSXSAVE either, and leaf 0xD is empty; glibc then saves state with FXSAVE.
//! - CLFLUSHOPT and CLWB: the persistence instructions PM programs use.
//! - ERMS hidden: with it glibc copies with `rep movsb`, one memory hook per byte. Without it `memcpy`
//!   uses SSE2 moves, and non-temporal stores above the threshold computed from leaf 4, as on hardware.
//! - RDRAND and RDSEED hidden: both would return host randomness.
//! - FSGSBASE, PKU, hypervisor bit: hidden. The guest should behave as on the bare-metal server it
//!   targets; FS is set through `arch_prctl`.
//! - Leaves 4 and 0xB describe one core with one thread and the caches of a Skylake-SP part.

/// Answers to CPUID for (leaf, subleaf): `[eax, ebx, ecx, edx]`.
#[derive(Clone, Debug)]
pub struct CpuidTable {
    entries: Vec<((u32, u32), [u32; 4])>,
}

// Leaf 1 ECX
const SSE3: u32 = 1 << 0;
const PCLMULQDQ: u32 = 1 << 1;
const SSSE3: u32 = 1 << 9;
const CX16: u32 = 1 << 13;
const SSE41: u32 = 1 << 19;
const SSE42: u32 = 1 << 20;
const MOVBE: u32 = 1 << 22;
const POPCNT: u32 = 1 << 23;
const AES: u32 = 1 << 25;
// Leaf 1 EDX
const FPU: u32 = 1 << 0;
const TSC: u32 = 1 << 4;
const CX8: u32 = 1 << 8;
const SEP: u32 = 1 << 11;
const CMOV: u32 = 1 << 15;
const PAT: u32 = 1 << 16;
const CLFSH: u32 = 1 << 19;
const MMX: u32 = 1 << 23;
const FXSR: u32 = 1 << 24;
const SSE: u32 = 1 << 25;
const SSE2: u32 = 1 << 26;
// Leaf 7 EBX
const CLFLUSHOPT: u32 = 1 << 23;
const CLWB: u32 = 1 << 24;
// Leaf 0x80000001
const LAHF_LM: u32 = 1 << 0;
const ABM: u32 = 1 << 5;
const PREFETCHW: u32 = 1 << 8;
const SYSCALL: u32 = 1 << 11;
const NX: u32 = 1 << 20;
const RDTSCP: u32 = 1 << 27;
const LM: u32 = 1 << 29;

const BRAND: &[u8; 48] = b"ferrite virtual PM server CPU (x86-64-v2)\0\0\0\0\0\0\0";

impl Default for CpuidTable {
    fn default() -> Self {
        let leaf1_ecx = SSE3 | PCLMULQDQ | SSSE3 | CX16 | SSE41 | SSE42 | MOVBE | POPCNT | AES;
        let leaf1_edx = FPU | TSC | CX8 | SEP | CMOV | PAT | CLFSH | MMX | FXSR | SSE | SSE2;
        // EBX: CLFLUSH line size 8 * 8 = 64 bytes (bits 15:8), one logical processor (23:16).
        let leaf1_ebx = (8 << 8) | (1 << 16);
        let vendor = *b"GenuineIntel";
        let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut entries = vec![
            ((0, 0), [0xb, word(&vendor[0..4]), word(&vendor[8..12]), word(&vendor[4..8])]),
            // Family 6, model 0x55 (Skylake-SP / Cascade Lake, the Optane DC platform), stepping 4.
            ((1, 0), [0x0005_0654, leaf1_ebx, leaf1_ecx, leaf1_edx]),
            ((7, 0), [0, CLFLUSHOPT | CLWB, 0, 0]),
            ((0x8000_0000, 0), [0x8000_0008, 0, 0, 0]),
            ((0x8000_0001, 0), [0, 0, LAHF_LM | ABM | PREFETCHW, SYSCALL | NX | RDTSCP | LM]),
            // L2: 1 MiB, 16-way, 64-byte lines (ECX = size KiB << 16 | assoc code << 12 | line).
            ((0x8000_0006, 0), [0, 0, (1024 << 16) | (0x8 << 12) | 64, 0]),
            // Invariant TSC: the virtual clock never stops or changes rate.
            ((0x8000_0007, 0), [0, 0, 0, 1 << 8]),
            // 46 physical, 48 virtual address bits.
            ((0x8000_0008, 0), [0x302e, 0, 0, 0]),
        ];
        // Deterministic cache parameters (leaf 4): type, level, ways, partitions, line size, sets.
        let caches: [(u32, u32, u32, u32); 4] = [
            (1, 1, 8, 64),     // L1d 32 KiB
            (2, 1, 8, 64),     // L1i 32 KiB
            (3, 2, 16, 1024),  // L2 1 MiB
            (3, 3, 11, 22528), // L3 ~15.5 MiB... sets chosen for 11 ways * 64 B * 22528 = 15.1 MiB
        ];
        for (i, (kind, level, ways, sets)) in caches.iter().enumerate() {
            let eax = kind | (level << 5) | (1 << 8); // self-initialising
            let ebx = 63 | ((ways - 1) << 22); // line size - 1, partitions - 1 = 0, ways - 1
            entries.push(((4, i as u32), [eax, ebx, sets - 1, 0]));
        }
        entries.push(((4, 4), [0, 0, 0, 0]));
        // Leaf 0xB: SMT level (1 thread), core level (1 core).
        entries.push(((0xb, 0), [0, 1, 1 << 8, 0]));
        entries.push(((0xb, 1), [0, 1, (2 << 8) | 1, 0]));
        entries.push(((0xb, 2), [0, 0, 2, 0]));
        for (i, chunk) in BRAND.chunks(16).enumerate() {
            let regs = [word(&chunk[0..4]), word(&chunk[4..8]), word(&chunk[8..12]), word(&chunk[12..16])];
            entries.push(((0x8000_0002 + i as u32, 0), regs));
        }
        entries.sort_by_key(|e| e.0);
        CpuidTable { entries }
    }
}

impl CpuidTable {
    /// The answer for `leaf`/`subleaf`; leaves that take no subleaf ignore it. Unknown leaves
    /// answer zeros, as Intel parts do for leaves within range that they do not implement.
    pub fn query(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        let indexed = matches!(leaf, 4 | 7 | 0xb | 0xd);
        let key = (leaf, if indexed { subleaf } else { 0 });
        match self.entries.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => self.entries[i].1,
            Err(_) => [0; 4],
        }
    }

    fn has(&self, leaf: u32, reg: usize, bit: u32) -> bool {
        self.query(leaf, 0)[reg] & bit != 0
    }

    /// `AT_HWCAP` as Linux computes it on x86-64: leaf 1 EDX.
    pub fn hwcap(&self) -> u64 {
        u64::from(self.query(1, 0)[3])
    }

    /// `AT_HWCAP2`: bit 1 is FSGSBASE (hidden here), bit 0 ring-3 MWAIT; both clear.
    pub fn hwcap2(&self) -> u64 {
        0
    }

    /// Linux's `/proc/cpuinfo` flag names for what the table advertises.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = Vec::new();
        let edx1 = [
            (FPU, "fpu"),
            (TSC, "tsc"),
            (CX8, "cx8"),
            (SEP, "sep"),
            (CMOV, "cmov"),
            (PAT, "pat"),
            (CLFSH, "clflush"),
            (MMX, "mmx"),
            (FXSR, "fxsr"),
            (SSE, "sse"),
            (SSE2, "sse2"),
        ];
        flags.extend(edx1.iter().filter(|(b, _)| self.has(1, 3, *b)).map(|f| f.1));
        let ext_edx = [(SYSCALL, "syscall"), (NX, "nx"), (RDTSCP, "rdtscp"), (LM, "lm")];
        flags.extend(ext_edx.iter().filter(|(b, _)| self.has(0x8000_0001, 3, *b)).map(|f| f.1));
        let ecx1 = [
            (SSE3, "pni"),
            (PCLMULQDQ, "pclmulqdq"),
            (SSSE3, "ssse3"),
            (CX16, "cx16"),
            (SSE41, "sse4_1"),
            (SSE42, "sse4_2"),
            (MOVBE, "movbe"),
            (POPCNT, "popcnt"),
            (AES, "aes"),
        ];
        flags.extend(ecx1.iter().filter(|(b, _)| self.has(1, 2, *b)).map(|f| f.1));
        let ext_ecx = [(LAHF_LM, "lahf_lm"), (ABM, "abm"), (PREFETCHW, "3dnowprefetch")];
        flags.extend(ext_ecx.iter().filter(|(b, _)| self.has(0x8000_0001, 2, *b)).map(|f| f.1));
        let ebx7 = [(CLFLUSHOPT, "clflushopt"), (CLWB, "clwb")];
        flags.extend(ebx7.iter().filter(|(b, _)| self.has(7, 1, *b)).map(|f| f.1));
        flags
    }

    /// The brand string of leaves 0x80000002..4, without trailing NULs.
    pub fn brand(&self) -> String {
        let mut bytes = Vec::new();
        for leaf in 0x8000_0002..=0x8000_0004 {
            for r in self.query(leaf, 0) {
                bytes.extend_from_slice(&r.to_le_bytes());
            }
        }
        String::from_utf8_lossy(&bytes).trim_end_matches('\0').to_string()
    }

    /// `/proc/cpuinfo` for `cpus` identical processors.
    pub fn proc_cpuinfo(&self, cpus: u32) -> String {
        let flags = self.flag_names().join(" ");
        let brand = self.brand();
        let mut out = String::new();
        for n in 0..cpus {
            out.push_str(&format!(
                "processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n\
                 model name\t: {brand}\nstepping\t: 4\ncpu MHz\t\t: 1000.000\ncache size\t: 15488 KB\n\
                 physical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {n}\ncpu cores\t: {cpus}\n\
                 apicid\t\t: {n}\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 11\nwp\t\t: yes\n\
                 flags\t\t: {flags}\nclflush size\t: 64\ncache_alignment\t: 64\n\
                 address sizes\t: 46 bits physical, 48 bits virtual\n\n"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertises_persistence_instructions_and_hides_host_leaks() {
        let t = CpuidTable::default();
        let [_, ebx7, ecx7, _] = t.query(7, 0);
        assert_ne!(ebx7 & CLWB, 0);
        assert_ne!(ebx7 & CLFLUSHOPT, 0);
        assert_eq!(ebx7 & (1 << 9), 0, "ERMS hidden");
        assert_eq!(ebx7 & (1 << 18), 0, "RDSEED hidden");
        assert_eq!(ebx7 & 1, 0, "FSGSBASE hidden");
        assert_eq!(ecx7 & (1 << 3), 0, "PKU hidden");
        let [_, _, ecx1, _] = t.query(1, 0);
        assert_eq!(ecx1 & (1 << 30), 0, "RDRAND hidden");
        assert_eq!(ecx1 & (1 << 27), 0, "no OSXSAVE");
        assert_eq!(ecx1 & (1 << 28), 0, "no AVX");
        assert_eq!(t.query(0xd, 0), [0; 4]);
        assert!(t.flag_names().contains(&"clwb"));
        assert!(t.brand().starts_with("ferrite"));
        assert_eq!(t.hwcap() & u64::from(SSE2), u64::from(SSE2));
    }
}
