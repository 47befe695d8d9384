//! Glob and Grep.

use crate::tools_support;

use serde_json::json;
use tools_support::*;

fn tree(h: &Harness) {
    h.write("a.txt", "hello\nworld\nhello again\n");
    h.write("sub/b.py", "x\nhello\n");
    h.write("sub/deep/x.py", "print('hello')\n");
    h.write(".hidden.py", "hello\n");
    h.write("bin.dat", b"hel\x00lo\nhello\n");
}

// ---------- Glob ----------

#[tokio::test]
async fn glob_basic_patterns() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Glob", json!({"pattern": "*.py"})).await;
    assert_eq!(text(&r), ".hidden.py");
    assert_eq!(r.message, "Found 1 matches for pattern `*.py`.");
    let r = h.call("Glob", json!({"pattern": "sub/**"})).await;
    assert_eq!(text(&r), "sub\nsub/b.py\nsub/deep\nsub/deep/x.py");
    let r = h.call("Glob", json!({"pattern": "sub/**/*.py"})).await;
    assert_eq!(text(&r), "sub/b.py\nsub/deep/x.py");
    let r = h.call("Glob", json!({"pattern": "sub/**", "include_dirs": false})).await;
    assert_eq!(text(&r), "sub/b.py\nsub/deep/x.py");
    let r = h.call("Glob", json!({"pattern": "*/"})).await;
    assert_eq!(text(&r), "sub");
    let r = h.call("Glob", json!({"pattern": "s?b/[ab].py"})).await;
    assert_eq!(text(&r), "sub/b.py");
    let r = h.call("Glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(text(&r), "");
    assert_eq!(r.message, "No matches found for pattern `*.rs`.");
    assert!(!r.is_error);
    let r = h.call("Glob", json!({"pattern": "*.py", "directory": h.path("sub")})).await;
    assert_eq!(text(&r), "b.py");
    // Literal parts are looked up directly.
    let r = h.call("Glob", json!({"pattern": "sub/deep/x.py"})).await;
    assert_eq!(text(&r), "sub/deep/x.py");
}

#[tokio::test]
async fn glob_sorting_and_cap() {
    let h = harness(true);
    for i in 0..1005 {
        h.write(&format!("many/f{i:04}.txt"), "");
    }
    let r = h.call("Glob", json!({"pattern": "many/*.txt"})).await;
    assert_eq!(
        r.message,
        "Found 1005 matches for pattern `many/*.txt`. Only the first 1000 matches are returned. You may want to use a more specific pattern."
    );
    let lines: Vec<&str> = text(&r).split('\n').collect();
    assert_eq!(lines.len(), 1000);
    assert_eq!(lines[0], "many/f0000.txt");
    assert_eq!(lines[999], "many/f0999.txt");
    // Component-wise ordering: `a/b` before `a-b` would differ from plain string order.
    h.write("o/a-b", "");
    h.write("o/a/b", "");
    let r = h.call("Glob", json!({"pattern": "o/**", "include_dirs": false})).await;
    assert_eq!(text(&r), "o/a/b\no/a-b");
}

