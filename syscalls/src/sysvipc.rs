//! System V IPC between the machine's threads and processes, as Linux's `ipc/`: shared memory
//! segments (`shmget`, `shmat`, `shmdt`, `shmctl`), semaphore sets (`semget`, `semop`,
//! `semtimedop`, `semctl`) and message queues (`msgget`, `msgsnd`, `msgrcv`, `msgctl`).
//!
//! One namespace per machine ([`Ipc`]), never the host's: ids are Linux's `ipc_buildid`
//! (`seq << 15 | index`, the lowest free index and a sequence number counted per kind from 0),
//! so the same run gives the same ids. Every object belongs to the machine's one user (uid and
//! gid 1000, its creator): permissions are the owner bits of its mode, as `ipcperms` checks
//! them for the owner. Times are the guest's wall clock in seconds.
//!
//! A call that must wait (`semop` on a value it cannot take, `msgsnd` to a full queue, `msgrcv`
//! with nothing of its type) is a call on descriptors: it names its object's readiness key and
//! returns [`crate::RESTART`], so it is a scheduling point, is made again when the object
//! changes, times out on the virtual clock (`semtimedop`), is part of a deadlock finding when
//! nothing can wake it, and a signal interrupts it with EINTR (Linux's `-ERESTARTNOHAND` in
//! `do_semtimedop`, `do_msgsnd` and `do_msgrcv`: made again only when no handler runs, never
//! under `SA_RESTART`: [`crate::signal`]). An object removed while a thread waits on it gives
//! that thread EIDRM. A successful `semop` that raises a value and one that takes it, a `msgsnd`
//! and the `msgrcv` that takes a message, are the two sides of a hand-off
//! ([`Kernel::handoffs`]), so what a process did before it posted happens before what another
//! does after it waited.
//!
//! A segment is host memory the kernel keeps ([`Shm::block`]); each `shmat` maps that block into
//! the caller's address space as shared anonymous memory ([`emu::memory::SYSV_SHM`]), which a
//! `fork` shares and the passes see as what it is: DRAM, not PM. Attachments belong to an
//! address space ([`crate::procs::Proc::space_id`]): a fork's child gets its parent's (each
//! counted in `shm_nattch`), an `execve` or the end of the last process in the space detaches
//! them, and a segment removed with `IPC_RMID` lives until its last detach. `SEM_UNDO`
//! adjustments belong to the process and are applied when it ends (not inherited by a fork,
//! kept across `execve`), as Linux's `exit_sem`.
//!
//! Segments together are held to `--max-memory` (ENOMEM beyond, as Linux's when it cannot
//! commit the memory).
//!
//! `munmap`, `mremap`, `mprotect` and `mmap` with `MAP_FIXED` of an attachment's range change
//! its pieces as Linux changes its vmas ([`Kernel::shm_reconcile`]): each piece is counted in
//! `shm_nattch`, one moved whole is detached at its new start, one with no piece left is
//! detached (a removed segment freed with its last). `/proc/sysvipc/{shm,sem,msg}` list the
//! objects with Linux's columns, and `/proc/sys/kernel/{shmmax,shmall,shmmni,sem,msgmax,msgmnb,
//! msgmni}` the limits enforced, so `ipcs` works.
//!
//! Snapshots of a run ([`Ipc::snapshot_copy`]) copy sets, queues, adjustments and waiters; an
//! attached segment's bytes are the attachers' guest memory, which the machine's snapshot
//! saves and puts back in place, so every attacher sees one copy again; those of a segment
//! nobody attached are saved with the kernel's copy.
//!
//! Left out: `SHM_HUGETLB` and `SHM_NORESERVE` are accepted and change nothing; `IPC_SET`
//! keeps the owner's rights whatever uid it sets; `/proc/sysvipc/shm`'s `rss` and `swap` are 0;
//! a `mremap` that grows an attachment gives fresh memory past the segment's end.

use std::collections::BTreeMap;
use std::rc::Rc;

use emu::{Backing, HostBlock, Machine, Perm, Region, PAGE};

use crate::{err, Errno, Kernel, SysResult};

const IPC_PRIVATE: i32 = 0;
const IPC_CREAT: i32 = 0o1000;
const IPC_EXCL: i32 = 0o2000;
const IPC_NOWAIT: i32 = 0o4000;
const IPC_RMID: i32 = 0;
const IPC_SET: i32 = 1;
const IPC_STAT: i32 = 2;
const IPC_INFO: i32 = 3;

const SHM_RDONLY: i32 = 0o10000;
const SHM_RND: i32 = 0o20000;
const SHM_REMAP: i32 = 0o40000;
const SHM_EXEC: i32 = 0o100000;
const SHM_LOCK: i32 = 11;
const SHM_UNLOCK: i32 = 12;
const SHM_STAT: i32 = 13;
const SHM_INFO: i32 = 14;
const SHM_STAT_ANY: i32 = 15;
/// `shm_perm.mode` bits: removed, waiting for its last detach; locked.
const SHM_DEST: u32 = 0o1000;
const SHM_LOCKED: u32 = 0o2000;

const GETPID: i32 = 11;
const GETVAL: i32 = 12;
const GETALL: i32 = 13;
const GETNCNT: i32 = 14;
const GETZCNT: i32 = 15;
const SETVAL: i32 = 16;
const SETALL: i32 = 17;
const SEM_STAT: i32 = 18;
const SEM_INFO: i32 = 19;
const SEM_STAT_ANY: i32 = 20;
const SEM_UNDO: i16 = 0x1000;

const MSG_STAT: i32 = 11;
const MSG_INFO: i32 = 12;
const MSG_STAT_ANY: i32 = 13;
const MSG_NOERROR: i32 = 0o10000;
const MSG_EXCEPT: i32 = 0o20000;
const MSG_COPY: i32 = 0o40000;

/// Linux's default limits (`include/uapi/linux/{shm,sem,msg}.h`).
const SHMMIN: u64 = 1;
const SHMMAX: u64 = u64::MAX - (1 << 24);
const SHMALL: u64 = u64::MAX - (1 << 24);
const SHMMNI: u64 = 4096;
const SEMMSL: i32 = 32000;
const SEMMNI: i32 = 32000;
const SEMMNS: i32 = SEMMNI * SEMMSL;
const SEMOPM: u64 = 500;
const SEMVMX: i32 = 32767;
const SEMAEM: i32 = SEMVMX;
const MSGMAX: u64 = 8192;
const MSGMNB: u64 = 16384;
const MSGMNI: u64 = 32000;
/// Ids are `seq << IPCMNI_SHIFT | index`.
const IPCMNI_SHIFT: u32 = 15;
const IPCMNI: u32 = 1 << IPCMNI_SHIFT;

/// The three kinds, each with its own ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Shared memory segments.
    Shm = 0,
    /// Semaphore sets.
    Sem = 1,
    /// Message queues.
    Msg = 2,
}

/// Readiness key of an object (waiters of `semop`, `msgsnd`, `msgrcv` block on it): far from
/// the keys of pipes and sockets (counted up from 1) and from [`crate::procs::CHILD_KEY`].
fn wait_key(kind: Kind, id: i32) -> u64 {
    1 << 61 | (kind as u64) << 32 | u64::from(id as u32)
}

