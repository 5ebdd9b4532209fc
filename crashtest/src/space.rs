//! A crash point's image space: which images to try (all of them when there are few, targeted
//! ones when there are many), the stale lines of an image, and ddmin over them (Zeller and
//! Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", IEEE TSE 2002).

use std::collections::BTreeSet;

use emu::pm::CrashSpace;

/// One image of one crash point: a value per dimension of its space.
#[derive(Clone, Debug)]
pub struct Image {
    /// The crash point's index.
    pub point: usize,
    /// A value per dimension of the point's space.
    pub choice: Vec<u32>,
}

/// The choice where everything is persisted (every dimension at its newest value).
pub fn persisted(space: &CrashSpace) -> Vec<u32> {
    space.dims().iter().map(|d| d.size - 1).collect()
}

/// The images to try at one point: all of them if there are at most `max`, else targeted
/// ones. Returns the images and whether the space was covered exhaustively.
pub fn images_of(space: &CrashSpace, max: usize) -> (Vec<Vec<u32>>, bool) {
    if space.is_empty() {
        return (Vec::new(), true);
    }
    if let Some(n) = space.count() {
        if n <= max as u128 {
            return (space.enumerate().map(|(c, _)| c).collect(), true);
        }
    }
    let full = persisted(space);
    let mut out: Vec<Vec<u32>> = Vec::new();
    let mut seen: BTreeSet<Vec<u32>> = BTreeSet::new();
    let mut push = |c: Vec<u32>, out: &mut Vec<Vec<u32>>| {
        if out.len() < max && seen.insert(c.clone()) {
            out.push(c);
        }
    };
    // Single dimensions at each older value: a line whose newest stores are lost while every
    // other line persisted (a store persisted without the store it depends on).
    for (i, d) in space.dims().iter().enumerate() {
        for v in 0..d.size - 1 {
            let mut c = full.clone();
            c[i] = v;
            push(c, &mut out);
        }
    }
    // Pairs of dimensions at their oldest values.
    'pairs: for i in 0..space.dims().len() {
        for j in i + 1..space.dims().len() {
            if out.len() >= max {
                break 'pairs;
            }
            let mut c = full.clone();
            c[i] = 0;
            c[j] = 0;
            push(c, &mut out);
        }
    }
    push(space.oldest_choice(), &mut out);
    (out, false)
}

/// Lines of an image that are not at their newest version, as dimension indices.
pub fn stale_dims(space: &CrashSpace, choice: &[u32]) -> Vec<usize> {
    space.dims().iter().enumerate().filter(|(i, d)| choice[*i] != d.size - 1).map(|(i, _)| i).collect()
}

/// The image with only `keep` of its stale dimensions left stale.
pub fn with_only(space: &CrashSpace, choice: &[u32], keep: &[usize]) -> Vec<u32> {
    let mut c = persisted(space);
    for &i in keep {
        c[i] = choice[i];
    }
    c
}

/// ddmin (Zeller & Hildebrandt): a 1-minimal subset of `items` on which `fails` holds, given
/// that it holds on all of them; `budget` bounds the number of tests.
pub fn ddmin(items: Vec<usize>, budget: usize, mut fails: impl FnMut(&[usize]) -> bool) -> Vec<usize> {
    let mut cur = items;
    let mut n = 2usize;
    let mut tests = 0;
    while cur.len() >= 2 && tests < budget {
        let chunk = cur.len().div_ceil(n);
        let parts: Vec<Vec<usize>> = cur.chunks(chunk).map(|c| c.to_vec()).collect();
        let mut reduced = false;
        for p in &parts {
            tests += 1;
            if fails(p) {
                cur = p.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced {
            for i in 0..parts.len() {
                let complement: Vec<usize> =
                    parts.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, p)| p.clone()).collect();
                tests += 1;
                if fails(&complement) {
                    cur = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= cur.len() {
                break;
            }
            n = (2 * n).min(cur.len());
        }
    }
    cur
}

/// log2(2^a + 2^b), for adding image counts too large for integers.
pub fn log2_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (1.0 + (lo - hi).exp2()).log2()
}
