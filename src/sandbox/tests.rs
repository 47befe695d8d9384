//! The policy's paths and texts (the mechanism itself is tested end to end in
//! tests/suite/sandbox.rs).

use super::*;

fn sandbox(mode: SandboxMode, settings: SandboxSettings, share: &Path) -> Sandbox {
    let mut s = Sandbox::new(settings, Some(mode), false, share.to_path_buf(), Vec::new());
    s.tmpdir = None;
    s
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn roots_and_protected_paths() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    let added = dir.path().join("added");
    let extra = dir.path().join("extra");
    for d in [&work, &added, &extra, &work.join(".git"), &work.join(".codex"), &added.join(".claude")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let gitdir = dir.path().join("w/realgit");
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::write(added.join(".git"), "gitdir: ../w/realgit\n").unwrap();
    let settings = SandboxSettings {
        writable_roots: vec![extra.clone(), dir.path().join("missing")],
        read_only_paths: vec![work.join("locked")],
        exclude_slash_tmp: true,
        ..Default::default()
    };
    std::fs::create_dir_all(work.join("locked")).unwrap();
    let share = work.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let s = sandbox(SandboxMode::WorkspaceWrite, settings, &share);
    let p = s.paths_for(&work, std::slice::from_ref(&added));
    assert_eq!(p.writable_roots, [real(&work), real(&added), real(&extra)]);
    for expected in [
        work.join(".git"),
        work.join(".codex"),
        added.join(".claude"),
        added.join(".git"),
        gitdir,
        share.clone(),
        work.join("locked"),
    ] {
        assert!(p.read_only.contains(&real(&expected)), "{expected:?} in {:?}", p.read_only);
    }
    assert!(!p.writable_roots.iter().any(|r| r.starts_with("/tmp") && !r.starts_with(real(dir.path()))));
    // The file tools' verdicts, on resolved paths.
    assert_eq!(s.check_write(Path::new("new.txt"), &work, &[]), WriteVerdict::Allowed);
    assert_eq!(s.check_write(Path::new(".git/hooks/pre-commit"), &work, &[]), WriteVerdict::ReadOnlyPath);
    assert_eq!(s.check_write(Path::new("../outside.txt"), &work, &[]), WriteVerdict::OutsideRoots);
    std::os::unix::fs::symlink("/etc", work.join("link")).unwrap();
    assert_eq!(s.check_write(Path::new("link/x"), &work, &[]), WriteVerdict::OutsideRoots);
    let ro = sandbox(SandboxMode::ReadOnly, SandboxSettings::default(), &share);
    assert_eq!(ro.check_write(Path::new("new.txt"), &work, &[]), WriteVerdict::ReadOnlyMode);
    assert!(ro.paths_for(&work, &[]).writable_roots.is_empty());
    assert_eq!(Sandbox::off().check_write(Path::new("/etc/x"), &work, &[]), WriteVerdict::Allowed);
    assert_eq!(
        WriteVerdict::OutsideRoots.message(Path::new("/etc/x")).unwrap(),
        "Cannot write `/etc/x`: it is outside the sandbox's writable roots."
    );
}

#[test]
fn tmp_roots_follow_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    let s = sandbox(SandboxMode::WorkspaceWrite, SandboxSettings::default(), dir.path());
    let roots = s.paths_for(dir.path(), &[]).writable_roots;
    assert!(roots.contains(&real(Path::new("/tmp"))), "{roots:?}");
    let mut s = sandbox(
        SandboxMode::WorkspaceWrite,
        SandboxSettings { exclude_slash_tmp: true, ..Default::default() },
        dir.path(),
    );
    s.tmpdir = Some(dir.path().join("t"));
    std::fs::create_dir_all(dir.path().join("t")).unwrap();
    let roots = s.paths_for(dir.path(), &[]).writable_roots;
    assert!(!roots.contains(&PathBuf::from("/tmp")) && roots.contains(&real(&dir.path().join("t"))), "{roots:?}");
}

#[test]
fn deny_read_is_resolved() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("secret")).unwrap();
    let settings = SandboxSettings { deny_read: vec![dir.path().join("secret")], ..Default::default() };
    let s = sandbox(SandboxMode::WorkspaceWrite, settings.clone(), dir.path());
    assert!(s.read_denied(&dir.path().join("secret/key")));
    assert!(!s.read_denied(&dir.path().join("public")));
    assert!(!sandbox(SandboxMode::Off, settings, dir.path()).read_denied(&dir.path().join("secret/key")));
}

#[test]
fn denial_notes_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    let ww = sandbox(SandboxMode::WorkspaceWrite, SandboxSettings::default(), dir.path());
    assert_eq!(
        ww.denial_note(true),
        " The command ran in the workspace-write sandbox, which may have blocked it: commands may write only in the \
         work dir, the added dirs and the temp dirs, and cannot use the network. To run it outside the sandbox, call \
         Shell again with \"sandbox_permissions\": \"require_escalated\" and a \"justification\"; the user will be asked."
    );
    let ro = Sandbox::new(SandboxSettings::default(), Some(SandboxMode::ReadOnly), true, PathBuf::new(), Vec::new());
    assert_eq!(
        ro.denial_note(false),
        " The command ran in the read-only sandbox, which may have blocked it: commands cannot write files. It cannot \
         run outside the sandbox in this session."
    );
    assert!(looks_denied(Some(1), None, "sh: 1: cannot create /etc/x: Read-only file system"));
    assert!(looks_denied(None, Some(31), ""));
    assert!(!looks_denied(Some(0), None, "permission denied"));
    assert!(!looks_denied(Some(1), None, "no such file"));
    assert_eq!(command_not_run_message("mount: x"), "Command not run: the sandbox could not be set up (mount: x).");
}

#[test]
fn flags_win_over_the_config() {
    let settings = SandboxSettings { mode: SandboxMode::ReadOnly, network: true, ..Default::default() };
    let s = Sandbox::new(settings.clone(), Some(SandboxMode::Off), false, PathBuf::new(), Vec::new());
    assert!(!s.is_on() && s.network_allowed());
    let s = Sandbox::new(settings, None, false, PathBuf::new(), Vec::new());
    assert_eq!(s.mode(), SandboxMode::ReadOnly);
    assert!(s.network_allowed());
    let s =
        Sandbox::new(SandboxSettings::default(), Some(SandboxMode::WorkspaceWrite), true, PathBuf::new(), Vec::new());
    assert!(s.network_allowed());
    assert!(!CommandPolicy::unconfined().is_confined());
    assert!(CommandPolicy::unconfined().env().is_empty());
}
