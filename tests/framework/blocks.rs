//! Blocks and their shapes: a bad dropout rate or a wrong feature count is an error naming the
//! value, not a panic, and a user's block passes `initialize` on to its deferred layers.

use burn::prelude::*;
use ember::{Block, Dense, Dropout, Error, Init, NdTensor, Sequential};

use super::tiny_net::tiny_net;

#[test]
fn a_dropout_rate_outside_zero_to_one_is_an_error_naming_it_not_a_panic() {
    let device = Device::flex().autodiff();
    for rate in [1.0, 1.5, -0.25, f64::NAN] {
        let net: Sequential = Sequential::new()
            .add(Dense::new(4))
            .add(Dropout::new(rate))
            .initialize(Init::default(), &device);
        let err = net
            .infer_shape(Tensor::<2>::ones([2, 3], &device))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("dropout rate") && err.contains(&rate.to_string()),
            "{rate}: {err}"
        );
    }
}

#[test]
fn a_batch_with_the_wrong_feature_count_names_both_numbers() {
    let device = Device::flex();
    let net = tiny_net()
        .initialize(Init::default(), &device)
        .infer_shape(Tensor::<2>::zeros([2, 512], &device))
        .unwrap();
    let err = net
        .infer_shape(Tensor::<2>::zeros([2, 784], &device))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("layer 0: "), "{text}");
    assert!(text.contains("784") && text.contains("512"), "{text}");
}

/// A user's block that holds a deferred layer passes `initialize` on, as it passes the example
/// in `infer`: no hidden mode carries the initializer to it. One that does not is told so.
#[test]
fn a_users_block_passes_initialize_on_to_its_deferred_layers() {
    #[derive(Module, Debug)]
    struct Wrapper {
        dense: Dense,
    }
    impl Block for Wrapper {
        fn forward(&self, x: NdTensor) -> NdTensor {
            self.dense.forward(x)
        }
        fn infer(self, x: NdTensor) -> ember::Result<(Self, NdTensor)> {
            let (dense, y) = self.dense.infer(x)?;
            Ok((Self { dense }, y))
        }
    }
    let device = Device::flex();
    let x = Tensor::<2>::ones([3, 4], &device);
    let err = Wrapper {
        dense: Dense::new(2),
    }
    .initialize(Init::default(), &device)
    .infer_shape(x.clone())
    .unwrap_err();
    assert!(matches!(err, Error::NotInitialized { .. }), "{err:?}");
    assert!(err.to_string().contains("passes initialize on"), "{err}");

    // Passed on, as the block's own `initialize` would.
    let net = Wrapper {
        dense: Dense::new(2).initialize(Init::Normal(0.5), &device),
    }
    .infer_shape(x)
    .unwrap();
    assert_eq!(
        net.collect_params().get("dense.weight").unwrap().shape,
        [2, 4]
    );
}
