//! `ferrite replay --gdb [ADDR:]PORT`: a replayed run served to gdb over the GDB remote serial
//! protocol (the `gdbstub` crate), forwards and backwards.
//!
//! The server accepts one connection. The run starts stopped before the program's first
//! instruction, or with `--finding ID` at the finding's place: the first time the finding's
//! thread is about to run the instruction of its first location (the racy access, the store
//! never persisted); just before the faulting instruction of a `fault` finding (`continue`
//! delivers the signal); at the budget's end of a `hang` and the end of a `deadlock`. gdb then has threads, registers, memory, breakpoints, watchpoints (on PM
//! too: "who stored here"), `continue`, `stepi`/`step`, and `reverse-stepi`, `reverse-step`,
//! `reverse-continue` ([`timeline`]). The end of the run is the end of the replay log, as in rr:
//! the process stays, so that one can go back from it. `monitor` commands show where the replay
//! is and the PM state of a line ([`target`]).
//!
//! A crash finding is served as its recovery on the rebuilt crash image (or, if the recovery
//! passes there, as its checker, `--check`, on what the recovery left), or (`--workload`) as
//! the workload's run stopped at the crash point.

mod arch;
mod target;
pub(crate) mod timeline;
mod tls;

use std::net::TcpListener;

use anyhow::{anyhow, bail, Context as _, Result};
use gdbstub::conn::{Connection, ConnectionExt};
use gdbstub::stub::run_blocking::BlockingEventLoop as _;
use gdbstub::stub::{run_blocking, DisconnectReason, GdbStub, MultiThreadStopReason};

use analyses::Finding;
use driver::{say, RunSpec};

use target::Debuggee;
pub use timeline::Timeline;

/// Where the served run starts.
pub enum Start<'f> {
    /// Before the program's first instruction.
    Entry,
    /// At the finding's place.
    Finding(&'f Finding),
    /// After this many instructions, in this thread (a crash finding's crash point in its
    /// workload's run).
    At(u64, u32),
}

/// Serves the run of `spec` to one gdb on `addr` (`PORT` or `ADDR:PORT`; the address defaults to
/// 127.0.0.1), stopped where `start` says. Returns when gdb detaches or kills it.
/// For a crash finding, `spec` is its recovery (or checker) on the rebuilt crash image
/// ([`crash_note`] describes it), stopped where it fails: before its last fault, or at its end; or
/// the workload's run, stopped at the crash point ([`Start::At`]).
pub fn serve(spec: &RunSpec, addr: &str, start: Start, findings: Vec<Finding>, crash: Option<String>) -> Result<()> {
    let addr = if addr.contains(':') { addr.to_string() } else { format!("127.0.0.1:{addr}") };
    let mut timeline = Timeline::new(spec)?;
    let auxv = initial_auxv(&timeline);
    if let Start::At(at, tid) = start {
        timeline.goto(at)?;
        if timeline.now() != at || timeline.current_thread() != tid {
            bail!(
                "the crash point was not reached in the replay (instruction {at} in thread {tid}; the run is at {} in thread {})",
                timeline.now(),
                timeline.current_thread()
            );
        }
    }
    if let Start::Finding(f) = start {
        let found = match f.analysis.as_str() {
            _ if f.crash_image.is_some() => {
                if crash.is_none() {
                    bail!("finding {} is a crash finding, and the report has no crash section to rebuild it", f.id);
                }
                if !timeline.run_to_last_fault()? {
                    // It exited (with a failing status, or by a signal it raised): at its end.
                    timeline.run_to_end();
                }
                true
            }
            "fault" | "hang" => timeline.run_to_last_fault()?,
            "deadlock" => {
                timeline.run_to_end();
                true
            }
            _ => {
                let loc = f.locations.first().ok_or_else(|| anyhow!("finding {} has no location", f.id))?;
                let pc = loc.backtrace.first().map_or(loc.pc, |fr| fr.pc);
                timeline.run_to_first(pc, loc.thread)?
            }
        };
        if !found {
            bail!("finding {}'s place was not reached in the replay (the run ended first)", f.id);
        }
    }
    let listener = TcpListener::bind(&addr).with_context(|| format!("cannot listen on {addr}"))?;
    // Port 0 asks the system for a free one: name the one it gave.
    let addr = listener.local_addr().map_or(addr, |a| a.to_string());
    say!(
        "ferrite: gdb server on {addr}, stopped at instruction {} in thread {}; connect with: gdb {} -ex 'target remote {addr}'",
        timeline.now(),
        timeline.current_thread(),
        spec.program.display()
    );
    let (stream, _) = listener.accept().with_context(|| format!("cannot accept a connection on {addr}"))?;
    let _ = stream.set_nodelay(true);
    let mut debuggee = Debuggee::new(timeline, findings, crash, auxv);
    let conn: Box<dyn ConnectionExt<Error = std::io::Error>> = Box::new(stream);
    match session(conn, &mut debuggee) {
        Ok(DisconnectReason::Disconnect) => say!("ferrite: gdb detached"),
        Ok(DisconnectReason::Kill) => say!("ferrite: gdb killed the replay"),
        Ok(DisconnectReason::TargetExited(_) | DisconnectReason::TargetTerminated(_)) => {}
        Err(e) => bail!("the gdb session failed: {e}"),
    }
    Ok(())
}

