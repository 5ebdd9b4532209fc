//! The system-call layer driven directly, without emulation: random system-call numbers and
//! arguments (small integers, pointers into the guest's stack, pointers nowhere, huge values)
//! fed to `Kernel::syscall` on a started guest. It must never panic; every call ends with a
//! result, a block, a yield or an exit. `FERRITE_FUZZ_CALLS` sets how many calls to make.

mod common;

use common::*;
use emu::{Machine, MachineConfig, Reg};
use syscalls::{Kernel, KernelConfig};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_system_calls_through_the_kernel_never_panic() {
    let calls: u64 = std::env::var("FERRITE_FUZZ_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let program = std::fs::read(guest("exit_status")).unwrap();
    let cwd = scratch();
    let pm = scratch();
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    let mut k = Kernel::new(KernelConfig {
        seed: 1,
        pm_mount: "/mnt/pmem0".into(),
        pm_dir: pm.path().to_path_buf(),
        cwd: cwd.path().to_path_buf(),
        max_memory: 1 << 30,
        exe: "/fuzz".into(),
        cpus: 2,
        max_threads: 16,
        discard_output: true,
        max_open_files: 64,
        remap_pm: false,
        private_cwd: false,
        track_durable: false,
        hash_inputs: true,
        trace_syscalls: false,
    });
    syscalls::exec(&mut m, &mut k, &program, &[b"fuzz".to_vec()], &[]).unwrap();
    let sp = m.reg(Reg::RSP);
    // Standard input must not be the test runner's.
    m.set_reg(Reg::RAX, 3);
    m.set_reg(Reg::RDI, 0);
    k.syscall(&mut m);
    let mut rng = Rng(0x5eed);
    let arg = |rng: &mut Rng| match rng.next() % 6 {
        0 => rng.next() % 16,
        1 => rng.next() % 4096,
        2 => sp.wrapping_sub(rng.next() % 65536),
        3 => 0x10,
        4 => (-((rng.next() % 8) as i64)) as u64,
        _ => rng.next(),
    };
    for i in 0..calls {
        let nr = rng.next() % 460;
        // Blocking on the real standard input is the only way to stall the harness itself.
        if nr == 0 || nr == 19 || nr == 17 {
            continue;
        }
        let regs = [Reg::RDI, Reg::RSI, Reg::RDX, Reg::R10, Reg::R8, Reg::R9];
        let args: Vec<u64> = regs.iter().map(|_| arg(&mut rng)).collect();
        m.set_reg(Reg::RAX, nr);
        for (r, v) in regs.iter().zip(&args) {
            m.set_reg(*r, *v);
        }
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| k.syscall(&mut m)));
        assert!(res.is_ok(), "call {i}: system call {nr} with {args:x?} panicked");
    }
}
