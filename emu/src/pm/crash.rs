//! The crash space: every PM image a power failure could leave right now, as a product of
//! independent per-line choices.
//!
//! Lines persist independently (Px86), so the space is a list of *dimensions*, each a small
//! integer choice: per line, which version survives (under `Atomicity::Word8`, one choice per
//! 8-byte word instead), and for each pending NT chunk, whether it landed (0 = no, 1 = yes). A
//! choice vector picks one value per dimension; [`CrashSpace::image`] materialises it. Lines not
//! in the space are durable: guest memory already holds their image.
//!
//! Each line's image, for a chosen version `v`: `base` + (in program order) every cached store up
//! to `v` and every completed NT chunk, then the chosen pending chunks overlaid in program order
//! (a pending chunk may land after any younger writeback, so it overlays all its bytes). A
//! rep-string version of a line under `Atomicity::Line` is expanded into one version per non-empty
//! subset of the 8-byte words it wrote in the line (the full set last). Under `Word8` each word's
//! options are the floor and every version that wrote that word.
//!
//! What this cannot do: it enumerates choices, not distinct images; two choices can give equal
//! contents (a store of the value already there). [`CrashSpace::enumerate`] is eager and meant for
//! small spaces (tests, tiny workloads); the crash engine should branch on the lines recovery
//! actually reads (Jaaru-style) or sample.

use super::line::{word_mask, EntryKind, Line, LINE, WORD};
use super::{Atomicity, PmError, StoreId, Tid};

/// One candidate content of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The line's bytes (with completed NT chunks, without pending ones).
    pub content: [u8; 64],
    /// The newest cached store on this line the version includes: it includes every cached store
    /// to the line with an id up to this one (and every completed NT chunk). `None`: the floor.
    pub upto: Option<StoreId>,
    /// For a partial rep-string version: the words (bit w = word w) of the rep store `upto`
    /// included; the instruction's other words in this line are not.
    pub rep_words: Option<u8>,
}

/// An NT chunk still waiting for its thread's fence: in a crash image, present or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingChunk {
    /// The NT store the chunk belongs to.
    pub store: StoreId,
    /// The thread whose next fence completes it.
    pub tid: Tid,
    /// Word of the line (0..8).
    pub word: u8,
    /// Bytes of the word it writes.
    pub mask: u8,
    /// Values, indexed by byte within the word.
    pub data: [u8; 8],
}

impl PendingChunk {
    /// Overlays the chunk on a line's bytes.
    pub fn apply(&self, content: &mut [u8; 64]) {
        let base = usize::from(self.word) * WORD;
        for b in 0..WORD {
            if self.mask >> b & 1 == 1 {
                content[base + b] = self.data[b];
            }
        }
    }
}

/// The choices of one line that is not fully durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineSpace {
    /// The line (device address / 64).
    pub line: u64,
    /// Candidate versions, oldest first: index 0 is the floor, the last is the current version.
    pub versions: Vec<Version>,
    /// `Word8` only: for each word, the indices into `versions` it may take (first 0); empty
    /// under `Atomicity::Line`.
    pub word_options: [Vec<u32>; 8],
    /// Pending NT chunks, in program order.
    pub chunks: Vec<PendingChunk>,
    /// The version limit merged versions of this line: some intermediate states are missing.
    pub merged: bool,
}

/// What a dimension chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimKind {
    /// Index into `LineSpace::versions` (`Atomicity::Line`).
    Version,
    /// Index into `LineSpace::word_options[w]` (`Atomicity::Word8`).
    Word(u8),
    /// Whether pending chunk `LineSpace::chunks[i]` landed (0 no, 1 yes).
    Chunk(u32),
}

/// One independent choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim {
    /// Index into [`CrashSpace::lines`].
    pub line_index: usize,
    /// The line (device address / 64), as in `lines[line_index].line`.
    pub line: u64,
    /// What the dimension chooses.
    pub kind: DimKind,
    /// Number of values (at least 2).
    pub size: u32,
}

