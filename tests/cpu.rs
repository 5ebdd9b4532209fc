//! The CPU the guest sees: privileged instructions fault as in user mode (the guest really runs at
//! ring 0 inside Unicorn), CPUID shows the persistence instructions and hides what would leak the
//! host (RDRAND, RDSEED) or cannot run (AVX), RDTSC follows the virtual clock, and an RDRAND
//! executed anyway is answered from the seed.

mod common;

use common::*;

#[test]
fn privileged_instruction_is_a_sigsegv_at_its_line_as_natively() {
    let prog = guest("privileged");
    let line = marker_line("privileged.c", "/* PRIVILEGED */");
    let native = native(&prog, &[], &[]);
    let run = Ferrite::run(&prog).opts(&["--report", "r.json"]).go();
    assert_same_status(&native, &run);
    assert_same_stdout(&native, &run);
    run.assert_code(139);
    let r = run.json("r.json");
    assert_eq!(r["findings"][0]["kind"], "SIGSEGV");
    assert_eq!(r["findings"][0]["locations"][0]["line"].as_u64(), Some(u64::from(line)));
}

#[test]
fn cpuid_rdtsc_and_rdrand_are_virtual_and_seeded() {
    let prog = guest("cpu_probe");
    let a = Ferrite::run(&prog).opts(&["--seed", "1"]).go();
    let b = Ferrite::run(&prog).opts(&["--seed", "1"]).go();
    let c = Ferrite::run(&prog).opts(&["--seed", "2"]).go();
    a.assert_code(0);
    let out = a.stdout_str();
    assert!(out.starts_with("clwb 1 clflushopt 1 sse4.2 1 avx 0 rdrand 0 rdseed 0\n"), "{out}");
    assert!(out.contains("rdtsc advances: yes"), "{out}");
    assert!(out.contains("rdrand ok 1"), "{out}");
    assert_eq!(a.stdout, b.stdout, "same seed, same RDRAND");
    assert_ne!(a.stdout, c.stdout, "another seed, another RDRAND");
}
