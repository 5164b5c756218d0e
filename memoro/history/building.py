"""Who is told that the local model is about to be built: its first build
takes from a few seconds to a minute, and a command that waits silently
meanwhile looks stuck, so the command line listens and says so on stderr.
Apart from ``model_file`` so that listening loads nothing heavy (NumPy):
every command listens, few load the model."""

from __future__ import annotations

from collections.abc import Callable

_listeners: list[Callable[[], None]] = []


def listen(tell: Callable[[], None]) -> Callable[[], None]:
    """Call ``tell()`` before each build of the model file starts (not when
    the built file is there already); returns what stops listening."""
    _listeners.append(tell)

    def stop() -> None:
        if tell in _listeners:
            _listeners.remove(tell)

    return stop


def starting() -> None:
    """A build of the model file is about to start (or to be waited for,
    while another process builds it)."""
    for tell in list(_listeners):
        tell()
