//! Real Debian programs, run by a shell under ferrite and natively in scratch directories of
//! the same contents: the same output and exit status, and no warning. Each one stood for a
//! system call or a semantics ferrite lacked when a sweep of Debian programs found it
//! (docs/testing.md, "A sweep of real programs"). A program that is not installed is skipped,
//! saying so.

mod common;

use std::path::Path;

use common::*;

/// Runs `script` with `/bin/sh -c` natively and under ferrite, each in a fresh scratch
/// directory, with the same small environment, and asserts the same stdout and status and no
/// warning from ferrite. Returns the emulated run, or `None` when a program in `needs` is
/// missing.
fn same_as_natively(needs: &[&str], script: &str) -> Option<Run> {
    for p in needs {
        if !Path::new(p).exists() {
            eprintln!("skipped: {p} is not installed");
            return None;
        }
    }
    let sh = Path::new("/bin/sh");
    let env = [("PATH", "/usr/bin:/bin"), ("LC_ALL", "C"), ("HOME", "/nonexistent")];
    let nat = native(sh, &["-c", script], &env);
    let emu = emulated(sh, &["-c", script], &env);
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
    Some(emu)
}

/// gzip, bzip2 and xz give their output the input's owner and mode with `fchown` and
/// `fchmod` (`fchown` was unsupported: a warning each run); `cp -a` keeps them with `fchown`.
#[test]
fn compressors_and_cp_a_keep_the_owner_with_fchown() {
    let script = "seq 1 20000 > a; chmod 640 a; gzip -k a; bzip2 -k a; xz -k a; cp -a a b; \
                  for f in a.gz a.bz2 a.xz b; do stat -c '%n %a %s' $f; done; \
                  gzip -dc a.gz | cmp - a && bzip2 -dc a.bz2 | cmp - a && xz -dc a.xz | cmp - a && echo same";
    if let Some(emu) = same_as_natively(&["/usr/bin/gzip", "/usr/bin/bzip2", "/usr/bin/xz"], script) {
        assert!(emu.stdout_str().ends_with("b 640 108894\nsame\n"), "{}", emu.describe());
    }
}

/// `git clone` of a local repository hard-links its objects and checks that each link is the
/// source (the same inode, device, size and owner): it died with "hardlink different from
/// source" while every name had an inode of its own.
#[test]
fn git_clone_of_a_local_repository() {
    let git = ["/usr/bin/git", "/usr/local/bin/git"].into_iter().find(|p| Path::new(p).exists());
    let Some(git) = git else {
        eprintln!("skipped: git is not installed");
        return;
    };
    let script = format!(
        "export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z \
         GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; G={git}; \
         $G init -q r && cd r && $G config user.email a@b && $G config user.name A && \
         seq 100 > f && $G add f && $G commit -q -m one && cd .. && $G clone -q r c && \
         cd c && $G log --format='%H %s' && ls -i f ../r/f | wc -l"
    );
    if let Some(emu) = same_as_natively(&[git], &script) {
        assert!(emu.stdout_str().contains(" one\n"), "{}", emu.describe());
    }
}

/// gcc times its passes with `getrusage` (unsupported before: a warning for every compile);
/// bash's `times` builtin calls `times`.
#[test]
fn gcc_and_bash_times_ask_for_their_cpu_time() {
    let script = "printf '#include <stdio.h>\\nint main(void){puts(\"hi\");return 0;}\\n' > h.c; \
                  gcc -O1 h.c -o h && ./h; bash -c 'times > /dev/null; echo timed'";
    if let Some(emu) = same_as_natively(&["/usr/bin/gcc", "/bin/bash"], script) {
        assert_eq!(emu.stdout_str(), "hi\ntimed\n", "{}", emu.describe());
    }
}

/// node (V8 and libuv) asks for its capabilities and a memory protection key at start-up
/// (`capget` and `pkey_alloc` were unsupported: two warnings each run). The guest is
/// unprivileged on a CPU without protection keys, and gets Linux's answers for that.
#[test]
fn capabilities_are_empty_and_no_protection_key_is_free() {
    let run = emulated(&guest("caps_pkeys"), &[], &[]);
    run.assert_code(0);
    assert_eq!(
        run.stdout_str(),
        "capget(version 0, NULL): 0\n\
         preferred version: 0x20080522\n\
         capget(version 0, data): Invalid argument\n\
         capget(v3, self): 0\n\
         sets: 0 0 0 0 0 0\n\
         capget(v3, no such pid): No such process\n\
         capget(v3, pid -1): Invalid argument\n\
         capset(empty sets): 0\n\
         capset(CAP_CHOWN): Operation not permitted\n\
         capset(another pid): Operation not permitted\n\
         pkey_alloc(0, 0): No space left on device\n\
         pkey_alloc(1, 0): Invalid argument\n\
         pkey_alloc(0, 4): Invalid argument\n\
         pkey_mprotect(-1): 0\n\
         pkey_mprotect(0): 0\n\
         pkey_mprotect(5): Invalid argument\n\
         pkey_free(3): Invalid argument\n",
        "{}",
        run.describe()
    );
    assert!(!run.stderr.contains("warning"), "{}", run.describe());
}

