//! A small real server from Debian in the machine (issue 25): `/usr/bin/python3 -m http.server`
//! started in the background by `/bin/sh`, the `http_get` guest as its client over loopback TCP,
//! then `kill -TERM` and `wait` — the shell, the interpreter and the client as three processes
//! under one seed, with the same output as natively. Skipped (with a message) where
//! `/usr/bin/python3` is missing. Python's start-up dominates: about 70 s of host CPU in a
//! release build, so the request count is small.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

/// The body the server serves: 5000 bytes, the same on every run.
fn body() -> Vec<u8> {
    (0..5000u32).map(|i| b'a' + (i * 7 % 26) as u8).collect()
}

fn serving_dir() -> tempfile::TempDir {
    let dir = scratch();
    std::fs::write(dir.path().join("file"), body()).expect("write the served file");
    dir
}

#[test]
fn python_http_server_answers_the_client_guest_as_natively() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    }
    let client = guest("http_get");
    // Natively the port is the host's: one per test process, away from the usual ones.
    let port = 20000 + std::process::id() % 20000;
    let script = format!(
        "/usr/bin/python3 -m http.server {port} --bind 127.0.0.1 -d . >/dev/null 2>&1 & pid=$!; \
         {} tcp:{port} /file 2; echo client $?; kill -TERM $pid; wait $pid; echo server $?",
        client.display()
    );
    let sh = Path::new("/bin/sh");
    let nat = native_in(serving_dir(), sh, &["-c", &script], &[]);
    assert_eq!(
        nat.stdout_str(),
        "GET /file: 200, 5000 bytes\nGET /file: 200, 5000 bytes\nclient 0\nserver 143\n",
        "{}",
        nat.describe()
    );
    let emu = Ferrite::run(sh)
        .opts(&["--analyses", "none"])
        .args(&["-c", &script])
        .in_dir(serving_dir())
        .go_within(Duration::from_secs(1200));
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
}
