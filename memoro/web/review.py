"""The HTTP API of memory review, for the authenticated user only: ask for
a review, read the pending proposal, accept it (through the one save, with
compare-before-save) or dismiss it. Thin routes over the service; errors in
the one envelope (app.py): 404 no proposal to accept or dismiss, 409 a
review already running (or its user erased while it ran), 412 the block
changed since the proposal, 501 no chat model, 502 the model failed or
answered with nothing usable, 504 past the review's deadline."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from memoro import block
from memoro.envelope import error_body
from memoro.web.api import ErrorOut, Service, User, WriteOut, _etag, errors

router = APIRouter(prefix="/v1", responses=errors(400, 401, 403, 413, 415, 422))


class ProposalOut(BaseModel):
    block: str = Field(description="The whole block the review proposes, normalized.")
    count: int
    limit: int
    etag: str = Field(description="The ETag of the proposed block: send it to accept this one.")
    based_on: str = Field(description="The ETag of the block the review read.")
    removed: list[str] = Field(description="The lines it removes from that block, in order.")
    added: list[str] = Field(description="The lines it adds, in order.")
    created_at: datetime
    turns_read: int = Field(description="The past turns the review read.")
    turns_unread: int = Field(
        description="Newer-than-reviewed turns it did not read: the older ones, past"
        " MEMORO_REVIEW_CHARS."
    )
    stale: bool = Field(
        description="The block has changed since the review read it: accepting is refused"
        " (412); ask for a fresh review."
    )
    applied: bool = Field(description="Saved at once (a review with apply).")


class ReviewIn(BaseModel):
    model_config = ConfigDict(
        strict=True, extra="forbid", json_schema_extra={"examples": [{"apply": False}]}
    )
    apply: bool = Field(
        default=False,
        description="Save the proposed block at once (as the model's review) instead of"
        " keeping it for the user to accept; not if the block changed during the review.",
    )


class PendingOut(BaseModel):
    proposal: ProposalOut | None = Field(
        description="The pending proposal — after a review, the new one (with apply, the"
        " block saved) —; null when there is none (after a review: the model found nothing"
        " to change)."
    )


FAILURES = errors(409, 501, 502, 504)
_NO_BODY = ReviewIn()
"""A review asked for without a body: propose, do not apply."""


@router.post(
    "/memory/review",
    response_model=PendingOut,
    summary="Review the block with the chat model",
    description="The configured chat model rereads the block and the turns since the last"
    " review and proposes a whole new block through memory_write. The proposal replaces"
    " any pending one and is not saved unless `apply` is true. On any failure nothing"
    " changes.",
    responses=FAILURES,
)
def review(user: User, memoro: Service, body: ReviewIn = _NO_BODY) -> Any:
    found = memoro.review(user, apply=body.apply)
    return {"proposal": found.to_json() if found else None}


@router.get(
    "/memory/proposal",
    response_model=PendingOut,
    summary="The pending proposal",
    description="`stale` says whether the block has changed since the review read it.",
)
def proposal(user: User, memoro: Service) -> Any:
    found = memoro.proposal(user)
    return {"proposal": found.to_json() if found else None}


IfMatchProposal = Annotated[
    str | None,
    Header(
        description="Accept only if the pending proposal still has this ETag (else 404:"
        " a newer review replaced it)."
    ),
]


@router.post(
    "/memory/proposal/accept",
    response_model=WriteOut,
    summary="Accept the pending proposal",
    description="Saves the proposed block through the same save as every write, audited as"
    " the model's with its source a review, only if the block is still the one the review"
    " read (else 412 with the block as it is now, and nothing changes).",
    responses={**errors(404), 412: {"model": ErrorOut, "description": "The block changed"}},
)
def accept(user: User, memoro: Service, if_match: IfMatchProposal = None) -> Any:
    result = memoro.accept_proposal(user, expected=_etag(if_match))
    return JSONResponse(result.to_json(), headers={"ETag": f'"{block.etag(result.block)}"'})


@router.delete(
    "/memory/proposal",
    status_code=204,
    summary="Dismiss the pending proposal",
    responses=errors(404),
)
def dismiss(user: User, memoro: Service) -> Response:
    if not memoro.dismiss_proposal(user):
        return _none()
    return Response(status_code=204)


def _none() -> JSONResponse:
    return JSONResponse(
        error_body("no_proposal", "there is no pending memory proposal"), status_code=404
    )
