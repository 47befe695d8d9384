//! The map tells the truth: `src/lib.rs`'s *Layout* lists every top-level module, bottom layer
//! first, and a module only uses modules listed above it.
//!
//! The check reads the source: for each listed module, `src/<module>.rs` and every `.rs` file
//! under `src/<module>/`, with comments and string literals blanked, and looks for paths that
//! leave the module: `crate::<other>`, each member of a `crate::{a, b::c}` group, and `super::`
//! chains that climb to the crate root (counting inline `mod x { … }` blocks). A use of a module
//! listed below the user, or of one the list does not know, fails the test with the file and the
//! edge.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Listed in the Layout before their module exists: the live session is being written on
/// another branch. An entry here may be absent from `src/`; remove it once the module is in.
const NOT_YET: &[&str] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules of the Layout list, in order: the backticked links of each `//! - ` bullet of
/// the `# Layout` section.
fn layout(lib_rs: &str) -> Vec<String> {
    let mut in_layout = false;
    let mut order = Vec::new();
    for line in lib_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else { continue };
        let doc = doc.trim_start();
        if let Some(heading) = doc.strip_prefix("# ") {
            in_layout = heading.trim() == "Layout";
            continue;
        }
        if !in_layout {
            continue;
        }
        let Some(bullet) = doc.strip_prefix("- ") else { continue };
        // The links come first: "[`a`], [`b`]: what they are".
        let head = bullet.split("]:").next().unwrap_or("");
        for link in head.split("[`").skip(1) {
            if let Some(name) = link.split('`').next() {
                order.push(name.to_string());
            }
        }
    }
    order
}

/// The top-level modules `src/lib.rs` declares.
fn declared(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(|m| m.trim().to_string())
        })
        .collect()
}

/// Every source file of a top-level module, with its depth below the crate root (`a.rs` and
/// `a/mod.rs` are 1, `a/b.rs` is 2).
fn files_of(module: &str) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let single = src().join(format!("{module}.rs"));
    if single.is_file() {
        out.push((single, 1));
    }
    let mut dirs = vec![src().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src()).unwrap();
                let parts = rel.components().count();
                let depth = if path.file_name().is_some_and(|n| n == "mod.rs") { parts - 1 } else { parts };
                out.push((path, depth));
            }
        }
    }
    out.sort();
    out
}

