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
    let run = Ferrite::run(&prog).opts(&["--analyses", "none"]).args(&["/mnt/pmem0/objpool"]).go();
    assert_same_stdout(&native, &run);
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "count 3: 3 2 1\n");
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
