//! Signals as Linux delivers them: guest handlers get synchronous faults first (SIGSEGV on an
//! alternate stack leaving by siglongjmp, SIGFPE with FPE_INTDIV, a handler editing the saved
//! RIP and returning through rt_sigreturn, SA_RESETHAND, FP state preserved across a handler,
//! a stack overflow caught on the alternate stack); without a handler a stack overflow is a
//! `fault` finding at the recursion.

mod common;

use common::*;

#[test]
fn guest_signal_handlers_behave_as_natively() {
    let prog = guest("sig_handlers");
    let native = native(&prog, &[], &[]);
    let emu = emulated(&prog, &[], &[]);
    assert_same_stdout(&native, &emu);
    assert_same_status(&native, &emu);
    emu.assert_code(0);
    let out = emu.stdout_str();
    for expected in [
        "handler: signal 11 on alternate stack",
        "2. back from SIGFPE, si_code=FPE_INTDIV",
        "3. skipped the faulting store, handler ran 1 time(s)",
        "4. SIGUSR1 handled 1 time(s), disposition now SIG_DFL",
        "6. stack overflow caught on the alternate stack",
    ] {
        assert!(out.contains(expected), "missing `{expected}`\n{}", emu.describe());
    }
}

#[test]
fn handled_faults_are_not_findings() {
    let run = Ferrite::run(&guest("sig_handlers")).opts(&["--report", "r.json"]).go();
    run.assert_code(0);
    assert_eq!(get(&run.json("r.json"), "findings"), &serde_json::json!([]));
}

#[test]
fn unhandled_stack_overflow_is_a_fault_at_the_recursion() {
    let line = marker_line("stack_overflow.c", "/* OVERFLOW */");
    let run = Ferrite::run(&guest("stack_overflow")).opts(&["--report", "r.json"]).go();
    run.assert_code(139);
    let report = run.json("r.json");
    let f = &report["findings"][0];
    assert_eq!(get(f, "analysis"), "fault");
    assert_eq!(get(f, "kind"), "SIGSEGV");
    assert!(get(f, "message").as_str().unwrap().contains("stack overflow"), "{f}");
    assert_eq!(get(f, "locations.0.line").as_u64(), Some(u64::from(line)));
    assert!(run.stderr.contains("more frames"), "long backtraces are cut on the terminal:\n{}", run.stderr);
}
