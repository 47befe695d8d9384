//! kimi's print-mode options, taken from the (already validated) command line (`docs/print-mode.md`
//! A.1): `--quiet` is `--print --output-format text --final-message-only`.

use std::io::IsTerminal;

use crate::cli::Cli;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    StreamJson,
}

impl Format {
    fn parse(text: Option<&str>) -> Self {
        if text == Some("stream-json") { Format::StreamJson } else { Format::Text }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KimiOptions {
    /// `-p` / `-c`, stripped.
    pub prompt: Option<String>,
    pub input: Format,
    pub output: Format,
    pub final_only: bool,
    pub quiet: bool,
    /// Text input with no `-p` and a terminal on stdin means nothing to run (A.2).
    pub stdin_is_tty: bool,
    /// `--stream-deltas`: stream-json output also carries text and thinking as they arrive (A.4).
    pub deltas: bool,
}

impl KimiOptions {
    /// `None` unless the command line asks for print mode.
    pub fn from_cli(cli: &Cli) -> Option<Self> {
        if !cli.print_mode() {
            return None;
        }
        Some(Self {
            prompt: cli.prompt.as_deref().map(str::trim).filter(|p| !p.is_empty()).map(str::to_string),
            input: Format::parse(cli.input_format.as_deref()),
            output: if cli.quiet { Format::Text } else { Format::parse(cli.output_format.as_deref()) },
            final_only: cli.final_message_only || cli.quiet,
            quiet: cli.quiet,
            stdin_is_tty: std::io::stdin().is_terminal(),
            deltas: cli.stream_deltas,
        })
    }

    /// Whether events are echoed on stderr (text output that is not final-only).
    pub fn progress(&self) -> bool {
        self.output == Format::Text && !self.final_only
    }
}
