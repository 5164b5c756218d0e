"""Fakes shipped with memoro for tests (yours and ours). They stand in for
models only — never for the database.

``HashEmbedder`` is a deterministic bag-of-words embedder: texts that share
words have similar vectors. It cuts texts into windows of ``window_chars``
characters like a model with a short input would, can be slowed down, and can
be told to fail on a marker, to exercise the job queue.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]


class HashEmbedder:
    """A fake Embedder: hashed word counts, L2-normalized."""

    def __init__(
        self,
        model_id: str = "test/hash",
        dim: int = 64,
        window_chars: int = 1000,
        delay: float = 0.0,
        fail_on: str | None = None,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self.window_chars = window_chars
        self.delay = delay
        self.fail_on = fail_on
        self.calls = 0

    def _vector(self, text: str) -> Floats:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v[h % self.dim] += 1.0
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        out = []
        for text in texts:
            if self.fail_on is not None and self.fail_on in text:
                raise RuntimeError(f"HashEmbedder told to fail on {self.fail_on!r}")
            step = self.window_chars
            windows = [text[i : i + step] for i in range(0, max(len(text), 1), step)]
            out.append(np.stack([self._vector(w) for w in windows]))
        return out

    def embed_query(self, text: str) -> Floats:
        return self._vector(text)
