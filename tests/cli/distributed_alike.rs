//! A job's ranks started otherwise than one another refuse before training, naming the flag:
//! what a resume must match, and the outputs, the policy and the CPU's kernels besides.

use super::common::cli::text;
use super::distributed::{chapter_job, job_succeeds, output, table, two_ranks};

/// A job of one rank with `first` and one with `second`, which must fail without a panic: its
/// stdout and stderr.
fn refused(first: &[&str], second: &[&str]) -> (String, String) {
    let out = output(two_ranks(first, second));
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (stdout, stderr)
}

/// A job's flags on the table `data` of 3 classes, in batches of 10, on flex.
fn job_on(data: &str) -> [&str; 11] {
    [
        "train",
        "--device",
        "flex",
        "--data",
        data,
        "--classes",
        "3",
        "--batch-size",
        "10",
        "--distributed",
        "mpi",
    ]
}

#[test]
fn ranks_started_with_other_flags_refuse_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 60);
    let base = job_on(&data);
    // Rank 0 with one rate, rank 1 with another.
    let rank = |lr| [&base[..], &["--lr", lr]].concat();
    let (stdout, stderr) = refused(&rank("0.1"), &rank("0.2"));
    assert!(
        stderr.contains("rank 1 has --lr 0.2, rank 0 has --lr 0.1"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("epoch 1"),
        "refused before training:\n{stdout}"
    );
    // Outputs too: rank 0 writes the job's, so a --save that only rank 1 was given was
    // dropped in silence, exit 0 (issue 62); so were other --sync values and CPU kernels.
    let save = dir.path().join("m13.safetensors");
    let with_save = [&rank("0.1")[..], &["--save", save.to_str().unwrap()]].concat();
    let (_, stderr) = refused(&rank("0.1"), &with_save);
    assert!(stderr.contains("rank 1 has --save"), "{stderr}");
    // One file spelled two ways is one output (`./m.st` and `m.st` were refused as two).
    let dotted = format!("{}/./m13.safetensors", dir.path().display());
    let out = output(two_ranks(
        &[&rank("0.1")[..], &["--save", &dotted]].concat(),
        &with_save,
    ));
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(save.is_file());
    let (_, stderr) = refused(
        &[&rank("0.1")[..], &["--sync", "none"]].concat(),
        &rank("0.1"),
    );
    assert!(stderr.contains("--sync"), "{stderr}");
    // The kernels in use, however chosen: `--cpu-kernels flex` beside oneDNN trained, exit 0,
    // where only EMBER_CPU_KERNELS was compared (hostile pass).
    let (_, stderr) = refused(
        &[&rank("0.1")[..], &["--cpu-kernels", "flex"]].concat(),
        &rank("0.1"),
    );
    assert!(
        stderr.contains("rank 1 has --cpu-kernels onednn, rank 0 has --cpu-kernels flex"),
        "{stderr}"
    );
    // A job refused before its first checkpoint keeps none, whichever rank refused first: rank
    // 0, ended by the launcher's SIGTERM, said its checkpoints "are kept" (hostile pass).
    let ck = dir.path().join("ck");
    let with_ck = |lr| [&rank(lr)[..], &["--checkpoint", ck.to_str().unwrap()]].concat();
    let (_, stderr) = refused(&with_ck("0.1"), &with_ck("0.2"));
    assert!(
        !stderr.contains("are kept") && !stderr.contains("its last checkpoint is"),
        "{stderr}"
    );
}

/// A rank that started from other parameters (`--load` on one rank only, or two files) trained
/// another network from the same summed gradients, exit 0 (hostile pass); ranks with other
/// `--classes` failed only after training began, naming neither flag. Both refuse first.
#[test]
fn ranks_that_load_other_parameters_or_count_other_classes_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 60);
    let base = job_on(&data);
    let (one, two) = (dir.path().join("one.st"), dir.path().join("two.st"));
    for (path, seed) in [(&one, "1"), (&two, "2")] {
        let mut args = base[..9].to_vec();
        args.extend(["--seed", seed, "--save", path.to_str().unwrap()]);
        super::common::cli::succeeds(&args);
    }
    let (one_path, two_path) = (one.to_str().unwrap(), two.to_str().unwrap());
    let load = |path| [&base[..], &["--load", path]].concat();
    for (first, second) in [
        (load(one_path), base.to_vec()),
        (load(one_path), load(two_path)),
    ] {
        let (stdout, stderr) = refused(&first, &second);
        assert!(
            stderr.contains("--load a file of ") && stderr.contains(" bytes, crc32 "),
            "{stderr}"
        );
        assert!(
            !stdout.contains("epoch 1"),
            "refused before training:\n{stdout}"
        );
    }
    // The same file on both ranks trains.
    let out = output(two_ranks(&load(one_path), &load(one_path)));
    assert!(out.status.success(), "{:?}", text(&out));
    let other_classes = [&base[..6], &["4"], &base[7..]].concat();
    let (stdout, stderr) = refused(&base, &other_classes);
    assert!(
        stderr.contains("rank 1 has --classes 4, rank 0 has --classes 3"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("epoch 1"),
        "refused before training:\n{stdout}"
    );
}