#[tokio::test]
async fn glob_errors() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Glob", json!({"pattern": "**/*.py"})).await;
    assert!(r.is_error);
    assert!(r.message.starts_with("Pattern `**/*.py` starts with '**' which is not allowed."));
    assert_eq!(brief(&r), Some("Unsafe pattern"));
    assert!(text(&r).lines().any(|l| l.ends_with(" a.txt") && l.starts_with("-rw")), "{}", text(&r));
    let r = h.call("Glob", json!({"pattern": "*", "directory": "sub"})).await;
    assert_eq!(r.message, "`sub` is not an absolute path. You must provide an absolute path to search.");
    assert_eq!(brief(&r), Some("Invalid directory"));
    let r = h.call("Glob", json!({"pattern": "*", "directory": "/etc"})).await;
    assert_eq!(r.message, "`/etc` is outside the working directory. You can only search within the working directory.");
    assert_eq!(brief(&r), Some("Directory outside working directory"));
    let missing = h.path("missing").display().to_string();
    let r = h.call("Glob", json!({"pattern": "*", "directory": missing})).await;
    assert_eq!(r.message, format!("`{missing}` does not exist."));
    let file = h.path("a.txt").display().to_string();
    let r = h.call("Glob", json!({"pattern": "*", "directory": file})).await;
    assert_eq!(r.message, format!("`{file}` is not a directory."));
    let r = h.call("Glob", json!({"pattern": ""})).await;
    assert_eq!(r.message, "Failed to search for pattern . Error: Unacceptable pattern: ''");
    assert_eq!(brief(&r), Some("Glob failed"));
    let r = h.call("Glob", json!({"pattern": "/etc/*"})).await;
    assert_eq!(r.message, "Failed to search for pattern /etc/*. Error: Non-relative patterns are unsupported");
    // fnmatch has no braces and an unclosed `[` is literal: no errors, just literal matches.
    h.write("{a,b}.txt", "");
    let r = h.call("Glob", json!({"pattern": "{a,b}.txt"})).await;
    assert_eq!(text(&r), "{a,b}.txt");
    let r = h.call("Glob", json!({"pattern": "[.txt"})).await;
    assert_eq!(r.message, "No matches found for pattern `[.txt`.");
}

// ---------- Grep ----------

#[tokio::test]
async fn grep_files_with_matches_default() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Grep", json!({"pattern": "hello"})).await;
    assert!(!r.is_error);
    // Hidden and binary files are skipped, as ripgrep does.
    assert_eq!(text(&r), "./a.txt\n./sub/b.py\n./sub/deep/x.py\n");
    assert_eq!(r.message, "");
}

#[tokio::test]
async fn grep_content_modes() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Grep", json!({"pattern": "hello", "output_mode": "content", "path": "a.txt"})).await;
    assert_eq!(text(&r), "hello\nhello again\n");
    let r = h.call("Grep", json!({"pattern": "hello", "output_mode": "content", "-n": true, "glob": "*.txt"})).await;
    assert_eq!(text(&r), "./a.txt:1:hello\n./a.txt:3:hello again\n");
    let r = h.call("Grep", json!({"pattern": "^hello$", "output_mode": "content", "-C": 1, "path": "."})).await;
    assert_eq!(text(&r), "./a.txt:hello\n./a.txt-world\n--\n./sub/b.py-x\n./sub/b.py:hello\n");
    let r = h.call("Grep", json!({"pattern": "again", "output_mode": "content", "-B": 1, "-n": true})).await;
    assert_eq!(text(&r), "./a.txt-2-world\n./a.txt:3:hello again\n");
    let r = h.call("Grep", json!({"pattern": "hello", "output_mode": "count_matches"})).await;
    assert_eq!(text(&r), "./a.txt:2\n./sub/b.py:1\n./sub/deep/x.py:1\n");
    // A type (or glob) whitelist lets hidden files through, exactly as in ripgrep.
    let r = h.call("Grep", json!({"pattern": "HELLO", "-i": true, "type": "py"})).await;
    assert_eq!(text(&r), "./.hidden.py\n./sub/b.py\n./sub/deep/x.py\n");
    let abs = h.path("sub").display().to_string();
    let r = h.call("Grep", json!({"pattern": "hello", "path": abs})).await;
    assert_eq!(text(&r), format!("{abs}/b.py\n{abs}/deep/x.py\n"));
    let r = h.call("Grep", json!({"pattern": "hello", "path": "sub"})).await;
    assert_eq!(text(&r), "sub/b.py\nsub/deep/x.py\n");
    // Context options only apply in content mode.
    let r = h.call("Grep", json!({"pattern": "world", "-C": 3, "-n": true})).await;
    assert_eq!(text(&r), "./a.txt\n");
    // An explicitly named binary file is searched, with ripgrep's notice.
    let r = h.call("Grep", json!({"pattern": "hello", "output_mode": "content", "path": "bin.dat"})).await;
    assert_eq!(text(&r), "binary file matches (found \"\\0\" byte around offset 3)\n");
}

#[tokio::test]
async fn grep_multiline() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Grep", json!({"pattern": "hello.world", "output_mode": "content"})).await;
    assert_eq!(r.message, "No matches found.");
    let r = h
        .call("Grep", json!({"pattern": "hello.world", "output_mode": "content", "multiline": true, "-n": true}))
        .await;
    assert_eq!(text(&r), "./a.txt:1:hello\n./a.txt:2:world\n");
}

#[tokio::test]
async fn grep_head_limit_quirk() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Grep", json!({"pattern": "hello", "head_limit": 2})).await;
    assert_eq!(text(&r), "./a.txt\n./sub/b.py\n... (results truncated to 2 lines)");
    assert_eq!(r.message, "Results truncated to first 2 lines.");
    // Three lines plus the empty element after the final newline: a limit of 3 still truncates.
    let r = h.call("Grep", json!({"pattern": "hello", "head_limit": 3})).await;
    assert_eq!(text(&r), "./a.txt\n./sub/b.py\n./sub/deep/x.py\n... (results truncated to 3 lines)");
    let r = h.call("Grep", json!({"pattern": "hello", "head_limit": 4})).await;
    assert_eq!(r.message, "");
}

#[tokio::test]
async fn grep_errors_are_output() {
    let h = harness(true);
    tree(&h);
    let r = h.call("Grep", json!({"pattern": "("})).await;
    assert!(!r.is_error);
    assert!(text(&r).starts_with("regex parse error:"), "{}", text(&r));
    assert!(text(&r).contains("unclosed group"));
    let r = h.call("Grep", json!({"pattern": "x", "type": "nosuchtype"})).await;
    assert!(!r.is_error);
    assert_eq!(text(&r), "unrecognized file type: nosuchtype\n");
    let r = h.call("Grep", json!({"pattern": "x", "path": "missing"})).await;
    assert!(!r.is_error);
    assert!(text(&r).starts_with("rg: missing: "), "{}", text(&r));
    let r = h.call("Grep", json!({"pattern": "zzz_nothing"})).await;
    assert_eq!(text(&r), "");
    assert_eq!(r.message, "No matches found.");
    let r = h.call("Grep", json!({"pattern": "x", "before_context": 2, "-B": "two"})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
}

#[tokio::test]
async fn grep_respects_gitignore_in_repos_and_non_utf8() {
    let h = harness(true);
    std::fs::create_dir(h.path(".git")).unwrap();
    h.write(".gitignore", "ignored/\n");
    h.write("ignored/x.txt", "needle\n");
    h.write("kept.txt", b"needle \xff\n");
    let r = h.call("Grep", json!({"pattern": "needle", "output_mode": "content"})).await;
    assert_eq!(text(&r), "./kept.txt:needle \u{FFFD}\n");
    let r = h.call("Grep", json!({"pattern": "needle", "glob": "*.txt", "path": "ignored"})).await;
    // Walking into an ignored directory named explicitly searches it.
    assert_eq!(text(&r), "ignored/x.txt\n");
}

#[tokio::test]
async fn grep_long_lines_are_truncated() {
    let h = harness(true);
    h.write("long.txt", format!("needle{}\n", "x".repeat(5000)));
    let r = h.call("Grep", json!({"pattern": "needle", "output_mode": "content"})).await;
    assert!(text(&r).ends_with("[...truncated]\n"));
    assert_eq!(text(&r).chars().count(), 2000);
    assert_eq!(r.message, "Output is truncated to fit in the message.");
}

// ---------- Review: adversarial trees ----------

/// Symlink loops and non-UTF-8 names neither hang nor fail Glob and Grep.
#[tokio::test]
async fn symlink_loops_and_non_utf8_names() {
    use std::os::unix::ffi::OsStrExt;
    let h = harness(true);
    h.write("d/a.txt", "needle\n");
    std::os::unix::fs::symlink("..", h.path("d/up")).unwrap();
    std::os::unix::fs::symlink("self", h.path("d/self")).unwrap();
    let odd = h.path("d").join(std::ffi::OsStr::from_bytes(b"n\xffme.txt"));
    std::fs::write(&odd, "needle\n").unwrap();
    let r = h.call("Glob", json!({"pattern": "d/**"})).await;
    assert!(!r.is_error, "{}", r.message);
    assert_eq!(text(&r), "d\nd/a.txt\nd/n\u{FFFD}me.txt\nd/self\nd/up");
    let r = h.call("Glob", json!({"pattern": "d/*/*/a.txt"})).await;
    assert_eq!(text(&r), "d/up/d/a.txt");
    let r = h.call("Grep", json!({"pattern": "needle", "path": "d"})).await;
    assert!(!r.is_error, "{}", r.message);
    assert_eq!(text(&r), "d/a.txt\nd/n\u{FFFD}me.txt\n");
}

/// docs/tools.md §9: `-A`/`-B`/`-C`/`head_limit` are plain "integer or null" (no minimum in the
/// schema). A negative context is ripgrep's error, returned as output (not a validation error);
/// a negative `head_limit` slices like Python (`lines[:-1]`).
#[tokio::test]
async fn grep_negative_numbers_follow_the_reference() {
    let h = harness(true);
    tree(&h);
    let schema = serde_json::Value::Object((*h.toolset.get("Grep").unwrap().spec().parameters).clone());
    for key in ["-A", "-B", "-C", "head_limit"] {
        assert_eq!(schema["properties"][key]["type"], json!(["integer", "null"]), "{key}");
        assert!(schema["properties"][key].get("minimum").is_none(), "{key}: {}", schema["properties"][key]);
    }
    let r = h.call("Grep", json!({"pattern": "hello", "output_mode": "content", "-B": -1})).await;
    assert!(!r.is_error, "{}", r.message);
    assert!(text(&r).contains("--before-context"), "{}", text(&r));
    // Outside content mode the context flags are not passed to ripgrep at all.
    let r = h.call("Grep", json!({"pattern": "hello", "-B": -1})).await;
    assert_eq!(text(&r), "./a.txt\n./sub/b.py\n./sub/deep/x.py\n");
    let r = h.call("Grep", json!({"pattern": "hello", "head_limit": -2})).await;
    assert_eq!(text(&r), "./a.txt\n./sub/b.py\n... (results truncated to -2 lines)");
    assert_eq!(r.message, "Results truncated to first -2 lines.");
}
