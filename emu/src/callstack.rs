//! A shadow call stack kept from the blocks the guest enters, with every stack it ever had
//! interned, so an event carries its backtrace as one `u32` ([`StackId`]).
//!
//! Optimised C has no frame pointers and DWARF unwinding at every event would cost far too much, so
//! the machine keeps its own stack of call sites: when a block that ended in `call` is followed by
//! the next block, the call site is pushed; when a block that ended in `ret` is followed by its
//! return address, frames are popped down to the one that call returns to. A `longjmp`, a C++
//! unwind or a thread switch that skips returns is repaired at the next `ret` whose target is found
//! deeper in the stack, or at the next jump into a recognised function, whose return address (the
//! word at the top of the stack) names the frame it runs in; a `ret` to an address no frame expects (hand-written code pushing its own
//! return address) leaves the stack unchanged. A recognised function reached by a jump runs in
//! the innermost frame and returns with it; a frame of an outlined OpenMP body can hold one
//! more, the function the body tail-calls (`jmp GOMP_taskwait` at -O2), which returns first. Depth is capped so runaway recursion costs bounded
//! memory; the outermost frames are then lost, never the innermost.
//!
//! Interning: the stacks form a tree (a trie of call sites); each node is (parent, call site). A
//! push only records the frame; the stack is interned when something asks for its id (an event a
//! pass sees), from the innermost frame already interned, allocating only the first time that
//! stack is seen, and a pop is a truncation. So calls between events cost no look-up (an
//! interpreter's deep recursion with no PM access interns nothing), and memory follows the
//! number of distinct call paths at events, not the number of calls.

use rustc_hash::FxHashMap;

use crate::sync::SyncKind;

/// A call to a recognised function, as its frame keeps it: the kind, the object (the entry
/// event's `addr`) and the word its return needs ([`crate::sync::Entry::aux`]).
pub type SyncCall = (SyncKind, u64, u64);

const MAX_DEPTH: usize = 4096;

/// A frame's node before its stack is interned ([`CallStack::id`]).
const NOT_INTERNED: StackId = StackId(u32::MAX);

/// An interned call stack: 0 is the empty stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    call_pc: u64,
    ret: u64,
    node: StackId,
    /// A recognised synchronisation function this frame called, with the object it
    /// synchronises on and the word its return needs ([`crate::sync::Entry`]).
    sync: Option<SyncCall>,
    /// A recognised function a body of the program's ([`SyncKind::OmpBody`]) tail-called
    /// (`jmp GOMP_taskwait` at the end of an outlined task body): it returns at this frame's
    /// `ret`, just before the body does.
    tail: Option<SyncCall>,
}

/// Every call stack seen, as a tree of call sites.
#[derive(Clone, Debug)]
pub struct StackTable {
    /// Node i: (parent, call site). Node 0 is the root.
    nodes: Vec<(StackId, u64)>,
    index: FxHashMap<(StackId, u64), StackId>,
}

impl Default for StackTable {
    fn default() -> Self {
        StackTable { nodes: vec![(StackId(0), 0)], index: FxHashMap::default() }
    }
}

impl StackTable {
    fn child(&mut self, parent: StackId, call_pc: u64) -> StackId {
        if let Some(id) = self.index.get(&(parent, call_pc)) {
            return *id;
        }
        let id = StackId(self.nodes.len() as u32);
        self.nodes.push((parent, call_pc));
        self.index.insert((parent, call_pc), id);
        id
    }

    /// Call sites of a stack, innermost first.
    pub fn call_sites(&self, mut id: StackId) -> Vec<u64> {
        let mut out = Vec::new();
        while id.0 != 0 {
            let Some(&(parent, pc)) = self.nodes.get(id.0 as usize) else {
                break;
            };
            out.push(pc);
            id = parent;
        }
        out
    }

    /// Stacks interned so far, the empty stack included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether only the empty stack is interned.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }
}

/// One thread's shadow call stack: the call site and return address of each frame the thread
/// entered by a `call` and has not left, outermost first, each marked with the recognised
/// synchronisation function it is in, if any.
#[derive(Clone, Debug, Default)]
pub struct CallStack {
    frames: Vec<Frame>,
}

impl CallStack {
    /// A `call` at `call_pc` returning to `ret`.
    pub fn push(&mut self, call_pc: u64, ret: u64) {
        self.push_sync(call_pc, ret, None);
    }

    /// A call to a recognised synchronisation function (`sync`: what its frame keeps).
    pub fn push_sync(&mut self, call_pc: u64, ret: u64, sync: Option<SyncCall>) {
        if self.frames.len() == MAX_DEPTH {
            // Rebase: forget the outermost frame; the rest is interned again from the root.
            self.frames.remove(0);
            for f in &mut self.frames {
                f.node = NOT_INTERNED;
            }
        }
        self.frames.push(Frame { call_pc, ret, node: NOT_INTERNED, sync, tail: None });
    }

