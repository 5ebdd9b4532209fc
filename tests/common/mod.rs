//! Shared harness for ferrite's integration tests: builds the guest programs, runs them under
//! ferrite and natively in fresh scratch directories with a controlled environment, compares
//! outputs with readable diffs, and finds marker lines in the guest sources.

#![allow(dead_code)]

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use tempfile::TempDir;

/// The repository root (the ferrite package).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The built guest `name` (`guests/build/<name>`); builds all guests once per test process.
pub fn guest(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = repo().join("guests");
        let out = Command::new("make")
            .arg("-C")
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run `make -C {}`: {e}", dir.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`make -C {}` failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = built {
        panic!("building the guests failed: {e}");
    }
    let path = repo().join("guests/build").join(name);
    assert!(path.is_file(), "guest `{}` does not exist after make", path.display());
    path
}

/// The ferrite binary under test.
pub fn ferrite() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferrite"))
}

/// A guest source file's path (`guests/src/<file>`).
pub fn guest_source(file: &str) -> PathBuf {
    repo().join("guests/src").join(file)
}

/// The 1-based line of the unique line in `guests/src/<file>` containing `marker` (a whole
/// comment such as `/* FAULT */`).
pub fn marker_line(file: &str, marker: &str) -> u32 {
    let path = guest_source(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let hits: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(marker)).map(|(i, _)| i + 1).collect();
    assert_eq!(
        hits.len(),
        1,
        "marker `{marker}` should occur exactly once in {}, found on lines {hits:?}",
        path.display()
    );
    hits[0] as u32
}

/// The exit status as a shell reports it: the code, or 128 + N for a death by signal N.
pub fn shell_status(st: ExitStatus) -> i32 {
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => panic!("exit status {st:?} has neither a code nor a signal"),
    }
}

/// What a run produced. `dir` is the scratch directory it ran in (its working directory), kept
/// alive so the caller can read the files the run wrote there (reports, pools).
pub struct Run {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub code: i32,
    pub dir: TempDir,
    /// The command line, for failure messages.
    pub cmdline: String,
}

impl Run {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// A path inside the run's scratch directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Parses a JSON file inside the run's scratch directory (e.g. the `--report`).
    pub fn json(&self, rel: &str) -> Value {
        read_json(&self.path(rel))
    }

    /// Asserts the exit status, showing the whole run otherwise.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "unexpected exit status of `{}`\n{}", self.cmdline, self.describe());
        self
    }

    /// Everything about the run, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nexit status: {}\n--- stdout\n{}--- stderr\n{}---",
            self.cmdline,
            self.code,
            self.stdout_str(),
            self.stderr
        )
    }
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()))
}

/// A fresh scratch directory.
pub fn scratch() -> TempDir {
    tempfile::Builder::new().prefix("ferrite-test-").tempdir().expect("cannot create a temporary directory")
}

