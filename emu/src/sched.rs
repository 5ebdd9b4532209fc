//! The deterministic scheduler: which guest thread runs, decided from the seed at well-defined
//! scheduling points, so that a seed names one interleaving and replays it exactly.
//!
//! All guest threads run in one engine, one at a time. A switch can happen only at a
//! *scheduling point*: a system call, a locked instruction, a PM load or a PM store (each before
//! it has any effect: the machine stops in the instruction's code or memory hook and, for a
//! store, writes back the bytes Unicorn already wrote), with `--preempt all` any access outside
//! the thread's stack likewise, `pause` (the spin-wait hint, a yield), and when the running
//! thread's instruction quantum runs out (at the next block start). No point costs a
//! translation: stopping, switching and resuming keep every translated block. Points are
//! defined over retired instructions and events, never over which hooks happen to be installed:
//! the same seed with other `--analyses` makes the same decisions. When only one thread exists,
//! points consume nothing, so a single-threaded run is independent of the strategy.
//!
//! Every strategy has a quantum: a thread that never reaches another point (a spin on a plain
//! flag) is preempted when it runs out, so no strategy can starve the thread it waits for.
//!
//! Strategies:
//! - [`Strategy::Random`]: at each point, switch with probability 1/8 to a uniformly chosen other
//!   runnable thread; quanta are drawn uniformly from 1,000..=50,000 instructions.
//! - [`Strategy::Pct`]: Burckhardt et al., "A Randomized Scheduler with Probabilistic Guarantees of
//!   Finding Bugs" (ASPLOS'10). Threads get distinct random priorities; the highest-priority
//!   runnable thread always runs; `depth - 1` change points, drawn uniformly over the expected
//!   number of points, each lower the running thread's priority below all initial ones. A bug of
//!   depth d is found with probability at least 1/(n k^(d-1)) per run for n threads and k points.
//!   A thread that uses up its 500,000-instruction quantum is demoted below every thread not
//!   demoted since (spinning threads take turns).
//! - [`Strategy::Exhaustive`]: bounded systematic exploration (CHESS-style, Musuvathi & Qadeer
//!   PLDI'07): a run follows a prefix of decisions and then never preempts; it records every
//!   decision, and the driver (`--strategy exhaustive --explore N`) runs each untried alternative
//!   whose prefix has at most `--max-preemptions` preemptions, depth first, until N runs or none
//!   is left. Switches at forced points (the running thread blocked) and at quantum ends
//!   (100,000 instructions) cost no preemption. With `--por` the driver tries only the
//!   alternatives dynamic partial-order reduction asks for (`src/por.rs`).
//! - [`Strategy::Fifo`]: no preemption but the quantum: a thread runs until it blocks, yields,
//!   exits or has run 100,000 instructions, and the next is the runnable thread with the next
//!   higher id, wrapping round (round robin). Futex wakes pick the oldest waiter, so FIFO never
//!   consults the seed: the baseline schedule.

/// PMRace's scheduling primitive (its `cond_wait`/`cond_signal`, ASPLOS'22 §4.2.2), for one
/// priority entry: a thread about to execute one of `loads` on PM bytes in `[dev, dev + len)` is
/// held (not runnable) until some thread stores to those bytes; then the held threads are
/// released and the storing thread waits ([`WRITER_WAIT`] instructions of the others) before
/// its next flush or fence, so the readers load the value while it is not yet durable. After
/// that store nobody is held again in the run (PMRace's Pitfall-1). Unlike PMRace's
/// `cond_signal`, a store while nobody waits is not the signal: in a deterministic run it would
/// only waste the interleaving. When every runnable thread is held, the `privileged`-th held
/// thread (by id, wrapping) is released and never held again (Pitfall-2, enumerated
/// deterministically instead of chosen at random). A word hold does so at every such moment; a
/// publication hold chooses one privileged thread a run, and at later such moments lets the
/// lowest held reader pass its load once (it may be held again at its next one), so that the
/// readers of a publication are not all bypassed before the first one is made.
///
/// A hold with `stores` is a *publication site* instead of one word: a thread is held at one of
/// `loads` whatever PM bytes it loads, and the signal is a store by one of `stores` (a pointer to a
/// fresh object being published: a resize's new table, a split's new node), wherever it stores.
/// The object published lives at a different address in every run, so a word found by one run
/// would not be the word of the next.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    /// PCs of the sync-point loads, sorted.
    pub loads: Vec<u64>,
    /// The device bytes (address, length) of the entry (unused with `stores`).
    pub dev: u64,
    /// Length in bytes of the device range (unused with `stores`).
    pub len: u64,
    /// Which held thread to release when all are held.
    pub privileged: u32,
    /// PCs of the publishing stores, sorted (empty: the hold is the word `dev`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<u64>,
}

