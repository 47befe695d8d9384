//! Diff display blocks for file edits (`tools.md` §6.1).
//!
//! Invariants: both texts are split like Python's `str.splitlines()`; the opcodes are those of
//! `difflib.SequenceMatcher(None, old, new, autojunk=False)` (a transcription of its
//! longest-matching-block recursion, so ambiguous diffs come out exactly as in the reference);
//! hunks carry 3 lines of context and are split when more than 6 unchanged lines separate two
//! changes (`get_grouped_opcodes(3)`); identical texts produce no blocks. Should the matcher
//! exceed [`DIFF_DEADLINE`] on a pathological input, a Myers diff (same hunk rules, possibly
//! different borders) is used instead so the tool call never stalls.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffTag};

use super::output::split_lines;
use crate::protocol::DisplayBlock;

const CONTEXT: usize = 3;
/// Above this many lines on either side no diff is computed, only a summary (`wire-1.10.md` §3.3).
const MAX_DIFF_LINES: usize = 10_000;
/// Time the difflib-exact matcher may take before falling back to Myers.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

type Opcode = (DiffTag, Range<usize>, Range<usize>);

/// Builds the diff blocks between `old_text` and `new_text` for the file at `path`.
pub fn diff_blocks(path: &str, old_text: &str, new_text: &str) -> Vec<DisplayBlock> {
    let old: Vec<&str> = split_lines(old_text);
    let new: Vec<&str> = split_lines(new_text);
    if old.len() > MAX_DIFF_LINES || new.len() > MAX_DIFF_LINES {
        return if old_text == new_text {
            Vec::new()
        } else {
            vec![DisplayBlock::diff_summary(path, old.len(), new.len())]
        };
    }
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops = match SequenceMatcher::new(&old, &new, deadline).opcodes() {
        Some(ops) => ops,
        None => {
            let fallback = Instant::now() + DIFF_DEADLINE;
            let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &old, &new, Some(fallback))
                .iter()
                .map(|op| op.as_tag_tuple())
                .collect();
            merge_adjacent(ops)
        }
    };
    grouped_opcodes(ops, old.len(), new.len(), CONTEXT)
        .into_iter()
        .map(|group| {
            let (first, last) = (&group[0], &group[group.len() - 1]);
            let (i1, i2) = (first.1.start, last.1.end);
            let (j1, j2) = (first.2.start, last.2.end);
            DisplayBlock::diff_hunk(path, old[i1..i2].join("\n"), new[j1..j2].join("\n"), i1 as u64 + 1, j1 as u64 + 1)
        })
        .collect()
}

/// `difflib.SequenceMatcher` without junk (`isjunk=None`, `autojunk=False`).
struct SequenceMatcher<'a> {
    a: &'a [&'a str],
    b: &'a [&'a str],
    /// Positions of each line of `b`, ascending.
    b2j: HashMap<&'a str, Vec<usize>>,
    /// `j2len` rows of `find_longest_match`, indexed by `j + 1`, kept all-zero between calls.
    row: Vec<usize>,
    next_row: Vec<usize>,
    deadline: Instant,
}

