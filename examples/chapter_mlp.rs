//! d2l §12.2.3 "Improving Memory Footprint", line for line: the chapter's MLP trained for an
//! epoch with a barrier on every minibatch, then for an epoch without one.
//!
//! ```text
//! cargo run --release --example chapter_mlp -- [DEVICE] [BATCHES]
//! ```
//!
//! DEVICE is `auto` (the default: wgpu when there is an adapter), `wgpu`, `flex` or `ndarray`;
//! BATCHES defaults to the book's 150. Gluon's lines are in the comments. Where MXNet's frontend
//! hands each operator to its engine, ember's frontend hands each batch to the backend worker of
//! an [`Engine`], and gets back a [`Handle`](ember::Handle): `wait()` is `wait_to_read`,
//! `Engine::wait_all` is `npx.waitall`.

use std::time::Instant;

use anyhow::Context;
use burn::tensor::{Device, Tensor};
use ember::engine::Engine;
use ember::{
    Activation, Block, Dense, DeviceName, Init, L2Loss, Loss, NdTensor, Optimizer, Sequential,
};
use ember_datasets::{Batch, Synthetic};
use ember_trainer::memory::{mb, rss_bytes};

/// What the backend owns: the network and its optimizer (Gluon's trainer).
struct Model {
    net: Sequential,
    trainer: Optimizer,
}

// def data_iter():
//     timer = d2l.Timer()
//     num_batches, batch_size = 150, 1024
//     for i in range(num_batches):
//         X = np.random.normal(size=(batch_size, 512))
//         y = np.ones((batch_size,))
//         yield X, y
//         if (i + 1) % 50 == 0:
//             print(f'batch {i + 1}, time {timer.stop():.4f} sec')
fn data_iter(num_batches: u64, epoch: u64) -> impl Iterator<Item = Batch> {
    let timer = Instant::now();
    let batch_size = 1024;
    let data = Synthetic::chapter(batch_size, 512, epoch);
    // The print runs when the loop asks for the next batch, as after Python's `yield`.
    (0..=num_batches).filter_map(move |i| {
        if i > 0 && i % 50 == 0 {
            println!("batch {i}, time {:.4} sec", timer.elapsed().as_secs_f64());
        }
        (i < num_batches).then(|| data.batch(i))
    })
}

/// One minibatch, run by the backend:
/// `with autograd.record(): l = loss(y, net(X))`, `l.backward()`, `trainer.step(X.shape[0])`.
fn step(
    batch: Batch,
    device: Device,
) -> impl FnOnce(&mut Model) -> ember::Result<Tensor<1>> + Send + 'static {
    move |model: &mut Model| {
        let (x, y) = upload(&batch, &device)?;
        let l = L2Loss.forward(model.net.forward(x).into_rank()?, y)?;
        let grads = l.backward();
        model.net = model.trainer.step(model.net.clone(), grads, batch.len())?;
        Ok(l)
    }
}

/// A host batch on the device: X of any rank, y as `[batch, 1]`.
fn upload(batch: &Batch, device: &Device) -> ember::Result<(NdTensor, Tensor<2>)> {
    let x = batch.x_on(device)?;
    let y = NdTensor::from_host(&batch.y, &batch.y_shape, device)?.into_rank()?;
    Ok((x, y))
}

// def get_mem():
//     res = subprocess.check_output(['ps', 'u', '-p', str(os.getpid())])
//     return int(str(res).split()[15]) / 1e3
fn get_mem() -> f64 {
    mb(rss_bytes() as f64)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let device_name: DeviceName = args.next().as_deref().unwrap_or("auto").parse()?;
    let num_batches: u64 = match args.next() {
        Some(n) => n
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("invalid BATCHES {n:?}: expected a positive number"))?,
        None => 150,
    };
    let picked = device_name.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.autodiff();

    // net = nn.Sequential()
    // net.add(nn.Dense(2048, activation='relu'),
    //         nn.Dense(512, activation='relu'), nn.Dense(1))
    let net: Sequential = Sequential::new()
        .add(Dense::new(2048).activation(Activation::Relu))
        .add(Dense::new(512).activation(Activation::Relu))
        .add(Dense::new(1));
    // net.initialize()
    let net = net.initialize(Init::default(), &device);
    // trainer = gluon.Trainer(net.collect_params(), 'sgd')
    let trainer = Optimizer::new(&net, "sgd", 0.01)?;
    // loss = gluon.loss.L2Loss()   (also used inside `step`)
    let loss = L2Loss;

    // for X, y in data_iter():
    //     break
    // loss(y, net(X)).wait_to_read()
    // The first net(X) gives every Dense its input size; no parameter changes.
    let batch = data_iter(num_batches, 99)
        .next()
        .context("no batch to warm up with")?;
    let (x, y) = upload(&batch, &device)?;
    let (net, pred) = net.infer(x)?;
    let warm = loss.forward(pred.into_rank()?, y)?;
    warm.into_data(); // wait_to_read

    let engine = Engine::new(Model { net, trainer }, Some(device.clone()));

    // mem = get_mem()
    // with d2l.Benchmark('time per epoch'):
    //     for X, y in data_iter():
    //         with autograd.record():
    //             l = loss(y, net(X))
    //         l.backward()
    //         trainer.step(X.shape[0])
    //         l.wait_to_read()  # Barrier before a new batch
    //     npx.waitall()
    // print(f'increased memory: {get_mem() - mem:f} MB')
    let mem = get_mem();
    let timer = Instant::now();
    let mut peak = mem;
    for batch in data_iter(num_batches, 0) {
        let l = engine.issue(step(batch, device.clone()));
        peak = peak.max(get_mem());
        l.wait()?; // Barrier before a new batch
    }
    engine.wait_all()?;
    println!("time per epoch: {:.4} sec", timer.elapsed().as_secs_f64());
    println!("increased memory: {:.6} MB", get_mem() - mem);
    // Not in the book: the largest growth seen during the epoch. glibc hands freed batches back
    // to the system, so after waitall the queue's memory may already be gone.
    println!("peak growth while issuing: {:.1} MB", peak - mem);

    // mem = get_mem()
    // with d2l.Benchmark('time per epoch'):
    //     for X, y in data_iter():
    //         with autograd.record():
    //             l = loss(y, net(X))
    //         l.backward()
    //         trainer.step(X.shape[0])
    //     npx.waitall()
    // print(f'increased memory: {get_mem() - mem:f} MB')
    let mem = get_mem();
    let timer = Instant::now();
    let mut issued = 0.0;
    let mut peak = mem;
    for batch in data_iter(num_batches, 1) {
        engine.issue(step(batch, device.clone()));
        issued = timer.elapsed().as_secs_f64();
        peak = peak.max(get_mem());
    }
    engine.wait_all()?;
    println!(
        "time per epoch: {:.4} sec (all batches issued after {issued:.4} sec)",
        timer.elapsed().as_secs_f64()
    );
    println!("increased memory: {:.6} MB", get_mem() - mem);
    println!("peak growth while issuing: {:.1} MB", peak - mem);

    engine.finish()?;
    Ok(())
}