impl Hold {
    /// Whether device bytes `[dev, dev+len)` overlap the entry's `[self.dev, self.dev + self.len)`.
    pub fn covers(&self, dev: u64, len: u64) -> bool {
        dev < self.dev + self.len && self.dev < dev + len
    }

    /// Whether a load at `pc` of PM bytes `[dev, dev+len)` is a sync point.
    pub fn holds(&self, pc: u64, dev: u64, len: u64) -> bool {
        (!self.stores.is_empty() || self.covers(dev, len)) && self.loads.binary_search(&pc).is_ok()
    }

    /// Whether a store at `pc` to `[dev, dev+len)` is the signal that releases the held threads.
    pub fn signals(&self, pc: u64, dev: u64, len: u64) -> bool {
        if self.stores.is_empty() {
            self.covers(dev, len)
        } else {
            self.stores.binary_search(&pc).is_ok()
        }
    }
}

/// Signals a publication hold gives in one run, at most: after each (once its writer's wait is
/// over) it holds readers again, because one publishing instruction can publish several kinds of
/// object (a non-inlined store helper; an insert that links a new node or stores a child
/// offset), and the first publication the run meets need not be the one the readers race with.
pub const PUBLICATION_SIGNALS: u32 = 16;

/// Instructions the storing thread waits, after releasing the readers, before it may run on to
/// its flush (PMRace's `writerWaiting`, as an instruction budget instead of a sleep).
pub const WRITER_WAIT: u64 = 20_000;

/// Instructions (of the other threads) a reader held at a sync point waits for the store before
/// it gives up and is never held again in the run (PMRace's Pitfall-3: its reader disables a sync
/// point after waiting 0.1 s, a hundred times the writer's wait). Without it a reader held while
/// the only running thread waits for it (for a lock it holds, a flag it sets) would spin forever.
pub const READER_PATIENCE: u64 = 2_000_000;

/// Active delay injection (Vardalith §5.2, after TSVD and WAFFLE): when a thread enters a release
/// (an unlock, a semaphore post, a custom release) while it has PM stores not yet fenced, it is
/// delayed — held for `length` instructions of the other threads — with a probability that starts
/// at 100% for each release site and drops by `decay` percentage points after every delay there
/// that exposed nothing (no other thread loaded the delayed thread's unpersisted PM data during
/// it). Decisions come from the seed, so a run with delays replays like any other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DelayInjection {
    /// Instructions of the other threads a delay lasts.
    pub length: u64,
    /// Percentage points the probability loses per fruitless delay at a site.
    pub decay: u32,
}

/// The state of delay injection in one run.
#[derive(Clone, Debug)]
pub struct Delays {
    /// The configuration the run was given.
    pub cfg: DelayInjection,
    seed: u64,
    rng: Rng,
    /// Fruitless delays per release site (the call's PC).
    fruitless: rustc_hash::FxHashMap<u64, u32>,
    /// The last delay: site, thread, instruction count it ends at, whether it exposed something.
    last: Option<(u64, u32, u64, bool)>,
    /// Delays injected so far.
    pub injected: u64,
}

impl Delays {
    /// Delay injection configured by `cfg`, its decisions drawn from a stream derived from `seed`.
    pub fn new(cfg: DelayInjection, seed: u64) -> Delays {
        Delays {
            cfg,
            seed,
            rng: Rng::new(seed ^ 0xde1a_7de1_a7de_1a7d),
            fruitless: rustc_hash::FxHashMap::default(),
            last: None,
            injected: 0,
        }
    }

