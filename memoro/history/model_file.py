"""The local model's ONNX file: built once from the installed weights, kept in
the platform cache directory, and checked before every use.

The file is named after a hash of the weights, the variant (``fp32``, or
``int8`` after ONNX Runtime's dynamic quantization) and the builder's
version, so new weights or a new builder never reuse an old file. It is
written to a temporary name and renamed into place, beside a checksum of its
bytes; a file whose bytes do not match is rebuilt, never used. A second
process that needs the file while it is being built waits for the builder
(a file lock) and then reads the finished file.

A build, once begun, runs to its end even when the program exits meanwhile
(it runs on a thread the interpreter waits for), so an exit never leaves a
half-built file; what a killed builder left is removed by the next one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import platformdirs

from memoro.errors import ConfigError
from memoro.history import building
from memoro.store.memory.int8 import offline_runtime as offline_runtime

log = logging.getLogger("memoro.model")
T = TypeVar("T")

BUILDER_VERSION = 1
"""Bump when the graph or the quantization changes."""

VARIANTS = ("fp32", "int8")
LEGACY_SCRATCH_AGE = 3600.0
"""Seconds after which a ``tmp*`` folder an earlier memoro left in the cache
is surely no live build's."""


def cache_dir() -> Path:
    """Where built model files go (``$XDG_CACHE_HOME/memoro`` on Linux)."""
    return Path(platformdirs.user_cache_dir("memoro", appauthor=False))


def locate(weights_dir: Path, variant: str, directory: Path | None = None) -> Path | bytes:
    """The checked model file for ``variant``, built first if missing or
    damaged; its bytes when there is no writable cache directory (built in
    memory). A path lets ONNX Runtime read the file itself, so the process
    never holds a second copy of the model."""
    if variant not in VARIANTS:
        raise ConfigError(f"the local model comes as {' or '.join(VARIANTS)}, not {variant!r}")
    digest = _file_sha256(weights_dir / "model.safetensors")
    directory = directory or cache_dir()
    path = directory / f"all-MiniLM-L6-v2-{digest[:16]}-{variant}-b{BUILDER_VERSION}.onnx"
    if _checked(path):
        return path
    building.starting()  # only now: a model already built costs no notice
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(path.name + ".lock")):
            if _checked(path):  # another process built it while we waited
                return path
            _remove_leftovers(path)  # holding the lock, no other builder is alive
            log.info("building the local embedding model (%s) in %s", variant, directory)
            _to_the_end(lambda: _write_atomically(path, _build(weights_dir, variant, path)))
            return path
    except OSError as exc:
        log.warning("cannot keep the model file in %s (%s); building it in memory", directory, exc)

        def in_memory() -> bytes:
            with tempfile.TemporaryDirectory() as scratch:
                return _build(weights_dir, variant, Path(scratch) / path.name)

        return _to_the_end(in_memory)


def _to_the_end(build: Callable[[], T]) -> T:
    """``build()``, run on a thread that is not a daemon and waited for. A
    program that ends while its worker (a daemon thread) builds the model
    then waits for the build before its exit handlers run — among them
    tempfile's, which removed the build's folder under it — and the next
    run finds the finished file."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(build())
        except BaseException as exc:  # raised again in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="memoro-model-build", daemon=False)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def _remove_leftovers(path: Path) -> None:
    """What builders of ``path`` killed part-way left beside it: their
    temporary files and build folders (and an earlier memoro's ``tmp*``
    folders, once old)."""
    leftovers = [*path.parent.glob(f"{path.name}*.tmp"), *path.parent.glob(f"{path.name}.build-*")]
    for found in path.parent.glob("tmp*"):
        with contextlib.suppress(OSError):
            if found.is_dir() and time.time() - found.stat().st_mtime > LEGACY_SCRATCH_AGE:
                leftovers.append(found)
    for leftover in leftovers:
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                leftover.unlink()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str:
    """The file's SHA-256, read in pieces (never the whole file in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _checked(path: Path) -> bool:
    """Whether the file's bytes match the checksum written with them."""
    try:
        expected = _checksum_path(path).read_text("ascii").strip()
        actual = _file_sha256(path)
    except (OSError, UnicodeDecodeError):
        return False
    if actual != expected:
        log.warning("the cached model file %s is damaged; rebuilding it", path)
        return False
    return True


def _write_atomically(path: Path, data: bytes) -> None:
    """Model first, checksum last: a crash in between leaves a file without
    a valid checksum, which is rebuilt."""
    from memoro.private import write_whole

    for target, content in ((path, data), (_checksum_path(path), _sha256(data).encode())):
        write_whole(target, [content])


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # no flock (Windows): builders race, each rename is atomic
        yield
        return
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(weights_dir: Path, variant: str, path: Path) -> bytes:
    """The model file's bytes; an int8 build works in a folder beside ``path``."""
    import onnx
    from safetensors.numpy import load_file

    from memoro.history import minilm_graph

    model = minilm_graph.build(load_file(str(weights_dir / "model.safetensors")))
    if variant == "fp32":
        data: bytes = model.SerializeToString()
        return data
    offline_runtime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # the quantizer logs advice meant for other models straight to the root
    # logger; a filter there drops exactly those records
    root = logging.getLogger()
    root.addFilter(_not_from_onnxruntime)
    try:
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=f"{path.name}.build-") as work:
            fp32, int8 = Path(work) / "fp32.onnx", Path(work) / "int8.onnx"
            onnx.save(model, fp32)
            # per-channel int8 weights; reduce_range keeps the products inside
            # 16 bits so CPUs without VNNI (AVX2 only) cannot saturate
            quantize_dynamic(
                fp32,
                int8,
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                op_types_to_quantize=["MatMul", "Attention"],
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            return int8.read_bytes()
    finally:
        root.removeFilter(_not_from_onnxruntime)


def _not_from_onnxruntime(record: logging.LogRecord) -> bool:
    return "onnxruntime" not in record.pathname
