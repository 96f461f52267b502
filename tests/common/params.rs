//! A network's parameters as numbers, to compare two runs.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use ember::Sequential;

/// Every parameter's values, in visiting order.
struct Flatten(Vec<f32>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let values = param.val().into_data().convert::<f32>().try_to_vec::<f32>();
        self.0.extend(values.unwrap());
    }
}

pub fn flat(net: &Sequential) -> Vec<f32> {
    let mut visitor = Flatten(Vec::new());
    net.visit(&mut visitor);
    visitor.0
}

pub fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}