/// The text with comments, string literals and char literals replaced by spaces (newlines
/// kept), so that only code is searched.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || c == 'b')
            && !b.get(i.wrapping_sub(1)).is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && raw_string_hashes(&b[i..]).is_some()
        {
            // r"…", r#"…"#, br"…": no escapes; ends at the quote followed by as many hashes.
            let (prefix, hashes) = raw_string_hashes(&b[i..]).unwrap();
            for _ in 0..prefix {
                out.push(' ');
            }
            i += prefix;
            while i < b.len() {
                if b[i] == '"' && b[i + 1..].iter().take(hashes).filter(|h| **h == '#').count() == hashes {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}', '"'), or a lifetime ('a), which is kept.
            let end = if next == Some('\\') {
                b[i + 2..].iter().position(|c| *c == '\'').map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At the start of a raw string literal (`r"`, `r#"`, `br"`, …): the length of its opening
/// (prefix, hashes and quote) and the number of hashes.
fn raw_string_hashes(s: &[char]) -> Option<(usize, usize)> {
    let start = if s.first() == Some(&'b') { 1 } else { 0 };
    if s.get(start) != Some(&'r') {
        return None;
    }
    let hashes = s[start + 1..].iter().take_while(|c| **c == '#').count();
    (s.get(start + 1 + hashes) == Some(&'"')).then_some((start + 2 + hashes, hashes))
}

fn ident_at(s: &[char], i: usize) -> Option<String> {
    let name: String = s[i..].iter().take_while(|c| c.is_alphanumeric() || **c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// The top-level names of a `{…}` group starting at `s[open]` (nested groups skipped).
fn group_members(s: &[char], open: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut expect_name = true;
    let mut i = open;
    while i < s.len() {
        match s[i] {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect_name = true;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect_name = true,
            c if depth == 1 && expect_name && (c.is_alphanumeric() || c == '_') => {
                if let Some(name) = ident_at(s, i) {
                    i += name.chars().count();
                    names.push(name);
                    expect_name = false;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// The top-level modules a file's code reaches, given the file's depth below the crate root.
fn uses(code: &str, depth: usize) -> BTreeSet<String> {
    let s: Vec<char> = code.chars().collect();
    let mut found = BTreeSet::new();
    // Inline modules (`mod tests { … }`) open at these brace depths; each adds a level.
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    let boundary = |i: usize| i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_' || s[i - 1] == ':');
    while i < s.len() {
        match s[i] {
            '{' => braces += 1,
            '}' => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        if boundary(i) && s[i..].starts_with(&['m', 'o', 'd', ' ']) {
            let mut j = i + 4;
            while s.get(j) == Some(&' ') {
                j += 1;
            }
            if let Some(name) = ident_at(&s, j) {
                let mut k = j + name.chars().count();
                while s.get(k).is_some_and(|c| c.is_whitespace()) {
                    k += 1;
                }
                if s.get(k) == Some(&'{') {
                    inline_mods.push(braces);
                }
            }
        }
        if boundary(i) && s[i..].starts_with(&['c', 'r', 'a', 't', 'e', ':', ':']) {
            let at = i + 7;
            if s.get(at) == Some(&'{') {
                found.extend(group_members(&s, at));
            } else if let Some(name) = ident_at(&s, at) {
                found.insert(name);
            }
        }
        if boundary(i) && s[i..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
            let mut climbs = 0;
            let mut j = i;
            while s[j..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                climbs += 1;
                j += 7;
            }
            // Reaching the crate root: from there the next name is a top-level module.
            if climbs == depth + inline_mods.len() {
                if s.get(j) == Some(&'{') {
                    found.extend(group_members(&s, j));
                } else if let Some(name) = ident_at(&s, j) {
                    found.insert(name);
                }
            }
            i = j;
            continue;
        }
        i += 1;
    }
    found
}

#[test]
fn the_layout_lists_every_module_once() {
    let lib_rs = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = layout(&lib_rs);
    let declared = declared(&lib_rs);
    let mut seen = BTreeSet::new();
    for m in &order {
        assert!(seen.insert(m), "`{m}` is listed twice in src/lib.rs's Layout");
        assert!(
            declared.contains(m) || NOT_YET.contains(&m.as_str()),
            "src/lib.rs's Layout lists `{m}`, which lib.rs does not declare"
        );
    }
    let missing: Vec<_> = declared.iter().filter(|m| !order.contains(m)).collect();
    assert!(missing.is_empty(), "src/lib.rs's Layout does not list {missing:?}");
}

#[test]
fn a_module_only_uses_modules_listed_above_it() {
    let lib_rs = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = layout(&lib_rs);
    let declared = declared(&lib_rs);
    let rank = |m: &str| order.iter().position(|o| o == m);
    let mut broken = Vec::new();
    for (pos, module) in order.iter().enumerate() {
        for (file, depth) in files_of(module) {
            let code = code_only(&std::fs::read_to_string(&file).unwrap());
            for used in uses(&code, depth) {
                if used == *module || !declared.contains(&used) {
                    continue; // itself, or a crate-root item (`crate::VERSION`)
                }
                let file = file.strip_prefix(src().parent().unwrap()).unwrap().display().to_string();
                match rank(&used) {
                    Some(r) if r < pos => {}
                    Some(_) => broken.push(format!("{file}: `{module}` uses `{used}`, listed below it")),
                    None => broken.push(format!("{file}: `{module}` uses `{used}`, which the Layout does not list")),
                }
            }
        }
    }
    assert!(broken.is_empty(), "src/lib.rs's Layout order is broken:\n{}", broken.join("\n"));
}

#[test]
fn the_scanner_sees_paths_groups_and_climbs() {
    let code = code_only(concat!(
        "use crate::{soul::{Soul, Turn}, tools, self};\n",
        "use crate::llm::Chat; // crate::wire in a comment\n",
        "const S: &str = \"crate::acp\"; const R: &str = r#\"crate::print\"#; const C: char = '\"';\n",
        "fn f<'a>(x: &'a str) { super::super::config::load(); }\n",
        "mod tests { use super::super::super::session; }\n",
    ));
    let found: Vec<String> = uses(&code, 2).into_iter().collect();
    assert_eq!(found, ["config", "llm", "self", "session", "soul", "tools"]);
    // One level deeper the same climbs stay inside the module.
    assert_eq!(uses(&code, 3).into_iter().collect::<Vec<_>>(), ["llm", "self", "soul", "tools"]);
}
