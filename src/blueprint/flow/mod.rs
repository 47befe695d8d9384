//! Flow skills: a diagram embedded in `SKILL.md` that drives a sequence of sub-turns.
//!
//! A [`Flow`] is only ever constructed through validation, so every `Flow` value satisfies:
//! * exactly one [`NodeKind::Begin`] and exactly one [`NodeKind::End`] node;
//! * END is reachable from BEGIN;
//! * every node reachable from BEGIN that has more than one outgoing edge carries non-empty,
//!   pairwise distinct edge labels (so a `<choice>` answer selects at most one edge);
//! * a node's kind is derived from its label (`BEGIN` / `END`, trimmed, case-insensitive) and
//!   a task node with more than one outgoing edge is a [`NodeKind::Decision`].
//!
//! Edges keep their diagram order; "the first outgoing edge" is the first one written.

mod d2;
mod mermaid;

use std::collections::{HashMap, VecDeque};

/// Kind of a flow node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Begin,
    End,
    /// Runs its label as a prompt, then follows its first outgoing edge.
    Task,
    /// Runs its label plus the branch labels and follows the edge the model chose.
    Decision,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowNode {
    pub id: String,
    /// The explicit label, or the id when the diagram gave none.
    pub label: String,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowEdge {
    pub src: String,
    pub dst: String,
    /// Trimmed label; `None` when absent or blank.
    pub label: Option<String>,
}

/// A validated flow graph (see the module invariants).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    nodes: Vec<FlowNode>,
    edges: Vec<FlowEdge>,
    index: HashMap<String, usize>,
    begin: usize,
    end: usize,
}

/// Why a diagram could not become a flow. Parse errors carry `Line N: ` prefixes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn parse_err(line: usize, msg: impl std::fmt::Display) -> FlowError {
    FlowError::Parse(format!("Line {line}: {msg}"))
}

impl Flow {
    /// Nodes in order of first appearance in the diagram.
    pub fn nodes(&self) -> &[FlowNode] {
        &self.nodes
    }

    /// Edges in diagram order.
    pub fn edges(&self) -> &[FlowEdge] {
        &self.edges
    }

    pub fn node(&self, id: &str) -> Option<&FlowNode> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    /// The unique BEGIN node: where execution starts (it is never run itself).
    pub fn begin(&self) -> &FlowNode {
        &self.nodes[self.begin]
    }

    /// The unique END node: reaching it finishes the flow normally.
    pub fn end(&self) -> &FlowNode {
        &self.nodes[self.end]
    }

    /// Outgoing edges of `id`, in diagram order.
    pub fn outgoing<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a FlowEdge> + 'a {
        self.edges.iter().filter(move |e| e.src == id)
    }

    /// Labels of the outgoing edges of `id` (blank labels skipped), in diagram order. For a
    /// decision node these are exactly the valid choices.
    pub fn outgoing_labels(&self, id: &str) -> Vec<String> {
        self.outgoing(id).filter_map(|e| e.label.clone()).collect()
    }

    /// The prompt of a sub-turn for node `id`: a task's label, or for a decision its label plus
    /// the branch list and answer instructions ([`decision_prompt`]). `None` for BEGIN / END
    /// and unknown ids, which are never run.
    pub fn node_prompt(&self, id: &str) -> Option<String> {
        let node = self.node(id)?;
        match node.kind {
            NodeKind::Task => Some(node.label.clone()),
            NodeKind::Decision => Some(decision_prompt(&node.label, &self.outgoing_labels(id))),
            NodeKind::Begin | NodeKind::End => None,
        }
    }

    /// The node to run after `id`.
    ///
    /// * BEGIN / task: the target of the first outgoing edge (`choice` is ignored);
    /// * decision: the target of the edge whose label equals `choice` exactly; `None` when the
    ///   choice is missing or matches no edge (the runner re-asks the same node);
    /// * END, unknown ids, or a node without outgoing edges: `None` (the flow stops).
    pub fn next(&self, id: &str, choice: Option<&str>) -> Option<&FlowNode> {
        let node = self.node(id)?;
        let edge = match node.kind {
            NodeKind::End => return None,
            NodeKind::Begin | NodeKind::Task => self.outgoing(id).next()?,
            NodeKind::Decision => {
                let choice = choice?;
                self.outgoing(id).find(|e| e.label.as_deref() == Some(choice))?
            }
        };
        self.node(&edge.dst)
    }
}