/// Hand-off key of semaphore `num` of set `id` (or of queue `id`): a non-canonical address,
/// which no futex has.
fn handoff_key(kind: Kind, id: i32, num: u16) -> u64 {
    1 << 60 | (kind as u64) << 48 | u64::from(id as u32) << 16 | u64::from(num)
}

/// What every object has (`struct kern_ipc_perm`).
#[derive(Clone, Debug)]
pub(crate) struct Perm64 {
    key: i32,
    uid: u32,
    gid: u32,
    mode: u32,
    seq: u16,
}

impl Perm64 {
    /// `struct ipc64_perm` (48 bytes, x86-64).
    fn bytes(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        b[0..4].copy_from_slice(&self.key.to_le_bytes());
        b[4..8].copy_from_slice(&self.uid.to_le_bytes());
        b[8..12].copy_from_slice(&self.gid.to_le_bytes());
        b[12..16].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
        b[16..20].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
        b[20..24].copy_from_slice(&self.mode.to_le_bytes());
        b[24..26].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Linux's `ipcperms` for the owner: EACCES unless the owner bits grant every access of
    /// `flag`'s low nine bits.
    fn check(&self, flag: i32) -> Result<(), Errno> {
        let flag = flag as u32;
        let requested = (flag >> 6) | (flag >> 3) | flag;
        let granted = self.mode >> 6;
        if requested & !granted & 7 != 0 {
            return err(libc::EACCES);
        }
        Ok(())
    }

    /// `IPC_SET`: the new owner and the low nine bits of the mode from an `ipc64_perm`.
    fn set(&mut self, b: &[u8]) {
        self.uid = u32::from_le_bytes(b[4..8].try_into().unwrap_or_default());
        self.gid = u32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        let mode = u32::from_le_bytes(b[20..24].try_into().unwrap_or_default());
        self.mode = (self.mode & !0o777) | (mode & 0o777);
    }
}

/// A shared memory segment.
#[derive(Clone, Debug)]
pub(crate) struct Shm {
    perm: Perm64,
    size: u64,
    /// Its bytes, mapped by every attachment.
    block: Rc<HostBlock>,
    /// In a snapshot's copy of the namespace ([`Ipc::snapshot_copy`]), the bytes of a segment
    /// nobody had attached, which no snapshot of guest memory holds.
    saved: Option<Rc<emu::memory::BlockCopy>>,
    atime: i64,
    dtime: i64,
    ctime: i64,
    cpid: u32,
    lpid: u32,
    nattch: u64,
}

/// A semaphore.
#[derive(Clone, Debug, Default)]
struct Sem {
    val: i32,
    pid: u32,
}

/// A semaphore set.
#[derive(Clone, Debug)]
pub(crate) struct SemSet {
    perm: Perm64,
    sems: Vec<Sem>,
    otime: i64,
    ctime: i64,
}

/// A message.
#[derive(Clone, Debug)]
struct Msg {
    mtype: i64,
    text: Vec<u8>,
}

/// A message queue.
#[derive(Clone, Debug)]
pub(crate) struct MsgQueue {
    perm: Perm64,
    msgs: std::collections::VecDeque<Msg>,
    cbytes: u64,
    qbytes: u64,
    stime: i64,
    rtime: i64,
    ctime: i64,
    lspid: u32,
    lrpid: u32,
}

/// What a blocked thread waits for, for `GETNCNT`/`GETZCNT` and EIDRM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    kind: Kind,
    id: i32,
    /// The semaphore whose operation could not go on, and whether it waits for zero.
    sem: Option<(u16, bool)>,
}

/// The machine's System V IPC namespace.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ipc {
    shms: BTreeMap<i32, Shm>,
    sems: BTreeMap<i32, SemSet>,
    msgs: BTreeMap<i32, MsgQueue>,
    /// The next sequence number of each kind.
    seq: [u16; 3],
    /// Attachments: (address space id, address) → (segment id, mapped length, pieces). The
    /// pieces are the regions that map the segment in that range, each counted in
    /// `shm_nattch` as Linux counts each vma (a `munmap` or `mprotect` of part of an attachment
    /// splits it).
    attached: BTreeMap<(u32, u64), (i32, u64, u64)>,
    /// `SEM_UNDO` adjustments by process: (set id, semaphore) → adjustment.
    undo: BTreeMap<u32, BTreeMap<(i32, u16), i32>>,
    /// Threads blocked in a call on an object.
    waiting: BTreeMap<u32, Waiting>,
    /// Blocked `semop` calls by set, in arrival order: Linux's pending queue, which a change of
    /// the set's values serves first come, first served ([`Kernel::sem_update_queue`]).
    pending: BTreeMap<i32, Vec<Pending>>,
    /// Threads whose blocked `semop` was completed for them (as Linux's waker does): the set,
    /// the result (0 or an errno) and the operations, returned when the thread's call is made
    /// again.
    served: BTreeMap<u32, (i32, i32, Vec<SemOp>)>,
}

/// One `struct sembuf`: the semaphore, the operation, its flags.
type SemOp = (u16, i16, i16);

/// A blocked `semop`: who waits, for which operations.
#[derive(Clone, Debug)]
struct Pending {
    tid: u32,
    pid: u32,
    ops: Vec<(u16, i16, i16)>,
}

impl Ipc {
    /// A copy of the namespace for a snapshot of the run, or the live one restored from a
    /// snapshot's copy. Semaphore sets, message queues, undo adjustments and waiters are plain
    /// data; a segment shares its host block with the original, so every attacher still maps
    /// one copy of its bytes. An attached segment's bytes are guest memory, which the machine's
    /// snapshot of each attacher's address space saves and puts back in place (a block several
    /// spaces map is restored once per space, to the same bytes). Those of a segment nobody
    /// attached are saved here; a snapshot's copy puts them back when it is copied in turn.
    pub(crate) fn snapshot_copy(&self) -> Ipc {
        let mut c = self.clone();
        for (id, s) in &mut c.shms {
            match s.saved.take() {
                Some(saved) => s.block.put_back(&saved),
                None if !self.attached.values().any(|(i, _, _)| i == id) => {
                    s.saved = Some(Rc::new(s.block.copy_out()));
                }
                None => {}
            }
        }
        c
    }

    fn index_of(id: i32) -> u32 {
        id as u32 & (IPCMNI - 1)
    }

    /// A new id of `kind`: the lowest free index with the kind's next sequence number.
    fn new_id(&mut self, kind: Kind) -> Result<(i32, u16), Errno> {
        let used: Vec<u32> = match kind {
            Kind::Shm => self.shms.keys().map(|&i| Self::index_of(i)).collect(),
            Kind::Sem => self.sems.keys().map(|&i| Self::index_of(i)).collect(),
            Kind::Msg => self.msgs.keys().map(|&i| Self::index_of(i)).collect(),
        };
        let max = match kind {
            Kind::Shm => SHMMNI as u32,
            Kind::Sem => SEMMNI as u32,
            Kind::Msg => MSGMNI as u32,
        };
        let idx = (0..max).find(|i| !used.contains(i)).ok_or(Errno(libc::ENOSPC))?;
        let s = &mut self.seq[kind as usize];
        let seq = *s;
        // Linux wraps the sequence at `INT_MAX >> IPCMNI_SHIFT`.
        *s = if u32::from(*s) + 1 >= (i32::MAX as u32 >> IPCMNI_SHIFT) { 0 } else { *s + 1 };
        Ok(((u32::from(seq) << IPCMNI_SHIFT | idx) as i32, seq))
    }

