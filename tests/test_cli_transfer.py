"""memoro import and memoro export on the command line (I1, I5)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from click.testing import CliRunner, Result

from memoro.cli import cli

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


def run(home: Path, *args: str, input: bytes | None = None) -> Result:
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    return CliRunner().invoke(cli, list(args), input=input, env=env)


def test_import_an_export_and_say_what_was_left_out(tmp_path: Path) -> None:
    result = run(tmp_path, "import", str(FIXTURES / "chatgpt-conversations.json"), "-u", "ann")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Imported 5 new turns from 3 conversations (0 already there).")
    assert "Left out (not dialogue): tool traffic (2)" in lines[1]
    assert lines[2] == "Left out (content types memoro does not know): some_future_type (1)."
    listed = json.loads(run(tmp_path, "conversations", "list", "-u", "ann", "--json").stdout)
    assert {c["title"] for c in listed} == {"Trip to Lisbon", "Colours"}


def test_import_from_stdin_with_a_format(tmp_path: Path) -> None:
    data = (FIXTURES / "sillytavern-chat.jsonl").read_bytes()
    result = run(tmp_path, "import", "-", "-u", "ann", "--format", "sillytavern", input=data)
    assert result.exit_code == 0 and "Imported 2 new turns from 1 conversation" in result.stdout


def test_a_file_that_is_no_export_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}')
    result = run(tmp_path, "import", str(path), "-u", "ann")
    assert result.exit_code == 1 and "cannot tell which export" in result.stderr
    assert "Traceback" not in result.output
    wrong = run(tmp_path, "import", str(path), "-u", "ann", "--format", "claude")
    assert wrong.exit_code == 0 and "Could not import 1 turn or conversation" in wrong.stdout


def test_a_zip_of_a_folder_of_logs_imports_as_the_folder_does(tmp_path: Path) -> None:
    """A zip holding a Claude Code and a Codex log gives the turns the
    folder gives (it gave the first log's alone)."""
    folder = tmp_path / "logs"
    for host in ("claude-code", "codex"):
        (log,) = (FIXTURES / host).rglob(
            "*0e6f1d2c3b4a.jsonl" if host == "claude-code" else "*10-02-11-*.jsonl"
        )
        (folder / host).mkdir(parents=True)
        (folder / host / log.name).write_bytes(log.read_bytes())
        os.utime(folder / host / log.name, (1e9, 1e9))  # long quiet: its last turn is over
    with zipfile.ZipFile(tmp_path / "logs.zip", "w") as archive:
        for log in sorted(folder.rglob("*.jsonl")):
            archive.write(log, log.relative_to(tmp_path))
    from_zip = run(tmp_path / "a", "import", str(tmp_path / "logs.zip"), "-u", "ann", "--no-index")
    from_folder = run(tmp_path / "b", "import", str(folder), "-u", "ann", "--no-index")
    assert from_zip.exit_code == 0, from_zip.output
    assert from_zip.stdout.startswith("Imported 10 new turns from 2 conversations (0 already")
    assert from_zip.stdout == from_folder.stdout


def test_export_then_import_into_another_memoro(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    run(first, "turn", "add", "-u", "ann", "-c", "trip", "-q", "Flights?", "-a", "TAP 9:40")
    assert run(first, "memory", "set", "-u", "ann", input=b"Preferred name: Al").exit_code == 0
    exported = run(first, "export", "-u", "ann")
    assert exported.exit_code == 0
    data = json.loads(exported.stdout)
    assert data["block"]["text"] == "Preferred name: Al" and len(data["audit"]) == 1
    path = tmp_path / "ann.json"
    path.write_text(exported.stdout)
    result = run(second, "import", str(path), "-u", "ann")
    assert result.exit_code == 0 and "Memory block: restored." in result.stdout
    assert run(second, "memory", "show", "-u", "ann").stdout.strip() == "Preferred name: Al"
    shown = run(second, "conversations", "show", "-u", "ann", "trip").stdout
    assert "Q: Flights?" in shown


def test_a_missing_file_a_pipe_and_an_unreadable_file(tmp_path: Path) -> None:
    import os
    import threading

    missing = run(tmp_path, "import", str(tmp_path / "nowhere.json"), "-u", "ann")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.output

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    data = (FIXTURES / "sillytavern-chat.jsonl").read_bytes()
    writer = threading.Thread(target=pipe.write_bytes, args=(data,))
    writer.start()
    piped = run(tmp_path, "import", str(pipe), "-u", "ann", "--format", "sillytavern")
    writer.join()
    assert piped.exit_code == 0 and "Imported 2 new turns" in piped.stdout, piped.output

    proc = run(tmp_path, "import", "/proc/self/status", "-u", "ann")
    assert proc.exit_code == 1 and "cannot read /proc/self/status" in proc.stderr
    assert "Traceback" not in proc.output


def test_the_import_bar_counts_megabytes_as_a_file_listing_does() -> None:
    import io

    from memoro.cli._progress import Progress

    bar = Progress(5_100_000, "Reading", "byte", out=io.StringIO())
    bar.update(4_000_000)
    assert "4.0/5.1 MB" in bar.line() and "MBs" not in bar.line()


def test_export_to_a_file_is_owner_only_and_whole(tmp_path: Path) -> None:
    """The takeout holds the user's whole history (I1): --output writes it
    0600 whatever the umask, replaces an older file only when complete, and
    a folder that is not there is one clear line."""
    import os
    import stat

    run(tmp_path, "turn", "add", "-u", "ann", "-c", "trip", "-q", "Flights?", "-a", "TAP 9:40")
    target = tmp_path / "ann.json"
    target.write_text("an older takeout")
    os.chmod(target, 0o644)
    old = os.umask(0o022)
    try:
        result = run(tmp_path, "export", "-u", "ann", "--output", str(target))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    written, printed = (
        json.loads(target.read_text()),
        json.loads(run(tmp_path, "export", "-u", "ann").stdout),
    )
    assert written.pop("exported_at") and printed.pop("exported_at")
    assert written == printed and written["conversations"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    nowhere = run(tmp_path, "export", "-u", "ann", "-o", str(tmp_path / "no" / "such.json"))
    assert nowhere.exit_code != 0 and "cannot write" in nowhere.stderr
    assert "Traceback" not in nowhere.output
