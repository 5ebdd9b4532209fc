//! Signals as Linux delivers them: guest handlers get synchronous faults first (SIGSEGV on an
//! alternate stack leaving by siglongjmp, SIGFPE with FPE_INTDIV, a handler editing the saved
//! RIP and returning through rt_sigreturn, SA_RESETHAND, FP state preserved across a handler,
//! a stack overflow caught on the alternate stack); without a handler a stack overflow is a
//! `fault` finding at the recursion. Repeated SIGFPE, SIGPIPE and XGETBV/WRPKRU as natively.
//! signalfd with epoll (guests/src/sig_signalfd.c): blocked signals read as `signalfd_siginfo`,
//! readiness, blocking reads, re-masking and the errors of man 2 signalfd, as natively.
//! sigqueue and real-time queues (guests/src/sig_queue.c): queued instances with their
//! `si_value`, in order, through sigtimedwait, a signalfd and a handler, as natively.
//! Pending signals (guests/src/sig_pending.c): an ignored action discards a pending signal
//! everywhere in the process; an ignored pending signal holds back none behind it; a signal sent
//! to a thread stays that thread's, one sent to the process goes to a thread that does not block
//! it and is pending for every thread, as natively.

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

/// What a hostile probe found: a second SIGFPE after a handled one became a double fault
/// (`SIGSEGV: CPU exception 8`); a write to a pipe without readers failed with EPIPE but raised
/// no SIGPIPE; XGETBV answered with an XCR0 listing PKRU while CPUID said the OS had not enabled
/// XSAVE, and WRPKRU then faulted with SIGSEGV. The guest prints whether each agrees with CPUID
/// (not the host's bits), then dies of a default SIGPIPE: output and status match the native run.
#[test]
fn repeated_faults_sigpipe_and_xgetbv_behave_as_natively() {
    let prog = guest("sig_repeat");
    let native = native(&prog, &[], &[]);
    let emu = emulated(&prog, &[], &[]);
    assert_same_stdout(&native, &emu);
    assert_same_status(&native, &emu);
    emu.assert_code(128 + 13);
    let out = emu.stdout_str();
    for expected in [
        "1. SIGFPE handled 3 time(s)",
        "2. handled: write -1 (EPIPE), SIGPIPE handled 1 time(s)",
        "2. ignored: write -1 (EPIPE), handler ran 1 time(s)",
        "3. where refused, by SIGILL: yes",
    ] {
        assert!(out.contains(expected), "missing `{expected}`\n{}", emu.describe());
    }
    assert!(!out.contains("DISAGREES") && !out.contains("still alive"), "{}", emu.describe());
}

/// `name`, static and dynamic, prints what it prints natively and exits as natively, with each
/// of `lines` in its output.
fn as_natively(name: &str, lines: &[&str]) {
    for name in [name.to_string(), format!("{name}.dyn")] {
        let prog = guest(&name);
        let nat = native(&prog, &[], &[]);
        nat.assert_code(0);
        let emu = emulated(&prog, &[], &[]);
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        let out = emu.stdout_str();
        for line in lines {
            assert!(out.contains(line), "missing `{line}`:\n{}", emu.describe());
        }
    }
}

#[test]
fn signalfd_with_epoll_reads_blocked_signals_as_natively() {
    as_natively(
        "sig_signalfd",
        &[
            "read with nothing pending: EAGAIN\n",
            "epoll_wait wakes for SIGALRM: ok\n",
            "child: signal 17 code 1 status 5 pid ok 1\n",
            "blocking read: 128 bytes, signal 15 from child 1\n",
            "after re-mask: 128 bytes, signal 12\n",
            "failures: 0\n",
        ],
    );
    let hash = |seed: &str| {
        let run = Ferrite::run(&guest("sig_signalfd")).opts(&["--seed", seed, "--report", "r.json"]).go();
        run.assert_code(0);
        get(&run.json("r.json"), "run.trace_hash").as_str().unwrap().to_string()
    };
    assert_eq!(hash("4"), hash("4"), "same seed, same run");
}

#[test]
fn queued_real_time_signals_keep_their_values_as_natively() {
    as_natively(
        "sig_queue",
        &[
            "sigtimedwait: signal 10 code -1 value 1 from self 1\nsigtimedwait: SIGRTMIN+0 code -1 value 101",
            "SIGRTMIN+2 code -1 value 203 from self 1\nthen: EAGAIN\n",
            "signalfd: SIGRTMIN+0 code -1 int 8 ptr 8\n",
            "handler: count 1 value 4242 code -1\n",
            "rt_tgsigqueueinfo: 0, handler count 2 value 99\n",
            "SI_USER to another process: EPERM\n",
            "raising the hard limit: Operation not permitted\n",
            "RLIMIT_SIGPENDING 16: at most 16 queued, then EAGAIN\nkill beyond it: 0\n",
            "after SIG_IGN: pending 0, sigqueue 1\n",
        ],
    );
    // The guest's processes are the only ones of its user in the machine: the limit is exact.
    let emu = emulated(&guest("sig_queue"), &[], &[]);
    assert!(emu.stderr.contains("sig_queue: 16 signals queued under RLIMIT_SIGPENDING 16\n"), "{}", emu.describe());
}

/// A signal sent to one thread (`tgkill`) is that thread's: another thread's signalfd neither
/// polls readable for it nor reads it, while one sent to the process is read (as natively).
#[test]
fn a_signalfd_reads_the_process_signals_not_another_threads() {
    let prog = guest("sig_signalfd_thread");
    let nat = native(&prog, &[], &[]);
    nat.assert_code(0);
    for seed in ["0", "1"] {
        let emu = Ferrite::run(&prog).opts(&["--seed", seed]).go();
        assert_same_stdout(&nat, &emu);
    }
    assert!(nat.stdout_str().contains("another thread's SIGUSR1: poll 0, read EAGAIN\n"), "{}", nat.describe());
}

/// Pending signals as Linux keeps them (guests/src/sig_pending.c), static and dynamic, under
/// several seeds: each line as natively.
#[test]
fn pending_signals_are_kept_discarded_and_directed_as_natively() {
    as_natively(
        "sig_pending",
        &[
            "1. pending before SIG_IGN: USR1 1 USR2 1; after: USR1 0 USR2 0; handlers ran 0 0\n",
            "1. after SIG_DFL: URG pending 0, USR1 pending 1\n",
            "1. other thread's SIGUSR1 pending: before 1, after SIG_IGN 0; handler ran 0\n",
            "2. ignored SIGUSR1 kept while blocked: 1; SIGUSR2 handled at the unblock: 1\n",
            "2. child with SIGTERM behind an ignored SIGUSR1: killed by 15\n",
            "3. raise of a blocked SIGUSR1: alive, pending 1, sigwaitinfo 10",
            "3. kill(getpid(), SIGUSR2): handled 1 time(s), by the other thread: yes\n",
            "3. child sending itself SIGTERM, blocked by main only: killed by 15\n",
            "3. child alive with SIGTERM pending 1\n3. child with a thread-directed SIGTERM: killed by 15\n",
            "4. other thread sees USR1 1 USR2 0, its sigwait takes 10; main then has USR1 0 USR2 1\n",
            "done\n",
        ],
    );
    let prog = guest("sig_pending");
    let nat = native(&prog, &[], &[]);
    for seed in ["1", "2", "3"] {
        let emu = Ferrite::run(&prog).opts(&["--seed", seed]).go();
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
    }
}
