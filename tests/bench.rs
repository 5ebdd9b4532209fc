//! `ferrite bench` runs the program natively and under ferrite in each configuration and prints
//! the table docs/performance.md keeps: every row present, with its numbers.

mod common;

use common::*;

#[test]
fn bench_prints_a_row_per_configuration() {
    let prog = guest("pm_bench");
    let dir = scratch();
    let out = ferrite()
        .current_dir(dir.path())
        .args(["bench", "--runs", "1", "--config", "none", "--config", "unpersisted", "--"])
        .arg(&prog)
        .args(["1000", "/mnt/pmem0/bench"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for row in ["| native |", "| ferrite --analyses none |", "| ferrite --analyses unpersisted |"] {
        let line = stdout.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no row {row}:\n{stdout}"));
        // time, then the ratio to native.
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert!(cells[2].parse::<f64>().is_ok_and(|t| t > 0.0), "{line}");
        assert!(cells[3].strip_suffix('x').is_some_and(|r| r.parse::<f64>().is_ok()), "{line}");
    }
}

#[test]
fn bench_snapshots_prints_take_restore_and_a_step_back() {
    let prog = guest("snap_touch");
    let dir = scratch();
    let out = ferrite()
        .current_dir(dir.path())
        .args(["bench", "--snapshots", "--runs", "1", "--"])
        .arg(&prog)
        .args(["2", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let row = stdout.lines().last().unwrap_or_default();
    let cells: Vec<&str> = row.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
    // At, processes, threads, held, take, copied again, take again, restore, reverse-stepi.
    assert_eq!(cells.len(), 9, "{stdout}");
    // Half-way, the four workers and main are alive, their buffers being touched.
    assert_eq!(cells[1], "1", "{stdout}");
    assert_eq!(cells[2], "5", "{stdout}");
    assert!(cells[3].parse::<f64>().is_ok_and(|m| m > 1.0), "{stdout}");
    assert!(cells[4..].iter().all(|c| c.parse::<f64>().is_ok_and(|t| t >= 0.0)), "{stdout}");
}
