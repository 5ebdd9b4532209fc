//! Progress of a crash-testing phase on standard error: indicatif's bar on a terminal, and
//! otherwise (a log file, CI, a pipe) a plain line every few seconds, `ferrite: crash testing:
//! 120/500 crash images recovered, 3 failing`, so that a long campaign shows it is alive and how
//! far it got. Neither appears with `--quiet`. The interval is `FERRITE_PROGRESS_SECS` seconds
//! (default 5, fractions allowed). Host time decides only when a line is printed, never anything in the run.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Seconds between two plain progress lines, unless `FERRITE_PROGRESS_SECS` says otherwise.
const DEFAULT_INTERVAL_SECS: u64 = 5;

/// A phase's progress: items done out of a known number.
pub struct Progress {
    bar: indicatif::ProgressBar,
    plain: Option<Plain>,
}

struct Plain {
    shared: Arc<Shared>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    done: AtomicU64,
    len: u64,
    what: String,
    message: Mutex<String>,
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Progress {
    /// The progress of `len` items, hidden if `quiet`: `template` is indicatif's (on a
    /// terminal), `what` names the items done in plain lines (`crash images recovered`).
    pub fn new(quiet: bool, len: usize, template: &str, what: &str) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar =
            if quiet || !terminal { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(len as u64) };
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let plain = (!quiet && !terminal && len > 0).then(|| {
            let shared = Arc::new(Shared {
                done: AtomicU64::new(0),
                len: len as u64,
                what: what.to_string(),
                message: Mutex::new(String::new()),
                stopped: Mutex::new(false),
                wake: Condvar::new(),
            });
            let s = shared.clone();
            let ticker = std::thread::Builder::new().name("ferrite-progress".into()).spawn(move || tick(&s)).ok();
            Plain { shared, ticker }
        });
        Progress { bar, plain }
    }

    /// One more item done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        if let Some(p) = &self.plain {
            p.shared.done.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// What follows the count (`3 failing`).
    pub fn set_message(&self, msg: String) {
        if let Some(p) = &self.plain {
            if let Ok(mut m) = p.shared.message.lock() {
                m.clone_from(&msg);
            }
        }
        self.bar.set_message(msg);
    }

    /// The phase is over: the bar is cleared, the plain lines stop.
    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
        if let Some(p) = &self.plain {
            p.stop();
        }
    }
}

impl Plain {
    fn stop(&self) {
        if let Ok(mut s) = self.shared.stopped.lock() {
            *s = true;
        }
        self.shared.wake.notify_all();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(p) = &mut self.plain {
            p.stop();
            if let Some(t) = p.ticker.take() {
                let _ = t.join();
            }
        }
    }
}

/// The ticker thread: a line every interval until the phase is over.
fn tick(s: &Shared) {
    // Fractions too (`0.05`), so that a test sees lines from a short campaign.
    let secs = std::env::var("FERRITE_PROGRESS_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|n| n.is_finite() && *n >= 0.001 && *n <= 86_400.0)
        .unwrap_or(DEFAULT_INTERVAL_SECS as f64);
    let Ok(mut stopped) = s.stopped.lock() else { return };
    loop {
        let Ok((guard, _)) = s.wake.wait_timeout(stopped, Duration::from_secs_f64(secs)) else { return };
        stopped = guard;
        if *stopped {
            return;
        }
        let message = s.message.lock().map(|m| m.clone()).unwrap_or_default();
        let sep = if message.is_empty() { "" } else { ", " };
        driver::say!("ferrite: crash testing: {}/{} {}{sep}{message}", s.done.load(Ordering::Relaxed), s.len, s.what);
    }
}
