//! The process: start-up (the kernel's part of `execve`: the program, and for a dynamic
//! executable its interpreter, the initial stack and registers), identities, limits and the
//! machine description (`uname`, `sysinfo`, CPU affinity). Signals are in [`crate::signal`].
//!
//! Identities are fixed: pid and main tid 1000, uid/gid 1000, parent 1. The machine is
//! `ferrite`, Linux 6.1.0 on x86_64. Limits are those of a default Linux login (8 MiB stack, 1024
//! files unless `--max-open-files`).

use std::collections::BTreeMap;

use emu::{Backing, HostBlock, Machine, Perm, Reg, Region, PAGE};
use loader::{build_initial_stack, load_elf, Image, LoadError, StackSpec};

use crate::mem::{STACK_LIMIT, STACK_TOP};
use crate::{err, Errno, Kernel, SysResult};

/// The guest's pid.
pub const PID: u32 = 1000;
/// The guest's uid and gid.
pub const UID: u64 = 1000;
/// The resources of `getrlimit` (`RLIM_NLIMITS`).
pub(crate) const RLIMITS: usize = 16;

/// `RLIMIT_SIGPENDING`: signals queued with their siginfo, all the guest's processes together.
pub(crate) const SIGPENDING_LIMIT: u64 = 63_704;
/// Where position-independent executables are placed (Linux's ELF_ET_DYN_BASE without ASLR).
pub const PIE_BASE: u64 = 0x5555_5555_4000;

/// How the guest process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessExit {
    /// It exited with this status.
    Code(i32),
    /// This signal killed it.
    Signal(i32),
}

impl ProcessExit {
    /// The status a shell reports: the code, or 128 + the signal number.
    pub fn shell_status(self) -> i32 {
        match self {
            ProcessExit::Code(c) => c,
            ProcessExit::Signal(s) => 128 + s,
        }
    }
}

#[derive(Clone, Debug)]
/// Process-wide state: working directory, umask, signal actions, what was read.
pub struct ProcState {
    /// The working directory as the guest sees it (`None`: ferrite's own).
    pub cwd: Option<String>,
    /// The umask.
    pub umask: u32,
    /// Per signal: handler address (0 = SIG_DFL, 1 = SIG_IGN), flags, restorer, mask.
    pub sigactions: [[u64; 4]; 65],
    /// The main thread's FS base.
    pub fs_base: u64,
    /// The program's path once the process has exec'ed one (`None`: the first program,
    /// `KernelConfig::exe`).
    pub exe: Option<String>,
    /// BLAKE3 of what the guest read from standard input.
    pub stdin_hash: blake3::Hasher,
    /// Whether the guest read standard input.
    pub stdin_read: bool,
    /// PM files by host path, numbered from 1 in the order the guest first mapped them.
    pub pm_files: BTreeMap<String, u32>,
    /// The last PM file id given out (ids are never reused in a run).
    pub next_pm_file: u32,
    /// Files the guest created (guest paths): their contents are outputs, not inputs.
    pub created: std::collections::BTreeSet<String>,
    /// The running process's `RLIMIT_SIGPENDING` (soft, hard): another process's is in its
    /// saved state.
    pub sigpending_limit: (u64, u64),
    /// The limits the running process set itself (soft, hard), by resource, where it set one
    /// other than `RLIMIT_NOFILE` (the descriptor table's) and `RLIMIT_SIGPENDING` (above);
    /// kept across fork and exec, as Linux keeps them.
    pub rlimits: [Option<(u64, u64)>; RLIMITS],
    /// The last synchronous fault offered to a handler and how many times in a row it came
    /// back the same, with no system call but `rt_sigreturn` in between ([`Kernel::fault_repeats`]).
    pub fault_loop: ([u64; 21], u32),
    /// The instruction count at the last scheduling decision: what has retired since is the
    /// running process's CPU time ([`crate::Kernel::charge_cpu`](crate::procs)).
    pub cpu_mark: u64,
}

