//! Parts: what one shard of a campaign writes (`--shard I/N --report part.json`) and
//! `ferrite merge` reads (docs/campaigns.md).
//!
//! A part is JSON: a header saying which campaign it belongs to, then the shard's results in
//! the form its kind needs to be merged (`body`). The header identifies the campaign by what
//! defines its results — the ferrite build (the hash of its own executable: a version number
//! alone does not tell two builds apart), the options (the parsed command line, minus what
//! only says where and how fast to run it), and the inputs (the hash of every file a run
//! reads: programs, manifests, the PM directory, the guest environment) — so that merge can
//! refuse parts of different campaigns, saying what differs, and name the shards missing.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use driver::shard::Shard;
use serde::{Deserialize, Serialize};

/// The `format` of every part.
pub const FORMAT: &str = "ferrite-part/1";

/// Which campaign a part belongs to, and which shard it is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// The ferrite version.
    pub ferrite: String,
    /// The build of the ferrite executable that wrote it ([`own_build`]).
    pub build: String,
    /// `crash`, `compare` or `explore`.
    pub kind: String,
    /// This shard, from 0.
    pub shard: u32,
    /// Shards of the campaign.
    pub shards: u32,
    /// The campaign's units (crash images, runs, schedules): the same in every part.
    pub units: u64,
    /// The options, one per line, as parsed.
    pub options: Vec<String>,
    /// What each input was: its name and the BLAKE3 of its bytes.
    pub inputs: BTreeMap<String, String>,
}

impl Header {
    /// The header of shard `shard` of a `kind` campaign.
    pub fn new(kind: &str, shard: Shard, options: Vec<String>, inputs: BTreeMap<String, String>) -> Header {
        Header {
            format: FORMAT.into(),
            ferrite: env!("CARGO_PKG_VERSION").into(),
            build: own_build(),
            kind: kind.into(),
            shard: shard.index,
            shards: shard.count,
            units: 0,
            options,
            inputs,
        }
    }
}

/// A part file.
#[derive(Serialize, Deserialize)]
pub struct Part {
    /// Which campaign and shard.
    pub part: Header,
    /// The shard's results, by kind.
    pub body: serde_json::Value,
}

/// Writes a part (a `.json` file).
pub fn write<T: Serialize>(path: &Path, header: Header, body: &T) -> Result<()> {
    let part = Part { part: header, body: serde_json::to_value(body).expect("parts serialise") };
    let json = serde_json::to_string_pretty(&part).expect("parts serialise");
    crate::report::write_whole(path, (json + "\n").as_bytes())
        .with_context(|| format!("cannot write part `{}`", path.display()))
}

/// Refuses a part path that is not `.json`, before any time is spent.
pub fn check_path(path: Option<&Path>) -> Result<()> {
    match path {
        None => bail!("a shard writes its results as a part for `ferrite merge`: give --report PART.json"),
        Some(p) if !p.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) => {
            bail!("--report `{}`: a shard's part is JSON; use a .json file name", p.display())
        }
        Some(_) => Ok(()),
    }
}

/// What identifies this ferrite executable: its GNU build ID (which the linker derives from
/// the code), else the BLAKE3 of its bytes; `unknown` if it cannot be read.
pub fn own_build() -> String {
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILD
        .get_or_init(|| {
            use object::Object as _;
            let Ok(file) = std::fs::File::open("/proc/self/exe") else { return "unknown".into() };
            let cache = object::read::ReadCache::new(file);
            if let Some(id) = object::File::parse(&cache).ok().and_then(|f| f.build_id().ok().flatten()) {
                return id.iter().map(|b| format!("{b:02x}")).collect();
            }
            std::fs::read("/proc/self/exe")
                .map(|b| blake3::hash(&b).to_hex()[..16].to_string())
                .unwrap_or_else(|_| "unknown".into())
        })
        .clone()
}

/// BLAKE3 of a file's bytes, or of a directory's files (names and bytes, in name order), or
/// `missing`. Inside a directory, a link is hashed as its target's name and never followed (a
/// link to `..` would be walked for ever), and a FIFO, socket or device as its kind alone
/// (opening a FIFO would wait for a writer for ever, reading `/dev/zero` never end). Files are
/// hashed as they are read, never held whole (a sparse pool of a terabyte is a PM input too).
pub fn hash_path(path: &Path) -> String {
    fn file(h: &mut blake3::Hasher, p: &Path, md: &std::fs::Metadata) {
        use std::os::unix::fs::OpenOptionsExt as _;
        let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(p);
        if let Ok(mut f) = opened {
            h.update(&md.len().to_le_bytes());
            let _ = std::io::copy(&mut f, h);
        }
    }
    fn walk(h: &mut blake3::Hasher, dir: &Path, rel: &str) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let name = format!("{rel}/{}", p.file_name().unwrap_or_default().to_string_lossy());
            h.update(name.as_bytes());
            let Ok(md) = std::fs::symlink_metadata(&p) else { continue };
            let ft = md.file_type();
            if ft.is_symlink() {
                h.update(b"link:");
                h.update(std::fs::read_link(&p).unwrap_or_default().as_os_str().as_encoded_bytes());
            } else if ft.is_dir() {
                walk(h, &p, &name);
            } else if ft.is_file() {
                file(h, &p, &md);
            } else {
                h.update(b"special file");
            }
        }
    }
    let mut h = blake3::Hasher::new();
    match std::fs::metadata(path) {
        Ok(md) if md.is_dir() => walk(&mut h, path, ""),
        Ok(md) if md.is_file() => {
            // As before, the bytes alone (without their length) for a single file.
            use std::os::unix::fs::OpenOptionsExt as _;
            let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path);
            match opened.map(|mut f| std::io::copy(&mut f, &mut h)) {
                Ok(Ok(_)) => {}
                _ => return "missing".into(),
            }
        }
        Ok(_) => return "special file".into(),
        Err(_) => return "missing".into(),
    }
    h.finalize().to_hex()[..16].to_string()
}

