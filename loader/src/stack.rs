//! The initial process stack: `argc`, `argv`, `envp`, the auxiliary vector
//! and the strings they point to, laid out byte for byte as Linux's
//! `create_elf_tables` (fs/binfmt_elf.c) and `copy_strings` (fs/exec.c) do,
//! so that libc start-up code finds everything where it expects it.
//!
//! Left out: the vDSO (`AT_SYSINFO_EHDR`), `AT_BASE_PLATFORM` and
//! `AT_EXECFD` (x86-64 Linux never sets them for a plain exec), the rseq
//! entries (`AT_RSEQ_FEATURE_SIZE`, `AT_RSEQ_ALIGN`; without them glibc
//! assumes the original rseq ABI), the random padding Linux inserts below
//! the strings (so runs are reproducible), and the `ARG_MAX` limit, which is
//! the caller's to enforce. Strings are copied as given and each gets a NUL
//! appended, so an embedded NUL cuts a string short just as it would for
//! `execve`.

use crate::Image;

/// `AT_NULL`: end of the auxiliary vector.
pub const AT_NULL: u64 = 0;
/// `AT_IGNORE`: an entry to ignore.
pub const AT_IGNORE: u64 = 1;
/// `AT_EXECFD`: file descriptor of the program (not used).
pub const AT_EXECFD: u64 = 2;
/// `AT_PHDR`: address of the program headers.
pub const AT_PHDR: u64 = 3;
/// `AT_PHENT`: size of one program header.
pub const AT_PHENT: u64 = 4;
/// `AT_PHNUM`: number of program headers.
pub const AT_PHNUM: u64 = 5;
/// `AT_PAGESZ`: the page size.
pub const AT_PAGESZ: u64 = 6;
/// `AT_BASE`: where the interpreter was loaded.
pub const AT_BASE: u64 = 7;
/// `AT_FLAGS`: flags (0).
pub const AT_FLAGS: u64 = 8;
/// `AT_ENTRY`: the program's entry point.
pub const AT_ENTRY: u64 = 9;
/// `AT_NOTELF`: the program is not ELF (never set).
pub const AT_NOTELF: u64 = 10;
/// `AT_UID`: real user id.
pub const AT_UID: u64 = 11;
/// `AT_EUID`: effective user id.
pub const AT_EUID: u64 = 12;
/// `AT_GID`: real group id.
pub const AT_GID: u64 = 13;
/// `AT_EGID`: effective group id.
pub const AT_EGID: u64 = 14;
/// `AT_PLATFORM`: address of the platform string.
pub const AT_PLATFORM: u64 = 15;
/// `AT_HWCAP`: cPU feature bits (CPUID leaf 1 EDX).
pub const AT_HWCAP: u64 = 16;
/// `AT_CLKTCK`: clock ticks per second of `times`.
pub const AT_CLKTCK: u64 = 17;
/// `AT_SECURE`: whether the program runs set-uid (0).
pub const AT_SECURE: u64 = 23;
/// `AT_BASE_PLATFORM`: address of the base platform string (not set).
pub const AT_BASE_PLATFORM: u64 = 24;
/// `AT_RANDOM`: address of 16 random bytes.
pub const AT_RANDOM: u64 = 25;
/// `AT_HWCAP2`: more CPU feature bits.
pub const AT_HWCAP2: u64 = 26;
/// `AT_EXECFN`: address of the path given to `execve`.
pub const AT_EXECFN: u64 = 31;
/// `AT_SYSINFO_EHDR`: address of the vDSO (not set: there is none).
pub const AT_SYSINFO_EHDR: u64 = 33;
/// `AT_MINSIGSTKSZ`: the smallest signal stack the CPU's state needs.
pub const AT_MINSIGSTKSZ: u64 = 51;

const WORD: u64 = 8;

