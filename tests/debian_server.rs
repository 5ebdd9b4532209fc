//! Small real servers from Debian in the machine (issue 25), each started in the background by
//! `/bin/sh` with its client in the same script, then `kill -TERM` and `wait` — the shell, the
//! server and the clients as processes under one seed, with the same output as natively:
//! `/usr/bin/python3 -m http.server` with the `http_get` guest, `busybox httpd` with `busybox
//! wget`, and memcached with `busybox nc`; and memcached under `--listen` for clients in this
//! test process, replayed without them. Each is skipped (with a message) where its programs
//! are missing. Python's start-up dominates its test: about 70 s of host CPU in a release build,
//! so the request count is small.

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

/// Native runs get a port of their own per test process, away from the usual ones and from
/// the other tests here (the machine's ports are its own under ferrite).
fn native_port(base: u32) -> u32 {
    base + std::process::id() % 5000
}

/// Runs `script` under `/bin/sh` natively and under ferrite in a directory holding `file` (the
/// served body), and checks both print `expected`, exit alike and ferrite names nothing it
/// lacks.
fn same_as_natively(script: &str, expected: &str) {
    let sh = Path::new("/bin/sh");
    let nat = native_in(serving_dir(), sh, &["-c", script], &[]);
    assert_eq!(nat.stdout_str(), expected, "{}", nat.describe());
    let emu = Ferrite::run(sh)
        .opts(&["--analyses", "none"])
        .args(&["-c", script])
        .in_dir(serving_dir())
        .go_within(Duration::from_secs(600));
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(!emu.stderr.contains("warning"), "{}", emu.describe());
}

/// `busybox httpd` (a fork per connection, the body sent with `sendfile`) serving the file
/// twice and a 404 to `busybox wget`, then killed: the client checks the bytes it got.
#[test]
fn busybox_httpd_serves_busybox_wget_as_natively() {
    let bb = "/usr/bin/busybox";
    if !Path::new(bb).exists() {
        eprintln!("skipped: {bb} is not installed");
        return;
    }
    let port = native_port(41000);
    let script = format!(
        "{bb} httpd -f -p 127.0.0.1:{port} -h . & pid=$!; {bb} sleep 1; \
         {bb} wget -q -O got http://127.0.0.1:{port}/file && {bb} cmp got file && echo same; \
         {bb} wget -q -O- http://127.0.0.1:{port}/file | {bb} cmp - file && echo same again; \
         {bb} wget -q -O- http://127.0.0.1:{port}/missing 2>&1; echo wget $?; \
         kill $pid; wait $pid; echo server $?"
    );
    same_as_natively(
        &script,
        "same\nsame again\nwget: server returned error: HTTP/1.1 404 Not Found\nwget 1\nserver 143\n",
    );
}

/// memcached (libevent over epoll, two worker threads woken through pipes) answering 20 sets,
/// a multi-get, `incr` and `delete` on one connection from `busybox nc`, then SIGTERM.
#[test]
fn memcached_answers_busybox_nc_as_natively() {
    let (bb, mc) = ("/usr/bin/busybox", "/usr/bin/memcached");
    if !Path::new(bb).exists() || !Path::new(mc).exists() {
        eprintln!("skipped: {bb} or {mc} is not installed");
        return;
    }
    let port = native_port(46000);
    let script = format!(
        "{mc} -U 0 -l 127.0.0.1 -p {port} -t 2 -u root & pid=$!; {bb} sleep 1; \
         {{ i=0; while [ $i -lt 20 ]; do printf 'set key%d 0 0 %d\\r\\nvalue%d\\r\\n' $i $((5 + ${{#i}})) $i; i=$((i+1)); done; \
         printf 'get key0 key7 key19 nokey\\r\\nincr n 1\\r\\nset n 0 0 2\\r\\n41\\r\\nincr n 1\\r\\n'; \
         printf 'delete key7\\r\\nget key7\\r\\nquit\\r\\n'; }} | {bb} nc 127.0.0.1 {port}; \
         kill $pid; wait $pid; echo server $?"
    );
    let mut expected = "STORED\r\n".repeat(20);
    expected += "VALUE key0 0 6\r\nvalue0\r\nVALUE key7 0 6\r\nvalue7\r\nVALUE key19 0 7\r\nvalue19\r\nEND\r\n";
    expected += "NOT_FOUND\r\nSTORED\r\n42\r\nDELETED\r\nEND\r\nserver 0\n";
    same_as_natively(&script, &expected);
}

/// memcached under `--listen`: two host connections (a `set` on one, the `get` of it on the
/// other, then `shutdown`, which `-A` allows) are served, recorded, and `ferrite replay` runs
/// the server again without them to the same trace hash.
#[test]
fn memcached_serves_host_clients_and_replays_without_them() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::process::{Command, Stdio};
    let mc = "/usr/bin/memcached";
    if !Path::new(mc).exists() {
        eprintln!("skipped: {mc} is not installed");
        return;
    }
    let dir = scratch();
    let (mut child, port, mut stderr) = spawn_listening(
        Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(["run", "--env-clear", "--analyses", "none", "--report", "r.json", "--listen", "11311=0", "--"])
            .args([mc, "-U", "0", "-l", "127.0.0.1", "-p", "11311", "-t", "2", "-A"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
        "11311",
    );
    let connect = || {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("cannot connect to ferrite");
        s.set_read_timeout(Some(Duration::from_secs(120))).expect("a read timeout");
        s
    };
    let (mut a, mut b) = (connect(), connect());
    // Reads until the answer ends with `end`.
    let answer = |s: &mut TcpStream, end: &str| {
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while !got.ends_with(end.as_bytes()) {
            let n = s.read(&mut buf).expect("the server's answer");
            assert!(n > 0, "the server closed after {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    a.write_all(b"set k 0 0 5\r\nhello\r\n").unwrap();
    assert_eq!(answer(&mut a, "\r\n"), "STORED\r\n");
    b.write_all(b"get k\r\n").unwrap();
    assert_eq!(answer(&mut b, "END\r\n"), "VALUE k 0 5\r\nhello\r\nEND\r\n");
    b.write_all(b"shutdown\r\n").unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("ferrite's standard error");
    let status = child.wait().expect("ferrite's status");
    assert_eq!(shell_status(status), 0, "{rest}");
    let path = dir.path().join("r.json");
    let report = read_json(&path);
    let hash = get(&report, "run.trace_hash").as_str().expect("a trace hash").to_string();
    assert!(get(&report, "run.listen.events").as_array().is_some_and(|e| e.len() >= 5), "{report}");
    let r = Ferrite::replay(&path).go();
    r.assert_code(0);
    assert!(r.stderr.contains(&format!("replay reproduced the run (trace hash {hash})")), "{}", r.describe());
}
