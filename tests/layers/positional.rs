//! `PositionalEncoding` against d2l's own code (`tests/reference/positional_encoding.py`): the
//! table added to an input, within 1e-6; dropout after it in training only; inputs that do not
//! fit named.

use super::*;
use ember::PositionalEncoding;

include!("../reference/positional_encoding.out.rs");

#[test]
fn positional_encoding_adds_d2ls_table_then_drops_in_training_only() {
    let inner = Device::flex();
    let x = Tensor::<3>::from_data(TensorData::new(x_of(&[2, 5, 6]), [2, 5, 6]), &inner);
    let pe = PositionalEncoding::new(6, 0.5);
    let y = values(pe.clone().valid().forward(x.clone().into()).rank::<3>());
    let x = values(x);
    let added: Vec<f32> = y.iter().zip(&x).map(|(y, x)| y - x).collect();
    // The same table for both sequences of the batch.
    let want: Vec<f64> = D2L_P_5_STEPS_6_HIDDEN.repeat(2);
    for (i, (got, want)) in added.iter().zip(&want).enumerate() {
        assert!(
            (f64::from(*got) - want).abs() < 1e-6,
            "[{i}]: {got} vs {want}"
        );
    }
    // In training (an autodiff device), dropout after the addition: about half zeroed.
    let device = device();
    let ones = Tensor::<3>::ones([4, 50, 6], &device);
    let y = values(pe.forward(ones.into()).rank::<3>());
    let zeroed = y.iter().filter(|v| **v == 0.0).count();
    assert!((400..800).contains(&zeroed), "{zeroed} of 1200 dropped");
    // An input that does not fit: named with what it takes.
    let short = PositionalEncoding::new(6, 0.0).max_len(4);
    let err = short
        .infer_shape(Tensor::<3>::zeros([1, 5, 6], &inner))
        .unwrap_err();
    assert!(err.to_string().contains("at most 4 steps"), "{err}");
    let err = PositionalEncoding::new(8, 0.0)
        .infer_shape(Tensor::<3>::zeros([1, 5, 6], &inner))
        .unwrap_err();
    assert!(err.to_string().contains("[batch, steps, 8]"), "{err}");
}
