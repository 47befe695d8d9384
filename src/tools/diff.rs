//! Diff display blocks for file edits (`docs/tools.md` §6.1).
//!
//! Invariants:
//! - Both texts are split like Python's `str.splitlines()`; for up to [`EXACT_MAX_LINES`] lines
//!   the opcodes are those of `difflib.SequenceMatcher(None, old, new, autojunk=False)`
//!   ([`difflib`]), so ambiguous diffs come out exactly as in the reference. Larger inputs, or a
//!   matcher that exceeds [`DIFF_DEADLINE`], get a Myers diff (same hunk rules, possibly other
//!   borders). Above [`MAX_DIFF_LINES`] lines on either side no diff is computed, only a summary
//!   block with the line counts (`docs/protocol-1.10.md` §3.3). Large texts are first cut to what lies
//!   between their common head and tail (with context); hunks still carry their real
//!   `old_start` / `new_start`.
//! - Hunks carry 3 lines of context and are split when more than 6 unchanged lines separate two
//!   changes (`get_grouped_opcodes(3)`); identical texts produce no blocks.
//! - The blocks of one diff carry at most [`MAX_DISPLAY_CHARS`] characters of paths and texts, so
//!   no approval request or tool result frame grows with the file. A cut block ends both its
//!   sides with the line [`TRUNCATION_MARKER`] (shown as unchanged context by a diff viewer) and
//!   no block follows it. The reference has no such limit (`docs/tools.md` §19.5).
//! - [`diff_blocks_until`] gives up (answering `None`) soon after its stop flag is raised.

mod difflib;

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use similar::DiffTag;
use similar::algorithms::DiffHook;

use self::difflib::{SequenceMatcher, Stop};
use super::output::split_lines;
use crate::protocol::DisplayBlock;
use crate::protocol::display::DiffBlock;

const CONTEXT: usize = 3;
/// Time each algorithm may take before the next, coarser one is used.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);
/// Lines (old + new) up to which the difflib-exact matcher runs; it is quadratic at worst.
pub const EXACT_MAX_LINES: usize = 100_000;
/// Above this many lines on either side only a summary is shown (`docs/protocol-1.10.md` §3.3).
const MAX_DIFF_LINES: usize = 10_000;
/// Size (old + new) above which the common head and tail are dropped before splitting lines.
const TRIM_ABOVE_BYTES: usize = 1 << 20;
/// Characters of paths and texts that the diff blocks of one edit may carry in all.
pub const MAX_DISPLAY_CHARS: usize = 50_000;
/// The last line of both sides of a diff block that was cut to fit [`MAX_DISPLAY_CHARS`].
pub const TRUNCATION_MARKER: &str = "[...diff truncated: too large to display]";
/// Room below which a cut block is not worth starting; the previous block gets the marker
/// (the room left always holds the two markers).
const MIN_BLOCK_ROOM: usize = 200;

pub(crate) type Opcode = (DiffTag, Range<usize>, Range<usize>);

/// Builds the diff blocks between `old_text` and `new_text` for the file at `path`.
pub fn diff_blocks(path: &str, old_text: &str, new_text: &str) -> Vec<DisplayBlock> {
    let never = AtomicBool::new(false);
    diff_blocks_until(path, old_text, new_text, &never).unwrap_or_default()
}

