"""A folder under a watched or imported folder swapped for a link between
the look that found a log and the open that reads it leads nowhere (I6):
``memoro watch`` and ``memoro import FOLDER`` open a log from the folder
searched one name at a time, never through a link, so another account's
log put behind the link is never imported as the watching user's. The swap
is made deterministically, right after the folder is looked at."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memoro.cli import cli
from memoro.cli import transfer as importing
from memoro.imports import follow as following
from memoro.service import Memoro
from tests.test_watch import follow, stored
from tests.test_watch_folder import finished_log


def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """projects/shop/s.jsonl (ann's) and someone-else/shop/s.jsonl (not)."""
    logs, outside = tmp_path / "projects", tmp_path / "someone-else"
    (logs / "shop").mkdir(parents=True)
    (outside / "shop").mkdir(parents=True)
    finished_log(logs / "shop" / "s.jsonl", "My question")
    finished_log(outside / "shop" / "s.jsonl", "Their private question")
    return logs, outside, logs / "shop"


def swap_after_scan(
    monkeypatch: pytest.MonkeyPatch, module: Any, swap: Callable[[], None]
) -> list[int]:
    """``scan`` in ``module`` followed, the first time, by ``swap``: what a
    racing writer does between the look and the open."""
    scan, swapped = module.scan, []

    def scan_then_swap(root: Path) -> Any:
        found = scan(root)
        if not swapped:
            swap()
            swapped.append(1)
        return found

    monkeypatch.setattr(module, "scan", scan_then_swap)
    return swapped


def folder_to_link(project: Path, outside: Path) -> Callable[[], None]:
    def swap() -> None:
        project.rename(project.with_name("held"))
        project.symlink_to(outside / "shop")

    return swap


def file_to_link(project: Path, outside: Path) -> Callable[[], None]:
    def swap() -> None:
        (project / "s.jsonl").rename(project / "held")
        (project / "s.jsonl").symlink_to(outside / "shop" / "s.jsonl")

    return swap


def put_back(project: Path) -> None:
    held = project / "held" if project.is_dir() and not project.is_symlink() else None
    if held is not None:  # the log was swapped
        (project / "s.jsonl").unlink()
        held.rename(project / "s.jsonl")
    else:
        project.unlink()
        project.with_name("held").rename(project)


@pytest.mark.parametrize(
    ("swap", "said"),
    [
        (folder_to_link, "the folder {project} on its way is a link now"),
        (file_to_link, "it is a link now"),
    ],
)
def test_watch_never_reads_through_a_link_put_on_the_way_after_the_look(
    memoro: Memoro,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    swap: Callable[[Path, Path], Callable[[], None]],
    said: str,
) -> None:
    logs, outside, project = folders(tmp_path)
    with following.Follower([logs], tmp_path / "state") as follower:
        swap_after_scan(monkeypatch, following, swap(project, outside))
        found = follow(memoro, "ann", follower)
        assert stored(memoro, "ann") == []  # never theirs
        (refused,) = found
        assert refused.path == logs / "shop" / "s.jsonl"
        assert refused.refused == (
            said.format(project=project) + ", not when the folder was looked at: not followed"
        )
        put_back(project)
        again = follow(memoro, "ann", follower)  # the log as it is again: read
        assert [f.tally.imported for f in again] == [1]
    assert stored(memoro, "ann") == [("My question", "About My question.")]


def _questions(database: Path) -> list[str]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT question FROM turns ORDER BY question")]


@pytest.mark.parametrize("swap", [folder_to_link, file_to_link])
def test_import_of_a_folder_never_reads_through_a_link_put_on_the_way_after_the_look(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    swap: Callable[[Path, Path], Callable[[], None]],
) -> None:
    logs, outside, project = folders(tmp_path)
    home = tmp_path / "home"
    swap_after_scan(monkeypatch, importing, swap(project, outside))
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    imported = CliRunner().invoke(cli, ["import", str(logs), "-u", "ann", "--no-index"], env=env)
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("Imported 0 new turns from 0 conversations ")
    assert "is a link now, not when the folder was looked at: not followed" in imported.stdout
    assert "Their private question" not in imported.stdout
    assert not (home / "memoro.db").exists() or _questions(home / "memoro.db") == []


def test_links_inside_the_folder_are_still_followed(memoro: Memoro, tmp_path: Path) -> None:
    """A link to a file inside the folder that the look alone finds (no
    ``.jsonl`` of its own name), and the folder itself reached through a
    link (``~/.claude`` kept elsewhere): read as before."""
    kept = tmp_path / "kept"
    (kept / "shop" / "raw").mkdir(parents=True)
    finished_log(kept / "shop" / "raw" / "log.txt", "Through a link")
    (kept / "shop" / "s.jsonl").symlink_to(Path("raw") / "log.txt")
    logs = tmp_path / "projects"
    logs.symlink_to(kept)
    with following.Follower([logs], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert (found.path, found.tally.imported) == (logs / "shop" / "s.jsonl", 1)
    assert stored(memoro, "ann") == [("Through a link", "About Through a link.")]
    env = {"MEMORO_HOME": str(tmp_path / "home"), "MEMORO_EMBEDDER": "keyword"}
    imported = CliRunner().invoke(cli, ["import", str(logs), "-u", "bob", "--no-index"], env=env)
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("Imported 1 new turn from 1 conversation ")
    assert _questions(tmp_path / "home" / "memoro.db") == ["Through a link"]


def test_a_log_named_on_its_own_may_still_be_a_link_anywhere(
    memoro: Memoro, tmp_path: Path
) -> None:
    _, outside, _ = folders(tmp_path)
    named = tmp_path / "named.jsonl"
    named.symlink_to(outside / "shop" / "s.jsonl")
    with following.Follower([named], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert found.tally.imported == 1
    assert os.path.islink(named)


def test_a_link_gone_while_the_look_resolves_it_is_passed_over(
    memoro: Memoro, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link removed between its lstat and its readlink (the racing
    writer again) made the look itself fail with a traceback that ended
    the watcher; it is passed over, the next look sees what is there."""
    logs, outside, project = folders(tmp_path)
    (logs / "again.jsonl").symlink_to(project / "s.jsonl")
    (logs / "theirs").symlink_to(outside)

    def gone(path: Any, *args: Any, **kwargs: Any) -> str:
        raise FileNotFoundError(2, "No such file or directory", str(path))

    with following.Follower([logs], tmp_path / "state") as follower:
        monkeypatch.setattr(os, "readlink", gone)
        (found,) = follow(memoro, "ann", follower)
        monkeypatch.undo()
        assert (found.path, found.tally.imported) == (project / "s.jsonl", 1)
        (said,) = follow(memoro, "ann", follower)  # the link out, seen whole now
        assert said.path == logs / "theirs" and "not followed" in said.refused
    assert stored(memoro, "ann") == [("My question", "About My question.")]
