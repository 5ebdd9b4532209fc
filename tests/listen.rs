//! `ferrite run --listen` (syscalls/src/listen.rs): native clients on host loopback sockets,
//! opened by this test process, talk to the bundled PM key-value server (guests/src/kv_server.c)
//! inside the machine; the report records every host event, and `ferrite replay` runs the server
//! again without any client, to the same trace hash, output and findings. The planted
//! persistence race is found through the host clients and replays; its fixed twin is silent. A
//! corrupt event list is an `error:` with status 2, and so are options that cannot combine.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use common::*;

/// The guest port the server binds inside the machine.
const GUEST_PORT: &str = "7711";

/// `ferrite run --listen 7711=0` of a kv server, running in the background.
struct Served {
    child: Child,
    port: u16,
    dir: Option<tempfile::TempDir>,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Served {
    fn start(server: &str, analyses: &str) -> Served {
        Served::start_with(server, analyses, None)
    }

    /// With `nofile`: ferrite's own descriptor limit.
    fn start_with(server: &str, analyses: &str, nofile: Option<u64>) -> Served {
        use std::os::unix::process::CommandExt;
        let dir = scratch();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite"));
        if let Some(n) = nofile {
            let limit = libc::rlimit { rlim_cur: n, rlim_max: n };
            // SAFETY: setrlimit(2) is async-signal-safe and `limit` is copied into the closure.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let (child, port, stderr) = spawn_listening(
            cmd.args(["run", "--env-clear", "--analyses", analyses, "--report", "r.json"])
                .args(["--listen", &format!("{GUEST_PORT}=0"), "--"])
                .arg(guest(server))
                .args(["--serve", "/mnt/pmem0/kv", &format!("tcp:{GUEST_PORT}")])
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped()),
            GUEST_PORT,
        );
        Served { child, port, dir: Some(dir), stderr }
    }

    fn connect(&self) -> Client {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("cannot connect to ferrite");
        s.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
        Client { s: BufReader::new(s) }
    }