/// Python's multiprocessing with the forkserver start method: the forkserver gets each new
/// process's descriptors with `SCM_RIGHTS` (EOPNOTSUPP before: "OSError: [Errno 95]" in
/// `multiprocessing/reduction.py`), and the pool's locks are POSIX semaphores each process
/// maps by name (`sem_open`), whose shared futexes must meet across the processes' own
/// mappings of the file (a false deadlock before, at the pool's end).
#[test]
fn python_multiprocessing_forkserver_pool() {
    // A built-in function: `-c` has no `__main__` module the workers could import one from.
    let script = "python3 -c \"import multiprocessing as mp\n\
                  if __name__ == '__main__':\n    mp.set_start_method('forkserver')\n\
                  \x20   with mp.Pool(2) as p:\n        print(p.map(abs, range(-5, 5)))\"";
    if let Some(emu) = same_as_natively(&["/usr/bin/python3"], script) {
        assert_eq!(emu.stdout_str(), "[5, 4, 3, 2, 1, 0, 1, 2, 3, 4]\n", "{}", emu.describe());
    }
}

/// Perl's `IPC::SysV` (`IPC::Semaphore`, `IPC::SharedMem`, `IPC::Msg`): two forked children
/// add to a counter in a shared segment under a semaphore with `SEM_UNDO` and report over a
/// message queue; everything is removed at the end (System V IPC was ENOSYS: perl died at its
/// first `semget`).
#[test]
fn perl_ipc_sysv_children_share_a_segment_under_a_semaphore() {
    let script = "perl -e 'use IPC::SysV qw(IPC_PRIVATE IPC_CREAT S_IRUSR S_IWUSR SEM_UNDO);\n\
                  use IPC::Semaphore; use IPC::Msg; use IPC::SharedMem;\n\
                  my $sem = IPC::Semaphore->new(IPC_PRIVATE, 1, S_IRUSR | S_IWUSR | IPC_CREAT) or die;\n\
                  $sem->setval(0, 1);\n\
                  my $shm = IPC::SharedMem->new(IPC_PRIVATE, 64, S_IRUSR | S_IWUSR) or die;\n\
                  $shm->write(pack(q(L), 0), 0, 4);\n\
                  my $msg = IPC::Msg->new(IPC_PRIVATE, S_IRUSR | S_IWUSR) or die;\n\
                  for my $k (1..2) { if (fork() == 0) { for (1..100) { $sem->op(0, -1, SEM_UNDO);\n\
                  my $v = unpack(q(L), $shm->read(0, 4)); $shm->write(pack(q(L), $v + 1), 0, 4);\n\
                  $sem->op(0, 1, SEM_UNDO); } $msg->snd(1, qq(child $k done)); exit 0; } }\n\
                  my @got; for (1..2) { my $b; $msg->rcv($b, 64, 1); push @got, $b; } wait; wait;\n\
                  print join(q(, ), sort @got), qq(\\n), unpack(q(L), $shm->read(0, 4)), qq(\\n);\n\
                  $sem->remove; $shm->remove; $msg->remove;'";
    if let Some(emu) = same_as_natively(&["/usr/bin/perl"], script) {
        assert_eq!(emu.stdout_str(), "child 1 done, child 2 done\n200\n", "{}", emu.describe());
    }
}

/// gpg's symmetric encryption and decryption, with its agent started on demand: gpg-agent
/// watches its home directory with inotify (`inotify_init`, unsupported before: a warning
/// each run, and the agent went on without it).
#[test]
fn gpg_symmetric_round_trip_with_its_agent() {
    let script = "mkdir -m700 g; export GNUPGHOME=$PWD/g; echo secret > f; \
                  gpg --batch --passphrase x --pinentry-mode loopback --s2k-count 1024 -c f 2>/dev/null; \
                  gpg --batch --passphrase x --pinentry-mode loopback -d f.gpg 2>/dev/null; echo rc=$?; \
                  gpgconf --kill gpg-agent; ls";
    if let Some(emu) = same_as_natively(&["/usr/bin/gpg", "/usr/bin/gpg-agent", "/usr/bin/gpgconf"], script) {
        assert!(emu.stdout_str().starts_with("secret\nrc=0\n"), "{}", emu.describe());
    }
}

