//! Multi-head attention's parameters and arithmetic, as `torch.nn.MultiheadAttention` holds
//! and computes them: one packed input projection `in_proj_weight` (`[3E, E]`, the query's
//! rows, then the key's, then the value's) with `in_proj_bias` (`[3E]`), and `out_proj`, a
//! linear layer whose weight a parameter file holds as PyTorch's `[E, E]` (`[out, in]`: burn's
//! `Linear` keeps `[in, out]`, and burn-store's PyTorch adapter transposes it at the file).
//!
//! For each head `h` of `d = E / heads` features: `softmax(q_h k_hᵀ / √d + mask) v_h`, the
//! heads side by side, then `out_proj`.

use burn::module::{Module, ModuleMapper, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use super::mask::Mask;
use crate::layers::dropout::Dropout;

/// The parameters of one multi-head attention, and the dropout on its weights.
#[derive(Module, Debug)]
pub(crate) struct AttentionWeights {
    pub(crate) in_proj_weight: Param<Tensor<2>>,
    pub(crate) in_proj_bias: Option<Param<Tensor<1>>>,
    pub(crate) out_proj: Linear,
    pub(crate) dropout: Dropout,
}

impl AttentionWeights {
    /// For `embed` features, zeros until the initializer fills them.
    pub(crate) fn zeros(embed: usize, use_bias: bool, dropout: f64, device: &Device) -> Self {
        Self {
            in_proj_weight: Param::from_tensor(Tensor::zeros([3 * embed, embed], device)),
            in_proj_bias: use_bias.then(|| Param::from_tensor(Tensor::zeros([3 * embed], device))),
            out_proj: LinearConfig::new(embed, embed)
                .with_bias(use_bias)
                .init(device),
            dropout: Dropout::new(dropout),
        }
    }

    /// The embedding size `E`, from the projection's shape.
    pub(crate) fn embed(&self) -> usize {
        self.in_proj_weight.lazy_shape().as_slice()[1]
    }

    /// Attention of queries `[batch, queries, E]` over keys and values `[batch, keys, E]`: the
    /// output `[batch, queries, E]` and each head's weights `[batch, heads, queries, keys]`
    /// (after dropout, as PyTorch returns them).
    pub(crate) fn attend(
        &self,
        heads: usize,
        q: Tensor<3>,
        k: Tensor<3>,
        v: Tensor<3>,
        mask: Option<&Mask>,
    ) -> (Tensor<3>, Tensor<4>) {
        let (q, k, v) = (self.project(q, 0), self.project(k, 1), self.project(v, 2));
        self.combine(heads, q, k, v, mask)
    }

    /// Self-attention of `x` (`[batch, steps, E]`): the three projections in one product.
    pub(crate) fn attend_self(
        &self,
        heads: usize,
        x: Tensor<3>,
        mask: Option<&Mask>,
    ) -> (Tensor<3>, Tensor<4>) {
        let weight = self.in_proj_weight.val().transpose();
        let bias = self.in_proj_bias.as_ref().map(Param::val);
        let qkv = crate::kernels::affine(x, weight, bias);
        let [q, k, v]: [Tensor<3>; 3] = qkv.chunk(3, 2).try_into().expect("q, k and v");
        self.combine(heads, q, k, v, mask)
    }

    /// `x W_partᵀ + b_part` for part 0 (query), 1 (key) or 2 (value) of the packed projection.
    fn project(&self, x: Tensor<3>, part: usize) -> Tensor<3> {
        let embed = self.embed();
        let weight = self.in_proj_weight.val().narrow(0, part * embed, embed);
        let bias = self
            .in_proj_bias
            .as_ref()
            .map(|b| b.val().narrow(0, part * embed, embed));
        crate::kernels::affine(x, weight.transpose(), bias)
    }

    /// The heads' scaled dot products, masks, softmax, dropout and weighted sums of the
    /// projected `q`, `k`, `v`, then `out_proj`.
    fn combine(
        &self,
        heads: usize,
        q: Tensor<3>,
        k: Tensor<3>,
        v: Tensor<3>,
        mask: Option<&Mask>,
    ) -> (Tensor<3>, Tensor<4>) {
        let [batch, queries, embed] = q.dims();
        let head = embed / heads;
        // [batch, len, E] → [batch, heads, len, d]
        let split = |t: Tensor<3>| {
            let [batch, len, _] = t.dims();
            t.reshape([batch, len, heads, head]).swap_dims(1, 2)
        };
        let q = split(q).mul_scalar(1.0 / (head as f64).sqrt());
        let scores = crate::kernels::matmul_heads(q, split(k), true);
        let scores = match mask {
            Some(mask) => mask.apply(scores),
            None => scores,
        };
        let weights = self.dropout.drop_units(crate::kernels::softmax(scores));
        let context = crate::kernels::matmul_heads(weights.clone(), split(v), false)
            .swap_dims(1, 2)
            .reshape([batch, queries, embed]);
        (apply_linear(&self.out_proj, context), weights)
    }
}

/// burn's `Linear` on `[…, in]`, through [`crate::kernels::affine`].
pub(crate) fn apply_linear<const D: usize>(layer: &Linear, x: Tensor<D>) -> Tensor<D> {
    crate::kernels::affine(x, layer.weight.val(), layer.bias.as_ref().map(Param::val))
}

/// PyTorch's zero `in_proj_bias`, after the initializer: ember's [`Init`](crate::Init) makes
/// every parameter named `bias` zeros and draws the others, and `in_proj_bias` is named
/// otherwise.
#[derive(Default)]
pub(crate) struct ZeroInProjBias {
    path: Vec<String>,
}

impl ZeroInProjBias {
    /// `module` with every `in_proj_bias` in it zero.
    pub(crate) fn apply<M: Module>(module: M) -> M {
        module.map(&mut Self::default())
    }
}

impl ModuleMapper for ZeroInProjBias {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if self.path.last().map(String::as_str) != Some("in_proj_bias") {
            return param;
        }
        param.map(|tensor| {
            let require_grad = tensor.is_require_grad();
            Tensor::zeros(tensor.shape(), &tensor.device())
                .detach()
                .set_require_grad(require_grad)
        })
    }
}
