//! A shadow call stack, kept from the blocks the guest enters, for cheap backtraces.
//!
//! Optimised C has no frame pointers and DWARF unwinding at every event would cost far too much, so
//! the machine keeps its own stack of call sites: when a block that ended in `call` is followed by
//! the next block, the call site is pushed; when a block that ended in `ret` is followed by its
//! return address, frames are popped down to the one that call returns to. A `longjmp`, a C++
//! unwind or a thread switch that skips returns is repaired at the next `ret` whose target is found
//! deeper in the stack; a `ret` to an address no frame expects (hand-written code pushing its own
//! return address) leaves the stack unchanged. Depth is capped so that runaway recursion costs
//! bounded memory; the outermost frames are then lost, never the innermost.

const MAX_DEPTH: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The call instruction.
    pub call_pc: u64,
    /// Where the callee returns to.
    pub ret: u64,
}

#[derive(Clone, Debug, Default)]
pub struct CallStack {
    frames: Vec<Frame>,
}

impl CallStack {
    pub fn push(&mut self, call_pc: u64, ret: u64) {
        if self.frames.len() == MAX_DEPTH {
            self.frames.remove(0);
        }
        self.frames.push(Frame { call_pc, ret });
    }

    /// A `ret` landed at `target`.
    pub fn returned_to(&mut self, target: u64) {
        if let Some(i) = self.frames.iter().rposition(|f| f.ret == target) {
            self.frames.truncate(i);
        }
    }

    /// Call sites, innermost first.
    pub fn call_sites(&self) -> impl Iterator<Item = u64> + '_ {
        self.frames.iter().rev().map(|f| f.call_pc)
    }

    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    pub fn clear(&mut self) {
        self.frames.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_to_the_matching_return_and_survives_longjmp() {
        let mut s = CallStack::default();
        s.push(0x10, 0x15);
        s.push(0x20, 0x25);
        s.push(0x30, 0x35);
        s.returned_to(0x35);
        assert_eq!(s.call_sites().collect::<Vec<_>>(), vec![0x20, 0x10]);
        s.push(0x40, 0x45);
        // longjmp out of two frames, then a return into the outermost one.
        s.returned_to(0x15);
        assert_eq!(s.depth(), 0);
        s.returned_to(0x99);
        assert_eq!(s.depth(), 0);
    }
}