/// A scratch directory outside the guest's temporary directories (`/tmp`, `/var/tmp`,
/// `/dev/shm`, which the guest sees as private overlays): for a directory the guest must not be
/// able to write.
#[allow(dead_code)]
pub fn outside_scratch() -> TempDir {
    tempfile::Builder::new()
        .prefix("ferrite-test-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("cannot create a temporary directory")
}

fn quote(args: &[OsString]) -> String {
    args.iter()
        .map(|a| {
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{s}'")
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_command(mut cmd: Command, dir: TempDir, cmdline: String) -> Run {
    let out = cmd
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start `{cmdline}`: {e}"));
    Run {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: shell_status(out.status),
        dir,
        cmdline,
    }
}

/// The prefix of ferrite's warning about a system call it does not implement.
pub const UNSUPPORTED: &str = "ferrite: warning: unsupported system call";

/// A ferrite command line under construction: `ferrite <subcommand> [options] -- <program> [args]`
/// run in a fresh scratch directory, with `--env-clear` and explicit `--env` variables for `run`.
pub struct Ferrite {
    subcommand: &'static str,
    opts: Vec<OsString>,
    program: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    env_clear: bool,
    host_env: Vec<(String, String)>,
    allow_unsupported: bool,
    dir: Option<TempDir>,
}

impl Ferrite {
    /// `ferrite run [opts] -- program args...` with `--env-clear`.
    pub fn run(program: &Path) -> Ferrite {
        Ferrite {
            subcommand: "run",
            opts: Vec::new(),
            program: Some(program.to_path_buf()),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: true,
            host_env: Vec::new(),
            allow_unsupported: false,
            dir: None,
        }
    }

    /// `ferrite crash [opts] -- program args...` with `--env-clear`.
    pub fn crash(program: &Path) -> Ferrite {
        Ferrite { subcommand: "crash", ..Ferrite::run(program) }
    }

    /// `ferrite replay <report> [opts]`.
    pub fn replay(report: &Path) -> Ferrite {
        Ferrite {
            subcommand: "replay",
            opts: vec![report.as_os_str().to_owned()],
            program: None,
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            host_env: Vec::new(),
            allow_unsupported: false,
            dir: None,
        }
    }

    /// Adds ferrite options (before `--`).
    pub fn opts<S: Into<OsString> + Clone>(mut self, opts: &[S]) -> Ferrite {
        self.opts.extend(opts.iter().cloned().map(Into::into));
        self
    }

    /// Adds guest arguments (after the program).
    pub fn args<S: Into<OsString> + Clone>(mut self, args: &[S]) -> Ferrite {
        self.args.extend(args.iter().cloned().map(Into::into));
        self
    }

    /// Sets a variable in the guest's environment.
    pub fn env(mut self, key: &str, value: &str) -> Ferrite {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Leaves out `--env-clear`: the guest inherits ferrite's environment.
    pub fn inherit_env(mut self) -> Ferrite {
        self.env_clear = false;
        self
    }

    /// Sets a variable in ferrite's own environment.
    pub fn host_env(mut self, key: &str, value: &str) -> Ferrite {
        self.host_env.push((key.into(), value.into()));
        self
    }

    /// Runs in this directory instead of a fresh one.
    pub fn in_dir(mut self, dir: TempDir) -> Ferrite {
        self.dir = Some(dir);
        self
    }

    /// Tolerates `unsupported system call` warnings (by default they fail the test).
    pub fn allow_unsupported(mut self) -> Ferrite {
        self.allow_unsupported = true;
        self
    }

    pub fn argv(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![self.subcommand.into()];
        if self.env_clear {
            v.push("--env-clear".into());
        }
        for (k, val) in &self.env {
            v.push(format!("--env={k}={val}").into());
        }
        v.extend(self.opts.iter().cloned());
        if let Some(p) = &self.program {
            v.push("--".into());
            v.push(p.as_os_str().to_owned());
            v.extend(self.args.iter().cloned());
        }
        v
    }

    /// Runs ferrite and returns what it did.
    pub fn go(self) -> Run {
        let argv = self.argv();
        let mut cmd = ferrite();
        cmd.args(&argv);
        for (k, v) in &self.host_env {
            cmd.env(k, v);
        }
        let mut shown = vec![OsString::from("ferrite")];
        shown.extend(argv);
        let dir = self.dir.unwrap_or_else(scratch);
        let run = run_command(cmd, dir, quote(&shown));
        if !self.allow_unsupported {
            let bad: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with(UNSUPPORTED)).collect();
            assert!(
                bad.is_empty(),
                "the guest used system calls ferrite does not support:\n{}\n\n{}",
                bad.join("\n"),
                run.describe()
            );
        }
        run
    }
}

/// Runs `program args...` natively in a fresh scratch directory with only `env` in its
/// environment and stdin at /dev/null. argv[0] is `program` exactly as given, as under ferrite.
pub fn native(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    native_in(scratch(), program, args, env)
}

/// [`native`] in the given directory.
pub fn native_in(dir: TempDir, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut shown = vec![program.as_os_str().to_owned()];
    shown.extend(args.iter().map(OsString::from));
    run_command(cmd, dir, format!("(native) {}", quote(&shown)))
}

/// Runs `program args...` under `ferrite run --env-clear --env ...` in a fresh scratch directory.
pub fn emulated(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut f = Ferrite::run(program).args(args);
    for (k, v) in env {
        f = f.env(k, v);
    }
    f.go()
}

/// A readable unified diff of two byte strings (lossily decoded as UTF-8).
pub fn diff(expected: &[u8], actual: &[u8], expected_name: &str, actual_name: &str) -> String {
    let e = String::from_utf8_lossy(expected);
    let a = String::from_utf8_lossy(actual);
    similar::TextDiff::from_lines(e.as_ref(), a.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(expected_name, actual_name)
        .to_string()
}

/// Asserts two outputs are byte-identical; otherwise panics with a unified diff and both runs'
/// exit statuses.
#[track_caller]
pub fn assert_same_bytes(what: &str, native: &Run, native_out: &[u8], emu: &Run, emu_out: &[u8]) {
    if native_out != emu_out {
        let mut d = diff(native_out, emu_out, "native", "ferrite");
        if d.trim().is_empty() {
            // Same lines but different bytes somewhere the line diff can't show (e.g. a
            // missing final newline): show both verbatim.
            d = format!("native:  {native_out:?}\nferrite: {emu_out:?}");
        }
        panic!(
            "{what} differs between the native run and ferrite\n\
             native:  `{}` exited {}\n\
             ferrite: `{}` exited {}\n{d}\n--- ferrite stderr\n{}",
            native.cmdline, native.code, emu.cmdline, emu.code, emu.stderr
        );
    }
}

/// Asserts stdout is byte-identical between the two runs.
#[track_caller]
pub fn assert_same_stdout(native: &Run, emu: &Run) {
    assert_same_bytes("stdout", native, &native.stdout, emu, &emu.stdout);
}

/// Asserts two runs exited with the same status.
#[track_caller]
pub fn assert_same_status(native: &Run, emu: &Run) {
    assert_eq!(
        native.code, emu.code,
        "exit status differs: native `{}` exited {}, ferrite `{}` exited {}\n--- ferrite stderr\n{}",
        native.cmdline, native.code, emu.cmdline, emu.code, emu.stderr
    );
}

/// The lines of ferrite's stderr that start with `error: `.
pub fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("error: ")).collect()
}

/// Looks up `a.b.0.c` in a JSON value, panicking with the document if absent.
#[track_caller]
pub fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for part in path.split('.') {
        let next = match part.parse::<usize>() {
            Ok(i) => cur.get(i),
            Err(_) => cur.get(part),
        };
        cur = next.unwrap_or_else(|| {
            panic!("`{path}` is missing (at `{part}`) in\n{}", serde_json::to_string_pretty(v).unwrap())
        });
    }
    cur
}

/// [`run_command`], but kills the command and fails the test if it has not ended within `limit`
/// (for guests that hang natively, where a bug in ferrite would hang the test too).
fn run_command_within(mut cmd: Command, dir: TempDir, cmdline: String, limit: std::time::Duration) -> Run {
    use std::io::Read;
    let mut child = cmd
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{cmdline}`: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap_or_else(|e| panic!("cannot wait for `{cmdline}`: {e}")) {
            break Some(st);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let stdout = out.join().expect("stdout reader");
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned();
    let Some(status) = status else {
        panic!(
            "`{cmdline}` did not end within {limit:?}; killed it\n--- stdout\n{}--- stderr\n{stderr}---",
            String::from_utf8_lossy(&stdout)
        );
    };
    Run { stdout, stderr, code: shell_status(status), dir, cmdline }
}

impl Ferrite {
    /// [`Ferrite::go`] with a time limit: kills ferrite and fails the test if the run takes
    /// longer than `limit`.
    pub fn go_within(self, limit: std::time::Duration) -> Run {
        let argv = self.argv();
        let mut cmd = ferrite();
        cmd.args(&argv);
        for (k, v) in &self.host_env {
            cmd.env(k, v);
        }
        let mut shown = vec![OsString::from("ferrite")];
        shown.extend(argv);
        let dir = self.dir.unwrap_or_else(scratch);
        let run = run_command_within(cmd, dir, quote(&shown), limit);
        if !self.allow_unsupported {
            let bad: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with(UNSUPPORTED)).collect();
            assert!(
                bad.is_empty(),
                "the guest used system calls ferrite does not support:\n{}\n\n{}",
                bad.join("\n"),
                run.describe()
            );
        }
        run
    }
}

/// The report's findings of `analysis`.
pub fn findings_of<'a>(report: &'a Value, analysis: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["analysis"] == analysis).collect()
}

/// `(role, function, file name, line)` of each location of finding `f`.
pub fn places(f: &Value) -> Vec<(String, String, String, u64)> {
    f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or("").rsplit('/').next().unwrap_or("").to_string();
            (s("role"), s("function"), s("file"), l["line"].as_u64().unwrap_or(0))
        })
        .collect()
}

/// A compare report without what depends on the host and the moment: times and memory.
pub fn without_timings(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "time_s" | "wall_s" | "peak_rss_mib" | "rss_at_start_mib" | "memory_scope")
                })
                .map(|(k, x)| (k.clone(), without_timings(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timings).collect()),
        x => x.clone(),
    }
}

/// `ferrite crash` of the bundled `pm_log` with its `check` recovery, quiet, without passes, its
/// report in `r.json`: a campaign with failing images (crash findings) in about a second.
pub fn pm_log_crash() -> Run {
    let prog = guest("pm_log");
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    Ferrite::crash(&prog)
        .opts(&["--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover])
        .args(&["/mnt/pmem0/log"])
        .go()
}

/// The source lines of a finding's locations (those that have one).
pub fn finding_lines(f: &Value) -> Vec<u64> {
    f["locations"].as_array().unwrap().iter().filter_map(|l| l.get("line").and_then(Value::as_u64)).collect()
}

/// Findings as pretty JSON, for failure messages.
pub fn show_findings(fs: &[&Value]) -> String {
    fs.iter().map(|f| serde_json::to_string_pretty(f).unwrap()).collect::<Vec<_>>().join("\n")
}

/// Runs `f` over `items` on `workers` threads (each emulation is single-threaded).
pub fn in_parallel<T: Sync>(items: &[T], workers: usize, f: impl Fn(&T) + Sync) {
    std::thread::scope(|s| {
        for chunk in items.chunks(items.len().div_ceil(workers).max(1)) {
            let f = &f;
            s.spawn(move || chunk.iter().for_each(f));
        }
    });
}

/// Starts `cmd`, a `ferrite run --listen GUEST_PORT=0 ...` with its standard error piped, and
/// reads the host port ferrite announces on its first line: the child, that port, and the rest
/// of its standard error. A missing announcement kills the child and fails the test.
pub fn spawn_listening(
    cmd: &mut Command,
    guest_port: &str,
) -> (std::process::Child, u16, std::io::BufReader<std::process::ChildStderr>) {
    use std::io::BufRead;
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("cannot start ferrite");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("ferrite's first line");
    let port = line
        .strip_prefix("ferrite: listening on 127.0.0.1:")
        .and_then(|rest| rest.strip_suffix(&format!(" for guest port {guest_port}\n")))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            let _ = child.kill();
            panic!("ferrite did not announce its port: {line:?}")
        });
    (child, port, stderr)
}
