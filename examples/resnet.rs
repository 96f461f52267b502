//! A small residual network (d2l 8.6) on Fashion-MNIST: `ember::models::small_resnet`, whose
//! `Residual` block is written as a user's own block is, goes into a `Sequential` beside the
//! built-in layers.
//!
//! ```text
//! cargo run --release --example resnet -- [DIR] [DEVICE] [EPOCHS]
//! ```
//!
//! DIR defaults to Debian's `/usr/share/datasets/fashion-mnist`; DEVICE to `flex`; EPOCHS to 3.

#[path = "common/d2l.rs"]
mod d2l;

use ember::{Block, Export, Init, models};

fn main() -> anyhow::Result<()> {
    let args = d2l::args(3)?;
    let device = &args.device;

    // A small ResNet for 28×28 images, sized for a CPU.
    let net = models::small_resnet(10);
    let net = net.initialize(Init::Xavier, device);

    // d2l.train_ch6(net, train_iter, test_iter, num_epochs, lr=0.05)
    let run = d2l::train(net, &args.dir, device, args.epochs, 0.05, 256)?;
    println!("{}", run.net.summary());
    // net.export('resnet'): the trained network as ONNX, for ONNX Runtime and others.
    run.net.export("resnet.onnx", &[1, 28, 28])?;
    println!("exported to resnet.onnx");
    Ok(())
}
