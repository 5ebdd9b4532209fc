//! Native equivalence: every terminating guest, run under ferrite, writes byte-for-byte the same
//! stdout as the same binary run natively (same argv[0], same environment, a fresh scratch
//! directory each) and ends with the same exit status as a shell would see (128 + N for a death
//! by signal N). The persistent-memory guests also leave the same pool file behind.

mod common;

use std::path::Path;

use common::*;

/// Runs `name args` natively and under ferrite with `env`, and asserts the same stdout and exit
/// status. Returns both runs for further checks.
fn equivalent(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Run, Run) {
    let prog = guest(name);
    let nat = native(&prog, args, env);
    let emu = emulated(&prog, args, env);
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    (nat, emu)
}

#[test]
fn libc_workout() {
    let (nat, emu) = equivalent("libc_workout", &["alpha", "beta"], &[("FERRITE_TEST", "hello")]);
    // Guard against comparing two equally broken runs: the guest's own checks passed.
    assert!(nat.stdout_str().contains("failures: 0\n"), "{}", nat.describe());
    assert!(emu.stdout_str().contains("FERRITE_TEST: hello\n"));
    assert_eq!(emu.code, 3);
}

#[test]
fn libc_workout_pie() {
    let (_, emu) = equivalent("libc_workout.pie", &["alpha", "beta"], &[("FERRITE_TEST", "hello")]);
    assert!(emu.stdout_str().contains("failures: 0\n"), "{}", emu.describe());
}

#[test]
fn libc_workout_without_the_variable() {
    // With an empty environment the guest must see the variable as unset, under ferrite too.
    let (_, emu) = equivalent("libc_workout", &[], &[]);
    assert!(emu.stdout_str().contains("FERRITE_TEST: (unset)\n"));
}

#[test]
fn cxx_exceptions() {
    let (_, emu) = equivalent("cxx_exceptions", &[], &[]);
    assert!(emu.stdout_str().contains("cxx_exceptions done"));
    assert_eq!(emu.code, 0);
}

#[test]
fn cxx_exceptions_pie() {
    equivalent("cxx_exceptions.pie", &[], &[]);
}

#[test]
fn setjmp_longjmp() {
    let (_, emu) = equivalent("setjmp_longjmp", &[], &[]);
    assert!(emu.stdout_str().contains("setjmp_longjmp done"));
}

#[test]
fn setjmp_longjmp_pie() {
    equivalent("setjmp_longjmp.pie", &[], &[]);
}

#[test]
fn write_stderr_streams_separately() {
    let (nat, emu) = equivalent("write_stderr", &[], &[]);
    // No findings, so ferrite adds nothing of its own: stderr is the guest's alone.
    assert_same_bytes("stderr", &nat, nat.stderr.as_bytes(), &emu, emu.stderr.as_bytes());
    assert!(nat.stderr.contains("stderr done"));
}

#[test]
fn exit_status_9() {
    let (_, emu) = equivalent("exit_status", &["9"], &[]);
    assert_eq!(emu.code, 9);
}

#[test]
fn exit_status_is_taken_modulo_256() {
    for status in ["256", "-1", "300", "255"] {
        equivalent("exit_status", &[status], &[]);
    }
}

#[test]
fn relative_program_path() {
    // argv[0] is `./workout` (a copy of libc_workout in the working directory), natively and
    // under ferrite; the guest prints argv[0]'s basename.
    let src = guest("libc_workout");
    let dirs = [scratch(), scratch()];
    for d in &dirs {
        std::fs::copy(&src, d.path().join("workout")).unwrap();
    }
    let [ndir, edir] = dirs;
    let prog = Path::new("./workout");
    let nat = native_in(ndir, prog, &["x"], &[]);
    let emu = Ferrite::run(prog).args(&["x"]).in_dir(edir).go();
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(emu.stdout_str().contains("argv[0] basename: workout\n"));
}

#[test]
fn environment_is_inherited_without_env_clear() {
    let prog = guest("libc_workout");
    let run = Ferrite::run(&prog).inherit_env().host_env("FERRITE_TEST", "from-the-host").go();
    run.assert_code(3);
    assert!(run.stdout_str().contains("FERRITE_TEST: from-the-host\n"), "{}", run.describe());
    // --env overrides an inherited variable.
    let run = Ferrite::run(&prog)
        .inherit_env()
        .host_env("FERRITE_TEST", "from-the-host")
        .env("FERRITE_TEST", "override")
        .go();
    assert!(run.stdout_str().contains("FERRITE_TEST: override\n"), "{}", run.describe());
}

#[test]
fn exit_group_direct_loses_buffered_text() {
    let (_, emu) = equivalent("exit_group_direct", &[], &[]);
    assert_eq!(emu.stdout, b"before _exit\n");
    assert_eq!(emu.code, 5);
}

#[test]
fn cpu_bound_small() {
    let (_, emu) = equivalent("cpu_bound", &["0.01"], &[]);
    assert!(emu.stdout_str().contains("checksum: "));
}

#[test]
fn null_deref() {
    let (_, emu) = equivalent("null_deref", &[], &[]);
    assert_eq!(emu.code, 139);
    assert_eq!(emu.stdout, b"about to dereference NULL\n");
}

#[test]
fn assert_fail() {
    let (nat, emu) = equivalent("assert_fail", &[], &[]);
    assert_eq!(emu.code, 134);
    // glibc's assertion message comes first on stderr, then ferrite's finding.
    assert!(nat.stderr.contains("Assertion `x == 42' failed."));
    assert!(
        emu.stderr.starts_with(&nat.stderr),
        "ferrite's stderr should start with the guest's own message {:?}\n{}",
        nat.stderr,
        emu.describe()
    );
}

#[test]
fn div_zero() {
    let (_, emu) = equivalent("div_zero", &[], &[]);
    assert_eq!(emu.code, 136);
    assert_eq!(emu.stdout, b"dividing by 0\n");
}

#[test]
fn div_zero_with_argument_divides_by_one() {
    let (_, emu) = equivalent("div_zero", &["x"], &[]);
    assert_eq!(emu.code, 0);
}

/// Runs a PM guest natively with its pool at `<native tmp>/pool` and under ferrite with the pool
/// at `/mnt/pmem0/pool` backed by `--pm-dir <tmp>`. The PM guests never print the pool path
/// (only the data they read back), so stdout is compared unmodified.
fn pm_equivalent(name: &str, extra: &[&str]) -> (Run, Run, tempfile::TempDir) {
    let prog = guest(name);
    let ndir = scratch();
    let npool = ndir.path().join("pool");
    let npool = npool.to_str().unwrap().to_string();
    let mut nargs = vec![npool.as_str()];
    nargs.extend(extra);
    let nat = native_in(ndir, &prog, &nargs, &[]);

    let pm = scratch();
    let mut eargs = vec!["/mnt/pmem0/pool"];
    eargs.extend(extra);
    let emu = Ferrite::run(&prog)
        .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
        .opts(&["--report", "r.json"])
        .args(&eargs)
        .go();
    assert_same_stdout(&nat, &emu);
    // The guest's own status, unless ferrite found something (then --findings-exit-code, 66).
    let report = emu.json("r.json");
    let findings = get(&report, "findings").as_array().unwrap().len();
    assert_eq!(
        get(&report, "run.exit.code").as_i64(),
        Some(i64::from(nat.code)),
        "the guest's own exit status differs from native\n{}",
        emu.describe()
    );
    let expected = if findings == 0 { nat.code } else { 66 };
    emu.assert_code(expected);
    (nat, emu, pm)
}

