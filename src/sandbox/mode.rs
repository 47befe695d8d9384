//! The three modes (spec sandbox.md §1) and their names on the command line, in the config and
//! on the wire. `danger-full-access` (codex's name) is accepted everywhere as `off`; kiwi always
//! reports the canonical name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a command started by a `Shell` call may do. Ordered by strictness: `ReadOnly` >
/// `WorkspaceWrite` > `Off` (the derived `Ord` is that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum SandboxMode {
    /// No sandbox: today's behavior.
    #[default]
    Off,
    /// Writes only in the writable roots; no network unless allowed.
    WorkspaceWrite,
    /// No writes (but a few devices); no network unless allowed.
    ReadOnly,
}

/// Every name a mode is accepted under, in the order error messages list them.
const ACCEPTED: [&str; 4] = ["read-only", "workspace-write", "off", "danger-full-access"];

impl SandboxMode {
    /// The canonical name (`read-only`, `workspace-write`, `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::WorkspaceWrite => "workspace-write",
            Self::ReadOnly => "read-only",
        }
    }

    /// A mode by any of its names (the alias included); exact, case-sensitive.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "off" | "danger-full-access" => Some(Self::Off),
            "workspace-write" => Some(Self::WorkspaceWrite),
            "read-only" => Some(Self::ReadOnly),
            _ => None,
        }
    }

    /// Whether commands are confined at all.
    pub fn is_sandboxed(self) -> bool {
        self != Self::Off
    }

    /// The stricter of two modes (spec §2.3 rule 2).
    pub fn stricter(self, other: Self) -> Self {
        self.max(other)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    /// The error is serde's wording for an unknown variant, which the config reports.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| {
            let expected: Vec<String> = ACCEPTED.iter().map(|n| format!("`{n}`")).collect();
            format!("unknown variant `{s}`, expected one of {}", expected.join(", "))
        })
    }
}

impl Serialize for SandboxMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SandboxMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).ok_or_else(|| serde::de::Error::unknown_variant(&name, &ACCEPTED))
    }
}

/// `--sandbox MODE`: the three canonical names are listed as possible values; the codex alias is
/// accepted but hidden.
impl clap::ValueEnum for SandboxMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::ReadOnly, Self::WorkspaceWrite, Self::Off]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = clap::builder::PossibleValue::new(self.as_str());
        Some(if *self == Self::Off { value.alias("danger-full-access") } else { value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_alias_and_order() {
        for mode in [SandboxMode::Off, SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            assert_eq!(SandboxMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(SandboxMode::parse("danger-full-access"), Some(SandboxMode::Off));
        assert_eq!(SandboxMode::parse("Read-Only"), None);
        assert_eq!(SandboxMode::ReadOnly.stricter(SandboxMode::Off), SandboxMode::ReadOnly);
        assert_eq!(SandboxMode::Off.stricter(SandboxMode::WorkspaceWrite), SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::ReadOnly > SandboxMode::WorkspaceWrite);
        let e = serde_json::from_str::<SandboxMode>("\"bogus\"").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "unknown variant `bogus`, expected one of `read-only`, `workspace-write`, `off`, `danger-full-access`"
            ),
            "{e}"
        );
        assert_eq!("bogus".parse::<SandboxMode>().unwrap_err(), e.split(" at line").next().unwrap());
        assert_eq!(serde_json::to_string(&SandboxMode::WorkspaceWrite).unwrap(), "\"workspace-write\"");
    }
}