    /// A `ret` landed at `target`. Returns the synchronisation calls that returned, innermost
    /// first: the function a body tail-called, if any, then the frame's own, if it was one.
    pub fn returned_to(&mut self, target: u64) -> [Option<SyncCall>; 2] {
        let Some(i) = self.frames.iter().rposition(|f| f.ret == target) else {
            return [None, None];
        };
        let f = self.frames[i];
        self.frames.truncate(i);
        [f.tail, f.sync]
    }

    /// A function entered by a jump will return to `ret` (the word at the top of the stack at
    /// its entry): the innermost frame returning there is the one it runs in, and frames above
    /// it were left without a `ret` (a C++ exception caught below them, a `longjmp`) and are
    /// dropped, so the entry marks the frame that will see its return. No frame returning there:
    /// nothing changes.
    pub fn unwound_to(&mut self, ret: u64) {
        if let Some(i) = self.frames.iter().rposition(|f| f.ret == ret) {
            self.frames.truncate(i + 1);
        }
    }

    /// Whether a jump to the recognised function `kind` starts a call of it in the innermost
    /// frame: the frame is in no recognised function, or in a body of the program's
    /// ([`SyncKind::OmpBody`]: its code is the program's, and gcc ends a body with `jmp
    /// GOMP_taskwait` at -O2) that has tail-called none yet. Otherwise the jump is the
    /// function's own (one function of the runtime jumping to another inside its
    /// implementation) or this very entry seen again (the block hook fires twice for a block
    /// the engine stopped before).
    pub fn jump_enters(&self, kind: SyncKind) -> bool {
        match self.frames.last() {
            None => false,
            Some(f) => match f.sync {
                None => true,
                Some((SyncKind::OmpBody, _, _)) => f.tail.is_none() && kind != SyncKind::OmpBody,
                Some(_) => false,
            },
        }
    }

    /// Marks the innermost frame as being in `sync`, reached by a jump ([`CallStack::jump_enters`]
    /// said it starts a call): the frame's own if it has none, else the body's tail call.
    pub fn enter_by_jump(&mut self, sync: SyncCall) {
        if let Some(f) = self.frames.last_mut() {
            if f.sync.is_none() {
                f.sync = Some(sync);
            } else {
                f.tail = Some(sync);
            }
        }
    }

    /// The synchronisation call the innermost frame is in, if any (`None` on an empty stack).
    pub fn top_sync(&self) -> Option<SyncCall> {
        self.frames.last().and_then(|f| f.sync)
    }

    /// The interned id of the current stack, interning the frames pushed since the last time.
    #[inline]
    pub fn id(&mut self, table: &mut StackTable) -> StackId {
        // Every event asks; the innermost frame is mostly interned already.
        match self.frames.last() {
            None => StackId(0),
            Some(f) if f.node != NOT_INTERNED => f.node,
            Some(_) => self.intern(table),
        }
    }

    /// Interns the frames pushed since the last [`CallStack::id`] and returns the stack's id.
    #[inline(never)]
    fn intern(&mut self, table: &mut StackTable) -> StackId {
        // Frames are interned outermost first, so those not yet interned are the innermost.
        let first = self.frames.iter().rposition(|f| f.node != NOT_INTERNED).map_or(0, |i| i + 1);
        let mut parent = first.checked_sub(1).map_or(StackId(0), |i| self.frames[i].node);
        for f in &mut self.frames[first..] {
            parent = table.child(parent, f.call_pc);
            f.node = parent;
        }
        parent
    }