/// The pool file ferrite left in the PM directory equals the one the native run left.
fn assert_same_pool(nat: &Run, pm: &Path) {
    let n = std::fs::read(nat.path("pool")).expect("native pool");
    let e = std::fs::read(pm.join("pool")).expect("ferrite should create the pool in --pm-dir");
    assert_eq!(n.len(), e.len(), "pool sizes differ");
    if let Some(i) = (0..n.len()).find(|&i| n[i] != e[i]) {
        panic!("pool contents differ from native first at byte {i} (native {:#04x}, ferrite {:#04x})", n[i], e[i]);
    }
}

#[test]
fn pm_log() {
    let (nat, emu, pm) = pm_equivalent("pm_log", &[]);
    assert!(emu.stdout_str().contains("log has 5 entries"));
    assert_same_pool(&nat, pm.path());
}

#[test]
fn pm_log_fixed() {
    let (nat, _, pm) = pm_equivalent("pm_log_fixed", &[]);
    assert_same_pool(&nat, pm.path());
}

#[test]
fn pm_log_fixed_recovers_its_pool() {
    // A second run in check mode opens the pool the first run left (without O_CREAT) and
    // verifies it, natively and under ferrite.
    let prog = guest("pm_log_fixed");
    let (nat, _, pm) = pm_equivalent("pm_log_fixed", &[]);
    let npool = nat.path("pool");
    let ncheck = native(&prog, &[npool.to_str().unwrap(), "check"], &[]);
    let echeck = Ferrite::run(&prog)
        .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
        .args(&["/mnt/pmem0/pool", "check"])
        .go();
    assert_same_stdout(&ncheck, &echeck);
    assert_same_status(&ncheck, &echeck);
    assert_eq!(echeck.stdout_str(), "recovery ok: 5 entries\n");
}

#[test]
fn pm_mount_option_moves_the_mount() {
    let prog = guest("pm_log_fixed");
    let ndir = scratch();
    let npool = ndir.path().join("pool");
    let nat = native_in(ndir, &prog, &[npool.to_str().unwrap()], &[]);
    let pm = scratch();
    let emu = Ferrite::run(&prog)
        .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
        .opts(&["--pm-mount", "/data/pm"])
        .args(&["/data/pm/pool"])
        .go();
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert_same_pool(&nat, pm.path());
}

#[test]
fn pm_insns() {
    let (nat, _, pm) = pm_equivalent("pm_insns", &[]);
    assert_same_pool(&nat, pm.path());
}

#[test]
fn pm_unflushed_fence() {
    let (nat, _, pm) = pm_equivalent("pm_unflushed_fence", &[]);
    assert_same_pool(&nat, pm.path());
}

#[test]
fn pm_redundant_flush() {
    let (nat, _, pm) = pm_equivalent("pm_redundant_flush", &[]);
    assert_same_pool(&nat, pm.path());
}

/// Shared mappings their file does not cover (past its end, after ftruncate shrinks it, after an
/// O_TRUNC open), of an ordinary file and of a PM pool: the guest gets SIGBUS there, as natively,
/// and ferrite never takes the fault itself.
#[test]
fn file_mmap_edges() {
    let (_, emu, _) = pm_equivalent("file_mmap_edges", &[]);
    assert_eq!(emu.stdout_str().matches("sigbus 1").count(), 6, "{}", emu.describe());
}

/// Runs `pm_edges DIR CASE` natively on a scratch directory and under ferrite on the PM mount
/// (only the unpersisted pass: the case checks what Linux answers, not a program's
/// persistence), asserting the same output and status. Returns the ferrite run.
fn pool_case(case: &str) -> Run {
    let prog = guest("pm_edges");
    let ndir = scratch();
    let npath = ndir.path().to_str().unwrap().to_string();
    let nat = native_in(ndir, &prog, &[&npath, case], &[]);
    let emu = pool_case_emulated(case, "/mnt/pmem0");
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    emu
}

/// `pm_edges DIR CASE` under ferrite alone, on a fresh PM directory (a refused case may warn).
fn pool_case_emulated(case: &str, dir: &str) -> Run {
    let pm = scratch();
    Ferrite::run(&guest("pm_edges"))
        .allow_unsupported()
        .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
        .opts(&["--analyses", "unpersisted"])
        .args(&[dir, case])
        .go()
}

/// What a PM programmer does wrong or strangely with a pool file, each as natively on a plain
/// file system: an empty pool and pools of 1 and 5,000 bytes mapped past their end, then grown
/// under the mapping (the pages past the old end were SIGBUS for ever); a sparse 1 TiB pool; a
/// pool opened `O_RDONLY` and mapped for reading (ENOMEM before); a directory and a FIFO as
/// pools; `mremap` of a pool mapping, grown in place, moved, moved to a fixed address and
/// shrunk (EINVAL before); `MADV_DONTNEED`, `MADV_REMOVE` and `fallocate` punching a hole,
/// zeroing and growing (EOPNOTSUPP or a silent no-op before); ftruncate shrinking and growing
/// a mapped pool; `write`/`pwrite` to a mapped pool and every `msync` flag (`MS_SYNC|MS_ASYNC`
/// was accepted); one pool mapped twice and by a child. docs/pm-model.md, "Pool files".
#[test]
fn pool_file_edges_as_natively() {
    for case in [
        "empty", "onebyte", "odd", "sparse", "readonly", "dir", "fifo", "mremap", "dontneed", "truncate", "write",
        "twice",
    ] {
        let emu = pool_case(case);
        emu.assert_code(0);
    }
}

/// Where the PM mount differs from a plain file system, by decision (docs/pm-model.md, "Pool
/// files"): MAP_SYNC is accepted on the PM mount (a DAX file system) and refused elsewhere; a
/// PM mapping past a file's first TiB is EOVERFLOW (device addresses give each file 1 TiB), with
/// a warning; a pool made read-only with `chmod 444` refuses `O_RDWR` and a read-only shared
/// mapping refuses `PROT_WRITE`, for the guest's unprivileged user, whoever runs ferrite.
#[test]
fn pool_file_edges_where_the_pm_mount_decides() {
    let sync = pool_case_emulated("mapsync", "/mnt/pmem0");
    assert!(sync.stdout_str().starts_with("mmap MAP_SHARED_VALIDATE|MAP_SYNC: ok\nstore: ok\n"), "{}", sync.describe());
    let plain = pool_case_emulated("mapsync", ".");
    assert!(plain.stdout_str().starts_with("mmap MAP_SHARED_VALIDATE|MAP_SYNC: EOPNOTSUPP\n"), "{}", plain.describe());
    let huge = pool_case_emulated("huge", "/mnt/pmem0");
    let out = huge.stdout_str();
    assert!(out.contains("mmap page 0: ok\nmmap page at 1 TiB: EOVERFLOW\n"), "{}", huge.describe());
    assert!(huge.stderr.contains("mmap of a PM file past its first TiB") && huge.stderr.contains("EOVERFLOW"));
    let ro = pool_case_emulated("perm444", "/mnt/pmem0");
    let out = ro.stdout_str();
    assert!(out.contains("open O_RDWR of 0444: EACCES\n"), "{}", ro.describe());
    assert!(out.contains("mmap read-only shared: ok\nmprotect PROT_WRITE: EACCES\n"), "{}", ro.describe());
    ro.assert_code(0);
}