/// Collects nodes and edges while a diagram is parsed, then derives kinds and validates.
#[derive(Default)]
pub(crate) struct FlowBuilder {
    /// (id, explicit label) in order of first appearance.
    nodes: Vec<(String, Option<String>)>,
    index: HashMap<String, usize>,
    edges: Vec<FlowEdge>,
}

impl FlowBuilder {
    /// Declares `id`, optionally with an explicit label. Two different explicit labels for one id
    /// are an error because it would be ambiguous which prompt the node runs.
    pub(crate) fn add_node(&mut self, id: &str, label: Option<String>, line: usize) -> Result<(), FlowError> {
        let i = match self.index.get(id) {
            Some(&i) => i,
            None => {
                self.nodes.push((id.to_string(), None));
                self.index.insert(id.to_string(), self.nodes.len() - 1);
                self.nodes.len() - 1
            }
        };
        if let Some(label) = label {
            match &self.nodes[i].1 {
                Some(existing) if *existing != label => {
                    return Err(parse_err(
                        line,
                        format!("conflicting labels for node \"{id}\": \"{existing}\" and \"{label}\""),
                    ));
                }
                _ => self.nodes[i].1 = Some(label),
            }
        }
        Ok(())
    }

    pub(crate) fn add_edge(&mut self, src: &str, dst: &str, label: Option<String>) {
        let label = label.map(|l| l.trim().to_string()).filter(|l| !l.is_empty());
        self.edges.push(FlowEdge { src: src.to_string(), dst: dst.to_string(), label });
    }

    pub(crate) fn finish(self) -> Result<Flow, FlowError> {
        let FlowBuilder { nodes, index, edges } = self;
        let mut out_degree = vec![0usize; nodes.len()];
        for e in &edges {
            out_degree[index[&e.src]] += 1;
        }
        let nodes: Vec<FlowNode> = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (id, label))| {
                let label = label.unwrap_or_else(|| id.clone());
                let key = label.trim().to_lowercase();
                let kind = if key == "begin" {
                    NodeKind::Begin
                } else if key == "end" {
                    NodeKind::End
                } else if out_degree[i] > 1 {
                    NodeKind::Decision
                } else {
                    NodeKind::Task
                };
                FlowNode { id, label, kind }
            })
            .collect();
        let of_kind = |k: NodeKind| nodes.iter().enumerate().filter(|(_, n)| n.kind == k).map(|(i, _)| i).collect();
        let begins: Vec<usize> = of_kind(NodeKind::Begin);
        let ends: Vec<usize> = of_kind(NodeKind::End);
        if begins.len() != 1 {
            return Err(FlowError::Invalid(format!("Expected exactly one BEGIN node, found {}", begins.len())));
        }
        if ends.len() != 1 {
            return Err(FlowError::Invalid(format!("Expected exactly one END node, found {}", ends.len())));
        }
        let flow = Flow { nodes, edges, index, begin: begins[0], end: ends[0] };

        // Breadth-first from BEGIN; only reachable nodes can ever be asked for a choice.
        let mut reachable = vec![false; flow.nodes.len()];
        let mut queue = VecDeque::from([flow.begin]);
        reachable[flow.begin] = true;
        let mut order = Vec::new();
        while let Some(i) = queue.pop_front() {
            order.push(i);
            for e in flow.outgoing(&flow.nodes[i].id) {
                let j = flow.index[&e.dst];
                if !reachable[j] {
                    reachable[j] = true;
                    queue.push_back(j);
                }
            }
        }
        for &i in &order {
            let id = &flow.nodes[i].id;
            let out: Vec<&FlowEdge> = flow.outgoing(id).collect();
            if out.len() <= 1 {
                continue;
            }
            let mut seen: Vec<&str> = Vec::new();
            for e in out {
                let Some(label) = e.label.as_deref() else {
                    return Err(FlowError::Invalid(format!(
                        "Node \"{id}\" has more than one outgoing edge but an unlabeled edge to \"{}\"",
                        e.dst
                    )));
                };
                if seen.contains(&label) {
                    return Err(FlowError::Invalid(format!("Node \"{id}\" has duplicate edge label \"{label}\"")));
                }
                seen.push(label);
            }
        }
        if !reachable[flow.end] {
            return Err(FlowError::Invalid("END node is not reachable from BEGIN".to_string()));
        }
        Ok(flow)
    }
}

