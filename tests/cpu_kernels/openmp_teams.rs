//! A training loop's frontend holds no OpenMP team of its own while the backend trains. A
//! thread that runs a wide oneDNN primitive keeps a team of OpenMP threads for life, and once
//! the process holds more of them than the machine has CPUs, GNU OpenMP cuts every waiting
//! thread's spin to a hundred pauses: the backend's team then sleeps between two primitives.
//! `Fit` infers sizes and evaluates on the caller's thread, so it releases that thread's team
//! before the first batch and at the end of each epoch.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use burn::prelude::*;
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Action, Callback, Fit, SyntheticEpochs};
use ember_trainer::trace::BatchRecord;

/// The name of the thread that runs the loop: a thread libgomp starts for a team takes the
/// name of the thread it serves.
const FRONTEND: &str = "fit-frontend";

/// The threads of this process named [`FRONTEND`]: more with a team than without.
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

/// The frontend's threads after each batch: once back at `quiet`, or as a second later (a
/// joined thread leaves `/proc/self/task` a moment after `pthread_join` returns).
struct AfterEachBatch {
    quiet: usize,
    counts: Rc<RefCell<Vec<usize>>>,
}

impl Callback for AfterEachBatch {
    fn batch_end(&mut self, _: &BatchRecord) -> ember::Result<Action> {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut count = frontend_threads();
        while count != self.quiet && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            count = frontend_threads();
        }
        self.counts.borrow_mut().push(count);
        Ok(Action::go_on())
    }
}

#[test]
fn the_frontend_holds_no_openmp_team_while_the_backend_trains() {
    let thread = std::thread::Builder::new().name(FRONTEND.into());
    let (quiet, before, in_evaluation, batches) = thread
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
            let batches = Rc::new(RefCell::new(Vec::new()));
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
                .callback(AfterEachBatch {
                    quiet,
                    counts: batches.clone(),
                })
                .run(&mut SyntheticEpochs::new(Synthetic::chapter(64, 256, 0), 4))
                .unwrap();
            (quiet, before, in_evaluation.take(), batches.take())
        })
        .unwrap()
        .join()
        .unwrap();
    // The mechanism is there to see: a wide primitive gives the calling thread a team, of one
    // thread less than the machine has cores.
    let team = before.saturating_sub(quiet);
    assert!(
        team >= 1,
        "no OpenMP team after a wide product on the frontend: is oneDNN installed ({:?}), \
         with more than one core?",
        ember::kernels::status()
    );
    assert_eq!(
        in_evaluation,
        [quiet + team; 3],
        "each evaluation starts a team"
    );
    // The team from before the run (and from inferring sizes) is gone by the first batch,
    // and each evaluation's by the next epoch's.
    assert_eq!(batches, [quiet; 12]);
}