/// A directory's mode set through a descriptor of it (`fchmod`), as rsync sets each directory
/// it copies: before, the call succeeded and changed nothing (rsync's copies stayed 0700 and
/// its next run found every directory's permissions changed).
#[test]
fn fchmod_of_a_directory_as_natively() {
    let (_, emu) = equivalent("dir_fchmod", &[], &[]);
    assert_eq!(emu.stdout_str(), "d: 750\nfstat: 750\n", "{}", emu.describe());
}

/// Sockets exist and reach nothing (nothing in the machine listens), with Linux's errors for
/// each call on an unconnected socket; files have no extended attributes. Natively nothing
/// listens on loopback port 1 either.
#[test]
fn sockets_and_xattrs_as_probes_see_them() {
    let readme = repo().join("README.md");
    let (_, emu) = equivalent("sock_probe", &[readme.to_str().unwrap()], &[]);
    assert!(emu.stdout_str().contains("connect(127.0.0.1:1): Connection refused\n"), "{}", emu.describe());
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
}

/// A host file shows its own modification time (CPython checks its `__pycache__` against it,
/// `make` its targets), and the times the guest gives its own files follow its changes and its
/// `utime` calls as natively; two runs see the same times (the guest's are virtual).
#[test]
fn file_times_are_the_hosts_for_inputs_and_follow_the_guests_changes() {
    let prog = guest("fs_times");
    let input_at = std::time::UNIX_EPOCH + std::time::Duration::new(1_588_748_889, 123_456_789);
    let with_input = || {
        let dir = scratch();
        let f = std::fs::File::create(dir.path().join("input")).unwrap();
        f.set_modified(input_at).unwrap();
        dir
    };
    let nat = native_in(with_input(), &prog, &["input"], &[]);
    let runs: Vec<Run> = (0..2)
        .map(|_| Ferrite::run(&prog).in_dir(with_input()).opts(&["--report", "r.json"]).args(&["input"]).go())
        .collect();
    for emu in &runs {
        assert_same_stdout(&nat, emu);
        assert_same_status(&nat, emu);
    }
    assert!(runs[0].stdout_str().contains("input: 1588748889 123456789\n"), "{}", runs[0].describe());
    assert!(runs[0].stdout_str().contains("a write moves it on: 1\n"), "{}", runs[0].describe());
    let hash = |r: &Run| r.json("r.json")["run"]["trace_hash"].as_str().unwrap().to_string();
    assert_eq!(hash(&runs[0]), hash(&runs[1]), "the guest's own file times are virtual");
}

#[test]
fn sendfile_as_natively() {
    let (_, emu) = equivalent("sendfile_probe", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("sendfile(non-blocking pipe, 200000): 65536 (the pipe's room)\n"), "{}", emu.describe());
    assert!(out.contains("  socket: 5000 bytes, the file's\n"), "{}", emu.describe());
    assert!(!out.contains("WRONG"), "{}", emu.describe());
}

/// How AF_INET and AF_INET6 sockets share loopback ports: ferrite's answers are Linux's (fixed
/// here, so the test means something on a host without IPv6), and the host's where it has IPv6
/// loopback.
#[test]
fn ipv4_and_ipv6_share_ports_as_natively() {
    let prog = guest("inet_ports");
    let emu = emulated(&prog, &[], &[]);
    assert_eq!(
        emu.stdout_str(),
        "bind 0.0.0.0:0: ok\n\
         bind [::]:P v6only: ok\n\
         bind [::]:P dual-stack: Address already in use\n\
         bind [::1]:P v6only: Address already in use\n\
         IPV6_V6ONLY after bind: Invalid argument\n\
         connect 127.0.0.1:P: ok\n\
         \x20 accept on the AF_INET listener: peer AF_INET 127.0.0.1, local family AF_INET\n\
         \x20 accept on the v6only listener: Resource temporarily unavailable\n\
         connect [::1]:P: ok\n\
         \x20 accept on the AF_INET listener: Resource temporarily unavailable\n\
         \x20 accept on the v6only listener: peer AF_INET6 ::1, local family AF_INET6\n\
         bind [::]:0 dual-stack: ok\n\
         bind 127.0.0.1:Q: Address already in use\n\
         connect 127.0.0.1:Q: ok\n\
         \x20 accept on the dual-stack listener: peer AF_INET6 ::ffff:127.0.0.1, local family AF_INET6\n\
         connect [::1]:Q: ok\n\
         \x20 accept on the dual-stack listener: peer AF_INET6 ::1, local family AF_INET6\n\
         connect [::1]:R (AF_INET listener): Connection refused\n\
         connect [::ffff:127.0.0.1]:R: ok\n\
         \x20 accept on the AF_INET listener: peer AF_INET 127.0.0.1, local family AF_INET\n\
         sendto 127.0.0.1:S (udp): ok\n\
         \x20 recvfrom on the dual-stack socket: 2 bytes from AF_INET6 ::ffff:127.0.0.1\n",
        "{}",
        emu.describe()
    );
    let nat = native(&prog, &[], &[]);
    if nat.stdout_str() == "no IPv6 loopback\n" {
        eprintln!("the host has no IPv6 loopback: ferrite's answers checked alone");
    } else {
        assert_same_stdout(&nat, &emu);
    }
}

/// chown and its family answer as Linux answers a file's unprivileged owner (gzip, bzip2, xz
/// and `cp -a` give their output the input's owner with fchown), and a chown drops the set-id
/// bits as the kernel does; getrusage and times answer (gcc and make time themselves with
/// getrusage, bash's `times` calls times). Another user's id is refused under ferrite, whose
/// guest is never privileged (natively the tests may run as root, who may give it).
#[test]
fn chown_getrusage_and_times_as_natively() {
    let (_, emu) = equivalent("owner_probe", &[], &[]);
    let out = emu.stdout_str();
    for line in [
        "chown(f, -1, -1): ok\n",
        "chown(missing): No such file or directory\n",
        "fchown(bad fd): Bad file descriptor\n",
        "fchownat(bad flags): Invalid argument\n",
        "after chown: 0755\n",
        "setgid without group x: 2745\n",
        "directory: 2755\n",
        "getrusage(7): Invalid argument\n",
        "getrusage(bad buffer): Bad address\n",
        "children: 0 0 0\n",
    ] {
        assert!(out.contains(line), "{line:?} missing\n{}", emu.describe());
    }
    assert!(!out.contains(": NO"), "{}", emu.describe());
    let other = emulated(&guest("owner_probe"), &["--other"], &[]);
    let out = other.stdout_str();
    assert!(out.contains("chown(f, another uid): Operation not permitted\n"), "{}", other.describe());
    assert!(out.contains("chown(f, another gid): Operation not permitted\n"), "{}", other.describe());
    assert!(out.contains("fchown(fd, another uid): Operation not permitted\n"), "{}", other.describe());
}