/// The crash images allowed at one point of the execution (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashSpace {
    atomicity: Atomicity,
    lines: Vec<LineSpace>,
    dims: Vec<Dim>,
}

fn line_space(atomicity: Atomicity, line: u64, l: &Line) -> Option<LineSpace> {
    let log = &l.log;
    // Completed NT chunks are applied whatever version is chosen: those after the cut are
    // applied on top, in program order (they are durable and nothing after the cut is).
    let nt_idx: Vec<usize> = (0..log.len()).filter(|&i| log[i].kind == EntryKind::Nt).collect();
    let with_nt_after = |mut c: [u8; LINE], from: usize| {
        for &j in &nt_idx[nt_idx.partition_point(|&j| j < from)..] {
            log[j].apply_to(&mut c, u64::MAX);
        }
        c
    };
    let word8 = atomicity == Atomicity::Word8;
    let mut versions = vec![Version { content: with_nt_after(l.base, 0), upto: None, rep_words: None }];
    let mut word_options: [Vec<u32>; 8] = Default::default();
    if word8 {
        for w in &mut word_options {
            w.push(0);
        }
    }
    let mut s = l.base;
    for (i, e) in log.iter().enumerate() {
        if e.kind == EntryKind::Nt {
            e.apply_to(&mut s, u64::MAX);
            continue;
        }
        let words = (0..8).fold(0u8, |m, w| if e.mask & word_mask(w) != 0 { m | 1 << w } else { m });
        if e.kind == EntryKind::Rep && !word8 {
            // Every proper non-empty subset of the instruction's words in this line.
            for sub in 1..words {
                if sub & !words != 0 {
                    continue;
                }
                let sub_mask = (0..8).fold(0u64, |m, w| if sub >> w & 1 == 1 { m | word_mask(w) } else { m });
                let mut c = s;
                e.apply_to(&mut c, sub_mask);
                versions.push(Version {
                    content: with_nt_after(c, i + 1),
                    upto: Some(StoreId(e.last)),
                    rep_words: Some(sub),
                });
            }
        }
        e.apply_to(&mut s, u64::MAX);
        let index = versions.len() as u32;
        versions.push(Version { content: with_nt_after(s, i + 1), upto: Some(StoreId(e.last)), rep_words: None });
        if word8 {
            for (w, opts) in word_options.iter_mut().enumerate() {
                if words >> w & 1 == 1 {
                    opts.push(index);
                }
            }
        }
    }
    let chunks: Vec<PendingChunk> = l
        .pending
        .iter()
        .map(|c| PendingChunk { store: StoreId(c.id), tid: c.tid, word: c.word, mask: c.mask, data: c.data })
        .collect();
    if versions.len() == 1 && chunks.is_empty() {
        return None;
    }
    Some(LineSpace { line, versions, word_options, chunks, merged: l.merged })
}

