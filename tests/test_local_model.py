"""The default local embedding model: the ONNX graph built from the weights
reproduces sentence-transformers (fp32 exactly, int8 closely), the built file
is cached safely, and every part of a long chunk is embedded (C7)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memoro.history import model_file
from memoro.history.embed import LocalEmbedder
from memoro.history.minilm import model_dir
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore

REFERENCE = json.loads((Path(__file__).parent / "vectors" / "minilm-reference.json").read_text())
CASES = REFERENCE["cases"]
EXPECTED = np.asarray([case["vector"] for case in CASES], dtype=np.float32)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="module")
def fp32() -> LocalEmbedder:
    return LocalEmbedder("fp32")


def _cosines(embedder: LocalEmbedder, one_by_one: bool) -> np.ndarray:
    texts = [case["text"] for case in CASES]
    if one_by_one:
        got = np.stack([embedder.embed_query(text) for text in texts])
    else:  # all in one call: several lengths share a padded batch
        got = np.concatenate(embedder.embed_documents(texts))[:, :]
    assert got.shape == EXPECTED.shape
    cosines: np.ndarray = (got * EXPECTED).sum(axis=1)
    return cosines


@pytest.mark.parametrize("one_by_one", [True, False], ids=["alone", "batched"])
def test_the_fp32_graph_reproduces_sentence_transformers(
    fp32: LocalEmbedder, one_by_one: bool
) -> None:
    cosines = _cosines(fp32, one_by_one)
    assert cosines.min() >= 0.999, cosines


@pytest.mark.parametrize("one_by_one", [True, False], ids=["alone", "batched"])
def test_the_int8_model_stays_close_to_sentence_transformers(
    local: LocalEmbedder, one_by_one: bool
) -> None:
    cosines = _cosines(local, one_by_one)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.98, cosines


def test_a_text_gets_the_same_vector_whatever_it_is_embedded_with(local: LocalEmbedder) -> None:
    texts = [case["text"] for case in CASES]
    together = local.embed_documents([*texts, "a short one", "another text " * 60])
    for text, vectors in zip(texts, together, strict=False):
        (alone,) = local.embed_documents([text])
        assert np.array_equal(alone, vectors)
        assert np.array_equal(local.embed_query(text), vectors[0])


def test_a_query_runs_on_two_cores_where_there_are_two_with_the_same_vector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search's query is one short run a person waits for: a process
    that searches again gets a session of its own split over two cores
    (C4), whose vectors are the indexing session's to the bit; a one-off
    search does not build it, and on one core there is one session."""
    from memoro.history import worker

    text = "Which train did we take to Porto?"
    for cores, own in ((2, True), (1, False)):
        monkeypatch.setattr(worker, "usable_cores", lambda cores=cores: cores)
        embedder = LocalEmbedder()
        first = embedder.embed_query(text)
        model = embedder._encoder()
        assert model._query_session is None  # a one-off search: one session
        second = embedder.embed_query(text)
        assert (model._query_session is not model.session) is own
        (document,) = embedder.embed_documents([text])
        assert np.array_equal(first, document[0]) and np.array_equal(second, document[0])


def test_int8_and_fp32_vectors_have_their_own_model_ids(
    local: LocalEmbedder, fp32: LocalEmbedder
) -> None:
    assert local.model_id == "local/all-MiniLM-L6-v2-int8"
    assert fp32.model_id == "local/all-MiniLM-L6-v2"


def test_a_long_text_is_embedded_in_overlapping_windows_covering_all_of_it(
    local: LocalEmbedder,
) -> None:
    text = " ".join(f"word{i}" for i in range(600))
    (windows,) = local.embed_documents([text])
    ids = local._encoder().token_ids(text)
    step = local.window - local.overlap
    assert windows.shape[0] == len(range(0, len(ids) - local.overlap, step))
    assert (windows.shape[0] - 1) * step + local.window >= len(ids)
    assert np.allclose(np.linalg.norm(windows, axis=1), 1.0, atol=1e-5)


def _model_bytes(cache: Path) -> bytes:
    found = model_file.locate(model_dir(), "fp32", cache)
    assert isinstance(found, Path)
    return found.read_bytes()


