//! `kiwi sessions` and `kiwi export` against sessions a real wire run stored
//! (`docs/subcommands.md` §6, §7).

use crate::common;

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::Env;
use serde_json::{Value, json};

fn kiwi(env: &Env, cwd: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs one prompt in a new session of the env's work dir; returns the session id.
fn one_turn(env: &Env, prompt: &str) -> String {
    let config = env.scripted_config(&["text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.initialize();
    let (_, resp) = k.prompt("p1", json!(prompt));
    assert_eq!(resp["result"]["status"], "finished", "{resp}");
    k.close_stdin();
    k.wait_exit(common::TIMEOUT).unwrap();
    let root = env.session_dir("x");
    let root = root.parent().unwrap();
    let mut ids: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.file_name().to_string_lossy().to_string()))
        .collect();
    ids.sort();
    ids.pop().unwrap().1
}

#[test]
fn sessions_lists_every_work_dir_with_titles() {
    let env = Env::new();
    let o = kiwi(&env, &env.work(), &["sessions"], "");
    assert_eq!((o.status.code(), out(&o)), (Some(0), "No sessions found.\n".to_string()));
    let o = kiwi(&env, &env.work(), &["sessions", "--json"], "");
    assert_eq!(out(&o), "[]\n");
    assert!(!env.share().join("kimi.json").exists(), "listing writes nothing");

    let id = one_turn(&env, "fix   the\ntests please");
    let o = kiwi(&env, &env.work(), &["sessions", "--json"], "");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let list: Value = serde_json::from_str(out(&o).trim()).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["session_id"], id.as_str());
    assert_eq!(list[0]["title"], "fix the tests please");
    assert_eq!(list[0]["work_dir"], env.work().to_str().unwrap());
    assert_eq!(list[0]["archived"], false);
    assert!(list[0]["updated_at"].as_str().unwrap().ends_with('Z'));
    assert!(Path::new(list[0]["session_dir"].as_str().unwrap()).join("context.jsonl").is_file());

    let text = out(&kiwi(&env, &env.work(), &["sessions"], ""));
    assert!(
        text.starts_with(&id) && text.contains(env.work().to_str().unwrap()) && text.contains("fix the tests"),
        "{text}"
    );
    let o = kiwi(&env, &env.work(), &["sessions", "--archived", "--json"], "");
    assert_eq!(out(&o), "[]\n");
}

fn zip_names(path: &Path) -> Vec<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).unwrap().read_to_end(&mut bytes).unwrap();
    assert_eq!(&bytes[..4], b"PK\x03\x04", "a ZIP archive");
    // Central directory entries: signature PK\x01\x02, name length at +28, name at +46.
    let mut names = Vec::new();
    let mut i = 0;
    while i + 46 <= bytes.len() {
        if &bytes[i..i + 4] == b"PK\x01\x02" {
            let len = u16::from_le_bytes([bytes[i + 28], bytes[i + 29]]) as usize;
            names.push(String::from_utf8_lossy(&bytes[i + 46..i + 46 + len]).into_owned());
            i += 46 + len;
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn export_writes_the_session_as_a_zip() {
    let env = Env::new();
    let id = one_turn(&env, "hello");
    let elsewhere = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();

    // By id, from another directory: found across work dirs, written to the cwd.
    let o = kiwi(&env, &elsewhere, &["export", &id], "");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let target = elsewhere.join(format!("session-{id}.zip"));
    assert_eq!(out(&o), format!("{}\n", target.display()));
    let names = zip_names(&target);
    for expected in ["context.jsonl", "wire.jsonl", "state.json"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    assert!(names.iter().all(|n| !n.contains("..") && !n.starts_with('/')));

    // -o and the previous session of the work dir, confirmed or not.
    let chosen = env.dir.path().join("out/archive.zip");
    let o = kiwi(&env, &env.work(), &["export", "-o", chosen.to_str().unwrap(), "-y"], "");
    assert_eq!((o.status.code(), out(&o)), (Some(0), format!("{}\n", chosen.display())), "{}", err(&o));
    let o = kiwi(&env, &env.work(), &["export", "-o", chosen.to_str().unwrap()], "n\n");
    assert!(out(&o).contains(&format!("Session ID: {id}")) && out(&o).ends_with("Export cancelled.\n"), "{}", out(&o));
    assert_eq!(o.status.code(), Some(0));
    let o = kiwi(&env, &env.work(), &["export"], "");
    assert_eq!(o.status.code(), Some(1), "end of input aborts");

    // Errors.
    let o = kiwi(&env, &elsewhere, &["export", "-y"], "");
    assert_eq!(
        (o.status.code(), err(&o)),
        (Some(1), "Error: no previous session found for the working directory.\n".into())
    );
    let missing = uuid_like();
    let o = kiwi(&env, &elsewhere, &["export", &missing], "");
    assert_eq!((o.status.code(), err(&o)), (Some(1), format!("Error: session '{missing}' not found.\n")));
    let o = kiwi(&env, &elsewhere, &["export", "../../etc"], "");
    assert_eq!(o.status.code(), Some(1));
    assert!(!elsewhere.join("session-../../etc.zip").exists());
}

fn uuid_like() -> String {
    "00000000-0000-4000-8000-000000000000".into()
}
