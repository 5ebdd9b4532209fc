//! The sandbox: the guest may create or change files only under its working directory and the
//! PM mount. Every escape a guest can try (absolute paths, `..`, dirfd-relative opens,
//! AT_EMPTY_PATH, O_NOFOLLOW and O_CREAT through a dangling symbolic link, rename/link/symlink
//! targets outside, O_TMPFILE, /proc/self/{root,cwd,fd/N}) is refused, and the directory outside
//! is byte-for-byte unchanged afterwards. Symbolic links the guest makes to the host's `/proc`,
//! `/etc/mtab` and `/dev/fd` show the guest's own. Directories swapped for links to the outside
//! while a write is between its check and its open (by parallel `--explore` runs, or by a host
//! process) never lead a write outside, with Landlock and with the path checks alone.

mod common;

use std::path::Path;

use common::*;
use tempfile::TempDir;

#[test]
fn every_escape_is_refused_and_nothing_outside_changes() {
    // Both outside the guest's private temporary directories, which it may write.
    let work = outside_scratch();
    let outside = outside_scratch();
    std::fs::write(outside.path().join("keep"), b"keep\n").unwrap();
    let abs = outside.path().display().to_string();
    // Both scratch directories live in the same parent.
    let rel = format!("../{}", outside.path().file_name().unwrap().to_string_lossy());
    let run = Ferrite::run(&guest("sandbox_escape")).args(&[abs.as_str(), rel.as_str()]).in_dir(work).go();
    run.assert_code(0);
    let out = run.stdout_str();
    let (mut attempts, mut views) = (0, 0);
    for line in out.lines() {
        let Some((name, verdict)) = line.split_once(": ") else { continue };
        match name {
            "inside file" | "inside mkdir+rename" => assert_eq!(verdict, "ok", "{}", run.describe()),
            // What the guest sees through links to the host's /proc, /etc/mtab and /dev/fd.
            "link to /proc/self/status"
            | "/etc/mtab"
            | "link to /etc/mtab"
            | "/dev/fd/N of a pipe"
            | "/dev/fd/N of a file"
            | "/dev/stdin" => {
                views += 1;
                assert_eq!(verdict, "guest", "`{name}` showed the host\n{}", run.describe());
            }
            // Creating a link inside the working directory is allowed; writing through it is not.
            "symlink to outside" => assert_eq!(verdict, "ALLOWED"),
            _ => {
                attempts += 1;
                assert!(verdict.starts_with("refused"), "`{name}` was not refused\n{}", run.describe());
            }
        }
    }
    assert!(attempts >= 20 && views == 6, "{}", run.describe());
    let entries: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, vec!["keep".to_string()]);
    assert_eq!(std::fs::read(outside.path().join("keep")).unwrap(), b"keep\n");
}

#[test]
fn the_pm_mount_is_writable_and_backed_by_pm_dir() {
    let pm = scratch();
    let run = Ferrite::run(&guest("pm_log_fixed"))
        .opts(&["--pm-dir".to_string(), pm.path().display().to_string()])
        .args(&["/mnt/pmem0/log"])
        .go();
    run.assert_code(0);
    assert!(pm.path().join("log").exists());
}

