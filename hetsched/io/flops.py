"""FLOP formulas shared by the ONNX importer and the model zoo (one convention for both).

A multiply-accumulate (MAC) counts as **2 FLOPs**. The MAC formulas for convolutions and matrix
products are the ones used by every published model-complexity figure (He et al. 2016 table 1,
torchvision's ``_ops`` column, fvcore's ``FlopCountAnalysis`` and ptflops, which all report MACs);
the zoo's ``graph.meta["macs"]`` sums exactly these so it can be compared with those figures.

Per-op formulas (``n`` = number of elements of the op's (first) output unless said otherwise):

=========================  ===========================================================  ======
op type                    FLOPs                                                        source
=========================  ===========================================================  ======
Conv                       2 * N*Cout*Ho*Wo*(Cin/group)*kh*kw  (+ N*Cout*Ho*Wo for bias)  [1]
ConvTranspose              2 * N*Cin*Hi*Wi*(Cout/group)*kh*kw  (+ bias as Conv)         [1]
Gemm / MatMul              2 * M*N*K per batch element (+ M*N for a bias)               [2]
Add Sub Mul Div Relu ...   n (one op per output element; Trilu: one select each)        [3]
Sigmoid Tanh Erf Exp ...   n (transcendentals as one op each, the fvcore convention)     [3]
Clip (ReLU6)               2n (min and max)                                             [3]
Gelu                       8n (tanh approximation: ~8 element ops)                      [4]
BatchNormalization         2n inference (fused scale + shift), 4n with training stats   [3]
LayerNormalization         5n (mean, variance, subtract, divide, scale+shift)            [4]
Softmax                    5n (max, subtract, exp, sum, divide)                          [4]
MaxPool / AveragePool      n_out * kh*kw (one compare or add per window element)        [3]
GlobalAveragePool          n_in (one add per input element)                             [3]
ReduceMean / ReduceSum     n_in                                                         [3]
LSTM                       2*D*S*B*4H*(I+H) + 2*D*S*B*4H (biases) + 8*D*S*B*H (cell)     [5]
GRU                        2*D*S*B*3H*(I+H) + 2*D*S*B*3H (biases) + 6*D*S*B*H (cell)     [5]
Attention (fused SDPA)     2 * B*L*S*(E+Ev) + 5*B*L*S (softmax); backward: 4 products
GroupedMatMul (MoE)        2 * rows*K*N: the token-expert pairs, so the k experts that run
Einsum                     2 * product of every index's size (two or more operands)
TopK / Sort                n_in * log2(k) / n_in * log2(row) comparisons
CumSum Histogram Reduce*   n_in
Equal Less And Not ...     n (comparisons and logic, one op per element)
Range ConstantOfShape      0 (they write their output; bytes are their outputs)
Reshape Transpose Concat   0 (data movement only)
Gather Split Slice ...     0
=========================  ===========================================================  ======

[1] Dumoulin & Visin, "A guide to convolution arithmetic" (2016); He et al., CVPR 2016, table 1.
[2] the definition of a matrix product: M*N outputs of K MACs each.
[3] fvcore ``jit_handles`` / ptflops conventions for element-wise ops and pooling.
[4] Kaplan et al., "Scaling laws for neural language models" (2020), section 2.1 counts
    only the matrix products; the element-wise constants here are the ONNX decomposition
    (LayerNormalization-17 / Softmax-13 function bodies) counted op by op.
[5] ONNX LSTM/GRU operator definitions: per step, per direction D, gates = X*W^T + H*R^T + Wb + Rb
    (4 gates for LSTM, 3 for GRU), then the element-wise cell update.

>>> conv_macs(1, 3, 224, 224, 64, 112, 112, 7, 7)
118013952
>>> matmul_macs(2, 3, 4)
24
"""

from __future__ import annotations

from math import prod

__all__ = [
    "conv_macs",
    "matmul_macs",
    "ELEMENTWISE_FLOPS",
    "ZERO_FLOP_OPS",
    "MAC_OPS",
    "elementwise_flops",
    "lstm_flops",
    "gru_flops",
]

#: FLOPs per output element of element-wise and normalisation ops.
ELEMENTWISE_FLOPS: dict[str, float] = {
    **dict.fromkeys(
        [
            "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid",
            "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Pow", "Max", "Min", "Sum", "Mean",
            "Where", "Equal", "Greater", "Less", "Not", "And", "Or", "Cast", "Sin", "Cos", "HardSwish",
            "Softplus", "Floor", "Ceil", "Round", "Sign", "Trilu",
        ],
        1.0,
    ),
    "Clip": 2.0,
    "Gelu": 8.0,
    "BatchNormalization": 2.0,
    "LayerNormalization": 5.0,
    "InstanceNormalization": 5.0,
    "GroupNormalization": 5.0,
    "Softmax": 5.0,
    "LogSoftmax": 5.0,
}

#: Ops that only move or reinterpret data.
ZERO_FLOP_OPS: frozenset[str] = frozenset(
    [
        "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "Squeeze", "Unsqueeze",
        "Flatten", "Identity", "Dropout", "Shape", "Size", "Constant", "ConstantOfShape", "Expand", "Tile",
        "Pad", "Range", "CastLike",
    ]
)

#: Ops whose MACs the zoo sums into ``meta["macs"]`` (the published-figure convention).
MAC_OPS: frozenset[str] = frozenset(["Conv", "ConvTranspose", "Gemm", "MatMul"])


def conv_macs(n: int, cin: int, hi: int, wi: int, cout: int, ho: int, wo: int, kh: int, kw: int, group: int = 1) -> int:
    """MACs of a 2-D convolution (input spatial dims unused; kept for a uniform signature).

    >>> conv_macs(1, 32, 8, 8, 32, 8, 8, 3, 3, group=32)   # depthwise 3x3
    18432
    """
    return int(n * cout * ho * wo * (cin // group) * kh * kw)


def matmul_macs(m: int, k: int, n: int, batch: int = 1) -> int:
    """MACs of ``batch`` products of an (m x k) and a (k x n) matrix.

    >>> matmul_macs(128, 768, 768)
    75497472
    """
    return int(batch * m * k * n)


def elementwise_flops(op_type: str, out_shape) -> float:
    """FLOPs of an element-wise or normalisation op producing ``out_shape`` (0 for unknown types).

    >>> elementwise_flops("Relu", [2, 3]), elementwise_flops("Softmax", [4])
    (6.0, 20.0)
    """
    return ELEMENTWISE_FLOPS.get(op_type, 0.0) * prod(out_shape)


def lstm_flops(seq: int, batch: int, input_size: int, hidden: int, directions: int = 1) -> float:
    """FLOPs of an ONNX LSTM (4 gates; formula [5] in the module table).

    >>> lstm_flops(1, 1, 1, 1)
    32.0
    """
    d, s, b, h, i = directions, seq, batch, hidden, input_size
    return float(2 * d * s * b * 4 * h * (i + h) + 2 * d * s * b * 4 * h + 8 * d * s * b * h)


def gru_flops(seq: int, batch: int, input_size: int, hidden: int, directions: int = 1) -> float:
    """FLOPs of an ONNX GRU (3 gates; formula [5] in the module table).

    >>> gru_flops(1, 1, 1, 1)
    24.0
    """
    d, s, b, h, i = directions, seq, batch, hidden, input_size
    return float(2 * d * s * b * 3 * h * (i + h) + 2 * d * s * b * 3 * h + 6 * d * s * b * h)
