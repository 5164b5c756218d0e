"""memoro's exceptions: one small tree, mapped once to HTTP statuses and once
to CLI messages.

    MemoroError
    ├── InvalidInput        the caller sent something memoro cannot accept
    │   ├── InvalidUser     a user id that is empty, too long or has controls
    │   ├── UnknownTool     a tool name memoro does not define
    │   └── TooLarge        an upload over the size memoro accepts
    ├── BlockChanged        a precondition (If-Match) no longer holds
    ├── NoProposal          the user has no pending memory proposal
    ├── ReviewRunning       a review of the user is running already
    ├── TurnRunning         a chat turn of this conversation is running already
    ├── Busy                as many uploads of the user are arriving as memoro takes
    ├── UserErased          the user was erased while this work ran: it was cancelled
    ├── Unauthorized        no valid user token or session
    ├── KeysUnavailable     the identity provider's signing keys could not be fetched
    ├── ConfigError         a setting has a value memoro cannot use
    │   └── NoModel         a review was asked for but no chat model is configured
    ├── ModelError          the chat model's API failed or could not be reached
    │   └── ModelTimeout    the chat model did not answer within the deadline
    └── StoreError          the database could not do what was asked
        ├── DiskFull        the database's disk is full: nothing was stored
        └── MigrationError  the schema is newer than this memoro, or broken

A write the rules reject (over the limit, empty) is not an exception: it is a
result the model reads and acts on.
"""

from __future__ import annotations


class MemoroError(Exception):
    """Base class of every error memoro raises on purpose."""

    code = "memoro_error"


class InvalidInput(MemoroError):
    """The caller sent something memoro cannot accept; the message says what."""

    code = "invalid_input"


class InvalidUser(InvalidInput):
    """A user id that is empty, longer than 255 characters or has control
    characters."""

    code = "invalid_user"


class UnknownTool(InvalidInput):
    """A tool call named a tool memoro does not define."""

    code = "unknown_tool"


class TooLarge(InvalidInput):
    """An upload (an export to import) is larger than memoro accepts
    (MEMORO_IMPORT_MAX_MB); nothing of it is kept."""

    code = "too_large"


class BlockChanged(MemoroError):
    """The block is no longer what the caller started from.

    ``current`` is the block as it is now (``None`` when there is none), so the
    caller can show it or retry on top of it.
    """

    code = "block_changed"

    def __init__(self, message: str, current: str | None) -> None:
        super().__init__(message)
        self.current = current


class NoProposal(MemoroError):
    """The user has no pending memory proposal to show, accept or dismiss
    (HTTP 404)."""

    code = "no_proposal"


class ReviewRunning(MemoroError):
    """A review of the user's memory is running already, here or in another
    process (HTTP 409: its proposal comes when it ends)."""

    code = "review_running"


class TurnRunning(MemoroError):
    """A turn of this conversation of the reference agent is still running:
    a conversation takes one turn at a time, so a message sent meanwhile is
    refused, unsent (HTTP 409); send it again once the turn has ended."""

    code = "turn_running"


class Busy(MemoroError):
    """The user already has as many uploads arriving as memoro takes at once
    (MEMORO_IMPORT_UPLOADS; HTTP 429: try again when one has finished)."""

    code = "busy"


class UserErased(MemoroError):
    """The user was erased after this work began (an import, ``memoro
    watch``): the work is cancelled and stores nothing more, so nothing it
    read before the erase comes back (HTTP 409). Work started after the
    erase is not affected: the id is usable again at once."""

    code = "user_erased"


class Unauthorized(MemoroError):
    """The request carries no valid, unexpired user token or session."""

    code = "unauthorized"


class KeysUnavailable(MemoroError):
    """The signing keys at MEMORO_JWKS_URL could not be fetched, so no token
    signed with them can be checked now (HTTP 503: try again later)."""

    code = "keys_unavailable"


class ConfigError(MemoroError):
    """A setting has a value memoro cannot use."""

    code = "config_error"


class NoModel(ConfigError):
    """A memory review needs a chat model and none is configured
    (MEMORO_LLM; HTTP 501)."""

    code = "no_model"


class ModelError(MemoroError):
    """The chat model's API could not be reached, or refused or failed the
    request, or answered with nothing memoro can use (HTTP 502); the turn
    was not answered, or the review changed nothing."""

    code = "model_error"


class ModelTimeout(ModelError):
    """The chat model did not finish within the deadline (HTTP 504)."""

    code = "model_timeout"


class StoreError(MemoroError):
    """The database could not do what was asked."""

    code = "store_error"


class DiskFull(StoreError):
    """The database's disk is full: nothing of the request was stored (HTTP
    503 until an operator frees space)."""

    code = "disk_full"


class MigrationError(StoreError):
    """The database schema is newer than this memoro, or a migration failed."""

    code = "migration_error"
