//! The text side of StrReplaceFile: applying edits in order (`docs/tools.md` §7 step 3) without ever
//! building a text above the size limit, and re-applying them to a file that changed while the
//! approval was pending.
//!
//! Invariants:
//! - The size of each intermediate text is computed from the occurrence count before the
//!   replacement is made, so `replace_all` cannot blow memory up (1 MiB of `a` with each `a`
//!   replaced by 1 KiB would be a 1 GiB string).
//! - A re-application succeeds only if every edit finds its `old` text exactly as many times as
//!   it did in the text the user approved; otherwise the edit would land somewhere else than
//!   shown, so it is refused.

use super::Edit;

/// Edits applied to a text.
#[derive(Debug, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    /// Occurrences of each edit's `old` in the text it was applied to.
    pub counts: Vec<usize>,
}

/// Applies `edits` in order; `Err(size)` when some intermediate text would exceed `limit` bytes.
pub fn apply(text: &str, edits: &[Edit], limit: u64) -> Result<Applied, u64> {
    let mut text = text.to_string();
    let mut counts = Vec::with_capacity(edits.len());
    for edit in edits {
        let count = text.matches(edit.old.as_str()).count();
        let replaced = if edit.replace_all { count } else { count.min(1) };
        let size =
            text.len() as u128 + replaced as u128 * edit.new.len() as u128 - replaced as u128 * edit.old.len() as u128;
        if size > u128::from(limit) {
            return Err(u64::try_from(size).unwrap_or(u64::MAX));
        }
        if replaced > 0 {
            text = if edit.replace_all {
                text.replace(&edit.old, &edit.new)
            } else {
                text.replacen(&edit.old, &edit.new, 1)
            };
        }
        counts.push(count);
    }
    Ok(Applied { text, counts })
}

/// Applies `edits` to `current` (a text that changed since `approved` counts were taken):
/// `Ok(None)` when some edit does not find its `old` text as often as it did then.
pub fn reapply(current: &str, edits: &[Edit], approved: &[usize], limit: u64) -> Result<Option<String>, u64> {
    let applied = apply(current, edits, limit)?;
    Ok((applied.counts == approved).then_some(applied.text))
}

/// Replacements reported to the model, counted against the original text (`docs/tools.md` §7 step 6).
pub fn total_replacements(original: &str, edits: &[Edit]) -> usize {
    edits
        .iter()
        .map(|e| {
            if e.replace_all {
                original.matches(e.old.as_str()).count()
            } else {
                usize::from(original.contains(e.old.as_str()))
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str, replace_all: bool) -> Edit {
        Edit { old: old.into(), new: new.into(), replace_all }
    }

    #[test]
    fn applies_in_order_and_counts() {
        let edits = [edit("a", "x", true), edit("x = 1", "y", false)];
        let a = apply("a = 1\nb = a\n", &edits, 1000).unwrap();
        assert_eq!(a.text, "y\nb = x\n");
        assert_eq!(a.counts, vec![2, 1]);
        assert_eq!(total_replacements("a = 1\nb = a\n", &edits), 2);
    }

    #[test]
    fn growth_past_the_limit_is_refused_before_it_happens() {
        let text = "a".repeat(1 << 20);
        let big = "b".repeat(1 << 10);
        assert_eq!(apply(&text, &[edit("a", &big, true)], 10 << 20), Err(1 << 30));
        assert!(apply(&text, &[edit("a", &big, false)], 10 << 20).is_ok());
    }

    #[test]
    fn reapply_needs_the_same_occurrences() {
        let edits = [edit("b", "B", false)];
        let approved = apply("a\nb\n", &edits, 100).unwrap().counts;
        assert_eq!(reapply("top\na\nb\n", &edits, &approved, 100), Ok(Some("top\na\nB\n".into())));
        assert_eq!(reapply("a\n", &edits, &approved, 100), Ok(None));
        // A second `b` above the first would take the edit elsewhere than shown.
        assert_eq!(reapply("b\na\nb\n", &edits, &approved, 100), Ok(None));
    }
}