    fn by_key(&self, kind: Kind, key: i32) -> Option<i32> {
        match kind {
            Kind::Shm => self.shms.iter().find(|(_, s)| s.perm.key == key).map(|(&i, _)| i),
            Kind::Sem => self.sems.iter().find(|(_, s)| s.perm.key == key).map(|(&i, _)| i),
            Kind::Msg => self.msgs.iter().find(|(_, s)| s.perm.key == key).map(|(&i, _)| i),
        }
    }

    /// The id of the object at `index` (`*_STAT`), if any.
    fn at_index(&self, kind: Kind, index: i32) -> Option<i32> {
        let f = |i: &i32| Self::index_of(*i) == index as u32;
        match kind {
            Kind::Shm => self.shms.keys().copied().find(f),
            Kind::Sem => self.sems.keys().copied().find(f),
            Kind::Msg => self.msgs.keys().copied().find(f),
        }
    }

    /// The highest index in use (`IPC_INFO`'s result), 0 if none.
    fn max_index(&self, kind: Kind) -> u64 {
        let it: Vec<i32> = match kind {
            Kind::Shm => self.shms.keys().copied().collect(),
            Kind::Sem => self.sems.keys().copied().collect(),
            Kind::Msg => self.msgs.keys().copied().collect(),
        };
        it.into_iter().map(|i| u64::from(Self::index_of(i))).max().unwrap_or(0)
    }
}

impl Kernel {
    /// `/proc/sysvipc/shm`, `sem` or `msg`, as Linux's `sysvipc_shm_proc_show`,
    /// `sysvipc_sem_proc_show` and `sysvipc_msg_proc_show` print them: a header, then one line
    /// per object in id order. Owner and creator are the machine's one user; a segment's `rss`
    /// and `swap` are 0 (which of its pages the host holds is the host's business, not the run's).
    pub(crate) fn sysvipc_proc(&self, kind: Kind) -> String {
        use std::fmt::Write;
        let ipc = &self.ipc;
        let mut s = String::new();
        let owner = |p: &Perm64| format!("{:5} {:5} {:5} {:5}", p.uid, p.gid, crate::process::UID, crate::process::UID);
        match kind {
            Kind::Shm => {
                s += "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n";
                for (id, x) in &ipc.shms {
                    let _ = writeln!(
                        s,
                        "{:10} {:10}  {:4o} {:21} {:5} {:5}  {:5} {} {:10} {:10} {:10} {:21} {:21}",
                        x.perm.key,
                        id,
                        x.perm.mode,
                        x.size,
                        x.cpid,
                        x.lpid,
                        x.nattch,
                        owner(&x.perm),
                        x.atime,
                        x.dtime,
                        x.ctime,
                        0,
                        0
                    );
                }
            }
            Kind::Sem => {
                s += "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n";
                for (id, x) in &ipc.sems {
                    let _ = writeln!(
                        s,
                        "{:10} {:10}  {:4o} {:10} {} {:10} {:10}",
                        x.perm.key,
                        id,
                        x.perm.mode,
                        x.sems.len(),
                        owner(&x.perm),
                        x.otime,
                        x.ctime
                    );
                }
            }
            Kind::Msg => {
                s += "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n";
                for (id, x) in &ipc.msgs {
                    let _ = writeln!(
                        s,
                        "{:10} {:10}  {:4o}  {:10} {:10} {:5} {:5} {} {:10} {:10} {:10}",
                        x.perm.key,
                        id,
                        x.perm.mode,
                        x.cbytes,
                        x.msgs.len(),
                        x.lspid,
                        x.lrpid,
                        owner(&x.perm),
                        x.stime,
                        x.rtime,
                        x.ctime
                    );
                }
            }
        }
        s
    }
}

