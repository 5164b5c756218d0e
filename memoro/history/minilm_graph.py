"""all-MiniLM-L6-v2 as an ONNX graph, built from its safetensors weights with
the ``onnx`` helper API (no torch, no exporter). Pure: weights in, model out.

The graph uses ONNX Runtime's fused transformer operators — the ones its own
transformer optimizer emits for BERT: EmbedLayerNormalization, Attention,
SkipLayerNormalization and BiasGelu — then mean pooling over the real tokens
and L2 normalization, so it returns the same unit vectors as
sentence-transformers. Inputs are ``input_ids`` and ``attention_mask``
(int32, batch × tokens, padding on the right); the output is ``embedding``
(float32, batch × 384).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

HIDDEN = 384
HEADS = 12
LAYERS = 6
EPSILON = 1e-12
OPSET = 17
CONTRIB = "com.microsoft"

Weights = Mapping[str, npt.NDArray[np.float32]]


def build(weights: Weights) -> Any:
    """The encoder as an ``onnx.ModelProto`` (float32)."""
    from onnx import TensorProto, helper, numpy_helper

    initializers = []
    nodes = []

    def constant(name: str, value: npt.NDArray[Any]) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, contrib: bool = False, **attrs: Any) -> str:
        domain = CONTRIB if contrib else ""
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    e = "embeddings."
    # every token has type 0, so its type embedding folds into the positions
    token_type = weights[e + "token_type_embeddings.weight"][0]
    positions = weights[e + "position_embeddings.weight"] + token_type
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [
                "input_ids",
                "",
                constant("word_embeddings", weights[e + "word_embeddings.weight"]),
                constant("position_embeddings", positions),
                "",
                constant("embeddings_gamma", weights[e + "LayerNorm.weight"]),
                constant("embeddings_beta", weights[e + "LayerNorm.bias"]),
                "attention_mask",
            ],
            ["embedded", "mask_index"],
            name="embedded",
            domain=CONTRIB,
            epsilon=EPSILON,
        )
    )

    def dense_add_norm(x: str, residual: str, w: Weights, name: str, dense: str, norm: str) -> str:
        """LayerNorm(x · dense + bias + residual), the bias and the residual
        folded into one fused operator."""
        projected = node("MatMul", [x, constant(name + "_weight", w[dense + ".weight"].T)], name)
        return node(
            "SkipLayerNormalization",
            [
                projected,
                residual,
                constant(name + "_gamma", w[norm + ".weight"]),
                constant(name + "_beta", w[norm + ".bias"]),
                constant(name + "_bias", w[dense + ".bias"]),
            ],
            name + "_normed",
            contrib=True,
            epsilon=EPSILON,
        )

    x = "embedded"
    for i in range(LAYERS):
        w = {k.removeprefix(f"encoder.layer.{i}."): v for k, v in weights.items()}
        p = f"layer{i}_"
        qkv = [w[f"attention.self.{n}.weight"] for n in ("query", "key", "value")]
        qkv_bias = [w[f"attention.self.{n}.bias"] for n in ("query", "key", "value")]
        attended = node(
            "Attention",
            [
                x,
                constant(p + "qkv_weight", np.concatenate(qkv).T),
                constant(p + "qkv_bias", np.concatenate(qkv_bias)),
                "mask_index",
            ],
            p + "attention",
            contrib=True,
            num_heads=HEADS,
        )
        x1 = dense_add_norm(
            attended,
            x,
            w,
            p + "attention_out",
            "attention.output.dense",
            "attention.output.LayerNorm",
        )
        up = node(
            "MatMul", [x1, constant(p + "up_weight", w["intermediate.dense.weight"].T)], p + "up"
        )
        gelu = node(
            "BiasGelu",
            [up, constant(p + "up_bias", w["intermediate.dense.bias"])],
            p + "gelu",
            contrib=True,
        )
        x = dense_add_norm(gelu, x1, w, p + "out", "output.dense", "output.LayerNorm")

    # mean over the real tokens, then unit length
    mask = node("Cast", ["attention_mask"], "mask_float", to=TensorProto.FLOAT)
    mask3 = node("Unsqueeze", [mask, constant("axis_2", np.array([2]))], "mask_3d")
    summed = node(
        "ReduceSum",
        [node("Mul", [x, mask3], "masked"), constant("axis_1", np.array([1]))],
        "summed",
        keepdims=0,
    )
    count = node("ReduceSum", [mask, "axis_1"], "count", keepdims=1)
    pooled = node("Div", [summed, count], "pooled")
    node("LpNormalization", [pooled], "embedding", axis=1, p=2)

    def io(name: str, kind: int, dims: list[str | int]) -> Any:
        return helper.make_tensor_value_info(name, kind, dims)

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            io("input_ids", TensorProto.INT32, ["batch", "tokens"]),
            io("attention_mask", TensorProto.INT32, ["batch", "tokens"]),
        ],
        [io("embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)],
        producer_name="memoro",
    )
    model.ir_version = 8
    return model