/// The names of one file show one inode, as on Linux: hard links share their number and count
/// their links, a renamed file keeps its number, a listing shows what `stat` shows (`git clone`
/// of a local repository checks the links it makes so and died with "hardlink different from
/// source" when each name had its own number).
#[test]
fn hard_links_share_their_inode_as_natively() {
    let (_, emu) = equivalent("link_inodes", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("a and b: same inode, same device, 2 and 2 links\n"), "{}", emu.describe());
    assert!(out.contains("sub/c: same inode, 3 links\n"), "{}", emu.describe());
    assert!(out.contains("d: same inode\n"), "{}", emu.describe());
    assert!(out.contains("listing of d: same inode\n"), "{}", emu.describe());
    assert!(out.contains("another file: different inode\n"), "{}", emu.describe());
}

/// Named pipes as Linux has them (`mkfifo` was unsupported: `mknodat` gave ENOSYS): the opens
/// of each end wait for the other in either order, a reader whose writer came and went reads
/// what it wrote, a FIFO nobody has open starts empty, an `O_RDWR` open is both ends and never
/// waits (it was EOPNOTSUPP); the same under several seeds, which
/// order the two processes differently.
#[test]
fn fifos_as_natively() {
    let prog = guest("fifo_probe");
    let nat = native(&prog, &[], &[]);
    nat.assert_code(0);
    assert!(nat.stdout_str().contains("reader that waited: \"reader first\" then end of file\n"), "{}", nat.describe());
    assert!(nat.stdout_str().contains("read through it: 9 \"both ends\"\n"), "{}", nat.describe());
    for seed in ["0", "1", "2"] {
        let emu = Ferrite::run(&prog).opts(&["--seed", seed]).go();
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
    }
}

/// An `AF_UNIX` socket bound to a path makes a socket file there, as on Linux: `stat` and
/// listings show it, `chmod` changes it (Python's multiprocessing forkserver chmods its
/// listener's file, and failed with ENOENT while a bound path was only a name in the machine),
/// it outlives its socket until unlinked, and any spelling of the path reaches it.
#[test]
fn unix_socket_files_as_natively() {
    let (_, emu) = equivalent("unix_socket_file", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("a socket file: yes, size 0\n"), "{}", emu.describe());
    assert!(out.contains("connect(../s) from sub: ok\n"), "{}", emu.describe());
    assert!(out.contains("connect after close: Connection refused\n"), "{}", emu.describe());
    assert!(out.contains("bind(s) after unlink: ok\n"), "{}", emu.describe());
}

/// Descriptors passed over `AF_UNIX` sockets (`SCM_RIGHTS`; Python's multiprocessing
/// forkserver failed with EOPNOTSUPP): a passed descriptor shares its open file description
/// (offset, `O_APPEND`) but not `FD_CLOEXEC`, `MSG_CMSG_CLOEXEC`, `MSG_CTRUNC` for a control
/// buffer too small or missing (the rest closed), a stream read that stops after the send that
/// carried descriptors, `MSG_PEEK`, datagram and seqpacket messages, a pipe's write end passed
/// from a child to its parent, one closed in flight, `SO_PASSCRED`'s credentials and
/// `sendmsg`'s errors, as natively, statically and dynamically linked. Two runs with one seed
/// have one trace hash, and other seeds (which order the two processes differently) give the
/// same answers.
#[test]
fn scm_rights_as_natively() {
    // The static build under three seeds; the dynamic one (the same source through ld.so and
    // libc.so.6) once, as the seeds' part is checked on the static one.
    for (name, seeds) in [("scm_rights", &["1", "1", "2"][..]), ("scm_rights.dyn", &["1"][..])] {
        let prog = guest(name);
        let nat = native(&prog, &[], &[]);
        nat.assert_code(0);
        assert!(
            nat.stdout_str().contains("ab, cd+fd, ef: first read \"abcd\" with 1 fd(s), then \"ef\" with 0 fd(s)\n"),
            "{}",
            nat.describe()
        );
        let runs: Vec<Run> =
            seeds.iter().map(|s| Ferrite::run(&prog).opts(&["--seed", s, "--report", "r.json"]).go()).collect();
        for emu in &runs {
            assert_same_stdout(&nat, emu);
            assert_same_status(&nat, emu);
        }
        let out = runs[0].stdout_str();
        assert!(
            out.contains("read 3 through the copy: \"234\"; the original's offset is now 5\n"),
            "{}",
            runs[0].describe()
        );
        assert!(out.contains("write end in flight: read -1 (Resource temporarily unavailable); after the receiver closed: read 0 (end of file)\n"), "{}", runs[0].describe());
        assert!(
            out.contains("child read through the pipe: \"from the parent\", then 0 (end of file)\n"),
            "{}",
            runs[0].describe()
        );
        if runs.len() > 1 {
            let hash = |r: &Run| r.json("r.json")["run"]["trace_hash"].as_str().unwrap().to_string();
            assert_eq!(hash(&runs[0]), hash(&runs[1]), "one seed, one trace");
        }
    }
}

/// Runs `name` natively once and under ferrite twice with one seed: the same stdout and status
/// as natively, and one trace hash for both runs. Returns the first run under ferrite.
fn equivalent_and_deterministic(name: &str) -> Run {
    let prog = guest(name);
    let nat = native(&prog, &[], &[]);
    let runs: Vec<Run> =
        (0..2).map(|_| Ferrite::run(&prog).opts(&["--seed", "7", "--report", "r.json"]).go()).collect();
    for emu in &runs {
        assert_same_stdout(&nat, emu);
        assert_same_status(&nat, emu);
    }
    let hash = |r: &Run| r.json("r.json")["run"]["trace_hash"].as_str().unwrap().to_string();
    assert_eq!(hash(&runs[0]), hash(&runs[1]), "one seed, one trace");
    runs.into_iter().next().unwrap()
}

/// Edge-triggered epoll (`EPOLLET`) as Linux's `ep_poll_callback` has it: an entry is reported
/// when something arrives for the side it watches, not while its descriptor stays ready; a
/// read that leaves bytes is no edge for `EPOLLIN`; a pipe's write end has an `EPOLLOUT` edge
/// when a read makes room in a full pipe (and not at the next read); a socket pair, an
/// eventfd, a listener's queued connections, a hang-up; `EPOLL_CTL_MOD` re-arms; `EPOLLONESHOT`;
/// `EPOLLEXCLUSIVE` refused where Linux refuses it; a thread blocked on an edge-triggered entry
/// woken by a write.
#[test]
fn epoll_edges_as_natively() {
    let emu = equivalent_and_deterministic("epoll_edge");
    let out = emu.stdout_str();
    assert!(out.contains("again, still readable:                       0\n"), "{}", emu.describe());
    assert!(out.contains("after a read from the full pipe:             1 [OUT  data 4]\n"), "{}", emu.describe());
    assert!(out.contains("after another read:                          0\n"), "{}", emu.describe());
    assert!(out.contains("EPOLL_CTL_MOD of an exclusive entry:         -1 Invalid argument\n"), "{}", emu.describe());
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("epoll_edge.dyn", &[], &[]);
}