/// `shmid64_ds`, `semid64_ds` and `msqid64_ds` as x86-64 lays them out.
fn put(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

impl Kernel {
    fn ipc_now(&self, m: &Machine) -> i64 {
        self.wall_ns(m) / 1_000_000_000
    }

    /// The common part of `shmget`, `semget` and `msgget` (Linux's `ipcget`): the id of the
    /// object with `key`, after `more` checks it (EINVAL) and the permissions; or a new one
    /// made by `make` with `IPC_CREAT` (every key for `IPC_PRIVATE`).
    fn ipcget(
        &mut self,
        kind: Kind,
        key: i32,
        flg: i32,
        more: &dyn Fn(&Ipc, i32) -> Result<(), Errno>,
        make: &mut dyn FnMut(&mut Kernel, Perm64, i32) -> Result<(), Errno>,
    ) -> SysResult {
        if key != IPC_PRIVATE {
            if let Some(id) = self.ipc.by_key(kind, key) {
                if flg & IPC_CREAT != 0 && flg & IPC_EXCL != 0 {
                    return err(libc::EEXIST);
                }
                more(&self.ipc, id)?;
                let perm = match kind {
                    Kind::Shm => &self.ipc.shms[&id].perm,
                    Kind::Sem => &self.ipc.sems[&id].perm,
                    Kind::Msg => &self.ipc.msgs[&id].perm,
                };
                perm.check(flg)?;
                return Ok(id as u64);
            }
            if flg & IPC_CREAT == 0 {
                return err(libc::ENOENT);
            }
        }
        let (id, seq) = self.ipc.new_id(kind)?;
        let uid = crate::process::UID as u32;
        let perm = Perm64 { key, uid, gid: uid, mode: (flg & 0o777) as u32, seq };
        make(self, perm, id)?;
        Ok(id as u64)
    }

    /// shmget(2).
    pub(crate) fn shmget(&mut self, m: &Machine, key: i32, size: u64, flg: i32) -> SysResult {
        let now = self.ipc_now(m);
        let pid = self.pid;
        self.ipcget(
            Kind::Shm,
            key,
            flg,
            &|ipc, id| if ipc.shms[&id].size < size { err(libc::EINVAL) } else { Ok(()) },
            &mut |k, perm, id| {
                if !(SHMMIN..=SHMMAX).contains(&size) {
                    return err(libc::EINVAL);
                }
                let len = emu::memory::page_up(size).ok_or(Errno(libc::EINVAL))?;
                // The segments, attached or not, are held to `--max-memory` together, so no guest
                // reserves unbounded host memory through segments it never maps: ENOMEM, as
                // Linux's `shmem_kernel_file_setup` when the memory cannot be committed.
                let held: u64 = k.ipc.shms.values().map(|s| s.size.div_ceil(PAGE) * PAGE).sum();
                if held.saturating_add(len) > k.memory_limit() {
                    return err(libc::ENOMEM);
                }
                let block = HostBlock::anon(len as usize).map_err(|_| Errno(libc::ENOMEM))?;
                let shm = Shm {
                    perm,
                    size,
                    block,
                    saved: None,
                    atime: 0,
                    dtime: 0,
                    ctime: now,
                    cpid: pid,
                    lpid: 0,
                    nattch: 0,
                };
                k.ipc.shms.insert(id, shm);
                Ok(())
            },
        )
    }

    /// shmat(2): maps segment `id` at `addr` (0: where `mmap` would put it) and returns where.
    pub(crate) fn shmat(&mut self, m: &mut Machine, id: i32, addr: u64, flg: i32) -> SysResult {
        let mut addr = addr;
        if addr != 0 && !addr.is_multiple_of(PAGE) {
            if flg & SHM_RND == 0 {
                return err(libc::EINVAL);
            }
            addr &= !(PAGE - 1);
        }
        if flg & SHM_REMAP != 0 && addr == 0 {
            return err(libc::EINVAL);
        }
        let (mut prot, acc) = if flg & SHM_RDONLY != 0 { (libc::PROT_READ, 0o400) } else { (3, 0o600) };
        let acc = if flg & SHM_EXEC != 0 {
            prot |= libc::PROT_EXEC;
            acc | 0o100
        } else {
            acc
        };
        let shm = self.ipc.shms.get(&id).ok_or(Errno(libc::EINVAL))?;
        shm.perm.check(acc)?;
        let len = emu::memory::page_up(shm.size).ok_or(Errno(libc::EINVAL))?;
        let block = shm.block.clone();
        let start = if addr != 0 {
            let end = addr.checked_add(len).ok_or(Errno(libc::EINVAL))?;
            if addr < crate::mem::MMAP_BOTTOM || end > crate::mem::STACK_TOP {
                return err(libc::EINVAL);
            }
            // Linux refuses a range in use unless SHM_REMAP (`find_vma_intersection`).
            if m.mem.overlaps(addr, end) {
                if flg & SHM_REMAP == 0 {
                    return err(libc::EINVAL);
                }
                m.unmap(addr, end);
                // Attachments it replaced are detached.
                self.shm_reconcile(m);
            }
            addr
        } else {
            m.mem.find_free(len, 0, crate::mem::MMAP_BOTTOM, crate::mem::MMAP_TOP).ok_or(Errno(libc::ENOMEM))?
        };
        self.check_budget(m, len)?;
        let region = Region {
            start,
            end: start + len,
            perm: Perm::from_prot(prot as u64),
            block,
            block_off: 0,
            backing: Backing::Anon { label: Some(emu::memory::SYSV_SHM) },
            on_fork: Default::default(),
        };
        m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        if prot & libc::PROT_EXEC != 0 {
            m.code_changed(start, start + len);
        }
        let now = self.ipc_now(m);
        let space = self.space_id();
        let shm = self.ipc.shms.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
        shm.nattch += 1;
        shm.atime = now;
        shm.lpid = self.pid;
        self.ipc.attached.insert((space, start), (id, len, 1));
        Ok(start)
    }

    /// After a change to the running process's mappings (`munmap`, `mremap`, `mprotect`,
    /// `mmap` with `MAP_FIXED`, `shmat` with `SHM_REMAP`), as Linux's vma operations do to
    /// `shm_nattch`: each attachment of its address space counts the regions still mapping its
    /// segment in its range; one `mremap` moved whole follows its first page (where `shmdt`
    /// finds it then); one with no region left is detached, and a removed segment goes with
    /// its last.
    pub(crate) fn shm_reconcile(&mut self, m: &Machine) {
        if self.ipc.attached.is_empty() {
            return;
        }
        let space = self.space_id();
        let mine: Vec<(u64, (i32, u64, u64))> =
            self.ipc.attached.range((space, 0)..=(space, u64::MAX)).map(|(&(_, a), &v)| (a, v)).collect();
        let now = self.ipc_now(m);
        for (addr, (id, len, pieces)) in mine {
            let Some(block) = self.ipc.shms.get(&id).map(|s| s.block.clone()) else { continue };
            let count = |at: u64| {
                m.mem.regions().filter(|r| Rc::ptr_eq(&r.block, &block) && r.start >= at && r.start < at + len).count()
                    as u64
            };
            let n = count(addr);
            if n > 0 {
                self.set_pieces(space, addr, id, n);
                continue;
            }
            // Moved: a region mapping the segment's first page outside every attachment's range.
            let held = |a: u64| self.ipc.attached.range((space, 0)..=(space, a)).any(|(&(_, s), v)| a < s + v.1);
            let moved = m.mem.regions().find(|r| Rc::ptr_eq(&r.block, &block) && r.block_off == 0 && !held(r.start));
            match moved.map(|r| r.start) {
                Some(to) => {
                    self.ipc.attached.remove(&(space, addr));
                    self.ipc.attached.insert((space, to), (id, len, pieces));
                    self.set_pieces(space, to, id, count(to));
                }
                None => self.detach(space, addr, now),
            }
        }
    }

    /// Attachment `addr` of `space` to segment `id` is now `n` pieces.
    fn set_pieces(&mut self, space: u32, addr: u64, id: i32, n: u64) {
        let Some(a) = self.ipc.attached.get_mut(&(space, addr)) else { return };
        let old = std::mem::replace(&mut a.2, n);
        if let Some(shm) = self.ipc.shms.get_mut(&id) {
            shm.nattch = (shm.nattch + n).saturating_sub(old);
        }
    }

    /// Detaches the attachment at `addr` of address space `space` from its segment (the
    /// caller unmaps it): its count goes down, and a removed segment goes with its last.
    fn detach(&mut self, space: u32, addr: u64, now: i64) {
        let Some((id, _, pieces)) = self.ipc.attached.remove(&(space, addr)) else { return };
        let pid = self.pid;
        let Some(shm) = self.ipc.shms.get_mut(&id) else { return };
        shm.nattch = shm.nattch.saturating_sub(pieces);
        shm.dtime = now;
        shm.lpid = pid;
        if shm.nattch == 0 && shm.perm.mode & SHM_DEST != 0 {
            self.ipc.shms.remove(&id);
        }
    }

    /// shmdt(2): the attachment whose first page is mapped at `addr` (Linux's vma there, of
    /// the segment, at offset 0) is unmapped and detached: the regions of the segment in its
    /// range, not what else was mapped in its holes.
    pub(crate) fn shmdt(&mut self, m: &mut Machine, addr: u64) -> SysResult {
        if !addr.is_multiple_of(PAGE) {
            return err(libc::EINVAL);
        }
        let space = self.space_id();
        let (id, len, _) = *self.ipc.attached.get(&(space, addr)).ok_or(Errno(libc::EINVAL))?;
        let block = self.ipc.shms.get(&id).map(|s| s.block.clone()).ok_or(Errno(libc::EINVAL))?;
        let mine: Vec<(u64, u64, usize)> = m
            .mem
            .regions()
            .filter(|r| Rc::ptr_eq(&r.block, &block) && r.start >= addr && r.start < addr + len)
            .map(|r| (r.start, r.end, r.block_off))
            .collect();
        if !mine.iter().any(|&(s, _, off)| s == addr && off == 0) {
            return err(libc::EINVAL);
        }
        for (s, e, _) in mine {
            m.unmap(s, e);
        }
        let now = self.ipc_now(m);
        self.detach(space, addr, now);
        Ok(0)
    }

    /// The attachments of the running process's address space are detached: it execs, or
    /// the last process in it ends (its memory goes with it).
    pub(crate) fn shm_detach_all(&mut self, m: &Machine, space: u32) {
        let addrs: Vec<u64> = self.ipc.attached.range((space, 0)..=(space, u64::MAX)).map(|(&(_, a), _)| a).collect();
        let now = self.ipc_now(m);
        for a in addrs {
            self.detach(space, a, now);
        }
    }

    /// A fork's child (address space `child`) has its parent's (`parent`) attachments.
    pub(crate) fn shm_fork(&mut self, parent: u32, child: u32) {
        let mine: Vec<(u64, (i32, u64, u64))> =
            self.ipc.attached.range((parent, 0)..=(parent, u64::MAX)).map(|(&(_, a), &v)| (a, v)).collect();
        for (a, (id, len, pieces)) in mine {
            if let Some(shm) = self.ipc.shms.get_mut(&id) {
                shm.nattch += pieces;
                self.ipc.attached.insert((child, a), (id, len, pieces));
            }
        }
    }

    /// shmctl(2).
    pub(crate) fn shmctl(&mut self, m: &mut Machine, id: i32, cmd: i32, buf: u64) -> SysResult {
        match cmd {
            IPC_INFO => {
                // struct shminfo64: shmmax, shmmin, shmmni, shmseg, shmall, 4 unused.
                let mut b = [0u8; 72];
                for (i, v) in [SHMMAX, SHMMIN, SHMMNI, SHMMNI, SHMALL].into_iter().enumerate() {
                    put(&mut b, i * 8, v);
                }
                m.write(buf, &b, false)?;
                Ok(self.ipc.max_index(Kind::Shm))
            }
            SHM_INFO => {
                // struct shm_info: used_ids (int), shm_tot, shm_rss, shm_swp, swap_attempts,
                // swap_successes (unsigned long).
                let mut b = [0u8; 48];
                b[0..4].copy_from_slice(&(self.ipc.shms.len() as u32).to_le_bytes());
                let pages: u64 = self.ipc.shms.values().map(|s| s.size.div_ceil(PAGE)).sum();
                put(&mut b, 8, pages);
                put(&mut b, 16, pages);
                m.write(buf, &b, false)?;
                Ok(self.ipc.max_index(Kind::Shm))
            }
            IPC_STAT | SHM_STAT | SHM_STAT_ANY => {
                let id =
                    if cmd == IPC_STAT { id } else { self.ipc.at_index(Kind::Shm, id).ok_or(Errno(libc::EINVAL))? };
                let s = self.ipc.shms.get(&id).ok_or(Errno(libc::EINVAL))?;
                if cmd != SHM_STAT_ANY {
                    s.perm.check(0o400)?;
                }
                let mut b = [0u8; 112];
                b[..48].copy_from_slice(&s.perm.bytes());
                put(&mut b, 48, s.size);
                put(&mut b, 56, s.atime as u64);
                put(&mut b, 64, s.dtime as u64);
                put(&mut b, 72, s.ctime as u64);
                b[80..84].copy_from_slice(&s.cpid.to_le_bytes());
                b[84..88].copy_from_slice(&s.lpid.to_le_bytes());
                put(&mut b, 88, s.nattch);
                m.write(buf, &b, false)?;
                Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
            }
            IPC_SET => {
                let mut b = [0u8; 48];
                m.read(buf, &mut b)?;
                let now = self.ipc_now(m);
                let s = self.ipc.shms.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                s.perm.set(&b);
                s.ctime = now;
                Ok(0)
            }
            IPC_RMID => {
                let s = self.ipc.shms.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                // Gone from the keys at once; its memory lives until the last detach.
                s.perm.mode |= SHM_DEST;
                s.perm.key = IPC_PRIVATE;
                if s.nattch == 0 {
                    self.ipc.shms.remove(&id);
                }
                Ok(0)
            }
            SHM_LOCK | SHM_UNLOCK => {
                let s = self.ipc.shms.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                if cmd == SHM_LOCK {
                    s.perm.mode |= SHM_LOCKED;
                } else {
                    s.perm.mode &= !SHM_LOCKED;
                }
                Ok(0)
            }
            _ => err(libc::EINVAL),
        }
    }

    /// semget(2).
    pub(crate) fn semget(&mut self, m: &Machine, key: i32, nsems: i32, flg: i32) -> SysResult {
        if !(0..=SEMMSL).contains(&nsems) {
            return err(libc::EINVAL);
        }
        let now = self.ipc_now(m);
        self.ipcget(
            Kind::Sem,
            key,
            flg,
            &|ipc, id| if (ipc.sems[&id].sems.len() as i32) < nsems { err(libc::EINVAL) } else { Ok(()) },
            &mut |k, perm, id| {
                if nsems == 0 {
                    return err(libc::EINVAL);
                }
                let set = SemSet { perm, sems: vec![Sem::default(); nsems as usize], otime: 0, ctime: now };
                k.ipc.sems.insert(id, set);
                Ok(())
            },
        )
    }

    /// The thread's last wait on an object ended: EIDRM if it was on `id`, now gone.
    fn waited_on_removed(&mut self, kind: Kind, id: i32, exists: bool) -> Result<(), Errno> {
        let cur = self.current;
        match self.ipc.waiting.remove(&cur) {
            Some(w) if w.kind == kind && w.id == id && !exists => err(libc::EIDRM),
            _ => Ok(()),
        }
    }

    /// The running call waits on object `id` (`Kernel::block_keys`), or times out.
    fn ipc_block(&mut self, m: &Machine, w: Waiting, timeout: Option<u64>) -> SysResult {
        if self.io_deadline(m, timeout) {
            return err(libc::EAGAIN);
        }
        self.ipc.waiting.insert(self.current, w);
        self.block_keys.push(wait_key(w.kind, w.id));
        err(crate::RESTART)
    }

    /// semop(2) and semtimedop(2): the `nsops` operations at `sops` done at once, or none
    /// (Linux's `perform_atomic_semop`); waits, unless `IPC_NOWAIT`, until they can be, for at
    /// most the relative `timeout` (a `struct timespec`, 0: none). A waiting call joins the
    /// set's queue, and a change of the values completes the calls it now allows in the order
    /// they came (Linux's `update_queue`), whichever thread the scheduler runs first.
    pub(crate) fn semtimedop(&mut self, m: &mut Machine, id: i32, sops: u64, nsops: u64, timeout: u64) -> SysResult {
        if nsops < 1 || id < 0 {
            return err(libc::EINVAL);
        }
        if nsops > SEMOPM {
            return err(libc::E2BIG);
        }
        let cur = self.current;
        if let Some((set, res, ops)) = self.ipc.served.remove(&cur) {
            // Done for it while it waited: the call is made again only to return.
            self.ipc.waiting.remove(&cur);
            if res != 0 {
                return err(res);
            }
            self.sem_handoffs(set, &ops);
            return Ok(0);
        }
        let mut raw = vec![0u8; nsops as usize * 6];
        m.read(sops, &mut raw)?;
        let ops: Vec<(u16, i16, i16)> = raw
            .chunks(6)
            .map(|c| {
                (u16::from_le_bytes([c[0], c[1]]), i16::from_le_bytes([c[2], c[3]]), i16::from_le_bytes([c[4], c[5]]))
            })
            .collect();
        let timeout = if timeout != 0 { Some(Self::read_timespec(m, timeout)?) } else { None };
        let exists = self.ipc.sems.contains_key(&id);
        self.waited_on_removed(Kind::Sem, id, exists)?;
        let set = self.ipc.sems.get(&id).ok_or(Errno(libc::EINVAL))?;
        let n = set.sems.len();
        if ops.iter().any(|&(num, _, _)| num as usize >= n) {
            return err(libc::EFBIG);
        }
        let alter = ops.iter().any(|&(_, op, _)| op != 0);
        set.perm.check(if alter { 0o200 } else { 0o400 })?;
        let now = self.ipc_now(m);
        let pid = self.pid;
        match self.sem_perform(id, pid, &ops, now) {
            Ok(None) => {
                self.sem_dequeue(cur);
                self.sem_handoffs(id, &ops);
                self.sem_update_queue(id, now);
                Ok(0)
            }
            Ok(Some((num, zero))) => {
                if self.io_deadline(m, timeout) {
                    self.sem_dequeue(cur);
                    return err(libc::EAGAIN);
                }
                // Made again after a wake that did not serve it, it keeps its place.
                let q = self.ipc.pending.entry(id).or_default();
                if !q.iter().any(|p| p.tid == cur) {
                    q.push(Pending { tid: cur, pid, ops });
                }
                self.ipc.waiting.insert(cur, Waiting { kind: Kind::Sem, id, sem: Some((num, zero)) });
                self.block_keys.push(wait_key(Kind::Sem, id));
                err(crate::RESTART)
            }
            Err(e) => {
                self.sem_dequeue(cur);
                Err(e)
            }
        }
    }

    /// Performs `ops` on set `id` for process `pid` if they can all be done now: `None` then,
    /// or the semaphore the first that cannot waits on (and whether for zero); EAGAIN there
    /// with `IPC_NOWAIT`, ERANGE past `SEMVMX` or the undo bound.
    fn sem_perform(
        &mut self,
        id: i32,
        pid: u32,
        ops: &[(u16, i16, i16)],
        now: i64,
    ) -> Result<Option<(u16, bool)>, Errno> {
        let set = self.ipc.sems.get(&id).ok_or(Errno(libc::EINVAL))?;
        // Try them all on a copy of the values.
        let mut vals: Vec<i32> = set.sems.iter().map(|s| s.val).collect();
        let mut adj = self.ipc.undo.get(&pid).cloned().unwrap_or_default();
        for &(num, op, flg) in ops {
            let cur = *vals.get(num as usize).ok_or(Errno(libc::EFBIG))?;
            let blocked = if op == 0 { cur != 0 } else { cur + i32::from(op) < 0 };
            if blocked {
                if flg & IPC_NOWAIT as i16 != 0 {
                    return err(libc::EAGAIN);
                }
                return Ok(Some((num, op == 0)));
            }
            let v = cur + i32::from(op);
            if v > SEMVMX {
                return err(libc::ERANGE);
            }
            if flg & SEM_UNDO != 0 && op != 0 {
                let a = adj.entry((id, num)).or_insert(0);
                let na = *a - i32::from(op);
                if !(-SEMAEM - 1..=SEMAEM).contains(&na) {
                    return err(libc::ERANGE);
                }
                *a = na;
            }
            vals[num as usize] = v;
        }
        let set = self.ipc.sems.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
        for &(num, _, _) in ops {
            let s = &mut set.sems[num as usize];
            s.val = vals[num as usize];
            s.pid = pid;
        }
        set.otime = now;
        adj.retain(|_, a| *a != 0);
        if adj.is_empty() {
            self.ipc.undo.remove(&pid);
        } else {
            self.ipc.undo.insert(pid, adj);
        }
        Ok(None)
    }

    /// The running thread's successful `ops` on set `id` as hand-offs: a raise posts, a
    /// decrement takes.
    fn sem_handoffs(&mut self, id: i32, ops: &[(u16, i16, i16)]) {
        for &(num, op, _) in ops {
            let key = handoff_key(Kind::Sem, id, num);
            if op > 0 {
                self.handoffs.push((key, true));
            } else if op < 0 {
                self.handoffs.push((key, false));
            }
        }
    }

    /// Thread `tid` waits in no `semop` any more.
    fn sem_dequeue(&mut self, tid: u32) {
        if self.ipc.pending.is_empty() {
            return;
        }
        for q in self.ipc.pending.values_mut() {
            q.retain(|p| p.tid != tid);
        }
        self.ipc.pending.retain(|_, q| !q.is_empty());
    }

    /// The values of set `id` changed: the waiting calls are tried in the order they came,
    /// each one that can complete is completed for its thread, and after one that changed the
    /// values the queue is tried again from its start (Linux's `update_queue`); then every
    /// waiter is woken to return or wait again.
    fn sem_update_queue(&mut self, id: i32, now: i64) {
        'scan: while let Some(q) = self.ipc.pending.get(&id) {
            for p in q.clone() {
                // A thread whose call a signal ended (its entry is dropped then) or that is gone.
                if !self.threads.get(&p.tid).is_some_and(|t| t.in_call) {
                    continue;
                }
                let res = match self.sem_perform(id, p.pid, &p.ops, now) {
                    Ok(Some(_)) => continue,
                    Ok(None) => 0,
                    Err(e) => e.0,
                };
                self.sem_dequeue(p.tid);
                let alter = res == 0 && p.ops.iter().any(|o| o.1 != 0);
                self.ipc.served.insert(p.tid, (id, res, p.ops));
                if alter {
                    continue 'scan;
                }
            }
            break;
        }
        self.io_ready(wait_key(Kind::Sem, id));
    }

    /// A signal ends the running thread's blocked call: it leaves the queues; if its `semop`
    /// was completed for it meanwhile, that is the call's result (Linux returns it, the
    /// handler runs after), not EINTR.
    pub(crate) fn sem_interrupted(&mut self, tid: u32) -> Option<u64> {
        self.sem_dequeue(tid);
        let (set, res, ops) = self.ipc.served.remove(&tid)?;
        self.ipc.waiting.remove(&tid);
        if res != 0 {
            return Some((-(i64::from(res))) as u64);
        }
        self.sem_handoffs(set, &ops);
        Some(0)
    }

    /// How many threads wait on semaphore `num` of set `id` for it to grow (`zero`: to be 0).
    fn sem_waiters(&self, id: i32, num: u16, zero: bool) -> u64 {
        self.ipc
            .waiting
            .iter()
            .filter(|(tid, w)| {
                w.kind == Kind::Sem
                    && w.id == id
                    && w.sem == Some((num, zero))
                    // Still blocked on the set (an entry a signal cut short may linger).
                    && self.threads.get(tid).is_some_and(|t| {
                        t.in_call && t.wait.is_some() && t.io_keys.contains(&wait_key(Kind::Sem, id))
                    })
            })
            .count() as u64
    }

    /// The adjustments of every process on semaphore `num` (every one for `None`) of set `id`
    /// are forgotten: `SETVAL` and `SETALL` set the values anew.
    fn clear_undo(&mut self, id: i32, num: Option<u16>) {
        for adj in self.ipc.undo.values_mut() {
            adj.retain(|&(i, n), _| i != id || num.is_some_and(|x| x != n));
        }
        self.ipc.undo.retain(|_, a| !a.is_empty());
    }

    /// semctl(2): `arg` is the union's value (an int for `SETVAL`, a pointer otherwise).
    pub(crate) fn semctl(&mut self, m: &mut Machine, id: i32, num: i32, cmd: i32, arg: u64) -> SysResult {
        if id < 0 {
            return err(libc::EINVAL);
        }
        let now = self.ipc_now(m);
        match cmd {
            IPC_INFO | SEM_INFO => {
                // struct seminfo: semmap, semmni, semmns, semmnu, semmsl, semopm, semume, semusz,
                // semvmx, semaem (ints). SEM_INFO counts sets in semusz and semaphores in semaem.
                let (usz, aem) = if cmd == SEM_INFO {
                    (self.ipc.sems.len() as i32, self.ipc.sems.values().map(|s| s.sems.len() as i32).sum())
                } else {
                    (20, SEMAEM)
                };
                let v = [SEMMNS, SEMMNI, SEMMNS, SEMMNS, SEMMSL, SEMOPM as i32, SEMOPM as i32, usz, SEMVMX, aem];
                let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                m.write(arg, &b, false)?;
                Ok(self.ipc.max_index(Kind::Sem))
            }
            IPC_STAT | SEM_STAT | SEM_STAT_ANY => {
                let id =
                    if cmd == IPC_STAT { id } else { self.ipc.at_index(Kind::Sem, id).ok_or(Errno(libc::EINVAL))? };
                let s = self.ipc.sems.get(&id).ok_or(Errno(libc::EINVAL))?;
                if cmd != SEM_STAT_ANY {
                    s.perm.check(0o400)?;
                }
                let mut b = [0u8; 104];
                b[..48].copy_from_slice(&s.perm.bytes());
                put(&mut b, 48, s.otime as u64);
                put(&mut b, 64, s.ctime as u64);
                put(&mut b, 80, s.sems.len() as u64);
                m.write(arg, &b, false)?;
                Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
            }
            IPC_SET => {
                let mut b = [0u8; 48];
                m.read(arg, &mut b)?;
                let s = self.ipc.sems.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                s.perm.set(&b);
                s.ctime = now;
                Ok(0)
            }
            IPC_RMID => {
                self.ipc.sems.remove(&id).ok_or(Errno(libc::EINVAL))?;
                self.clear_undo(id, None);
                self.ipc.pending.remove(&id);
                // Its waiters wake to EIDRM.
                self.io_ready(wait_key(Kind::Sem, id));
                Ok(0)
            }
            GETVAL | GETPID | GETNCNT | GETZCNT | SETVAL => {
                let s = self.ipc.sems.get(&id).ok_or(Errno(libc::EINVAL))?;
                if num < 0 || num as usize >= s.sems.len() {
                    return err(libc::EINVAL);
                }
                s.perm.check(if cmd == SETVAL { 0o200 } else { 0o400 })?;
                let sem = &s.sems[num as usize];
                match cmd {
                    GETVAL => Ok(sem.val as u64),
                    GETPID => Ok(u64::from(sem.pid)),
                    GETNCNT => Ok(self.sem_waiters(id, num as u16, false)),
                    GETZCNT => Ok(self.sem_waiters(id, num as u16, true)),
                    _ => {
                        let val = arg as i32;
                        if !(0..=SEMVMX).contains(&val) {
                            return err(libc::ERANGE);
                        }
                        let pid = self.pid;
                        let s = self.ipc.sems.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                        s.sems[num as usize] = Sem { val, pid };
                        s.ctime = now;
                        self.clear_undo(id, Some(num as u16));
                        self.sem_update_queue(id, now);
                        Ok(0)
                    }
                }
            }
            GETALL | SETALL => {
                let s = self.ipc.sems.get(&id).ok_or(Errno(libc::EINVAL))?;
                s.perm.check(if cmd == SETALL { 0o200 } else { 0o400 })?;
                let n = s.sems.len();
                if cmd == GETALL {
                    let b: Vec<u8> = s.sems.iter().flat_map(|x| (x.val as u16).to_le_bytes()).collect();
                    m.write(arg, &b, false)?;
                    return Ok(0);
                }
                let mut b = vec![0u8; n * 2];
                m.read(arg, &mut b)?;
                let vals: Vec<i32> = b.chunks(2).map(|c| i32::from(u16::from_le_bytes([c[0], c[1]]))).collect();
                if vals.iter().any(|&v| v > SEMVMX) {
                    return err(libc::ERANGE);
                }
                let pid = self.pid;
                let s = self.ipc.sems.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                for (sem, v) in s.sems.iter_mut().zip(vals) {
                    *sem = Sem { val: v, pid };
                }
                s.ctime = now;
                self.clear_undo(id, None);
                self.sem_update_queue(id, now);
                Ok(0)
            }
            _ => err(libc::EINVAL),
        }
    }

    /// Process `pid` ends: its `SEM_UNDO` adjustments are applied (Linux's `exit_sem`: each
    /// value clamped to 0..=SEMVMX), and its threads wait on nothing any more.
    pub(crate) fn ipc_exit(&mut self, pid: u32) {
        let tids: Vec<u32> = self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).collect();
        for t in tids {
            self.ipc.waiting.remove(&t);
            self.ipc.served.remove(&t);
            self.sem_dequeue(t);
        }
        let Some(adj) = self.ipc.undo.remove(&pid) else { return };
        let mut sets = Vec::new();
        for ((id, num), a) in adj {
            let Some(s) = self.ipc.sems.get_mut(&id) else { continue };
            let Some(sem) = s.sems.get_mut(num as usize) else { continue };
            sem.val = (sem.val + a).clamp(0, SEMVMX);
            sem.pid = pid;
            if !sets.contains(&id) {
                sets.push(id);
            }
        }
        for id in sets {
            // The calls they allow are served; the time of the last operation stays (a
            // process's end is none).
            let otime = self.ipc.sems.get(&id).map_or(0, |s| s.otime);
            self.sem_update_queue(id, otime);
        }
    }

    /// msgget(2).
    pub(crate) fn msgget(&mut self, m: &Machine, key: i32, flg: i32) -> SysResult {
        let now = self.ipc_now(m);
        self.ipcget(Kind::Msg, key, flg, &|_, _| Ok(()), &mut |k, perm, id| {
            let q = MsgQueue {
                perm,
                msgs: Default::default(),
                cbytes: 0,
                qbytes: MSGMNB,
                stime: 0,
                rtime: 0,
                ctime: now,
                lspid: 0,
                lrpid: 0,
            };
            k.ipc.msgs.insert(id, q);
            Ok(())
        })
    }

    /// msgsnd(2): `struct msgbuf { long mtype; char mtext[msgsz]; }` at `msgp`; waits while
    /// the queue has no room for it (`msg_qbytes`), unless `IPC_NOWAIT` (EAGAIN).
    pub(crate) fn msgsnd(&mut self, m: &mut Machine, id: i32, msgp: u64, msgsz: u64, flg: i32) -> SysResult {
        let mtype = m.read_u64(msgp)? as i64;
        if msgsz > MSGMAX || id < 0 {
            return err(libc::EINVAL);
        }
        if mtype < 1 {
            return err(libc::EINVAL);
        }
        let mut text = vec![0u8; msgsz as usize];
        m.read(msgp + 8, &mut text)?;
        let exists = self.ipc.msgs.contains_key(&id);
        self.waited_on_removed(Kind::Msg, id, exists)?;
        let q = self.ipc.msgs.get(&id).ok_or(Errno(libc::EINVAL))?;
        q.perm.check(0o200)?;
        // Linux's `msg_fits_inqueue`: the bytes, and one byte's worth per message.
        if q.cbytes + msgsz > q.qbytes || q.msgs.len() as u64 + 1 > q.qbytes {
            if flg & IPC_NOWAIT != 0 {
                return err(libc::EAGAIN);
            }
            return self.ipc_block(m, Waiting { kind: Kind::Msg, id, sem: None }, None);
        }
        let now = self.ipc_now(m);
        let pid = self.pid;
        let q = self.ipc.msgs.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
        q.msgs.push_back(Msg { mtype, text });
        q.cbytes += msgsz;
        q.lspid = pid;
        q.stime = now;
        self.handoffs.push((handoff_key(Kind::Msg, id, 0), true));
        self.io_ready(wait_key(Kind::Msg, id));
        Ok(0)
    }

    /// msgrcv(2): the first message `msgtyp` selects (0: the first; > 0: the first of that type,
    /// or of another with `MSG_EXCEPT`; < 0: the first of the lowest type up to `-msgtyp`) into
    /// `msgp`; E2BIG if its text is longer than `msgsz` unless `MSG_NOERROR` (cut); waits for
    /// one unless `IPC_NOWAIT` (ENOMSG). `MSG_COPY` copies the message at index `msgtyp`.
    pub(crate) fn msgrcv(
        &mut self,
        m: &mut Machine,
        id: i32,
        msgp: u64,
        msgsz: u64,
        msgtyp: i64,
        flg: i32,
    ) -> SysResult {
        if (msgsz as i64) < 0 || id < 0 {
            return err(libc::EINVAL);
        }
        if flg & MSG_COPY != 0 && (flg & MSG_EXCEPT != 0 || flg & IPC_NOWAIT == 0) {
            return err(libc::EINVAL);
        }
        let exists = self.ipc.msgs.contains_key(&id);
        self.waited_on_removed(Kind::Msg, id, exists)?;
        let q = self.ipc.msgs.get(&id).ok_or(Errno(libc::EINVAL))?;
        q.perm.check(0o400)?;
        let found = if flg & MSG_COPY != 0 {
            (msgtyp >= 0 && (msgtyp as usize) < q.msgs.len()).then_some(msgtyp as usize)
        } else if msgtyp == 0 {
            (!q.msgs.is_empty()).then_some(0)
        } else if msgtyp > 0 {
            let except = flg & MSG_EXCEPT != 0;
            q.msgs.iter().position(|x| (x.mtype == msgtyp) != except)
        } else {
            let lim = msgtyp.checked_neg().unwrap_or(i64::MAX);
            q.msgs.iter().enumerate().filter(|(_, x)| x.mtype <= lim).min_by_key(|&(i, x)| (x.mtype, i)).map(|(i, _)| i)
        };
        let Some(i) = found else {
            if flg & IPC_NOWAIT != 0 {
                return err(libc::ENOMSG);
            }
            return self.ipc_block(m, Waiting { kind: Kind::Msg, id, sem: None }, None);
        };
        let msg = &q.msgs[i];
        if msg.text.len() as u64 > msgsz && flg & MSG_NOERROR == 0 {
            return err(libc::E2BIG);
        }
        let n = (msg.text.len() as u64).min(msgsz) as usize;
        m.write(msgp, &msg.mtype.to_le_bytes(), false)?;
        m.write(msgp + 8, &msg.text[..n], false)?;
        if flg & MSG_COPY != 0 {
            return Ok(n as u64);
        }
        let now = self.ipc_now(m);
        let pid = self.pid;
        let q = self.ipc.msgs.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
        if let Some(msg) = q.msgs.remove(i) {
            q.cbytes -= msg.text.len() as u64;
        }
        q.lrpid = pid;
        q.rtime = now;
        self.handoffs.push((handoff_key(Kind::Msg, id, 0), false));
        self.io_ready(wait_key(Kind::Msg, id));
        Ok(n as u64)
    }

    /// msgctl(2).
    pub(crate) fn msgctl(&mut self, m: &mut Machine, id: i32, cmd: i32, buf: u64) -> SysResult {
        if id < 0 {
            return err(libc::EINVAL);
        }
        let now = self.ipc_now(m);
        match cmd {
            IPC_INFO | MSG_INFO => {
                // struct msginfo: msgpool, msgmap, msgmax, msgmnb, msgmni, msgssz, msgtql (ints),
                // msgseg (unsigned short). MSG_INFO counts queues, messages and bytes in use.
                let (pool, map, tql) = if cmd == MSG_INFO {
                    let msgs: usize = self.ipc.msgs.values().map(|q| q.msgs.len()).sum();
                    let bytes: u64 = self.ipc.msgs.values().map(|q| q.cbytes).sum();
                    (self.ipc.msgs.len() as i32, msgs as i32, bytes as i32)
                } else {
                    ((MSGMNI * MSGMNB / 1024) as i32, (MSGMNI * MSGMNB / 16) as i32, (MSGMNI * MSGMNB / 16) as i32)
                };
                let v = [pool, map, MSGMAX as i32, MSGMNB as i32, MSGMNI as i32, 16, tql];
                let mut b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                b.extend_from_slice(&0xffffu16.to_le_bytes());
                b.extend_from_slice(&[0, 0]);
                m.write(buf, &b, false)?;
                Ok(self.ipc.max_index(Kind::Msg))
            }
            IPC_STAT | MSG_STAT | MSG_STAT_ANY => {
                let id =
                    if cmd == IPC_STAT { id } else { self.ipc.at_index(Kind::Msg, id).ok_or(Errno(libc::EINVAL))? };
                let q = self.ipc.msgs.get(&id).ok_or(Errno(libc::EINVAL))?;
                if cmd != MSG_STAT_ANY {
                    q.perm.check(0o400)?;
                }
                let mut b = [0u8; 120];
                b[..48].copy_from_slice(&q.perm.bytes());
                put(&mut b, 48, q.stime as u64);
                put(&mut b, 56, q.rtime as u64);
                put(&mut b, 64, q.ctime as u64);
                put(&mut b, 72, q.cbytes);
                put(&mut b, 80, q.msgs.len() as u64);
                put(&mut b, 88, q.qbytes);
                b[96..100].copy_from_slice(&q.lspid.to_le_bytes());
                b[100..104].copy_from_slice(&q.lrpid.to_le_bytes());
                m.write(buf, &b, false)?;
                Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
            }
            IPC_SET => {
                let mut b = [0u8; 120];
                m.read(buf, &mut b)?;
                let qbytes = u64::from_le_bytes(b[88..96].try_into().unwrap_or_default());
                let q = self.ipc.msgs.get_mut(&id).ok_or(Errno(libc::EINVAL))?;
                // Raising it past MSGMNB needs CAP_SYS_RESOURCE, which the guest has not.
                if qbytes > MSGMNB {
                    return err(libc::EPERM);
                }
                q.perm.set(&b);
                q.qbytes = qbytes;
                q.ctime = now;
                // Senders waiting for room look again.
                self.io_ready(wait_key(Kind::Msg, id));
                Ok(0)
            }
            IPC_RMID => {
                self.ipc.msgs.remove(&id).ok_or(Errno(libc::EINVAL))?;
                self.io_ready(wait_key(Kind::Msg, id));
                Ok(0)
            }
            _ => err(libc::EINVAL),
        }
    }
}
