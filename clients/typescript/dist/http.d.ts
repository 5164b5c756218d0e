/**
 * The wire under MemoroClient: one request for one user, with the user's
 * token and the user it means (`X-Memoro-User`, so the server refuses a
 * token that is someone else's before it acts), over the platform's fetch;
 * an error answer becomes memoro's error.
 */
/** A user token (one user), or a function from user id to token (many users). */
export type Token = string | ((userId: string) => string | Promise<string>);
export interface ClientOptions {
    /** Where `memoro serve` answers, e.g. `https://memoro.example` (a path prefix is kept). */
    baseUrl: string | URL;
    /** Leave it out for a server in auth mode local, which acts for its one user. */
    token?: Token;
    /** The claim that holds the user id in a string token (the server's MEMORO_USER_CLAIM). */
    userClaim?: string;
    /** How long one request may take, in milliseconds (default 30,000). */
    timeoutMs?: number;
    /** A fetch to use instead of the global one. */
    fetch?: typeof fetch;
}
export interface Request {
    method: "GET" | "POST" | "PUT" | "DELETE";
    path: string;
    /** The user the request acts for; undefined for the few that act for nobody. */
    userId?: string;
    query?: Record<string, string | number | undefined>;
    json?: unknown;
    form?: FormData;
    headers?: Record<string, string>;
    /** This request's own limit; null for none (the server's deadline ends it). */
    timeoutMs?: number | null;
}
export declare class Transport {
    #private;
    readonly baseUrl: string;
    constructor(options: ClientOptions);
    /** The answer to `request`; an error answer is thrown as memoro's error. */
    send(request: Request): Promise<Response>;
    /** The answer to `request`, error answers included; only an unreachable server throws. */
    fetch(request: Request): Promise<Response>;
}
/** The JSON of an answer, or undefined when it has none. */
export declare function body(response: Response): Promise<unknown>;