    /// Whether to delay the thread entering the release at `site`.
    pub fn decide(&mut self, site: u64) -> bool {
        if let Some((s, _, _, fruitful)) = self.last.take() {
            if !fruitful {
                *self.fruitless.entry(s).or_default() += 1;
            }
        }
        let lost = self.fruitless.get(&site).copied().unwrap_or(0).saturating_mul(self.cfg.decay);
        let p = 100u32.saturating_sub(lost);
        p > 0 && self.rng.below(100) < u64::from(p)
    }

    /// A delay of `tid` at `site` began; it lasts until `until` retired instructions.
    pub fn started(&mut self, site: u64, tid: u32, until: u64) {
        self.injected += 1;
        self.last = Some((site, tid, until, false));
    }

    /// The delay injection a run seeded with `seed` would have now, if this one has decided
    /// nothing yet (else `None`: what it decided depended on its own seed).
    pub fn reseeded(&self, seed: u64) -> Option<Delays> {
        let untouched = self.injected == 0
            && self.last.is_none()
            && self.fruitless.is_empty()
            && self.rng == Delays::new(self.cfg, self.seed).rng;
        untouched.then(|| Delays::new(self.cfg, seed))
    }

    /// Thread `reader` loaded PM data stored by `writer` that is not durable, at `icount`.
    pub fn observe(&mut self, reader: u32, writer: u32, icount: u64) {
        if let Some((_, tid, until, fruitful)) = &mut self.last {
            if *tid == writer && reader != writer && icount <= *until {
                *fruitful = true;
            }
        }
    }
}

/// xoshiro256** seeded through splitmix64: small, fast, and the same on every host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded with `seed`; equal seeds give equal streams on every host.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// How the scheduler chooses at scheduling points (`--strategy`); see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Switch at a point with probability 1/8; quanta drawn from 1,000..=50,000 instructions.
    Random,
    /// PCT: the highest-priority runnable thread runs; at each of `depth - 1` change points the
    /// running thread drops below every initial priority.
    Pct {
        /// The bug depth aimed at: `depth - 1` change points are drawn.
        depth: u32,
        /// How many scheduling points a run is expected to have; change points are drawn from 1
        /// to it.
        expected_points: u64,
    },
    /// No preemption but the 100,000-instruction quantum; round robin by thread id.
    Fifo,
    /// Systematic exploration: follow a prefix of decisions, then never preempt; every decision
    /// is recorded so a driver can enumerate the alternatives (see [`Decision`]).
    Exhaustive,
}

/// One scheduling decision of an exhaustive run: who could run, who was running, who was
/// chosen, and whether the running thread could have continued (a switch there is a
/// preemption).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The threads that could be chosen, sorted (at a quantum end, the running thread left out).
    pub runnable: Vec<u32>,
    /// The thread running when the decision was made.
    pub current: u32,
    /// The thread chosen.
    pub chosen: u32,
    /// Whether the running thread could have continued: choosing another there is a preemption.
    pub optional: bool,
    /// Instructions retired when the decision was made (set by the caller of `pick`).
    pub at: u64,
}

/// Why the scheduler is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The running thread may continue.
    Optional,
    /// The running thread yielded (`sched_yield`, or `pause` in a spin): prefer another.
    Yield,
    /// The running thread used up its quantum: another runnable thread runs, under every
    /// strategy, so that a thread spinning on plain memory cannot starve the one it waits for.
    Quantum,
    /// The running thread cannot continue (blocked or exited).
    Forced,
}

