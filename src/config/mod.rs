//! Configuration: the schema, loading from file or inline text, and model selection.

pub mod load;
pub mod schema;
pub mod select;

pub use load::{ConfigError, load_default, load_file, load_text};
pub use schema::{Config, HookConfig, LoopControl, ModelConfig, ProviderConfig, ProviderType};
pub use select::{LlmSettings, ThinkingEffort, select};
