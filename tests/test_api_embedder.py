"""The OpenAI-compatible embeddings client, against a real HTTP server on
loopback that answers like one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from memoro.errors import MemoroError
from memoro.history.embed import ApiEmbedder
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

FAKE = HashEmbedder(dim=16)


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, object]]] = []
    fail = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers["Authorization"], **body}
        )
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            return
        data = [
            {"index": i, "embedding": (FAKE.embed_query(text) * 3).tolist()}
            for i, text in reversed(list(enumerate(body["input"])))
        ]
        payload = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.requests, _Handler.fail = [], False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_embeddings_come_back_in_order_and_unit_length(server: str) -> None:
    embedder = ApiEmbedder(server, "emb-small", api_key="sk-test")
    vectors = embedder.embed_documents(["first text", "second text"])
    assert [v.shape for v in vectors] == [(1, 16), (1, 16)]
    assert np.allclose(vectors[0][0], FAKE.embed_query("first text"), atol=1e-6)
    assert np.isclose(np.linalg.norm(embedder.embed_query("x y")), 1.0)
    request = _Handler.requests[0]
    assert (request["path"], request["auth"], request["model"]) == (
        "/v1/embeddings",
        "Bearer sk-test",
        "emb-small",
    )
    assert embedder.model_id == "api/emb-small"


def test_a_failing_endpoint_is_a_clear_error_and_the_job_is_retried(
    server: str, tmp_path: Path
) -> None:
    _Handler.fail = True
    with pytest.raises(MemoroError, match="embeddings endpoint"):
        ApiEmbedder(server, "emb-small").embed_query("x")
    memoro = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path),
        embedder=ApiEmbedder(server, "emb-small"),
        worker=False,
    )
    memoro.record_turn("ann", "c", "hello", "there")
    memoro.index_pending()
    (job,) = memoro.store.list_jobs()
    assert job.attempts == 1 and "embeddings endpoint" in (job.last_error or "")
    memoro.close()
