//! The checks of every rate, bound, factor and hyper-parameter that reaches the training's
//! arithmetic: a finite number that single precision neither makes infinite nor lets vanish.

use crate::error::{Error, Result};

/// The smallest magnitude single precision keeps in training's arithmetic: its smallest normal
/// number, about 1.18e-38.
pub const SMALLEST: f64 = f32::MIN_POSITIVE as f64;

/// Whether `value`, not 0, is 0 in training's arithmetic: below single precision's smallest
/// normal number ([`SMALLEST`]). Below about 1.4e-45 f32 rounds it to 0; between that and
/// 1.18e-38 it is subnormal, and kernels that flush subnormals to 0 (CUDA's with
/// `-ftz`, x86's FTZ/DAZ modes, oneDNN's) make it 0 too. A learning rate of 1e-44 trained
/// nothing, exit 0.
pub fn vanishes(value: f64) -> bool {
    value != 0.0 && value.abs() < SMALLEST
}

/// `value` if it is a finite number above 0, and neither vanishes ([`vanishes`]) nor is
/// infinite in single precision: rates, bounds and factors reach the training's arithmetic as
/// f32, where a value below about 1.2e-38 is 0 or flushed to it and trains nothing (a learning
/// rate of 1e-50 left every parameter as it was, exit 0), and one above about 3.4e38 is
/// infinite.
///
/// # Errors
/// [`Error::InvalidValue`] naming `name` and the value, and what single precision makes of it.
pub fn positive(name: &'static str, value: f64) -> Result<f64> {
    let reason = if !(value.is_finite() && value > 0.0) {
        "must be a finite number above 0".to_string()
    } else {
        match value as f32 {
            _ if vanishes(value) => "must be at least about 1.2e-38, the smallest normal \
                number of single precision, which training computes in: below it a value is \
                0 there or flushed to 0, and would train nothing"
                .to_string(),
            single if single.is_infinite() => "must be finite in single precision, which \
                training computes in: it is infinite there (the largest is about 3.4e38)"
                .to_string(),
            _ => return Ok(value),
        }
    };
    Err(Error::InvalidValue {
        name,
        value: crate::error::number(value),
        reason,
    })
}

/// The error for `name`'s `value`, and why.
pub(super) fn invalid(name: &'static str, value: impl std::fmt::Display, reason: &str) -> Error {
    Error::InvalidValue {
        name,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// `value` if it lies in [low, high), in f32 too (burn's optimizers take their
/// hyper-parameters in single precision: a β₂ of 0.99999999 would be 1, and its bias
/// correction a division by 0). −0 is 0.
pub(super) fn within(name: &'static str, value: f64, low: f64, high: f64) -> Result<f64> {
    if !(value.is_finite() && value >= low && value < high) {
        let range = if high.is_finite() {
            format!("must lie in [{low}, {high})")
        } else {
            format!("must be a finite number, {low} or more")
        };
        return Err(invalid(name, crate::error::number(value), &range));
    }
    single(name, value + 0.0, high)
}

/// `value` if single precision keeps it finite and below `high`, and above 0 where it is (a
/// weight decay of 1e-50 is none at all there, nor is 1e-44, which kernels flush to 0
/// ([`vanishes`]): 0 says so).
pub(super) fn single(name: &'static str, value: f64, high: f64) -> Result<f64> {
    let rounded = f64::from(value as f32);
    if vanishes(value) {
        return Err(invalid(
            name,
            crate::error::number(value),
            "it is 0 in single precision, which the optimizer runs in, or flushed to 0 there \
             (below about 1.2e-38); give 0 for none",
        ));
    }
    if !(rounded.is_finite() && rounded < high) {
        return Err(invalid(
            name,
            crate::error::number(value),
            &format!("it is {rounded} in single precision, which the optimizer runs in"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::positive;

    #[test]
    fn a_value_that_single_precision_makes_0_or_infinite_is_refused_naming_it() {
        assert_eq!(positive("learning rate", 1e-3).unwrap(), 1e-3);
        assert_eq!(positive("learning rate", 2e-38).unwrap(), 2e-38);
        for (value, said) in [
            (1e-50, "is 0 there or flushed to 0"),
            (1e-46, "is 0 there or flushed to 0"),
            (1e-44, "is 0 there or flushed to 0"),
            (1e-38, "the smallest normal number"),
            (1e39, "infinite there"),
            (0.0, "above 0"),
            (-1.0, "above 0"),
            (f64::NAN, "above 0"),
        ] {
            let err = positive("learning rate", value).unwrap_err().to_string();
            assert!(
                err.contains("learning rate") && err.contains(said),
                "{value}: {err}"
            );
        }
    }
}