/// What the kernel would know at `execve` time besides the ELF image.
#[derive(Clone, Debug)]
pub struct StackSpec<'a> {
    /// The arguments, `argv[0]` first.
    pub argv: &'a [Vec<u8>],
    /// The environment, `KEY=VALUE` each.
    pub envp: &'a [Vec<u8>],
    /// The path given to `execve`, pointed to by `AT_EXECFN`.
    pub execfn: &'a [u8],
    /// The `AT_PLATFORM` string, `x86_64`; left out of the auxiliary vector
    /// when empty.
    pub platform: &'a [u8],
    /// The 16 bytes `AT_RANDOM` points to; glibc seeds its stack protector
    /// and pointer guard from them.
    pub random: [u8; 16],
    /// `AT_HWCAP`.
    pub hwcap: u64,
    /// `AT_HWCAP2`.
    pub hwcap2: u64,
    /// `AT_PAGESZ`.
    pub pagesz: u64,
    /// `AT_CLKTCK`.
    pub clktck: u64,
    /// `AT_UID`.
    pub uid: u64,
    /// `AT_EUID`.
    pub euid: u64,
    /// `AT_GID`.
    pub gid: u64,
    /// `AT_EGID`.
    pub egid: u64,
    /// `AT_SECURE`.
    pub secure: u64,
    /// `AT_BASE`: where the interpreter was loaded, 0 for static programs.
    pub base: u64,
    /// `AT_MINSIGSTKSZ`.
    pub minsigstksz: u64,
}

/// The initial stack contents. `bytes` occupy exactly `[sp, stack_top)`;
/// `sp` is 16-byte aligned and points at `argc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialStack {
    /// The stack's bytes, from `sp` up to the stack top.
    pub bytes: Vec<u8>,
    /// The initial stack pointer, at `argc`.
    pub sp: u64,
}

