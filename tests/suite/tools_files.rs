//! ReadFile, ReadMediaFile, WriteFile and StrReplaceFile.

use crate::tools_support;

use std::os::unix::fs::PermissionsExt;

use kiwi::config::Config;
use kiwi::llm::Capability;
use kiwi::protocol::{ApprovalDecision, ContentPart, ToolOutput};
use serde_json::json;
use tools_support::*;

// ---------- ReadFile ----------

#[tokio::test]
async fn read_file_numbers_lines() {
    let h = harness(true);
    h.write("a.txt", "line1\nline2\n");
    let r = h.call("ReadFile", json!({"path": "a.txt"})).await;
    assert!(!r.is_error);
    assert_eq!(text(&r), "     1\tline1\n     2\tline2\n");
    assert_eq!(r.message, "2 lines read from file starting from line 1. End of file reached.");
}

#[tokio::test]
async fn read_file_offset_limit_and_universal_newlines() {
    let h = harness(true);
    h.write("a.txt", "a\r\nb\rc\nd");
    let r = h.call("ReadFile", json!({"path": h.path("a.txt"), "line_offset": 2, "n_lines": 2})).await;
    assert_eq!(text(&r), "     2\tb\n     3\tc\n");
    assert_eq!(r.message, "2 lines read from file starting from line 2.");
    let r = h.call("ReadFile", json!({"path": "a.txt", "line_offset": 4})).await;
    assert_eq!(text(&r), "     4\td");
    let r = h.call("ReadFile", json!({"path": "a.txt", "line_offset": 10})).await;
    assert_eq!(text(&r), "");
    assert_eq!(r.message, "No lines read from file. End of file reached.");
}

#[tokio::test]
async fn read_file_truncates_long_lines_and_caps() {
    let h = harness(true);
    h.write("long.txt", format!("a\nb\n{}\nd\n", "x".repeat(3000)));
    let r = h.call("ReadFile", json!({"path": "long.txt"})).await;
    assert_eq!(
        r.message,
        "4 lines read from file starting from line 1. End of file reached. Lines [3] were truncated."
    );
    let third = text(&r).lines().nth(2).unwrap();
    assert_eq!(third, format!("     3\t{}...", "x".repeat(1996)));

    let many: String = (1..=1500).map(|i| format!("{i}\n")).collect();
    h.write("many.txt", many);
    let r = h.call("ReadFile", json!({"path": "many.txt", "n_lines": 1000})).await;
    assert_eq!(r.message, "1000 lines read from file starting from line 1.");
    let r = h.call("ReadFile", json!({"path": "many.txt", "n_lines": 2000})).await;
    assert_eq!(r.message, "1000 lines read from file starting from line 1. Max 1000 lines reached.");

    // 200 lines of 1,000 bytes: the byte cap (102,400) stops the read first.
    let big: String = (0..200).map(|_| format!("{}\n", "y".repeat(999))).collect();
    h.write("big.txt", big);
    let r = h.call("ReadFile", json!({"path": "big.txt"})).await;
    assert!(r.message.starts_with("103 lines read"), "{}", r.message);
    assert!(r.message.ends_with("Max 102400 bytes reached."));

    // One enormous line without newline: bounded memory, still truncated.
    h.write("huge.txt", "z".repeat(20 << 20));
    let r = h.call("ReadFile", json!({"path": "huge.txt"})).await;
    assert_eq!(
        r.message,
        "1 lines read from file starting from line 1. End of file reached. Lines [1] were truncated."
    );
    assert_eq!(text(&r).chars().count(), 7 + 2000);
}

