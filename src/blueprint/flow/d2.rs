//! The D2 subset accepted for flow skills.
//!
//! * Statements are top-level lines; a line ending in `\` continues on the next one and `;`
//!   separates statements on one line. `#` outside quotes starts a comment.
//! * `{ … }` blocks (styles, nested content) are skipped entirely, however they nest or span
//!   lines; the text before the opening `{` still counts as a statement.
//! * A statement with an unquoted `->` is an edge chain `a -> b -> c: label`: the label after the
//!   last unquoted `:` belongs to the last hop only; `id: label` on earlier parts keeps the id.
//! * Any other statement is a node `id` or `id: label` (an empty label is ignored).
//! * Ids match `[A-Za-z0-9_][A-Za-z0-9_./-]*` (optionally quoted). Dotted ids with a property
//!   segment (`a.shape`, `a.style.fill`, …) and top-level keywords (`direction`, `vars`,
//!   `classes`, `style…`, `label`, …) are configuration, not nodes, and are ignored, as are
//!   statements starting with `(` (D2 edge references such as `(a -> b)[0].style…`).
//! * Labels may be quoted with `'…'` / `"…"` (backslash escapes; nothing may follow the closing
//!   quote) or be a block string `|md … |` (possibly spanning lines up to a line holding only the
//!   closing pipes), which is dedented.
//! * A quote only opens a string at the start of a token (after whitespace, `:`, `>`, `{`, `}`,
//!   `;` or at line start), so apostrophes inside plain labels (`Don't`) are literal.
//!
//! Errors (`Line N: …`): unmatched `}`, unclosed `{`, unclosed string or block string, invalid id.

use super::{Flow, FlowBuilder, FlowError, parse_err};

/// D2 reserved keywords: as a later segment of a dotted id (or as a top-level statement) they
/// configure something instead of naming a node.
const PROPERTIES: &[&str] = &[
    "shape",
    "label",
    "near",
    "width",
    "height",
    "icon",
    "tooltip",
    "link",
    "constraint",
    "direction",
    "class",
    "classes",
    "vars",
    "top",
    "left",
    "source-arrowhead",
    "target-arrowhead",
    "grid-rows",
    "grid-columns",
    "grid-gap",
    "vertical-gap",
    "horizontal-gap",
    "filled",
    "opacity",
];

pub(super) fn parse(src: &str) -> Result<Flow, FlowError> {
    let mut b = FlowBuilder::default();
    for stmt in statements(src)? {
        parse_statement(&stmt, &mut b)?;
    }
    b.finish()
}

#[derive(Debug)]
struct Stmt {
    line: usize,
    text: String,
    block_label: Option<String>,
}

fn quote_can_open(prev: Option<char>) -> bool {
    match prev {
        None => true,
        Some(p) => p.is_whitespace() || matches!(p, ':' | '>' | '{' | '}' | ';'),
    }
}

/// Index of the closing quote for the quote at `start`, honoring backslash escapes.
fn closing_quote(chars: &[char], start: usize) -> Option<usize> {
    let q = chars[start];
    let mut j = start + 1;
    while j < chars.len() {
        if chars[j] == '\\' {
            j += 2;
            continue;
        }
        if chars[j] == q {
            return Some(j);
        }
        j += 1;
    }
    None
}

fn is_blank_stmt(s: &Stmt) -> bool {
    s.text.trim().is_empty() && s.block_label.is_none()
}

