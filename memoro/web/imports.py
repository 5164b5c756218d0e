"""History in and out over HTTP. ``POST /v1/imports`` takes an export as
multipart/form-data (a ``file`` field, an optional ``format``) and streams it
into the database as it arrives — never whole in memory — then a worker
imports it; ``GET /v1/imports/{id}`` reports how far it is and, when done,
what it did. ``GET /v1/export`` is everything memoro holds about the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from memoro.envelope import error_body
from memoro.errors import InvalidInput, TooLarge
from memoro.imports import FORMATS
from memoro.imports.upload import Upload
from memoro.service import Memoro
from memoro.web.api import ErrorOut, Service, User, errors

MAX_BOUNDARY = 70
"""The longest multipart boundary (RFC 2046)."""

router = APIRouter(prefix="/v1", responses=errors(400, 401, 403, 413, 415, 422))


class ImportReportOut(BaseModel):
    format: str = Field(description="The format that was read.")
    conversations: int
    turns: int
    imported: int = Field(description="Turns stored by this import.")
    already_there: int = Field(description="Turns an earlier import had stored.")
    skipped: dict[str, int] = Field(description="Messages left out on purpose, by reason.")
    unknown_types: dict[str, int] = Field(description="Content of unknown types, by type.")
    failed: int = Field(description="Turns or conversations that could not be imported.")
    problems: list[str] = Field(description="The first few failures, each with where and why.")
    block: str = Field(
        description="'restored', or why the export's block was not, or '' (none in it)."
    )


class ImportOut(BaseModel):
    id: str
    file_name: str
    format: str = Field(description="As asked; the report says which format was read.")
    size: int = Field(description="Bytes of the uploaded file.")
    status: Literal["uploading", "queued", "running", "done", "failed"]
    read_bytes: int = Field(description="How far the import has read the file.")
    report: ImportReportOut | None = Field(description="What the import did, when done.")
    error: str | None = Field(description="When failed: why (the file is not an export…).")
    created_at: datetime
    finished_at: datetime | None


_UPLOAD_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "The export: a zip, or the JSON / JSON Lines in it.",
                        },
                        "format": {"type": "string", "enum": list(FORMATS), "default": "auto"},
                    },
                }
            }
        },
    }
}


class _Form:
    """multipart/form-data as it streams in: the ``file`` field goes straight
    into an Upload, the ``format`` field is kept."""

    def __init__(self, memoro: Memoro, user: str) -> None:
        self.memoro, self.user = memoro, user
        self.upload: Upload | None = None
        self.format = "auto"
        self._header = b""
        self._headers: dict[bytes, bytes] = {}
        self._field = b""
        self._value = bytearray()
        self._writing = False
        self.ended = False

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_end": self._done,
            "on_part_begin": self._begin,
            "on_header_field": lambda data, start, end: self._add_header(data[start:end]),
            "on_header_value": lambda data, start, end: self._add_value(data[start:end]),
            "on_header_end": self._end_header,
            "on_headers_finished": self._headers_done,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def _done(self) -> None:
        self.ended = True

    def _begin(self) -> None:
        self._headers, self._header, self._field, self._value = {}, b"", b"", bytearray()

    def _add_header(self, data: bytes) -> None:
        self._header += data

    def _add_value(self, data: bytes) -> None:
        self._headers[self._header.lower()] = self._headers.get(self._header.lower(), b"") + data

    def _end_header(self) -> None:
        self._header = b""

    def _headers_done(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        self._field = options.get(b"name", b"")
        self._writing = self._field == b"file"
        if self._writing:
            if self.upload is not None:
                raise InvalidInput("send one file per import")
            name = options.get(b"filename", b"upload").decode("utf-8", "replace")
            self.upload = self.memoro.start_upload(self.user, name)

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._writing:
            assert self.upload is not None
            self.upload.write(data[start:end])
        elif len(self._value) < 100:
            self._value += data[start:end]

    def _end(self) -> None:
        if self._field == b"format":
            # exactly one of the document's values, as every other input is
            self.format = self._value.decode("utf-8", "replace")
        self._writing = False


@router.post(
    "/imports",
    status_code=202,
    response_model=ImportOut,
    summary="Import an export (ChatGPT, Claude.ai, Open WebUI, LibreChat, SillyTavern, memoro)"
    " or session logs (Claude Code, Codex CLI)",
    openapi_extra=_UPLOAD_SCHEMA,
    responses={
        **errors(408, 429),
        409: {
            "model": ErrorOut,
            "description": "user_erased: you were erased (DELETE /v1/me) while the file"
            " arrived; nothing of it was kept or imported",
        },
    },
)
async def start_import(request: Request, user: User, memoro: Service) -> Any:
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        return _error(415, "unsupported_media_type", "send the file as multipart/form-data")
    if len(options[b"boundary"]) > MAX_BOUNDARY:
        raise InvalidInput(f"the form's boundary is longer than {MAX_BOUNDARY} characters")
    limit = memoro.settings.import_max_mb * 2**20
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + 2**16:
        raise TooLarge(f"the file is larger than {limit // 2**20:,} MB, the most an upload may be")
    form = _Form(memoro, user)
    parser = MultipartParser(options[b"boundary"], form.callbacks())  # type: ignore[arg-type]
    idle = memoro.settings.upload_timeout
    try:
        chunks = request.stream().__aiter__()
        while True:
            with anyio.fail_after(idle):  # a body that stops arriving is dropped
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
            await run_in_threadpool(parser.write, chunk)
        await run_in_threadpool(parser.finalize)
        if not form.ended:
            raise InvalidInput("the form ends before its closing boundary: the upload is cut short")
        if form.upload is None:
            raise InvalidInput("the form needs a file field holding the export")
        status = await run_in_threadpool(memoro.finish_upload, form.upload, form.format)
    except (MultipartParseError, InvalidInput, ClientDisconnect, TimeoutError) as exc:
        if form.upload is not None:
            await run_in_threadpool(form.upload.abandon)
        if isinstance(exc, MultipartParseError):
            raise InvalidInput(f"the form could not be read: {exc}") from None
        if isinstance(exc, ClientDisconnect):
            return _error(400, "disconnected", "the upload did not finish")
        if isinstance(exc, TimeoutError):
            return _error(
                408,
                "timeout",
                f"the upload sent nothing for {idle} s and was dropped: send it again",
            )
        raise
    finally:
        if form.upload is not None:
            form.upload.close()  # counted as arriving no more, whatever happened
    return JSONResponse(
        status.to_json(), status_code=202, headers={"Location": f"/v1/imports/{status.id}"}
    )


@router.get("/imports", response_model=list[ImportOut], summary="Your recent imports")
def list_imports(user: User, memoro: Service) -> Any:
    return [status.to_json() for status in memoro.list_imports(user)]


@router.get(
    "/imports/{import_id}",
    response_model=ImportOut,
    summary="How far an import is, and its report when done",
    responses=errors(404),
)
def import_status(import_id: str, user: User, memoro: Service) -> Any:
    status = memoro.import_status(user, import_id)
    if status is None:
        return _error(404, "not_found", f"no import {import_id!r}")
    return status.to_json()


@router.get(
    "/export",
    summary="Everything memoro holds about you, as one JSON file",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/json": {}}}},
)
def export(user: User, memoro: Service) -> StreamingResponse:
    parts: Iterator[str] = memoro.export(user)
    return StreamingResponse(
        (part.encode() for part in parts),
        media_type="application/json",
        headers={"Content-Disposition": 'attachment; filename="memoro-export.json"'},
    )


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status)
