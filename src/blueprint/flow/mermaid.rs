//! The Mermaid flowchart subset accepted for flow skills.
//!
//! Per line (statements may also be separated by `;`):
//! * blank lines, `%%` comments, `flowchart …` / `graph …` headers and `style`, `classDef`,
//!   `class`, `click`, `linkStyle`, `subgraph`, `direction` and `end` lines are ignored;
//! * otherwise the statement is a node followed by zero or more `arrow node` hops.
//!
//! Nodes: `ID` optionally followed by a shape `[..]`, `(..)`, `{..}`, `([..])` (also `((..))`,
//! `[[..]]`, `{{..}}`, `[(..)]`), whose content is the label — either raw text up to the closing
//! delimiter or a `"quoted"` string with backslash escapes — and an optional `:::class` suffix,
//! which is dropped. IDs match `[A-Za-z0-9_][A-Za-z0-9_-]*`; a `-` that starts an arrow (`--`,
//! `-.`, `->`) ends the id so `A-->B` works without spaces.
//!
//! Arrows: `-->`, `---` (and longer), dotted `-.->` / `-.-`, thick `==>` / `===`, invisible `~~~`;
//! labels as `A -->|label| B`, `A -- label --> B`, `A -. label .-> B`, `A == label ==> B`.
//! Anything else is a parse error carrying the 1-based line number.

use super::{Flow, FlowBuilder, FlowError, parse_err};

const IGNORED_KEYWORDS: &[&str] =
    &["flowchart", "graph", "style", "classdef", "class", "click", "linkstyle", "subgraph", "direction", "end"];

pub(super) fn parse(src: &str) -> Result<Flow, FlowError> {
    let mut b = FlowBuilder::default();
    for (i, raw) in src.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with("%%") {
            continue;
        }
        for stmt in split_statements(line) {
            parse_statement(stmt.trim(), line_no, &mut b)?;
        }
    }
    b.finish()
}

/// Splits on `;` outside quotes, shape brackets and `|pipe labels|` (so `A["a;b"]` stays whole).
fn split_statements(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut in_quote = false;
    let mut in_pipe = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in line.char_indices() {
        if in_quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quote = false;
            }
            continue;
        }
        match c {
            '"' => in_quote = true,
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            '|' if depth == 0 => in_pipe = !in_pipe,
            ';' if depth == 0 && !in_pipe => {
                parts.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&line[start..]);
    parts
}

fn parse_statement(stmt: &str, line: usize, b: &mut FlowBuilder) -> Result<(), FlowError> {
    if stmt.is_empty() {
        return Ok(());
    }
    let first = stmt.split_whitespace().next().unwrap_or("").to_lowercase();
    // `end` closes a subgraph; a node literally called `end` must carry an arrow or a shape.
    if IGNORED_KEYWORDS.contains(&first.as_str()) && (first != "end" || stmt.eq_ignore_ascii_case("end")) {
        return Ok(());
    }
    let mut cur = Cursor { s: stmt.chars().collect(), pos: 0, line };
    let mut prev = parse_node(&mut cur, b)?;
    loop {
        cur.skip_ws();
        if cur.eof() {
            return Ok(());
        }
        let label = parse_arrow(&mut cur)?;
        cur.skip_ws();
        let next = parse_node(&mut cur, b)?;
        b.add_edge(&prev, &next, label);
        prev = next;
    }
}

struct Cursor {
    s: Vec<char>,
    pos: usize,
    line: usize,
}

impl Cursor {
    fn eof(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }
    fn peek_at(&self, k: usize) -> Option<char> {
        self.s.get(self.pos + k).copied()
    }
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }
    fn starts_with(&self, lit: &str) -> bool {
        lit.chars().enumerate().all(|(k, c)| self.peek_at(k) == Some(c))
    }
    fn count(&mut self, c: char) -> usize {
        let start = self.pos;
        while self.peek() == Some(c) {
            self.pos += 1;
        }
        self.pos - start
    }
    /// Consumes text up to (not including) the first occurrence of `lit`.
    fn take_until(&mut self, lit: &str) -> Option<String> {
        let start = self.pos;
        while !self.eof() {
            if self.starts_with(lit) {
                return Some(self.s[start..self.pos].iter().collect());
            }
            self.pos += 1;
        }
        self.pos = start;
        None
    }
    fn err(&self, msg: impl std::fmt::Display) -> FlowError {
        parse_err(self.line, msg)
    }
}