#[tokio::test]
async fn read_file_errors() {
    let h = harness(true);
    std::fs::create_dir(h.path("dir")).unwrap();
    h.write("img.png", b"\x89PNG\r\n\x1a\n0000");
    h.write("blob.dat", b"abc\x00def");
    h.write("doc.pdf", b"%PDF-1.4");
    let cases = [
        (json!({"path": ""}), "File path cannot be empty.", "Empty file path"),
        (json!({"path": "missing.txt"}), "`missing.txt` does not exist.", "File not found"),
        (json!({"path": "dir"}), "`dir` is not a file.", "Invalid path"),
        (
            json!({"path": "../outside.txt"}),
            "`../outside.txt` is not an absolute path. You must provide an absolute path to read a file outside the working directory.",
            "Invalid path",
        ),
        (
            json!({"path": "img.png"}),
            "`img.png` is a image file. Use other appropriate tools to read image or video files.",
            "Unsupported file type",
        ),
    ];
    for (args, message, b) in cases {
        let r = h.call("ReadFile", args).await;
        assert!(r.is_error);
        assert_eq!(r.message, message);
        assert_eq!(brief(&r), Some(b));
    }
    for p in ["blob.dat", "doc.pdf"] {
        let r = h.call("ReadFile", json!({"path": p})).await;
        assert!(r.message.starts_with(&format!("`{p}` seems not readable.")), "{}", r.message);
        assert_eq!(brief(&r), Some("File not readable"));
    }
    let r = h.call("ReadFile", json!({"path": "a", "line_offset": 0})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
    let r = h.call("ReadFile", json!({"path": "a", "n_lines": 0})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
    // Absolute paths outside the work dir are allowed.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("o.txt"), "out\n").unwrap();
    let r = h.call("ReadFile", json!({"path": other.path().join("o.txt")})).await;
    assert_eq!(text(&r), "     1\tout\n");
}

#[tokio::test]
async fn read_file_non_utf8_is_replaced() {
    let h = harness(true);
    h.write("latin.txt", b"caf\xe9\n");
    let r = h.call("ReadFile", json!({"path": "latin.txt"})).await;
    assert_eq!(text(&r), "     1\tcaf\u{FFFD}\n");
}

#[tokio::test]
async fn read_file_permission_denied() {
    if unsafe { libc::geteuid() } == 0 {
        return; // root reads anything
    }
    let h = harness(true);
    let p = h.write("secret.txt", "s");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    let r = h.call("ReadFile", json!({"path": "secret.txt"})).await;
    assert!(r.message.starts_with("Failed to read secret.txt. Error:"), "{}", r.message);
    assert_eq!(brief(&r), Some("Failed to read file"));
}

// ---------- ReadMediaFile ----------

fn png_1x2() -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend_from_slice(&1u32.to_be_bytes());
    v.extend_from_slice(&2u32.to_be_bytes());
    v.extend_from_slice(b"\x08\x06\x00\x00\x00");
    v
}

#[tokio::test]
async fn read_media_only_offered_with_media_capabilities() {
    let h = harness(true);
    let r = h.call("ReadMediaFile", json!({"path": "x.png"})).await;
    assert_eq!(r.message, "Tool `ReadMediaFile` not found");
    let h = harness_with(true, Config::default(), &[Capability::VideoIn]);
    assert!(h.toolset.get("ReadMediaFile").is_some());
}

#[tokio::test]
async fn read_media_loads_images_as_data_urls() {
    let h = harness_with(true, Config::default(), &[Capability::ImageIn]);
    let p = h.write("pic.png", png_1x2());
    let r = h.call("ReadMediaFile", json!({"path": "pic.png"})).await;
    assert!(!r.is_error, "{r:?}");
    let ToolOutput::Parts(parts) = &r.output else { panic!("parts expected") };
    assert_eq!(parts[0], ContentPart::text(format!("<image path=\"{}\">", p.display())));
    match &parts[1] {
        ContentPart::ImageUrl { image_url } => assert!(image_url.url.starts_with("data:image/png;base64,iVBORw0KGgo")),
        other => panic!("{other:?}"),
    }
    assert_eq!(parts[2], ContentPart::text("</image>"));
    assert!(r.message.starts_with(&format!(
        "Loaded image file `{}` (image/png, {} bytes, original size 1x2px).",
        p.display(),
        png_1x2().len()
    )));
}

#[tokio::test]
async fn read_media_errors() {
    let h = harness_with(true, Config::default(), &[Capability::ImageIn]);
    h.write("t.txt", "hello");
    h.write("empty.png", "");
    h.write("v.mp4", "0000");
    h.write("blob.bin", b"\x00\x01");
    let r = h.call("ReadMediaFile", json!({"path": "t.txt"})).await;
    assert_eq!(r.message, "`t.txt` is a text file. Use ReadFile to read text files.");
    assert_eq!(brief(&r), Some("Unsupported file type"));
    let r = h.call("ReadMediaFile", json!({"path": "empty.png"})).await;
    assert_eq!(r.message, "`empty.png` is empty.");
    assert_eq!(brief(&r), Some("Empty file"));
    let r = h.call("ReadMediaFile", json!({"path": "v.mp4"})).await;
    assert_eq!(brief(&r), Some("Unsupported media type"));
    let r = h.call("ReadMediaFile", json!({"path": "blob.bin"})).await;
    assert!(r.message.starts_with("`blob.bin` seems not readable as an image or video file."));
    let r = h.call("ReadMediaFile", json!({"path": "nope.png"})).await;
    assert_eq!(r.message, "`nope.png` does not exist.");
    // Larger than 100 MiB (sparse file).
    let f = std::fs::File::create(h.path("big.png")).unwrap();
    f.set_len((100 << 20) + 1).unwrap();
    let r = h.call("ReadMediaFile", json!({"path": "big.png"})).await;
    assert_eq!(
        r.message,
        format!("`big.png` is {} bytes, which exceeds the max 100MB bytes for media files.", (100 << 20) + 1)
    );
    assert_eq!(brief(&r), Some("File too large"));
}

// ---------- WriteFile ----------

#[tokio::test]
async fn write_file_creates_appends_and_reports_diffs() {
    let h = harness(true);
    let r = h.call("WriteFile", json!({"path": "new.txt", "content": "a\nb\n"})).await;
    assert!(!r.is_error);
    assert_eq!(text(&r), "");
    assert_eq!(r.message, "File successfully overwritten. Current size: 4 bytes.");
    let abs = h.path("new.txt").display().to_string();
    assert_eq!(diffs(&r.display), vec![(abs.clone(), String::new(), "a\nb".to_string())]);
    let r = h.call("WriteFile", json!({"path": abs, "content": "c\n", "mode": "append"})).await;
    assert_eq!(r.message, "File successfully appended to. Current size: 6 bytes.");
    assert_eq!(std::fs::read_to_string(h.path("new.txt")).unwrap(), "a\nb\nc\n");
    assert_eq!(diffs(&r.display), vec![(abs, "a\nb".to_string(), "a\nb\nc".to_string())]);
    // Same content: no diff blocks.
    let r = h.call("WriteFile", json!({"path": "new.txt", "content": "a\nb\nc\n"})).await;
    assert!(r.display.is_empty());
}

#[tokio::test]
async fn write_file_errors() {
    let h = harness(true);
    std::fs::create_dir(h.path("dir")).unwrap();
    let r = h.call("WriteFile", json!({"path": "", "content": "x"})).await;
    assert_eq!(r.message, "File path cannot be empty.");
    let r = h.call("WriteFile", json!({"path": "no/such/file.txt", "content": "x"})).await;
    assert_eq!(r.message, "`no/such/file.txt` parent directory does not exist.");
    assert_eq!(brief(&r), Some("Parent directory not found"));
    let r = h.call("WriteFile", json!({"path": "../x.txt", "content": "x"})).await;
    assert_eq!(
        r.message,
        "`../x.txt` is not an absolute path. You must provide an absolute path to write a file outside the working directory."
    );
    // `docs/tools.md` §19.4: a non-regular target gets ReadFile's error before anything is read (the
    // reference failed on the write with "Failed to write to dir. Error: ...").
    let r = h.call("WriteFile", json!({"path": "dir", "content": "x"})).await;
    assert_eq!(r.message, "`dir` is not a file.");
    assert_eq!(brief(&r), Some("Invalid path"));
    let r = h.call("WriteFile", json!({"path": "a.txt", "content": "x", "mode": "truncate"})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
}

/// `docs/tools.md` §19.5: a content above the 10 MiB edit limit is refused before anything is read or
/// asked.
#[tokio::test]
async fn write_file_refuses_oversized_content() {
    let mut h = harness(false);
    let content = "y".repeat((10 << 20) + 1);
    let (r, req) =
        h.call_answering("WriteFile", json!({"path": "new.txt", "content": content}), ApprovalDecision::Approve).await;
    assert!(req.is_none());
    assert_eq!(
        r.message,
        "The content is 10485761 bytes, which exceeds the max 10 MiB (10485760 bytes) for editing files. Nothing \
         was changed; use shell commands for files this large."
    );
    assert_eq!(brief(&r), Some("File too large"));
    assert!(!h.path("new.txt").exists());
}

#[tokio::test]
async fn write_file_approval_actions() {
    let mut h = harness(false);
    let (r, req) =
        h.call_answering("WriteFile", json!({"path": "in.txt", "content": "x\n"}), ApprovalDecision::Reject).await;
    let req = req.unwrap();
    let abs = h.path("in.txt").display().to_string();
    assert_eq!(req.sender, "WriteFile");
    assert_eq!(req.action, "edit file");
    assert_eq!(req.description, format!("Write file `{abs}`"));
    assert_eq!(diffs(&req.display), vec![(abs, String::new(), "x".to_string())]);
    assert_eq!(r.kind(), kiwi::protocol::ResultKind::Rejected);
    assert!(!h.path("in.txt").exists());

    let other = tempfile::tempdir().unwrap();
    let out = other.path().join("o.txt");
    let (r, req) = h.call_answering("WriteFile", json!({"path": out, "content": "y"}), ApprovalDecision::Approve).await;
    assert_eq!(req.unwrap().action, "edit file outside of working directory");
    assert!(!r.is_error);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "y");
}

// ---------- StrReplaceFile ----------

#[tokio::test]
async fn str_replace_single_and_multiple_edits() {
    let h = harness(true);
    h.write("c.py", "a = 1\nb = a\nc = a\n");
    let r = h.call("StrReplaceFile", json!({"path": "c.py", "edit": {"old": "a", "new": "x"}})).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.message, "File successfully edited. Applied 1 edit(s) with 1 total replacement(s).");
    assert_eq!(std::fs::read_to_string(h.path("c.py")).unwrap(), "x = 1\nb = a\nc = a\n");
    assert_eq!(diffs(&r.display).len(), 1);
    let r = h
        .call(
            "StrReplaceFile",
            json!({"path": "c.py", "edit": [{"old": "a", "new": "y", "replace_all": true}, {"old": "x = 1", "new": "x = 2"}]}),
        )
        .await;
    assert_eq!(r.message, "File successfully edited. Applied 2 edit(s) with 3 total replacement(s).");
    assert_eq!(std::fs::read_to_string(h.path("c.py")).unwrap(), "x = 2\nb = y\nc = y\n");
}

