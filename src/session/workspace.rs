//! A session's files as the web API serves them (`docs/web-api.md` §3.2): paths confined to
//! the work dir (or the uploads folder) after resolving symlinks, the extra refusals of restricted
//! mode, directory listings, and the names uploads are stored under.
//!
//! Invariants: a path is checked after every symlink in it is followed and every `..` collapsed,
//! against the resolved base: no path outside the base is ever opened; in restricted mode a
//! symlink anywhere in the requested path is refused before it is followed; stored upload names
//! contain only letters, digits, `.`, `_`, `-` and spaces, never a separator.

use std::path::{Component, Path, PathBuf};

/// The largest upload accepted.
pub const MAX_UPLOAD_BYTES: u64 = 100 * 1024 * 1024;
/// The refusal for a path outside its base.
pub const TRAVERSAL: &str = "Invalid path: path traversal not allowed";

const SENSITIVE_DIRS: [&str; 4] = [".ssh", ".gnupg", ".aws", ".kube"];
const SENSITIVE_NAMES: [&str; 11] = [
    "id_rsa",
    "id_ed25519",
    "known_hosts",
    "credentials",
    ".aws",
    ".ssh",
    ".gnupg",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".netrc",
];
const SENSITIVE_EXTENSIONS: [&str; 6] = ["pem", "key", "p12", "pfx", "kdbx", "der"];