/// [`diff_blocks`] that stops, answering `None`, once `cancel` is raised.
pub fn diff_blocks_until(path: &str, old_text: &str, new_text: &str, cancel: &AtomicBool) -> Option<Vec<DisplayBlock>> {
    if old_text == new_text {
        return Some(Vec::new());
    }
    let (old_lines, new_lines) = (count_lines(old_text), count_lines(new_text));
    if old_lines > MAX_DIFF_LINES || new_lines > MAX_DIFF_LINES {
        return Some(vec![DisplayBlock::diff_summary(path, old_lines, new_lines)]);
    }
    let (full_old, (old_text, new_text)) = if old_text.len() + new_text.len() > TRIM_ABOVE_BYTES {
        (old_text, trim_common(old_text, new_text))
    } else {
        (old_text, (old_text, new_text))
    };
    // The trimmed texts start at the same line of both files (the head is common).
    let skipped = count_lines(&full_old[..full_old.len() - old_text.len() - tail_len(full_old, old_text)]);
    let old: Vec<&str> = split_lines(old_text);
    let new: Vec<&str> = split_lines(new_text);
    let ops = opcodes(&old, &new, cancel)?;
    let groups = grouped_opcodes(ops, old.len(), new.len(), CONTEXT);
    Some(render(path, &old, &new, &groups, skipped))
}

fn opcodes(old: &[&str], new: &[&str], cancel: &AtomicBool) -> Option<Vec<Opcode>> {
    if old.len() + new.len() <= EXACT_MAX_LINES {
        let stop = Stop { deadline: Instant::now() + DIFF_DEADLINE, cancel };
        if let Some(ops) = SequenceMatcher::new(old, new, stop).opcodes() {
            return Some(ops);
        }
    }
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    let mut hook = Collect { ops: Vec::new(), cancel };
    let deadline = Some(Instant::now() + DIFF_DEADLINE);
    similar::algorithms::myers::diff_deadline(&mut hook, old, 0..old.len(), new, 0..new.len(), deadline).ok()?;
    Some(merge_adjacent(hook.ops))
}

/// Drops the common head and tail of two texts but for [`CONTEXT`] lines of each, cutting right
/// after `\n` bytes (always a line boundary for `splitlines`, and the same in both texts since
/// the bytes around the cut are common). The hunks come out as for the whole texts.
fn trim_common<'a>(old: &'a str, new: &'a str) -> (&'a str, &'a str) {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let after_newline = |bytes: &[u8], end: usize| bytes[..end].iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let mut start = after_newline(a, prefix);
    for _ in 0..CONTEXT {
        if start == 0 {
            break;
        }
        start = after_newline(a, start - 1);
    }
    let suffix = a[start..].iter().rev().zip(b[start..].iter().rev()).take_while(|(x, y)| x == y).count();
    let next_line = |from: usize| a[from..].iter().position(|&c| c == b'\n').map_or(a.len(), |i| from + i + 1);
    let mut cut = next_line(a.len() - suffix);
    for _ in 0..CONTEXT {
        if cut >= a.len() {
            break;
        }
        cut = next_line(cut);
    }
    let dropped = a.len() - cut;
    (&old[start..a.len() - dropped], &new[start..b.len() - dropped])
}

/// Line boundaries in `text` as `splitlines` sees them (`\r\n` counted twice: an upper bound).
/// Lines as `splitlines` counts them, without building them (`\r\n` is one break).
fn count_lines(text: &str) -> usize {
    let mut lines = 0;
    let mut open = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let brk =
            matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if brk {
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            lines += 1;
            open = false;
        } else {
            open = true;
        }
    }
    lines + usize::from(open)
}

/// Bytes of `full` after the slice `part` of it (0 when `part` is `full`).
fn tail_len(full: &str, part: &str) -> usize {
    let start = part.as_ptr() as usize - full.as_ptr() as usize;
    full.len() - start - part.len()
}

fn hunk(path: &str, old_text: String, new_text: String, first: &Opcode, skipped: usize) -> DisplayBlock {
    let (old_start, new_start) = ((skipped + first.1.start + 1) as u64, (skipped + first.2.start + 1) as u64);
    DisplayBlock::diff_hunk(path, old_text, new_text, old_start, new_start)
}

/// Collects Myers' output as opcodes; fails (ending the diff) once `cancel` is raised.
struct Collect<'a> {
    ops: Vec<Opcode>,
    cancel: &'a AtomicBool,
}

impl Collect<'_> {
    fn push(&mut self, op: Opcode) -> Result<(), ()> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(());
        }
        self.ops.push(op);
        Ok(())
    }
}

