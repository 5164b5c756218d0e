/**
 * The wire under MemoroClient: one request for one user, with the user's
 * token and the user it means (`X-Memoro-User`, so the server refuses a
 * token that is someone else's before it acts), over the platform's fetch;
 * an error answer becomes memoro's error.
 */
import { errorFrom, InvalidInput, StoreError } from "./errors.js";
// lone surrogates cannot travel in a URL: dropped, as the server drops them from text
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
export class Transport {
    baseUrl;
    #token;
    #userClaim;
    #timeoutMs;
    #fetch;
    constructor(options) {
        this.baseUrl = String(options.baseUrl).replace(/\/+$/, "");
        this.#token = options.token;
        this.#userClaim = options.userClaim ?? "sub";
        this.#timeoutMs = options.timeoutMs ?? 30_000;
        this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    }
    /** The answer to `request`; an error answer is thrown as memoro's error. */
    async send(request) {
        const response = await this.fetch(request);
        if (!response.ok)
            throw errorFrom(response.status, await body(response));
        return response;
    }
    /** The answer to `request`, error answers included; only an unreachable server throws. */
    async fetch(request) {
        const headers = {
            ...(request.userId === undefined ? {} : await this.#userHeaders(request.userId)),
            ...request.headers,
        };
        let payload = request.form;
        if (request.json !== undefined) {
            // JSON.stringify writes a lone surrogate as \ud800; the server drops it as memoro does
            payload = JSON.stringify(request.json);
            headers["Content-Type"] = "application/json";
        }
        const url = this.baseUrl + request.path + query(request.query);
        try {
            return await this.#fetch(url, {
                method: request.method,
                headers,
                body: payload ?? null,
                signal: request.timeoutMs === null
                    ? null
                    : AbortSignal.timeout(request.timeoutMs ?? this.#timeoutMs),
            });
        }
        catch (cause) {
            const why = cause instanceof Error ? cause.message : String(cause);
            throw new StoreError(`the memoro server at ${this.baseUrl} could not be reached (${why})`, {
                cause,
            });
        }
    }
    async #userHeaders(userId) {
        const meant = { "X-Memoro-User": encodeURIComponent(userId) };
        const token = this.#token;
        if (token === undefined)
            return meant; // a server in auth mode local, on loopback
        if (typeof token === "function") {
            return { Authorization: `Bearer ${await token(userId)}`, ...meant };
        }
        const named = claim(token, this.#userClaim);
        if (named !== undefined && named !== userId) {
            throw new InvalidInput(`this client's token is for user ${JSON.stringify(named)}, not ${JSON.stringify(userId)}:` +
                " the server acts for the token's user only (pass a function from user id to token" +
                " to serve many)");
        }
        return { Authorization: `Bearer ${token}`, ...meant };
    }
}
/** The JSON of an answer, or undefined when it has none. */
export async function body(response) {
    try {
        return await response.json();
    }
    catch {
        return undefined;
    }
}
function query(params) {
    const entries = Object.entries(params ?? {}).flatMap(([name, value]) => value === undefined
        ? []
        : [[name, typeof value === "string" ? value.replace(LONE_SURROGATE, "") : String(value)]]);
    return entries.length ? `?${new URLSearchParams(entries)}` : "";
}
/** A claim of a JWT, read without checking it (the server checks it). */
function claim(token, name) {
    const payload = token.split(".")[1];
    if (token.split(".").length !== 3 || !payload)
        return undefined;
    try {
        const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
        const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
        const claims = JSON.parse(new TextDecoder().decode(bytes));
        return typeof claims === "object" && claims !== null
            ? claims[name]
            : undefined;
    }
    catch {
        return undefined; // not a JWT this client can read: the server will say
    }
}
