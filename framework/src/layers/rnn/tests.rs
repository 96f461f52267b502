//! The recurrent layer's dropout, refusals and state checks (its numbers against PyTorch's
//! are in `tests/layers/recurrent.rs`).

use super::*;
use burn::module::Module;

fn x(device: &Device) -> Tensor<3> {
    Tensor::<3>::ones([5, 2, 3], device)
}

#[test]
fn dropout_between_layers_draws_in_training_and_is_off_in_inference() {
    let device = Device::flex().autodiff();
    let built = |rate: f64| {
        Recurrent::lstm(16)
            .layers(2)
            .dropout(rate)
            .initialize(Init::Xavier, &device)
            .infer_shape(x(&device))
            .unwrap()
    };
    // The same parameters without dropout, copied (a seed would be shared with the tests
    // drawing on other threads in between).
    let lstm = built(0.5);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lstm.safetensors");
    crate::save_parameters(&lstm, &file).unwrap();
    let plain = crate::load_parameters(built(0.0), &file, &device).unwrap();
    let run = |layer: &Recurrent, device: &Device| {
        let y = layer.forward_state(x(device), None).0;
        y.into_data().try_to_vec::<f32>().unwrap()
    };
    assert_ne!(run(&lstm, &device), run(&lstm, &device), "no mask drawn");
    let inference = lstm.valid();
    let inner = Device::flex();
    assert_eq!(run(&inference, &inner), run(&inference, &inner));
    // The same parameters without dropout: inference is that network (run for inference too:
    // oneDNN's inference and training kernels round differently).
    assert_eq!(run(&inference, &inner), run(&plain.valid(), &inner));
    // One layer: nothing between layers, nothing dropped even in training.
    let one = Recurrent::gru(8)
        .dropout(0.5)
        .initialize(Init::Xavier, &device)
        .infer_shape(x(&device))
        .unwrap();
    assert_eq!(run(&one, &device), run(&one, &device));
}

#[test]
fn sizes_that_make_no_layer_are_errors_naming_them() {
    let device = Device::flex();
    let refused = |layer: Recurrent| {
        let layer = layer.initialize(Init::default(), &device);
        let shown = layer.to_string();
        (shown, layer.infer_shape(x(&device)).unwrap_err().to_string())
    };
    let (shown, err) = refused(Recurrent::lstm(4).layers(0).input_size(3));
    assert!(shown.starts_with("LSTM(3 -> 4, 0 layers"), "{shown}");
    assert!(err.contains("num_layers 0"), "{err}");
    let (_, err) = refused(Recurrent::gru(0));
    assert!(err.contains("hidden size 0"), "{err}");
    let (_, err) = refused(Recurrent::rnn(4).dropout(1.0));
    assert!(err.contains("dropout 1"), "{err}");
    let (_, err) = refused(Recurrent::rnn(4).input_size(7));
    assert!(err.contains('7') && err.contains('3'), "{err}");
}

#[test]
#[should_panic(expected = "takes 2 state(s) of shape [2, 2, 4]")]
fn states_of_another_shape_are_named_not_reshaped() {
    let device = Device::flex();
    let lstm = Recurrent::lstm(4)
        .bidirectional(true)
        .initialize(Init::default(), &device)
        .infer_shape(x(&device))
        .unwrap();
    // [layers × directions, hidden, batch]: as many values, in the wrong order.
    let wrong = vec![Tensor::<3>::zeros([2, 4, 2], &device); 2];
    lstm.forward_state(x(&device), Some(wrong));
}