    /// Call sites, innermost first.
    pub fn call_sites(&self) -> impl Iterator<Item = u64> + '_ {
        self.frames.iter().rev().map(|f| f.call_pc)
    }

    /// Frames on the stack.
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// Forgets every frame (the thread's stack was replaced: `execve`, a `longjmp` out of
    /// everything, a new thread).
    pub fn clear(&mut self) {
        self.frames.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_to_the_matching_return_and_survives_longjmp() {
        let mut t = StackTable::default();
        let mut s = CallStack::default();
        s.push(0x10, 0x15);
        s.push(0x20, 0x25);
        let inner = s.id(&mut t);
        s.push(0x30, 0x35);
        s.returned_to(0x35);
        assert_eq!(s.call_sites().collect::<Vec<_>>(), vec![0x20, 0x10]);
        assert_eq!(s.id(&mut t), inner);
        assert_eq!(t.call_sites(inner), vec![0x20, 0x10]);
        s.push(0x40, 0x45);
        // longjmp out of two frames, then a return into the outermost one.
        s.returned_to(0x15);
        assert_eq!(s.depth(), 0);
        assert_eq!(s.id(&mut t), StackId(0));
        assert_eq!(s.returned_to(0x99), [None, None]);
        assert_eq!(s.depth(), 0);
        // The same path interns to the same id.
        s.push(0x10, 0x15);
        s.push(0x20, 0x25);
        assert_eq!(s.id(&mut t), inner);
    }

    #[test]
    fn stacks_are_interned_only_when_asked_for() {
        let mut t = StackTable::default();
        let mut s = CallStack::default();
        // Deep recursion with no event: nothing interned.
        for i in 0..100 {
            s.push(0x100 + i, 0x200 + i);
        }
        assert_eq!(t.len(), 1);
        let deep = s.id(&mut t);
        assert_eq!(t.len(), 101);
        assert_eq!(t.call_sites(deep).len(), 100);
        // Popping and pushing the same path again interns nothing new.
        s.returned_to(0x200 + 50);
        s.push(0x100 + 50, 0x200 + 50);
        let again = s.id(&mut t);
        assert_eq!(t.call_sites(again), (0..=50).rev().map(|i| 0x100 + i).collect::<Vec<u64>>());
        assert_eq!(t.len(), 101);
        // Past the depth cap the outermost frame goes; the innermost ones stay.
        for i in 0..MAX_DEPTH as u64 {
            s.push(0x10_000 + i, 0x20_000 + i);
        }
        let top = s.id(&mut t);
        let sites = t.call_sites(top);
        assert_eq!(sites.len(), MAX_DEPTH);
        assert_eq!(sites[0], 0x10_000 + MAX_DEPTH as u64 - 1);
    }

    #[test]
    fn a_jump_into_a_sync_function_marks_the_innermost_frame() {
        let mut s = CallStack::default();
        // No frame: nothing to mark (nothing would return from it).
        s.enter_by_jump((SyncKind::MutexLock, 0x100, 0));
        assert_eq!(s.top_sync(), None);
        // A wrapper called at 0x10 tail-jumps to the lock function: the lock returns to 0x15.
        s.push(0x10, 0x15);
        assert_eq!(s.top_sync(), None);
        s.enter_by_jump((SyncKind::MutexLock, 0x100, 0));
        assert_eq!(s.top_sync(), Some((SyncKind::MutexLock, 0x100, 0)));
        assert_eq!(s.returned_to(0x15), [None, Some((SyncKind::MutexLock, 0x100, 0))]);
        assert_eq!(s.depth(), 0);
    }

    #[test]
    fn a_jump_entry_drops_the_frames_an_exception_left() {
        let mut s = CallStack::default();
        let body = (SyncKind::OmpBody, 0x200, 0);
        let wait = (SyncKind::OmpTaskwait, 0, 0);
        // A body called from the runtime catches an exception its callee threw: the callee's
        // frame and the unwinder's stay on the shadow stack (no `ret` reached them).
        s.push_sync(0x10, 0x15, Some(body));
        s.push(0x20, 0x25);
        s.push(0x30, 0x35);
        // The body then tail-calls taskwait, which will return to the body's return address.
        s.unwound_to(0x15);
        assert_eq!(s.depth(), 1);
        assert!(s.jump_enters(SyncKind::OmpTaskwait));
        s.enter_by_jump(wait);
        assert_eq!(s.returned_to(0x15), [Some(wait), Some(body)]);
        // A word that no frame returns to changes nothing.
        s.push(0x10, 0x15);
        s.push(0x20, 0x25);
        s.unwound_to(0x99);
        assert_eq!(s.depth(), 2);
    }

    #[test]
    fn a_body_that_tail_calls_a_sync_function_returns_from_both() {
        let mut s = CallStack::default();
        let body = (SyncKind::OmpBody, 0x200, 0);
        let wait = (SyncKind::OmpTaskwait, 0, 0);
        // The runtime calls an outlined body, which ends with `jmp GOMP_taskwait`.
        s.push_sync(0x10, 0x15, Some(body));
        assert!(s.jump_enters(SyncKind::OmpTaskwait));
        // The body's own entry seen again is no tail call.
        assert!(!s.jump_enters(SyncKind::OmpBody));
        s.enter_by_jump(wait);
        // Seen again (the block hook fired twice): already entered.
        assert!(!s.jump_enters(SyncKind::OmpTaskwait));
        assert_eq!(s.top_sync(), Some(body));
        // Its return is the taskwait's, then the body's.
        assert_eq!(s.returned_to(0x15), [Some(wait), Some(body)]);
        // A runtime function jumping inside its own implementation starts nothing.
        s.push_sync(0x10, 0x15, Some((SyncKind::MutexLock, 0x100, 0)));
        assert!(!s.jump_enters(SyncKind::MutexUnlock));
    }
}