def test_a_damaged_cached_model_file_is_rebuilt_never_used(tmp_path: Path) -> None:
    built = _model_bytes(tmp_path)
    (path,) = tmp_path.glob("*.onnx")
    path.write_bytes(built[: len(built) // 2] + b"\0" * 64)  # torn or corrupted
    assert _model_bytes(tmp_path) == built
    assert path.read_bytes() == built
    path.unlink()  # missing: built again
    assert _model_bytes(tmp_path) == built


def test_the_runtime_reads_the_checked_file_itself_or_in_memory_bytes(tmp_path: Path) -> None:
    """ONNX Runtime gets the cached file's path (no second copy of the model
    in the process); without a writable cache it gets bytes built in memory."""
    found = model_file.locate(model_dir(), "fp32", tmp_path)
    assert isinstance(found, Path) and found.parent == tmp_path
    assert model_file.locate(model_dir(), "fp32", tmp_path) == found  # checked, reused
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be")
    built = model_file.locate(model_dir(), "fp32", blocked)
    assert isinstance(built, bytes) and built == found.read_bytes()


BUILD = """
import hashlib, logging, sys
from pathlib import Path
from memoro.history import model_file
from memoro.history.minilm import model_dir
logging.basicConfig(level=logging.INFO, format="%(message)s")
found = model_file.locate(model_dir(), "int8", Path(sys.argv[1]))
data = found.read_bytes() if isinstance(found, Path) else found
print(hashlib.sha256(data).hexdigest())
"""


def test_two_processes_needing_the_model_build_it_once(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [proc.communicate(timeout=300) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), results
    assert results[0][0] == results[1][0]  # the same bytes
    assert sum("building the local embedding model" in err for _, err in results) == 1
    assert sorted(p.suffix for p in tmp_path.iterdir() if p.suffix != ".lock") == [
        ".onnx",
        ".sha256",
    ]


def test_c7_a_word_near_the_end_of_a_4000_character_chunk_is_found_by_semantic_search(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    memoro = Memoro(
        SqliteStore(tmp_path / "memoro.db"), Settings(home=tmp_path), embedder=local, worker=False
    )
    filler = (
        "We went through the quarterly budget spreadsheet line by line, checking each"
        " department's travel costs, software licences and office supplies against the plan. "
    ) * 24
    ending = "By the way, I finally adopted a small grey kitten and named her Pepper."
    long_turn = memoro.record_turn("ann", "c1", "Budget review notes", f"{filler}{ending}")
    for i, topic in enumerate(["gardening tomatoes", "a trip to Lisbon", "learning the cello"]):
        memoro.record_turn("ann", f"c{i + 2}", f"Tell me about {topic}", f"Sure, {topic}.")
    memoro.index_pending()
    (chunk,) = (
        memoro.store.db.connect()
        .execute(  # type: ignore[attr-defined]
            "SELECT text FROM chunks WHERE turn_id = ?", (long_turn.turn_id,)
        )
        .fetchall()
    )
    assert 3500 < len(chunk[0]) <= 4000 and chunk[0].endswith("Pepper.")
    hits = memoro.search("ann", "did I get a new pet cat?", mode="semantic", limit=1)
    assert hits[0].turn_id == long_turn.turn_id
    memoro.close()


def test_the_local_model_sends_no_telemetry_and_writes_no_device_id(tmp_path: Path) -> None:
    """ONNX Runtime 1.32 writes a device id under the user's cache when it
    is imported, for its usage telemetry; memoro keeps it offline."""
    home = tmp_path / "home"
    env = {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": "/usr/bin:/bin",
    }
    script = (
        "from memoro.history.embed import LocalEmbedder;"
        "print(len(LocalEmbedder().embed_query('hello')))"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "384"
    assert not (home / ".cache" / "Microsoft").exists()


EXIT_WHILE_BUILDING = """
import logging, sys, time
from pathlib import Path
from memoro.service import Memoro
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
memoro = Memoro.open(sys.argv[1])  # its worker thread builds the model first
cache = Path(sys.argv[2]) / "memoro"
deadline = time.monotonic() + 300
while not (cache.is_dir() and any(p.is_dir() for p in cache.iterdir())):
    assert time.monotonic() < deadline, "the worker never began building the model"
    time.sleep(0.01)
print("exiting while the model is built", flush=True)
"""


def _fresh_home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    return {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": "/usr/bin:/bin",
    }


def _only_the_model_in(cache: Path) -> Path:
    """The one model file in ``cache``, checked; beside it only its checksum
    and its lock — no half-built file, no temporary folder."""
    suffixes = sorted(p.name.rsplit(".", 1)[-1] for p in cache.iterdir())
    assert suffixes == ["lock", "onnx", "sha256"], sorted(p.name for p in cache.iterdir())
    (path,) = cache.glob("*.onnx")
    assert model_file._checked(path)
    return path


def test_a_program_ending_while_the_model_is_built_exits_cleanly_with_the_model_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With a fresh cache, a short program's worker thread was still
    building the model when the program ended: the exit handlers removed the
    build's temporary folder under it (a traceback, or "cannot keep the model
    file … No such file or directory"), and no model was kept."""
    env = _fresh_home(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", EXIT_WHILE_BUILDING, str(tmp_path / "data"), env["XDG_CACHE_HOME"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "exiting while the model is built\n"
    assert done.stderr == ""  # no traceback, no "cannot keep the model file"
    cache = Path(env["XDG_CACHE_HOME"]) / "memoro"
    path = _only_the_model_in(cache)
    with caplog.at_level(logging.INFO, logger="memoro.model"):
        assert model_file.locate(model_dir(), "int8", cache) == path  # reused as it is
    assert "building" not in caplog.text


def test_what_a_killed_build_left_is_removed_by_the_next_build(tmp_path: Path) -> None:
    """A builder killed part-way leaves its temporary folder in the cache;
    the next build (holding the lock, so no other builder is alive) removes
    it."""
    with subprocess.Popen(
        [sys.executable, "-c", BUILD, str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as builder:
        deadline = time.monotonic() + 300
        while not any(p.is_dir() for p in tmp_path.iterdir()):
            assert builder.poll() is None, "the build ended before it made its folder"
            assert time.monotonic() < deadline, "the build never made its folder"
            time.sleep(0.01)
        builder.kill()
    assert any(p.is_dir() for p in tmp_path.iterdir())
    found = model_file.locate(model_dir(), "int8", tmp_path)
    assert found == _only_the_model_in(tmp_path)