impl Default for ProcState {
    fn default() -> Self {
        ProcState {
            cwd: None,
            umask: 0o022,
            sigactions: [[0; 4]; 65],
            fs_base: 0,
            exe: None,
            stdin_hash: blake3::Hasher::new(),
            stdin_read: false,
            pm_files: BTreeMap::new(),
            next_pm_file: 0,
            created: std::collections::BTreeSet::new(),
            sigpending_limit: (SIGPENDING_LIMIT, SIGPENDING_LIMIT),
            rlimits: [None; RLIMITS],
            fault_loop: ([0; 21], 0),
            cpu_mark: 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a program could not be started.
pub enum ExecError {
    #[error("{0}")]
    /// The program is not a loadable ELF.
    Load(#[from] LoadError),
    #[error("its interpreter {0} cannot be loaded: {1}")]
    /// Its interpreter cannot be read or loaded: the path, and why.
    Interp(String, String),
    #[error("cannot set up the guest's memory: {0}")]
    /// Guest memory could not be set up.
    Memory(String),
}

/// What the caller needs to know about the started program.
pub struct Started {
    /// The program as loaded.
    pub image: Image,
    /// The interpreter of a dynamic executable: its path, bytes and load bias.
    pub interp: Option<(String, Vec<u8>, u64)>,
}

/// Loads `program` into a fresh machine and sets up the initial stack and registers, as Linux's
/// `execve` does: a static executable directly, a dynamic one through its interpreter.
pub fn exec(
    m: &mut Machine,
    k: &mut Kernel,
    program: &[u8],
    argv: &[Vec<u8>],
    envp: &[Vec<u8>],
) -> Result<Started, ExecError> {
    let mem_err = |what: &str, e: emu::MemError| ExecError::Memory(format!("{what}: {e:?}"));
    let image = load_elf(program, PIE_BASE)?;
    // `/proc/PID/cmdline` reads the argument strings from memory: where the initial stack puts
    // them (`build_initial_stack`: below the 8 zero bytes at the top, the `AT_EXECFN` string,
    // then the environment strings, then the arguments), Linux's `arg_start`..`env_end`.
    let pid = k.pid;
    let strings = |v: &[Vec<u8>]| v.iter().map(|s| s.len() as u64 + 1).sum::<u64>();
    let env_end = STACK_TOP - 8 - (k.exe().len() as u64 + 1);
    let env_start = env_end - strings(envp);
    let arg_start = env_start - strings(argv);
    if let Some(p) = k.procs.get_mut(&pid) {
        p.args = [arg_start, env_start, env_start, env_end];
    }
    let exe = k.exe().to_string();
    map_image(m, &image, &exe)?;
    // A dynamic executable starts in its interpreter (the host's ld.so, read-only), which maps
    // the libraries through the system-call layer like any other guest code.
    let interp = match &image.interp {
        Some(path) => {
            let guest = crate::vfs::normalize("/", path);
            let bytes = loader::input::read_regular(std::path::Path::new(&guest), loader::input::PROGRAM_CAP)
                .map_err(|e| ExecError::Interp(guest.clone(), e.to_string()))?;
            k.inputs.insert(guest.clone(), blake3::hash(&bytes).to_hex().to_string());
            let probe = load_elf(&bytes, 0).map_err(|e| ExecError::Interp(guest.clone(), e.to_string()))?;
            let span = probe.highest - probe.lowest;
            let base = m
                .mem
                .find_free(span, 0, crate::mem::MMAP_BOTTOM, crate::mem::MMAP_TOP)
                .ok_or_else(|| ExecError::Memory("no room for the interpreter".into()))?;
            let im = load_elf(&bytes, base).map_err(|e| ExecError::Interp(guest.clone(), e.to_string()))?;
            map_image(m, &im, &guest)?;
            Some((guest, bytes, im))
        }
        None => None,
    };
    k.mm.brk_start = image.brk_start;
    k.mm.brk = image.brk_start;

    let stack = HostBlock::anon(STACK_LIMIT as usize).map_err(|e| ExecError::Memory(e.to_string()))?;
    let stack_perm = if image.stack_exec { Perm::RWX } else { Perm::RW };
    let r = Region {
        start: STACK_TOP - STACK_LIMIT,
        end: STACK_TOP,
        perm: stack_perm,
        block: stack,
        block_off: 0,
        backing: Backing::Anon { label: Some("[stack]") },
        on_fork: Default::default(),
    };
    m.map(r).map_err(|e| mem_err("stack", e))?;
    // The environment is the guest's own: dynamic programs bind their PLT entries lazily, as
    // natively, unless the guest's environment sets LD_BIND_NOW (the machine recognises a
    // synchronisation function reached through a PLT stub either way).
    let mut random = [0u8; 16];
    k.rng.fill(&mut random);
    let cpuid = emu::cpuid::CpuidTable::default();
    let spec = StackSpec {
        argv,
        envp,
        execfn: exe.as_bytes(),
        platform: b"x86_64",
        random,
        hwcap: cpuid.hwcap(),
        hwcap2: cpuid.hwcap2(),
        pagesz: PAGE,
        clktck: 100,
        uid: UID,
        euid: UID,
        gid: UID,
        egid: UID,
        secure: 0,
        base: interp.as_ref().map(|i| i.2.load_bias).unwrap_or(0),
        minsigstksz: 2048,
    };
    let st = build_initial_stack(STACK_TOP, &spec, &image);
    if STACK_TOP - st.sp > STACK_LIMIT / 4 {
        return Err(ExecError::Memory("arguments and environment exceed a quarter of the stack (E2BIG)".into()));
    }
    m.write(st.sp, &st.bytes, true).map_err(|e| mem_err("initial stack", e))?;
    m.set_reg(Reg::RSP, st.sp);
    m.set_reg(Reg::RIP, interp.as_ref().map(|i| i.2.entry).unwrap_or(image.entry));
    // The ABI's start state: RDX holds a function for atexit (none), the rest is zero.
    m.set_reg(Reg::RDX, 0);
    // CPUID hides XSAVE and PKU (emu::cpuid), as on a CPU whose kernel enabled neither: clear
    // CR4.OSXSAVE to match, so that XGETBV raises #UD (SIGILL) instead of answering with an XCR0
    // that lists AVX-512 and PKRU state (CR4.PKE is clear already: RDPKRU/WRPKRU raise #UD).
    const CR4_OSXSAVE: u64 = 1 << 18;
    m.set_reg(Reg::CR4, m.reg(Reg::CR4) & !CR4_OSXSAVE);
    Ok(Started { image, interp: interp.map(|(path, bytes, im)| (path, bytes, im.load_bias)) })
}

/// Maps an image's segments: one host block for its whole span, pages taking the union of the
/// protections of the segments that cover them (segments may share a page).
fn map_image(m: &mut Machine, image: &Image, path: &str) -> Result<(), ExecError> {
    let mem_err = |what: &str, e: emu::MemError| ExecError::Memory(format!("{what}: {e:?}"));
    let span = image.highest - image.lowest;
    let block = HostBlock::anon(span as usize).map_err(|e| ExecError::Memory(e.to_string()))?;
    let mut pages: BTreeMap<u64, Perm> = BTreeMap::new();
    for s in &image.segments {
        let p = Perm((s.prot.read as u8) | (s.prot.write as u8) << 1 | (s.prot.exec as u8) << 2);
        let mut a = s.vaddr & !(PAGE - 1);
        while a < s.end() {
            let e = pages.entry(a).or_insert(Perm::NONE);
            *e = Perm(e.0 | p.0);
            a += PAGE;
        }
    }
    let mut runs: Vec<(u64, u64, Perm)> = Vec::new();
    for (&a, &p) in &pages {
        match runs.last_mut() {
            Some((_, end, q)) if *end == a && *q == p => *end += PAGE,
            _ => runs.push((a, a + PAGE, p)),
        }
    }
    for (start, end, perm) in runs {
        let r = Region {
            start,
            end,
            perm,
            block: block.clone(),
            block_off: (start - image.lowest) as usize,
            backing: Backing::File { path: path.to_string(), offset: start - image.lowest },
            on_fork: Default::default(),
        };
        m.map(r).map_err(|e| mem_err("program segments", e))?;
    }
    for s in &image.segments {
        m.write(s.vaddr, &s.data, true).map_err(|e| mem_err("program contents", e))?;
    }
    Ok(())
}

/// `/proc/self/maps`, from ferrite's own mapping table.
pub fn proc_maps(m: &Machine) -> String {
    let mut out = String::new();
    for r in m.mem.regions() {
        let p = r.perm;
        let perms = format!(
            "{}{}{}{}",
            if p.read() || p.0 != 0 { 'r' } else { '-' },
            if p.write() { 'w' } else { '-' },
            if p.exec() { 'x' } else { '-' },
            if matches!(r.backing, Backing::Pm { .. } | Backing::SharedFile { .. }) { 's' } else { 'p' },
        );
        let (off, dev, ino, name) = match &r.backing {
            Backing::Anon { label } => (0, "00:00", 0, label.unwrap_or("").to_string()),
            Backing::File { path, offset } | Backing::SharedFile { path, offset, .. } => {
                (*offset, "08:01", 1, path.clone())
            }
            Backing::Pm { path, offset, file_id } => (*offset, "103:00", u64::from(*file_id) + 1, path.clone()),
        };
        let line = format!("{:x}-{:x} {perms} {off:08x} {dev} {ino}", r.start, r.end);
        if name.is_empty() {
            out.push_str(&line);
            out.push('\n');
        } else {
            out.push_str(&format!("{line:<73}{name}\n"));
        }
    }
    out
}

/// What `/proc/PID/stat` and `/proc/PID/status` show of a process ([`Kernel::proc_view`]).
#[derive(Clone, Debug)]
pub struct ProcView {
    /// Who it is.
    pub ids: ProcIds,
    /// Its name (its main thread's `comm`).
    pub name: String,
    /// `R` (a thread of it runs or can run), `S` (every thread waits), `T` (stopped), `Z`
    /// (ended, not yet waited for).
    pub state: char,
    /// Its CPU time (ns, the instructions its threads retired).
    pub cpu_ns: u64,
    /// Its mapped memory in bytes (0 for a zombie).
    pub bytes: u64,
    /// When it was made, on the boot clock (ns).
    pub start_ns: u64,
}

/// The text of `/proc/PID/status` (the fields procps reads, in the kernel's order; a zombie
/// has no memory lines, as Linux's).
pub fn proc_status(v: &ProcView) -> String {
    let ProcIds { pid, ppid, threads, .. } = v.ids;
    let state = match v.state {
        'R' => "R (running)",
        'S' => "S (sleeping)",
        'T' => "T (stopped)",
        _ => "Z (zombie)",
    };
    let kb = v.bytes / 1024;
    let mem = if v.state == 'Z' { String::new() } else { format!("VmSize:\t{kb} kB\nVmRSS:\t{kb} kB\n") };
    format!(
        "Name:\t{}\nUmask:\t0022\nState:\t{state}\nTgid:\t{pid}\nNgid:\t0\nPid:\t{pid}\nPPid:\t{ppid}\n\
         TracerPid:\t0\nUid:\t{UID}\t{UID}\t{UID}\t{UID}\nGid:\t{UID}\t{UID}\t{UID}\t{UID}\n\
         {mem}Threads:\t{threads}\nCpus_allowed_list:\t0\n",
        v.name
    )
}

/// Who the calling process is, for its `/proc/self` files.
#[derive(Clone, Copy, Debug)]
pub struct ProcIds {
    /// Its pid, parent, process group and session.
    pub pid: u32,
    /// Its parent's pid.
    pub ppid: u32,
    /// Its process group.
    pub pgid: u32,
    /// Its session.
    pub sid: u32,
    /// Its live threads.
    pub threads: usize,
}

/// `/proc/PID/stat`: the 52 fields of `proc_pid_stat(5)` in the kernel's format. Its CPU time
/// is the process's own (the instructions its threads retired, one per nanosecond, counted as
/// user time in ticks of 1/100 s), its start time in ticks since boot; sizes are the mapped
/// memory, resident as a whole; fields ferrite has no model of (faults, priorities, addresses
/// of the image) are 0, the resource limit unlimited, the exit signal SIGCHLD.
pub fn proc_stat(v: &ProcView) -> String {
    let ticks = v.cpu_ns / 10_000_000;
    let start = v.start_ns / 10_000_000;
    let ProcIds { pid, ppid, pgid, sid, threads } = v.ids;
    let (bytes, state, name) = (v.bytes, v.state, &v.name);
    let mut f = format!(
        "{pid} ({name}) {state} {ppid} {pgid} {sid} 0 -1 4194304 0 0 0 0 {ticks} 0 0 0 20 0 {threads} 0 {start} {bytes} {} ",
        bytes / 4096
    );
    f += "18446744073709551615";
    // startcode .. exit_code: 0 but exit_signal (SIGCHLD).
    for i in 26..=52 {
        f += if i == 38 { " 17" } else { " 0" };
    }
    f.push('\n');
    f
}

/// `/proc/self/mounts` (and `/etc/mtab`, `/proc/mounts`): the guest's own mounts, never the
/// host's: a root file system on the device `stat` shows for host files (8:1), `/proc`, `/sys`,
/// and the PM mount as a DAX file system on `/dev/pmem0` (259:0, as `stat` shows PM files).
pub fn proc_mounts(pm_mount: &str) -> String {
    format!(
        "/dev/sda1 / ext4 rw,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n\
         sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n/dev/pmem0 {pm_mount} ext4 rw,relatime,dax=always 0 0\n"
    )
}

/// `setuid`, `setgid`, `setreuid`, `setregid`, `setresuid`, `setresgid` of an unprivileged
/// process whose real, effective and saved ids are all [`UID`]: each id given must be -1 (keep)
/// or one it already has, so the call succeeds and changes nothing, or fails with EPERM, as
/// Linux answers an unprivileged caller. (`posix_spawn` with `POSIX_SPAWN_RESETIDS`, which `make`
/// uses, sets its ids to the real ones.)
/// A `struct rusage` (two timevals, then 14 longs) with user time `user_ns` and maximum resident
/// set `maxrss_kib`, every other field 0.
pub(crate) fn rusage_bytes(user_ns: u64, maxrss_kib: u64) -> [u8; 144] {
    let mut b = [0u8; 144];
    b[0..8].copy_from_slice(&(user_ns / 1_000_000_000).to_le_bytes());
    b[8..16].copy_from_slice(&(user_ns % 1_000_000_000 / 1000).to_le_bytes());
    b[32..40].copy_from_slice(&maxrss_kib.to_le_bytes());
    b
}

pub(crate) fn setid(ids: &[u64]) -> SysResult {
    if ids.iter().all(|&id| id as u32 == u32::MAX || u64::from(id as u32) == UID) {
        Ok(0)
    } else {
        err(libc::EPERM)
    }
}

impl Kernel {
    pub(crate) fn getresid(&mut self, m: &mut Machine, a: [u64; 6]) -> SysResult {
        for p in &a[..3] {
            m.write(*p, &(UID as u32).to_le_bytes(), false)?;
        }
        Ok(0)
    }

    pub(crate) fn uname(&mut self, m: &mut Machine, buf: u64) -> SysResult {
        let fields: [&str; 6] = ["Linux", "ferrite", "6.1.0", "#1 SMP PREEMPT_DYNAMIC ferrite", "x86_64", "(none)"];
        let mut b = vec![0u8; 65 * 6];
        for (i, f) in fields.iter().enumerate() {
            b[i * 65..i * 65 + f.len()].copy_from_slice(f.as_bytes());
        }
        m.write(buf, &b, false)?;
        Ok(0)
    }

    fn rlimit(&self, res: u64) -> Option<(u64, u64)> {
        const INF: u64 = u64::MAX;
        if let Some(Some(set)) = self.proc.rlimits.get(res as usize) {
            return Some(*set);
        }
        Some(match res {
            0 => (INF, INF),                                    // CPU
            1 => (INF, INF),                                    // FSIZE
            2 => (INF, INF),                                    // DATA
            3 => (STACK_LIMIT, INF),                            // STACK
            4 => (0, INF),                                      // CORE
            5 => (INF, INF),                                    // RSS
            6 => (63_704, 63_704),                              // NPROC
            7 => (self.fds.limit as u64, self.fds.hard as u64), // NOFILE
            8 => (8 << 20, 8 << 20),                            // MEMLOCK
            9 => (self.cfg.max_memory, INF),                    // AS (hard: Linux's default)
            10 => (INF, INF),                                   // LOCKS
            11 => self.proc.sigpending_limit,                   // SIGPENDING
            12 => (819_200, 819_200),                           // MSGQUEUE
            13 => (0, 0),                                       // NICE
            14 => (0, 0),                                       // RTPRIO
            15 => (INF, INF),                                   // RTTIME
            _ => return None,
        })
    }

    pub(crate) fn prlimit(&mut self, m: &mut Machine, pid: u64, res: u64, new: u64, old: u64) -> SysResult {
        if pid != 0 && pid != u64::from(PID) {
            return err(libc::ESRCH);
        }
        let (cur, max) = self.rlimit(res).ok_or(Errno(libc::EINVAL))?;
        if new != 0 {
            // The file limit is the descriptor table's, RLIMIT_SIGPENDING `sigqueue`'s, and
            // RLIMIT_AS lowers `--max-memory` for the process ([`Kernel::memory_limit`]); the
            // others are kept and read back, as Linux's `do_prlimit` keeps them, but change
            // nothing else (the run's own limits, `--max-instructions` and `--max-threads`,
            // stand for CPU time and processes).
            if res != 7 && res != 11 {
                let (c, h) = (m.read_u64(new)?, m.read_u64(new + 8)?);
                if c > h {
                    return err(libc::EINVAL);
                }
                if h > max {
                    return err(libc::EPERM);
                }
                self.proc.rlimits[res as usize] = Some((c, h));
            }
            if res == 11 {
                let (c, h) = (m.read_u64(new)?, m.read_u64(new + 8)?);
                if c > h {
                    return err(libc::EINVAL);
                }
                // Raising the hard limit needs CAP_SYS_RESOURCE, which the guest has not.
                if h > self.proc.sigpending_limit.1 {
                    return err(libc::EPERM);
                }
                self.proc.sigpending_limit = (c, h);
            }
            if res == 7 {
                // As Linux's do_prlimit: soft above hard EINVAL; a hard limit above the one
                // in force (or above `nr_open`, here the same) needs CAP_SYS_RESOURCE: EPERM.
                let (c, h) = (m.read_u64(new)?, m.read_u64(new + 8)?);
                if c > h {
                    return err(libc::EINVAL);
                }
                if h > self.fds.hard as u64 {
                    return err(libc::EPERM);
                }
                self.fds.limit = c as i32;
                self.fds.hard = h as i32;
            }
        }
        if old != 0 {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&cur.to_le_bytes());
            b[8..].copy_from_slice(&max.to_le_bytes());
            m.write(old, &b, false)?;
        }
        Ok(0)
    }

    /// The most memory the running process may map: `--max-memory`, or less if it lowered
    /// `RLIMIT_AS`.
    pub(crate) fn memory_limit(&self) -> u64 {
        self.proc.rlimits[9].map_or(self.cfg.max_memory, |(soft, _)| soft.min(self.cfg.max_memory))
    }

    pub(crate) fn sysinfo(&mut self, m: &mut Machine, buf: u64) -> SysResult {
        let mut b = [0u8; 112];
        let uptime = (m.icount() / 1_000_000_000) as i64 + 1;
        b[0..8].copy_from_slice(&uptime.to_le_bytes());
        let total: u64 = 16 << 30;
        b[32..40].copy_from_slice(&total.to_le_bytes()); // totalram
        b[40..48].copy_from_slice(&(total / 2).to_le_bytes()); // freeram
        b[80..82].copy_from_slice(&1u16.to_le_bytes()); // procs
        b[104..108].copy_from_slice(&1u32.to_le_bytes()); // mem_unit
        m.write(buf, &b, false)?;
        Ok(0)
    }

    /// `getrusage`: for `RUSAGE_SELF`, the user time is the process's own CPU time (the
    /// instructions its threads retired, one per nanosecond, as `CLOCK_PROCESS_CPUTIME_ID` and
    /// `/proc/self/stat` count it), for `RUSAGE_THREAD` the calling thread's; the system time 0 (the kernel's work takes
    /// no virtual time) and the maximum resident set the mapped memory in KiB;
    /// `RUSAGE_CHILDREN` the user time of the children the process has reaped (and of theirs):
    /// the instructions retired while their threads ran ([`Kernel::charge_cpu`](crate::procs)),
    /// as `wait4`'s `rusage` of each. The other fields (faults, context switches, the children's
    /// maximum resident set, ...) are 0. EINVAL for another `who`, EFAULT for an unwritable
    /// buffer.
    pub(crate) fn getrusage(&mut self, m: &mut Machine, who: i32, buf: u64) -> SysResult {
        const RUSAGE_SELF: i32 = 0;
        const RUSAGE_CHILDREN: i32 = -1;
        const RUSAGE_THREAD: i32 = 1;
        let b = match who {
            RUSAGE_SELF => rusage_bytes(self.process_cpu_ns(m, self.pid).unwrap_or(0), m.mem.mapped_bytes() / 1024),
            RUSAGE_THREAD => {
                rusage_bytes(self.thread_cpu_ns(m, self.current).unwrap_or(0), m.mem.mapped_bytes() / 1024)
            }
            RUSAGE_CHILDREN => rusage_bytes(self.children_cpu_ns(), 0),
            _ => return err(libc::EINVAL),
        };
        m.write(buf, &b, false)?;
        Ok(0)
    }

    /// `times`: the process's own CPU time as user time in clock ticks (`sysconf(_SC_CLK_TCK)`,
    /// 100 a second, as the auxiliary vector's `AT_CLKTCK` says), system times 0, the
    /// children's user time that of the children reaped (as `getrusage(RUSAGE_CHILDREN)`); the result is the boot clock in ticks, the kernel's
    /// "arbitrary point in the past". A null buffer only gets the result; EFAULT for an
    /// unwritable one.
    pub(crate) fn times(&mut self, m: &mut Machine, buf: u64) -> SysResult {
        if buf != 0 {
            let mut b = [0u8; 32];
            let own = self.process_cpu_ns(m, self.pid).unwrap_or(0);
            b[0..8].copy_from_slice(&(own / 10_000_000).to_le_bytes());
            // tms_cutime: the reaped children's CPU time, as getrusage(RUSAGE_CHILDREN).
            b[16..24].copy_from_slice(&(self.children_cpu_ns() / 10_000_000).to_le_bytes());
            m.write(buf, &b, false)?;
        }
        Ok(self.now_ns(m) / 10_000_000)
    }

    /// `capget`: the guest's user is unprivileged, so every thread's capability sets
    /// (effective, permitted, inheritable) are empty. As Linux's `cap_validate_magic`: an
    /// unknown header version is answered with the preferred one (`_LINUX_CAPABILITY_VERSION_3`)
    /// written into the header and EINVAL, or 0 when `data` is null; versions 2 and 3 fill two
    /// 32-bit words a set, version 1 one. A negative pid is EINVAL, one no thread has ESRCH.
    pub(crate) fn capget(&mut self, m: &mut Machine, hdr: u64, data: u64) -> SysResult {
        let words = self.cap_version(m, hdr, data)?;
        let Some(words) = words else { return Ok(0) };
        let pid = m.read_u32(hdr + 4)? as i32;
        if pid < 0 {
            return err(libc::EINVAL);
        }
        if pid != 0 && !self.threads.contains_key(&(pid as u32)) {
            return err(libc::ESRCH);
        }
        m.write(data, &vec![0u8; 12 * words], false)?;
        Ok(0)
    }

    /// `capset`: only the calling thread (pid 0 or its own, else EPERM), and without privileges
    /// it can only keep its sets empty: all-zero sets succeed, any capability is EPERM (a new
    /// permitted set must be within the old, empty one; so must the inheritable set without
    /// `CAP_SETPCAP`). The header is checked as by `capget`.
    pub(crate) fn capset(&mut self, m: &mut Machine, hdr: u64, data: u64) -> SysResult {
        let Some(words) = self.cap_version(m, hdr, data)? else {
            return err(libc::EINVAL);
        };
        let pid = m.read_u32(hdr + 4)?;
        if pid != 0 && pid != self.current {
            return err(libc::EPERM);
        }
        let mut sets = vec![0u8; 12 * words];
        m.read(data, &mut sets)?;
        if sets.iter().any(|&b| b != 0) {
            return err(libc::EPERM);
        }
        Ok(0)
    }

    /// The words per capability set the header's version gives (`None`: a null `data`, for
    /// which Linux answers 0 without looking further). An unknown version gets the preferred one
    /// written back and EINVAL (0 with a null `data`, as `capget` probes the version so).
    fn cap_version(&mut self, m: &mut Machine, hdr: u64, data: u64) -> Result<Option<usize>, crate::Errno> {
        const V1: u32 = 0x1998_0330;
        const V2: u32 = 0x2007_1026;
        const V3: u32 = 0x2008_0522;
        let words = match m.read_u32(hdr)? {
            V1 => 1,
            V2 | V3 => 2,
            _ => {
                m.write(hdr, &V3.to_le_bytes(), false)?;
                return if data == 0 { Ok(None) } else { err(libc::EINVAL) };
            }
        };
        Ok(if data == 0 { None } else { Some(words) })
    }

    pub(crate) fn arch_prctl(&mut self, m: &mut Machine, code: i32, addr: u64) -> SysResult {
        match code {
            0x1002 => {
                // ARCH_SET_FS
                if addr >= 0x8000_0000_0000 {
                    return err(libc::EPERM);
                }
                m.set_reg(Reg::FS_BASE, addr);
                self.proc.fs_base = addr;
                Ok(0)
            }
            0x1003 => {
                m.write_u64(addr, m.reg(Reg::FS_BASE))?;
                Ok(0)
            }
            0x1001 => {
                // ARCH_SET_GS: a canonical user address, as ARCH_SET_FS.
                if addr >= 0x8000_0000_0000 {
                    return err(libc::EPERM);
                }
                m.set_reg(Reg::GS_BASE, addr);
                Ok(0)
            }
            0x1004 => {
                m.write_u64(addr, m.reg(Reg::GS_BASE))?;
                Ok(0)
            }
            // ARCH_GET_CPUID: CPUID runs (1). ARCH_SET_CPUID: left so; making it fault needs
            // the CPU's CPUID faulting, which ferrite's CPU lacks (Linux's ENODEV there; rr
            // and similar tools take that as "not available").
            0x1011 => Ok(1),
            0x1012 if addr != 0 => Ok(0),
            0x1012 => err(libc::ENODEV),
            // ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM (and the guest's): the state components
            // of a CPU without XSAVE, x87 and SSE (`fpu_user_cfg`'s legacy features).
            0x1021 | 0x1022 | 0x1024 => {
                m.write_u64(addr, 0b11)?;
                Ok(0)
            }
            // ARCH_REQ_XCOMP_PERM (AMX's tiles, say): only the legacy components exist.
            0x1023 | 0x1025 if addr < 2 => Ok(0),
            0x1023 | 0x1025 => err(libc::EOPNOTSUPP),
            0x3001 => err(libc::EINVAL), // ARCH_CET_STATUS: no shadow stack
            _ => err(libc::EINVAL),
        }
    }

    pub(crate) fn prctl(&mut self, m: &mut Machine, option: i32, arg2: u64, args: [u64; 3]) -> SysResult {
        match option {
            // PR_SET_NAME: the calling thread's name, at most 15 bytes of the string (Linux's
            // `strncpy_from_user` into `comm`), NUL-padded; EFAULT for an unreadable string.
            libc::PR_SET_NAME => {
                let mut comm = [0u8; 16];
                for (i, c) in comm.iter_mut().take(15).enumerate() {
                    let mut b = [0u8];
                    m.read(arg2 + i as u64, &mut b)?;
                    if b[0] == 0 {
                        break;
                    }
                    *c = b[0];
                }
                let cur = self.current;
                self.thread_mut(cur).comm = Some(comm);
                Ok(0)
            }
            // PR_GET_NAME: the 16 bytes of the calling thread's name.
            libc::PR_GET_NAME => {
                let comm = self.comm(self.current);
                m.write(arg2, &comm, false)?;
                Ok(0)
            }
            // PR_GET_DUMPABLE: 1 for an ordinary process (Linux's SUID_DUMP_USER, set at
            // execve), unless PR_SET_DUMPABLE changed it.
            libc::PR_GET_DUMPABLE => Ok(u64::from(self.procs.get(&self.pid).map_or(1, |p| p.dumpable))),
            // PR_SET_DUMPABLE: SUID_DUMP_DISABLE (0) or SUID_DUMP_USER (1), else EINVAL.
            libc::PR_SET_DUMPABLE => {
                if arg2 > 1 {
                    return err(libc::EINVAL);
                }
                if let Some(p) = self.procs.get_mut(&self.pid) {
                    p.dumpable = arg2 as u8;
                }
                Ok(0)
            }
            // PR_SET_VMA: EINVAL, as from a kernel built without CONFIG_ANON_VMA_NAME (Debian's):
            // the names would show in /proc/PID/maps, which ferrite does not keep; its callers
            // (jemalloc, Go, Chromium) go on without.
            0x53564d41 => err(libc::EINVAL),
            // PR_SET_PDEATHSIG: a valid signal or 0; sent when the parent ends ([`Kernel::exit_process`]).
            libc::PR_SET_PDEATHSIG => {
                if arg2 > 64 {
                    return err(libc::EINVAL);
                }
                self.ctl_mut().pdeathsig = arg2 as i32;
                Ok(0)
            }
            libc::PR_GET_PDEATHSIG => {
                m.write(arg2, &self.ctl().pdeathsig.to_le_bytes(), false)?;
                Ok(0)
            }
            libc::PR_SET_CHILD_SUBREAPER => {
                self.ctl_mut().subreaper = arg2 != 0;
                Ok(0)
            }
            libc::PR_GET_CHILD_SUBREAPER => {
                m.write(arg2, &i32::from(self.ctl().subreaper).to_le_bytes(), false)?;
                Ok(0)
            }
            // PR_SET_NO_NEW_PRIVS: only 1 (it cannot be unset); the other arguments must be 0.
            libc::PR_SET_NO_NEW_PRIVS => {
                if arg2 != 1 || args[..3].iter().any(|&a| a != 0) {
                    return err(libc::EINVAL);
                }
                self.ctl_mut().no_new_privs = true;
                Ok(0)
            }
            libc::PR_GET_NO_NEW_PRIVS => {
                if arg2 != 0 || args[..3].iter().any(|&a| a != 0) {
                    return err(libc::EINVAL);
                }
                Ok(u64::from(self.ctl().no_new_privs))
            }
            // PR_SET_TIMERSLACK: 0 restores the default (a process's is its parent's).
            libc::PR_SET_TIMERSLACK => {
                self.ctl_mut().timerslack_ns = if arg2 == 0 { 50_000 } else { arg2 };
                Ok(0)
            }
            libc::PR_GET_TIMERSLACK => Ok(self.ctl().timerslack_ns),
            libc::PR_SET_THP_DISABLE => {
                if args[..3].iter().any(|&a| a != 0) {
                    return err(libc::EINVAL);
                }
                self.ctl_mut().thp_disable = arg2 != 0;
                Ok(0)
            }
            libc::PR_GET_THP_DISABLE => {
                if arg2 != 0 || args[..3].iter().any(|&a| a != 0) {
                    return err(libc::EINVAL);
                }
                Ok(u64::from(self.ctl().thp_disable))
            }
            // PR_GET_SPECULATION_CTRL: the machine is affected by none of the speculation
            // flaws Linux controls (PR_SPEC_NOT_AFFECTED); ENODEV for one it does not know.
            libc::PR_GET_SPECULATION_CTRL => {
                if arg2 <= 2 {
                    Ok(0)
                } else {
                    err(libc::ENODEV)
                }
            }
            libc::PR_SET_KEEPCAPS => {
                if arg2 > 1 {
                    return err(libc::EINVAL);
                }
                self.ctl_mut().keepcaps = arg2 == 1;
                Ok(0)
            }
            libc::PR_GET_KEEPCAPS => Ok(u64::from(self.ctl().keepcaps)),
            // PR_GET_SECCOMP: no filter or strict mode is ever installed (`seccomp` is refused).
            libc::PR_GET_SECCOMP => Ok(0),
            // PR_GET_TIMING: statistical, the only timing Linux has.
            libc::PR_GET_TIMING => Ok(0),
            // PR_GET_TSC: RDTSC is allowed (PR_TSC_ENABLE); PR_SET_TSC keeps it so, and making
            // it fault (PR_TSC_SIGSEGV) is refused with a warning.
            libc::PR_GET_TSC => {
                m.write(arg2, &libc::PR_TSC_ENABLE.to_le_bytes(), false)?;
                Ok(0)
            }
            libc::PR_SET_TSC if arg2 == libc::PR_TSC_ENABLE as u64 => Ok(0),
            libc::PR_SET_TSC if arg2 == libc::PR_TSC_SIGSEGV as u64 => {
                self.note_refused(m, 157, "prctl(PR_SET_TSC, PR_TSC_SIGSEGV): RDTSC cannot be made to fault", "EINVAL");
                err(libc::EINVAL)
            }
            libc::PR_SET_TSC => err(libc::EINVAL),
            // PR_CAPBSET_READ: every capability Linux knows is in the bounding set of an
            // unprivileged process too (`capget` shows none effective).
            libc::PR_CAPBSET_READ => {
                if arg2 > 40 {
                    return err(libc::EINVAL);
                }
                Ok(1)
            }
            libc::PR_GET_SECUREBITS => Ok(0),
            // Options that need a capability the guest's unprivileged user lacks (57 and 58:
            // PR_SET_IO_FLUSHER, PR_GET_IO_FLUSHER).
            libc::PR_SET_MM | libc::PR_CAPBSET_DROP | 57 | 58 => err(libc::EPERM),
            // PR_SET_SECCOMP: seccomp is not modelled (its system call is ENOSYS), said by name.
            libc::PR_SET_SECCOMP => {
                self.note_refused(m, 157, "prctl(PR_SET_SECCOMP): seccomp filters are not modelled", "EINVAL");
                err(libc::EINVAL)
            }
            // Linux has no option of this number.
            o if !(1..=80).contains(&o) => err(libc::EINVAL),
            // The others (speculation control, memory tagging, shadow stacks, ...): refused
            // by name, so that a program that relies on one says why it fails.
            _ => {
                self.note_refused(m, 157, "prctl with an option ferrite does not model", "EINVAL");
                err(libc::EINVAL)
            }
        }
    }

    /// The running process's `prctl` settings.
    fn ctl(&self) -> crate::procs::Ctl {
        self.procs.get(&self.pid).map(|p| p.ctl).unwrap_or_default()
    }

    fn ctl_mut(&mut self) -> &mut crate::procs::Ctl {
        &mut self.procs.get_mut(&self.pid).expect("the running process has a record").ctl
    }

    /// `personality(2)`: 0xffffffff reads the persona; another value sets it. Either returns
    /// the old one.
    pub(crate) fn personality(&mut self, persona: u64) -> SysResult {
        let old = self.ctl().personality;
        let p = persona as u32;
        if p != 0xffff_ffff {
            self.ctl_mut().personality = p;
        }
        Ok(u64::from(old))
    }

    /// Names the first thread after `path`'s file name (cut to 15 bytes), the program's path as
    /// the user gave it, before it starts.
    pub fn name_first_thread(&mut self, path: &str) {
        let base = path.rsplit('/').next().unwrap_or(path).as_bytes();
        let mut comm = [0u8; 16];
        let n = base.len().min(15);
        comm[..n].copy_from_slice(&base[..n]);
        let cur = self.current;
        self.thread_mut(cur).comm = Some(comm);
    }

    /// Thread `tid`'s name: what `PR_SET_NAME` gave it, else its program's file name cut to 15
    /// bytes (Linux's `__set_task_comm` at `execve`), NUL-padded.
    pub(crate) fn comm(&self, tid: u32) -> [u8; 16] {
        if let Some(c) = self.threads.get(&tid).and_then(|t| t.comm) {
            return c;
        }
        let mut comm = [0u8; 16];
        let exe = self.exe_of(self.threads.get(&tid).map_or(self.pid, |t| t.pid));
        let base = exe.rsplit('/').next().unwrap_or(exe).as_bytes();
        let n = base.len().min(15);
        comm[..n].copy_from_slice(&base[..n]);
        comm
    }

    /// The thread `pid` names for the affinity calls (0: the caller), ESRCH for another.
    fn affinity_thread(&self, pid: u64) -> Result<u32, Errno> {
        match pid as u32 {
            0 => Ok(self.current),
            t if pid <= u64::from(u32::MAX) && self.threads.contains_key(&t) => Ok(t),
            _ => err(libc::ESRCH),
        }
    }

    /// The CPUs `tid` may run on, a bit each over `--cpus`.
    fn affinity_of(&self, tid: u32) -> Vec<u64> {
        let cpus = self.cfg.cpus.max(1) as usize;
        match self.threads.get(&tid).map(|t| &t.affinity) {
            Some(a) if !a.is_empty() => a.clone(),
            _ => (0..cpus.div_ceil(64))
                .map(|w| if (w + 1) * 64 <= cpus { u64::MAX } else { (1u64 << (cpus % 64)) - 1 })
                .collect(),
        }
    }

    pub(crate) fn sched_getaffinity(&mut self, m: &mut Machine, pid: u64, len: u64, mask: u64) -> SysResult {
        // As Linux: the mask is as many longs as the CPUs need (`--cpus` is at most 1024, glibc's
        // `cpu_set_t`), and a smaller buffer is EINVAL.
        let cpus = self.cfg.cpus.max(1) as usize;
        let bytes = cpus.div_ceil(64) * 8;
        if len < bytes as u64 || !len.is_multiple_of(8) {
            return err(libc::EINVAL);
        }
        let tid = self.affinity_thread(pid)?;
        let bits: Vec<u8> = self.affinity_of(tid).iter().flat_map(|w| w.to_le_bytes()).collect();
        m.write(mask, &bits, false)?;
        Ok(bytes as u64)
    }

    /// `sched_setaffinity`: the CPUs of the mask that exist (`--cpus`); none of them EINVAL,
    /// as Linux's `__sched_setaffinity`. A shorter mask than Linux's counts the rest as
    /// zeros, a longer one is read only as far as the CPUs go. The thread then runs, as far as
    /// `getcpu` says, on the first of them (the machine runs one thread at a time whatever the
    /// mask).
    pub(crate) fn sched_setaffinity(&mut self, m: &mut Machine, pid: u64, len: u64, mask: u64) -> SysResult {
        let cpus = self.cfg.cpus.max(1) as usize;
        let tid = self.affinity_thread(pid)?;
        let mut bytes = vec![0u8; cpus.div_ceil(64) * 8];
        let n = (len as usize).min(bytes.len());
        m.read(mask, &mut bytes[..n])?;
        let all = self.affinity_of(u32::MAX);
        let want: Vec<u64> =
            bytes.chunks(8).zip(&all).map(|(c, a)| u64::from_le_bytes(c.try_into().expect("8 bytes")) & a).collect();
        if want.iter().all(|&w| w == 0) {
            return err(libc::EINVAL);
        }
        self.thread_mut(tid).affinity = if want == all { Vec::new() } else { want };
        Ok(0)
    }

    pub(crate) fn getcpu(&mut self, m: &mut Machine, cpu: u64, node: u64) -> SysResult {
        if cpu != 0 {
            // The first CPU the thread may run on (0 unless `sched_setaffinity` excluded it).
            let mask = self.affinity_of(self.current);
            let first =
                mask.iter().enumerate().find(|(_, w)| **w != 0).map_or(0, |(i, w)| i as u32 * 64 + w.trailing_zeros());
            m.write(cpu, &first.to_le_bytes(), false)?;
        }
        if node != 0 {
            m.write(node, &0u32.to_le_bytes(), false)?;
        }
        Ok(0)
    }
}