/// A thread's name (`prctl(PR_SET_NAME/PR_GET_NAME)`, which `pthread_setname_np` and
/// `pthread_getname_np` use for the calling thread; every program sweeped calls `prctl`, and
/// `PR_GET_NAME` wrote nothing before): the program's file name at start, set names cut to 15
/// bytes, inherited by new threads and forked children but each thread's own, EFAULT for a bad
/// pointer, and after `execve` the file name of the path as given (`/proc/self/exe`: "exe").
#[test]
fn task_names_as_natively() {
    let (_, emu) = equivalent("task_name", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("at start: \"task_name\""), "{}", emu.describe());
    assert!(out.contains("a long name: \"a-name-longer-t\""), "{}", emu.describe());
    assert!(out.contains("the main thread keeps its own: \"parent\""), "{}", emu.describe());
    assert!(out.contains("after execve: \"exe\""), "{}", emu.describe());
}

/// `setrlimit(RLIMIT_NOFILE)` raising the soft limit up to the hard one (Redis asks for
/// 10,032) and what the limit then allows (`dup2` EBADF at it, `F_DUPFD` EINVAL), a soft limit
/// above the hard one refused; `PR_GET_DUMPABLE` 1 for an ordinary process, `PR_SET_DUMPABLE`
/// kept by a forked child and reset by `execve`; `/proc/self/comm`, `/proc/thread-self/comm`
/// and `/proc/self/task/TID/comm` read and written (`pthread_setname_np` on another thread).
#[test]
fn limits_dumpable_and_proc_comm_as_natively() {
    let emu = equivalent_and_deterministic("proc_limits");
    let out = emu.stdout_str();
    assert!(out.contains("setrlimit(RLIMIT_NOFILE) to min(hard, 10032): 0\n"), "{}", emu.describe());
    assert!(out.contains("F_DUPFD at the limit: -1 Invalid argument\n"), "{}", emu.describe());
    assert!(out.contains("PR_GET_DUMPABLE: 1\n"), "{}", emu.describe());
    assert!(out.contains("after execve, PR_GET_DUMPABLE: 1\n"), "{}", emu.describe());
    assert!(out.contains("the worker's /proc/thread-self/comm: 9 bytes \"worker-1\"\n"), "{}", emu.describe());
}

/// inotify for the guest's own changes, as Linux reports them (`inotify_probe`, in an empty
/// scratch directory): a directory's and its files' watches (create, open, writes merged,
/// close, access, attrib, moves with one cookie, a rename over a watched file, delete,
/// `IN_DELETE_SELF`/`IN_IGNORED`, `IN_ISDIR`, one-shot), the directory's watch before the
/// file's, `inotify_add_watch`'s answers and errors, `inotify_rm_watch`, poll readiness,
/// `FIONREAD`, a buffer too small, `IN_NONBLOCK`, and a thread blocked in `read` woken by a
/// change. Two runs with one seed have one trace hash.
#[test]
fn inotify_as_natively() {
    let emu = equivalent_and_deterministic("inotify_probe");
    let out = emu.stdout_str();
    assert!(
        out.contains("  d MOVED_TO \"f\" (len 16) cookie same as the last\n  f ATTRIB\n  f DELETE_SELF\n  f IGNORED\n"),
        "{}",
        emu.describe()
    );
    assert!(out.contains("a read into 8 bytes: -1 Invalid argument\n"), "{}", emu.describe());
    assert!(out.contains("the blocked reader got 32 bytes: CREATE \"late\"\n"), "{}", emu.describe());
}

/// Job control (`jobctl_probe`): `SIGSTOP` and `SIGTSTP` stop a child and `SIGCONT` continues
/// it, as `waitpid(WUNTRACED/WCONTINUED)` (statuses `0x137f`, `0xffff`), `waitid(WSTOPPED,
/// WCONTINUED, WNOWAIT)` and the parent's `SIGCHLD` (`CLD_STOPPED`, `CLD_CONTINUED`; none under
/// `SA_NOCLDSTOP`) report it; a `SIGTSTP` in an orphaned process group is discarded, a handled
/// one does not stop; `SIGCONT` and a stop signal discard each other when pending; a stopped
/// child's threads do not run; wait4's `rusage` and `RUSAGE_CHILDREN` count a reaped child's
/// CPU time. Two runs with one seed have one trace hash; the dynamic build (glibc's wrappers
/// from libc.so) agrees.
#[test]
fn job_control_as_natively() {
    let emu = equivalent_and_deterministic("jobctl_probe");
    let out = emu.stdout_str();
    assert!(out.contains("SIGSTOP, waitpid(WUNTRACED): pid status 0x137f stopped by 19\n"), "{}", emu.describe());
    assert!(out.contains("SIGCONT, waitpid(WCONTINUED): pid status 0xffff continued\n"), "{}", emu.describe());
    assert!(out.contains("  the continue: SIGCHLD 6/18\n"), "{}", emu.describe());
    assert!(out.contains("  after both: SIGCHLD none\n"), "{}", emu.describe());
    assert!(out.contains("(orphaned group), waitpid(WUNTRACED): pid status 0x400 exited 4\n"), "{}", emu.describe());
    assert!(out.contains("  its thread ran while it was stopped: no\n"), "{}", emu.describe());
    assert!(out.contains("a busy child: wait4 pid, its user time > 0: 1\n"), "{}", emu.describe());
    equivalent("jobctl_probe.dyn", &[], &[]);
}

/// `memfd_create`, `copy_file_range`, `splice`, `tee` and `vmsplice` (`splice_probe`, in a
/// scratch directory): a memfd as a file with its `/proc/self/fd` name, reopened, mapped and
/// sealed; copies with and without offsets and Linux's errors (EXDEV between a memfd and a
/// file); file to pipe, pipe to file, pipe to pipe, `tee`, `vmsplice` both ways, non-blocking
/// and blocked calls. Two runs with one seed have one trace hash.
#[test]
fn memfd_copy_file_range_and_splice_as_natively() {
    let emu = equivalent_and_deterministic("splice_probe");
    let out = emu.stdout_str();
    assert!(out.contains("  readlink: \"/memfd:probe (deleted)\"\n"), "{}", emu.describe());
    assert!(out.contains("  after a store through the mapping: \"HELLO memfd\"\n"), "{}", emu.describe());
    assert!(out.contains("  ftruncate to 10 (sealed): -1 Operation not permitted\n"), "{}", emu.describe());
    assert!(out.contains("  the copy: \"01fghij7\"\n"), "{}", emu.describe());
    assert!(out.contains("copy_file_range to a memfd: -1 Invalid cross-device link\n"), "{}", emu.describe());
    assert!(out.contains("  the file: 28 \"splic...............eda file\"\n"), "{}", emu.describe());
    assert!(out.contains("  left in the tee'd pipe: 9 \"ceda file\"\n"), "{}", emu.describe());
    assert!(out.contains("the blocked splice moved 4 bytes: \"late\"\n"), "{}", emu.describe());
}

