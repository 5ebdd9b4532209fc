//! Restores that copy back only the pages written since a snapshot (`emu::dirty`) put memory
//! back exactly: several live snapshots of one machine restored in any order, with pages written
//! between them by the guest's stores (Unicorn's generated code), by ferrite on the kernel's
//! behalf (`Machine::write`, forced into read-only code too) and by the host kernel (a pipe
//! `read()` into guest memory), pages first touched after a snapshot (zero again once restored),
//! and runs on after each restore. Each state is compared whole with a model of the bytes. Where
//! the kernel lacks the tracking the same checks hold for the page comparison it falls back to.

use emu::{Backing, Exit, HostBlock, Machine, MachineConfig, Perm, Reg, Region};

const CODE: u64 = 0x10000;
const DATA: u64 = 0x400000;
const PAGES: u64 = 1024;
const LEN: u64 = PAGES * 4096;

/// `mov [rdi], rax; syscall`: one 8-byte store by generated code, then a stop.
const STORE: [u8; 5] = [0x48, 0x89, 0x07, 0x0f, 0x05];

struct Rig {
    m: Machine,
    data: Vec<u8>,
    code: Vec<u8>,
    rng: u64,
}

impl Rig {
    fn new() -> Rig {
        let mut m = Machine::new(MachineConfig::default()).unwrap();
        let anon = |start: u64, len: u64, perm| Region {
            start,
            end: start + len,
            perm,
            block: HostBlock::anon(len as usize).unwrap(),
            block_off: 0,
            backing: Backing::Anon { label: None },
            on_fork: Default::default(),
        };
        m.map(anon(CODE, 4096, Perm::RX)).unwrap();
        m.map(anon(DATA, LEN, Perm::RW)).unwrap();
        m.write(CODE, &STORE, true).unwrap();
        let mut code = vec![0u8; 4096];
        code[..STORE.len()].copy_from_slice(&STORE);
        Rig { m, data: vec![0; LEN as usize], code, rng: 0x9e37_79b9_7f4a_7c15 }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// `n` writes at pseudo-random places, each by one of the three writers.
    fn scribble(&mut self, n: usize) {
        for _ in 0..n {
            let r = self.next();
            // Mostly a few hot pages, sometimes anywhere (a page touched for the first time).
            let page = if r.is_multiple_of(4) { (r >> 8) % PAGES } else { (r >> 8) % 8 };
            let off = page * 4096 + ((r >> 20) % 4088);
            let value = self.next();
            match (r >> 40) % 3 {
                0 => {
                    self.m.set_reg(Reg::RDI, DATA + off);
                    self.m.set_reg(Reg::RAX, value);
                    self.m.set_reg(Reg::RIP, CODE);
                    assert_eq!(self.m.run(), Exit::Syscall);
                }
                1 => self.m.write(DATA + off, &value.to_le_bytes(), false).unwrap(),
                _ => self.kernel_write(DATA + off, &value.to_le_bytes()),
            }
            self.data[off as usize..off as usize + 8].copy_from_slice(&value.to_le_bytes());
        }
        // Code changed by force now and then (a JIT, the loader): never at the store itself.
        if self.next().is_multiple_of(3) {
            let at = 64 + (self.next() % 64) as usize;
            let byte = self.next() as u8;
            self.m.write(CODE + at as u64, &[byte], true).unwrap();
            self.code[at] = byte;
        }
    }

    /// The host kernel writes `bytes` at guest address `addr`: a pipe read into its host memory.
    fn kernel_write(&self, addr: u64, bytes: &[u8]) {
        let r = self.m.mem.find(addr).unwrap();
        // SAFETY: `addr..addr+len` lies in the region's host memory (the caller stays in a page).
        let host = unsafe { r.block.as_ptr().add(r.block_off + (addr - r.start) as usize) };
        let mut fds = [0i32; 2];
        // SAFETY: plain system calls on a pipe made and closed here; `host` is valid for `len`.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert_eq!(libc::write(fds[1], bytes.as_ptr().cast(), bytes.len()), bytes.len() as isize);
            assert_eq!(libc::read(fds[0], host.cast(), bytes.len()), bytes.len() as isize);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }

    fn check(&self, what: &str) {
        let mut got = vec![0u8; LEN as usize];
        self.m.read(DATA, &mut got).unwrap();
        if let Some(i) = got.iter().zip(&self.data).position(|(a, b)| a != b) {
            panic!("{what}: data differs first at page {} byte {}", i / 4096, i % 4096);
        }
        let mut code = vec![0u8; 4096];
        self.m.read(CODE, &mut code).unwrap();
        assert!(code == self.code, "{what}: code differs");
    }
}

#[test]
fn live_snapshots_restore_exactly_in_any_order() {
    eprintln!("dirty pages found by: {}", emu::dirty::mode());
    let mut rig = Rig::new();
    let mut snaps = Vec::new();
    for i in 0..4 {
        rig.scribble(200);
        rig.check(&format!("before snapshot {i}"));
        let c = rig.m.checkpoint().expect("a snapshot");
        snaps.push((c, rig.data.clone(), rig.code.clone()));
    }
    rig.scribble(200);
    for (step, &i) in [2usize, 0, 3, 1, 1, 0, 2, 3].iter().enumerate() {
        let (c, data, code) = &snaps[i];
        rig.m.restore(c).unwrap();
        rig.data = data.clone();
        rig.code = code.clone();
        rig.check(&format!("step {step}: restored snapshot {i}"));
        // The restored machine runs on; the code's store still works where it was.
        rig.scribble(150);
        rig.check(&format!("step {step}: after running on from snapshot {i}"));
        if step == 4 {
            // A snapshot taken after restores is as good as the others.
            let c = rig.m.checkpoint().expect("a snapshot");
            snaps.push((c, rig.data.clone(), rig.code.clone()));
        }
    }
    let (c, data, code) = &snaps[4];
    rig.m.restore(c).unwrap();
    rig.data = data.clone();
    rig.code = code.clone();
    rig.check("the snapshot taken after restores");
}

/// The block of a snapshot dropped and a new one taken: the remaining snapshots are unaffected
/// (stamps are per block and per generation, not per snapshot).
#[test]
fn dropping_a_snapshot_leaves_the_others_exact() {
    let mut rig = Rig::new();
    rig.scribble(100);
    let first = (rig.m.checkpoint().unwrap(), rig.data.clone(), rig.code.clone());
    rig.scribble(100);
    drop(rig.m.checkpoint().unwrap());
    rig.scribble(100);
    rig.m.restore(&first.0).unwrap();
    rig.data = first.1.clone();
    rig.code = first.2.clone();
    rig.check("restored after another snapshot was dropped");
}

/// A page untouched at snapshot S, written and saved by snapshot T, written again: restoring S
/// makes it a hole again (zeros), and restoring T must still bring back T's bytes although the
/// hole has no page-table bits left to say it was written.
#[test]
fn a_page_made_a_hole_again_still_differs_from_later_snapshots() {
    let mut rig = Rig::new();
    let page = DATA + 700 * 4096;
    let s = rig.m.checkpoint().unwrap();
    rig.m.write(page, &[1; 8], false).unwrap();
    let t = rig.m.checkpoint().unwrap();
    rig.m.write(page, &[2; 8], false).unwrap();
    // Not read in between: a read would map the zero page, which counts as written.
    rig.m.restore(&s).unwrap();
    rig.m.restore(&t).unwrap();
    assert_eq!(rig.m.read_u64(page).unwrap(), 0x0101_0101_0101_0101, "restored to T");
    rig.m.restore(&s).unwrap();
    assert_eq!(rig.m.read_u64(page).unwrap(), 0, "restored to S again");
}

/// A snapshot taken while an earlier one lives copies only the pages written since the newest
/// of them and shares the others' copies (where the kernel tracks writes; comparing, it copies
/// every page). Shared copies restore exactly, also for a snapshot taken after going back to an
/// older one (it shares with the newest, whose pages the restore rewrote), and after the
/// snapshot it shared with is dropped.
#[test]
fn a_snapshot_copies_only_the_pages_written_since_the_last_one() {
    let tracked = emu::dirty::mode() == "uffd-wp";
    let mut rig = Rig::new();
    for p in 0..PAGES {
        let v = [p as u8 ^ 0x5a; 8];
        rig.m.write(DATA + p * 4096, &v, false).unwrap();
        rig.data[(p * 4096) as usize..(p * 4096 + 8) as usize].copy_from_slice(&v);
    }
    let a = (rig.m.checkpoint().unwrap(), rig.data.clone(), rig.code.clone());
    assert!(a.0.saved_bytes() >= LEN as usize, "{}", a.0.saved_bytes());
    rig.scribble(3);
    let b = (rig.m.checkpoint().unwrap(), rig.data.clone(), rig.code.clone());
    let copied = b.0.saved_bytes();
    if tracked {
        // The three writes' pages and perhaps the code page, nothing else.
        assert!(copied <= 4 * 4096, "{copied} bytes copied");
    } else {
        assert!(copied >= LEN as usize, "{copied} bytes copied");
    }
    rig.m.restore(&a.0).unwrap();
    (rig.data, rig.code) = (a.1.clone(), a.2.clone());
    rig.check("restored A");
    rig.scribble(50);
    let c = (rig.m.checkpoint().unwrap(), rig.data.clone(), rig.code.clone());
    if tracked {
        assert!(c.0.saved_bytes() < LEN as usize / 4, "{} bytes copied", c.0.saved_bytes());
    }
    rig.scribble(50);
    for (name, s) in [("B", &b), ("C", &c), ("A", &a), ("C", &c)] {
        rig.m.restore(&s.0).unwrap();
        (rig.data, rig.code) = (s.1.clone(), s.2.clone());
        rig.check(&format!("restored {name}"));
        rig.scribble(20);
    }
    drop(b);
    let d = (rig.m.checkpoint().unwrap(), rig.data.clone(), rig.code.clone());
    drop(a);
    rig.scribble(100);
    for (name, s) in [("C", &c), ("D", &d)] {
        rig.m.restore(&s.0).unwrap();
        (rig.data, rig.code) = (s.1.clone(), s.2.clone());
        rig.check(&format!("restored {name} after A and B were dropped"));
    }
}