/// Diagram languages a flow skill may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowSyntax {
    Mermaid,
    D2,
}

/// Parses a diagram in the given syntax and validates it.
pub fn parse_flow(syntax: FlowSyntax, source: &str) -> Result<Flow, FlowError> {
    match syntax {
        FlowSyntax::Mermaid => mermaid::parse(source),
        FlowSyntax::D2 => d2::parse(source),
    }
}

/// Finds the first fenced code block whose info string (first word, lower-cased, `{}` stripped)
/// is `mermaid` or `d2` and returns its syntax and body. Other fenced blocks are skipped whole so
/// a diagram quoted inside, e.g., a ```` ```markdown ```` block is not picked up.
///
/// Fences are runs of at least 3 backticks or tildes (indented at most 3 spaces); a closing fence
/// uses the same character, is at least as long and has nothing but whitespace after it. An
/// unclosed block runs to the end of the document, as in CommonMark.
pub fn find_diagram(markdown: &str) -> Option<(FlowSyntax, String)> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some((ch, len, info)) = opening_fence(lines[i]) else {
            i += 1;
            continue;
        };
        let mut body = Vec::new();
        let mut j = i + 1;
        while j < lines.len() && !is_closing_fence(lines[j], ch, len) {
            body.push(lines[j]);
            j += 1;
        }
        let word = info.split_whitespace().next().unwrap_or("");
        let word = word.trim_matches(|c| c == '{' || c == '}').to_lowercase();
        let syntax = match word.as_str() {
            "mermaid" => Some(FlowSyntax::Mermaid),
            "d2" => Some(FlowSyntax::D2),
            _ => None,
        };
        if let Some(syntax) = syntax {
            return Some((syntax, body.join("\n")));
        }
        i = j + 1;
    }
    None
}

fn fence_indent_ok(line: &str) -> Option<&str> {
    let stripped = line.trim_start_matches(' ');
    (line.len() - stripped.len() <= 3).then_some(stripped)
}

fn opening_fence(line: &str) -> Option<(char, usize, &str)> {
    let s = fence_indent_ok(line)?;
    let ch = s.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = s.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let info = &s[len..];
    // CommonMark: a backtick fence's info string may not contain backticks (inline code).
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((ch, len, info.trim()))
}

fn is_closing_fence(line: &str, ch: char, min_len: usize) -> bool {
    let Some(s) = fence_indent_ok(line) else { return false };
    let len = s.chars().take_while(|c| *c == ch).count();
    len >= min_len && s[len..].trim().is_empty()
}

/// The flow of a flow skill: `Ok(None)` when `SKILL.md` has no Mermaid / D2 block, `Err` when
/// the first such block does not parse or validate.
pub fn parse_flow_from_skill(markdown: &str) -> Result<Option<Flow>, FlowError> {
    match find_diagram(markdown) {
        None => Ok(None),
        Some((syntax, body)) => parse_flow(syntax, &body).map(Some),
    }
}

/// Edge label of the Ralph loop's decision node that runs the prompt once more.
pub const RALPH_CONTINUE: &str = "CONTINUE";
/// Edge label of the Ralph loop's decision node that ends the loop.
pub const RALPH_STOP: &str = "STOP";

/// Prompt for a decision node: the node's label, the available branches, and how to answer.
pub fn decision_prompt(label: &str, choices: &[String]) -> String {
    let mut out = String::new();
    out.push_str(label.trim());
    out.push_str("\n\nPossible branches:\n");
    for c in choices {
        out.push_str("- ");
        out.push_str(c);
        out.push('\n');
    }
    out.push_str(
        "\nWhen you have decided, end your final reply with the branch you picked, written exactly \
         as listed and wrapped in a choice tag: <choice>LABEL</choice> (replace LABEL with the branch).",
    );
    out
}

/// Prompt for re-running a decision node after the model's reply had no valid choice.
pub fn decision_retry_prompt(label: &str, choices: &[String]) -> String {
    let mut out = decision_prompt(label, choices);
    out.push_str(
        "\n\nReminder: your previous reply did not contain a valid choice. Reply with exactly one \
         of the branches above inside <choice>...</choice>.",
    );
    out
}