#[tokio::test]
async fn str_replace_crlf_is_written_back_as_lf() {
    let h = harness(true);
    h.write("w.txt", "one\r\ntwo\r\n");
    let r = h.call("StrReplaceFile", json!({"path": "w.txt", "edit": {"old": "two", "new": "2"}})).await;
    assert!(!r.is_error);
    assert_eq!(std::fs::read_to_string(h.path("w.txt")).unwrap(), "one\n2\n");
}

#[tokio::test]
async fn str_replace_errors_and_approval() {
    let mut h = harness(false);
    h.write("f.txt", "hello\n");
    std::fs::create_dir(h.path("d")).unwrap();
    let (r, req) = h
        .call_answering(
            "StrReplaceFile",
            json!({"path": "f.txt", "edit": {"old": "nope", "new": "x"}}),
            ApprovalDecision::Approve,
        )
        .await;
    assert!(req.is_none(), "no approval for a no-op edit");
    assert_eq!(r.message, "No replacements were made. The old string was not found in the file.");
    assert_eq!(brief(&r), Some("No replacements made"));
    let r = h.call("StrReplaceFile", json!({"path": "gone.txt", "edit": {"old": "a", "new": "b"}})).await;
    assert_eq!(r.message, "`gone.txt` does not exist.");
    let r = h.call("StrReplaceFile", json!({"path": "d", "edit": {"old": "a", "new": "b"}})).await;
    assert_eq!(r.message, "`d` is not a file.");
    let r = h.call("StrReplaceFile", json!({"path": "../f.txt", "edit": {"old": "a", "new": "b"}})).await;
    assert!(r.message.ends_with("You must provide an absolute path to edit a file outside the working directory."));
    let r = h.call("StrReplaceFile", json!({"path": "f.txt", "edit": {"old": "a"}})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));

    let (r, req) = h
        .call_answering(
            "StrReplaceFile",
            json!({"path": "f.txt", "edit": {"old": "hello", "new": "bye"}}),
            ApprovalDecision::Reject,
        )
        .await;
    let req = req.unwrap();
    let abs = h.path("f.txt").display().to_string();
    assert_eq!((req.sender.as_str(), req.action.as_str()), ("StrReplaceFile", "edit file"));
    assert_eq!(req.description, format!("Edit file `{abs}`"));
    assert_eq!(diffs(&req.display), vec![(abs, "hello".to_string(), "bye".to_string())]);
    assert_eq!(r.kind(), kiwi::protocol::ResultKind::Rejected);
    assert_eq!(std::fs::read_to_string(h.path("f.txt")).unwrap(), "hello\n");
}

