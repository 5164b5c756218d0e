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
export declare class MemoroError extends Error {
    static readonly code: string;
    /** The server's machine-readable code (the class's own for this client's refusals). */
    readonly code: string;
    /** The HTTP status the server answered with; undefined when nothing was answered. */
    readonly status: number | undefined;
    constructor(message: string, options?: {
        code?: string;
        status?: number;
        cause?: unknown;
    });
}
export declare class InvalidInput extends MemoroError {
    static readonly code: string;
}
export declare class InvalidUser extends InvalidInput {
    static readonly code: string;
}
export declare class UnknownTool extends InvalidInput {
    static readonly code: string;
}
export declare class TooLarge extends InvalidInput {
    static readonly code: string;
}
export declare class NotFound extends InvalidInput {
    static readonly code: string;
}
/** The user already has as many uploads arriving as the server takes at once (429). */
export declare class Busy extends MemoroError {
    static readonly code: string;
}
/**
 * The user was erased after this work began (an import, or a watcher's
 * turns sent with an epoch): the work is cancelled and stores nothing more
 * (409). Work started after the erase is not affected.
 */
export declare class UserErased extends MemoroError {
    static readonly code: string;
}
/** The block is no longer what the caller started from. */
export declare class BlockChanged extends MemoroError {
    static readonly code: string;
    /** The block as it is now (null when there is none), to show or build on. */
    readonly current: string | null;
    /** The ETag of the current block, to send when writing on top of it. */
    readonly etag: string | undefined;
    constructor(message: string, current: string | null, options?: {
        etag?: string;
        status?: number;
    });
}
export declare class Unauthorized extends MemoroError {
    static readonly code: string;
}
export declare class Forbidden extends Unauthorized {
    static readonly code: string;
}
export declare class KeysUnavailable extends MemoroError {
    static readonly code: string;
}
export declare class ConfigError extends MemoroError {
    static readonly code: string;
}
export declare class ModelError extends MemoroError {
    static readonly code: string;
}
/** The chat model did not finish a memory review within the server's deadline (504). */
export declare class ModelTimeout extends ModelError {
    static readonly code: string;
}
/** A memory review was asked of a server that has no chat model (501). */
export declare class NoModel extends ConfigError {
    static readonly code: string;
}
/** The user has no pending memory proposal, or a newer review replaced the one meant (404). */
export declare class NoProposal extends MemoroError {
    static readonly code: string;
}
/** A review of the user's memory is running already (409). */
export declare class ReviewRunning extends MemoroError {
    static readonly code: string;
}
/**
 * A chat turn of this conversation is still running: a conversation takes
 * one turn at a time, so the message was refused unsent; send it again once
 * the turn has ended (409).
 */
export declare class TurnRunning extends MemoroError {
    static readonly code: string;
}
export declare class StoreError extends MemoroError {
    static readonly code: string;
}
export declare class DiskFull extends StoreError {
    static readonly code: string;
}
export declare class MigrationError extends StoreError {
    static readonly code: string;
}
/**
 * The error for an error answer: by the envelope's code, else by the
 * status; any other 4xx is InvalidInput and anything else a StoreError.
 */
export declare function errorFrom(status: number, body: unknown): MemoroError;
