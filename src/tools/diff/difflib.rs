//! A transcription of Python's `difflib.SequenceMatcher(None, a, b, autojunk=False)`: its
//! longest-matching-block recursion, so that ambiguous diffs come out exactly as in the reference.
//!
//! Invariants: no junk heuristics; `row`/`next_row` are all-zero between calls of
//! `find_longest_match`; the work stops (answering `None`) once [`Stop::hit`] says so, checked
//! every 64 lines of `find_longest_match` and every 64 matching blocks, so neither a deadline nor
//! a cancelled call is overrun by more than one such stretch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use similar::DiffTag;

use super::Opcode;

/// When a diff must give up: a deadline, or the caller went away.
#[derive(Clone, Copy)]
pub struct Stop<'a> {
    pub deadline: Instant,
    pub cancel: &'a AtomicBool,
}

impl Stop<'_> {
    pub fn hit(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() > self.deadline
    }
}

/// `difflib.SequenceMatcher` without junk (`isjunk=None`, `autojunk=False`).
pub struct SequenceMatcher<'a> {
    a: &'a [&'a str],
    b: &'a [&'a str],
    /// Positions of each line of `b`, ascending.
    b2j: HashMap<&'a str, Vec<usize>>,
    /// `j2len` rows of `find_longest_match`, indexed by `j + 1`, kept all-zero between calls.
    row: Vec<usize>,
    next_row: Vec<usize>,
    stop: Stop<'a>,
}

impl<'a> SequenceMatcher<'a> {
    pub fn new(a: &'a [&'a str], b: &'a [&'a str], stop: Stop<'a>) -> Self {
        let mut b2j: HashMap<&str, Vec<usize>> = HashMap::new();
        for (j, line) in b.iter().enumerate() {
            b2j.entry(line).or_default().push(j);
        }
        let n = b.len() + 1;
        Self { a, b, b2j, row: vec![0; n], next_row: vec![0; n], stop }
    }

    /// `find_longest_match(alo, ahi, blo, bhi)`: the longest common run, earliest in `a`, then
    /// earliest in `b`. `None` once the work must stop.
    fn find_longest_match(&mut self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Option<(usize, usize, usize)> {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        let mut touched: Vec<usize> = Vec::new();
        let mut next_touched: Vec<usize> = Vec::new();
        for i in alo..ahi {
            if (i - alo) % 64 == 63 && self.stop.hit() {
                self.reset(&touched);
                return None;
            }
            if let Some(js) = self.b2j.get(self.a[i]) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = self.row[j] + 1;
                    self.next_row[j + 1] = k;
                    next_touched.push(j + 1);
                    if k > bestsize {
                        (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                    }
                }
            }
            for &t in &touched {
                self.row[t] = 0;
            }
            std::mem::swap(&mut self.row, &mut self.next_row);
            std::mem::swap(&mut touched, &mut next_touched);
            next_touched.clear();
        }
        self.reset(&touched);
        // Without junk these extensions are no-ops in practice; kept for fidelity.
        while besti > alo && bestj > blo && self.a[besti - 1] == self.b[bestj - 1] {
            (besti, bestj, bestsize) = (besti - 1, bestj - 1, bestsize + 1);
        }
        while besti + bestsize < ahi && bestj + bestsize < bhi && self.a[besti + bestsize] == self.b[bestj + bestsize] {
            bestsize += 1;
        }
        Some((besti, bestj, bestsize))
    }

    fn reset(&mut self, touched: &[usize]) {
        for &t in touched {
            self.row[t] = 0;
        }
    }

    /// `get_matching_blocks()`: non-adjacent matching runs plus the `(len_a, len_b, 0)` sentinel.
    fn matching_blocks(&mut self) -> Option<Vec<(usize, usize, usize)>> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut queue = vec![(0, la, 0, lb)];
        let mut blocks = Vec::new();
        let mut popped = 0usize;
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            popped += 1;
            // Many short ranges never reach the inner loop's check.
            if popped.is_multiple_of(64) && self.stop.hit() {
                return None;
            }
            let (i, j, k) = self.find_longest_match(alo, ahi, blo, bhi)?;
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks.sort_unstable();
        let mut merged = Vec::with_capacity(blocks.len() + 1);
        let (mut i1, mut j1, mut k1) = (0, 0, 0);
        for (i2, j2, k2) in blocks {
            if i1 + k1 == i2 && j1 + k1 == j2 {
                k1 += k2;
            } else {
                if k1 > 0 {
                    merged.push((i1, j1, k1));
                }
                (i1, j1, k1) = (i2, j2, k2);
            }
        }
        if k1 > 0 {
            merged.push((i1, j1, k1));
        }
        merged.push((la, lb, 0));
        Some(merged)
    }

    /// `get_opcodes()`.
    pub fn opcodes(&mut self) -> Option<Vec<Opcode>> {
        let mut ops = Vec::new();
        let (mut i, mut j) = (0, 0);
        for (ai, bj, size) in self.matching_blocks()? {
            let tag = match (i < ai, j < bj) {
                (true, true) => Some(DiffTag::Replace),
                (true, false) => Some(DiffTag::Delete),
                (false, true) => Some(DiffTag::Insert),
                (false, false) => None,
            };
            if let Some(tag) = tag {
                ops.push((tag, i..ai, j..bj));
            }
            (i, j) = (ai + size, bj + size);
            if size > 0 {
                ops.push((DiffTag::Equal, ai..i, bj..j));
            }
        }
        Some(ops)
    }
}
