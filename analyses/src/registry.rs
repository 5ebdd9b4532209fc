//! The pass registry: every detector of ferrite, one row each, and everything the rest of
//! ferrite derives from it — the names `--analyses` accepts ([`available`]), what `all` leaves
//! out ([`PassInfo::opt_in`]), the builder ([`build`]), the bug classes `ferrite compare` scores
//! each pass on ([`PassInfo::classes`]), whether its findings are validated on crash images after
//! the run ([`PassInfo::wants_images`]) and the command-line flags that are shorthands for its
//! options ([`PassInfo::flags`]). Adding a pass is one module and one row here
//! (docs/analyses/README.md, "Adding a pass").

use crate::{hawkset, hmtrace, oscs, pmrace, unpersisted, vardalith, Analysis, Finding, Settings};

/// One detector pass.
pub struct PassInfo {
    /// The name `--analyses` takes, and the `analysis` of the pass's findings.
    pub name: &'static str,
    /// Left out of `all` until named: the pass watches every memory access (a costly hook on
    /// every load and store) or reports on DRAM-only programs too.
    pub opt_in: bool,
    /// Checks the pass's options (`KEY=VALUE[:KEY=VALUE]...`, as after `NAME:`).
    pub parse: fn(&str) -> Result<(), String>,
    /// The pass, with its options.
    pub build: fn(&str) -> Result<Box<dyn Analysis>, String>,
    /// The finding kinds the pass reports that `ferrite compare` scores, each with its bug
    /// class; the pass is scored on these classes. A kind not listed is its own class, claimed
    /// by no detector.
    pub classes: &'static [(&'static str, &'static str)],
    /// The pass captures crash images (through [`crate::ImageSink`]) and its findings go through
    /// post-failure validation after the run: each is run against the program's recovery
    /// (`--recover`), and says whether it could be.
    pub wants_images: bool,
    /// What the pass finds depends on the schedule: `ferrite compare` runs it once per seed of
    /// a case.
    pub schedule_dependent: bool,
    /// Command-line flags that are shorthands for an option of the pass: `(flag without its
    /// dashes, option key)`; the flag's value becomes `key=value` (`on` for a switch).
    pub flags: &'static [(&'static str, &'static str)],
    /// Findings known to be false positives, left out before validation (counted as
    /// `NAME.whitelisted_false_positives`): PMRace's allow-list.
    pub known_benign: fn(&Finding, &Settings) -> bool,
}

fn never(_: &Finding, _: &Settings) -> bool {
    false
}

/// Every pass, in the order `ferrite compare` shows them.
pub static PASSES: &[PassInfo] = &[
    PassInfo {
        name: "unpersisted",
        opt_in: false,
        parse: |s| unpersisted::Options::parse(s).map(drop),
        build: |s| Ok(Box::new(unpersisted::Unpersisted::new(unpersisted::Options::parse(s)?))),
        classes: &[
            ("unpersisted-store", "unpersisted-store"),
            ("flush-without-fence", "flush-without-fence"),
            ("nt-store-without-fence", "flush-without-fence"),
            ("flush-clean-line", "redundant-flush"),
            ("redundant-fence", "redundant-flush"),
        ],
        wants_images: false,
        schedule_dependent: false,
        flags: &[],
        known_benign: never,
    },
    PassInfo {
        name: "hawkset",
        opt_in: false,
        parse: |s| hawkset::HawksetOptions::parse(s).map(drop),
        build: |s| Ok(Box::new(hawkset::Hawkset::from_spec(s)?)),
        classes: &[("persistence-induced-race", "persistence-race")],
        wants_images: false,
        schedule_dependent: true,
        flags: &[("irh", "irh"), ("persist-owner", "persist_owner")],
        known_benign: never,
    },
    PassInfo {
        name: "vardalith",
        opt_in: false,
        parse: |s| vardalith::VardalithOptions::parse(s).map(drop),
        build: |s| Ok(Box::new(vardalith::Vardalith::from_spec(s)?)),
        classes: &[("persistence-induced-race", "persistence-race")],
        wants_images: false,
        schedule_dependent: true,
        flags: &[("irh", "irh"), ("persist-owner", "persist_owner")],
        known_benign: never,
    },
    PassInfo {
        name: "pmrace",
        opt_in: true,
        parse: |s| pmrace::Options::parse(s).map(drop),
        build: |s| Ok(Box::new(pmrace::Pmrace::new(pmrace::Options::parse(s)?))),
        classes: &[("inter-thread-inconsistency", "persistence-race"), ("sync-inconsistency", "sync-inconsistency")],
        wants_images: true,
        schedule_dependent: true,
        flags: &[("pmrace-compat", "compat")],
        known_benign: pmrace::known_benign,
    },
    PassInfo {
        name: "oscs",
        opt_in: true,
        parse: |s| oscs::Options::parse(s).map(drop),
        build: |s| Ok(Box::new(oscs::Oscs::new(oscs::Options::parse(s)?))),
        classes: &[("order-sensitive-critical-sections", "atomicity-violation")],
        wants_images: false,
        schedule_dependent: true,
        flags: &[("oscs-condflag", "condflag")],
        known_benign: never,
    },
    PassInfo {
        name: "hmtrace",
        opt_in: true,
        parse: |s| hmtrace::Options::parse(s).map(drop),
        build: |s| Ok(Box::new(hmtrace::Hmtrace::new(hmtrace::Options::parse(s)?))),
        classes: &[("data-race", "data-race")],
        wants_images: false,
        schedule_dependent: true,
        flags: &[],
        known_benign: never,
    },
];

