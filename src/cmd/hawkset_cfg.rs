//! HawkSet's lock configuration files (YAML), read by `--config` as ferrite's RON `locks`.
//!
//! HawkSet (`-cfg FILE`, repeatable) declares custom lock functions in a YAML mapping:
//!
//! ```yaml
//! mutex_id_size: 8          # bytes of the lock word at the lock's address
//! adquire:                  # acquire when the call returns
//!   my_lock: { mutex_id_arg: 0, type: regular }
//! try_adquire:              # acquire when the result is success_value (or not failure_value)
//!   my_trylock:
//!     mutex_id_arg: 0
//!     success_value: 1      # or failure_value: V
//!     result_id_arg: 1      # optional: the result is the out-parameter this argument points to
//!     type: write           # regular | read | shared | write | unique
//! release:                  # release when the call is entered
//!   my_unlock: { mutex_id_arg: 0, type: regular }
//! ```
//!
//! Each function becomes the [`CustomLock`] the RON form writes: `adquire` is `Acquire`,
//! `try_adquire` is `TryAcquire(success: V)` or `TryAcquire(failure: V)` (with `result_arg` from
//! `result_id_arg`), `release` is `Release`; `mutex_id_arg` is `lock_arg`, `type: read` and
//! `shared` are `mode: Shared` (the others `Exclusive`), `mutex_id_size` is every entry's
//! `lock_size`. HawkSet's parser ignores keys it does not know and reads a missing number as 0;
//! this one refuses both, so a typo (`sucess_value`) is an error rather than a lock that never
//! succeeds. `adq_rel` (functions holding a lock for their whole call) has no equivalent in
//! ferrite's lock model yet and is refused with an error that says so.

use anyhow::{anyhow, bail, Result};
use emu::sync::{CustomLock, CustomLockKind, LockMode};
use yaml_rust2::{Yaml, YamlLoader};

/// Whether `text` is HawkSet's YAML rather than ferrite's RON: RON configurations start (after
/// comments and blank space) with `(`, HawkSet's with a mapping key.
pub fn is_hawkset(text: &str) -> bool {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.split_once('\n').map_or("", |(_, t)| t);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, t)| t);
        } else {
            break;
        }
    }
    !rest.is_empty() && !rest.starts_with('(')
}

/// Deepest nesting of sequences and mappings accepted: HawkSet's files nest three levels
/// (the top mapping, a section, a function's settings).
const MAX_DEPTH: usize = 16;

/// Refuses YAML nested deeper than [`MAX_DEPTH`] before it is loaded: yaml-rust2 limits the
/// nesting of flow collections (`[[[`) but not of block ones (`- - - -`), and a document of
/// 50,000 nested sequences, loaded, overflowed ferrite's stack when it was dropped (an abort,
/// status 134). The parser's events come from an explicit stack, so counting them is safe.
fn check_depth(text: &str) -> Result<()> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| anyhow!("not valid YAML: {e}"))?;
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    bail!(
                        "nested deeper than {MAX_DEPTH} levels at line {} (a lock configuration has three)",
                        mark.line()
                    );
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd => return Ok(()),
            _ => {}
        }
    }
}

/// The lock functions a HawkSet configuration declares, in the order it lists them.
pub fn parse(text: &str) -> Result<Vec<CustomLock>> {
    check_depth(text)?;
    let docs = YamlLoader::load_from_str(text).map_err(|e| anyhow!("not valid YAML: {e}"))?;
    let [root] = docs.as_slice() else { bail!("expected one YAML document, found {}", docs.len()) };
    let Yaml::Hash(map) = root else { bail!("the top level must be a mapping (mutex_id_size, adquire, ...)") };
    let mut lock_size = None;
    let mut locks = Vec::new();
    for (k, v) in map {
        let key = k.as_str().ok_or_else(|| anyhow!("top-level keys must be names"))?;
        match key {
            "mutex_id_size" => {
                let n = integer(v, "mutex_id_size")?;
                if !(1..=8).contains(&n) {
                    bail!("mutex_id_size {n}: ferrite follows lock words of 1 to 8 bytes");
                }
                lock_size = Some(n as u8);
            }
            "adquire" | "try_adquire" | "release" => {
                let Yaml::Hash(funcs) = v else { bail!("`{key}` must map function names to their settings") };
                for (name, settings) in funcs {
                    let name = scalar(name).ok_or_else(|| anyhow!("`{key}`: function names must be strings"))?;
                    locks.push(function(key, &name, settings)?);
                }
            }
            "adq_rel" => bail!(
                "`adq_rel` (functions that hold a lock for their whole call) is not supported; declare an acquire and a release function instead"
            ),
            other => bail!("unknown key `{other}` (expected mutex_id_size, adquire, try_adquire, release)"),
        }
    }
    for l in &mut locks {
        l.lock_size = lock_size;
        l.check().map_err(|e| anyhow!(e))?;
    }
    Ok(locks)
}

