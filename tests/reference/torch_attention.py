"""Reference values for tests/layers/attention.rs, from PyTorch's nn.MultiheadAttention,
nn.TransformerEncoderLayer and nn.TransformerEncoder (CPU, float64 then printed).

Run: ~/.cache/ember/torch-venv/bin/python tests/reference/torch_attention.py \
       > tests/reference/torch_attention.out.rs
Every tensor is filled by a formula of layer_formulas.py, which tests/layers.rs repeats in Rust:
  input j        x[i] = sin(0.37 i + 0.1 + 0.5 j)      (j = 0: the query, or the one input of
                                                          self-attention; 1: the key; 2: the
                                                          value; row-major, in the layout's order)
  parameter k    w[i] = 0.3 cos(0.53 i + 0.2 + k)      (k: its place in named_parameters())
  additive mask  m[i] = 0.8 sin(0.43 i + 0.2)          ([queries, keys]), or PyTorch's causal
                                                          mask (generate_square_subsequent_mask)
  valid lengths  d2l's: key j of sequence b is padding where j >= lens[b], given to PyTorch as
                 the float key_padding_mask (-inf where padded)
  the gradients that flow in: g[i] = sin(0.71 i + 0.3) into the output, and
                 s[i] = sin(0.29 i + 0.7) into the weights averaged over the heads, i.e.
                 loss = sum(y * g) + sum(weights * s)       (an encoder: sum(y * g))
Dropout is 0 everywhere. Each case prints a `Want` (tests/layers/attention.rs): the output, the
averaged weights (none for an encoder), the inputs' gradients, and each parameter's name, shape
and gradient, in PyTorch's order.
"""
import math

import torch
import torch.nn as nn

from layer_formulas import fill, g_of, w_of

torch.set_default_dtype(torch.float64)


def input_of(shape, j):
    return fill(shape, lambda i: math.sin(0.37 * i + 0.1 + 0.5 * j))


def s_of(shape):
    return fill(shape, lambda i: math.sin(0.29 * i + 0.7))


def m_of(shape):
    return fill(shape, lambda i: 0.8 * math.sin(0.43 * i + 0.2))


def padding(lens, keys):
    """d2l's valid lengths as PyTorch's float key_padding_mask [batch, keys]."""
    padded = torch.arange(keys)[None, :] >= torch.tensor(lens)[:, None]
    return torch.zeros(padded.shape).masked_fill(padded, float("-inf"))


def values(t):
    return ", ".join(f"{v:.9}" for v in t.detach().flatten().tolist())


def fill_parameters(module):
    for k, (_, p) in enumerate(module.named_parameters()):
        with torch.no_grad():
            p.copy_(w_of(p.shape, k))


def show(name, module, inputs, y, weights):
    params = ", ".join(f'("{n}", &{list(p.shape)})' for n, p in module.named_parameters())
    grads = ", ".join(f"&[{values(p.grad)}]" for _, p in module.named_parameters())
    dx = ", ".join(f"&[{values(x.grad)}]" for x in inputs)
    print(f"const {name}: Want = Want {{")
    print(f"    y: &[{values(y)}],")
    print(f"    weights: &[{values(weights) if weights is not None else ''}],")
    print(f"    dx: &[{dx}],")
    print(f"    params: &[{params}],")
    print(f"    d: &[{grads}],")
    print("};")


def attention(name, mha, q_shape, kv_shape=None, additive=None, lens=None):
    """Self-attention on one input of q_shape, or cross-attention of a query of q_shape over a
    key and value of kv_shape."""
    fill_parameters(mha)
    if kv_shape is None:
        x = input_of(q_shape, 0).requires_grad_(True)
        inputs, (q, k, v) = [x], (x, x, x)
    else:
        inputs = [input_of(q_shape, 0), input_of(kv_shape, 1), input_of(kv_shape, 2)]
        inputs = [t.requires_grad_(True) for t in inputs]
        q, k, v = inputs
    keys = k.shape[1] if mha.batch_first else k.shape[0]
    kpm = padding(lens, keys) if lens is not None else None
    y, weights = mha(q, k, v, key_padding_mask=kpm, attn_mask=additive)
    loss = (y * g_of(y.shape)).sum() + (weights * s_of(weights.shape)).sum()
    loss.backward()
    masks = []
    if additive is not None:
        masks.append(f"additive mask {list(additive.shape)}")
    if lens is not None:
        masks.append(f"valid lengths {lens}")
    print(f"// {name}: {describe_mha(mha)}, q {list(q.shape)}, "
          f"k/v {list(k.shape)}, {', '.join(masks) or 'no mask'}; output {list(y.shape)}")
    show(name, mha, inputs, y, weights)