impl DiffHook for Collect<'_> {
    type Error = ();

    fn equal(&mut self, old_index: usize, new_index: usize, len: usize) -> Result<(), ()> {
        self.push((DiffTag::Equal, old_index..old_index + len, new_index..new_index + len))
    }

    fn delete(&mut self, old_index: usize, old_len: usize, new_index: usize) -> Result<(), ()> {
        self.push((DiffTag::Delete, old_index..old_index + old_len, new_index..new_index))
    }

    fn insert(&mut self, old_index: usize, new_index: usize, new_len: usize) -> Result<(), ()> {
        self.push((DiffTag::Insert, old_index..old_index, new_index..new_index + new_len))
    }
}

/// Turns hunks into diff blocks within the [`MAX_DISPLAY_CHARS`] budget.
fn render(path: &str, old: &[&str], new: &[&str], groups: &[Vec<Opcode>], skipped: usize) -> Vec<DisplayBlock> {
    let path_chars = path.chars().count();
    let mut left = MAX_DISPLAY_CHARS;
    let mut blocks: Vec<DisplayBlock> = Vec::new();
    for group in groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let old_lines = &old[first.1.start..last.1.end];
        let new_lines = &new[first.2.start..last.2.end];
        let room = left.saturating_sub(path_chars);
        let (need_old, need_new) = (joined_chars(old_lines, room + 1), joined_chars(new_lines, room + 1));
        if need_old + need_new <= room {
            left = room - need_old - need_new;
            let (old_text, new_text) = (old_lines.join("\n"), new_lines.join("\n"));
            blocks.push(hunk(path, old_text, new_text, first, skipped));
            continue;
        }
        if room < MIN_BLOCK_ROOM
            && let Some(DisplayBlock::Diff(DiffBlock { old_text, new_text, .. })) = blocks.last_mut()
        {
            mark(old_text);
            mark(new_text);
            break;
        }
        // Share the room, less the two markers, giving a side that needs less than half all it
        // needs.
        let room = room.saturating_sub(2 * (TRUNCATION_MARKER.len() + 1));
        let (old_room, new_room) = if need_old <= room / 2 {
            (need_old, room - need_old)
        } else if need_new <= room / 2 {
            (room - need_new, need_new)
        } else {
            (room / 2, room - room / 2)
        };
        let (mut old_text, mut new_text) = (take_chars(old_lines, old_room), take_chars(new_lines, new_room));
        mark(&mut old_text);
        mark(&mut new_text);
        blocks.push(hunk(path, old_text, new_text, first, skipped));
        break;
    }
    blocks
}

/// Characters of `lines` joined by `\n`, counted up to a little past `cap`.
fn joined_chars(lines: &[&str], cap: usize) -> usize {
    let mut n = lines.len().saturating_sub(1);
    for line in lines {
        if n > cap {
            break;
        }
        n += line.chars().count();
    }
    n
}

/// The first `room` characters of `lines` joined by `\n`: whole lines while they fit, then a
/// piece of the next one.
fn take_chars(lines: &[&str], room: usize) -> String {
    let mut out = String::new();
    let mut left = room;
    for (i, line) in lines.iter().enumerate() {
        let sep = usize::from(i > 0);
        if left < sep {
            break;
        }
        left -= sep;
        if sep == 1 {
            out.push('\n');
        }
        let n = line.chars().count();
        if n <= left {
            out.push_str(line);
            left -= n;
        } else {
            let cut = line.char_indices().nth(left).map_or(line.len(), |(k, _)| k);
            out.push_str(&line[..cut]);
            break;
        }
    }
    out
}

