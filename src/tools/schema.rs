//! JSON schemas for tool parameters, derived from the typed params with `schemars`.
//!
//! The model gets a plain inline object schema: no `$schema`, no `title`, no `$defs` indirection.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

pub fn parameters_schema<T: schemars::JsonSchema>() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    strip_titles(&mut value);
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn strip_titles(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("title").is_some_and(Value::is_string) && map.contains_key("type") {
                map.remove("title");
            }
            for child in map.values_mut() {
                strip_titles(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_titles),
        _ => {}
    }
}
