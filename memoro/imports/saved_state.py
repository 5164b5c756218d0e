"""The shape of a ``memoro watch`` state file (``follow.py`` writes one per
log): every field of the JSON type the follower wrote, so that a file
edited by hand or damaged is named, never read into a traceback. A field
that an older memoro did not write yet takes its default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from memoro.imports.sessions import SessionLog

_NONE = type(None)
_FIELDS: dict[str, tuple[type, ...]] = {
    "path": (str,),
    "device": (int,),
    "inode": (int,),
    "head": (str,),
    "head_size": (int,),
    "size": (int,),
    "modified": (int,),
    "offset": (int,),
    "lines": (int,),
    "skipping": (bool,),
    "skim": (dict, _NONE),
    "format": (str, _NONE),
    "log": (dict, _NONE),
    "due": (int, float, _NONE),
    "version": (int,),
}
"""What a state file holds, as ``Follower._save`` writes it."""
_REQUIRED = ("path", "offset", "lines", "format", "log", "version")
"""Its fields that every version of it had."""
_SKIM: dict[str, tuple[type, ...]] = {
    "depth": (int,),
    "quoted": (bool,),
    "escape": (bool,),
    "text": (str, _NONE),
    "last": (str, _NONE),
    "key": (str, _NONE),
    "value": (bool,),
    "literal": (str,),
    "fields": (dict,),
    "keys": (list,),
    "steps": (int,),
}
"""What ``Skim.state`` writes."""
_TURN: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "conversation": (str,),
    "question": (str,),
    "command": (bool,),
    "answers": (list,),
    "ended": (bool,),
    "waiting": (list,),
    "tools_after": (bool,),
    "tentative": (bool,),
}
"""The fields of a turn still open (``Opened``) that must have their type."""


def damage(data: dict[str, Any], logs: Mapping[str, type[SessionLog]]) -> str:
    """What is wrong with the fields of a state file, "" if nothing is;
    ``logs`` are the session logs memoro reads, by format."""
    why = _mistyped(data, _FIELDS, _REQUIRED, exact=True)
    if why:
        return why
    for name in ("head_size", "offset", "lines"):
        if data.get(name, 0) < 0:
            return f"{name!r} is negative"
    form, log = data["format"], data["log"]
    if form not in (None, "", *logs) or (log is not None and form not in logs):
        return f"'format' is {form!r}, no session log memoro reads"
    skim = data.get("skim") or {}
    if data.get("skipping") and (why := _mistyped(skim, _SKIM, where="'skim'")):
        return why
    if log is None:
        return ""
    opened, where = log.get("opened"), "a turn in 'log'"
    for turn in opened if isinstance(opened, list) else []:
        if not isinstance(turn, dict):
            return f"{where} is {_kind(type(turn))}, not an object"
        if why := _mistyped(turn, _TURN, ("key", "conversation", "question", "at"), where=where):
            return why
        if not all(
            isinstance(text, str) for text in [*turn.get("answers", []), *turn.get("waiting", [])]
        ):
            return "a turn in 'log' lists something other than text"
    try:
        logs[form](PurePath(data["path"]).name).restore(log)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"'log' is not as written ({exc.__class__.__name__}: {exc})"
    return ""


def _mistyped(
    data: dict[str, Any],
    fields: dict[str, tuple[type, ...]],
    required: Sequence[str] = (),
    *,
    exact: bool = False,
    where: str = "",
) -> str:
    """The first field of ``data`` of the wrong JSON type, or ``required``
    and missing; with ``exact``, a field not in ``fields`` too; "" when
    there is none. (A field that an older memoro did not write yet takes
    its default.)"""
    at = f" in {where}" if where else ""
    for name in required:
        if name not in data:
            return f"no field {name!r}{at}"
    for name, kinds in fields.items():
        if name not in data:
            continue
        kind = type(data[name])
        if kind not in kinds and not (kind is int and float in kinds):
            return f"{name!r}{at} is {_kind(kind)}, not {' or '.join(map(_kind, kinds))}"
    unknown = [name for name in data if name not in fields] if exact else []
    return f"an unknown field {unknown[0]!r}{at}" if unknown else ""


def _kind(kind: type) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "true or false"}
    return {**names, _NONE: "null", int: "a whole number", float: "a number"}.get(kind, "?")
