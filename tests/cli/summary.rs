//! `ember summary` (and `train --summary`): each layer's output shape and parameters, Gluon's
//! `net.summary(x)`, against PyTorch's for LeNet.

// LeNet's summary in PyTorch.
#![allow(dead_code)]
include!("../reference/torch_recipes.out.rs");

use super::common::cli::{TINY, args, fails_with, succeeds};

/// The rows of a printed summary: each layer's output shape and parameters.
fn rows(summary: &str) -> Vec<(Vec<usize>, usize)> {
    summary
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| {
            let (shape, params) = l.split_once('[').unwrap().1.split_once(']').unwrap();
            let shape = shape.split(", ").map(|d| d.parse().unwrap()).collect();
            (shape, params.trim().replace(',', "").parse().unwrap())
        })
        .collect()
}

#[test]
fn summary_of_lenet_gives_pytorchs_shapes_and_parameters() {
    let out = succeeds(&["summary", "--model", "lenet"]);
    let got = rows(&out);
    let want: Vec<(Vec<usize>, usize)> = LENET_SHAPES
        .iter()
        .zip(LENET_PARAMS)
        .map(|(shape, params)| (shape.to_vec(), params))
        .collect();
    assert_eq!(got, want, "{out}");
    assert_eq!(LENET_TOTAL, 61_706);
    assert!(out.contains("Parameters: 61,706"), "{out}");
    assert!(
        out.contains("0 (Conv2D)") && out.contains("6 (Dense)"),
        "{out}"
    );
    // `train --summary` prints the network it trains, for its data's examples.
    let out = succeeds(&args(&TINY, &["--summary"]));
    assert_eq!(
        rows(&out),
        vec![(vec![1, 4], 8 * 4 + 4), (vec![1, 1], 4 + 1)],
        "{out}"
    );
    assert!(out.contains("Parameters: 41"), "{out}");
    let err = fails_with(
        &["summary", "--model", "lenet", "--input", "1,3,3"],
        "layer 2: Conv2D",
    );
    assert!(
        err.starts_with("error: invalid --input 1,3,3 for --model lenet"),
        "{err}"
    );
    // A shape of the wrong rank said only "a tensor: …" (hostile pass).
    fails_with(
        &["summary", "--model", "lenet", "--input", "1,28,28,28,28"],
        "error: invalid --input 1,28,28,28,28 for --model lenet",
    );
    fails_with(
        &["summary", "--model", "lenet", "--outputs", "0"],
        "--outputs 0",
    );
}
