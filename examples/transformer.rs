//! A Transformer encoder classifier of one's own (d2l 11.7, 11.8): each Fashion-MNIST image is
//! read as a sequence of its 28 rows, each row projected by a `Dense` to the model's width,
//! d2l's `PositionalEncoding` added, two `TransformerEncoderLayer`s (PyTorch's, pre-norm), the
//! steps' mean, then a `Dense` to the 10 classes; Adam, `fit`, and the test accuracy per epoch.
//!
//! ```text
//! cargo run --release --example transformer -- [DIR] [DEVICE] [EPOCHS]
//! ```
//!
//! DIR defaults to Debian's `/usr/share/datasets/fashion-mnist`; DEVICE to `flex`; EPOCHS to 3.

#[allow(dead_code)]
#[path = "common/d2l.rs"]
mod d2l;

use burn::prelude::*;
use ember::{
    Block, Dense, Init, Layout, NdTensor, Optimizer, PositionalEncoding, Result,
    SoftmaxCrossEntropyLoss, TransformerEncoder, TransformerEncoderLayer,
};
use ember_datasets::{DataLoader, fashion_mnist};
use ember_trainer::fit::Fit;
use ember_trainer::metric::MetricKind;

/// Rows in, class scores out.
#[derive(Module, Debug)]
pub struct RowTransformer {
    embed: Dense,
    position: PositionalEncoding,
    encoder: TransformerEncoder,
    classes: Dense,
}

impl RowTransformer {
    /// `layers` encoder layers of `heads` heads over a width of `width`, `classes` outputs.
    pub fn new(width: usize, heads: usize, layers: usize, classes: usize) -> Self {
        let layer = TransformerEncoderLayer::new(heads, 2 * width)
            .dropout(0.1)
            .norm_first(true)
            .layout(Layout::Ntc);
        Self {
            embed: Dense::new(width).flatten(false),
            position: PositionalEncoding::new(width, 0.1),
            encoder: TransformerEncoder::new(layer, layers),
            classes: Dense::new(classes),
        }
    }

    /// `[batch, 1, rows, columns]` images as `[batch, rows, columns]` sequences.
    fn rows(x: NdTensor) -> NdTensor {
        let x: Tensor<4> = x.rank();
        let [batch, _, rows, columns] = x.dims();
        x.reshape([batch, rows, columns]).into()
    }

    /// The steps' mean: `[batch, steps, width]` to `[batch, width]`.
    fn pooled(h: NdTensor) -> NdTensor {
        let h: Tensor<3> = h.rank();
        h.mean_dim(1).squeeze_dim::<2>(1).into()
    }
}

impl Block for RowTransformer {
    fn forward(&self, x: NdTensor) -> NdTensor {
        let h = self.embed.forward(Self::rows(x));
        let h = self.encoder.forward(self.position.forward(h));
        self.classes.forward(Self::pooled(h))
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let (embed, h) = self.embed.infer(Self::rows(x))?;
        let (position, h) = self.position.infer(h)?;
        let (encoder, h) = self.encoder.infer(h)?;
        let (classes, y) = self.classes.infer(Self::pooled(h))?;
        let net = Self {
            embed,
            position,
            encoder,
            classes,
        };
        Ok((net, y))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            embed: self.embed.initialize(init, device),
            position: self.position.initialize(init, device),
            encoder: self.encoder.initialize(init, device),
            classes: self.classes.initialize(init, device),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = d2l::args(3)?;
    let device = &args.device;
    let (train, test) = fashion_mnist::load(&args.dir)?;
    let net = RowTransformer::new(64, 4, 2, 10).initialize(Init::Xavier, device);
    let optimizer = Optimizer::new(&net, "adam", 0.001)?;
    let mut batches = DataLoader::new(train, 256)?.shuffle(0).prefetch(4);
    let test = DataLoader::new(test, 1024)?;
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, optimizer, device)
        .epochs(args.epochs)
        .evaluate_metrics(
            "test",
            test,
            [MetricKind::Accuracy.build()],
            &device.clone().inner(),
        )
        .run(&mut batches)?;
    for e in &run.trace.epochs {
        println!(
            "epoch {}: loss {:.4}, train acc {:.3}, test acc {:.3}, {:.1} sec",
            e.epoch + 1,
            e.mean_loss,
            e.metrics["train_acc"],
            e.metrics["test_acc"],
            e.time
        );
    }
    println!("{}", run.net.summary());
    Ok(())
}
