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
