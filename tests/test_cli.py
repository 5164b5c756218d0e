"""The memoro CLI, through click's runner and, once, as the installed script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import cast

import click
import pytest
from click.testing import CliRunner, Result

from memoro import block
from memoro.cli import cli
from memoro.service import Memoro
from memoro.settings import SETTINGS


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run(home: Path, *args: str, input: str | bytes | None = None, **env: str) -> Result:
    runner = CliRunner()
    return runner.invoke(cli, list(args), input=input, env={"MEMORO_HOME": str(home), **env})


def test_set_then_show_prints_exactly_the_raw_block(home: Path) -> None:
    saved = run(home, "memory", "set", "--user", "ann", input="Name: Ann\r\nTeam: blue\n")
    assert saved.exit_code == 0, saved.output
    assert "+ Name: Ann" in saved.stdout and "20/4,000" in saved.stdout
    shown = run(home, "memory", "show", "--user", "ann")
    assert (shown.exit_code, shown.stdout) == (0, "Name: Ann\nTeam: blue\n")  # a line ends


def test_show_prints_nothing_for_a_user_without_a_block_and_says_so_on_stderr(
    home: Path,
) -> None:
    shown = run(home, "memory", "show", "--user", "nobody")
    assert (shown.exit_code, shown.stdout) == (0, "")
    assert shown.stderr == "Nothing is remembered about nobody.\n"
    audit = run(home, "memory", "audit", "--user", "nobody")
    assert (audit.stdout, audit.stderr) == ("", "No writes or deletes are recorded for nobody.\n")


def test_set_reports_removed_lines_and_identical_writes(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="a\nb")
    changed = run(home, "memory", "set", "-u", "ann", input="a\nc")
    assert "- b" in changed.stdout and "+ c" in changed.stdout
    same = run(home, "memory", "set", "-u", "ann", input="a\nc\n")
    assert same.exit_code == 0 and same.stdout.startswith("No change")


def test_set_over_the_limit_exits_1_with_the_reason_on_stderr(home: Path) -> None:
    result = run(home, "memory", "set", "-u", "ann", input="x" * 4001)
    assert result.exit_code == 1
    assert "4,001" in result.stderr and "Cut at least 1 character" in result.stderr
    assert result.stdout == ""
    assert run(home, "memory", "show", "-u", "ann").stdout == ""


def test_set_empty_exits_1_and_keeps_the_block(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="keep")
    result = run(home, "memory", "set", "-u", "ann", input=" \n\u200b")
    assert result.exit_code == 1 and "delete" in result.stderr
    assert run(home, "memory", "show", "-u", "ann").stdout == "keep\n"


def test_the_cli_speaks_to_the_person_not_to_the_model(home: Path) -> None:
    first = run(home, "memory", "set", "-u", "ann", input="Name: Ann")
    assert first.stdout == "Saved: added 1 line (9/4,000 characters).\n  + Name: Ann\n"
    second = run(home, "memory", "set", "-u", "ann", input="Name: Annie\nTeam: blue\nCity: Oslo")
    assert second.stdout.startswith("Saved: removed 1 line, added 3 lines (33/4,000 characters).")
    for said in (first.stdout, second.stdout):
        assert "system prompt" not in said and "intended" not in said
    empty = run(home, "memory", "set", "-u", "ann", input=" ")
    assert "run `memoro memory clear`" in empty.stderr
    assert "memory_delete_all" not in empty.stderr and "tool" not in empty.stderr
    cleared = run(home, "memory", "clear", "-u", "ann", "--yes")
    assert cleared.stdout == "Cleared: 3 lines deleted. Nothing is remembered about ann now.\n"
    run(home, "memory", "set", "-u", "ann", input="one line")
    asked = run(home, "memory", "clear", "-u", "ann", input="n\n")
    assert "(1 line)?" in asked.stderr
    assert run(home, "memory", "clear", "-u", "bob").stdout == (
        "There is no personal memory to clear.\n"
    )
    with Memoro.open(home, embedder="keyword", worker=False) as memoro:
        memoro.record_turn("ann", "trip", "q", "a")
    listed = run(home, "conversations", "list", "-u", "ann").stdout
    assert listed.startswith("trip\t1 turn\tlast ") and listed.endswith("\tq\n")


def test_set_refuses_input_that_is_not_utf8(home: Path) -> None:
    result = run(home, "memory", "set", "-u", "ann", input=b"caf\xe9")
    assert result.exit_code == 1 and "not UTF-8" in result.stderr
    assert "Traceback" not in result.output


def test_set_with_a_stale_if_match_is_refused(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="v1")
    stale = block.etag("v0")
    result = run(home, "memory", "set", "-u", "ann", "--if-match", stale, input="v2")
    assert result.exit_code == 1 and "changed elsewhere" in result.stderr
    fresh = json.loads(run(home, "memory", "show", "-u", "ann", "--json").stdout)["etag"]
    assert run(home, "memory", "set", "-u", "ann", "--if-match", fresh, input="v2").exit_code == 0


def test_clear_asks_for_confirmation(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="a\nb")
    declined = run(home, "memory", "clear", "-u", "ann", input="n\n")
    assert declined.exit_code == 1
    assert run(home, "memory", "show", "-u", "ann").stdout == "a\nb\n"
    accepted = run(home, "memory", "clear", "-u", "ann", input="y\n")
    assert accepted.exit_code == 0 and "2 lines" in accepted.stdout
    assert run(home, "memory", "show", "-u", "ann").stdout == ""


def test_clear_yes_removes_the_row_without_asking(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="a")
    assert run(home, "memory", "clear", "-u", "ann", "--yes").exit_code == 0
    with Memoro.open(home) as memoro:
        assert memoro.read_block("ann") is None


def test_audit_lists_writer_operation_and_lines(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="a\nb")
    run(home, "memory", "set", "-u", "ann", input="a\nc")
    text = run(home, "memory", "audit", "-u", "ann").stdout
    assert "user   write   -1 +1" in text and "    - b" in text and "    + c" in text
    entries = json.loads(run(home, "memory", "audit", "-u", "ann", "--json").stdout)
    assert [e["added_lines"] for e in entries] == [["c"], ["a", "b"]]
    assert {e["writer"] for e in entries} == {"user"}


def test_prompt_prints_the_system_prompt_exactly(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="Name: Ann")
    printed = run(home, "prompt", "-u", "ann").stdout
    with Memoro.open(home) as memoro:
        assert printed == memoro.system_prompt("ann").text + "\n"
    anthropic = json.loads(run(home, "prompt", "-u", "ann", "--format", "anthropic").stdout)
    assert anthropic[0]["cache_control"] == {"type": "ephemeral"}


def test_tools_prints_the_definitions(home: Path) -> None:
    names = [t["name"] for t in json.loads(run(home, "tools", "--format", "anthropic").stdout)]
    assert names == [
        "memory_write",
        "memory_delete_all",
        "conversation_search",
        "recent_conversations",
    ]


def test_a_bad_user_id_is_a_one_line_error(home: Path) -> None:
    result = run(home, "memory", "show", "-u", "")
    assert result.exit_code == 1 and "user id" in result.stderr
    assert "Traceback" not in result.output


def test_every_setting_has_a_variable_shown_in_help(home: Path) -> None:
    text = run(home, "help", "config").stdout
    for setting in SETTINGS:
        assert setting.env in text and setting.option in text


# -- memory edit, with a scripted $EDITOR ------------------------------------


EDITOR = """
import sys, pathlib, os
path = pathlib.Path(sys.argv[1])
count_file = pathlib.Path(os.environ["EDIT_COUNT"])
n = int(count_file.read_text()) + 1 if count_file.exists() else 1
count_file.write_text(str(n))
path.write_text(path.read_text() + os.environ["EDIT_APPEND"])
if n == 1 and os.environ.get("EDIT_RACE"):
    from memoro.service import Memoro
    with Memoro.open(os.environ["MEMORO_HOME"]) as m:
        m.write_block("ann", os.environ["EDIT_RACE"], writer="model")
