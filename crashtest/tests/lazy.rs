//! Lazy exploration checked against eager enumeration: every image of every small crash point
//! of `pm_log` and `pm_dirty_lines` gets the verdict of the one lazy run that stands for it (the
//! run agreeing with it on the lines it read).

use std::path::{Path, PathBuf};

use crashtest::files::image_files;
use crashtest::lazy::{explore, LazyRun};
use crashtest::recover::recover;
use crashtest::Plan;
use driver::{RunSpec, Runner};

fn guest(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests");
    let status = std::process::Command::new("make")
        .arg("-C")
        .arg(&dir)
        .arg(format!("build/{name}"))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("make runs");
    assert!(status.success(), "make build/{name}");
    dir.join("build").join(name).display().to_string()
}

#[test]
fn every_image_gets_the_verdict_of_the_lazy_run_standing_for_it() {
    let mut compared = 0;
    let mut failing = 0;
    for (prog, args, recover_args) in [
        ("pm_log", vec!["/mnt/pmem0/log"], "/mnt/pmem0/log check"),
        ("pm_dirty_lines", vec!["/mnt/pmem0/d", "6"], "/mnt/pmem0/d 6 check 0 3"),
    ] {
        let g = guest(prog);
        let pm = tempfile::tempdir().unwrap();
        let mut argv = vec![g.clone()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let spec = RunSpec {
            analyses: vec!["none".into()],
            quiet: true,
            ..RunSpec::new(PathBuf::from(&g), argv, pm.path().to_path_buf())
        };
        let (_, out, log) = crashtest::workload(&Runner::default(), &spec, "fences", None, false).unwrap();
        let recover_cmd: Vec<String> = format!("{g} {recover_args}").split_whitespace().map(String::from).collect();
        let plan = Plan {
            recover: recover_cmd,
            check: None,
            base: RunSpec { discard_output: true, quiet: true, ..spec.clone() },
            budget: crashtest::recovery_budget(out.instructions, spec.max_instructions),
            jobs: 1,
            max_images: 256,
            quiet: true,
            remap: false,
            xfd: false,
            fresh: false,
            lazy: true,
        };
        for point in log.point_data() {
            if point.space.is_empty() || point.space.count().is_none_or(|n| n > 64) {
                continue;
            }
            let lazy = explore(&point, &log.file_paths, &plan).unwrap();
            assert!(lazy.exhaustive && !lazy.bypassed);
            for (choice, _) in point.space.enumerate() {
                let files = image_files(&point, &choice, &log.file_paths).unwrap();
                let eager = recover(&plan, &files, &[]).unwrap().failed();
                let standing: Vec<&LazyRun> =
                    lazy.runs.iter().filter(|r| r.decided.iter().all(|&d| r.choice[d] == choice[d])).collect();
                assert_eq!(standing.len(), 1, "{prog}: image {choice:?} is covered by exactly one run");
                assert_eq!(standing[0].verdict.failed(), eager, "{prog}: image {choice:?}");
                compared += 1;
                failing += usize::from(eager);
            }
        }
    }
    assert!(compared > 64, "{compared} images compared");
    assert!(failing > 0, "the buggy log fails some image");
}