/// Splits the source into top-level statements, dropping comments and `{…}` blocks.
fn statements(src: &str) -> Result<Vec<Stmt>, FlowError> {
    let raw: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut open_line = 0;
    let mut i = 0;
    while i < raw.len() {
        let line_no = i + 1;
        let mut text = raw[i].to_string();
        i += 1;
        while text.ends_with('\\') && i < raw.len() {
            text.pop();
            text.push_str(raw[i]);
            i += 1;
        }
        let chars: Vec<char> = text.chars().collect();
        let mut cur = Stmt { line: line_no, text: String::new(), block_label: None };
        let mut last_sig: Option<char> = None;
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            let prev = k.checked_sub(1).map(|p| chars[p]);
            if (c == '"' || c == '\'') && quote_can_open(prev) {
                let end = closing_quote(&chars, k).ok_or_else(|| parse_err(line_no, "unclosed string"))?;
                if depth == 0 {
                    cur.text.extend(&chars[k..=end]);
                }
                last_sig = Some(c);
                k = end + 1;
                continue;
            }
            match c {
                '#' => break,
                '{' => {
                    if depth == 0 {
                        open_line = line_no;
                    }
                    depth += 1;
                }
                '}' => {
                    if depth == 0 {
                        return Err(parse_err(line_no, "unmatched '}'"));
                    }
                    depth -= 1;
                }
                ';' if depth == 0 => {
                    let done =
                        std::mem::replace(&mut cur, Stmt { line: line_no, text: String::new(), block_label: None });
                    if !is_blank_stmt(&done) {
                        out.push(done);
                    }
                }
                '|' if last_sig == Some(':') => {
                    let n = chars[k..].iter().take_while(|&&p| p == '|').count();
                    let delim: String = "|".repeat(n);
                    let rest: String = chars[k + n..].iter().collect();
                    // The language tag (`md`, `latex`, …) directly follows the pipes.
                    let tag_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    let body = &rest[tag_len..];
                    let label = if let Some(end) = body.find(&delim) {
                        let label = body[..end].trim().to_string();
                        let consumed = body[..end].chars().count() + n;
                        k += n + rest[..tag_len].chars().count() + consumed;
                        last_sig = Some('|');
                        if depth == 0 {
                            cur.block_label = Some(label);
                        }
                        continue;
                    } else {
                        let mut lines = Vec::new();
                        if !body.trim().is_empty() {
                            lines.push(body.to_string());
                        }
                        loop {
                            let Some(l) = raw.get(i) else {
                                return Err(parse_err(line_no, "unclosed block string"));
                            };
                            i += 1;
                            if l.trim() == delim {
                                break;
                            }
                            lines.push(l.to_string());
                        }
                        dedent(&lines)
                    };
                    if depth == 0 {
                        cur.block_label = Some(label);
                    }
                    break;
                }
                _ => {
                    if depth == 0 {
                        cur.text.push(c);
                    }
                }
            }
            if !c.is_whitespace() {
                last_sig = Some(c);
            }
            k += 1;
        }
        if !is_blank_stmt(&cur) {
            out.push(cur);
        }
    }
    if depth > 0 {
        return Err(parse_err(open_line, "unclosed '{'"));
    }
    Ok(out)
}

/// Removes the common leading whitespace of the non-blank lines, then trims the whole text.
fn dedent(lines: &[String]) -> String {
    let indent =
        lines.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    let body: Vec<&str> = lines.iter().map(|l| if l.len() >= indent { &l[indent..] } else { l.trim_start() }).collect();
    body.join("\n").trim().to_string()
}

/// Byte offsets of `pat` in `text` outside quoted strings.
fn unquoted_positions(text: &str, pat: &str) -> Vec<usize> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let plain: Vec<char> = chars.iter().map(|&(_, c)| c).collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < plain.len() {
        let c = plain[k];
        let prev = k.checked_sub(1).map(|p| plain[p]);
        if (c == '"' || c == '\'')
            && quote_can_open(prev)
            && let Some(end) = closing_quote(&plain, k)
        {
            k = end + 1;
            continue;
        }
        if text[chars[k].0..].starts_with(pat) {
            out.push(chars[k].0);
            k += pat.chars().count();
            continue;
        }
        k += 1;
    }
    out
}

fn split_colon(text: &str, last: bool) -> (&str, Option<&str>) {
    let positions = unquoted_positions(text, ":");
    let pos = if last { positions.last() } else { positions.first() };
    match pos {
        Some(&p) => (&text[..p], Some(&text[p + 1..])),
        None => (text, None),
    }
}

/// Parses a quoted string occupying all of `text` (already trimmed, starting with a quote).
fn unquote(text: &str, line: usize) -> Result<String, FlowError> {
    let chars: Vec<char> = text.chars().collect();
    let end = closing_quote(&chars, 0).ok_or_else(|| parse_err(line, "unclosed string"))?;
    if chars[end + 1..].iter().any(|c| !c.is_whitespace()) {
        return Err(parse_err(line, format!("unexpected text after closing quote in {text}")));
    }
    let mut out = String::new();
    let mut k = 1;
    while k < end {
        if chars[k] == '\\' && k + 1 < end {
            k += 1;
        }
        out.push(chars[k]);
        k += 1;
    }
    Ok(out)
}

fn parse_label(text: Option<&str>, line: usize) -> Result<Option<String>, FlowError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if text.starts_with('"') || text.starts_with('\'') {
        return Ok(Some(unquote(text, line)?).filter(|l| !l.trim().is_empty()));
    }
    Ok(Some(text.to_string()))
}

