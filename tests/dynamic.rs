//! Dynamically linked programs: the host's ld.so is loaded as the interpreter, maps libc and
//! libm through the system-call layer, and the programs print exactly what they print natively
//! (floats through the PLT, C++ exceptions through libstdc++ and libgcc_s, threads through
//! libc's pthreads, signal handlers). Faults are reported at the program's own lines, with
//! library frames named from the libraries' symbols.

mod common;

use common::*;

#[test]
fn dynamic_guests_behave_as_natively() {
    for (name, args) in [
        ("libc_workout.dyn", vec!["alpha", "beta"]),
        ("setjmp_longjmp.dyn", vec![]),
        ("cxx_exceptions.dyn", vec![]),
        ("thr_mutex.dyn", vec![]),
        ("thr_condvar.dyn", vec![]),
        ("sig_handlers.dyn", vec![]),
        ("cpu_bound.dyn", vec!["0.01"]),
    ] {
        let prog = guest(name);
        let env = [("FERRITE_TEST", "hello")];
        let native = native(&prog, &args, &env);
        let emu = emulated(&prog, &args, &env);
        assert_same_stdout(&native, &emu);
        assert_same_status(&native, &emu);
    }
}

#[test]
fn dynamic_fault_is_reported_at_the_programs_line_with_library_frames() {
    let line = marker_line("thr_crash.c", "/* THREAD FAULT */");
    let run = Ferrite::run(&guest("thr_crash.dyn")).opts(&["--report", "r.json"]).go();
    run.assert_code(139);
    let r = run.json("r.json");
    let f = &r["findings"][0];
    assert_eq!(f["kind"], "SIGSEGV");
    assert_eq!(f["locations"][0]["line"].as_u64(), Some(u64::from(line)));
    assert_eq!(f["locations"][0]["backtrace"][1]["function"], "faulter");
}

#[test]
fn library_frames_are_named_from_the_librarys_symbols() {
    let line = marker_line("assert_fail.c", "/* ASSERT */");
    let run = Ferrite::run(&guest("assert_fail.dyn")).opts(&["--report", "r.json"]).go();
    run.assert_code(134);
    let r = run.json("r.json");
    let f = &r["findings"][0];
    assert_eq!(f["kind"], "SIGABRT");
    assert_eq!(f["locations"][0]["line"].as_u64(), Some(u64::from(line)));
    let names: Vec<&str> =
        f["locations"][0]["backtrace"].as_array().unwrap().iter().filter_map(|fr| fr["function"].as_str()).collect();
    // abort and __assert_fail live in libc.so.6 and are named from its dynamic symbols.
    assert!(names.contains(&"abort") && names.contains(&"__assert_fail"), "{names:?}");
}

/// A frame without a line names the file its PC is in and the address in that file, which must
/// fall inside the named function as the file's own symbol table places it (`nm -S`): the load
/// bias is taken off, for the PIE program and for libc alike.
#[test]
fn frames_without_lines_name_their_object_and_the_address_in_it() {
    // No separate debug files, so libc's frames have no lines wherever the test runs.
    let run = Ferrite::run(&guest("assert_fail.dyn")).opts(&["--report", "r.json", "--debug-dir"]).go();
    run.assert_code(134);
    let r = run.json("r.json");
    let mut checked = Vec::new();
    for fr in r["findings"][0]["locations"][0]["backtrace"].as_array().unwrap() {
        if fr["line"].is_u64() {
            assert!(fr.get("object").is_none(), "a frame with a line needs no object: {fr}");
            continue;
        }
        let path = fr["object"]["path"].as_str().unwrap_or_else(|| panic!("no object: {fr}"));
        let offset = fr["object"]["offset"].as_u64().unwrap();
        let Some(function) = fr["function"].as_str() else { continue };
        let nm = std::process::Command::new("nm").args(["-S", "--defined-only", "-D", path]).output().unwrap();
        let nm_own = std::process::Command::new("nm").args(["-S", "--defined-only", path]).output().unwrap();
        let table = format!("{}{}", String::from_utf8_lossy(&nm.stdout), String::from_utf8_lossy(&nm_own.stdout));
        let inside = table.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 4
                && w[3].split('@').next() == Some(function)
                && u64::from_str_radix(w[0], 16).is_ok_and(|a| {
                    let size = u64::from_str_radix(w[1], 16).unwrap_or(0);
                    a <= offset && offset < a + size.max(1)
                })
        });
        assert!(inside, "{function} at {path}+{offset:#x} is not inside the symbol nm lists");
        checked.push(format!("{function}@{}", path.rsplit('/').next().unwrap()));
    }
    // abort is libc's; the program's own _start is the PIE's.
    assert!(checked.iter().any(|c| c.starts_with("abort@libc")), "{checked:?}");
    assert!(run.stderr.contains("abort (libc.so.6+0x"), "{}", run.stderr);
}

#[test]
fn the_interpreter_and_libraries_are_recorded_as_inputs() {
    let run = Ferrite::run(&guest("setjmp_longjmp.dyn")).opts(&["--report", "r.json"]).go();
    run.assert_code(0);
    let inputs = run.json("r.json")["run"]["inputs"].clone();
    let names: Vec<&String> = inputs.as_object().unwrap().keys().collect();
    assert!(names.iter().any(|n| n.contains("ld-linux")), "{names:?}");
    assert!(names.iter().any(|n| n.contains("libc.so")), "{names:?}");
}