/// gdbstub's blocking loop (`GdbStub::run_blocking`), with gdb's bytes looked at first while
/// the run is stopped: `qGetTLSAddr` packets, which gdbstub does not know, are answered here
/// ([`tls`]).
fn session(conn: Box<dyn ConnectionExt<Error = std::io::Error>>, target: &mut Debuggee) -> Result<DisconnectReason> {
    use gdbstub::stub::state_machine::GdbStubStateMachine as State;
    let fail = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let mut gdb = GdbStub::new(conn).run_state_machine(target).map_err(|e| fail(&e))?;
    let mut sniffer = tls::Sniffer::default();
    let mut pending = std::collections::VecDeque::new();
    loop {
        gdb = match gdb {
            State::Idle(mut g) => {
                while pending.is_empty() {
                    let byte = g.borrow_conn().read().map_err(|e| fail(&e))?;
                    match sniffer.push(byte) {
                        tls::Sniffed::Wait => {}
                        tls::Sniffed::Forward(bytes) => pending.extend(bytes),
                        tls::Sniffed::TlsQuery(args) => {
                            let mut out = if sniffer.no_ack { Vec::new() } else { b"+".to_vec() };
                            out.extend(tls::packet(&tls::reply(target, &args)));
                            let conn = g.borrow_conn();
                            conn.write_all(&out).and_then(|()| conn.flush()).map_err(|e| fail(&e))?;
                        }
                    }
                }
                let byte = pending.pop_front().expect("filled above");
                g.incoming_data(target, byte).map_err(|e| fail(&e))?
            }
            State::Disconnected(g) => return Ok(g.get_reason()),
            State::CtrlCInterrupt(g) => {
                let stop = EventLoop::on_interrupt(target).map_err(|e| fail(&e))?;
                g.interrupt_handled(target, stop).map_err(|e| fail(&e))?
            }
            State::Running(mut g) => match EventLoop::wait_for_stop_reason(target, g.borrow_conn()) {
                Ok(run_blocking::Event::TargetStopped(stop)) => g.report_stop(target, stop).map_err(|e| fail(&e))?,
                Ok(run_blocking::Event::IncomingData(byte)) => g.incoming_data(target, byte).map_err(|e| fail(&e))?,
                Err(run_blocking::WaitForStopReasonError::Target(e)) => bail!("{e}"),
                Err(run_blocking::WaitForStopReasonError::Connection(e)) => bail!("{e}"),
            },
        }
    }
}