    /// Waits for ferrite to end: its status, standard output and the rest of its standard error.
    fn wait(mut self) -> (i32, String, String, tempfile::TempDir) {
        let mut err = String::new();
        self.stderr.read_to_string(&mut err).expect("ferrite's standard error");
        let mut out = String::new();
        self.child.stdout.take().expect("piped stdout").read_to_string(&mut out).expect("ferrite's output");
        let status = self.child.wait().expect("ferrite's status");
        (shell_status(status), out, err, self.dir.take().expect("the run's directory"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A failed assertion must not leave ferrite waiting for clients.
        let _ = self.child.kill();
    }
}

struct Client {
    s: BufReader<TcpStream>,
}

impl Client {
    fn send(&mut self, bytes: &str) {
        self.s.get_mut().write_all(bytes.as_bytes()).expect("send to the server");
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        self.s.read_line(&mut line).expect("the server's answer");
        line
    }

    fn ask(&mut self, request: &str) -> String {
        self.send(request);
        self.answer()
    }
}

/// Three host clients: sets and gets of the same keys on different connections (so the
/// server's two workers race on them), a request split across writes, then `shutdown`.
/// Returns ferrite's status, output, standard error and directory (with `r.json`).
fn serve_clients(server: &str) -> (i32, String, String, tempfile::TempDir) {
    let served = Served::start(server, "hawkset");
    let (mut a, mut b, mut c) = (served.connect(), served.connect(), served.connect());
    a.send("set spl");
    std::thread::sleep(Duration::from_millis(20));
    a.send("it yes\n");
    assert_eq!(a.answer(), "OK\n");
    assert_eq!(b.ask("get split\n"), "VALUE yes\n");
    for i in 0..30 {
        assert_eq!(a.ask(&format!("set k{i} v{i}\n")), "OK\n");
        assert_eq!(b.ask(&format!("get k{i}\n")), format!("VALUE v{i}\n"));
    }
    assert_eq!(c.ask("get missing\n"), "NONE\n");
    drop(a);
    assert_eq!(c.ask("shutdown\n"), "BYE\n");
    served.wait()
}

fn hash(report: &Value) -> String {
    get(report, "run.trace_hash").as_str().expect("a trace hash").to_string()
}

fn replay(report: &Path, extra: &[&str]) -> Run {
    Ferrite::replay(report).opts(extra).go()
}

#[test]
fn a_native_client_is_served_recorded_and_replayed_without_it() {
    let (code, out, err, dir) = serve_clients("kv_server");
    assert_eq!(out, "kv_server: 63 requests served\n", "{err}");
    assert_eq!(code, 66, "the planted race is a finding:\n{err}");
    let path: PathBuf = dir.path().join("r.json");
    let report = read_json(&path);
    let listen = get(&report, "run.listen");
    let events: Vec<&str> = listen["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(events.iter().filter(|e| e.contains(" connect 7711")).count(), 3, "{events:?}");
    assert!(events.iter().any(|e| e.ends_with(" close")), "{events:?}");
    assert_eq!(listen["outputs"].as_array().unwrap().len(), 3);
    let race: Vec<&Value> = findings_of(&report, "hawkset");
    assert!(
        race.iter().any(|f| places(f).iter().any(|p| p.0 == "store" && p.2 == "kv_server.c")),
        "the race through the host clients: {}",
        show_findings(&race)
    );

    // Without any client: the same run, twice.
    let mut hashes = Vec::new();
    for _ in 0..2 {
        let r = replay(&path, &["--report-out", "again.json"]);
        r.assert_code(66);
        assert_eq!(r.stdout_str(), out);
        assert!(r.stderr.contains("ferrite: replay reproduced the run"), "{}", r.describe());
        let again = r.json("again.json");
        assert_eq!(get(&again, "run.listen"), listen, "the same host events and output");
        hashes.push(hash(&again));
    }
    assert_eq!(hashes, [hash(&report), hash(&report)]);

    let id = race[0]["id"].to_string();
    let r = replay(&path, &["--finding", &id]);
    assert!(r.stderr.contains(&format!("ferrite: replay reproduced finding {id}")), "{}", r.describe());

    // A corrupt event list is refused before anything runs; a changed output is a divergence.
    let corrupt = |edit: &dyn Fn(&mut Value), want: &str| {
        let mut bad = report.clone();
        edit(&mut bad);
        let p = dir.path().join("bad.json");
        std::fs::write(&p, serde_json::to_vec(&bad).unwrap()).unwrap();
        let r = replay(&p, &[]);
        r.assert_code(2);
        let errors = error_lines(&r.stderr);
        assert_eq!(errors.len(), 1, "{}", r.describe());
        assert!(errors[0].contains(want), "{}", r.describe());
    };
    corrupt(&|v| v["run"]["listen"]["events"][1] = "5 0 data !!".into(), "not base64 data");
    corrupt(&|v| v["run"]["listen"]["events"][0] = "5 9 connect 7711".into(), "numbered in order");
    corrupt(&|v| v["run"]["listen"]["events"][0] = "5 0 connect 1".into(), "not listened for");
    corrupt(&|v| v["run"]["listen"]["events"] = 7.into(), "not a valid ferrite report");
    corrupt(
        &|v| {
            let last = v["run"]["listen"]["events"].as_array().unwrap().len();
            v["run"]["listen"]["events"][last - 1] = "1 0 close".into();
        },
        "out of order",
    );
    corrupt(&|v| v["run"]["listen"]["outputs"][0]["bytes"] = 1.into(), "diverged from the recorded host clients");
    corrupt(
        &|v| v["run"]["listen"]["events"].as_array_mut().unwrap().push("99999999 0 signal 9".into()),
        "never reached",
    );
    // A far-off point while the server waits for the host: reached at once, not one idle turn
    // at a time (the replay would spin for ever), and the run then differs from its recording.
    let mut bad = report.clone();
    let events = bad["run"]["listen"]["events"].as_array_mut().unwrap();
    let last = events.last().unwrap().as_str().unwrap().to_string();
    *events.last_mut().unwrap() = format!("1000000000000000 {}", last.split_once(' ').unwrap().1).into();
    let p = dir.path().join("far.json");
    std::fs::write(&p, serde_json::to_vec(&bad).unwrap()).unwrap();
    let r = Ferrite::replay(&p).go_within(Duration::from_secs(60));
    r.assert_code(1);
    assert!(r.stderr.contains("ferrite: replay diverged"), "{}", r.describe());
}

#[test]
fn the_fixed_server_is_silent_through_host_clients() {
    let (code, out, err, dir) = serve_clients("kv_server_fixed");
    assert_eq!(out, "kv_server: 63 requests served\n", "{err}");
    assert_eq!(code, 0, "{err}");
    let path = dir.path().join("r.json");
    let report = read_json(&path);
    assert!(findings_of(&report, "hawkset").is_empty(), "{err}");
    let r = replay(&path, &[]);
    r.assert_code(0);
    assert!(r.stderr.contains(&format!("trace hash {})", hash(&report))), "{}", r.describe());
}

#[test]
fn an_interrupt_while_waiting_ends_the_run_with_a_report_that_replays() {
    let served = Served::start("kv_server", "none");
    let mut a = served.connect();
    assert_eq!(a.ask("set a b\n"), "OK\n");
    // The server waits for the host now: SIGINT goes to it, and it dies of it.
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) of our own child, which has not been waited for.
    assert_eq!(unsafe { libc::kill(served.child.id() as i32, libc::SIGINT) }, 0);
    let (code, _, err, dir) = served.wait();
    assert_eq!(code, 130, "{err}");
    let path = dir.path().join("r.json");
    let report = read_json(&path);
    assert_eq!(get(&report, "run.exit.signal"), 2);
    // The interrupt came from the user, through ferrite: not a fault of the program's.
    assert!(findings_of(&report, "fault").is_empty(), "{err}");
    let events = get(&report, "run.listen.events").as_array().unwrap();
    assert!(events.last().unwrap().as_str().unwrap().ends_with(" 0 signal 2"), "{events:?}");
    let r = replay(&path, &[]);
    r.assert_code(130);
    assert!(r.stderr.contains(&format!("trace hash {})", hash(&report))), "{}", r.describe());
}

#[test]
fn listen_refuses_what_it_cannot_combine_with() {
    let kv = guest("kv_server");
    for (opts, what) in [
        (&["--explore", "4"][..], "--explore"),
        (&["--strategy", "exhaustive"][..], "--strategy exhaustive"),
        (&["--recover", "true"][..], "--recover"),
        (&["--shard", "0/2", "--report", "p.json"][..], "--shard"),
    ] {
        let r = Ferrite::run(&kv)
            .opts(&["--listen", "7711=0"])
            .opts(opts)
            .args(&["--serve", "/mnt/pmem0/kv", "tcp:7711"])
            .go();
        r.assert_code(2);
        assert!(
            error_lines(&r.stderr)
                .first()
                .is_some_and(|e| e.contains("--listen cannot be combined with") && e.contains(what)),
            "{}",
            r.describe()
        );
    }
    for bad in ["7711", "0=5", "7711=x", "70000=1"] {
        let r = Ferrite::run(&kv).opts(&["--listen", bad]).go();
        r.assert_code(2);
        assert_eq!(error_lines(&r.stderr).len(), 1, "{}", r.describe());
    }
}

#[test]
fn clients_that_come_and_go_do_not_use_up_descriptors() {
    // More connections than ferrite may have descriptors: each is closed once both sides are
    // done, and each is one recorded connection, replayed without its client.
    let served = Served::start_with("kv_server", "none", Some(128));
    for i in 0..300 {
        let mut c = served.connect();
        assert_eq!(c.ask(&format!("set k{i} v\n")), "OK\n", "connection {i}");
    }
    assert_eq!(served.connect().ask("shutdown\n"), "BYE\n");
    let (code, out, err, dir) = served.wait();
    assert_eq!((code, out.as_str()), (0, "kv_server: 300 requests served\n"), "{err}");
    let path = dir.path().join("r.json");
    let report = read_json(&path);
    assert_eq!(get(&report, "run.listen.outputs").as_array().unwrap().len(), 301);
    let r = replay(&path, &[]);
    r.assert_code(0);
    assert_eq!(r.stdout_str(), out);
    assert!(r.stderr.contains(&format!("trace hash {})", hash(&report))), "{}", r.describe());
}

#[test]
fn a_deadlock_with_nothing_the_host_could_reach_is_still_found() {
    // The guest never listens: no host client can wake it, so `--listen` must not wait for one.
    let run = Ferrite::run(&guest("thr_deadlock"))
        .opts(&["--listen", "7711=0", "--report", "r.json"])
        .go_within(Duration::from_secs(30));
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.deadlock"), &Value::Bool(true), "{}", run.describe());
    assert!(findings_of(&report, "deadlock").len() == 1, "{}", run.describe());
    let r = replay(&run.dir.path().join("r.json"), &[]);
    r.assert_code(66);
    assert!(r.stderr.contains(&format!("trace hash {})", hash(&report))), "{}", r.describe());
}

#[test]
fn more_clients_than_ephemeral_ports_are_served_one_after_another() {
    // Linux's ephemeral range is 28,232 ports: a connection done both ways must give its port
    // (and its place in every point's loop) back, or the later clients cannot be bridged.
    let n = 28_500;
    let served = Served::start("kv_server", "none");
    for i in 0..n {
        let mut c = served.connect();
        assert_eq!(c.ask(&format!("set k{} v\n", i % 100)), "OK\n", "connection {i}");
    }
    assert_eq!(served.connect().ask("shutdown\n"), "BYE\n");
    let (code, out, err, dir) = served.wait();
    assert_eq!((code, out.as_str()), (0, format!("kv_server: {n} requests served\n").as_str()), "{err}");
    let path = dir.path().join("r.json");
    let report = read_json(&path);
    assert_eq!(get(&report, "run.listen.outputs").as_array().unwrap().len(), n + 1);
    let r = replay(&path, &[]);
    r.assert_code(0);
    assert!(r.stderr.contains(&format!("trace hash {})", hash(&report))), "{}", r.describe());
}
