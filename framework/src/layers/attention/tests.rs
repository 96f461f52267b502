//! The attention layers' modes, refusals, edge cases and deferred sizes (their numbers against
//! PyTorch's are in `tests/layers/attention.rs`).

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::*;
use crate::block::Block;
use crate::init::Init;
use crate::layers::norm::LayerNorm;
use crate::layers::rnn::Layout;
use crate::layers::sequential::Sequential;

/// `[batch, steps, features]` of varied values.
fn x(shape: [usize; 3], device: &Device) -> Tensor<3> {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| (0.37 * i as f32 + 0.1).sin()).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

fn read<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec().unwrap()
}

fn assert_near(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-6, "{x} against {y}");
    }
}

fn lens(lens: &[i64], device: &Device) -> Tensor<1, Int> {
    Tensor::from_data(TensorData::new(lens.to_vec(), [lens.len()]), device)
}

/// `layer` with the parameters of `from`, through a file.
fn same_parameters<B: Block + 'static>(from: &B, layer: B, device: &Device) -> B {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("params.safetensors");
    from.save_parameters(&path).unwrap();
    layer.load_parameters(&path, device).unwrap()
}

#[test]
fn dropout_draws_in_training_and_the_valid_copy_is_the_layer_without_dropout() {
    let device = Device::flex().autodiff();
    let inner = Device::flex();
    let shape = [2, 6, 8];
    let mha = |rate: f64| {
        MultiHeadAttention::new(2)
            .layout(Layout::Ntc)
            .dropout(rate)
            .initialize(Init::Xavier, &device)
            .infer_shape(x(shape, &device))
            .unwrap()
    };
    let dropped = mha(0.5);
    let plain = same_parameters(&dropped, mha(0.0), &device);
    let run = |layer: &MultiHeadAttention, device: &Device| {
        let x = x(shape, device);
        let (y, weights) = layer.forward_qkv(x.clone(), x.clone(), x, None);
        (read(y), read(weights))
    };
    assert_ne!(
        run(&dropped, &device),
        run(&dropped, &device),
        "no mask drawn"
    );
    let inference = dropped.valid();
    assert_eq!(run(&inference, &inner), run(&inference, &inner));
    // The same parameters without dropout: inference is that network (on the autodiff
    // device, products may round in another order, in the last bits).
    assert_eq!(run(&inference, &inner), run(&plain.valid(), &inner));
    let (y, weights) = run(&plain, &device);
    assert_near(&run(&inference, &inner).0, &y);
    assert_near(&run(&inference, &inner).1, &weights);

    let layer = |rate: f64| {
        TransformerEncoderLayer::new(2, 16)
            .dropout(rate)
            .initialize(Init::Xavier, &device)
            .infer_shape(x(shape, &device))
            .unwrap()
    };
    let dropped = layer(0.5);
    let plain = same_parameters(&dropped, layer(0.0), &device);
    let run = |layer: &TransformerEncoderLayer, device: &Device| {
        read(layer.forward_masked(x(shape, device), None))
    };
    assert_ne!(
        run(&dropped, &device),
        run(&dropped, &device),
        "no mask drawn"
    );
    assert_eq!(run(&dropped.valid(), &inner), run(&plain.valid(), &inner));
    assert_near(&run(&dropped.valid(), &inner), &run(&plain, &device));
}

#[test]
fn an_embedding_size_the_heads_do_not_divide_is_an_error_naming_both() {
    let device = Device::flex();
    let err = MultiHeadAttention::new(3)
        .initialize(Init::default(), &device)
        .infer_shape(x([2, 4, 8], &device))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("embedding size 8 is not divisible by 3 heads"),
        "{err}"
    );
    // Declared: nothing is built at `initialize`, and `infer` says why.
    let declared = MultiHeadAttention::new(4)
        .embed_dim(10)
        .initialize(Init::default(), &device);
    assert_eq!(declared.collect_params().deferred, ["MultiHeadAttention"]);
    let err = declared
        .infer_shape(x([2, 4, 10], &device))
        .unwrap_err()
        .to_string();
    assert!(err.contains("10") && err.contains("4 heads"), "{err}");
    let err = TransformerEncoderLayer::new(3, 16)
        .initialize(Init::default(), &device)
        .infer_shape(x([2, 4, 8], &device))
        .unwrap_err()
        .to_string();
    assert!(err.contains("TransformerEncoderLayer(?, 3 heads"), "{err}");
    assert!(err.contains("8 is not divisible by 3 heads"), "{err}");
    let err = MultiHeadAttention::new(0)
        .initialize(Init::default(), &device)
        .infer_shape(x([2, 4, 8], &device))
        .unwrap_err()
        .to_string();
    assert!(err.contains("num_heads 0"), "{err}");
}