/// The deterministic scheduler of one run: the strategy's state and what it decided (see the
/// module doc).
#[derive(Clone, Debug)]
pub struct Scheduler {
    /// The strategy, fixed for the run.
    pub strategy: Strategy,
    /// The seed of `rng` (what [`Scheduler::reseeded`] checks the stream against).
    seed: u64,
    rng: Rng,
    /// Every thread the scheduler was told of, in order ([`Scheduler::thread_created`]: PCT
    /// draws each one's priority from the stream).
    created: Vec<u32>,
    /// PCT priorities by thread id (higher runs first).
    priorities: rustc_hash::FxHashMap<u32, u64>,
    /// The same priorities ordered, highest last (ties: the lower thread id last), so that a
    /// pick looks only at the top instead of scanning every thread.
    by_priority: std::collections::BTreeSet<(u64, std::cmp::Reverse<u32>)>,
    change_points: Vec<u64>,
    next_low_priority: u64,
    /// PCT: the priority given to the next thread demoted at the end of its quantum. Counts down
    /// from 2^31, between the change-point priorities (from 0 up) and the initial ones (2^32 up).
    next_demoted: u64,
    /// Scheduling points seen so far (with more than one thread).
    pub points: u64,
    /// Switches made, for the report.
    pub switches: u64,
    /// Exhaustive: the decisions to follow, then the decisions made.
    prefix: Vec<u32>,
    /// Exhaustive: every decision made in this run, in order.
    pub decisions: Vec<Decision>,
}

const SWITCH_ODDS: u64 = 8;
const QUANTUM_MIN: u64 = 1_000;
const QUANTUM_MAX: u64 = 50_000;
/// The quantum of the strategies that never preempt otherwise (FIFO, exhaustive): long enough
/// that a thread doing real work is not interrupted, short enough that a spin on a plain flag
/// hands the CPU over within a millisecond of host time.
const BACKSTOP_QUANTUM: u64 = 100_000;
/// PCT's quantum: its schedule is decided by priorities, so the quantum only has to end spins
/// (the running thread is demoted below every thread not yet demoted when it runs out).
const PCT_QUANTUM: u64 = 500_000;

impl Scheduler {
    /// A scheduler for `strategy` whose random choices come from `seed` (PCT draws its change
    /// points here).
    pub fn new(strategy: Strategy, seed: u64) -> Scheduler {
        let mut rng = Rng::new(seed ^ 0x5eed_5c4e_d01e);
        let mut change_points = Vec::new();
        if let Strategy::Pct { depth, expected_points } = strategy {
            for _ in 1..depth.max(1) {
                // Points are counted from 1.
                change_points.push(1 + rng.below(expected_points.max(1)));
            }
            change_points.sort_unstable();
        }
        Scheduler {
            strategy,
            seed,
            rng,
            created: Vec::new(),
            priorities: rustc_hash::FxHashMap::default(),
            by_priority: std::collections::BTreeSet::new(),
            change_points,
            next_low_priority: 0,
            next_demoted: 1 << 31,
            points: 0,
            switches: 0,
            prefix: Vec::new(),
            decisions: Vec::new(),
        }
    }

    /// Exhaustive: the chosen thread of each decision to make before defaulting.
    pub fn set_prefix(&mut self, prefix: Vec<u32>) {
        self.prefix = prefix;
    }

    /// The scheduler a run seeded with `seed` would have now, if nothing this one decided so far
    /// depended on its seed: its stream drawn from only for what every run draws the same way
    /// (PCT's change points and the priorities of the threads created so far), no scheduling
    /// point counted, no decision made. `None` otherwise. The exhaustive prefix is kept. This is
    /// what lets `--explore` start every schedule from one snapshot of their common start.
    pub fn reseeded(&self, seed: u64) -> Option<Scheduler> {
        let replay = |seed| {
            let mut s = Scheduler::new(self.strategy, seed);
            for &tid in &self.created {
                s.thread_created(tid);
            }
            s
        };
        let fresh = replay(self.seed);
        let untouched = self.rng == fresh.rng
            && self.points == 0
            && self.switches == 0
            && self.decisions.is_empty()
            && self.change_points == fresh.change_points
            && self.next_low_priority == fresh.next_low_priority
            && self.next_demoted == fresh.next_demoted
            && self.priorities == fresh.priorities;
        if !untouched {
            return None;
        }
        let mut s = replay(seed);
        s.prefix = self.prefix.clone();
        Some(s)
    }