impl CrashSpace {
    /// Builds the space from the device's lines, which must come sorted by line.
    pub(crate) fn build<'a>(atomicity: Atomicity, lines: impl Iterator<Item = (u64, &'a Line)>) -> CrashSpace {
        let lines: Vec<LineSpace> = lines.filter_map(|(n, l)| line_space(atomicity, n, l)).collect();
        let mut dims = Vec::new();
        for (li, ls) in lines.iter().enumerate() {
            let mut push = |kind, size: usize| {
                if size > 1 {
                    dims.push(Dim { line_index: li, line: ls.line, kind, size: size as u32 });
                }
            };
            match atomicity {
                Atomicity::Line => push(DimKind::Version, ls.versions.len()),
                Atomicity::Word8 => {
                    for (w, opts) in ls.word_options.iter().enumerate() {
                        push(DimKind::Word(w as u8), opts.len());
                    }
                }
            }
            for i in 0..ls.chunks.len() {
                push(DimKind::Chunk(i as u32), 2);
            }
        }
        CrashSpace { atomicity, lines, dims }
    }

    /// The atomicity the space was built with (it decides what the dimensions mean).
    pub fn atomicity(&self) -> Atomicity {
        self.atomicity
    }

    /// The lines that are not fully durable, sorted by line.
    pub fn lines(&self) -> &[LineSpace] {
        &self.lines
    }

    /// The independent choices, grouped by line in line order: per line its version (or word)
    /// dimensions, then its chunks.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// No choice at all: the crash image is the current PM contents.
    pub fn is_empty(&self) -> bool {
        self.dims.is_empty()
    }

    /// Number of choice vectors (an upper bound on distinct images); `None` if it overflows.
    pub fn count(&self) -> Option<u128> {
        self.dims.iter().try_fold(1u128, |n, d| n.checked_mul(u128::from(d.size)))
    }

    /// log2 of the number of choice vectors.
    pub fn count_log2(&self) -> f64 {
        self.dims.iter().map(|d| f64::from(d.size).log2()).sum()
    }

    /// The choice vector of the oldest image: every line at its floor, no pending chunk landed.
    pub fn oldest_choice(&self) -> Vec<u32> {
        vec![0; self.dims.len()]
    }

    /// The image chosen by `choice` (one value per dimension): every line of the space with its
    /// bytes, sorted by line. Lines not listed keep their current contents.
    pub fn image(&self, choice: &[u32]) -> Result<Vec<(u64, [u8; 64])>, PmError> {
        if choice.len() != self.dims.len() {
            return Err(PmError::ChoiceLength { got: choice.len(), expected: self.dims.len() });
        }
        for (i, (&c, d)) in choice.iter().zip(&self.dims).enumerate() {
            if c >= d.size {
                return Err(PmError::ChoiceRange { dim: i, value: c, size: d.size });
            }
        }
        let mut k = 0;
        let mut take = |size: usize| {
            if size > 1 {
                k += 1;
                choice[k - 1] as usize
            } else {
                0
            }
        };
        let mut out = Vec::with_capacity(self.lines.len());
        for ls in &self.lines {
            let mut content = match self.atomicity {
                Atomicity::Line => ls.versions[take(ls.versions.len())].content,
                Atomicity::Word8 => {
                    let mut c = [0u8; 64];
                    for (w, opts) in ls.word_options.iter().enumerate() {
                        let v = &ls.versions[opts[take(opts.len())] as usize].content;
                        c[w * WORD..(w + 1) * WORD].copy_from_slice(&v[w * WORD..(w + 1) * WORD]);
                    }
                    c
                }
            };
            for ch in &ls.chunks {
                if take(2) == 1 {
                    ch.apply(&mut content);
                }
            }
            out.push((ls.line, content));
        }
        Ok(out)
    }

    /// Every choice vector with its image, in lexicographic order of choices. Eager: for small
    /// spaces (test oracles); check `count` first.
    pub fn enumerate(&self) -> Enumerate<'_> {
        Enumerate { space: self, next: Some(vec![0; self.dims.len()]) }
    }
}

/// Iterator of [`CrashSpace::enumerate`].
pub struct Enumerate<'a> {
    space: &'a CrashSpace,
    next: Option<Vec<u32>>,
}

impl Iterator for Enumerate<'_> {
    type Item = (Vec<u32>, Vec<(u64, [u8; 64])>);

    fn next(&mut self) -> Option<Self::Item> {
        let cur = self.next.take()?;
        let image = self.space.image(&cur).expect("enumerate only produces valid choices");
        let mut succ = cur.clone();
        let mut i = succ.len();
        while i > 0 {
            i -= 1;
            succ[i] += 1;
            if succ[i] < self.space.dims[i].size {
                self.next = Some(succ);
                break;
            }
            succ[i] = 0;
        }
        Some((cur, image))
    }
}