fn is_id_start(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parses `ID[shape][:::class]`, registers the node and returns its id.
fn parse_node(cur: &mut Cursor, b: &mut FlowBuilder) -> Result<String, FlowError> {
    let start = cur.pos;
    if !cur.peek().is_some_and(is_id_start) {
        return Err(match cur.peek() {
            Some(c) => cur.err(format!("expected a node id at '{c}'")),
            None => cur.err("expected a node id at end of line"),
        });
    }
    cur.pos += 1;
    while let Some(c) = cur.peek() {
        let arrow_start = c == '-' && matches!(cur.peek_at(1), Some('-' | '.' | '>'));
        if (is_id_start(c) || c == '-') && !arrow_start {
            cur.pos += 1;
        } else {
            break;
        }
    }
    let id: String = cur.s[start..cur.pos].iter().collect();
    let label = parse_shape(cur)?;
    if cur.starts_with(":::") {
        cur.pos += 3;
        while cur.peek().is_some_and(|c| is_id_start(c) || c == '-') {
            cur.pos += 1;
        }
    }
    b.add_node(&id, label, cur.line)?;
    Ok(id)
}

/// Shape delimiters, longest openers first so `([` wins over `(`.
const SHAPES: &[(&str, &str)] =
    &[("([", "])"), ("((", "))"), ("[[", "]]"), ("{{", "}}"), ("[(", ")]"), ("[", "]"), ("(", ")"), ("{", "}")];

fn parse_shape(cur: &mut Cursor) -> Result<Option<String>, FlowError> {
    let Some(&(open, close)) = SHAPES.iter().find(|(open, _)| cur.starts_with(open)) else {
        return Ok(None);
    };
    cur.pos += open.chars().count();
    cur.skip_ws();
    let label = if cur.peek() == Some('"') {
        let label = parse_quoted(cur)?;
        cur.skip_ws();
        if !cur.starts_with(close) {
            return Err(cur.err(format!("expected '{close}' after quoted label")));
        }
        label
    } else {
        match cur.take_until(close) {
            Some(text) => text.trim().to_string(),
            None => return Err(cur.err(format!("missing '{close}' to close node label"))),
        }
    };
    cur.pos += close.chars().count();
    Ok(Some(label))
}

/// Parses `"…"` at the cursor; a backslash makes the next character literal.
fn parse_quoted(cur: &mut Cursor) -> Result<String, FlowError> {
    cur.pos += 1;
    let mut out = String::new();
    while let Some(c) = cur.peek() {
        cur.pos += 1;
        match c {
            '\\' => match cur.peek() {
                Some(n) => {
                    out.push(n);
                    cur.pos += 1;
                }
                None => break,
            },
            '"' => return Ok(out),
            _ => out.push(c),
        }
    }
    Err(cur.err("unterminated quoted string"))
}

/// Parses one arrow (with an optional inline or pipe label) and returns the label.
fn parse_arrow(cur: &mut Cursor) -> Result<Option<String>, FlowError> {
    let mut label = None;
    match cur.peek() {
        Some('-') if cur.peek_at(1) == Some('.') => {
            cur.pos += 1;
            cur.count('.');
            if cur.peek() == Some('-') {
                cur.pos += 1;
            } else {
                // `-. label .->`
                let text = cur.take_until(".-").ok_or_else(|| cur.err("unterminated dotted link label"))?;
                label = Some(text);
                cur.count('.');
                cur.pos += 1;
            }
            if cur.peek() == Some('>') {
                cur.pos += 1;
            }
        }
        Some(c @ ('-' | '=')) => {
            let n = cur.count(c);
            if n < 2 {
                return Err(cur.err(format!("expected an arrow, found '{c}'")));
            }
            if cur.peek() == Some('>') {
                cur.pos += 1;
            } else if n == 2 {
                // `-- label -->` / `== label ==>`
                let closing: String = [c, c].iter().collect();
                let text = cur.take_until(&closing).ok_or_else(|| cur.err("unterminated link label"))?;
                label = Some(text);
                let m = cur.count(c);
                if cur.peek() == Some('>') {
                    cur.pos += 1;
                } else if m < 3 {
                    return Err(cur.err("malformed link after label"));
                }
            }
        }
        Some('~') => {
            if cur.count('~') < 3 {
                return Err(cur.err("expected an arrow, found '~'"));
            }
        }
        Some(c) => return Err(cur.err(format!("expected an arrow, found '{c}'"))),
        None => return Err(cur.err("expected an arrow")),
    }
    cur.skip_ws();
    if cur.peek() == Some('|') {
        cur.pos += 1;
        let text = cur.take_until("|").ok_or_else(|| cur.err("unterminated '|' link label"))?;
        cur.pos += 1;
        label = Some(text);
    }
    Ok(label.map(|l| unquote_label(l.trim())))
}

/// Edge labels may themselves be quoted (`-->|"yes"|`); strip one level of quotes.
fn unquote_label(text: &str) -> String {
    if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
        let mut out = String::new();
        let mut chars = text[1..text.len() - 1].chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else {
                out.push(c);
            }
        }
        out
    } else {
        text.to_string()
    }
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

    #[test]
    fn all_edge_forms() {
        let src = "\
flowchart TD
BEGIN-->A
A --- B
B -.-> C
C ==> D
D -->|go| E
E -- talk --> F
F -. dotted .-> G
G == thick ==> H
H ---> I
I ~~~ J
J -.- K
K === L
L -- open --- M
M --> END
";
        let flow = parse(src).unwrap();
        assert_eq!(
            edges(&flow),
            vec![
                e("BEGIN", "A", None),
                e("A", "B", None),
                e("B", "C", None),
                e("C", "D", None),
                e("D", "E", Some("go")),
                e("E", "F", Some("talk")),
                e("F", "G", Some("dotted")),
                e("G", "H", Some("thick")),
                e("H", "I", None),
                e("I", "J", None),
                e("J", "K", None),
                e("K", "L", None),
                e("L", "M", Some("open")),
                e("M", "END", None),
            ]
        );
    }

    #[test]
    fn shapes_labels_and_classes() {
        let src = r#"graph LR
  s([ BEGIN ]) --> a[Write the tests]:::hot
  a --> b(Run them)
  b --> c{Green?}
  c -->|"yes"| d((Ship it))
  c -->|no| a
  d --> e["Say \"done\" \\ end"]
  e --> f[[sub]] --> g{{hex}} --> h[(db)]
  h --> z([END])
"#;
        let flow = parse(src).unwrap();
        let label = |id: &str| flow.node(id).unwrap().label.clone();
        assert_eq!(label("s"), "BEGIN");
        assert_eq!(flow.begin().id, "s");
        assert_eq!(label("a"), "Write the tests");
        assert_eq!(label("b"), "Run them");
        assert_eq!(label("c"), "Green?");
        assert_eq!(flow.node("c").unwrap().kind, NodeKind::Decision);
        assert_eq!(label("d"), "Ship it");
        assert_eq!(label("e"), r#"Say "done" \ end"#);
        assert_eq!(label("f"), "sub");
        assert_eq!(label("g"), "hex");
        assert_eq!(label("h"), "db");
        assert_eq!(flow.outgoing_labels("c"), vec!["yes", "no"]);
    }

    #[test]
    fn ids_with_dashes_and_no_spaces() {
        let flow = parse("BEGIN-->step-one-->step_2-.->END").unwrap();
        assert_eq!(
            edges(&flow),
            vec![e("BEGIN", "step-one", None), e("step-one", "step_2", None), e("step_2", "END", None)]
        );
    }

    #[test]
    fn ignored_lines_and_comments() {
        let src = "\
%% a comment
flowchart TB
classDef hot fill:#f00
class a hot
style a fill:#f9f
click a callback
linkStyle 0 stroke:#f00
subgraph one
direction LR
BEGIN --> a[do it]; a --> END
end
";
        let flow = parse(src).unwrap();
        assert_eq!(edges(&flow), vec![e("BEGIN", "a", None), e("a", "END", None)]);
    }

    #[test]
    fn label_defaults_to_id_and_later_label_fills_in() {
        let flow = parse("BEGIN --> a\na[Real label] --> END").unwrap();
        assert_eq!(flow.node("a").unwrap().label, "Real label");
        assert_eq!(flow.node("BEGIN").unwrap().label, "BEGIN");
        // Same label twice is fine.
        assert!(parse("BEGIN --> a[x]\na[x] --> END").is_ok());
    }

    #[test]
    fn conflicting_labels_error_with_line() {
        let err = parse("BEGIN --> a[x]\n\na[y] --> END").unwrap_err();
        assert_eq!(err, FlowError::Parse("Line 3: conflicting labels for node \"a\": \"x\" and \"y\"".into()));
    }

    #[test]
    fn parse_errors_carry_line_numbers() {
        let msg = |src: &str| match parse(src) {
            Err(FlowError::Parse(m)) => m,
            other => panic!("expected parse error, got {other:?}"),
        };
        assert!(msg("BEGIN --> END\nA -> B").starts_with("Line 2: "));
        assert!(msg("BEGIN --> a[open").starts_with("Line 1: missing ']'"));
        assert!(msg("BEGIN --> a[\"open]").starts_with("Line 1: unterminated"));
        assert!(msg("BEGIN -->|x B").starts_with("Line 1: unterminated '|'"));
        assert!(msg("x\n\n  -->B").starts_with("Line 3: expected a node id"));
        assert!(msg("BEGIN -->").starts_with("Line 1: expected a node id at end"));
        assert!(msg("BEGIN -- x END").starts_with("Line 1: unterminated link label"));
    }

    #[test]
    fn labelled_chains_without_spaces() {
        let flow = parse("BEGIN-->|a|X-->| b |Y==>|\"c\"|END").unwrap();
        assert_eq!(edges(&flow), vec![e("BEGIN", "X", Some("a")), e("X", "Y", Some("b")), e("Y", "END", Some("c"))]);
    }

    #[test]
    fn node_named_end_with_arrow_is_not_ignored() {
        let flow = parse("BEGIN --> end\n").unwrap();
        assert_eq!(flow.end().id, "end");
    }

    #[test]
    fn semicolons_inside_labels_do_not_split() {
        let flow = parse("BEGIN --> a[\"x; y\"] -->|p;q| END").unwrap();
        assert_eq!(flow.node("a").unwrap().label, "x; y");
        assert_eq!(flow.edges()[1].label.as_deref(), Some("p;q"));
    }
}