def encoder(name, module, shape, additive=None, lens=None):
    fill_parameters(module)
    x = input_of(shape, 0).requires_grad_(True)
    layer = module.layers[0] if isinstance(module, nn.TransformerEncoder) else module
    steps = shape[1] if layer.self_attn.batch_first else shape[0]
    kpm = padding(lens, steps) if lens is not None else None
    y = module(x, additive, kpm)
    (y * g_of(y.shape)).sum().backward()
    masks = []
    if additive is not None:
        masks.append(f"additive mask {list(additive.shape)}")
    if lens is not None:
        masks.append(f"valid lengths {lens}")
    print(f"// {name}: {describe_encoder(module)}, input {list(shape)}, "
          f"{', '.join(masks) or 'no mask'}")
    show(name, module, [x], y, None)


def describe_mha(mha):
    return (f"MultiheadAttention({mha.embed_dim}, {mha.num_heads}, "
            f"bias={mha.in_proj_bias is not None}, batch_first={mha.batch_first})")


def describe_layer(layer):
    return (f"TransformerEncoderLayer({layer.linear1.in_features}, "
            f"{layer.self_attn.num_heads}, {layer.linear1.out_features}, "
            f"activation={layer.activation.__name__}, norm_first={layer.norm_first}, "
            f"batch_first={layer.self_attn.batch_first})")


def describe_encoder(module):
    if not isinstance(module, nn.TransformerEncoder):
        return describe_layer(module)
    return (f"TransformerEncoder({describe_layer(module.layers[0])}, {module.num_layers}, "
            f"norm={module.norm})")


def causal(steps):
    return nn.Transformer.generate_square_subsequent_mask(steps)


print(
    f"// Generated by tests/reference/torch_attention.py (PyTorch {torch.__version__}, CPU, "
    "float64); do not edit."
)
print("// Regenerate: ~/.cache/ember/torch-venv/bin/python tests/reference/torch_attention.py "
      "> tests/reference/torch_attention.out.rs")

attention("MHA_1_HEAD_TNC", nn.MultiheadAttention(8, 1), (5, 2, 8))
attention("MHA_4_HEADS_NTC", nn.MultiheadAttention(8, 4, batch_first=True), (2, 5, 8))
attention("MHA_4_HEADS_TNC_ADDITIVE", nn.MultiheadAttention(8, 4), (5, 2, 8),
          additive=m_of((5, 5)))
attention("MHA_1_HEAD_NTC_CAUSAL", nn.MultiheadAttention(8, 1, batch_first=True), (2, 5, 8),
          additive=causal(5))
attention("MHA_4_HEADS_NTC_VALID_LENS", nn.MultiheadAttention(8, 4, batch_first=True),
          (3, 5, 8), lens=[2, 5, 1])
attention("MHA_2_HEADS_TNC_NO_BIAS", nn.MultiheadAttention(8, 2, bias=False), (5, 2, 8),
          additive=m_of((5, 5)))
attention("MHA_CROSS_2_HEADS_TNC", nn.MultiheadAttention(8, 2), (4, 2, 8), (6, 2, 8),
          additive=m_of((4, 6)), lens=[3, 6])
attention("MHA_CROSS_4_HEADS_NTC_NO_BIAS",
          nn.MultiheadAttention(8, 4, bias=False, batch_first=True), (2, 3, 8), (2, 7, 8),
          lens=[7, 4])

layer = lambda **kw: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw)
encoder("ENCODER_LAYER_POST_RELU_TNC", layer(), (5, 2, 8))
encoder("ENCODER_LAYER_POST_GELU_NTC_CAUSAL", layer(activation="gelu", batch_first=True),
        (2, 5, 8), additive=causal(5))
encoder("ENCODER_LAYER_PRE_RELU_NTC_VALID_LENS", layer(norm_first=True, batch_first=True),
        (3, 5, 8), lens=[4, 5, 2])
encoder("ENCODER_LAYER_PRE_GELU_TNC_ADDITIVE", layer(activation="gelu", norm_first=True),
        (5, 2, 8), additive=m_of((5, 5)))
encoder("ENCODER_2_LAYERS_NORM_NTC_VALID_LENS",
        nn.TransformerEncoder(layer(batch_first=True), 2, norm=nn.LayerNorm(8),
                              enable_nested_tensor=False),
        (2, 5, 8), lens=[3, 5])
encoder("ENCODER_2_LAYERS_PRE_GELU_NORM_TNC",
        nn.TransformerEncoder(layer(activation="gelu", norm_first=True), 2,
                              norm=nn.LayerNorm(8), enable_nested_tensor=False),
        (5, 2, 8), additive=m_of((5, 5)))
