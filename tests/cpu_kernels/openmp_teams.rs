//! A training loop's frontend holds no OpenMP team of its own while the backend trains. A
//! thread that runs a wide oneDNN primitive keeps a team of OpenMP threads for life, and once
//! the process holds more of them than the machine has CPUs, GNU OpenMP cuts every waiting
//! thread's spin to a hundred pauses: the backend's team then sleeps between two primitives.
//! `Fit` infers sizes and evaluates on the caller's thread, so it releases that thread's team.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use burn::prelude::*;
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Action, Callback, Fit, SyntheticEpochs};
use ember_trainer::trace::{BatchRecord, EpochRecord};

/// The name of the thread that runs the loop: a thread libgomp starts for a team takes the
/// name of the thread it serves.
const FRONTEND: &str = "fit-frontend";

/// The threads of this process named [`FRONTEND`]: one more with a team than without (2 cores).
fn frontend_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm).is_ok_and(|c| c.trim_end() == FRONTEND)
        })
        .count()
}

/// A product wide enough for OpenMP's team (16.8 MFLOP, over the one-thread bound).
fn wide_forward(net: &Sequential) {
    let x = Tensor::<2>::ones([512, 256], &Device::flex());
    let y: Tensor<2> = net.forward(x.into()).rank();
    y.into_data();
}

/// The frontend's threads after each batch and at each epoch's end (after its evaluation).
#[derive(Default)]
struct Counts {
    batches: Vec<usize>,
    epoch_ends: Vec<usize>,
}

struct Counting(Rc<RefCell<Counts>>);

impl Callback for Counting {
    fn batch_end(&mut self, _: &BatchRecord) -> ember::Result<Action> {
        self.0.borrow_mut().batches.push(frontend_threads());
        Ok(Action::go_on())
    }

    fn epoch_end(&mut self, _: &EpochRecord) -> ember::Result<Action> {
        self.0.borrow_mut().epoch_ends.push(frontend_threads());
        Ok(Action::go_on())
    }
}

#[test]
fn the_frontend_releases_its_openmp_team_after_inferring_sizes_and_after_each_evaluation() {
    let thread = std::thread::Builder::new().name(FRONTEND.into());
    let (quiet, before, in_evaluation, counts) = thread
        .spawn(|| {
            // Rayon's threads (the loader's, burn-flex's) take the name of the thread that
            // starts them: started now (a broadcast runs on each), they stay out of the
            // differences counted below.
            rayon::broadcast(|_| ());
            let quiet = frontend_threads();
            let device = Device::flex().autodiff();
            let net: Sequential = Sequential::new()
                .add(Dense::new(64))
                .add(Dense::new(1))
                .initialize(Init::default(), &device)
                .infer_shape(Tensor::<2>::zeros([1, 256], &device))
                .unwrap();
            wide_forward(&net.valid());
            let before = frontend_threads();
            let in_evaluation = Rc::new(Cell::new(Vec::new()));
            let counts = Rc::new(RefCell::new(Counts::default()));
            let seen = in_evaluation.clone();
            let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
            Fit::new(net, L2Loss, optimizer, &device)
                .epochs(3)
                .evaluate("wide", move |net: &Sequential| {
                    wide_forward(net);
                    let mut counts = seen.take();
                    counts.push(frontend_threads());
                    seen.set(counts);
                    Ok(0.0)
                })
                .callback(Counting(counts.clone()))
                .run(&mut SyntheticEpochs::new(Synthetic::chapter(64, 256, 0), 4))
                .unwrap();
            (quiet, before, in_evaluation.take(), counts.take())
        })
        .unwrap()
        .join()
        .unwrap();
    // The mechanism is there to see: on this machine a wide primitive gives the calling
    // thread a team (oneDNN opened, more than one core).
    assert_eq!(
        before,
        quiet + 1,
        "no OpenMP team after a wide product on the frontend: is oneDNN installed ({:?}), \
         with more than one core?",
        ember::kernels::status()
    );
    // The team from before the run, and from inferring sizes, is gone by the first batch.
    assert_eq!(counts.batches, [quiet; 12]);
    assert_eq!(
        in_evaluation,
        [quiet + 1; 3],
        "each evaluation starts a team"
    );
    assert_eq!(
        counts.epoch_ends, [quiet; 3],
        "and the frontend ends it before going on"
    );
}