/// d2l's `masked_softmax`: a length of 0 sets every score to −10⁶, so the weights are even over
/// all the keys; a length above the keys masks none.
#[test]
fn valid_lengths_of_zero_and_above_the_keys_behave_as_d2ls_masked_softmax() {
    let device = Device::flex();
    let shape = [2, 3, 8];
    let mha = MultiHeadAttention::new(2)
        .layout(Layout::Ntc)
        .initialize(Init::Xavier, &device)
        .infer_shape(x(shape, &device))
        .unwrap();
    let attend = |lens_: &[i64]| {
        let x = x(shape, &device);
        let mask = Mask::new().valid_lens(lens(lens_, &device));
        let (y, weights) = mha.forward_qkv(x.clone(), x.clone(), x, Some(&mask));
        (read(y), read(weights))
    };
    let (_, weights) = attend(&[0, 3]);
    assert!(
        weights[..9].iter().all(|w| (w - 1.0 / 3.0).abs() < 1e-6),
        "{weights:?}"
    );
    assert_eq!(attend(&[9, 3]), attend(&[3, 3]), "a length above the keys");
    let (_, weights) = attend(&[1, 2]);
    let row = |b: usize, q: usize| &weights[(b * 3 + q) * 3..(b * 3 + q + 1) * 3];
    assert_eq!(row(0, 2), [1.0, 0.0, 0.0]);
    assert_eq!(row(1, 0)[2], 0.0);
}

#[test]
fn the_embedding_size_is_deferred_until_infer_shape_or_declared() {
    let device = Device::flex();
    let mha = MultiHeadAttention::new(2).initialize(Init::default(), &device);
    assert_eq!(mha.to_string(), "MultiHeadAttention(?, 2 heads)");
    assert_eq!(mha.collect_params().deferred, ["MultiHeadAttention"]);
    let mha = mha.infer_shape(x([5, 2, 6], &device)).unwrap();
    assert_eq!(mha.to_string(), "MultiHeadAttention(6, 2 heads)");
    let names: Vec<(String, Vec<usize>)> = mha
        .collect_params()
        .params
        .into_iter()
        .map(|p| (p.name, p.shape))
        .collect();
    let want = [
        ("in_proj_weight", vec![18, 6]),
        ("in_proj_bias", vec![18]),
        ("out_proj.weight", vec![6, 6]),
        ("out_proj.bias", vec![6]),
    ];
    let want: Vec<(String, Vec<usize>)> = want.map(|(n, s)| (n.to_string(), s)).to_vec();
    assert_eq!(names, want);
    let err = mha.infer_shape(x([5, 2, 4], &device)).unwrap_err();
    assert!(err.to_string().contains("4 features"), "{err}");
    let declared = MultiHeadAttention::new(2)
        .embed_dim(6)
        .initialize(Init::default(), &device);
    assert!(declared.collect_params().deferred.is_empty());

    // An encoder: every layer and the norm take the size from the example, through a
    // Sequential, under PyTorch's names.
    let layer = TransformerEncoderLayer::new(2, 12).layout(Layout::Ntc);
    let encoder = TransformerEncoder::new(layer, 2).norm(LayerNorm::new());
    let net: Sequential = Sequential::new()
        .add(encoder)
        .initialize(Init::default(), &device);
    assert_eq!(net.collect_params().deferred.len(), 3);
    let net = net.infer_shape(x([3, 4, 6], &device)).unwrap();
    let params = net.collect_params();
    assert_eq!(params.params.len(), 2 * 12 + 2);
    assert_eq!(
        params.get("0.layers.1.linear2.weight").unwrap().shape,
        [6, 12]
    );
    assert_eq!(
        params.get("0.layers.0.linear1.weight").unwrap().shape,
        [12, 6]
    );
    assert_eq!(params.get("0.norm.weight").unwrap().shape, [6]);
    let y = net.forward(x([3, 4, 6], &device).into());
    assert_eq!(y.dims(), [3, 4, 6]);
}