/// `openat2` (`openat2_probe`, in a scratch directory): `struct open_how`'s size (EINVAL, E2BIG)
/// and its flags, mode and resolve flags checked as Linux's `build_open_flags`; the walk under
/// `RESOLVE_NO_SYMLINKS`, `RESOLVE_BENEATH`, `RESOLVE_IN_ROOT`, `RESOLVE_NO_MAGICLINKS` and
/// `RESOLVE_NO_XDEV`. Two runs with one seed have one trace hash.
#[test]
fn openat2_as_natively() {
    let emu = equivalent_and_deterministic("openat2_probe");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("size 32, an extra byte set                                 -1 Argument list too long\n");
    has("d: rel, RESOLVE_NO_SYMLINKS                                -1 Too many levels of symbolic links\n");
    has("d: up (-> ../top), RESOLVE_BENEATH                         -1 Invalid cross-device link\n");
    has("d: rootlink (-> /f), RESOLVE_IN_ROOT                       ok in d\n");
    has("/proc/self/fd/N, RESOLVE_NO_MAGICLINKS                     -1 Too many levels of symbolic links\n");
    has("/proc/self/status, RESOLVE_NO_XDEV                         -1 Invalid cross-device link\n");
}

/// `/proc/self/task` lists the process's threads in order, `/proc/self/task/TID` its `comm`,
/// `/proc/PID/task` a child's thread, `/proc/self/fd` the open descriptors (`proc_task_probe`).
#[test]
fn proc_task_lists_the_threads_as_natively() {
    let emu = equivalent_and_deterministic("proc_task_probe");
    let out = emu.stdout_str();
    assert!(
        out.contains("/proc/self/task: 3 entries, the main thread listed, the workers listed, ascending yes\n"),
        "{}",
        emu.describe()
    );
    assert!(out.contains("/proc/CHILD/task: 1 entries, the child's pid listed\n"), "{}", emu.describe());
}

/// Priority-inheritance futexes (`pi_futex_probe`): a `PTHREAD_PRIO_INHERIT` mutex under
/// contention and with a condition variable, an error-checking one, a robust one whose owner
/// ends holding it (EOWNERDEAD, then consistent); the raw `FUTEX_LOCK_PI`, `LOCK_PI2`,
/// `TRYLOCK_PI` and `UNLOCK_PI` with the owner's tid, `FUTEX_WAITERS` and `FUTEX_OWNER_DIED`
/// in the word, EDEADLK (the owner, a cycle of PI waits), ESRCH (a word naming no thread),
/// EPERM, ETIMEDOUT, EINVAL for `FUTEX_WAKE` on a PI futex with a waiter, ENOSYS for
/// `FUTEX_CLOCK_REALTIME` where Linux refuses it; `WAIT_REQUEUE_PI`/`CMP_REQUEUE_PI` with the
/// lock held (the waiter moved, then handed it) and free (the waiter given it). Two runs with one
/// seed have one trace hash; the dynamic build agrees; and hmtrace sees the mutex's lock and
/// unlock as synchronisation (the counter it protects is no race).
#[test]
fn pi_futexes_as_natively() {
    let emu = equivalent_and_deterministic("pi_futex_probe");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("4 threads x 2000 increments under a PI mutex: 8000\n");
    has("LOCK_PI again by its owner:                  -1 Resource deadlock avoided\n");
    has("LOCK_PI of a word naming no thread:          -1 No such process\n  the word: 0xbffffff0\n");
    has("TRYLOCK_PI of it:                            -1 Resource temporarily unavailable\n");
    has("LOCK_PI2 until 20 ms from now:               -1 Connection timed out\n");
    has("LOCK_PI of lb, held by la's waiter:          -1 Resource deadlock avoided\n");
    has("FUTEX_WAKE of a PI futex with a waiter:      -1 Invalid argument\n");
    has("la held: CMP_REQUEUE_PI: 1\n  la                                         owner me |WAITERS\n");
    has("  the waiter's WAIT_REQUEUE_PI: 0\n  la as it found it                          owner T |WAITERS\n");
    has("robust PI mutex, its owner ended: Owner died\n  consistent: 0, unlock: 0\n  lock again: 0\n");
    equivalent("pi_futex_probe.dyn", &[], &[]);
    let prog = guest("pi_futex_probe");
    for seed in ["1", "2"] {
        let run = Ferrite::run(&prog).opts(&["--seed", seed, "--analyses", "hmtrace", "--report", "r.json"]).go();
        let report = run.json("r.json");
        assert!(findings_of(&report, "hmtrace").is_empty(), "{}", run.describe());
        run.assert_code(0);
    }
}

/// A process's own CPU time apart from its children's and a thread's apart from the others'
/// (`cpu_clocks`): `CLOCK_PROCESS_CPUTIME_ID`, `CLOCK_THREAD_CPUTIME_ID`, `getrusage`'s
/// `RUSAGE_SELF`, `RUSAGE_THREAD` and `RUSAGE_CHILDREN`, `times`, and the clocks of
/// `clock_getcpuclockid` (a live child's, a reaped one's ESRCH) and `pthread_getcpuclockid`;
/// `clock_getres` of an unknown clock is EINVAL. The dynamic build agrees.
#[test]
fn cpu_clocks_per_process_and_thread_as_natively() {
    let emu = equivalent_and_deterministic("cpu_clocks");
    let out = emu.stdout_str();
    assert_eq!(out.matches(": yes\n").count(), 7, "{}", emu.describe());
    assert!(out.contains("clock_getcpuclockid of the reaped child: No such process\n"), "{}", emu.describe());
    equivalent("cpu_clocks.dyn", &[], &[]);
}

/// `preadv`, `pwritev`, `preadv2` and `pwritev2` (`rw_vectors`, in a scratch directory): at an
/// offset with the file's own untouched, at -1 through the file's offset (the `2` calls),
/// `RWF_APPEND`, `RWF_NOWAIT`, an unknown flag (EOPNOTSUPP), a negative offset (EINVAL), a pipe
/// (ESPIPE, or its stream at -1). The dynamic build agrees.
#[test]
fn vectored_positional_io_as_natively() {
    let (_, emu) = equivalent("rw_vectors", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("  read: \"hel\" \"lo worl\"\n"), "{}", emu.describe());
    assert!(
        out.contains("pwritev2 with an unknown flag:           -1 Operation not supported\n"),
        "{}",
        emu.describe()
    );
    equivalent("rw_vectors.dyn", &[], &[]);
}