/// Resolves `path` like Python's non-strict `Path.resolve()`: symlinks in the part that exists
/// are followed, the rest is normalized lexically. `path` must be absolute.
pub fn resolve_lenient(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut components = path.components();
    while let Some(c) = components.next() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                let next = out.join(name);
                match std::fs::canonicalize(&next) {
                    Ok(real) => out = real,
                    Err(_) => {
                        out = next;
                        for rest in components.by_ref() {
                            match rest {
                                Component::ParentDir => {
                                    out.pop();
                                }
                                Component::Normal(n) => out.push(n),
                                _ => {}
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// `relative` under `base`, resolved, when it stays inside the resolved `base` (an absolute
/// `relative` replaces the base, as a join does, and is confined the same way).
pub fn confine(base: &Path, relative: &str) -> Result<PathBuf, &'static str> {
    let root = std::fs::canonicalize(base).unwrap_or_else(|_| resolve_lenient(base));
    let rel = relative.trim_start_matches("./");
    let target = if rel.is_empty() || rel == "." { root.clone() } else { resolve_lenient(&root.join(rel)) };
    if target.starts_with(&root) { Ok(target) } else { Err(TRAVERSAL) }
}

/// The components of a requested path below the work dir (no `.`, no empty ones).
fn parts(relative: &str) -> Vec<&str> {
    relative.split('/').filter(|p| !p.is_empty() && *p != ".").collect()
}

/// Whether one name (a path component) is refused in restricted mode: hidden, or a name or
/// extension that usually holds secrets.
pub fn is_sensitive_name(name: &str) -> bool {
    if name.starts_with('.') {
        return true;
    }
    let lower = name.to_lowercase();
    if SENSITIVE_NAMES.contains(&lower.as_str()) {
        return true;
    }
    match lower.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => SENSITIVE_EXTENSIONS.contains(&ext),
        _ => false,
    }
}

/// The restricted-mode refusals for a work-dir path (`docs/web-api.md` §3.2), in
/// order: a symlink in the requested path, a sensitive system folder, too deep, a sensitive name.
pub fn check_restricted(
    work_dir: &Path,
    relative: &str,
    resolved: &Path,
    home: &Path,
    max_depth: usize,
) -> Result<(), String> {
    let parts = parts(relative);
    let mut walk = work_dir.to_path_buf();
    for p in &parts {
        walk.push(p);
        if std::fs::symlink_metadata(&walk).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err("Symbolic links are not allowed in public mode.".into());
        }
    }
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    if SENSITIVE_DIRS.iter().any(|d| resolved.starts_with(home.join(d))) {
        return Err("Access to sensitive system directories is not allowed.".into());
    }
    if parts.len() > max_depth {
        return Err(format!("Path too deep for public access (max depth: {max_depth}, current: {}).", parts.len()));
    }
    if parts.iter().any(|p| is_sensitive_name(p)) {
        return Err("Access to sensitive files is disabled.".into());
    }
    Ok(())
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

/// The entries of `dir`, directories first, then by name (code-point order); symlinks to
/// directories count as directories; `restricted` leaves out names [`is_sensitive_name`] refuses.
pub fn list_dir(dir: &Path, restricted: bool) -> std::io::Result<Vec<DirEntry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if restricted && is_sensitive_name(&name) {
            continue;
        }
        let meta = std::fs::metadata(entry.path());
        let is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
        let size = if is_dir { 0 } else { meta.map(|m| m.len()).unwrap_or(0) };
        out.push(DirEntry { name, is_dir, size });
    }
    out.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

/// The name an upload is stored under: the client's name reduced to letters, digits, `.`, `_`,
/// `-` and spaces, trimmed (`unnamed` if nothing is left), with 6 hex digits of a fresh UUID before
/// the extension; without a client name, a whole fresh UUID.
pub fn upload_name(client_name: Option<&str>) -> String {
    let fresh = uuid::Uuid::new_v4();
    let Some(name) = client_name.filter(|n| !n.is_empty()) else { return fresh.to_string() };
    let kept: String = name.chars().filter(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | ' ')).collect();
    let kept = kept.trim_matches(' ');
    let kept = if kept.is_empty() { "unnamed" } else { kept };
    let (stem, ext) = match kept.rfind('.') {
        Some(i) if i > 0 => (&kept[..i], &kept[i..]),
        _ => (kept, ""),
    };
    let tag: String = fresh.simple().to_string().chars().take(6).collect();
    format!("{stem}_{tag}{ext}")
}

/// `Content-Type` for a file name: guessed from the extension, `application/octet-stream` when
/// unknown, text types with `; charset=utf-8`.
pub fn content_type(name: &str) -> String {
    let guess = mime_guess::from_path(name).first_raw().unwrap_or("application/octet-stream");
    if guess.starts_with("text/") { format!("{guess}; charset=utf-8") } else { guess.to_string() }
}

/// `Content-Disposition` for a download: `attachment` or `inline`, with the RFC 5987 name.
pub fn content_disposition(kind: &str, name: &str) -> String {
    let encoded = percent_encoding::utf8_percent_encode(name, RFC5987).to_string();
    format!("{kind}; filename*=UTF-8''{encoded}")
}

/// Everything but RFC 5987's attr-char set is escaped.
const RFC5987: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_names_are_sanitized() {
        let n = upload_name(Some("my résumé (1).txt"));
        assert!(n.starts_with("my résumé 1_") && n.ends_with(".txt") && n.len() == "my résumé 1_".len() + 6 + 4, "{n}");
        let n = upload_name(Some("../../evil.png"));
        assert!(n.starts_with("....evil_") && n.ends_with(".png"), "{n}");
        let n = upload_name(Some("///"));
        assert!(n.starts_with("unnamed_") && n.len() == 14, "{n}");
        let n = upload_name(Some(".bashrc"));
        assert!(n.starts_with(".bashrc_"), "a leading dot starts no extension: {n}");
        assert!(uuid::Uuid::parse_str(&upload_name(None)).is_ok());
        assert!(!upload_name(Some("a/b\\c\0d")).contains(['/', '\\', '\0']));
    }

    #[test]
    fn paths_are_confined_after_resolving_symlinks() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let wd = root.path().join("wd");
        std::fs::create_dir_all(wd.join("sub")).unwrap();
        std::fs::write(wd.join("sub/a.txt"), "a").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), wd.join("out")).unwrap();
        std::os::unix::fs::symlink(wd.join("sub"), wd.join("in")).unwrap();
        let real = std::fs::canonicalize(&wd).unwrap();
        assert_eq!(confine(&wd, "").unwrap(), real);
        assert_eq!(confine(&wd, ".").unwrap(), real);
        assert_eq!(confine(&wd, "sub/a.txt").unwrap(), real.join("sub/a.txt"));
        assert_eq!(confine(&wd, "in/a.txt").unwrap(), real.join("sub/a.txt"));
        assert_eq!(confine(&wd, "sub/../sub/missing").unwrap(), real.join("sub/missing"));
        assert_eq!(confine(&wd, "../etc"), Err(TRAVERSAL));
        assert_eq!(confine(&wd, "sub/../../wd/../x"), Err(TRAVERSAL));
        assert_eq!(confine(&wd, "/etc/passwd"), Err(TRAVERSAL));
        assert_eq!(confine(&wd, "out/secret"), Err(TRAVERSAL));
        assert_eq!(confine(&wd, "out"), Err(TRAVERSAL));
        // `..` after a symlink climbs from where the link points, not lexically.
        assert_eq!(confine(&wd, "in/../sub/a.txt").unwrap(), real.join("sub/a.txt"));
    }

    #[test]
    fn restricted_mode_refusals_in_order() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let wd = home.join("wd");
        std::fs::create_dir_all(wd.join("a/b/c/d/e/f/g")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), wd.join("keys")).unwrap();
        let check = |rel: &str| {
            let resolved = confine(&wd, rel).unwrap_or_else(|_| wd.join(rel));
            check_restricted(&wd, rel, &resolved, &home, 6)
        };
        assert_eq!(check("keys").unwrap_err(), "Symbolic links are not allowed in public mode.");
        assert_eq!(
            check_restricted(&home, ".ssh/id", &home.join(".ssh/id"), &home, 6).unwrap_err(),
            "Access to sensitive system directories is not allowed."
        );
        assert_eq!(
            check("a/b/c/d/e/f/g/h").unwrap_err(),
            "Path too deep for public access (max depth: 6, current: 8)."
        );
        assert_eq!(check("key.pem").unwrap_err(), "Access to sensitive files is disabled.");
        assert_eq!(check(".hidden/s.txt").unwrap_err(), "Access to sensitive files is disabled.");
        assert_eq!(check("a/CREDENTIALS").unwrap_err(), "Access to sensitive files is disabled.");
        assert!(check("a/b/notes.txt").is_ok());
        assert!(check("").is_ok());
    }

    #[test]
    fn listings_put_directories_first_and_hide_sensitive_names_when_restricted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("zdir")).unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("b.txt"), "12345").unwrap();
        std::fs::write(dir.path().join("A.md"), "").unwrap();
        std::fs::write(dir.path().join("server.key"), "").unwrap();
        std::os::unix::fs::symlink(dir.path().join("zdir"), dir.path().join("link")).unwrap();
        let names = |r| list_dir(dir.path(), r).unwrap().into_iter().map(|e| e.name).collect::<Vec<_>>();
        assert_eq!(names(false), [".git", "link", "zdir", "A.md", "b.txt", "server.key"]);
        assert_eq!(names(true), ["link", "zdir", "A.md", "b.txt"]);
        let b = list_dir(dir.path(), false).unwrap().into_iter().find(|e| e.name == "b.txt").unwrap();
        assert_eq!(b.size, 5);
    }

    #[test]
    fn download_headers() {
        assert_eq!(content_type("a.txt"), "text/plain; charset=utf-8");
        assert_eq!(content_type("a.png"), "image/png");
        assert_eq!(content_type("noext"), "application/octet-stream");
        assert_eq!(
            content_disposition("inline", "my résumé.txt"),
            "inline; filename*=UTF-8''my%20r%C3%A9sum%C3%A9.txt"
        );
    }
}
