"""Document vectors kept on disk between benchmark runs, keyed by the model
id and the SHA-256 of the text, so a second run over LongMemEval's ~23k
turns does not embed them again (on 2 shared cores the local model embeds
60-80 windows a second: the first pass takes tens of minutes).

The files live under ``benchmarks/.cache/embeddings/`` (git ignores them),
one SQLite file per model. Queries are embedded every time, so the
latencies a benchmark prints include the query's embedding.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memoro.history.embed import Embedder

Floats = npt.NDArray[np.float32]
CACHE = Path(__file__).parent / ".cache" / "embeddings"


class DiskCachedEmbedder:
    """``inner`` with its document vectors remembered on disk (and in
    memory for this run). Safe to call from the worker's threads."""

    def __init__(self, inner: Embedder, folder: Path = CACHE) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        folder.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model_id)
        self._db = sqlite3.connect(folder / f"{name}.sqlite", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (hash BLOB PRIMARY KEY, parts INT, data BLOB)"
        )
        self._lock = threading.Lock()
        self.embedded = 0
        """Texts this run had to embed (not found on disk)."""

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def _lookup(self, keys: list[bytes]) -> dict[bytes, Floats]:
        found: dict[bytes, Floats] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, parts, data FROM vectors WHERE hash IN ({marks})", part
                ).fetchall()
                for key, parts, data in rows:
                    found[key] = np.frombuffer(data, dtype=np.float32).reshape(parts, -1)
        return found

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        keys = [self._key(t) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if missing:
            vectors = self.inner.embed_documents(list(missing.values()))
            rows = []
            for key, v in zip(missing, vectors, strict=True):
                v = np.ascontiguousarray(v, dtype=np.float32)
                found[key] = v
                rows.append((key, v.shape[0], v.tobytes()))
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
                self._db.commit()
                self.embedded += len(rows)
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> Floats:
        return self.inner.embed_query(text)

    def close(self) -> None:
        with self._lock:
            self._db.close()
