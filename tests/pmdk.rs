//! PMDK programs, dynamically linked against Debian's libpmem and libpmemobj, run under ferrite
//! as natively: libpmem maps its file on the PM mount with MAP_SYNC (so it sees real PM), flushes
//! from inside the library reach the PM device, and a libpmemobj pool with transactions and a
//! pmemobj mutex works end to end.

mod common;

use common::*;

#[test]
fn libpmem_program_sees_pm_and_persists() {
    let prog = guest("pmdk_basic");
    let dir = scratch();
    let pool = dir.path().join("pmemfile").display().to_string();
    let native = native(&prog, &[pool.as_str()], &[]);
    let run = Ferrite::run(&prog)
        .opts(&["--analyses", "unpersisted", "--report", "r.json"])
        .args(&["/mnt/pmem0/pmemfile"])
        .go();
    assert_same_stdout(&native, &run);
    run.assert_code(0);
    assert!(run.stderr.contains("is_pmem 1"), "MAP_SYNC on the PM mount makes libpmem see PM\n{}", run.describe());
    // pmem_persist and pmem_memcpy_persist flush from inside libpmem.so: nothing is left unpersisted.
    assert_eq!(run.json("r.json")["findings"], serde_json::json!([]));
}

#[test]
fn libpmemobj_transactions_and_mutexes_work() {
    let prog = guest("pmdk_list");
    let dir = scratch();
    let pool = dir.path().join("objpool").display().to_string();
    let native = native(&prog, &[pool.as_str()], &[]);
    let pm = scratch();
    let run = Ferrite::run(&prog)
        .opts(&["--analyses", "none", "--pm-dir", pm.path().to_str().unwrap()])
        .args(&["/mnt/pmem0/objpool"])
        .go();
    assert_same_stdout(&native, &run);
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "count 3: 3 2 1\n");
    // libpmemobj creates the pool with mode 0 and chmods it: the pool left behind has the
    // permissions the program asked for, as natively.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&pm.path().join("objpool")), mode(std::path::Path::new(&pool)));
    assert_ne!(mode(&pm.path().join("objpool")), 0);
}

/// HawkSet's pseudo-lock for PMDK: libpmemobj's locks live in PM, so the loads and stores of
/// its own lock implementation (inside `pmemobj_mutex_lock`/`unlock`) are PM accesses by several
/// threads; they are the lock's business, not races. A counter updated under a pmemobj mutex and
/// persisted inside it is silent for hawkset and pmrace.
#[test]
fn pmemobj_mutex_internals_are_not_persistence_races() {
    let run = Ferrite::run(&guest("pmdk_mutex"))
        .opts(&["--analyses", "hawkset,pmrace", "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    let r = run.json("r.json");
    let found: Vec<&serde_json::Value> = get(&r, "findings").as_array().unwrap().iter().collect();
    assert!(found.is_empty(), "{}", serde_json::to_string_pretty(&r).unwrap());
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "counter 10\n");
}

/// libpmem2: `pmem2_map_new` over a file on the PM mount, then the map's own persist and memcpy
/// functions. Same output as natively, and silent under every pass.
#[test]
fn libpmem2_program_runs_as_natively_under_every_pass() {
    let prog = guest("pmdk_pmem2");
    let dir = scratch();
    let file = dir.path().join("pmem2file").display().to_string();
    let native = native(&prog, &[file.as_str()], &[]);
    native.assert_code(0);
    let run = Ferrite::run(&prog)
        .opts(&["--analyses", "all,pmrace,hmtrace,oscs", "--report", "r.json"])
        .args(&["/mnt/pmem0/pmem2file"])
        .go();
    assert_same_stdout(&native, &run);
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "mapped 4096 bytes: hello, libpmem2 / copied\n");
    // MAP_SYNC succeeds on the PM mount: libpmem2 needs to flush cache lines (not pages).
    assert!(run.stderr.contains("granularity cache-line"), "{}", run.describe());
    assert_eq!(run.json("r.json")["findings"], serde_json::json!([]));
}

/// The PM device appears as an NVDIMM region whose `persistence_domain` follows
/// `--persistency`; PMDK reads it (libpmem2's `pmem2_auto_flush`) to decide whether it must
/// flush at all: under eADR libpmem reports auto flush and libpmem2 a byte store granularity.
#[test]
fn the_nd_region_persistence_domain_follows_the_persistency_model() {
    for (model, domain, auto_flush, granularity) in
        [("adr", "memory_controller", 0, "cache-line"), ("eadr", "cpu_cache", 1, "byte")]
    {
        let cat = Ferrite::run(std::path::Path::new("/bin/cat"))
            .opts(&["--analyses", "none", "--persistency", model])
            .args(&["/sys/bus/nd/devices/region0/persistence_domain"])
            .go();
        cat.assert_code(0);
        assert_eq!(cat.stdout_str(), format!("{domain}\n"));
        let basic = Ferrite::run(&guest("pmdk_basic"))
            .opts(&["--analyses", "unpersisted", "--persistency", model])
            .args(&["/mnt/pmem0/pmemfile"])
            .go();
        basic.assert_code(0);
        assert!(basic.stderr.contains(&format!("is_pmem 1 auto_flush {auto_flush}")), "{}", basic.describe());
        let pmem2 = Ferrite::run(&guest("pmdk_pmem2"))
            .opts(&["--analyses", "unpersisted", "--persistency", model])
            .args(&["/mnt/pmem0/pmem2file"])
            .go();
        pmem2.assert_code(0);
        assert!(pmem2.stderr.contains(&format!("granularity {granularity}\n")), "{}", pmem2.describe());
    }
    // The link and the directories leading to it, as sysfs shows them.
    let link = Ferrite::run(std::path::Path::new("/usr/bin/readlink"))
        .opts(&["--analyses", "none"])
        .args(&["/sys/bus/nd/devices/region0"])
        .go();
    link.assert_code(0);
    assert_eq!(link.stdout_str(), "../../../devices/platform/e820_pmem/ndbus0/region0\n");
}