/// The text of the last `<choice>…</choice>` in `text` (content may not contain `<`), trimmed.
/// `None` when there is no such tag or its content is blank.
pub fn extract_choice(text: &str) -> Option<String> {
    const OPEN: &str = "<choice>";
    const CLOSE: &str = "</choice>";
    let mut last = None;
    let mut from = 0;
    while let Some(pos) = text[from..].find(OPEN) {
        let start = from + pos + OPEN.len();
        let rest = &text[start..];
        let content_len = rest.find('<').unwrap_or(rest.len());
        if rest[content_len..].starts_with(CLOSE) {
            last = Some(rest[..content_len].trim().to_string());
            from = start + content_len + CLOSE.len();
        } else {
            from = start;
        }
    }
    last.filter(|c| !c.is_empty())
}

/// Prompt of the Ralph loop's decision node (R2): the user's request again plus the rules of the
/// loop. Its branches are [`RALPH_CONTINUE`] and [`RALPH_STOP`]; the runner appends the choice
/// instructions with [`decision_prompt`].
pub fn ralph_prompt(user_text: &str) -> String {
    format!(
        "{user_text}\n\n(This same request is being given to you again automatically, so you can keep \
         improving on the work done so far. Check what is already done. If the request is fully \
         satisfied and nothing useful remains, answer {RALPH_STOP}. Otherwise continue the work and \
         answer {RALPH_CONTINUE}.)"
    )
}

