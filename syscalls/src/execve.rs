//! `execve` and `execveat`: the running process gets a new program, as on Linux.
//!
//! What the call checks before it changes anything, so that a failure returns an error to the
//! program that made it: the path, resolved like `open`'s (the guest's namespace, its links and
//! its sandbox: [`Kernel::resolve`]); a regular file with an execute bit (EACCES otherwise); an
//! ELF executable it can load, with an interpreter that exists, or a `#!` script whose
//! interpreter is such a program, at most [`MAX_SCRIPTS`] scripts deep (ENOEXEC for anything
//! else, which shells answer by running the file as a script themselves); the arguments and
//! environment within a quarter of the stack (E2BIG).
//!
//! Then the process's old image goes: every other thread of it ends, its address space is
//! dropped, descriptors marked close-on-exec close, caught signals go back to their default
//! action (ignored ones stay ignored, the mask and pending signals stay), the alternate stack,
//! robust list and clear-child-tid address are forgotten, and a vfork parent waiting for it
//! goes on. The new program starts through the same start-up as the first one
//! ([`crate::process::exec`]), in the same process: its pid, parent, group, session, working
//! directory and umask are kept. The running thread keeps its thread id (Linux gives an exec
//! made by another thread than the main one the main thread's id; ferrite does not).
//!
//! The new program's bytes and where it was loaded are handed to the caller ([`Kernel::execs`]),
//! which learns its symbols for the reports. A program file is an input of the run like any
//! file the guest reads (its hash goes into [`Kernel::inputs`]).

use emu::{Machine, Reg};
use loader::load_elf;

use crate::process::{ProcessExit, PIE_BASE};
use crate::vfs::{Target, VirtualFile};
use crate::{err, Errno, Kernel};

const AT_EMPTY_PATH: i32 = 0x1000;
const AT_SYMLINK_NOFOLLOW: i32 = 0x100;
/// Linux's longest argument or environment string (MAX_ARG_STRLEN).
const MAX_ARG_STRLEN: usize = 32 * 4096;
/// Scripts whose interpreter is a script, at most (Linux's BINPRM_MAX_RECURSION); ELOOP beyond.
const MAX_SCRIPTS: usize = 4;

/// A program a process started with `execve`: what the reports need to name its code.
#[derive(Clone, Debug)]
pub struct Execed {
    /// The process.
    pub pid: u32,
    /// The thread that made the call (the process's only thread now).
    pub tid: u32,
    /// The program's path.
    pub path: String,
    /// Its contents.
    pub bytes: Vec<u8>,
    /// Its load bias and the span it was loaded at.
    pub load_bias: u64,
    /// Lowest address of the span.
    pub lowest: u64,
    /// End of the span.
    pub highest: u64,
}

/// The program a call names, checked and read.
struct Program {
    /// Its guest path (links resolved).
    path: String,
    bytes: Vec<u8>,
    argv: Vec<Vec<u8>>,
}