/// Host tools that ask glibc's NSS for user names (`nscd` over an `AF_UNIX` socket first) and
/// read extended attributes (`ls -l`: SELinux labels, ACLs) run without a warning and print what
/// they print natively: a socket exists and reaches nothing, as on a host without `nscd`, and
/// files have no extended attributes.
#[test]
fn host_tools_that_probe_sockets_and_xattrs_run_without_warnings() {
    let readme = repo().join("README.md");
    let readme = readme.to_str().unwrap();
    for (tool, args) in [("/usr/bin/id", vec![]), ("/bin/ls", vec!["-l", "-d", "/"]), ("/bin/ls", vec!["-l", readme])] {
        let prog = std::path::Path::new(tool);
        if !prog.exists() {
            eprintln!("skipped: {tool} is not installed");
            continue;
        }
        let emu = emulated(prog, &args, &[]);
        assert_eq!(emu.code, 0, "{}: {}", emu.cmdline, emu.stderr);
        assert!(
            !emu.stderr.contains("warning") && !emu.stderr.contains("not implemented"),
            "{}: {}",
            emu.cmdline,
            emu.stderr
        );
        if !tool.ends_with("id") {
            // Times and owners differ (the guest's clock and identity are its own); modes and
            // sizes do not.
            let n = native(prog, &args, &[]).stdout_str();
            let e = emu.stdout_str();
            let fields = |s: &str| {
                let f: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
                (f.first().cloned(), f.get(4).cloned())
            };
            assert_eq!(fields(&n), fields(&e), "{}", emu.cmdline);
        }
    }
}

/// procps's `ps` runs without a warning (its NUMA probe, `get_mempolicy`, is ENOSYS as on a Linux
/// without NUMA) and finds itself: `/proc/PID/...` of the caller is `/proc/self/...`, `/proc`
/// lists the live processes, `/proc/uptime`, `/proc/meminfo` and `/proc/stat`'s `btime` are
/// generated. `ps aux` shows its user, pid and state.
#[test]
fn ps_lists_itself_without_warnings() {
    let prog = std::path::Path::new("/usr/bin/ps");
    if !prog.exists() {
        eprintln!("skipped: ps is not installed");
        return;
    }
    let emu = emulated(prog, &[], &[]);
    assert_eq!(emu.code, 0, "{}", emu.describe());
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
    let out = emu.stdout_str();
    assert!(
        out.contains("  PID TTY          TIME CMD\n") && out.contains(" 1000 ?        00:00:00 ps\n"),
        "{}",
        emu.describe()
    );
    let emu = emulated(prog, &["aux"], &[]);
    assert_eq!(emu.code, 0, "{}", emu.describe());
    assert!(
        emu.stdout_str().lines().nth(1).is_some_and(|l| l.contains(" 1000 ") && l.contains(" Rs ")),
        "{}",
        emu.describe()
    );
}

/// `ps` lists every guest process (`/proc/PID/stat`, `status`, `cmdline`, `comm` of each, in
/// Linux's formats): under `sh -c 'sleep 1 & ps -ef'` it shows the shell with its arguments,
/// the background `sleep` (its parent the shell, sleeping) and itself; `ps aux` shows the states
/// (`S` for the waiting `sleep`, `R` for `ps`) and the start time on the virtual clock.
#[test]
fn ps_lists_every_guest_process() {
    let (sh, ps) = (std::path::Path::new("/bin/sh"), std::path::Path::new("/usr/bin/ps"));
    if !ps.exists() || !std::path::Path::new("/usr/bin/sleep").exists() {
        eprintln!("skipped: ps or sleep is not installed");
        return;
    }
    let env = [("PATH", "/usr/bin:/bin")];
    let emu = emulated(sh, &["-c", "sleep 1 & ps -ef"], &env);
    assert_eq!(emu.code, 0, "{}", emu.describe());
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
    let out = emu.stdout_str();
    // UID PID PPID C STIME TTY TIME CMD
    let row = |cmd: &str| -> Vec<String> {
        let fields = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let row = out.lines().map(fields).find(|f| f.len() > 7 && f[7..].join(" ") == cmd);
        row.unwrap_or_else(|| panic!("no {cmd:?}\n{}", emu.describe()))
    };
    let (shell, sleep, me) = (row("/bin/sh -c sleep 1 & ps -ef"), row("sleep 1"), row("ps -ef"));
    assert_eq!(shell[2], "1", "the shell's parent is outside the machine\n{out}");
    assert_eq!(sleep[2], shell[1], "sleep's parent is the shell\n{out}");
    assert_eq!(me[2], shell[1], "ps's parent is the shell\n{out}");
    assert_eq!(out.lines().count(), 4, "a header and three processes\n{out}");

    let emu = emulated(sh, &["-c", "sleep 1 & ps aux; ps -o pid=,stat=,comm= -p $!"], &env);
    assert_eq!(emu.code, 0, "{}", emu.describe());
    let out = emu.stdout_str();
    // USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND
    let sleep: Vec<&str> = out.lines().find(|l| l.ends_with(" sleep 1")).unwrap_or("").split_whitespace().collect();
    assert_eq!(sleep.get(7), Some(&"S"), "{out}");
    assert_eq!(sleep.get(8), Some(&"00:00"), "started at the virtual clock's midnight\n{out}");
    let ps: Vec<&str> = out.lines().find(|l| l.ends_with(" ps aux")).unwrap_or("").split_whitespace().collect();
    assert_eq!(ps.get(7), Some(&"R"), "{out}");
    assert_eq!(
        out.lines().last().map(str::split_whitespace).map(|f| f.skip(1).collect::<Vec<_>>()),
        Some(vec!["S", "sleep"]),
        "{out}"
    );
}
