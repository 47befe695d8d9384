//! Opening a page in the user's browser: `kiwi login`, `kiwi mcp auth` and `kiwi web` (unless
//! `--no-open`). Each of them prints the address as well, so a browser that does not start only
//! costs a click.

use std::process::{Command, Stdio};

/// Opens `url` and says whether a browser was started: each command of `$BROWSER` in turn
/// (`:`-separated; `%s` stands for the URL, which is appended otherwise, as Python's
/// `webbrowser` reads it) until one starts; without `$BROWSER`, macOS's `open`, or `xdg-open`
/// when it is on PATH and there is a display (without one it may start a text browser on the
/// very terminal kiwi is using). The browser never sees kiwi's stdio, and it is reaped on a
/// thread of its own so that it never lingers as a zombie.
pub fn open(url: &str) -> bool {
    let commands: Vec<String> = match std::env::var("BROWSER") {
        Ok(list) if !list.trim().is_empty() => list.split(':').map(str::to_string).collect(),
        _ if cfg!(target_os = "macos") => vec!["open".into()],
        _ if on_path("xdg-open") && has_display() => vec!["xdg-open".into()],
        _ => {
            tracing::info!("no $BROWSER, and no xdg-open with a display: not opening a browser");
            return false;
        }
    };
    for command in commands {
        let words = command_words(&command, url);
        let Some((program, args)) = words.split_first() else { continue };
        let spawned =
            Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        match spawned {
            Ok(mut child) => {
                std::thread::spawn(move || child.wait());
                return true;
            }
            Err(e) => tracing::info!("cannot run the browser {program}: {e}"),
        }
    }
    false
}

/// One `$BROWSER` command as program and arguments, with the URL in place of `%s` or appended.
fn command_words(command: &str, url: &str) -> Vec<String> {
    let mut words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        return words;
    }
    if words.iter().any(|w| w.contains("%s")) {
        words.iter_mut().for_each(|w| *w = w.replace("%s", url));
    } else {
        words.push(url.to_string());
    }
    words
}

fn has_display() -> bool {
    std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_replaces_percent_s_or_is_appended() {
        assert_eq!(command_words("firefox --new-tab", "http://x/"), ["firefox", "--new-tab", "http://x/"]);
        assert_eq!(command_words("open -a %s now", "http://x/"), ["open", "-a", "http://x/", "now"]);
        assert!(command_words("  ", "http://x/").is_empty());
    }
}