impl Kernel {
    /// execve(2) (`dirfd` = `AT_FDCWD`, no flags) and execveat(2). `Ok(None)`: the new program is
    /// set up and runs when the call returns; `Ok(Some(exit))`: it could not be set up once the
    /// old image was gone, and the process ends (killed by SIGSEGV, as Linux does then).
    pub(crate) fn execve(
        &mut self,
        m: &mut Machine,
        dirfd: i32,
        path: u64,
        argv: u64,
        envp: u64,
        flags: i32,
    ) -> Result<Option<ProcessExit>, Errno> {
        if flags & !(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 {
            return err(libc::EINVAL);
        }
        let raw = m.read_cstr(path, 4096).map_err(|_| Errno(libc::EFAULT))?;
        let guest = if raw.is_empty() {
            if flags & AT_EMPTY_PATH == 0 {
                return err(libc::ENOENT);
            }
            // fexecve: the file the descriptor was opened by.
            let f = self.fds.get(dirfd)?;
            let g = f.desc.borrow().guest_path.clone();
            g
        } else {
            let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
            let g = self.path_arg(m, dirfd, path, follow)?;
            if !follow && matches!(self.resolve(&g)?, Target::Virtual(VirtualFile::Link(_) | VirtualFile::Magic)) {
                return err(libc::ELOOP);
            }
            g
        };
        // The task's new name: the file name of the path as given (Linux's
        // `kbasename(bprm->filename)`, so `/proc/self/exe` names it "exe"), or of the file an
        // `AT_EMPTY_PATH` descriptor has open (its dentry's name, as Linux 6.14 on).
        let named: &[u8] = if raw.is_empty() { guest.as_bytes() } else { &raw };
        let base = named.rsplit(|&b| b == b'/').next().unwrap_or(named);
        let mut comm = [0u8; 16];
        comm[..base.len().min(15)].copy_from_slice(&base[..base.len().min(15)]);
        let argv = strings(m, argv)?;
        let envp = strings(m, envp)?;
        let program = self.program(guest, argv)?;
        let size: usize = program.argv.iter().chain(&envp).map(|s| s.len() + 1 + 8).sum();
        if size as u64 > crate::mem::STACK_LIMIT / 4 {
            return err(libc::E2BIG);
        }

        // A process running in another's address space (a `clone(CLONE_VM)` child) gets one of
        // its own; the one it leaves stays with the others.
        let fresh = if self.space_shared() {
            Some(m.empty_address_space().map_err(|_| Errno(libc::ENOMEM))?.ok_or(Errno(libc::EAGAIN))?)
        } else {
            None
        };

        // The point of no return: the old image goes.
        let pid = self.pid;
        let me = self.current;
        self.vfork_done(pid);
        let others: Vec<u32> = self.threads.values().filter(|t| t.pid == pid && t.tid != me).map(|t| t.tid).collect();
        for tid in others {
            self.drop_thread(tid);
            m.forget_thread(tid);
        }
        self.fds.fds.retain(|_, f| !f.cloexec);
        self.timers.exec(pid);
        if fresh.is_none() {
            // Its address space goes, and the System V segments attached in it with it.
            self.shm_detach_all(m, self.space_id());
        }
        self.io_ready_all();
        for a in self.proc.sigactions.iter_mut().skip(1) {
            if a[0] != 1 {
                *a = [0; 4];
            }
        }
        let t = self.thread_mut(me);
        t.altstack = [0, 2, 0];
        t.robust_list = 0;
        t.clear_child_tid = 0;
        t.comm = Some(comm);
        // Linux's begin_new_exec: an ordinary program is dumpable again (SUID_DUMP_USER).
        if let Some(p) = self.procs.get_mut(&pid) {
            p.dumpable = 1;
            p.ctl.keepcaps = false;
            p.ctl.membarrier = 0;
        }
        self.proc.fs_base = 0;
        self.proc.exe = Some(program.path.clone());
        match fresh {
            Some(fresh) => self.leave_shared_space(m, fresh),
            None => self.mm = crate::mem::MemLayout::default(),
        }
        m.exec_address_space();
        // Every general register starts at 0 (the start-up sets RSP and RIP).
        for &r in emu::GP_ORDER.iter().chain(&[Reg::FS_BASE, Reg::GS_BASE]) {
            m.set_reg(r, 0);
        }
        m.set_reg(Reg::RFLAGS, 0x202);
        match crate::process::exec(m, self, &program.bytes, &program.argv, &envp) {
            Ok(started) => {
                let im = &started.image;
                self.execs.push(Execed {
                    pid,
                    tid: me,
                    path: program.path,
                    load_bias: im.load_bias,
                    lowest: im.lowest,
                    highest: im.highest,
                    bytes: program.bytes,
                });
                Ok(None)
            }
            Err(_) => Ok(Some(ProcessExit::Signal(libc::SIGSEGV))),
        }
    }

    /// The program `guest` names, following `#!` lines to the interpreter that runs it, with the
    /// arguments that interpreter gets: `argv` unless a script put its interpreter (and the
    /// interpreter's argument) and the script's path first.
    fn program(&mut self, guest: String, mut argv: Vec<Vec<u8>>) -> Result<Program, Errno> {
        let mut path = guest;
        for depth in 0..=MAX_SCRIPTS {
            let bytes = self.executable(&path)?;
            if let Some(line) = loader::script::shebang(&bytes) {
                if depth == MAX_SCRIPTS {
                    return err(libc::ELOOP);
                }
                let loader::script::Shebang { interp, arg } = line.ok_or(Errno(libc::ENOEXEC))?;
                // The interpreter, then everything after it as one argument, as Linux splits.
                let mut next = vec![interp.clone()];
                next.extend(arg);
                next.push(path.clone().into_bytes());
                next.extend(argv.into_iter().skip(1));
                argv = next;
                let interp = String::from_utf8(interp).map_err(|_| Errno(libc::ENOENT))?;
                let g = self.guest_path(libc::AT_FDCWD, &interp)?;
                path = self.walk(&g, true)?;
                continue;
            }
            if !bytes.starts_with(b"\x7fELF") {
                return err(libc::ENOEXEC);
            }
            let image = load_elf(&bytes, PIE_BASE).map_err(|_| Errno(libc::ENOEXEC))?;
            if let Some(interp) = &image.interp {
                // The start-up reads it from the host, as the first program's.
                let md = std::fs::metadata(crate::vfs::normalize("/", interp)).map_err(|_| Errno(libc::ENOENT))?;
                if !md.is_file() {
                    return err(libc::ELIBBAD);
                }
            }
            return Ok(Program { path, bytes, argv });
        }
        err(libc::ELOOP)
    }

    /// The contents of the executable file at `guest`: EACCES for anything but a regular file
    /// with an execute bit, the host's error for a file that cannot be read.
    fn executable(&mut self, guest: &str) -> Result<Vec<u8>, Errno> {
        use std::os::unix::fs::PermissionsExt;
        let host = match self.resolve(guest)? {
            Target::Host { host, .. } => host,
            Target::Virtual(_) => return err(libc::EACCES),
        };
        let md = std::fs::metadata(&host)?;
        if !md.is_file() || md.permissions().mode() & 0o111 == 0 {
            return err(libc::EACCES);
        }
        let bytes = loader::input::read_regular(&host, loader::input::PROGRAM_CAP).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => Errno(libc::E2BIG),
            _ => Errno::from(e),
        })?;
        if self.cfg.hash_inputs && !self.proc.created.contains(guest) {
            self.inputs.entry(guest.to_string()).or_insert_with(|| blake3::hash(&bytes).to_hex().to_string());
        }
        Ok(bytes)
    }

    /// Where the running process's program is (`/proc/self/exe`): the first program's path, or
    /// the one it last exec'ed.
    pub(crate) fn exe(&self) -> &str {
        self.proc.exe.as_deref().unwrap_or(&self.cfg.exe)
    }
}

/// A NULL-terminated array of strings in guest memory (`argv`, `envp`; a null array is empty).
fn strings(m: &Machine, mut addr: u64) -> Result<Vec<Vec<u8>>, Errno> {
    let mut out = Vec::new();
    if addr == 0 {
        return Ok(out);
    }
    let mut total = 0u64;
    loop {
        let p = m.read_u64(addr)?;
        if p == 0 {
            return Ok(out);
        }
        // Too long, or unreadable: which, by whether its first byte can be read.
        let s = m.read_cstr(p, MAX_ARG_STRLEN).map_err(|_| match m.read(p, &mut [0u8; 1]) {
            Err(_) => Errno(libc::EFAULT),
            Ok(()) => Errno(libc::E2BIG),
        })?;
        total += s.len() as u64 + 9;
        if total > crate::mem::STACK_LIMIT / 4 {
            return err(libc::E2BIG);
        }
        out.push(s);
        addr += 8;
    }
}
