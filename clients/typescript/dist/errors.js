/**
 * memoro's errors, one small tree that mirrors the Python package's
 * (memoro/errors.py), made from the server's error envelope
 * `{"error": {"code", "message"}}` the way memoro's Python client makes them:
 *
 *     MemoroError
 *     ├── InvalidInput        the server (or this client) refused what was sent
 *     │   ├── InvalidUser     a user id the server cannot take
 *     │   ├── UnknownTool     a tool name memoro does not define
 *     │   ├── TooLarge        an upload over the size the server accepts
 *     │   └── NotFound        no such import (404)
 *     ├── BlockChanged        an expected ETag no longer holds (412)
 *     ├── Busy                as many of the user's uploads are arriving as the server takes (429)
 *     ├── UserErased          the user was erased since this work began: it stores nothing more (409)
 *     ├── NoProposal          no pending memory proposal, or a newer one replaced it (404)
 *     ├── ReviewRunning       a review of the user is running already (409)
 *     ├── TurnRunning         a chat turn of this conversation is still running (409)
 *     ├── Unauthorized        no valid token for the user (401)
 *     │   └── Forbidden       the token is someone else's, or another site (403)
 *     ├── KeysUnavailable     the identity provider's keys could not be fetched
 *     ├── ConfigError         the server has a setting it cannot use
 *     │   └── NoModel         a review asked of a server without a chat model (501)
 *     ├── ModelError          the server's chat model failed
 *     │   └── ModelTimeout    a review past the server's deadline (504)
 *     └── StoreError          the database failed, or the server could not be reached
 *         ├── DiskFull        the database's disk is full: nothing was stored
 *         └── MigrationError  the database schema is newer than the server
 *
 * A write the rules reject (too long, empty) is not an error: it is a
 * WriteResult whose outcome says why.
 */
/** Base class of every error memoro sends, and of this client's own refusals. */
export class MemoroError extends Error {
    static code = "memoro_error";
    /** The server's machine-readable code (the class's own for this client's refusals). */
    code;
    /** The HTTP status the server answered with; undefined when nothing was answered. */
    status;
    constructor(message, options = {}) {
        super(message, options.cause === undefined ? undefined : { cause: options.cause });
        this.name = new.target.name;
        this.code = options.code ?? new.target.code;
        this.status = options.status;
    }
}
export class InvalidInput extends MemoroError {
    static code = "invalid_input";
}
export class InvalidUser extends InvalidInput {
    static code = "invalid_user";
}
export class UnknownTool extends InvalidInput {
    static code = "unknown_tool";
}
export class TooLarge extends InvalidInput {
    static code = "too_large";
}
export class NotFound extends InvalidInput {
    static code = "not_found";
}
/** The user already has as many uploads arriving as the server takes at once (429). */
export class Busy extends MemoroError {
    static code = "busy";
}
/**
 * The user was erased after this work began (an import, or a watcher's
 * turns sent with an epoch): the work is cancelled and stores nothing more
 * (409). Work started after the erase is not affected.
 */
export class UserErased extends MemoroError {
    static code = "user_erased";
}
/** The block is no longer what the caller started from. */
export class BlockChanged extends MemoroError {
    static code = "block_changed";
    /** The block as it is now (null when there is none), to show or build on. */
    current;
    /** The ETag of the current block, to send when writing on top of it. */
    etag;
    constructor(message, current, options = {}) {
        super(message, options.status === undefined ? {} : { status: options.status });
        this.current = current;
        this.etag = options.etag;
    }
}
export class Unauthorized extends MemoroError {
    static code = "unauthorized";
}
export class Forbidden extends Unauthorized {
    static code = "forbidden";
}
export class KeysUnavailable extends MemoroError {
    static code = "keys_unavailable";
}
export class ConfigError extends MemoroError {
    static code = "config_error";
}
export class ModelError extends MemoroError {
    static code = "model_error";
}
/** The chat model did not finish a memory review within the server's deadline (504). */
export class ModelTimeout extends ModelError {
    static code = "model_timeout";
}
/** A memory review was asked of a server that has no chat model (501). */
export class NoModel extends ConfigError {
    static code = "no_model";
}
/** The user has no pending memory proposal, or a newer review replaced the one meant (404). */
export class NoProposal extends MemoroError {
    static code = "no_proposal";
}
/** A review of the user's memory is running already (409). */
export class ReviewRunning extends MemoroError {
    static code = "review_running";
}
/**
 * A chat turn of this conversation is still running: a conversation takes
 * one turn at a time, so the message was refused unsent; send it again once
 * the turn has ended (409).
 */
export class TurnRunning extends MemoroError {
    static code = "turn_running";
}
export class StoreError extends MemoroError {
    static code = "store_error";
}
export class DiskFull extends StoreError {
    static code = "disk_full";
}
export class MigrationError extends StoreError {
    static code = "migration_error";
}
const BY_CODE = new Map([
    InvalidInput,
    InvalidUser,
    UnknownTool,
    TooLarge,
    NotFound,
    Busy,
    UserErased,
    Unauthorized,
    Forbidden,
    KeysUnavailable,
    ConfigError,
    NoModel,
    ModelError,
    ModelTimeout,
    NoProposal,
    ReviewRunning,
    TurnRunning,
    StoreError,
    DiskFull,
    MigrationError,
].map((cls) => [cls.code, cls]));
const BY_STATUS = new Map([
    [401, Unauthorized],
    [403, Forbidden],
    [404, NotFound],
    [413, TooLarge],
    [429, Busy],
]);
/**
 * The error for an error answer: by the envelope's code, else by the
 * status; any other 4xx is InvalidInput and anything else a StoreError.
 */
export function errorFrom(status, body) {
    const error = envelope(body);
    const code = typeof error?.code === "string" ? error.code : "";
    const message = typeof error?.message === "string" ? error.message : `the memoro server answered ${status}`;
    if (status === 412 || code === "block_changed") {
        const current = typeof error?.current === "string" && error.current ? error.current : null;
        const etag = typeof error?.etag === "string" ? { etag: error.etag } : {};
        return new BlockChanged(message, current, { ...etag, status });
    }
    const cls = BY_CODE.get(code) ??
        BY_STATUS.get(status) ??
        (status >= 400 && status < 500 ? InvalidInput : StoreError);
    return new cls(message, code ? { code, status } : { status });
}
function envelope(body) {
    if (typeof body !== "object" || body === null)
        return undefined;
    const error = body.error;
    return typeof error === "object" && error !== null
        ? error
        : undefined;
}
