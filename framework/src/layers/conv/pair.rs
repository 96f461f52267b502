//! Sizes along a window's axes: [`Pair`], Gluon's one-or-two numbers for a 2-D window, and
//! [`Axes`], which gives any convolution's size (`usize` or `Pair`) axis by axis. The options
//! (`options.rs`) and the shared convolution code (`mod.rs`) both read sizes through it.

use std::fmt;

/// A size along two axes (height, width): one number for both, as Gluon takes `kernel_size=5`,
/// or a pair, as it takes `(3, 5)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair(pub [usize; 2]);

impl From<usize> for Pair {
    fn from(n: usize) -> Self {
        Pair([n, n])
    }
}

impl From<[usize; 2]> for Pair {
    fn from(pair: [usize; 2]) -> Self {
        Pair(pair)
    }
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [a, b] if a == b => write!(f, "{a}"),
            [a, b] => write!(f, "{a}×{b}"),
        }
    }
}

/// A size per spatial axis: one for `usize` (1-D), two for [`Pair`] (2-D).
pub(crate) trait Axes: Copy {
    fn axes(self) -> Vec<usize>;
}

impl Axes for usize {
    fn axes(self) -> Vec<usize> {
        vec![self]
    }
}

impl Axes for Pair {
    fn axes(self) -> Vec<usize> {
        self.0.to_vec()
    }
}