/// The pass named `name`.
pub fn info(name: &str) -> Option<&'static PassInfo> {
    PASSES.iter().find(|p| p.name == name)
}

/// The names `--analyses` accepts, sorted.
pub fn available() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = PASSES.iter().map(|p| p.name).collect();
    v.sort_unstable();
    v
}

impl PassInfo {
    /// The bug classes the pass is scored on, in the order of [`PassInfo::classes`].
    pub fn claimed_classes(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for (_, class) in self.classes {
            if !out.contains(class) {
                out.push(class);
            }
        }
        out
    }
}

/// The bug class of a finding kind some pass claims ([`PassInfo::classes`]).
pub fn class_of_kind(kind: &str) -> Option<&'static str> {
    PASSES.iter().flat_map(|p| p.classes.iter()).find(|(k, _)| *k == kind).map(|(_, c)| *c)
}

fn unknown(name: &str) -> String {
    format!("unknown analysis `{name}` (available: {}, or all, or none)", available().join(", "))
}

/// Builds the analyses named in `names` (`all` selects every pass that is not opt-in, `none`
/// nothing; `NAME:OPTIONS` a pass with options), sorted by name.
pub fn build(names: &[String]) -> Result<Vec<Box<dyn Analysis>>, String> {
    let mut wanted: Vec<&'static PassInfo> = Vec::new();
    // Options given as `NAME:KEY=VALUE...`, checked here, applied when the pass is built.
    let mut specs: std::collections::BTreeMap<&'static str, &str> = std::collections::BTreeMap::new();
    for n in names {
        if let Some((base, spec)) = n.split_once(':') {
            let p = info(base).ok_or_else(|| unknown(base))?;
            (p.parse)(spec)?;
            wanted.push(p);
            specs.insert(p.name, spec);
            continue;
        }
        match n.as_str() {
            "all" => wanted.extend(PASSES.iter().filter(|p| !p.opt_in)),
            "none" | "" => {}
            n => wanted.push(info(n).ok_or_else(|| unknown(n))?),
        }
    }
    wanted.sort_unstable_by_key(|p| p.name);
    wanted.dedup_by_key(|p| p.name);
    wanted.into_iter().map(|p| (p.build)(specs.get(p.name).copied().unwrap_or(""))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_builds_under_its_own_name_and_rejects_unknown_options() {
        for p in PASSES {
            let built = build(&[p.name.to_string()]).unwrap();
            assert_eq!(built.len(), 1);
            assert_eq!(built[0].name(), p.name, "row `{}` builds a pass of another name", p.name);
            assert!((p.parse)("").is_ok());
            assert!((p.parse)("no_such_option=1").is_err(), "{} accepts anything", p.name);
            assert!(!p.classes.is_empty(), "{} claims no class", p.name);
        }
    }

    #[test]
    fn all_is_every_pass_not_opt_in_and_unknown_names_are_refused() {
        let all: Vec<&str> = build(&["all".into()]).unwrap().iter().map(|p| p.name()).collect();
        assert_eq!(all, vec!["hawkset", "unpersisted", "vardalith"]);
        assert!(build(&["none".into()]).unwrap().is_empty());
        let e = build(&["bogus".into()]).err().unwrap();
        assert!(e.contains("available: hawkset, hmtrace, oscs, pmrace, unpersisted, vardalith"), "{e}");
        assert!(build(&["bogus:x=1".into()]).is_err());
    }
}
