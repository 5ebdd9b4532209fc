//! `ferrite crash` and the program's ordinary files: a crash image holds the files the workload
//! changed in its working directory as of their last fsync, recovery sees those versions in a
//! private working directory, and nothing ferrite crash runs ever changes the user's files.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Every file and directory below `dir`, with the files' contents.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
                out.insert(rel, None);
            } else {
                out.insert(rel, Some(std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out
}

/// `ferrite crash` of `prog` (pool in the PM mount, log `log`) in `dir`, its report written to
/// `report`; `extra` options before the command.
fn crash_in(dir: tempfile::TempDir, prog: &str, log: &str, report: &Path, extra: &[&str]) -> Run {
    let g = guest(prog);
    let recover = format!("{} /mnt/pmem0/pool {log} recover", g.display());
    let mut opts: Vec<String> =
        vec!["--quiet".into(), "--report".into(), report.display().to_string(), "--recover".into(), recover];
    opts.extend(extra.iter().map(|s| s.to_string()));
    Ferrite::crash(&g).opts(&opts).args(&["/mnt/pmem0/pool", log]).in_dir(dir).go()
}

fn crash_findings(report: &Value) -> Vec<&Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["analysis"] == "crash").collect()
}

#[test]
fn a_counter_persisted_before_its_record_is_fsynced_fails_recovery_and_the_fixed_twin_passes() {
    let bug = u64::from(marker_line("pm_fsync_log.c", "/* BUG: counter persisted before the record is fsynced */"));
    let out = scratch();
    let report = out.path().join("r.json");
    let run = crash_in(scratch(), "pm_fsync_log", "pm_fsync_log.txt", &report, &[]);
    run.assert_code(66);
    let r = read_json(&report);
    assert!(r["crash"]["failures"].as_u64().unwrap() > 0, "{}", r["crash"]);
    let found = crash_findings(&r);
    assert!(!found.is_empty(), "{}", run.describe());
    for f in &found {
        assert_eq!(f["kind"], "recovery-failed");
        let point: Vec<u64> = f["locations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["role"] == "crash point")
            .map(|l| l["line"].as_u64().unwrap())
            .collect();
        assert_eq!(point, vec![bug], "the crash point is the counter's fence, before the fsync: {f}");
        let msg = f["message"].as_str().unwrap();
        // Nothing in PM need be lost: the file's unsynced record is what is missing.
        assert!(msg.contains("even with everything stored so far persisted"), "{msg}");
        assert!(msg.contains("pm_fsync_log.txt ("), "the message names the file: {msg}");
    }
    // Recoveries restored from a snapshot see each image's own files, as fresh ones do (the
    // recovery looks at the log before it opens the pool).
    let fresh_report = out.path().join("fresh.json");
    crash_in(scratch(), "pm_fsync_log", "pm_fsync_log.txt", &fresh_report, &["--fresh-recoveries"]).assert_code(66);
    let fresh = read_json(&fresh_report);
    assert_eq!(fresh["crash"], r["crash"]);
    assert_eq!(fresh["findings"], r["findings"]);
    // Lazy exploration builds its images the same way.
    let lazy = crash_in(scratch(), "pm_fsync_log", "pm_fsync_log.txt", &out.path().join("lazy.json"), &["--lazy"]);
    lazy.assert_code(66);
    // The image, working-directory file included, is rebuilt and fails again.
    let replay = Ferrite::replay(&report).opts(&["--finding", &found[0]["id"].to_string()]).in_dir(scratch()).go();
    replay.assert_code(66);
    assert!(replay.stderr.contains("replay reproduced finding"), "{}", replay.describe());

    let report = out.path().join("fixed.json");
    let run = crash_in(scratch(), "pm_fsync_log_fixed", "pm_fsync_log.txt", &report, &[]);
    run.assert_code(0);
    let r = read_json(&report);
    assert_eq!(r["crash"]["failures"], 0, "{}", run.describe());
    assert!(crash_findings(&r).is_empty());
    // Each fsync that makes a record durable is a crash point of its own.
    assert!(r["crash"]["crash_points"].as_u64().unwrap() >= 8, "{}", r["crash"]);
}

#[test]
fn crash_testing_never_changes_the_users_working_directory() {
    let dir = scratch();
    // A log left by an earlier native run, and a file of the user's.
    std::fs::write(dir.path().join("pm_fsync_log.txt"), b"record 00000000\nrecord 00000001\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"the user's own file\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/data"), b"more\n").unwrap();
    let before = tree(dir.path());
    let path = dir.path().to_path_buf();
    // The log named by its absolute path: the private working directory redirects it too.
    let log = path.join("pm_fsync_log.txt").display().to_string();
    let out = scratch();
    // The checker reads the marker the recovery wrote in its working directory.
    let run = crash_in(
        dir,
        "pm_fsync_log_fixed",
        &log,
        &out.path().join("fixed.json"),
        &["--check", "/bin/cat recovered.txt"],
    );
    run.assert_code(0);
    let r = read_json(&out.path().join("fixed.json"));
    assert_eq!(r["crash"]["failures"], 0, "{}", run.describe());
    assert!(r["crash"]["recoveries"].as_u64().unwrap() > 1);
    assert_eq!(tree(&path), before, "the workload, the recoveries and the checker left the directory as it was");

    let dir = run.dir;
    let run = crash_in(dir, "pm_fsync_log", &log, &out.path().join("bug.json"), &["--jobs", "2"]);
    run.assert_code(66);
    assert!(!crash_findings(&read_json(&out.path().join("bug.json"))).is_empty(), "{}", run.describe());
    assert_eq!(tree(&path), before, "failing recoveries did not change it either");

    // Run as usual, the same workload does write there: the check above is not vacuous.
    let dir = run.dir;
    let run = Ferrite::run(&guest("pm_fsync_log_fixed")).args(&["/mnt/pmem0/pool", log.as_str()]).in_dir(dir).go();
    run.assert_code(0);
    assert_eq!(std::fs::read(path.join("pm_fsync_log.txt")).unwrap().len(), 4 * 16);
}

/// A started guest whose system calls the test makes itself, straight into the kernel.
struct Calls {
    m: emu::Machine,
    k: syscalls::Kernel,
    /// Where the next string goes (below the stack pointer).
    at: u64,
}

impl Calls {
    fn new(cwd: &Path, pm: &Path, track: bool) -> Calls {
        let program = std::fs::read(guest("exit_status")).unwrap();
        let mut m = emu::Machine::new(emu::MachineConfig::default()).unwrap();
        let mut k = syscalls::Kernel::new(syscalls::KernelConfig {
            seed: 1,
            pm_mount: "/mnt/pmem0".into(),
            pm_dir: pm.to_path_buf(),
            cwd: cwd.to_path_buf(),
            max_memory: 1 << 30,
            exe: "/calls".into(),
            cpus: 1,
            max_threads: 4,
            discard_output: true,
            max_open_files: 64,
            remap_pm: false,
            private_cwd: true,
            track_durable: track,
            hash_inputs: true,
            trace_syscalls: false,
        });
        syscalls::exec(&mut m, &mut k, &program, &[b"calls".to_vec()], &[]).unwrap();
        let at = m.reg(emu::Reg::RSP) - 0x10000;
        Calls { m, k, at }
    }

    fn call(&mut self, nr: u64, args: &[u64]) -> i64 {
        use emu::Reg;
        self.m.set_reg(Reg::RAX, nr);
        for (r, v) in [Reg::RDI, Reg::RSI, Reg::RDX, Reg::R10].iter().zip(args) {
            self.m.set_reg(*r, *v);
        }
        self.k.syscall(&mut self.m);
        self.m.reg(Reg::RAX) as i64
    }

    /// Guest memory holding `bytes`.
    fn bytes(&mut self, bytes: &[u8]) -> u64 {
        self.at -= (bytes.len() as u64 + 16) & !15;
        self.m.write(self.at, bytes, false).unwrap();
        self.at
    }

    fn path(&mut self, p: &str) -> u64 {
        self.bytes(format!("{p}\0").as_bytes())
    }

    fn open(&mut self, p: &str, flags: i32) -> i64 {
        let a = self.path(p);
        self.call(257, &[libc::AT_FDCWD as u64, a, flags as u64, 0o644])
    }

    fn write(&mut self, fd: i64, data: &[u8]) {
        let a = self.bytes(data);
        assert_eq!(self.call(1, &[fd as u64, a, data.len() as u64]), data.len() as i64);
    }

    fn read_file(&mut self, p: &str) -> Result<Vec<u8>, i64> {
        let fd = self.open(p, libc::O_RDONLY);
        if fd < 0 {
            return Err(fd);
        }
        let buf = self.bytes(&[0; 256]);
        let n = self.call(0, &[fd as u64, buf, 256]);
        self.call(3, &[fd as u64]);
        let mut out = vec![0; n as usize];
        self.m.read(buf, &mut out).unwrap();
        Ok(out)
    }

    fn unlink(&mut self, p: &str) -> i64 {
        let a = self.path(p);
        self.call(87, &[a])
    }

    fn rename(&mut self, from: &str, to: &str) -> i64 {
        let (a, b) = (self.path(from), self.path(to));
        self.call(82, &[a, b])
    }

    /// The names a directory lists, without `.` and `..`.
    fn list(&mut self, p: &str) -> Vec<String> {
        let fd = self.open(p, libc::O_RDONLY | libc::O_DIRECTORY);
        assert!(fd >= 0, "open {p}: {fd}");
        let buf = self.bytes(&[0; 4096]);
        let n = self.call(217, &[fd as u64, buf, 4096]);
        self.call(3, &[fd as u64]);
        let mut raw = vec![0; n as usize];
        self.m.read(buf, &mut raw).unwrap();
        let mut names = Vec::new();
        let mut off = 0;
        while off < raw.len() {
            let reclen = u16::from_le_bytes([raw[off + 16], raw[off + 17]]) as usize;
            let name = &raw[off + 19..off + reclen];
            let name = String::from_utf8_lossy(&name[..name.iter().position(|b| *b == 0).unwrap()]).into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
            off += reclen;
        }
        names.sort();
        names
    }

    fn durable(&self, rel: &str) -> Option<Option<Vec<u8>>> {
        self.k.durable_files().get(Path::new(rel)).cloned()
    }
}

/// The rules of `syscalls::fs::Durable`: data at fsync (or an O_DSYNC write), names at once.
#[test]
fn a_crash_keeps_file_data_as_of_the_last_fsync_and_names_at_once() {
    let (cwd, pm) = (scratch(), scratch());
    std::fs::write(cwd.path().join("old.txt"), b"old").unwrap();
    let before = tree(cwd.path());
    let mut c = Calls::new(cwd.path(), pm.path(), true);
    // Created: present and empty until synced.
    let fd = c.open("new.txt", libc::O_CREAT | libc::O_WRONLY);
    assert!(fd >= 0);
    assert_eq!(c.durable("new.txt"), Some(Some(Vec::new())));
    c.write(fd, b"abc");
    assert_eq!(c.durable("new.txt"), Some(Some(Vec::new())));
    assert_eq!(c.call(74, &[fd as u64]), 0);
    assert_eq!(c.durable("new.txt"), Some(Some(b"abc".to_vec())));
    c.write(fd, b"def");
    assert_eq!(c.durable("new.txt"), Some(Some(b"abc".to_vec())), "written after the fsync: lost");
    // Truncated, not synced: the old data survives.
    let old = c.open("old.txt", libc::O_WRONLY | libc::O_TRUNC);
    assert!(old >= 0);
    assert_eq!(c.durable("old.txt"), Some(Some(b"old".to_vec())));
    // A rename moves the durable content; a removal is durable at once.
    assert_eq!(c.rename("new.txt", "moved.txt"), 0);
    assert_eq!(c.durable("moved.txt"), Some(Some(b"abc".to_vec())));
    assert_eq!(c.durable("new.txt"), Some(None));
    assert_eq!(c.unlink(&format!("{}/old.txt", cwd.path().display())), 0, "an absolute path");
    assert_eq!(c.durable("old.txt"), Some(None));
    // O_DSYNC: each write is durable when it returns.
    let s = c.open("sync.txt", libc::O_CREAT | libc::O_WRONLY | libc::O_DSYNC);
    c.write(s, b"x");
    assert_eq!(c.durable("sync.txt"), Some(Some(b"x".to_vec())));
    let initial = c.k.initial_files();
    assert_eq!(initial.get(Path::new("old.txt")), Some(&Some(b"old".to_vec())));
    assert_eq!(initial.get(Path::new("new.txt")), Some(&None));
    assert_eq!(initial.get(Path::new("moved.txt")), Some(&None));
    // The guest sees its own files; the user's directory is as it was.
    assert_eq!(c.read_file("moved.txt"), Ok(b"abcdef".to_vec()));
    assert_eq!(c.read_file("old.txt"), Err(-libc::ENOENT as i64));
    assert_eq!(c.list("."), vec!["moved.txt", "sync.txt"]);
    assert_eq!(tree(cwd.path()), before);
}

/// A private working directory: the crash image's files over the user's, which it only reads.
#[test]
fn a_private_working_directory_lays_the_image_over_the_users_files() {
    let (cwd, pm) = (scratch(), scratch());
    std::fs::write(cwd.path().join("a.txt"), b"lower").unwrap();
    std::fs::write(cwd.path().join("keep.txt"), b"keep").unwrap();
    std::fs::create_dir(cwd.path().join("d")).unwrap();
    std::fs::write(cwd.path().join("d/b.txt"), b"gone in the image").unwrap();
    let before = tree(cwd.path());
    // The image: a.txt at another version, d/b.txt absent.
    let private = pm.path().join(".ferrite-cwd");
    std::fs::create_dir_all(private.join("files")).unwrap();
    std::fs::write(private.join("files/a.txt"), b"durable").unwrap();
    std::fs::create_dir_all(private.join("hidden/d")).unwrap();
    std::fs::write(private.join("hidden/d/b.txt"), b"").unwrap();
    std::fs::write(pm.path().join("pool"), b"pm").unwrap();
    let mut c = Calls::new(cwd.path(), pm.path(), false);
    assert_eq!(c.read_file("a.txt"), Ok(b"durable".to_vec()));
    assert_eq!(c.read_file(&format!("{}/a.txt", cwd.path().display())), Ok(b"durable".to_vec()));
    assert_eq!(c.read_file("keep.txt"), Ok(b"keep".to_vec()));
    assert_eq!(c.read_file("d/b.txt"), Err(-libc::ENOENT as i64));
    assert_eq!(c.list("."), vec!["a.txt", "d", "keep.txt"]);
    assert_eq!(c.list("d"), Vec::<String>::new());
    // The PM mount does not show the private directory.
    assert_eq!(c.list("/mnt/pmem0"), vec!["pool"]);
    assert_eq!(c.read_file("/mnt/pmem0/.ferrite-cwd/files/a.txt"), Err(-libc::ENOENT as i64));
    // Changes stay private: a file of the user's is copied before it changes, hidden when removed.
    let fd = c.open("keep.txt", libc::O_WRONLY | libc::O_APPEND);
    c.write(fd, b"+more");
    assert_eq!(c.read_file("keep.txt"), Ok(b"keep+more".to_vec()));
    assert_eq!(c.rename("keep.txt", "d/kept.txt"), 0);
    assert_eq!(c.read_file("d/kept.txt"), Ok(b"keep+more".to_vec()));
    assert_eq!(c.read_file("keep.txt"), Err(-libc::ENOENT as i64));
    assert_eq!(c.unlink("a.txt"), 0);
    assert_eq!(c.read_file("a.txt"), Err(-libc::ENOENT as i64), "neither the image's nor the user's");
    let n = c.path("new");
    assert_eq!(c.call(83, &[n, 0o755]), 0);
    let fd = c.open("new/x", libc::O_CREAT | libc::O_WRONLY);
    c.write(fd, b"x");
    assert_eq!(c.list("."), vec!["d", "new"]);
    assert_eq!(c.list("d"), vec!["kept.txt"]);
    assert_eq!(tree(cwd.path()), before, "the user's working directory is untouched");
}

/// An ordinary file written through a `MAP_SHARED` mapping: its stores reach the file, and a
/// crash keeps them as of the last `msync(MS_SYNC)` of the mapping, as of an fsync. A commit
/// mark made durable before its record fails recovery at the crash point of the second msync,
/// which the finding names; the twin that makes the record durable first passes. The user's
/// directory stays as it was.
#[test]
fn a_shared_mapping_of_a_file_is_durable_at_msync() {
    for (prog, code, failing) in [("file_mmap_log", 66, true), ("file_mmap_log_fixed", 0, false)] {
        let dir = scratch();
        let before = tree(dir.path());
        let out = scratch();
        let report = out.path().join("r.json");
        let g = guest(prog);
        let run = Ferrite::crash(&g)
            .opts(&["--quiet", "--report", report.to_str().unwrap(), "--recover", &format!("{} recover", g.display())])
            .in_dir(dir)
            .go();
        run.assert_code(code);
        let r = read_json(&report);
        assert_eq!(r["crash"]["failures"].as_u64().unwrap() > 0, failing, "{prog}: {}", run.describe());
        if failing {
            let second = u64::from(marker_line("file_mmap_log.c", "/* CRASH: here the mark is durable"));
            let f = crash_findings(&r)[0];
            assert!(f["message"].as_str().unwrap().contains("log.bin (4096 bytes)"), "{f}");
            let point = f["locations"].as_array().unwrap().iter().find(|l| l["role"] == "crash point").unwrap();
            assert_eq!(point["line"].as_u64(), Some(second), "{f}");
        }
        assert_eq!(tree(run.dir.path()), before, "{prog} changed the user's directory");
    }
}