/// `O_PATH` descriptors (`opath_probe`, in a scratch directory): of a symbolic link itself with
/// `O_NOFOLLOW` (`fstat` and `fstatat(AT_EMPTY_PATH)` describe the link, `readlinkat(fd, "")`
/// reads it, `read`/`write` are EBADF), of a file (`readlinkat(fd, "")` ENOENT), of a directory
/// (`openat` and `fchdir` through it) and of a FIFO (no waiting for a partner). The dynamic build
/// agrees.
#[test]
fn o_path_descriptors_as_natively() {
    let (_, emu) = equivalent("opath_probe", &[], &[]);
    let out = emu.stdout_str();
    assert!(out.contains("  fstat: link, size 3\n"), "{}", emu.describe());
    assert!(out.contains("  the link reads \"tgt\"\n"), "{}", emu.describe());
    assert!(out.contains("open(fifo, O_PATH) (no waiting) >= 0:          1\n"), "{}", emu.describe());
    equivalent("opath_probe.dyn", &[], &[]);
}

/// The NUMA memory-policy calls (`numa_probe`) are ENOSYS, as from a Linux without NUMA, and
/// named by no warning (the harness fails a run that warns).
#[test]
fn numa_policies_are_absent_without_a_warning() {
    let emu = emulated(&guest("numa_probe"), &[], &[]);
    assert_eq!(emu.code, 0, "{}", emu.describe());
    assert_eq!(emu.stdout_str().matches("Function not implemented\n").count(), 5, "{}", emu.describe());
}

/// `futex_waitv` (`futex_waitv_probe`): Linux's errors in its order (flags, the count, the
/// vector, the clock, the `timespec`, each entry's size, flags, reserved field, value and
/// alignment, EFAULT, EAGAIN for the first word that differs), absolute timeouts on
/// `CLOCK_MONOTONIC` and `CLOCK_REALTIME`, and a thread waiting on several words woken on any
/// one by `FUTEX_WAKE`, `FUTEX_WAKE_BITSET` or after a `FUTEX_CMP_REQUEUE`, returning that
/// word's index; 128 words; a plain waiter beside it; EINTR from a handler, a restart under
/// `SA_RESTART`; a child process woken through a shared mapping. Two runs with one seed have
/// one trace hash.
#[test]
fn futex_waitv_as_natively() {
    let emu = equivalent_and_deterministic("futex_waitv_probe");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("entry 0 differs, entry 1 unmapped:                   -1 Resource temporarily unavailable\n");
    has("128 words, FUTEX_WAKE on word 127:                   127\n");
    has("requeued from word 1 to 5, FUTEX_WAKE on word 5:     1\n");
    has("a handler without SA_RESTART:                        -1 Interrupted system call\n");
    has("a child on 2 shared words, its parent wakes word 1:  1\n");
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("futex_waitv_probe.dyn", &[], &[]);
}

/// The futex2 calls `futex_wake`, `futex_wait`, `futex_requeue` and `FUTEX2_NUMA`
/// (`futex2_probe`): Linux's errors in its order (flags, sizes, values and masks wider than the
/// word, the clock, alignment, a bad node, differing flags of a requeue's two words), the node
/// id -1 written back as node 0, a wake by mask, a wake of 0, a legacy `FUTEX_WAKE` waking a
/// futex2 waiter, a requeue between NUMA words. The base returned ENOSYS for all three calls
/// and EINVAL for a NUMA entry of `futex_waitv`.
#[test]
fn futex2_calls_as_natively() {
    let emu = equivalent_and_deterministic("futex2_probe");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("wake: NUMA node -1: 0, node now 0\n");
    has("mask: wake 0x3: 1\n");
    has("numa: requeue 0 woken, 1 moved: 1, the target's node now 0\n");
    has("waitv: NUMA entry, other value: -1 Resource temporarily unavailable, node now 0\n");
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("futex2_probe.dyn", &[], &[]);
}

/// A process killed by another (`kill(pid, SIGKILL)`) while it holds a robust mutex in a shared
/// mapping (`robust_killed`): its robust list is walked in its own memory, so the waiter in the
/// killer's process gets EOWNERDEAD, as on Linux. The base left the waiter blocked: a deadlock
/// finding.
#[test]
fn a_killed_process_robust_mutex_goes_to_its_waiter_as_natively() {
    let emu = equivalent_and_deterministic("robust_killed");
    assert!(emu.stdout_str().contains("the waiter's lock: EOWNERDEAD\n"), "{}", emu.describe());
    for (strategy, seed) in [("random", 3u64), ("pct", 5), ("fifo", 1)] {
        let run = Ferrite::run(&guest("robust_killed"))
            .opts(&["--analyses", "none", "--strategy", strategy, "--seed", &seed.to_string()])
            .go();
        assert_eq!(run.stdout_str(), emu.stdout_str(), "{strategy} seed {seed}\n{}", run.describe());
    }
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("robust_killed.dyn", &[], &[]);
}

/// `/proc/PID/cmdline` read from the process's memory as Linux's `get_mm_cmdline` does
/// (`proc_title`): an argument shortened in place shows its moved NUL; a title written over
/// every argument and on into the environment (`setproctitle`, as servers name their workers)
/// shows up to its NUL, read by the parent; the last argument's NUL overwritten cuts the title
/// at the first NUL; `prctl(PR_SET_NAME)` in `comm`. The base showed the arguments as `execve`
/// gave them.
#[test]
fn proc_cmdline_reads_the_rewritten_arguments_as_natively() {
    let emu = equivalent_and_deterministic("proc_title");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("the child, seen by its parent: 251 bytes:worker: serving connections on port 8080 ....");
    has("the child, seen by its parent: comm kv-worker\n");
    has("|al|ha|beta|\n");
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("proc_title.dyn", &[], &[]);
}

/// `/proc/PID/stat`, `status`, `cmdline` and `comm` of another process, and `/proc/self/cmdline`
/// (`proc_pid_files`): a child waiting on a pipe sleeps (`S`), with its name, its parent and
/// group, one thread and 52 fields; its cmdline is its parent's (a fork); writing its `comm`
/// from another process is EINVAL; stopped it is `T`; killed and not yet reaped a zombie (`Z`)
/// with its name and an empty cmdline; reaped, gone. Two runs with one seed have one trace hash.
#[test]
fn proc_pid_files_as_natively() {
    let emu = equivalent_and_deterministic("proc_pid_files");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("the child waiting on a pipe: state S\n");
    has("  stat: name pid-files-kid, parent me, group mine, threads 1, 52 fields\n");
    has("  status: Name pid-files-kid, State S (sleeping), PPid me, Threads 1\n");
    has("  writing its comm from here: Invalid argument\n");
    has("killed, not waited for: state Z\n");
    has("reaped: /proc/CHILD/stat gone\n");
    // The dynamically linked build (glibc's wrappers from libc.so through ld.so) agrees.
    equivalent("proc_pid_files.dyn", &[], &[]);
}

/// A process that ends by `exit_group` while another of its threads holds a process-shared
/// mutex a thread of another process waits for (`pi_exit_group`): each of its threads' robust
/// lists is walked and the PI futexes they own are handed to their first waiters, as Linux's
/// `futex_exit_release` in `do_exit`: `EOWNERDEAD` for a robust PI mutex and a robust one; a PI
/// lock that is not robust taken by `FUTEX_LOCK_PI` with `FUTEX_OWNER_DIED` in its word (Linux's
/// `fixup_pi_state_owner`). Two runs with one seed have one trace hash.
#[test]
fn futexes_of_a_process_ended_by_exit_group_as_natively() {
    let emu = equivalent_and_deterministic("pi_exit_group");
    let out = emu.stdout_str();
    let has = |s: &str| assert!(out.contains(s), "{s:?} missing\n{}", emu.describe());
    has("robust, PTHREAD_PRIO_INHERIT:        lock: Owner died\n");
    has("PTHREAD_PRIO_INHERIT:                FUTEX_LOCK_PI: 0, owner me |WAITERS |OWNER_DIED\n");
    has("robust:                              lock: Owner died\n");
}

