//! `ember_trainer::run`: a run that code builds gets what `ember train` gets for the same
//! flags: the same parameters saved, to the byte, and the same refusals, in the same words.

use std::path::Path;

use ember_trainer::run::{Notes, TrainSettings};

use crate::common::cli::{ember, text};

/// The settings of `ember train` with `TINY`'s flags: 4 synthetic batches of 32 examples of 8
/// features, the MLP 8-4-1, on flex.
fn tiny() -> TrainSettings {
    let mut settings = TrainSettings::default();
    settings.workload.device = "flex".parse().unwrap();
    settings.workload.batches = Some(4);
    settings.workload.batch_size = 32;
    settings.workload.features = Some(8);
    settings.workload.hidden = Some(vec![4]);
    settings
}

const TINY: [&str; 11] = crate::common::cli::TINY;

/// A CSV table of 40 rows, 3 features and a class label in 0..3.
fn table(path: &Path) {
    let mut csv = String::from("a,b,c,label\n");
    for i in 0..40 {
        let x = [i % 7, (i * 3) % 5, (i * 11) % 13].map(|v| v as f32 / 4.0);
        csv.push_str(&format!("{},{},{},{}\n", x[0], x[1], x[2], i % 3));
    }
    std::fs::write(path, csv).unwrap();
}

#[test]
fn a_run_built_in_code_saves_the_parameters_ember_train_saves() {
    let dir = tempfile::tempdir().unwrap();
    let (by_cli, by_code) = (dir.path().join("cli.st"), dir.path().join("code.st"));
    let cli = |save: &Path, more: &[&str]| {
        let mut args: Vec<&str> = TINY.to_vec();
        args.extend(more);
        args.extend(["--save", save.to_str().unwrap()]);
        let out = ember(&args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}:\n{stdout}{stderr}");
    };
    let code = |settings: TrainSettings| {
        let notes = Notes::silent();
        settings.check(&notes).unwrap().train(None, &notes).unwrap();
    };
    // Adam and a schedule on the chapter's data, two epochs.
    cli(
        &by_cli,
        &[
            "--optimizer",
            "adam",
            "--lr-schedule",
            "cosine",
            "--epochs",
            "2",
            "--seed",
            "3",
        ],
    );
    let mut settings = tiny();
    settings.workload.recipe.optimizer = "adam".into();
    settings.workload.recipe.lr_schedule = Some("cosine".into());
    settings.workload.seed = 3;
    settings.epochs = 2;
    settings.outputs.save = Some(by_code.clone());
    code(settings);
    assert_eq!(
        std::fs::read(&by_cli).unwrap(),
        std::fs::read(&by_code).unwrap()
    );

    // Classes from a CSV table, with a validation share and SGD with momentum.
    let data = dir.path().join("t.csv");
    table(&data);
    let (by_cli, by_code) = (dir.path().join("cli2.st"), dir.path().join("code2.st"));
    let data_flag = format!("csv:{}", data.display());
    let args = [
        "train",
        "--device",
        "flex",
        "--data",
        &data_flag,
        "--classes",
        "3",
        "--batch-size",
        "8",
        "--valid-split",
        "0.25",
        "--momentum",
        "0.9",
        "--lr",
        "0.1",
        "--epochs",
        "3",
        "--save",
        by_cli.to_str().unwrap(),
    ];
    let out = ember(&args);
    assert!(out.status.success(), "{:?}", text(&out));
    let mut settings = TrainSettings::default();
    settings.workload.device = "flex".parse().unwrap();
    settings.workload.data = data_flag.parse().unwrap();
    settings.workload.classes = Some(3);
    settings.workload.batch_size = 8;
    settings.workload.valid_split = Some(0.25);
    settings.workload.recipe.momentum = Some(0.9);
    settings.workload.lr = 0.1;
    settings.epochs = 3;
    settings.outputs.save = Some(by_code.clone());
    code(settings);
    assert_eq!(
        std::fs::read(&by_cli).unwrap(),
        std::fs::read(&by_code).unwrap()
    );
}