/// Ranks resumed from two checkpoints of the same step, from runs at other rates, would train
/// from other parameters: refused before training, naming the checkpoint (before, only the
/// step was compared, and the job trained on with its replicas apart, exit 0).
#[test]
fn ranks_resumed_from_other_checkpoints_of_one_step_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let tiny = [
        "--batches",
        "4",
        "--batch-size",
        "16",
        "--features",
        "8",
        "--hidden",
        "4",
    ];
    for (ck, lr) in [(a, "0.1"), (b, "0.5")] {
        let mut args = chapter_job(ck, "4", &tiny);
        args.extend_from_slice(&["--lr", lr]);
        job_succeeds(2, &args);
    }
    let mut resume_a = chapter_job(a, "4", &tiny);
    resume_a.extend_from_slice(&["--epochs", "2", "--resume", a]);
    let mut resume_b = chapter_job(b, "4", &tiny);
    resume_b.extend_from_slice(&["--epochs", "2", "--resume", b]);
    let (stdout, stderr) = refused(&resume_a, &resume_b);
    assert!(
        stderr.contains("rank 1 has the checkpoint resumed step 4 (model.bpk"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("epoch 2"),
        "refused before training:\n{stdout}"
    );
}

/// A rank started without `--distributed` trained alone, and a rank with it waited in MPI_Init
/// for it, sometimes until killed (issue 62); two ranks without it trained the same run twice
/// into the same `--save`. Now a process that a launcher started as one rank of several
/// refuses without `--distributed mpi`, and the job ends at once.
#[test]
fn a_rank_without_distributed_refuses_and_the_job_ends() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("same.safetensors");
    let tiny = super::common::cli::args(
        &super::common::cli::TINY,
        &["--save", save.to_str().unwrap()],
    );
    let with = [&tiny[..], &["--distributed", "mpi"]].concat();
    for (first, second) in [(&tiny, &tiny), (&with, &tiny)] {
        let start = std::time::Instant::now();
        let out = output(two_ranks(first, second));
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{stdout}{stderr}");
        assert!(
            stderr.contains("of 2 that a launcher (mpirun) started, without --distributed"),
            "{stderr}"
        );
        assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
        assert!(!save.exists(), "{stdout}");
    }
}

/// A rank without `--checkpoint` beside one with it was named "checkpoints every none", without
/// the flag; data too small for the ranks said "invalid shard rank 2 of 3" (issue 62).
#[test]
fn a_checkpoint_mismatch_names_the_flag_and_small_data_names_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let tiny = &super::common::cli::TINY;
    let with = [
        &tiny[..],
        &["--distributed", "mpi", "--checkpoint", ck.to_str().unwrap()],
    ]
    .concat();
    let without = [&tiny[..], &["--distributed", "mpi"]].concat();
    let (_, stderr) = refused(&with, &without);
    assert!(
        stderr.contains(&format!(
            "rank 1 has --checkpoint (not given), rank 0 has --checkpoint {} every epoch",
            ck.display()
        )),
        "{stderr}"
    );
    // Another directory on rank 1 was dropped in silence, exit 0 (hostile pass).
    let other = dir.path().join("other");
    let elsewhere = [
        &tiny[..],
        &[
            "--distributed",
            "mpi",
            "--checkpoint",
            other.to_str().unwrap(),
        ],
    ]
    .concat();
    let (_, stderr) = refused(&with, &elsewhere);
    assert!(
        stderr.contains(&format!(
            "rank 1 has --checkpoint {} every epoch",
            other.display()
        )),
        "{stderr}"
    );
    let one = dir.path().join("one.csv");
    std::fs::write(&one, "1,2,0\n").unwrap();
    let data = format!("csv:{}", one.display());
    let small = [
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--classes",
        "2",
        "--batch-size",
        "1",
        "--distributed",
        "mpi",
    ];
    let (_, stderr) = refused(&small, &small);
    assert!(
        stderr.contains("1 cannot be split across 2 ranks"),
        "{stderr}"
    );
}

/// Each rank that finds the data bad says so on a line of its own: stderr is unbuffered and a
/// line went out piece by piece, so two ranks' lines came out interleaved
/// (`error: error: bad.csv: bad.csv…`, issue 62). Rank 0's line is plain, another rank's says
/// which rank it is.
#[test]
fn every_ranks_error_is_a_whole_line_that_names_its_rank() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "1,2,0\n3,4\n").unwrap();
    let data = format!("csv:{}", bad.display());
    let job = [
        "train",
        "--data",
        &data,
        "--classes",
        "2",
        "--distributed",
        "mpi",
    ];
    let (_, stderr) = refused(&job, &job);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("ragged")).collect();
    assert!(!lines.is_empty(), "{stderr}");
    for line in lines {
        let said = line.strip_prefix("rank 1: ").unwrap_or(line);
        assert!(
            said.starts_with("error: ")
                && said.ends_with("(ragged row)")
                && !said[7..].contains("error:"),
            "{stderr}"
        );
    }
}