fn mark(text: &mut String) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(TRUNCATION_MARKER);
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
                DisplayBlock::Diff(DiffBlock { old_text, new_text, .. }) => (old_text.clone(), new_text.clone()),
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
    fn large_diffs_are_cut_with_a_marker() {
        let new: String = (0..9_000).map(|i| format!("line {i} {}\n", "y".repeat(20))).collect();
        let blocks = texts(&diff_blocks("/p", "", &new));
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].0, TRUNCATION_MARKER);
        assert!(blocks[0].1.starts_with("line 0 "));
        assert!(blocks[0].1.ends_with(&format!("\n{TRUNCATION_MARKER}")));
        assert!(blocks[0].1.chars().count() <= MAX_DISPLAY_CHARS);
        // Many distant changes: blocks stop once the budget is spent, the last one marked.
        let old: Vec<String> = (0..9_000).map(|i| format!("{i} {}", "x".repeat(40))).collect();
        let changed: Vec<String> =
            old.iter().enumerate().map(|(i, l)| if i % 10 == 0 { format!("{l}!") } else { l.clone() }).collect();
        let blocks = texts(&diff_blocks("/p", &old.join("\n"), &changed.join("\n")));
        let total: usize = blocks.iter().map(|(o, n)| o.chars().count() + n.chars().count() + 2).sum();
        assert!(total <= MAX_DISPLAY_CHARS, "{total}");
        assert!(blocks.last().unwrap().1.ends_with(TRUNCATION_MARKER));
        assert!(blocks.len() > 10);
    }

    #[test]
    fn one_long_line_is_cut_inside() {
        let blocks = texts(&diff_blocks("/p", "a", &"é".repeat(200_000)));
        assert!(blocks[0].1.chars().count() < MAX_DISPLAY_CHARS);
        assert!(blocks[0].1.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn a_raised_flag_stops_the_diff() {
        let old: String = (0..9_000).map(|i| format!("{}\n", i % 7)).collect();
        let new: String = (0..9_000).map(|i| format!("{}\n", i % 5)).collect();
        let stop = AtomicBool::new(true);
        assert!(diff_blocks_until("/p", &old, &new, &stop).is_none());
    }

    #[test]
    fn more_than_ten_thousand_lines_get_a_summary() {
        // `docs/protocol-1.10.md` §3.3: line counts instead of a diff, whatever the size.
        let old = "\n".repeat(10 << 20);
        let new = "x\n".repeat(5 << 20);
        let blocks = diff_blocks("/p", &old, &new);
        assert_eq!(blocks, vec![DisplayBlock::diff_summary("/p", 10 << 20, 5 << 20)]);
        let blocks = diff_blocks("/p", "", &"\r".repeat(3_000_000));
        assert_eq!(blocks, vec![DisplayBlock::diff_summary("/p", 0, 3_000_000)]);
        assert_eq!(count_lines("a\r\nb\rc"), 3);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines(""), 0);
    }

    #[test]
    fn trimming_the_common_head_and_tail_keeps_the_hunks_and_their_line_numbers() {
        // Long lines: over the trim threshold in bytes, under the summary limit in lines.
        let lines: Vec<String> = (0..9_000).map(|i| format!("{} {i} {}", i % 9, "z".repeat(120))).collect();
        let old = lines.join("\n") + "\n";
        let mut changed = lines.clone();
        changed[5] = "five".into();
        changed[4_000] = "middle".into();
        changed.insert(8_990, "near the end".into());
        let new = changed.join("\n");
        assert!(old.len() > TRIM_ABOVE_BYTES);
        let (o, n) = (split_lines(&old), split_lines(&new));
        let never = AtomicBool::new(false);
        let ops = opcodes(&o, &n, &never).unwrap();
        let whole = render("/p", &o, &n, &grouped_opcodes(ops, o.len(), n.len(), CONTEXT), 0);
        assert_eq!(diff_blocks("/p", &old, &new), whole);
        assert_eq!(whole.len(), 3);
        let (to, tn) = trim_common(&old, &new);
        assert!(to.starts_with("2 2 ") && to.len() < old.len());
        assert!(tn.len() < new.len());
    }
}