/// Job control in Debian's shells: dash stops a background job with `kill -STOP` and continues
/// it with `kill -CONT` (stop signals did nothing before); bash with job control on (`set -m`,
/// each job a process group of its own) sees a job stopped by `SIGTSTP` in `jobs` and continues
/// it with `kill -CONT %1`.
#[test]
fn shells_stop_and_continue_their_jobs() {
    let script = "sleep 1 & p=$!; kill -STOP $p; kill -CONT $p; wait $p; echo \"sh: $?\"; \
                  bash -c 'set -m; sleep 1 & kill -TSTP $!; sleep 0.1; jobs; kill -CONT %1; wait; echo \"bash: $?\"'";
    if let Some(emu) = same_as_natively(&["/bin/bash", "/usr/bin/sleep"], script) {
        assert!(emu.stdout_str().contains("Stopped"), "{}", emu.describe());
        assert!(emu.stdout_str().ends_with("bash: 0\n"), "{}", emu.describe());
    }
}

/// coreutils' `cp` copies with `copy_file_range` (which gave EXDEV before, so `cp` fell back
/// to read and write), and Python's `os.memfd_create` makes a memfd (unsupported before).
#[test]
fn cp_copies_with_copy_file_range_and_python_makes_a_memfd() {
    let script = "seq 1 5000 > a; cp a b; cmp a b && echo same; python3 -c \"import os; \
                  fd = os.memfd_create('x'); os.write(fd, b'abc'); os.lseek(fd, 0, 0); \
                  print(os.read(fd, 3), os.readlink('/proc/self/fd/%d' % fd))\"";
    if let Some(emu) = same_as_natively(&["/usr/bin/python3"], script) {
        assert_eq!(emu.stdout_str(), "same\nb'abc' /memfd:x (deleted)\n", "{}", emu.describe());
    }
}

/// Several sqlite3 processes insert into one database at once, in rollback-journal and WAL
/// mode, and `flock(1)` guards a counter file's read-modify-write: all 15 inserts and all 8
/// increments land, as natively. Every file lock was granted before (one process was assumed)
/// and one insert of 15 was silently lost under ferrite (`proc_file_locks` in
/// tests/processes.rs has the semantics).
#[test]
fn sqlite3_processes_and_flock_share_files_under_their_locks() {
    let script = "for mode in delete wal; do sqlite3 $mode.db \"pragma journal_mode=$mode; create table t(x)\" >/dev/null; \
                  for i in 1 2 3; do (for j in 1 2 3 4 5; do sqlite3 -cmd '.timeout 20000' $mode.db \"insert into t values($i$j)\"; done) & done; \
                  wait; sqlite3 $mode.db 'select count(*), sum(x) from t'; done; echo 0 > n; \
                  for i in 1 2 3 4 5 6 7 8; do flock n.lock sh -c 'read v < n; echo $((v + 1)) > n' & done; wait; cat n";
    if let Some(emu) = same_as_natively(&["/usr/bin/sqlite3", "/usr/bin/flock"], script) {
        assert_eq!(emu.stdout_str(), "15|345\n15|345\n8\n", "{}", emu.describe());
    }
}

/// nginx as a daemon with a master and two workers, each listening on its own `SO_REUSEPORT`
/// socket of one port, serving `curl` and `wget` (`sendfile`) and leaving at `kill -QUIT`:
/// the second listener's bind was EADDRINUSE (nginx exited 1), and without `reuseport` the
/// master's `FIOASYNC` and `F_SETOWN` on each worker's channel failed, so it started no worker
/// and `curl` waited forever.
#[test]
fn nginx_master_and_workers_serve_curl_and_wget() {
    let script = "D=$PWD; mkdir -p www logs tmp; seq 1 20000 > www/big.txt; echo hello > www/index.html; \
        printf 'user root;\\nworker_processes 2;\\npid %s/nginx.pid;\\nerror_log %s/logs/error.log;\\n\
events { worker_connections 64; }\\nhttp { access_log %s/logs/access.log; client_body_temp_path %s/tmp; \
proxy_temp_path %s/tmp; fastcgi_temp_path %s/tmp; uwsgi_temp_path %s/tmp; scgi_temp_path %s/tmp; \
sendfile on; server { listen 127.0.0.1:18931 reuseport; root %s/www; } }\\n' $D $D $D $D $D $D $D $D $D > nginx.conf; \
        /usr/sbin/nginx -p $D -c $D/nginx.conf -e $D/logs/error.log 2>/dev/null; \
        for i in 1 2 3 4 5 6 7 8 9 10; do [ -s nginx.pid ] && break; sleep 0.2; done; \
        curl -s http://127.0.0.1:18931/; curl -s http://127.0.0.1:18931/big.txt | md5sum; \
        curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:18931/missing; \
        wget -q -O - http://127.0.0.1:18931/big.txt | tail -1; kill -QUIT $(cat nginx.pid); \
        for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do [ -e nginx.pid ] || break; sleep 0.2; done; \
        wc -l < logs/access.log";
    if let Some(emu) = same_as_natively(&["/usr/sbin/nginx", "/usr/bin/curl", "/usr/bin/wget"], script) {
        assert!(emu.stdout_str().starts_with("hello\n"), "{}", emu.describe());
        assert!(emu.stdout_str().ends_with("20000\n4\n"), "{}", emu.describe());
    }
}