#[tokio::test]
async fn approve_for_session_covers_later_edits() {
    let mut h = harness(false);
    let (r, req) = h
        .call_answering("WriteFile", json!({"path": "a.txt", "content": "1"}), ApprovalDecision::ApproveForSession)
        .await;
    assert!(req.is_some() && !r.is_error);
    // Now approved silently: no request is sent.
    let r = h.call("WriteFile", json!({"path": "b.txt", "content": "2"})).await;
    assert!(!r.is_error);
}

// ---------- Review: diff parity, missing-path rules ----------

/// `docs/tools.md` §6.1: the hunks are those of `difflib.SequenceMatcher(None, old, new,
/// autojunk=False).get_grouped_opcodes(3)`. The fixture was produced by Python's difflib on
/// random small-alphabet texts (where many minimal diffs exist) plus hand-picked cases: changes
/// 6 and 7 unchanged lines apart, moved blocks, blank lines, `\u2028`, empty sides.
#[test]
fn diff_blocks_match_python_difflib() {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("../tools_support/difflib_cases.json")).expect("fixture");
    let mut differing = Vec::new();
    for (i, case) in cases.as_array().expect("array").iter().enumerate() {
        let old = case["old"].as_str().unwrap();
        let new = case["new"].as_str().unwrap();
        let got: Vec<(String, String)> =
            diffs(&kiwi::tools::diff::diff_blocks("/p", old, new)).into_iter().map(|(_, o, n)| (o, n)).collect();
        let want: Vec<(String, String)> = case["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b[0].as_str().unwrap().to_string(), b[1].as_str().unwrap().to_string()))
            .collect();
        if got != want {
            differing.push((i, got, want));
        }
    }
    assert!(differing.is_empty(), "{} cases differ from difflib: {:#?}", differing.len(), differing.first());
}