/// BLAKE3 of a text.
pub fn hash_text(s: &str) -> String {
    blake3::hash(s.as_bytes()).to_hex()[..16].to_string()
}

/// The options of a parsed command line, one line each (`{:#?}`), for the header: the caller
/// first clears what does not change the results (the report's path, --jobs, --quiet, the shard).
pub fn option_lines<T: std::fmt::Debug>(args: &T) -> Vec<String> {
    format!("{args:#?}").lines().map(|l| l.trim().to_string()).collect()
}

/// Reads parts and checks that they are every shard of one campaign, from one build of
/// ferrite, with the same options and inputs: the parts in shard order.
pub fn read_all(paths: &[std::path::PathBuf]) -> Result<Vec<Part>> {
    if paths.is_empty() {
        bail!("give the parts to merge");
    }
    let mut parts: Vec<(String, Part)> = Vec::new();
    for p in paths {
        let name = p.display().to_string();
        let file = open_part(p).with_context(|| format!("cannot read part `{name}`"))?;
        // Parsed as it is read: a file that is not JSON (a sparse file of zeros, a report in
        // RON, a binary) is refused at its first bytes rather than after all of them are in
        // memory; a JSON part's size is bounded by --max-host-memory alone.
        let v: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(file))
            .with_context(|| format!("part `{name}` is not valid JSON"))?;
        if v.get("part").and_then(|h| h.get("format")).and_then(|f| f.as_str()) != Some(FORMAT) {
            bail!("`{name}` is not a part of a sharded campaign (a report written with --shard I/N, format {FORMAT})");
        }
        let part: Part = serde_json::from_value(v).with_context(|| format!("part `{name}` is not a valid part"))?;
        parts.push((name, part));
    }
    let (first_name, first) = (&parts[0].0, &parts[0].1.part);
    for (name, p) in &parts[1..] {
        let h = &p.part;
        let differ = |what: &str, a: &str, b: &str| -> Result<()> {
            bail!("`{name}` is from a different campaign than `{first_name}`: {what} `{b}`, not `{a}`; merge refuses to mix them")
        };
        if h.ferrite != first.ferrite || h.build != first.build {
            differ(
                "written by ferrite",
                &format!("{} (build {})", first.ferrite, first.build),
                &format!("{} (build {})", h.ferrite, h.build),
            )?;
        }
        if h.kind != first.kind {
            differ("kind", &first.kind, &h.kind)?;
        }
        if h.shards != first.shards {
            differ("shard count", &first.shards.to_string(), &h.shards.to_string())?;
        }
        if h.options != first.options {
            let (a, b) = first_difference(&first.options, &h.options);
            differ("option", &a, &b)?;
        }
        if h.inputs != first.inputs {
            let key = first
                .inputs
                .keys()
                .chain(h.inputs.keys())
                .find(|k| first.inputs.get(*k) != h.inputs.get(*k))
                .cloned()
                .unwrap_or_default();
            let show = |m: &BTreeMap<String, String>| m.get(&key).cloned().unwrap_or_else(|| "absent".into());
            differ(&format!("input {key} with hash"), &show(&first.inputs), &show(&h.inputs))?;
        }
        if h.units != first.units {
            differ("unit count", &first.units.to_string(), &h.units.to_string())?;
        }
    }
    if first.build != own_build() {
        bail!(
            "`{first_name}` was written by another build of ferrite (build {}) than this one ({}): merge with the ferrite that ran the shards",
            first.build,
            own_build()
        );
    }
    let n = first.shards;
    let mut by_index: BTreeMap<u32, (String, Part)> = BTreeMap::new();
    for (name, p) in parts {
        if let Some((other, _)) = by_index.get(&p.part.shard) {
            bail!("`{other}` and `{name}` are both shard {}/{n}", p.part.shard);
        }
        by_index.insert(p.part.shard, (name, p));
    }
    let missing: Vec<String> = (0..n).filter(|i| !by_index.contains_key(i)).map(|i| format!("{i}/{n}")).collect();
    if !missing.is_empty() {
        bail!(
            "shard{} {} of the campaign {} missing (failed or not run): run {} again with the same options (--shard I/N) and merge every part",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            if missing.len() == 1 { "it" } else { "them" },
        );
    }
    Ok(by_index.into_values().map(|(_, p)| p).collect())
}

/// Opens a part for reading: a regular file (a FIFO would block merge for ever, `/dev/zero`
/// never end, a directory not read).
fn open_part(path: &Path) -> std::io::Result<std::fs::File> {
    loader::input::open_regular(path).map(|(file, _)| file)
}

fn first_difference(a: &[String], b: &[String]) -> (String, String) {
    let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let at = |v: &[String]| v.get(i).cloned().unwrap_or_else(|| "(none)".into()).trim_end_matches(',').to_string();
    (at(a), at(b))
}
