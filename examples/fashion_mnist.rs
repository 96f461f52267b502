//! d2l's MLP on Fashion-MNIST (`train_ch3` with Flatten, Dense(256, relu), Dense(10)), trained
//! with `fit` under the t/t+2 policy, with a test accuracy line per epoch.
//!
//! ```text
//! cargo run --release --example fashion_mnist -- [DIR] [DEVICE] [EPOCHS]
//! ```
//!
//! DIR defaults to Debian's `/usr/share/datasets/fashion-mnist`
//! (`apt-get install dataset-fashion-mnist`); DEVICE to `flex`; EPOCHS to 10.

#[path = "common/d2l.rs"]
mod d2l;

use ember::{Activation, Block, Dense, Init, Sequential};

fn main() -> anyhow::Result<()> {
    let args = d2l::args(10)?;
    let device = &args.device;

    // net = nn.Sequential(); net.add(nn.Dense(256, activation='relu'), nn.Dense(10))
    // net.initialize(init.Normal(sigma=0.01))    (Dense flattens 28x28 images, as Gluon's does)
    let net: Sequential = Sequential::new()
        .add(Dense::new(256).activation(Activation::Relu))
        .add(Dense::new(10))
        .initialize(Init::Normal(0.01), device);

    // batch_size, lr, num_epochs = 256, 0.1, 10
    // train_iter, test_iter = d2l.load_data_fashion_mnist(batch_size)
    // loss = gluon.loss.SoftmaxCrossEntropyLoss()
    // trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': lr})
    // d2l.train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)
    d2l::train(net, &args.dir, device, args.epochs, 0.1, 256)?;
    Ok(())
}
