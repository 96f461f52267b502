//! One check for every rate, bound and factor that reaches the training's arithmetic: a
//! finite number above 0 in single precision too.

use crate::error::{Error, Result};

/// `value` if it is a finite number above 0 in single precision too: rates, bounds and factors
/// reach the training's arithmetic as f32, where a value below about 1.4e-45 is 0 and trains
/// nothing (a learning rate of 1e-50 left every parameter as it was, exit 0), and one above
/// about 3.4e38 is infinite.
///
/// # Errors
/// [`Error::InvalidValue`] naming `name` and the value, and what single precision makes of it.
pub fn positive(name: &'static str, value: f64) -> Result<f64> {
    let reason = if !(value.is_finite() && value > 0.0) {
        "must be a finite number above 0".to_string()
    } else {
        match value as f32 {
            0.0 => "must be above 0 in single precision, which training computes in: it is 0 \
                    there, and would train nothing (the smallest is about 1.4e-45)"
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

#[cfg(test)]
mod tests {
    use super::positive;

    #[test]
    fn a_value_that_single_precision_makes_0_or_infinite_is_refused_naming_it() {
        assert_eq!(positive("learning rate", 1e-3).unwrap(), 1e-3);
        assert_eq!(positive("learning rate", 1e-44).unwrap(), 1e-44);
        for (value, said) in [
            (1e-50, "it is 0 there"),
            (1e-46, "it is 0 there"),
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