/// A pre-forking server's sockets (nginx with `listen ... reuseport`, each worker its own
/// listener): listeners that set `SO_REUSEPORT` share a loopback port and its connections, the
/// group outlives its first socket, a socket without the option is EADDRINUSE; and the
/// controls nginx's master sets on each worker's channel (`FIOASYNC`, `F_SETOWN`, and
/// `FIOCLEX`/`FIONCLEX`), which were ENOTTY and EINVAL, so nginx started no worker.
#[test]
fn reuseport_and_channel_controls_as_natively() {
    let (_, emu) = equivalent("reuseport_probe", &[], &[]);
    assert!(emu.stdout_str().contains("second SO_REUSEPORT listener: ok\n"), "{}", emu.describe());
    assert!(emu.stdout_str().contains("FIOASYNC: 0, O_ASYNC: 1\n"), "{}", emu.describe());
    // Under ferrite the connections are spread by their ports, the same way each run.
    let split = emulated(&guest("reuseport_probe"), &["split"], &[]);
    assert!(split.stdout_str().contains("split: 4 4\n"), "{}", split.describe());
}

/// Hostile requests answered as Linux answers them (the third sweep): `mmap` of 2^47 bytes and
/// at 2^47 (ENOMEM), `brk` below its start, past the address space, shrunk and grown again
/// (the old bytes gone), `clone3` with sizes from 0 to two pages (EINVAL below 64, E2BIG past a
/// page or for a byte set past the fields Linux 6.1 knows, which the base accepted), and
/// `setrlimit` read back (the base answered the old limits) with `RLIMIT_AS` bounding `mmap`.
#[test]
fn hostile_requests_as_natively() {
    for what in ["mmap47", "brk", "clone3", "rlimits"] {
        let (nat, emu) = equivalent("hostile_probe", &[what], &[]);
        assert!(!nat.stdout_str().is_empty(), "{what}: {}", nat.describe());
        assert_eq!(emu.code, 0, "{what}: {}", emu.describe());
    }
}

/// Shared anonymous memory and System V attachments that `mremap` grows, moved or in place: the
/// kept pages stay shared with a forked child and the grown ones raise SIGBUS, as Linux's shmem
/// object keeps its size (the base gave them fresh pages of the caller's own).
#[test]
fn grown_shared_memory_raises_sigbus_past_its_object() {
    let (nat, _) = equivalent("mremap_shared_probe", &[], &[]);
    assert!(nat.stdout_str().contains("grown 7"), "{}", nat.describe());
}

/// What a guest does to the machine itself (the sixth sweep, guest `machine_probe`), as Linux
/// answers it, with the default analyses and with none:
/// - `syscalls`: numbers no Linux call has (ENOSYS, and a warning naming them as such), a
///   number with bits above 32 (Linux ignores them: 2^32 + 39 is getpid; the base said
///   ENOSYS), clone flags `copy_process` refuses (EINVAL; the base gave ENOSYS), futex wakes
///   and requeues on unaligned, kernel and unmapped words (EINVAL, EFAULT; the base woke 0),
///   and what `FUTEX_REQUEUE` returns (woken and requeued; the base counted only the woken);
/// - `prctl`: the parent-death signal, subreaper, no_new_privs, timer slack, THP, keepcaps,
///   seccomp, TSC settings read back (the base answered EINVAL to all), `personality`
///   (ENOSYS on the base) kept across fork, `arch_prctl`'s CPUID controls and a non-canonical
///   GS base (EPERM; the base set it);
/// - `reaper`: a subreaper adopts and reaps its orphaned grandchild, which gets its
///   parent-death signal (the base: neither);
/// - `mem`: `mincore`, `mlockall`, `membarrier` (ENOSYS on the base), madvise's unknown
///   advice (EINVAL; the base said 0);
/// - `alias`: a memfd mapped shared read-write and read-only, stores and `pwrite` seen through
///   both (the base made the read-only view a copy taken at `mmap`);
/// - `jit` (the seventh sweep): a memfd mapped shared read-write and read-execute, code
///   written through the first (and by `pwrite`, and through a third view) and run through
///   the second, again and again (session 46's base ran the first translation every time);
/// - `leftover` (the seventh sweep): `sendto`/`recvfrom` of a buffer above user space on a
///   pipe (EFAULT; the base said ENOTSOCK), `PR_SET_VMA` (EINVAL; the base said 0), the
///   private expedited `membarrier` before its registration (EPERM; the base said 0), `int
///   $n` of vectors user mode may not raise (SIGSEGV at the instruction; the base raised the
///   vector's exception after it), `MADV_WIPEONFORK` and `MADV_DONTFORK` as a child and a
///   grandchild see them (the base copied both);
/// - `seventh` (the seventh sweep): `sched_setaffinity` to one CPU then `sched_getcpu`, in the
///   thread and a thread it makes, and to no CPU that exists (EINVAL; the base ignored the
///   mask), `posix_fadvise`'s unknown advice (EINVAL; the base said 0), a pipe's two ends one
///   inode that `/proc/self/fd/N` names (the base: `pipe:`), `RLIMIT_AS` lowered leaving the
///   hard limit unlimited (the base: EPERM, its hard limit being `--max-memory`).
#[test]
fn what_guests_do_to_the_machine_as_natively() {
    let prog = guest("machine_probe");
    for what in ["syscalls", "prctl", "reaper", "mem", "alias", "jit", "leftover", "seventh"] {
        let nat = native(&prog, &[what], &[]);
        assert_eq!(nat.code, 0, "{what}: {}", nat.describe());
        for analyses in ["all", "none"] {
            let emu = Ferrite::run(&prog).args(&[what]).opts(&["--analyses", analyses]).allow_unsupported().go();
            assert_same_stdout(&nat, &emu);
            assert_same_status(&nat, &emu);
            if what == "syscalls" {
                assert!(
                    emu.stderr.contains("unsupported system call unknown to Linux (number 1000)"),
                    "{}",
                    emu.describe()
                );
                assert!(emu.stderr.contains("of the x32 ABI"), "{}", emu.describe());
            } else {
                assert!(!emu.stderr.contains(UNSUPPORTED), "{what}: {}", emu.describe());
            }
        }
    }
    // The probes that make threads and processes run the same way every time.
    for what in ["leftover", "seventh"] {
        let hash = || {
            let run = Ferrite::run(&prog).args(&[what]).opts(&["--report", "r.json"]).allow_unsupported().go();
            get(&run.json("r.json"), "run.trace_hash").as_str().unwrap_or_default().to_string()
        };
        let first = hash();
        assert!(!first.is_empty(), "{what}");
        assert_eq!(first, hash(), "{what}: the trace hash of two runs");
    }
}