#[test]
fn a_run_built_in_code_is_refused_in_the_words_of_ember_train() {
    let dir = tempfile::tempdir().unwrap();
    let same = dir.path().join("same");
    let same = same.to_str().unwrap();
    let data = dir.path().join("t.csv");
    table(&data);
    let csv = format!("csv:{}", data.display());
    // The flags, and the same settings made in code.
    type Edit<'a> = Box<dyn Fn(&mut TrainSettings) + 'a>;
    // The flags, what the refusal must say, and the same settings made in code.
    let cases: Vec<(Vec<&str>, &str, Edit<'_>)> = vec![
        (
            vec!["--lr", "0"],
            "invalid --lr 0",
            Box::new(|s| s.workload.lr = 0.0),
        ),
        (
            vec!["--epochs", "0"],
            "invalid --epochs 0",
            Box::new(|s| s.epochs = 0),
        ),
        (
            vec!["--optimizer", "adam", "--momentum", "0.9"],
            "--momentum does not apply to --optimizer adam",
            Box::new(|s| {
                s.workload.recipe.optimizer = "adam".into();
                s.workload.recipe.momentum = Some(0.9);
            }),
        ),
        (
            vec!["--save", same, "--metrics", same],
            "are the same file",
            Box::new(move |s| {
                s.outputs.save = Some(same.into());
                s.outputs.metrics = Some(same.into());
            }),
        ),
        (
            vec!["--checkpoint-every", "2"],
            "--checkpoint-every needs --checkpoint DIR",
            Box::new(|s| s.outputs.checkpoint_every = Some(2)),
        ),
        (
            vec!["--model", "mlp:3"],
            "--hidden is ignored when --model is given",
            Box::new(|s| s.model = Some("mlp:3".parse().unwrap())),
        ),
        (
            vec!["--save-best", same],
            "--save-best needs a metric to watch",
            Box::new(move |s| s.outputs.save_best = Some(same.into())),
        ),
        (
            vec!["--valid-split", "0.5"],
            "--valid-split applies to fashion-mnist:, csv: and npy: data",
            Box::new(|s| s.workload.valid_split = Some(0.5)),
        ),
    ];
    for (flags, says, edit) in cases {
        let mut args: Vec<&str> = TINY.to_vec();
        args.extend(&flags);
        let out = ember(&args);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?} was not refused");
        let mut settings = tiny();
        edit(&mut settings);
        let Err(refused) = settings.check(&Notes::silent()) else {
            panic!("{flags:?} was not refused in code");
        };
        let first = stderr.lines().next().unwrap_or_default();
        assert_eq!(first, format!("error: {refused}"), "{flags:?}");
        assert!(first.contains(says), "{flags:?}: {first}");
    }
    // A network of images on the chapter's vectors.
    let args = ["train", "--device", "flex", "--model", "lenet"];
    let (_, stderr) = text(&ember(&args));
    let mut settings = TrainSettings::default();
    settings.workload.device = "flex".parse().unwrap();
    settings.model = Some("lenet".parse().unwrap());
    let refused = settings.check(&Notes::silent()).err().unwrap();
    assert_eq!(stderr.lines().next().unwrap(), format!("error: {refused}"));
    assert!(
        refused
            .to_string()
            .starts_with("--model lenet takes images"),
        "{refused}"
    );
    // A flag of synthetic data on a table, beside the data it names.
    let args = ["train", "--device", "flex", "--data", &csv, "--hidden", "3"];
    let (_, stderr) = text(&ember(&args));
    let mut settings = TrainSettings::default();
    settings.workload.data = csv.parse().unwrap();
    settings.workload.hidden = Some(vec![3]);
    let refused = settings.check(&Notes::silent()).err().unwrap();
    assert_eq!(stderr.lines().next().unwrap(), format!("error: {refused}"));
    assert!(
        refused
            .to_string()
            .starts_with("--hidden applies to --data synthetic only")
    );
    assert!(!Path::new(same).exists(), "a refused run made {same}");
    // Sizes the command line's parser refuses, given in code: refused by the check too.
    for (hidden, says) in [
        (vec![0], "invalid --hidden 0: "),
        (vec![], "invalid --hidden (an empty list): "),
    ] {
        let mut settings = tiny();
        settings.workload.hidden = Some(hidden);
        let refused = settings.check(&Notes::silent()).err().unwrap();
        assert!(refused.to_string().starts_with(says), "{refused}");
    }
}