/// A scratch directory on a memory file system where there is one: the races below make about a
/// million directory changes, which a disk file system's journal turns into minutes.
fn fast_scratch() -> TempDir {
    let shm = Path::new("/dev/shm");
    match tempfile::Builder::new().prefix("ferrite-test-").tempdir_in(shm) {
        Ok(d) => d,
        Err(_) => scratch(),
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// The outside directory of a race: one file, which must survive as it was.
fn outside_dir() -> TempDir {
    // Not in the guest's private temporary directories, which it may write (refused writes
    // never reach the disk, so this needs no memory file system).
    let outside = outside_scratch();
    std::fs::write(outside.path().join("victim"), b"original\n").unwrap();
    outside
}

fn assert_untouched(outside: &Path, run: &Run) {
    assert_eq!(names_in(outside), vec!["victim".to_string()], "a write escaped\n{}", run.describe());
    assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"original\n");
}

/// "written W refused R" of sandbox_race.
fn counts(run: &Run) -> (u64, u64) {
    let out = run.stdout_str();
    let w: Vec<u64> = out.split_whitespace().filter_map(|t| t.parse().ok()).collect();
    assert_eq!(w.len(), 2, "{}", run.describe());
    (w[0], w[1])
}

/// The escape: `--explore` runs execute in parallel, and each swaps the directory `d`
/// of the working directory for a link to a directory outside and back while trying to create
/// `d/new`. Sharing one working directory, one run's swap landed between another's check and its
/// open. Now each run has its own overlay of the working directory, and writes are made beneath
/// their root whatever the directories do. 10^6 attempts (2 runs of 125,000 swaps there and
/// back, four attempts each), with Landlock and without: nothing outside changes, the working
/// directory neither, and every run sees only its own swaps (half its attempts land in `d`,
/// half are refused).
#[test]
fn parallel_explore_runs_swapping_directories_for_links_never_write_outside() {
    for landlock in [true, false] {
        let (outside, tmp) = (outside_dir(), fast_scratch());
        let work = fast_scratch();
        let work_path = work.path().to_path_buf();
        let mut f = Ferrite::run(&guest("sandbox_race"))
            .opts(&["--explore", "2"])
            .args(&["125000", &outside.path().display().to_string(), "swap"])
            .in_dir(work)
            .host_env("TMPDIR", &tmp.path().display().to_string());
        if !landlock {
            f = f.host_env("FERRITE_NO_LANDLOCK", "1");
        }
        let run = f.go();
        run.assert_code(0);
        assert_untouched(outside.path(), &run);
        assert_eq!(counts(&run), (250_000, 250_000), "landlock {landlock}\n{}", run.describe());
        assert!(names_in(&work_path).is_empty(), "the runs wrote the shared working directory\n{}", run.describe());
        assert!(names_in(tmp.path()).is_empty(), "temporary directories left\n{}", run.describe());
    }
}

/// A host process swaps the guest's directory `d` for a link to the outside and back, as fast as
/// it can, while the guest (in a plain run, whose working directory is the host's) tries to
/// create `d/new` 100,000 times: some land in `d`, some are refused, none lands outside, with
/// Landlock and with the path checks alone (the race the sandbox's check-then-open had).
#[test]
fn a_host_process_swapping_a_directory_for_a_link_cannot_lead_writes_outside() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    for landlock in [true, false] {
        let outside = outside_dir();
        let work = fast_scratch();
        let (d, parked) = (work.path().join("d"), work.path().join("d.dir"));
        std::fs::create_dir(&d).unwrap();
        let stop = AtomicBool::new(false);
        let swaps = AtomicU64::new(0);
        let run = std::thread::scope(|s| {
            let (d, parked, stop, swaps, outside) = (&d, &parked, &stop, &swaps, outside.path());
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::fs::rename(d, parked).unwrap();
                    std::os::unix::fs::symlink(outside, d).unwrap();
                    std::fs::remove_file(d).unwrap();
                    std::fs::rename(parked, d).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            });
            while swaps.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            let mut f = Ferrite::run(&guest("sandbox_race"))
                .args(&["100000", &outside.display().to_string(), "open"])
                .in_dir(work);
            if !landlock {
                f = f.host_env("FERRITE_NO_LANDLOCK", "1");
            }
            let run = f.go();
            stop.store(true, Ordering::Relaxed);
            run
        });
        run.assert_code(0);
        assert_untouched(outside.path(), &run);
        let (written, refused) = counts(&run);
        assert_eq!(written + refused, 100_000);
        assert!(written > 0 && refused > 0, "the swaps did not race the opens ({written} written)\n{}", run.describe());
    }
}

/// The guest's `/tmp`, `/var/tmp` and `/dev/shm` are private overlays over the host's: it reads
/// the host's files there, and what it creates, changes or removes stays its own, gone at the
/// end of the run (ferrite's temporary directory included); the next run starts from the host's
/// again. The working directory, even below `/tmp`, is the host's as always.
#[test]
fn the_guests_temporary_directories_are_private_overlays() {
    let host = scratch();
    std::fs::write(host.path().join("keep"), b"host\n").unwrap();
    let h = host.path().display().to_string();
    let work = scratch();
    let tmpdir = outside_scratch();
    let script = format!(
        "cat {h}/keep; echo guest > {h}/keep; cat {h}/keep; echo new > {h}/new; rm {h}/keep; ls {h}; \
         f=$(mktemp); echo made > $f; cat $f; mkdir -p /var/tmp/ferrite-test-dir/a; ls /var/tmp/ferrite-test-dir; \
         echo shm > /dev/shm/ferrite-test-shm; cat /dev/shm/ferrite-test-shm; echo here > in-cwd"
    );
    let run = Ferrite::run(Path::new("/bin/sh"))
        .args(&["-c", script.as_str()])
        .host_env("TMPDIR", &tmpdir.path().display().to_string())
        .env("TMPDIR", "/tmp")
        .in_dir(work)
        .go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "host\nguest\nnew\nmade\na\nshm\n", "{}", run.describe());
    assert_eq!(names_in(host.path()), vec!["keep".to_string()], "the guest changed the host's /tmp");
    assert_eq!(std::fs::read(host.path().join("keep")).unwrap(), b"host\n");
    assert!(!Path::new("/var/tmp/ferrite-test-dir").exists() && !Path::new("/dev/shm/ferrite-test-shm").exists());
    assert_eq!(std::fs::read(run.path("in-cwd")).unwrap(), b"here\n", "the working directory is the host's");
    assert!(names_in(tmpdir.path()).is_empty(), "temporary directories left\n{}", run.describe());
    // A second run sees the host's files again, not the first run's.
    let again = Ferrite::run(Path::new("/bin/sh"))
        .args(&[
            "-c",
            &format!(
                "cat {h}/keep; ls /dev/shm/ferrite-test-shm >/dev/null 2>&1 || echo gone; \
                 ls -a /tmp | grep -c '^ferrite-[0-9]*-[0-9]*$'"
            ),
        ])
        .go();
    // The last line: ferrite's own private directory in the host's /tmp (named after its pid,
    // different in every run) is not shown.
    assert_eq!(again.stdout_str(), "host\ngone\n0\n", "{}", again.describe());
}