/// Lays out the initial stack below `stack_top` for `image`.
///
/// From the top down: 8 zero bytes, the `AT_EXECFN` string, the environment
/// strings, the argument strings, alignment to 16, the platform string, the
/// 16 random bytes, then (after padding that makes the final `sp` 16-byte
/// aligned) the auxiliary vector, `envp`, `argv` and `argc`.
///
/// `stack_top` should be 16-byte aligned and far enough from 0 to hold
/// everything; otherwise the addresses wrap around (without panicking) and
/// the result is useless.
pub fn build_initial_stack(stack_top: u64, spec: &StackSpec, image: &Image) -> InitialStack {
    let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
    // Addresses are computed with wrapping arithmetic so that an absurd
    // `stack_top` gives garbage rather than a panic; offsets from `sp` stay
    // correct either way because everything is modulo 2^64.
    let mut p = stack_top.wrapping_sub(WORD);
    let mut push_str = |p: &mut u64, s: &[u8]| -> u64 {
        let mut bytes = Vec::with_capacity(s.len().saturating_add(1));
        bytes.extend_from_slice(s);
        bytes.push(0);
        *p = p.wrapping_sub(bytes.len() as u64);
        writes.push((*p, bytes));
        *p
    };

    // `copy_strings` fills from the top down, last string first, so the
    // strings end up in their natural order in memory.
    let execfn = push_str(&mut p, spec.execfn);
    let mut env_ptrs: Vec<u64> = spec.envp.iter().rev().map(|s| push_str(&mut p, s)).collect();
    env_ptrs.reverse();
    let mut arg_ptrs: Vec<u64> = spec.argv.iter().rev().map(|s| push_str(&mut p, s)).collect();
    arg_ptrs.reverse();

    // `arch_align_stack`, minus its random offset.
    p &= !15;
    let platform = if spec.platform.is_empty() { None } else { Some(push_str(&mut p, spec.platform)) };
    p = p.wrapping_sub(spec.random.len() as u64);
    let random = p;
    writes.push((random, spec.random.to_vec()));

    // The order of `create_elf_tables`, where `ARCH_DLINFO` comes first.
    let mut auxv: Vec<(u64, u64)> = vec![
        (AT_MINSIGSTKSZ, spec.minsigstksz),
        (AT_HWCAP, spec.hwcap),
        (AT_PAGESZ, spec.pagesz),
        (AT_CLKTCK, spec.clktck),
        (AT_PHDR, image.phdr_addr),
        (AT_PHENT, image.phent),
        (AT_PHNUM, image.phnum),
        (AT_BASE, spec.base),
        (AT_FLAGS, 0),
        (AT_ENTRY, image.entry),
        (AT_UID, spec.uid),
        (AT_EUID, spec.euid),
        (AT_GID, spec.gid),
        (AT_EGID, spec.egid),
        (AT_SECURE, spec.secure),
        (AT_RANDOM, random),
        (AT_HWCAP2, spec.hwcap2),
        (AT_EXECFN, execfn),
    ];
    if let Some(platform) = platform {
        auxv.push((AT_PLATFORM, platform));
    }
    auxv.push((AT_NULL, 0));

    let mut table: Vec<u64> = Vec::new();
    table.push(arg_ptrs.len() as u64);
    table.extend_from_slice(&arg_ptrs);
    table.push(0);
    table.extend_from_slice(&env_ptrs);
    table.push(0);
    for (key, value) in &auxv {
        table.push(*key);
        table.push(*value);
    }
    // `STACK_ROUND`: the whole table sits below `p`, and the start is
    // rounded down, which leaves any padding between the table and `p`.
    let table_bytes = (table.len() as u64).wrapping_mul(WORD);
    let sp = p.wrapping_sub(table_bytes) & !15;
    writes.push((sp, table.iter().flat_map(|w| w.to_le_bytes()).collect()));

    let size = stack_top.wrapping_sub(sp);
    let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(0)];
    for (addr, data) in writes {
        let start = usize::try_from(addr.wrapping_sub(sp)).unwrap_or(usize::MAX);
        let dst = start.checked_add(data.len()).and_then(|end| bytes.get_mut(start..end));
        if let Some(dst) = dst {
            dst.copy_from_slice(&data);
        }
    }
    InitialStack { bytes, sp }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ElfKind, Image};

    fn image() -> Image {
        Image {
            segments: Vec::new(),
            entry: 0x401020,
            phdr_addr: 0x400040,
            phent: 56,
            phnum: 9,
            load_bias: 0,
            lowest: 0x400000,
            highest: 0x4c0000,
            brk_start: 0x4c0000,
            interp: None,
            kind: ElfKind::Static,
            stack_exec: false,
            tls: None,
        }
    }

    fn spec<'a>(argv: &'a [Vec<u8>], envp: &'a [Vec<u8>]) -> StackSpec<'a> {
        StackSpec {
            argv,
            envp,
            execfn: b"/bin/prog",
            platform: b"x86_64",
            random: *b"0123456789abcdef",
            hwcap: 0x178bfbff,
            hwcap2: 2,
            pagesz: 4096,
            clktck: 100,
            uid: 1000,
            euid: 1001,
            gid: 1002,
            egid: 1003,
            secure: 0,
            base: 0,
            minsigstksz: 3632,
        }
    }

    /// Reads a stack back the way libc start-up code does.
    struct Parsed {
        argv: Vec<Vec<u8>>,
        envp: Vec<Vec<u8>>,
        auxv: Vec<(u64, u64)>,
    }

    fn word(stack: &InitialStack, addr: u64) -> u64 {
        let off = (addr - stack.sp) as usize;
        u64::from_le_bytes(stack.bytes[off..off + 8].try_into().unwrap())
    }

    fn c_string(stack: &InitialStack, addr: u64) -> Vec<u8> {
        let off = (addr - stack.sp) as usize;
        let len = stack.bytes[off..].iter().position(|&b| b == 0).unwrap();
        stack.bytes[off..off + len].to_vec()
    }

    fn parse(stack: &InitialStack) -> Parsed {
        let mut at = stack.sp;
        let mut next = || {
            let w = word(stack, at);
            at += 8;
            w
        };
        let argc = next();
        let argv: Vec<u64> = (0..argc).map(|_| next()).collect();
        assert_eq!(next(), 0, "argv is not NULL-terminated");
        let mut envp = Vec::new();
        loop {
            match next() {
                0 => break,
                ptr => envp.push(ptr),
            }
        }
        let mut auxv = Vec::new();
        loop {
            let (key, value) = (next(), next());
            auxv.push((key, value));
            if key == AT_NULL {
                break;
            }
        }
        Parsed {
            argv: argv.iter().map(|&p| c_string(stack, p)).collect(),
            envp: envp.iter().map(|&p| c_string(stack, p)).collect(),
            auxv,
        }
    }

    fn aux(parsed: &Parsed, key: u64) -> u64 {
        let found: Vec<u64> = parsed.auxv.iter().filter(|(k, _)| *k == key).map(|(_, v)| *v).collect();
        assert_eq!(found.len(), 1, "auxv key {key} appears {} times", found.len());
        found[0]
    }

    #[test]
    fn round_trip() {
        let argv = vec![b"prog".to_vec(), b"--flag".to_vec(), Vec::new(), b"last".to_vec()];
        let envp = vec![b"PATH=/bin".to_vec(), b"HOME=/root".to_vec()];
        let top = 0x7fff_ffff_e000;
        let image = image();
        let stack = build_initial_stack(top, &spec(&argv, &envp), &image);

        assert_eq!(stack.sp % 16, 0);
        assert_eq!(stack.bytes.len() as u64, top - stack.sp);
        let parsed = parse(&stack);
        assert_eq!(parsed.argv, argv);
        assert_eq!(parsed.envp, envp);

        assert_eq!(aux(&parsed, AT_PHDR), 0x400040);
        assert_eq!(aux(&parsed, AT_PHENT), 56);
        assert_eq!(aux(&parsed, AT_PHNUM), 9);
        assert_eq!(aux(&parsed, AT_ENTRY), 0x401020);
        assert_eq!(aux(&parsed, AT_PAGESZ), 4096);
        assert_eq!(aux(&parsed, AT_CLKTCK), 100);
        assert_eq!(aux(&parsed, AT_HWCAP), 0x178bfbff);
        assert_eq!(aux(&parsed, AT_HWCAP2), 2);
        assert_eq!(aux(&parsed, AT_UID), 1000);
        assert_eq!(aux(&parsed, AT_EUID), 1001);
        assert_eq!(aux(&parsed, AT_GID), 1002);
        assert_eq!(aux(&parsed, AT_EGID), 1003);
        assert_eq!(aux(&parsed, AT_SECURE), 0);
        assert_eq!(aux(&parsed, AT_BASE), 0);
        assert_eq!(aux(&parsed, AT_FLAGS), 0);
        assert_eq!(aux(&parsed, AT_MINSIGSTKSZ), 3632);
        assert_eq!(c_string(&stack, aux(&parsed, AT_EXECFN)), b"/bin/prog");
        assert_eq!(c_string(&stack, aux(&parsed, AT_PLATFORM)), b"x86_64");
        let random = aux(&parsed, AT_RANDOM);
        let off = (random - stack.sp) as usize;
        assert_eq!(&stack.bytes[off..off + 16], b"0123456789abcdef");
        assert_eq!(parsed.auxv.last(), Some(&(AT_NULL, 0)));
        assert!(parsed.auxv.iter().all(|(k, _)| *k != AT_SYSINFO_EHDR));
    }

    #[test]
    fn layout_matches_linux() {
        let argv = vec![b"a".to_vec(), b"bc".to_vec()];
        let envp = vec![b"X=1".to_vec()];
        let top = 0x7fff_ffff_f000;
        let stack = build_initial_stack(top, &spec(&argv, &envp), &image());
        let parsed = parse(&stack);

        // The top word is zero and the execfn string sits right below it.
        assert_eq!(word(&stack, top - 8), 0);
        let execfn = aux(&parsed, AT_EXECFN);
        assert_eq!(execfn, top - 8 - b"/bin/prog\0".len() as u64);
        // Then env strings, then arg strings, contiguous and in order.
        let env0 = word(&stack, stack.sp + 8 * 4);
        assert_eq!(env0, execfn - 4);
        let arg1 = word(&stack, stack.sp + 8 * 2);
        let arg0 = word(&stack, stack.sp + 8);
        assert_eq!(arg1, env0 - 3);
        assert_eq!(arg0, arg1 - 2);
        // Platform string below the 16-aligned end of the strings, then the
        // random bytes right below it.
        let platform = aux(&parsed, AT_PLATFORM);
        assert_eq!(platform, (arg0 & !15) - 7);
        assert_eq!(aux(&parsed, AT_RANDOM), platform - 16);
        // ARCH_DLINFO comes before the generic entries.
        assert_eq!(parsed.auxv[0].0, AT_MINSIGSTKSZ);
        assert_eq!(parsed.auxv[1].0, AT_HWCAP);
    }

    #[test]
    fn empty_everything_and_tiny_top_do_not_panic() {
        let mut s = spec(&[], &[]);
        s.platform = b"";
        s.execfn = b"";
        let stack = build_initial_stack(0x1000, &s, &image());
        assert_eq!(stack.sp % 16, 0);
        let parsed = parse(&stack);
        assert!(parsed.argv.is_empty() && parsed.envp.is_empty());
        assert!(parsed.auxv.iter().all(|(k, _)| *k != AT_PLATFORM));

        // Far too little room: wraps around, but never panics.
        let argv = vec![vec![b'x'; 100]];
        let wrapped = build_initial_stack(16, &spec(&argv, &[]), &image());
        assert_eq!(wrapped.bytes.len() as u64, 16u64.wrapping_sub(wrapped.sp));
    }
}
