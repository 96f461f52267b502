//! A window sliding over the spatial axes, as convolutions and pooling take it, in oneDNN's terms.

/// Kernel, strides, padding (each side) and dilation per spatial axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Window {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub padding: Vec<usize>,
    pub dilation: Vec<usize>,
}

/// dnnl's signed dimension array (`DNNL_MAX_NDIMS` entries).
#[cfg(feature = "onednn")]
pub type Dims = [i64; super::onednn::library::DNNL_MAX_NDIMS as usize];

#[cfg(feature = "onednn")]
fn signed(values: impl IntoIterator<Item = i64>) -> Dims {
    let mut dims = [0i64; super::onednn::library::DNNL_MAX_NDIMS as usize];
    for (d, v) in dims.iter_mut().zip(values) {
        *d = v;
    }
    dims
}

impl Window {
    /// The output's spatial sizes for an input's (PyTorch's formula, as `conv::window_output`).
    #[cfg_attr(not(feature = "onednn"), allow(dead_code))]
    pub fn output(&self, input: &[usize]) -> Option<Vec<usize>> {
        (0..self.kernel.len())
            .map(|i| {
                let span = self.dilation[i] * (self.kernel[i] - 1) + 1;
                let padded = input[i] + 2 * self.padding[i];
                (self.strides[i] > 0 && padded >= span)
                    .then(|| (padded - span) / self.strides[i] + 1)
            })
            .collect()
    }

    #[cfg(feature = "onednn")]
    pub fn strides(&self) -> Dims {
        signed(self.strides.iter().map(|&s| s as i64))
    }

    #[cfg(feature = "onednn")]
    pub fn kernel(&self) -> Dims {
        signed(self.kernel.iter().map(|&k| k as i64))
    }

    #[cfg(feature = "onednn")]
    /// oneDNN counts dilation from 0 (no gap between taps).
    pub fn dilation(&self) -> Dims {
        signed(self.dilation.iter().map(|&d| d as i64 - 1))
    }

    #[cfg(feature = "onednn")]
    pub fn padding_left(&self) -> Dims {
        signed(self.padding.iter().map(|&p| p as i64))
    }

    #[cfg(feature = "onednn")]
    /// The padding on the far side that makes oneDNN's output size equal `output` (less than
    /// the near side's where the last window does not reach the end).
    pub fn padding_right(&self, input: &[usize], output: &[usize]) -> Dims {
        signed((0..self.kernel.len()).map(|i| {
            let span = (self.dilation[i] * (self.kernel[i] - 1) + 1) as i64;
            (output[i] as i64 - 1) * self.strides[i] as i64 + span
                - input[i] as i64
                - self.padding[i] as i64
        }))
    }
}