#[test]
fn initialize_draws_the_projection_and_zeroes_every_bias_as_pytorch() {
    let device = Device::flex();
    let mha = MultiHeadAttention::new(2)
        .embed_dim(8)
        .initialize(Init::Xavier, &device);
    let weights = mha.weights.get().unwrap();
    let bound = (6.0f32 / (24.0 + 8.0)).sqrt();
    let w = read(weights.in_proj_weight.val());
    assert!(w.iter().all(|v| v.abs() <= bound) && w.iter().any(|v| *v != 0.0));
    assert!(
        read(weights.in_proj_bias.as_ref().unwrap().val())
            .iter()
            .all(|b| *b == 0.0)
    );
    let out_bias = weights.out_proj.bias.as_ref().unwrap().val();
    assert!(read(out_bias).iter().all(|b| *b == 0.0));
    // Deferred: the same once the size is known.
    let mha = MultiHeadAttention::new(2)
        .initialize(Init::Uniform(0.5), &device)
        .infer_shape(x([1, 2, 8], &device))
        .unwrap();
    let bias = mha
        .weights
        .get()
        .unwrap()
        .in_proj_bias
        .as_ref()
        .unwrap()
        .val();
    assert!(read(bias).iter().all(|b| *b == 0.0));
}

#[test]
#[should_panic(expected = "an additive attention mask is [queries, keys] = [3, 3]")]
fn a_mask_of_another_shape_is_named() {
    let device = Device::flex();
    let mha = MultiHeadAttention::new(1)
        .initialize(Init::default(), &device)
        .infer_shape(x([3, 2, 4], &device))
        .unwrap();
    let x = x([3, 2, 4], &device);
    let mask = Mask::causal(4, &device);
    mha.forward_qkv(x.clone(), x.clone(), x, Some(&mask));
}

/// `causal(true)`: each step's output depends on the steps up to it only, and equals
/// `forward_masked` with `Mask::causal`; without it, a later step changes the earlier ones.
#[test]
fn a_causal_encoder_lets_no_step_see_a_later_one() {
    let device = Device::flex();
    let layer = TransformerEncoderLayer::new(2, 8).dropout(0.0).layout(Layout::Ntc);
    let input = x([2, 5, 4], &device);
    for causal in [true, false] {
        let encoder = TransformerEncoder::new(layer.clone(), 2)
            .causal(causal)
            .initialize(Init::Xavier, &device)
            .infer_shape(input.clone())
            .unwrap();
        let y: Tensor<3> = encoder.forward(input.clone().into()).rank();
        // The last step changed: steps 0 to 3 of a causal encoder stay as they were.
        let later = input.clone().slice_assign([0..2, 4..5, 0..4], Tensor::ones([2, 1, 4], &device));
        let z: Tensor<3> = encoder.forward(later.into()).rank();
        let earlier = |t: Tensor<3>| t.slice([0..2, 0..4, 0..4]).into_data();
        match causal {
            true => {
                assert_eq!(earlier(y.clone()), earlier(z));
                let masked = encoder.forward_masked(input.clone(), Some(&Mask::causal(5, &device)));
                assert_eq!(y.into_data(), masked.into_data());
            }
            false => assert_ne!(earlier(y), earlier(z)),
        }
    }
}

/// An encoder of copies of an initialized layer: each copy's parameters have ids of their own,
/// so that each gets its own gradients and optimizer state.
#[test]
fn copies_of_an_initialized_layer_have_parameters_of_their_own() {
    struct Ids(Vec<burn::module::ParamId>);
    impl burn::module::ModuleVisitor for Ids {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            self.0.push(param.id);
        }
    }
    let device = Device::flex();
    let layer = TransformerEncoderLayer::new(2, 8)
        .d_model(4)
        .initialize(Init::Xavier, &device);
    let encoder = TransformerEncoder::new(layer.clone(), 3);
    let mut ids = Ids(Vec::new());
    encoder.visit(&mut ids);
    let unique: std::collections::HashSet<_> = ids.0.iter().collect();
    assert_eq!(unique.len(), ids.0.len());
    let mut one = Ids(Vec::new());
    layer.visit(&mut one);
    assert_eq!(ids.0.len(), 3 * one.0.len());
}
