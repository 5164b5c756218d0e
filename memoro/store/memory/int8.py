"""Products of a fixed int8 matrix with query vectors on ONNX Runtime's int8
kernels, for the scan of a large user's vectors (``vectors.py``): the
matrix is packed once for the CPU's int8 instructions (VNNI where it has
them), so a product reads one byte a value and converts none to float — 3-8×
faster than converting int8 blocks to float32 for BLAS. The query goes in as
three rows of 7-bit integers (its leading part, what that leaves, and what
that leaves), so the product is within |row| · |query − its integer form|
(about 1e-6 of a unit query) of the exact one; 7 bits keep CPUs without VNNI
(their int8 instruction adds two products in 16 bits) from saturating."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.int8]
Floats = npt.NDArray[np.float32]

LEVELS = 63
"""A query value's integer range (±63: 7 bits)."""
_ZERO = 64
"""The unsigned form's zero point."""


def offline_runtime() -> None:
    """Keep ONNX Runtime from its usage telemetry (1.32 sends it on Linux and
    writes a device id under the user's cache at import): memoro works
    offline. Call before the first import of onnxruntime; a value the
    person set is kept."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # its name in 1.32
    os.environ.setdefault("ORT_TELEMETRY_DISABLED", "1")  # and in later releases


PARTS = 3
"""Rows a query is written in: each leaves ~1/127 of the last one's error,
so three bring the products within ~1e-6 of float32's (a few more
microseconds than two: the kernels read the matrix once either way)."""


class QueryRows:
    """A query as PARTS rows of 7-bit integers: ``query ≈ Σ scales[i] ·
    rows[i]``, ``residual`` the L2 norm of what that misses (the rows are
    unsigned, offset by 64, as the kernels take them)."""

    def __init__(self, query: Floats) -> None:
        rest = np.asarray(query, np.float64)
        rows, scales = [], []
        for _ in range(PARTS):
            scale = max(float(np.abs(rest).max(initial=0.0)), 1e-30) / LEVELS
            part = np.rint(rest / scale)
            rest = rest - part * scale
            rows.append(part)
            scales.append(scale)
        self.scales = np.array(scales)
        # the float32 sums of the products add a little; say so
        self.residual = float(np.linalg.norm(rest)) * 1.0001 + 1e-7
        self.rows = (np.stack(rows) + _ZERO).astype(np.uint8)


GRAPH = (
    b'\x08\x08\x12\x06memoro:\xa5\x01\n.\n\x05query\n\x06matrix\n\x04zero\x12\x08products"'
    b"\rMatMulInteger\x12\rint8 products*\x0b\x10\x02B\x04zeroJ\x01@*\x11\x08\x01\x08\x01"
    b"\x10\x03B\x06matrixJ\x01\x00Z\x1f\n\x05query\x12\x16\n\x14\x08\x02\x12\x10\n\x07\x12"
    b"\x05parts\n\x05\x12\x03dimb#\n\x08products\x12\x17\n\x15\x08\x06\x12\x11\n\x07\x12"
    b"\x05parts\n\x06\x12\x04rowsB\x04\n\x00\x10\x11"
)
"""The ONNX model ``products = MatMulInteger(query, matrix, zero)`` (query
uint8 parts × dim with zero point 64, matrix int8 dim × rows, a 1 × 1 stand-in
for the one each ``Int8Products`` hands over), serialized: importing the
``onnx`` package to build it takes seconds; ``graph()`` builds it with
``onnx`` and a test holds the two equal."""


def graph() -> bytes:
    """``GRAPH``, built with the ``onnx`` package."""
    from onnx import TensorProto, helper, numpy_helper

    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("MatMulInteger", ["query", "matrix", "zero"], ["products"])],
            "int8 products",
            [helper.make_tensor_value_info("query", TensorProto.UINT8, ["parts", "dim"])],
            [helper.make_tensor_value_info("products", TensorProto.INT32, ["parts", "rows"])],
            [
                numpy_helper.from_array(np.array(_ZERO, np.uint8), "zero"),
                numpy_helper.from_array(np.zeros((1, 1), np.int8), "matrix"),
            ],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="memoro",
    )
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


class Int8Products:
    """``matrix @ query`` for one int8 matrix, given transposed (dimensions ×
    rows, C-contiguous; ONNX Runtime reads it in place, so it is kept here),
    on one core."""

    def __init__(self, transposed: Bytes) -> None:
        offline_runtime()
        import onnxruntime as ort

        self.transposed = transposed
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        self._matrix = ort.OrtValue.ortvalue_from_numpy(transposed)
        options.add_initializer("matrix", self._matrix)
        self._session: Any = ort.InferenceSession(
            GRAPH, options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, query: QueryRows) -> Floats:
        """The products with ``query``, within ``query.residual`` times each
        row's norm of the float32 ones."""
        (parts,) = self._session.run(None, {"query": query.rows})
        found: Floats = (query.scales @ parts).astype(np.float32)
        return found
