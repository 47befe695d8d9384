//! A model's prices (`[models.<name>.usd_per_mtok]`, `docs/configuration.md` §2.4) and the cost
//! of one model call at those prices.
//!
//! Invariants: every price is a finite number ≥ 0 (the config is invalid otherwise, with the key
//! in the message); a model without the table has no price, and its calls cost "unknown" —
//! never zero, never a guess. `cache_read` and `cache_write` default to `input`: a provider that
//! bills cached tokens like any other input needs only two keys, and an unstated cache price is
//! never below what the user stated for input.

use serde::{Deserialize, Deserializer, Serialize};

use crate::protocol::TokenUsage;

/// US dollars per million tokens, by kind of token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelPrices {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl ModelPrices {
    /// The dollars one model call cost: each kind of token at its price, to the nano-dollar.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        // Summed in millionths of a dollar and divided once: prices with few decimals give
        // exact whole numbers there, so the result is the plain decimal (0.009, not 0.00900…01).
        let micro = usage.input_other as f64 * self.input
            + usage.output as f64 * self.output
            + usage.input_cache_read as f64 * self.cache_read
            + usage.input_cache_creation as f64 * self.cache_write;
        round_usd(micro / 1_000_000.0)
    }
}

/// A dollar amount to the nano-dollar: sums of many calls stay plain decimals instead of
/// collecting binary rounding noise.
pub fn round_usd(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

impl<'de> Deserialize<'de> for ModelPrices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        struct Raw {
            input: Option<serde_json::Value>,
            output: Option<serde_json::Value>,
            cache_read: Option<serde_json::Value>,
            cache_write: Option<serde_json::Value>,
        }
        let raw = Raw::deserialize(d)?;
        let price = |key: &str, v: Option<serde_json::Value>| -> Result<Option<f64>, D::Error> {
            let Some(v) = v else { return Ok(None) };
            let n = match &v {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            match n {
                Some(n) if n.is_finite() && n >= 0.0 => Ok(Some(n)),
                _ => Err(D::Error::custom(format!(
                    "usd_per_mtok.{key} must be a number of dollars per million tokens, 0 or more (got {v})"
                ))),
            }
        };
        let input = price("input", raw.input)?.ok_or_else(|| D::Error::custom("usd_per_mtok.input is missing"))?;
        let output = price("output", raw.output)?.ok_or_else(|| D::Error::custom("usd_per_mtok.output is missing"))?;
        Ok(ModelPrices {
            input,
            output,
            cache_read: price("cache_read", raw.cache_read)?.unwrap_or(input),
            cache_write: price("cache_write", raw.cache_write)?.unwrap_or(input),
        })
    }
}

/// A dollar budget as written on a command line or in the config: a number above 0.
pub fn parse_budget_usd(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n > 0.0)
}

/// Dollars as people read them: two decimals from a cent up, four below (`$0.0042`).
pub fn dollars(usd: f64) -> String {
    if usd >= 0.01 || usd == 0.0 { format!("${usd:.2}") } else { format!("${usd:.4}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices(json: &str) -> Result<ModelPrices, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_of_token_at_its_price() {
        let p = ModelPrices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 };
        let usage =
            TokenUsage { input_other: 1_000, output: 2_000, input_cache_read: 10_000, input_cache_creation: 4_000 };
        // 0.003 + 0.03 + 0.003 + 0.015
        assert_eq!(p.cost(&usage), 0.051);
        assert_eq!(p.cost(&usage).to_string(), "0.051");
        assert_eq!(p.cost(&TokenUsage::default()), 0.0);
        let million = TokenUsage { input_other: 1_000_000, ..TokenUsage::default() };
        assert_eq!(p.cost(&million), 3.0);
    }

    #[test]
    fn sums_stay_plain_decimals() {
        assert_eq!(round_usd(0.1 + 0.2), 0.3);
        assert_eq!(round_usd(0.009 + 0.016).to_string(), "0.025");
        assert_eq!(round_usd(0.0000000004), 0.0);
    }

    #[test]
    fn cache_prices_default_to_the_input_price() {
        let p = prices(r#"{"input":0.6,"output":2.5}"#).unwrap();
        assert_eq!(p, ModelPrices { input: 0.6, output: 2.5, cache_read: 0.6, cache_write: 0.6 });
        let p = prices(r#"{"input":"1","output":2,"cache_read":0.1,"cache_write":0}"#).unwrap();
        assert_eq!(p, ModelPrices { input: 1.0, output: 2.0, cache_read: 0.1, cache_write: 0.0 });
    }

    #[test]
    fn bad_prices_name_their_key() {
        assert!(prices(r#"{"input":-1,"output":2}"#).unwrap_err().contains("usd_per_mtok.input must be"));
        assert!(prices(r#"{"input":1,"output":"two"}"#).unwrap_err().contains("usd_per_mtok.output must be"));
        assert!(prices(r#"{"input":1,"output":2,"cache_read":true}"#).unwrap_err().contains("cache_read"));
        assert!(prices(r#"{"input":1}"#).unwrap_err().contains("usd_per_mtok.output is missing"));
        assert!(prices(r#"{"output":1}"#).unwrap_err().contains("usd_per_mtok.input is missing"));
    }

    #[test]
    fn budgets_are_dollars_above_zero() {
        assert_eq!(parse_budget_usd(" 0.5 "), Some(0.5));
        assert_eq!(parse_budget_usd("2"), Some(2.0));
        for bad in ["0", "-1", "x", "", "inf", "NaN"] {
            assert_eq!(parse_budget_usd(bad), None, "{bad}");
        }
    }

    #[test]
    fn dollars_read_like_dollars() {
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(1.5), "$1.50");
        assert_eq!(dollars(0.0042), "$0.0042");
    }
}