/// Big files still diff promptly (difflib's matcher is quadratic in the worst case; the
/// implementation must stay usable on a large, repetitive file).
#[test]
fn diff_of_large_repetitive_file_is_fast() {
    // Just under the 10,000 lines above which only a summary is made (`docs/protocol-1.10.md` §3.3).
    let old: String =
        (0..9_990).map(|i| if i % 3 == 0 { "\n".to_string() } else { format!("l{}\n", i % 50) }).collect();
    let new = format!("head\n{old}tail\n");
    let start = std::time::Instant::now();
    let blocks = diffs(&kiwi::tools::diff::diff_blocks("/p", &old, &new));
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].2.lines().next(), Some("head"));
}

/// `docs/tools.md` §4 step 3 / §7 step 1: a path that cannot exist (a regular file used as a
/// directory, a symlink loop, an embedded NUL) is reported as missing, like Python's
/// `Path.exists()` returning False, not as a read failure.
#[tokio::test]
async fn unreachable_paths_do_not_exist() {
    let h = harness_with(true, Config::default(), &[Capability::ImageIn]);
    h.write("f.txt", "x\n");
    std::os::unix::fs::symlink("loop", h.path("loop")).unwrap();
    for p in ["f.txt/inner", "loop", "nul\u{0}byte"] {
        for tool in ["ReadFile", "ReadMediaFile"] {
            let r = h.call(tool, json!({"path": p})).await;
            assert_eq!(r.message, format!("`{p}` does not exist."), "{tool}");
            assert_eq!(brief(&r), Some("File not found"));
        }
        let r = h.call("StrReplaceFile", json!({"path": p, "edit": {"old": "x", "new": "y"}})).await;
        assert_eq!(r.message, format!("`{p}` does not exist."));
        assert_eq!(brief(&r), Some("File not found"));
    }
}
