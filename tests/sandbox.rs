//! The sandbox: the guest may create or change files only under its working directory and the
//! PM mount. Every escape a guest can try (absolute paths, `..`, dirfd-relative opens,
//! AT_EMPTY_PATH, O_NOFOLLOW and O_CREAT through a dangling symbolic link, rename/link/symlink
//! targets outside, O_TMPFILE, /proc/self/{root,cwd,fd/N}) is refused, and the directory outside
//! is byte-for-byte unchanged afterwards.

mod common;

use common::*;

#[test]
fn every_escape_is_refused_and_nothing_outside_changes() {
    let work = scratch();
    let outside = scratch();
    std::fs::write(outside.path().join("keep"), b"keep\n").unwrap();
    let abs = outside.path().display().to_string();
    // Both scratch directories live in the same parent.
    let rel = format!("../{}", outside.path().file_name().unwrap().to_string_lossy());
    let run = Ferrite::run(&guest("sandbox_escape")).args(&[abs.as_str(), rel.as_str()]).in_dir(work).go();
    run.assert_code(0);
    let out = run.stdout_str();
    let mut attempts = 0;
    for line in out.lines() {
        let Some((name, verdict)) = line.split_once(": ") else { continue };
        match name {
            "inside file" | "inside mkdir+rename" => assert_eq!(verdict, "ok", "{}", run.describe()),
            // Creating a link inside the working directory is allowed; writing through it is not.
            "symlink to outside" => assert_eq!(verdict, "ALLOWED"),
            _ => {
                attempts += 1;
                assert!(verdict.starts_with("refused"), "`{name}` was not refused\n{}", run.describe());
            }
        }
    }
    assert!(attempts >= 17, "{}", run.describe());
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