"""


def edit(home: Path, tmp_path: Path, append: str, race: str = "", input: str = "") -> Result:
    script = tmp_path / "editor.py"
    script.write_text(textwrap.dedent(EDITOR))
    return run(
        home,
        "memory",
        "edit",
        "-u",
        "ann",
        input=input,
        EDITOR=f"{sys.executable} {script}",
        EDIT_COUNT=str(tmp_path / "count"),
        EDIT_APPEND=append,
        EDIT_RACE=race,
    )


def test_edit_saves_what_the_editor_wrote(home: Path, tmp_path: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="Name: Ann")
    result = edit(home, tmp_path, "\nTeam: blue")
    assert result.exit_code == 0, result.output
    assert "+ Team: blue" in result.stdout
    assert run(home, "memory", "show", "-u", "ann").stdout == "Name: Ann\nTeam: blue\n"


def test_edit_refuses_to_overwrite_a_change_made_while_the_editor_was_open(
    home: Path, tmp_path: Path
) -> None:
    run(home, "memory", "set", "-u", "ann", input="Name: Ann")
    result = edit(home, tmp_path, "\nTeam: blue", race="Name: Annie", input="n\n")
    assert result.exit_code == 1
    assert "Memory was changed elsewhere." in result.stderr
    assert "+ Name: Annie" in result.stderr
    assert run(home, "memory", "show", "-u", "ann").stdout == "Name: Annie\n"
    kept = Path(result.stderr.rsplit("kept in ", 1)[1].strip())
    assert kept.read_text() == "Name: Ann\nTeam: blue"
    kept.unlink()


def test_edit_retry_after_a_conflict_overwrites_with_the_edited_text(
    home: Path, tmp_path: Path
) -> None:
    run(home, "memory", "set", "-u", "ann", input="Name: Ann")
    result = edit(home, tmp_path, "\nTeam: blue", race="Name: Annie", input="y\n")
    assert result.exit_code == 0, result.output
    shown = run(home, "memory", "show", "-u", "ann").stdout
    assert shown == "Name: Ann\nTeam: blue\nTeam: blue\n"  # the editor appended once more


def test_edit_without_an_editor_is_a_clear_error(home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-editors"
    empty.mkdir()
    result = run(home, "memory", "edit", "-u", "ann", EDITOR="", VISUAL="", PATH=str(empty))
    assert result.exit_code == 1 and "EDITOR" in result.stderr


def fallback_editors(tmp_path: Path) -> Path:
    """A PATH whose nano (the first of editor, nano, vi found) appends a line
    and notes that it ran."""
    tools = tmp_path / "bin"
    tools.mkdir()
    nano = tools / "nano"
    nano.write_text(
        f"#!{sys.executable}\nimport sys\nopen(sys.argv[1], 'a').write('City: Oslo')\n"
        f"open({str(tmp_path / 'nano-ran')!r}, 'w').close()\n"
    )
    nano.chmod(0o755)
    return tools


def edit_process(home: Path, tools: Path, stdin: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORO_HOME": str(home), "PATH": str(tools), "EDITOR": "", "VISUAL": ""}
    return subprocess.run(
        [sys.executable, "-m", "memoro", "memory", "edit", "-u", "ann"],
        stdin=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_edit_falls_back_to_the_systems_editor_on_a_terminal(home: Path, tmp_path: Path) -> None:
    tools = fallback_editors(tmp_path)
    terminal, other_end = os.openpty()
    try:
        result = edit_process(home, tools, terminal)
    finally:
        os.close(terminal)
        os.close(other_end)
    assert result.returncode == 0, result.stderr
    assert run(home, "memory", "show", "-u", "ann").stdout == "City: Oslo\n"


def test_edit_without_a_terminal_or_an_editor_exits_at_once(home: Path, tmp_path: Path) -> None:
    # editor, nano and vi wait on a terminal: with stdin redirected none is started
    tools = fallback_editors(tmp_path)
    result = edit_process(home, tools, subprocess.DEVNULL)
    assert result.returncode == 1 and not (tmp_path / "nano-ran").exists()
    assert result.stderr.strip().splitlines() == [
        "Error: no editor can run here: standard input is not a terminal and neither $VISUAL"
        " nor $EDITOR is set; save with `memoro memory set < file` instead"
    ]
    assert run(home, "memory", "show", "-u", "ann").stdout == ""


def test_a_malformed_if_match_is_a_usage_error_not_a_conflict(home: Path) -> None:
    run(home, "memory", "set", "-u", "ann", input="v1")
    result = run(home, "memory", "set", "-u", "ann", "--if-match", "garbage", input="v2")
    assert result.exit_code == 2
    assert "Invalid value for --if-match: not an ETag" in result.stderr
    assert "changed elsewhere" not in result.stderr
    etag = json.loads(run(home, "memory", "show", "-u", "ann", "--json").stdout)["etag"]
    quoted = run(home, "memory", "set", "-u", "ann", "--if-match", f'"{etag}"', input="v2")
    assert quoted.exit_code == 0, quoted.output  # as an HTTP ETag is written, quoted


def test_every_command_that_takes_a_user_defaults_to_the_local_user(home: Path) -> None:
    from memoro.cli import cli as group

    def takes_user(command: object) -> list[str]:
        found = []
        for name, sub in getattr(command, "commands", {}).items():
            if any(p.name == "user" for p in sub.params):
                found.append(name)
            found += [f"{name} {inner}" for inner in takes_user(sub)]
        return found

    commands = takes_user(group)
    assert {"memory set", "prompt", "search", "import", "export", "turn add", "chat"} <= set(
        commands
    )
    for name in commands:
        if name == "token issue":  # a token names the user it is for
            continue
        command = group
        for part in name.split():
            command = command.commands[part]  # type: ignore[attr-defined]
        (user,) = [p for p in command.params if p.name == "user"]
        assert not user.required and "MEMORO_LOCAL_USER" in (user.help or ""), name
    run(home, "memory", "set", input="Name: Lo", MEMORO_LOCAL_USER="lo")
    assert run(home, "memory", "show", "-u", "lo").stdout == "Name: Lo\n"
    assert run(home, "memory", "show", MEMORO_LOCAL_USER="lo").stdout == "Name: Lo\n"
    assert run(home, "memory", "show").stdout == ""  # "local", unless set, has no block


def test_help_lists_the_commands_first_and_the_settings_apart(home: Path) -> None:
    text = run(home, "--help").stdout
    assert len(text.splitlines()) < 45
    assert text.index("Commands:") < text.index("Options:") < text.index("Settings:")
    assert "memoro help config" in text
    assert run(home, "help", "memory").stdout.startswith("Usage: cli memory [OPTIONS] COMMAND")


def test_the_installed_console_script_runs(tmp_path: Path) -> None:
    memoro = Path(sys.executable).parent / "memoro"
    env = {**os.environ, "MEMORO_HOME": str(tmp_path)}
    done = subprocess.run(
        [memoro, "memory", "set", "-u", "ann"], input=b"hello", env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([memoro, "memory", "show", "-u", "ann"], env=env, capture_output=True)
    assert shown.stdout == b"hello\n"


def test_an_unreachable_postgresql_is_one_clear_line_at_once(home: Path) -> None:
    from tests.web_server import free_port

    url = f"postgresql://memoro@127.0.0.1:{free_port()}/memoro"  # nothing listens there
    for args in (("status",), ("migrate",), ("memory", "show")):
        started = time.monotonic()
        result = run(home, "--database-url", url, *args)
        assert time.monotonic() - started < 20, args  # not the pool's 30 s of retries
        assert result.exit_code == 1, (args, result.output)
        (line,) = result.stderr.splitlines()  # no pool warnings, no traceback
        assert line.startswith("Error: cannot ") and "PostgreSQL" in line, line
        assert "Connection refused" in line


def test_a_home_that_cannot_be_a_folder_is_one_clear_line(tmp_path: Path) -> None:
    """A file, a device, a path under a file or a folder no file can be
    made in (/proc/1): refused before anything is opened, in one line."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not memoro's")
    for home in (a_file, Path(os.devnull), a_file / "below", Path("/proc/1")):
        for args in (("status",), ("memory", "show", "-u", "ann")):
            result = run(home, *args)
            assert result.exit_code == 1, (home, args, result.output)
            (line,) = result.stderr.splitlines()  # no traceback, no log line about its mode
            assert line.startswith(
                f"Error: MEMORO_HOME must be a folder memoro can write to; {home} is not"
            ), line
    assert a_file.read_text() == "not memoro's"


def commands() -> list[tuple[str, click.Command]]:
    """Every command and group of the CLI, by its full name."""

    def walk(command: click.Command, name: str) -> list[tuple[str, click.Command]]:
        found = [(name, command)]
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for sub in command.list_commands(ctx):
                found += walk(cast(click.Command, command.get_command(ctx, sub)), f"{name} {sub}")
        return found

    return walk(cli, "memoro")


@pytest.mark.parametrize(("name", "command"), commands(), ids=[name for name, _ in commands()])
def test_every_command_describes_its_options_and_arguments_in_whole_sentences(
    name: str, command: click.Command
) -> None:
    text = command.help or ""
    summary = text.split("\n\n")[0].strip()
    assert summary.endswith("."), f"{name}: the summary stops mid-sentence: {summary!r}"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{name} {param.opts[0]} has no description"
        elif isinstance(param, click.Argument):
            assert param.human_readable_name in text, f"{name}: {param.human_readable_name}?"
