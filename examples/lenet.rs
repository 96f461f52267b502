//! d2l's LeNet (7.6) on Fashion-MNIST, with Gluon's code line for line in the comments.
//!
//! ```text
//! cargo run --release --example lenet -- [DIR] [DEVICE] [EPOCHS]
//! ```
//!
//! DIR defaults to Debian's `/usr/share/datasets/fashion-mnist`
//! (`apt-get install dataset-fashion-mnist`); DEVICE to `flex`; EPOCHS to 10.

#[path = "common/d2l.rs"]
mod d2l;

use ember::{Block, Init, models};

fn main() -> anyhow::Result<()> {
    let args = d2l::args(10)?;
    let device = &args.device;

    // net = nn.Sequential()
    // net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation='sigmoid'),
    //         nn.AvgPool2D(pool_size=2, strides=2),
    //         nn.Conv2D(channels=16, kernel_size=5, activation='sigmoid'),
    //         nn.AvgPool2D(pool_size=2, strides=2),
    //         nn.Dense(120, activation='sigmoid'), nn.Dense(84, activation='sigmoid'),
    //         nn.Dense(10))
    //         (ember::models::lenet writes these lines with ember's layers, once for the CLI,
    //         the examples and the tests)
    let net = models::lenet(10);
    // net.initialize(init=init.Xavier())   (train_ch6 does it; sizes are inferred at batch 1)
    let net = net.initialize(Init::Xavier, device);

    // lr, num_epochs = 0.9, 10
    // d2l.train_ch6(net, train_iter, test_iter, num_epochs, lr)   (batch_size = 256)
    let run = d2l::train(net, &args.dir, device, args.epochs, 0.9, 256)?;
    println!("{}", run.net.summary());
    Ok(())
}