    /// A new thread exists.
    pub fn thread_created(&mut self, tid: u32) {
        self.created.push(tid);
        if matches!(self.strategy, Strategy::Pct { .. }) {
            // Initial priorities sit above every change-point priority (which count up from 0).
            let p = (1 << 32) + self.rng.below(1 << 31);
            self.set_priority(tid, p);
        }
    }

    fn set_priority(&mut self, tid: u32, p: u64) {
        if let Some(old) = self.priorities.insert(tid, p) {
            self.by_priority.remove(&(old, std::cmp::Reverse(tid)));
        }
        self.by_priority.insert((p, std::cmp::Reverse(tid)));
    }

    /// Instructions the running thread may retire before a preemption point.
    pub fn quantum(&mut self) -> u64 {
        match self.strategy {
            Strategy::Random => QUANTUM_MIN + self.rng.below(QUANTUM_MAX - QUANTUM_MIN + 1),
            _ => self.fixed_quantum(),
        }
    }

    /// The quantum of a thread that became one of several runnable threads without a
    /// scheduling decision (the first `clone`, a wake-up): fixed, so that arming it consumes
    /// nothing of the seed.
    pub fn first_quantum(&self) -> u64 {
        match self.strategy {
            Strategy::Random => QUANTUM_MAX,
            _ => self.fixed_quantum(),
        }
    }

    fn fixed_quantum(&self) -> u64 {
        match self.strategy {
            Strategy::Random => QUANTUM_MAX,
            Strategy::Pct { .. } => PCT_QUANTUM,
            Strategy::Fifo | Strategy::Exhaustive => BACKSTOP_QUANTUM,
        }
    }

    /// The highest-priority thread of `runnable` (sorted), ties to the lower id, leaving out
    /// `skip`. Walks the priority order from the top, so it costs what the blocked threads above
    /// the answer cost, not the number of threads.
    fn highest(&self, runnable: &[u32], skip: Option<u32>) -> Option<u32> {
        self.by_priority
            .iter()
            .rev()
            .map(|(_, std::cmp::Reverse(t))| *t)
            .find(|t| Some(*t) != skip && runnable.binary_search(t).is_ok())
            // Threads the scheduler was never told about (none in practice) rank lowest.
            .or_else(|| runnable.iter().copied().find(|t| Some(*t) != skip && !self.priorities.contains_key(t)))
    }

    /// Whether an optional point in the running thread should switch (cheap: called from hooks).
    pub fn wants_switch(&mut self, runnable_others: usize) -> bool {
        if runnable_others == 0 {
            return false;
        }
        self.points += 1;
        match self.strategy {
            Strategy::Random => self.rng.below(SWITCH_ODDS) == 0,
            Strategy::Pct { .. } => {
                if self.change_points.first() == Some(&self.points) || self.change_points.contains(&self.points) {
                    // Decided in `pick`, which lowers the running thread.
                    return true;
                }
                false
            }
            Strategy::Fifo => false,
            // Every point is a decision the driver may want to vary.
            Strategy::Exhaustive => true,
        }
    }