/// The full prompt of the Ralph loop's decision node (R2): [`ralph_prompt`] plus the branch
/// list (`CONTINUE`, `STOP`) and the `<choice>` instructions.
pub fn ralph_decision_prompt(user_text: &str) -> String {
    decision_prompt(&ralph_prompt(user_text), &[RALPH_CONTINUE.to_string(), RALPH_STOP.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mermaid(src: &str) -> Result<Flow, FlowError> {
        parse_flow(FlowSyntax::Mermaid, src)
    }

    #[test]
    fn finds_first_diagram_block_and_skips_other_fences() {
        let md = "intro\n```markdown\n```mermaid\nnot me\n```\n~~~~ {Mermaid} extra\nA-->B\n~~~\nstill in\n~~~~~\n```d2\nx\n```\n";
        let (syntax, body) = find_diagram(md).unwrap();
        assert_eq!(syntax, FlowSyntax::Mermaid);
        assert_eq!(body, "A-->B\n~~~\nstill in");
    }

    #[test]
    fn closing_fence_rules() {
        // Same char, at least as long, nothing after it.
        let md = "````d2\na\n```\nb\n```` x\nc\n`````\n";
        let (syntax, body) = find_diagram(md).unwrap();
        assert_eq!(syntax, FlowSyntax::D2);
        assert_eq!(body, "a\n```\nb\n```` x\nc");
        // Two backticks do not open a fence; an unclosed block runs to the end.
        assert_eq!(find_diagram("``mermaid\nx\n"), None);
        assert_eq!(find_diagram("```mermaid\nA --> B").unwrap().1, "A --> B");
        // Backtick info strings may not contain backticks.
        assert_eq!(find_diagram("```mermaid`\nx\n```"), None);
    }

    #[test]
    fn skill_without_diagram_is_none() {
        assert_eq!(parse_flow_from_skill("# title\n```sh\nls\n```\n"), Ok(None));
    }

    #[test]
    fn skill_with_bad_diagram_is_error() {
        assert!(parse_flow_from_skill("```mermaid\nflowchart TD\nA --> B\n```").is_err());
    }

    #[test]
    fn kinds_and_navigation() {
        let flow = mermaid(
            "flowchart TD\nS([begin]) --> A[Write code]\nA --> D{Tests pass?}\nD -->|yes| E([END])\nD -->|no| A\n",
        )
        .unwrap();
        assert_eq!(flow.begin().id, "S");
        assert_eq!(flow.end().id, "E");
        assert_eq!(flow.node("A").unwrap().kind, NodeKind::Task);
        assert_eq!(flow.node("D").unwrap().kind, NodeKind::Decision);
        assert_eq!(flow.next("S", None).unwrap().id, "A");
        assert_eq!(flow.next("A", Some("ignored")).unwrap().id, "D");
        assert_eq!(flow.outgoing_labels("D"), vec!["yes".to_string(), "no".to_string()]);
        assert_eq!(flow.next("D", Some("no")).unwrap().id, "A");
        assert_eq!(flow.next("D", Some("yes")).unwrap().id, "E");
        assert_eq!(flow.next("D", Some("Yes")), None);
        assert_eq!(flow.next("D", None), None);
        assert_eq!(flow.next("E", None), None);
        assert_eq!(flow.next("nope", None), None);
        assert_eq!(flow.node_prompt("A").as_deref(), Some("Write code"));
        assert_eq!(flow.node_prompt("D"), Some(decision_prompt("Tests pass?", &["yes".to_string(), "no".to_string()])));
        assert_eq!(flow.node_prompt("S"), None);
        assert_eq!(flow.node_prompt("E"), None);
        assert_eq!(flow.nodes().len(), 4);
        assert_eq!(flow.edges().len(), 4);
    }

    #[test]
    fn begin_follows_first_edge_even_with_several() {
        let flow = mermaid("BEGIN -->|a| X\nBEGIN -->|b| END\nX --> END").unwrap();
        assert_eq!(flow.begin().kind, NodeKind::Begin);
        assert_eq!(flow.next("BEGIN", None).unwrap().id, "X");
    }

    #[test]
    fn validation_failures() {
        let err = |src: &str| match mermaid(src) {
            Err(FlowError::Invalid(m)) => m,
            other => panic!("expected validation error, got {other:?}"),
        };
        assert_eq!(err("A --> B"), "Expected exactly one BEGIN node, found 0");
        assert_eq!(err("BEGIN --> A\nB[begin] --> END"), "Expected exactly one BEGIN node, found 2");
        assert_eq!(err("BEGIN --> A"), "Expected exactly one END node, found 0");
        assert_eq!(err("BEGIN --> A\nB --> END"), "END node is not reachable from BEGIN");
        assert!(err("BEGIN --> A\nA --> END\nA --> B\nB --> END").contains("unlabeled edge"));
        assert!(err("BEGIN --> A\nA -->|x| END\nA -->|  | B\nB --> END").contains("unlabeled edge"));
        assert!(err("BEGIN --> A\nA -->|x| END\nA -->|x| B\nB --> END").contains("duplicate edge label"));
    }

    #[test]
    fn unreachable_branching_nodes_are_not_checked() {
        assert!(mermaid("BEGIN --> END\nX --> Y\nX --> Z").is_ok());
    }

    #[test]
    fn decision_prompt_lists_choices_and_tag() {
        let p = decision_prompt(" Is it done? ", &["yes".into(), "no".into()]);
        assert!(p.starts_with("Is it done?\n"));
        assert!(p.contains("- yes\n- no\n"));
        assert!(p.contains("<choice>LABEL</choice>"));
        let r = decision_retry_prompt("Q", &["a".into()]);
        assert!(r.starts_with(&decision_prompt("Q", &["a".into()])));
        assert!(r.contains("did not contain a valid choice"));
    }

    #[test]
    fn extract_choice_takes_last_valid_tag() {
        assert_eq!(extract_choice("x <choice>a</choice> y <choice> b </choice>"), Some("b".into()));
        assert_eq!(extract_choice("<choice>a</choice> <choice>b<i></choice>"), Some("a".into()));
        assert_eq!(extract_choice("<choice><choice>z</choice>"), Some("z".into()));
        assert_eq!(extract_choice("<choice>  </choice>"), None);
        assert_eq!(extract_choice("no tags"), None);
        assert_eq!(extract_choice("<choice>open"), None);
        assert_eq!(extract_choice("<choice>multi\nline</choice>"), Some("multi\nline".into()));
    }

    #[test]
    fn ralph_prompt_mentions_stop_and_continue() {
        let p = ralph_prompt("fix the bug");
        assert!(p.starts_with("fix the bug\n\n"));
        assert!(p.contains("STOP"));
        assert!(p.contains("CONTINUE"));
        let d = ralph_decision_prompt("fix the bug");
        assert!(d.starts_with(&p));
        assert!(d.contains("- CONTINUE\n- STOP\n"));
        assert!(d.contains("<choice>LABEL</choice>"));
    }
}