impl<'a> SequenceMatcher<'a> {
    fn new(a: &'a [&'a str], b: &'a [&'a str], deadline: Instant) -> Self {
        let mut b2j: HashMap<&str, Vec<usize>> = HashMap::new();
        for (j, line) in b.iter().enumerate() {
            b2j.entry(line).or_default().push(j);
        }
        let n = b.len() + 1;
        Self { a, b, b2j, row: vec![0; n], next_row: vec![0; n], deadline }
    }

    /// `find_longest_match(alo, ahi, blo, bhi)`: the longest common run, earliest in `a`, then
    /// earliest in `b`. `None` once the deadline has passed.
    fn find_longest_match(&mut self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Option<(usize, usize, usize)> {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        let mut touched: Vec<usize> = Vec::new();
        let mut next_touched: Vec<usize> = Vec::new();
        for i in alo..ahi {
            if (i - alo) % 64 == 63 && Instant::now() > self.deadline {
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
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
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
    fn opcodes(&mut self) -> Option<Vec<Opcode>> {
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

/// Joins consecutive non-equal ops into one change, as difflib reports a single `replace`
/// where `similar` may emit a delete followed by an insert.
fn merge_adjacent(ops: Vec<Opcode>) -> Vec<Opcode> {
    let mut out: Vec<Opcode> = Vec::with_capacity(ops.len());
    for (tag, a, b) in ops {
        if a.is_empty() && b.is_empty() {
            continue;
        }
        let is_equal = tag == DiffTag::Equal;
        match out.last_mut() {
            Some(last) if (last.0 == DiffTag::Equal) == is_equal => {
                last.1.end = a.end;
                last.2.end = b.end;
                if !is_equal {
                    last.0 = DiffTag::Replace;
                }
            }
            _ => out.push((tag, a, b)),
        }
    }
    out
}

/// A transcription of `difflib.SequenceMatcher.get_grouped_opcodes(n)`.
fn grouped_opcodes(mut codes: Vec<Opcode>, old_len: usize, new_len: usize, n: usize) -> Vec<Vec<Opcode>> {
    if codes.is_empty() {
        codes.push((DiffTag::Equal, 0..old_len.max(1), 0..new_len.max(1)));
    }
    if let Some(first) = codes.first_mut()
        && first.0 == DiffTag::Equal
    {
        first.1.start = first.1.start.max(first.1.end.saturating_sub(n));
        first.2.start = first.2.start.max(first.2.end.saturating_sub(n));
    }
    if let Some(last) = codes.last_mut()
        && last.0 == DiffTag::Equal
    {
        last.1.end = last.1.end.min(last.1.start + n);
        last.2.end = last.2.end.min(last.2.start + n);
    }
    let nn = n + n;
    let mut groups = Vec::new();
    let mut group: Vec<Opcode> = Vec::new();
    for (tag, mut a, mut b) in codes {
        if tag == DiffTag::Equal && a.len() > nn {
            group.push((tag, a.start..a.end.min(a.start + n), b.start..b.end.min(b.start + n)));
            groups.push(std::mem::take(&mut group));
            a.start = a.start.max(a.end.saturating_sub(n));
            b.start = b.start.max(b.end.saturating_sub(n));
        }
        group.push((tag, a, b));
    }
    if !(group.is_empty() || (group.len() == 1 && group[0].0 == DiffTag::Equal)) {
        groups.push(group);
    }
    // The empty first group difflib can yield when the text starts with a long equal run holds
    // only context; drop groups without a change.
    groups.retain(|g| g.iter().any(|op| op.0 != DiffTag::Equal));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(blocks: &[DisplayBlock]) -> Vec<(String, String)> {
        blocks
            .iter()
            .map(|b| match b {
                DisplayBlock::Diff(d) => (d.old_text.clone(), d.new_text.clone()),
                _ => panic!("not a diff"),
            })
            .collect()
    }

    #[test]
    fn new_file_is_one_block() {
        assert_eq!(texts(&diff_blocks("/p", "", "a\nb\n")), vec![(String::new(), "a\nb".to_string())]);
    }

    #[test]
    fn identical_texts_have_no_blocks() {
        assert!(diff_blocks("/p", "a\nb\n", "a\nb\n").is_empty());
        assert!(diff_blocks("/p", "", "").is_empty());
    }

    #[test]
    fn distant_changes_split_into_hunks_with_context() {
        let old: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[1] = "two".into();
        new[17] = "eighteen".into();
        let blocks = texts(&diff_blocks("/p", &old.join("\n"), &new.join("\n")));
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].0, "1\n2\n3\n4\n5");
        assert_eq!(blocks[0].1, "1\ntwo\n3\n4\n5");
        assert_eq!(blocks[1].0, "15\n16\n17\n18\n19\n20");
        // Close changes stay in one hunk.
        let mut near = old.clone();
        near[5] = "x".into();
        near[11] = "y".into();
        assert_eq!(diff_blocks("/p", &old.join("\n"), &near.join("\n")).len(), 1);
    }

    #[test]
    fn hunks_carry_their_first_lines_and_big_files_a_summary() {
        let old: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[17] = "eighteen".into();
        let blocks = diff_blocks("/p", &old.join("\n"), &new.join("\n"));
        let DisplayBlock::Diff(d) = &blocks[0] else { panic!("not a diff") };
        assert_eq!((d.old_start, d.new_start, d.is_summary), (15, 15, false));
        let big = "x\n".repeat(10_001);
        let blocks = diff_blocks("/p", &big, &format!("{big}y\n"));
        assert_eq!(
            blocks,
            vec![DisplayBlock::diff_summary("/p", 10_001, 10_002)],
            "more than 10000 lines: counts only"
        );
    }
}
