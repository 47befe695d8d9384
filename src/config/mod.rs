//! Configuration: the schema, loading from file or inline text, and model selection.

pub mod diagnose;
pub mod load;
pub mod prices;
pub mod schema;
pub mod select;
pub mod web;

pub use load::{
    ConfigError, load_default, load_default_reporting, load_file, load_file_reporting, load_text, load_text_reporting,
};
pub use prices::ModelPrices;
pub use schema::{Config, HookConfig, LoopControl, ModelConfig, ProviderConfig, ProviderType};
pub use select::{LlmSettings, ThinkingEffort, select};
