//! 12.2.2 "Barriers and Blockers", the dependency graph: `z = x * y + 2` is issued at once,
//! and printing `z` is what waits for it.

use burn::tensor::Tensor;

use super::{Experiment, Outcome, Picture, Setup, Timing, to_host};

const BOOK: &str = "d2l builds x = np.ones((1, 2)), y = np.ones((1, 2)), z = x * y + 2 and \
    prints [[3. 3.]]: the frontend only records the graph x, y -> x * y -> + 2, the backend \
    computes it, and the print is the blocker that waits for the value.";

/// Issues the graph and prints z; returns z's values.
fn graph(device: &burn::tensor::Device) -> anyhow::Result<(f64, f64, Vec<f32>)> {
    let start = std::time::Instant::now();
    let x = Tensor::<2>::ones([1, 2], device);
    let y = Tensor::<2>::ones([1, 2], device);
    let z = (x * y).add_scalar(2.0);
    let issued = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    let values = to_host(z)?;
    Ok((issued, start.elapsed().as_secs_f64(), values))
}

/// `[[3, 3]]`, as the book prints a 1x2 matrix.
pub fn show(values: &[f32]) -> String {
    let cells: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("[[{}]]", cells.join(", "))
}

/// 12.2.2: z = x * y + 2 prints [[3, 3]]; the print is the blocker.
pub const EXPERIMENT: Experiment = Experiment {
    key: "dependency-graph",
    title: "The dependency graph (12.2.2)",
    about: "12.2.2: z = x * y + 2 prints [[3, 3]]; the print is the blocker",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let device = &s.gpu.device;
    graph(device)?; // warm-up: the kernels compile once
    let (mut issue, mut print, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..s.repeat {
        let (i, p, v) = graph(device)?;
        issue.push(i);
        print.push(p);
        values = v;
    }
    let z = show(&values);
    let issue = Timing {
        label: "issue x, y, z = x * y + 2".into(),
        seconds: issue,
    };
    let print = Timing {
        label: "print z (the blocker)".into(),
        seconds: print,
    };
    let held = z == "[[3, 3]]";
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu("the graph of z"),
        ratio: (
            "print / issue".into(),
            print.median() / issue.median().max(1e-9),
        ),
        notes: vec![format!("z = {z}")],
        timings: vec![issue, print],
        claim: "z = x * y + 2 prints [[3, 3]]".into(),
        held,
        why: if held {
            "the value is exact; the print is where the frontend waits for the backend".into()
        } else {
            format!("the backend computed {z}")
        },
        picture: Picture::None,
    })
}
