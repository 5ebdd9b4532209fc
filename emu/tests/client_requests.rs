//! Valgrind client requests executed by the machine: the answer lands in RDX before the
//! `xchg rbx, rbx` runs, requests nobody answers keep their default, and pmemcheck's annotations
//! reach the observer as events, split where a range leaves PM.

use std::cell::RefCell;
use std::rc::Rc;

use emu::client::{PREAMBLE, XCHG_RBX};
use emu::events::{Event, EventKind, Interest, Observer};
use emu::pm::{device_addr, PmDevice};
use emu::{Backing, Exit, HostBlock, Machine, MachineConfig, Perm, Reg, Region};

const CODE: u64 = 0x10000;
const DATA: u64 = 0x20000;
const PM: u64 = 0x30000;

type Seen = Rc<RefCell<Vec<(EventKind, u64, u64, u32, u64)>>>;

struct Recorder(Seen);

impl Observer for Recorder {
    fn interest(&self) -> Interest {
        Interest::SYNC.union(Interest::PERSIST)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        if !matches!(ev.kind, EventKind::Flush(_) | EventKind::Fence(_)) {
            self.0.borrow_mut().push((ev.kind, ev.addr, ev.dev, ev.size, ev.new));
        }
    }
}

fn region(start: u64, len: u64, perm: Perm, backing: Backing) -> Region {
    Region {
        start,
        end: start + len,
        perm,
        block: HostBlock::anon(len as usize).unwrap(),
        block_off: 0,
        backing,
        on_fork: Default::default(),
    }
}

/// `mov rax, args; mov rdx, default; <magic sequence>; mov reg, rdx` (reg: r8 + `save`).
fn request(code: &mut Vec<u8>, args: u64, default: u64, save: u8) {
    code.extend_from_slice(&[0x48, 0xb8]);
    code.extend_from_slice(&args.to_le_bytes());
    code.extend_from_slice(&[0x48, 0xba]);
    code.extend_from_slice(&default.to_le_bytes());
    code.extend_from_slice(&PREAMBLE);
    code.extend_from_slice(&XCHG_RBX);
    code.extend_from_slice(&[0x49, 0x89, 0xd0 + save]);
}

#[test]
fn requests_are_answered_in_rdx_and_annotations_become_events() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.map(region(CODE, 0x1000, Perm::RX, Backing::Anon { label: None })).unwrap();
    m.map(region(DATA, 0x1000, Perm::RW, Backing::Anon { label: None })).unwrap();
    m.map(region(PM, 0x1000, Perm::RW, Backing::Pm { path: "/pool".into(), file_id: 1, offset: 0 })).unwrap();
    let seen: Seen = Rc::default();
    m.set_observer(Box::new(Recorder(seen.clone())));

    let pc = |i: u64| 0x5043_0000 + i;
    let requests: [[u64; 6]; 9] = [
        [0x1001, 0, 0, 0, 0, 0],              // RUNNING_ON_VALGRIND
        [0x4d43_0008, DATA, DATA, 4, 0, 0],   // memcheck's GET_VBITS: not answered
        [pc(0x12), 0, 0, 0, 0, 0],            // START_TX
        [pc(0x16), PM + 8, 16, 0, 0, 0],      // ADD_TO_TX, in PM
        [pc(0x1c), PM + 64, 8, 0, 0, 0],      // ADD_TO_GLOBAL_TX_IGNORE
        [pc(0x11), PM - 0x10, 0x20, 0, 0, 0], // SET_CLEAN across PM's start
        [pc(0x14), 0, 0, 0, 0, 0],            // END_TX
        [pc(0), DATA + 0x800, 4, 0, 0, 0],    // REGISTER_PMEM_MAPPING
        [pc(3), DATA + 0x800, 4, 0, 0, 0],    // CHECK_IS_PMEM_MAPPING
    ];
    let mut code = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let at = DATA + 64 * i as u64;
        let bytes: Vec<u8> = r.iter().flat_map(|w| w.to_le_bytes()).collect();
        m.write(at, &bytes, true).unwrap();
        request(&mut code, at, 0x77, 4 + (i % 4) as u8);
    }
    code.extend_from_slice(&[0x0f, 0x05]); // syscall
    m.write(CODE, &code, true).unwrap();
    m.set_reg(Reg::RIP, CODE);
    assert_eq!(m.run(), Exit::Syscall);

    // The last four requests' results are in r13, r14, r15 and r12.
    let got: Vec<u64> = [Reg::R13, Reg::R14, Reg::R15, Reg::R12].iter().map(|r| m.reg(*r)).collect();
    assert_eq!(got, vec![0x77, 0x77, 0x77, 1], "SET_CLEAN, END_TX, REGISTER keep the default; CHECK is 1");
    let dev = device_addr(1, 0);
    let events = seen.borrow().clone();
    assert_eq!(
        events,
        vec![
            (EventKind::TxBegin, 0, 0, 0, 0),
            (EventKind::TxAdd, PM + 8, dev + 8, 16, 0),
            (EventKind::TxIgnore, PM + 64, dev + 64, 8, 0),
            (EventKind::SetClean, PM - 0x10, 0, 0x10, 0),
            (EventKind::SetClean, PM, dev, 0x10, 0),
            (EventKind::TxEnd, 0, 0, 0, 0),
            (EventKind::PmRegister, DATA + 0x800, 0, 4, 0),
        ]
    );
}

#[test]
fn running_on_valgrind_is_one_and_other_tools_are_absent() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.map(region(CODE, 0x1000, Perm::RX, Backing::Anon { label: None })).unwrap();
    m.map(region(DATA, 0x1000, Perm::RW, Backing::Anon { label: None })).unwrap();
    // No observer: the answers do not depend on one.
    let requests: [[u64; 6]; 4] = [
        [0x1001, 0, 0, 0, 0, 0],
        [0x4d43_0008, DATA, DATA, 4, 0, 0], // memcheck: GET_VBITS, default 0
        [0x4452_0001, 0, 0, 0, 0, 0],       // DRD, default 0
        [0x4847_012e, DATA, DATA, 4, 0, 0], // helgrind: GET_ABITS, default -2
    ];
    let defaults = [0, 0, 0, u64::MAX - 1];
    let mut code = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let at = DATA + 64 * i as u64;
        let bytes: Vec<u8> = r.iter().flat_map(|w| w.to_le_bytes()).collect();
        m.write(at, &bytes, true).unwrap();
        request(&mut code, at, defaults[i], 4 + i as u8);
    }
    // The same sequence without its preamble's first rotation is no request.
    let at = DATA + 0x400;
    m.write(at, &0x1001u64.to_le_bytes(), true).unwrap();
    let mut plain = Vec::new();
    request(&mut plain, at, 5, 0);
    let rol = plain.iter().position(|&b| b == 0xc1).unwrap() - 1;
    plain.drain(rol..rol + 4);
    code.extend_from_slice(&plain);
    code.extend_from_slice(&[0x0f, 0x05]);
    m.write(CODE, &code, true).unwrap();
    m.set_reg(Reg::RIP, CODE);
    assert_eq!(m.run(), Exit::Syscall);
    assert_eq!(m.reg(Reg::R8), 5, "the broken sequence leaves RDX alone");
    assert_eq!([m.reg(Reg::R12), m.reg(Reg::R13), m.reg(Reg::R14), m.reg(Reg::R15)], [1, 0, 0, u64::MAX - 1]);
}
