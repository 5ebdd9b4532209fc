//! Option parsing shared by the passes: `--analyses NAME:KEY=VALUE[:KEY=VALUE]...`.
//!
//! Each pass owns its keys and their meaning; what is the same for every pass (splitting the
//! string, on/off values, whose flush and fence make a store durable) is here, so that the same
//! value spells the same thing in every pass and a mistake gets the same message.

use emu::pm::DurabilityRule;

/// Splits `key=value:key=value` (an empty string is no option).
pub(crate) fn option_pairs(spec: &str) -> Result<Vec<(&str, &str)>, String> {
    spec.split(':')
        .filter(|s| !s.is_empty())
        .map(|kv| kv.split_once('=').ok_or_else(|| format!("option `{kv}` is not KEY=VALUE")))
        .collect()
}

/// `on`/`off` (or `1`/`0`, `true`/`false`, `yes`/`no`).
pub(crate) fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{key}={v}: expected on or off")),
    }
}

/// Whose flush and fence make a store durable: `own` (the writer's, as the papers assume) or
/// `any` (the hardware rule).
pub(crate) fn parse_owner(key: &str, v: &str) -> Result<DurabilityRule, String> {
    match v {
        "own" | "writer" => Ok(DurabilityRule::Own),
        "any" | "hw" => Ok(DurabilityRule::Hw),
        _ => Err(format!("{key}={v}: expected own or any")),
    }
}