fn parse_id(text: &str, line: usize) -> Result<String, FlowError> {
    let text = text.trim();
    let id = if text.starts_with('"') || text.starts_with('\'') { unquote(text, line)? } else { text.to_string() };
    let mut chars = id.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'));
    if !valid {
        return Err(parse_err(line, format!("invalid node id \"{id}\"")));
    }
    Ok(id)
}

fn is_property(segment: &str) -> bool {
    PROPERTIES.contains(&segment) || segment.starts_with("style")
}

/// `a.shape`, `a.style.fill`: a property of `a`, not a node.
fn is_property_path(id: &str) -> bool {
    id.split('.').skip(1).any(is_property)
}

/// Top-level keyword statements (`direction: right`, `vars: {…}`, `style.fill: …`).
fn is_keyword_statement(id: &str) -> bool {
    id.split('.').any(is_property)
}

fn parse_statement(st: &Stmt, b: &mut FlowBuilder) -> Result<(), FlowError> {
    let text = st.text.trim();
    if text.starts_with('(') {
        return Ok(());
    }
    let arrows = unquoted_positions(text, "->");
    if arrows.is_empty() {
        let (id_part, label_part) = split_colon(text, false);
        let id = parse_id(id_part, st.line)?;
        if is_keyword_statement(&id) {
            return Ok(());
        }
        let label = match &st.block_label {
            Some(l) => Some(l.clone()).filter(|l| !l.is_empty()),
            None => parse_label(label_part, st.line)?,
        };
        return b.add_node(&id, label, st.line);
    }
    let mut parts = Vec::new();
    let mut start = 0;
    for &p in &arrows {
        parts.push(&text[start..p]);
        start = p + 2;
    }
    parts.push(&text[start..]);
    let mut ids = Vec::new();
    let mut label_part = None;
    for (idx, part) in parts.iter().enumerate() {
        let last = idx + 1 == parts.len();
        let (id_part, label) = split_colon(part, last);
        if last {
            label_part = label;
        }
        ids.push(parse_id(id_part, st.line)?);
    }
    if ids.iter().any(|id| is_property_path(id)) {
        return Ok(());
    }
    let label = match &st.block_label {
        Some(l) => Some(l.clone()),
        None => parse_label(label_part, st.line)?,
    };
    for id in &ids {
        b.add_node(id, None, st.line)?;
    }
    let hops = ids.len() - 1;
    for (k, pair) in ids.windows(2).enumerate() {
        let hop_label = if k + 1 == hops { label.clone() } else { None };
        b.add_edge(&pair[0], &pair[1], hop_label);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blueprint::flow::NodeKind;

    fn edges(flow: &Flow) -> Vec<(String, String, Option<String>)> {
        flow.edges().iter().map(|e| (e.src.clone(), e.dst.clone(), e.label.clone())).collect()
    }

    fn e(a: &str, b: &str, l: Option<&str>) -> (String, String, Option<String>) {
        (a.into(), b.into(), l.map(Into::into))
    }

    fn parse_msg(src: &str) -> String {
        match parse(src) {
            Err(FlowError::Parse(m)) => m,
            other => panic!("expected parse error, got {other:?}"),
        }
    }

    #[test]
    fn nodes_edges_and_chains() {
        let src = "\
begin: BEGIN
write: Write the code
check: Does it work?
done: END
begin -> write -> check
check -> done: yes
check -> write: 'no'
";
        let flow = parse(src).unwrap();
        assert_eq!(flow.begin().id, "begin");
        assert_eq!(flow.end().id, "done");
        assert_eq!(flow.node("write").unwrap().label, "Write the code");
        assert_eq!(flow.node("check").unwrap().kind, NodeKind::Decision);
        assert_eq!(
            edges(&flow),
            vec![
                e("begin", "write", None),
                e("write", "check", None),
                e("check", "done", Some("yes")),
                e("check", "write", Some("no")),
            ]
        );
    }

    #[test]
    fn chain_label_only_on_last_hop_and_inline_labels_dropped() {
        let flow = parse("BEGIN -> a: ignored -> b -> END: finish").unwrap();
        assert_eq!(edges(&flow), vec![e("BEGIN", "a", None), e("a", "b", None), e("b", "END", Some("finish"))]);
        assert_eq!(flow.node("a").unwrap().label, "a");
    }

    #[test]
    fn comments_blocks_continuations_and_semicolons() {
        let src = "\
# a comment
direction: right
vars: {
  d2-config: { layout-engine: elk }
}
BEGIN -> a # trailing comment
a: \"Do # not cut\" {
  shape: rectangle
  style: { fill: \"}\" }
}
a.shape: circle
a.style.fill: red
a -> \\
  END
x: Don't panic; x -> y; y: ''
";
        let flow = parse(src).unwrap();
        assert_eq!(flow.node("a").unwrap().label, "Do # not cut");
        assert_eq!(flow.node("x").unwrap().label, "Don't panic");
        assert_eq!(flow.node("y").unwrap().label, "y");
        assert_eq!(edges(&flow), vec![e("BEGIN", "a", None), e("a", "END", None), e("x", "y", None)]);
        assert!(flow.node("direction").is_none());
        assert!(flow.node("vars").is_none());
    }

    #[test]
    fn quoted_labels_and_ids() {
        let flow = parse(r#"BEGIN -> "step-1" -> END: "say \"hi\"""#).unwrap();
        assert_eq!(edges(&flow), vec![e("BEGIN", "step-1", None), e("step-1", "END", Some("say \"hi\""))]);
        let flow = parse("BEGIN -> a\na: 'It''s'\na -> END").unwrap_err();
        assert_eq!(flow, FlowError::Parse("Line 2: unexpected text after closing quote in 'It''s'".into()));
    }

    #[test]
    fn empty_label_after_colon_is_ignored() {
        let flow = parse("a:\na: Real\nBEGIN -> a -> END:   ").unwrap();
        assert_eq!(flow.node("a").unwrap().label, "Real");
        assert_eq!(flow.edges()[1].label, None);
    }

    #[test]
    fn block_string_labels() {
        let src = "\
BEGIN -> review
review: |md
    # Review
      - read the diff
    Report findings.
|
review -> END: |md done |
";
        let flow = parse(src).unwrap();
        assert_eq!(flow.node("review").unwrap().label, "# Review\n  - read the diff\nReport findings.");
        assert_eq!(flow.edges()[1].label.as_deref(), Some("done"));
        assert_eq!(parse_msg("BEGIN -> END\na: |md\n text"), "Line 2: unclosed block string");
    }

    #[test]
    fn dotted_ids_are_nodes_unless_properties() {
        let flow = parse("BEGIN -> group.step/1 -> END\ngroup.step/1.style.fill: red\nx.label: y").unwrap();
        assert_eq!(flow.node("group.step/1").unwrap().kind, NodeKind::Task);
        assert!(flow.node("x.label").is_none());
    }

    #[test]
    fn errors_with_line_numbers() {
        assert_eq!(parse_msg("BEGIN -> END\n}"), "Line 2: unmatched '}'");
        assert_eq!(parse_msg("BEGIN -> END\na: {\n  b\n"), "Line 2: unclosed '{'");
        assert_eq!(parse_msg("BEGIN -> END\na: \"open"), "Line 2: unclosed string");
        assert_eq!(parse_msg("BEGIN -> END\n\n-bad -> x"), "Line 3: invalid node id \"-bad\"");
        assert_eq!(parse_msg("BEGIN -> END\na b: label"), "Line 2: invalid node id \"a b\"");
        assert_eq!(parse_msg("BEGIN -> : x"), "Line 1: invalid node id \"\"");
        assert_eq!(parse_msg("BEGIN -> a[x]"), "Line 1: invalid node id \"a[x]\"");
    }

    #[test]
    fn conflicting_labels_are_an_error() {
        assert_eq!(parse_msg("a: x\na: y"), "Line 2: conflicting labels for node \"a\": \"x\" and \"y\"");
    }

    #[test]
    fn edge_references_are_ignored() {
        let flow = parse("BEGIN -> END\n(BEGIN -> END)[0].style.stroke: red").unwrap();
        assert_eq!(flow.edges().len(), 1);
    }

    #[test]
    fn text_before_block_counts() {
        let src =
            "BEGIN -> a: {\n  style.stroke: red\n}\na: Labelled {\n  inner -> other\n}\na -> END: done {style: {}}\n";
        let flow = parse(src).unwrap();
        assert_eq!(flow.node("a").unwrap().label, "Labelled");
        assert!(flow.node("inner").is_none());
        assert_eq!(edges(&flow), vec![e("BEGIN", "a", None), e("a", "END", Some("done"))]);
    }

    #[test]
    fn validation_applies() {
        assert!(matches!(parse("a -> b"), Err(FlowError::Invalid(_))));
    }
}