/// The program's auxiliary vector, as the kernel laid it out above the first thread's stack
/// pointer at the start (`argc`, `argv`, `NULL`, `envp`, `NULL`, then the key-value pairs up to
/// `AT_NULL`): gdb reads it (`qXfer:auxv:read`) to find where a position-independent program and
/// the dynamic linker were loaded, and from there the libraries' link map in guest memory, so
/// that a dynamic program's library frames have names. Empty if the stack cannot be read.
fn initial_auxv(timeline: &Timeline) -> Vec<u8> {
    let m = timeline.session().machine();
    let word = |a: u64| {
        let mut b = [0u8; 8];
        m.mem.read(a, &mut b).ok().map(|()| u64::from_le_bytes(b))
    };
    let sp = m.reg(emu::Reg::RSP);
    let Some(argc) = word(sp) else { return Vec::new() };
    // Past argc, argv and its NULL; then past envp and its NULL (bounded: a corrupt stack ends it).
    let mut a = sp.wrapping_add(8 * (argc.min(1 << 20) + 2));
    for _ in 0..(1 << 20) {
        match word(a) {
            Some(0) => break,
            Some(_) => a = a.wrapping_add(8),
            None => return Vec::new(),
        }
    }
    a = a.wrapping_add(8);
    let mut out = Vec::new();
    for _ in 0..64 {
        let (Some(key), Some(value)) = (word(a), word(a.wrapping_add(8))) else { return Vec::new() };
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
        if key == 0 {
            return out;
        }
        a = a.wrapping_add(16);
    }
    Vec::new()
}

/// What `monitor crash` says of crash finding `f`'s recovery `argv` (or checker `argv`, run
/// after the recovery `after` passed): the crash point and how the recovery failed.
pub fn crash_note(f: &Finding, argv: &[String], after: Option<&[String]>) -> String {
    match after {
        None => format!(
            "recovery `{}` of finding {} on the crash image of the crash at {}",
            argv.join(" "),
            f.id,
            crash_of(f)
        ),
        Some(recover) => format!(
            "checker `{}` of finding {}, run after recovery `{}` passed, on the crash image of the crash at {}",
            argv.join(" "),
            f.id,
            recover.join(" "),
            crash_of(f)
        ),
    }
}

/// What `monitor crash` says when crash finding `f`'s workload `argv` is served
/// (`--workload`), stopped at instruction `at`: the crash point and how the recovery failed.
pub fn workload_note(f: &Finding, argv: &[String], at: u64) -> String {
    format!(
        "workload `{}` of finding {}, stopped at instruction {at}, where it crashes: the crash at {}",
        argv.join(" "),
        f.id,
        crash_of(f)
    )
}

/// Crash finding `f`'s crash point, its index, and how the recovery failed.
fn crash_of(f: &Finding) -> String {
    let point = f
        .locations
        .iter()
        .find(|l| l.role == "crash point")
        .map(|l| match (&l.function, &l.file, l.line) {
            (Some(func), Some(file), Some(line)) => format!("{func} at {file}:{line} in thread {}", l.thread),
            _ => format!("{:#x} in thread {}", l.pc, l.thread),
        })
        .unwrap_or_else(|| "an unknown place".into());
    let image = f.crash_image.as_ref().map_or(String::new(), |i| format!(" (crash point {})", i.point));
    format!("{point}{image}: {}", f.message)
}

/// gdbstub's blocking loop: the run goes on in this thread, between packets.
enum EventLoop {}

impl run_blocking::BlockingEventLoop for EventLoop {
    type Target = Debuggee;
    type Connection = Box<dyn ConnectionExt<Error = std::io::Error>>;
    type StopReason = MultiThreadStopReason<u64>;

    #[allow(clippy::type_complexity)]
    fn wait_for_stop_reason(
        target: &mut Debuggee,
        conn: &mut Self::Connection,
    ) -> Result<
        run_blocking::Event<Self::StopReason>,
        run_blocking::WaitForStopReasonError<String, <Self::Connection as Connection>::Error>,
    > {
        let what = target.resume.take().unwrap_or(target::Resume::Continue);
        // A forward run looks for gdb's interrupt (Ctrl-C) between slices.
        let mut interrupted = false;
        let halt = target
            .run(what, || {
                interrupted = conn.peek().map(|b| b.is_some()).unwrap_or(true);
                interrupted
            })
            .map_err(|e| run_blocking::WaitForStopReasonError::Target(e.to_string()))?;
        match halt {
            Some(h) => Ok(run_blocking::Event::TargetStopped(target.stop_reason(h))),
            None => {
                let byte = conn.read().map_err(run_blocking::WaitForStopReasonError::Connection)?;
                Ok(run_blocking::Event::IncomingData(byte))
            }
        }
    }

    fn on_interrupt(_target: &mut Debuggee) -> Result<Option<MultiThreadStopReason<u64>>, String> {
        Ok(Some(MultiThreadStopReason::Signal(gdbstub::common::Signal::SIGINT)))
    }
}