    /// Chooses the thread to run next among `runnable` (sorted, non-empty), given the thread that
    /// was running. Costs O(log n) in the number of runnable threads (PCT: the blocked threads
    /// ranked above the answer; exhaustive: recording the decision).
    pub fn pick(&mut self, runnable: &[u32], current: u32, point: Point) -> u32 {
        debug_assert!(!runnable.is_empty());
        let here = runnable.binary_search(&current);
        // The runnable thread after `current` by id, wrapping round.
        let next_after = |runnable: &[u32]| -> u32 {
            let i = runnable.partition_point(|t| *t <= current);
            *runnable.get(i).unwrap_or(&runnable[0])
        };
        let chosen = match self.strategy {
            Strategy::Exhaustive => {
                let i = self.decisions.len();
                // A quantum end is a switch the run must make, not a preemption it may try: the
                // alternatives are the other threads (continuing would only spin longer).
                let candidates: Vec<u32> = if point == Point::Quantum && runnable.len() > 1 {
                    runnable.iter().copied().filter(|t| *t != current).collect()
                } else {
                    runnable.to_vec()
                };
                let default = match point {
                    Point::Optional if here.is_ok() => current,
                    Point::Quantum => next_after(&candidates),
                    Point::Yield if candidates.len() > 1 => next_after(&candidates),
                    _ => candidates[0],
                };
                let chosen = match self.prefix.get(i) {
                    Some(t) if candidates.contains(t) => *t,
                    _ => default,
                };
                self.decisions.push(Decision {
                    at: 0,
                    runnable: candidates,
                    current,
                    chosen,
                    optional: point == Point::Optional && here.is_ok(),
                });
                chosen
            }
            Strategy::Fifo => {
                if point == Point::Optional && here.is_ok() {
                    current
                } else {
                    // Round robin from the current thread, so yields and quantum ends alternate.
                    next_after(runnable)
                }
            }
            Strategy::Random => {
                // The threads other than `current`, counted rather than collected (no allocation
                // and no scan per scheduling point).
                let n = runnable.len() - usize::from(here.is_ok());
                if n == 0 {
                    current
                } else if point == Point::Yield {
                    // A yield on Linux may return at once (another CPU is free) or let another
                    // thread in: any runnable thread, the yielder included.
                    runnable[self.rng.below(runnable.len() as u64) as usize]
                } else {
                    // Forced, a quantum end, or an optional point that `wants_switch` approved:
                    // another thread.
                    let k = self.rng.below(n as u64) as usize;
                    match here {
                        Ok(pos) if k >= pos => runnable[k + 1],
                        _ => runnable[k],
                    }
                }
            }
            Strategy::Pct { .. } => {
                if matches!(point, Point::Optional | Point::Yield) && self.change_points.contains(&self.points) {
                    self.change_points.retain(|p| *p != self.points);
                    let low = self.next_low_priority;
                    self.next_low_priority += 1;
                    self.set_priority(current, low);
                }
                if point == Point::Quantum && runnable.len() > 1 {
                    // Out of quantum: below every thread not demoted since, so that spinning
                    // threads take turns and the one they wait for gets to run.
                    let low = self.next_demoted;
                    self.next_demoted = self.next_demoted.saturating_sub(1).max(self.next_low_priority + 1);
                    if self.priorities.get(&current).is_some_and(|p| *p > low) {
                        self.set_priority(current, low);
                    }
                }
                let skip_current = matches!(point, Point::Yield | Point::Quantum) && runnable.len() > 1;
                self.highest(runnable, skip_current.then_some(current)).unwrap_or(runnable[0])
            }
        };
        if chosen != current {
            self.switches += 1;
        }
        chosen
    }

    /// An index in `0..n` for choices outside scheduling (which futex waiter wakes): seeded under
    /// the random strategies, the oldest (0) under FIFO, which never consults the seed.
    pub fn choose(&mut self, n: usize) -> usize {
        if n <= 1 || matches!(self.strategy, Strategy::Fifo | Strategy::Exhaustive) {
            0
        } else {
            self.rng.below(n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_decisions() {
        let run = |seed| {
            let mut s = Scheduler::new(Strategy::Random, seed);
            (0..200)
                .map(|_| if s.wants_switch(2) { s.pick(&[1, 2, 3], 1, Point::Optional) } else { 1 })
                .collect::<Vec<u32>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn pct_runs_the_highest_priority_thread() {
        let mut s = Scheduler::new(Strategy::Pct { depth: 1, expected_points: 10 }, 1);
        for t in [1, 2, 3] {
            s.thread_created(t);
        }
        let first = s.pick(&[1, 2, 3], 1, Point::Forced);
        for _ in 0..10 {
            assert_eq!(s.pick(&[1, 2, 3], first, Point::Optional), first);
        }
    }

    #[test]
    fn fifo_round_robins_on_yield() {
        let mut s = Scheduler::new(Strategy::Fifo, 0);
        assert_eq!(s.pick(&[1, 2, 3], 1, Point::Yield), 2);
        assert_eq!(s.pick(&[1, 2, 3], 3, Point::Yield), 1);
        assert_eq!(s.pick(&[1, 2, 3], 2, Point::Optional), 2);
    }
}
