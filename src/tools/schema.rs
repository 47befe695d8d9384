//! JSON schemas for tool parameters, derived from the typed params with `schemars`.
//!
//! The model gets a plain inline object schema: no `$schema`, no `title`, no `$defs` indirection.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The schema of `T`, derived once per process and shared by every tool that takes `T` (every
/// session's toolsets, `docs/web.md` §9: hundreds of sessions in one process).
pub fn shared_parameters_schema<T: schemars::JsonSchema + 'static>() -> Arc<Map<String, Value>> {
    type Schemas = HashMap<TypeId, Arc<Map<String, Value>>>;
    static SCHEMAS: LazyLock<Mutex<Schemas>> = LazyLock::new(Default::default);
    let mut schemas = SCHEMAS.lock().unwrap_or_else(|p| p.into_inner());
    schemas.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(parameters_schema::<T>())).clone()
}

/// `text` as a shared string: equal texts (a tool's description, a subagent type's system
/// prompt: the same in every session of a work dir) are stored once. Texts no tool holds any more
/// are let go when a new one comes in. A list, not a hash set: it holds a few dozen texts, most
/// of a few KB, and comparing lengths first finds a text faster than hashing all of its bytes.
pub fn shared_text(text: String) -> Arc<str> {
    static TEXTS: Mutex<Vec<Arc<str>>> = Mutex::new(Vec::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(shared) = texts.iter().find(|t| t.len() == text.len() && t[..] == text[..]) {
        return shared.clone();
    }
    texts.retain(|t| Arc::strong_count(t) > 1);
    let shared: Arc<str> = text.into();
    texts.push(shared.clone());
    shared
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_are_stored_once() {
        let a = shared_text("a text only this test uses".to_string());
        let b = shared_text("a text only this test uses".to_string());
        assert!(Arc::ptr_eq(&a, &b));
        let other = shared_text("a text of the same length, other".to_string());
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(&*other, "a text of the same length, other");
        let same_len = shared_text("A TEXT ONLY THIS TEST USES".to_string());
        assert!(!Arc::ptr_eq(&a, &same_len), "equal lengths are not enough");
    }
}