/// One function of section `section` (`adquire`, `try_adquire` or `release`).
fn function(section: &str, name: &str, settings: &Yaml) -> Result<CustomLock> {
    let empty = yaml_rust2::yaml::Hash::new();
    let map = match settings {
        Yaml::Hash(m) => m,
        Yaml::Null => &empty,
        _ => bail!("`{section}.{name}` must be a mapping of settings"),
    };
    let mut lock = CustomLock::new(name, CustomLockKind::Acquire);
    let (mut success, mut failure) = (None, None);
    for (k, v) in map {
        let key = k.as_str().ok_or_else(|| anyhow!("`{section}.{name}`: setting names must be strings"))?;
        let what = format!("{section}.{name}.{key}");
        match key {
            "mutex_id_arg" => lock.lock_arg = argument(v, &what)?,
            "result_id_arg" if section == "try_adquire" => lock.result_arg = Some(argument(v, &what)?),
            "success_value" if section == "try_adquire" => success = Some(integer(v, &what)?),
            "failure_value" if section == "try_adquire" => failure = Some(integer(v, &what)?),
            "type" => {
                lock.mode = match scalar(v).as_deref() {
                    Some("regular" | "write" | "unique") => LockMode::Exclusive,
                    Some("read" | "shared") => LockMode::Shared,
                    _ => bail!("`{what}`: expected regular, read, shared, write or unique"),
                }
            }
            _ => bail!("`{section}.{name}`: unknown setting `{key}`"),
        }
    }
    lock.kind = match section {
        "adquire" => CustomLockKind::Acquire,
        "release" => CustomLockKind::Release,
        _ => match (success, failure) {
            (None, None) => bail!("`try_adquire.{name}` needs a success_value or a failure_value"),
            (Some(_), Some(_)) => bail!("`try_adquire.{name}`: give a success_value or a failure_value, not both"),
            (success, failure) => CustomLockKind::TryAcquire { success, failure },
        },
    };
    Ok(lock)
}

/// A scalar as text (names may be written as numbers or quoted).
fn scalar(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn integer(v: &Yaml, what: &str) -> Result<i64> {
    match v {
        Yaml::Integer(i) => Ok(*i),
        _ => bail!("`{what}` must be an integer"),
    }
}

fn argument(v: &Yaml, what: &str) -> Result<u8> {
    let n = integer(v, what)?;
    u8::try_from(n)
        .ok()
        .filter(|&a| a <= 5)
        .ok_or_else(|| anyhow!("`{what}` {n}: arguments are numbered 0 to 5 (the register arguments ferrite reads)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_format_from_the_first_token() {
        assert!(!is_hawkset("// locks\n(locks: [])"));
        assert!(!is_hawkset("/* x */ (locks: [])"));
        assert!(is_hawkset("# HawkSet\nmutex_id_size: 8\n"));
        assert!(is_hawkset("release:\n  f:\n    mutex_id_arg: 0\n"));
        assert!(!is_hawkset("  \n"));
    }

    #[test]
    fn maps_each_section_to_the_ron_entries() {
        let locks = parse(
            "mutex_id_size: 1\n\
             adquire:\n  spin_get: {mutex_id_arg: 1, type: regular}\n\
             try_adquire:\n  try_get:\n    mutex_id_arg: 0\n    success_value: 1\n    type: read\n\
             \x20 get_or_restart:\n    result_id_arg: 1\n    success_value: 0\n    type: unique\n\
             \x20 try_not:\n    failure_value: -1\n\
             release:\n  spin_put:\n    mutex_id_arg: 0\n    type: shared\n",
        )
        .unwrap();
        let mut want = vec![
            CustomLock::new("spin_get", CustomLockKind::Acquire),
            CustomLock::new("try_get", CustomLockKind::TryAcquire { success: Some(1), failure: None }),
            CustomLock::new("get_or_restart", CustomLockKind::TryAcquire { success: Some(0), failure: None }),
            CustomLock::new("try_not", CustomLockKind::TryAcquire { success: None, failure: Some(-1) }),
            CustomLock::new("spin_put", CustomLockKind::Release),
        ];
        want[0].lock_arg = 1;
        want[1].mode = LockMode::Shared;
        want[2].result_arg = Some(1);
        want[4].mode = LockMode::Shared;
        for w in &mut want {
            w.lock_size = Some(1);
        }
        assert_eq!(locks, want);
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let err = |t: &str| parse(t).unwrap_err().to_string();
        assert!(err("adquire:\n  f:\n    mutex_id_ar: 0\n").contains("unknown setting `mutex_id_ar`"));
        assert!(err("try_adquire:\n  f:\n    mutex_id_arg: 0\n").contains("needs a success_value"));
        assert!(err("release:\n  f:\n    success_value: 0\n").contains("unknown setting `success_value`"));
        assert!(err("adquire:\n  f:\n    mutex_id_arg: 6\n").contains("0 to 5"));
        assert!(err("adquire:\n  f:\n    type: exclusive\n").contains("regular, read, shared"));
        assert!(err("mutex_id_size: 16\n").contains("1 to 8 bytes"));
        assert!(err("adq_rel:\n  - f\n").contains("not supported"));
        assert!(err("locks: 3\n").contains("unknown key `locks`"));
        assert!(err("adquire: [a, b]\n").contains("must map function names"));
        assert!(err("adquire:\n  f: {mutex_id_arg: 0\n").contains("not valid YAML"));
        assert!(err("- a\n").contains("top level must be a mapping"));
    }
}
