//! Diff display blocks for file edits (`tools.md` §6.1).
//!
//! Invariants: both texts are split like Python's `str.splitlines()`; hunks carry 3 lines of
//! context and are split when more than 6 unchanged lines separate two changes, mirroring
//! `difflib.SequenceMatcher.get_grouped_opcodes(3)`; identical texts produce no blocks. The
//! line matching itself comes from `similar` (Myers), so for ambiguous diffs the hunk borders
//! may differ from difflib's heuristic.

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffTag};

use super::output::split_lines;
use crate::protocol::DisplayBlock;

const CONTEXT: usize = 3;
/// Big edits fall back to a coarser (still correct) diff instead of stalling the tool call.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

type Opcode = (DiffTag, Range<usize>, Range<usize>);

/// Builds the diff blocks between `old_text` and `new_text` for the file at `path`.
pub fn diff_blocks(path: &str, old_text: &str, new_text: &str) -> Vec<DisplayBlock> {
    let old: Vec<&str> = split_lines(old_text);
    let new: Vec<&str> = split_lines(new_text);
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops: Vec<Opcode> = similar::capture_diff_slices_deadline(Algorithm::Myers, &old, &new, Some(deadline))
        .iter()
        .map(|op| op.as_tag_tuple())
        .collect();
    grouped_opcodes(merge_adjacent(ops), old.len(), new.len(), CONTEXT)
        .into_iter()
        .map(|group| {
            let (first, last) = (&group[0], &group[group.len() - 1]);
            let (i1, i2) = (first.1.start, last.1.end);
            let (j1, j2) = (first.2.start, last.2.end);
            DisplayBlock::Diff {
                path: path.to_string(),
                old_text: old[i1..i2].join("\n"),
                new_text: new[j1..j2].join("\n"),
            }
        })
        .collect()
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
                DisplayBlock::Diff { old_text, new_text, .. } => (old_text.clone(), new_text.clone()),
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
}
