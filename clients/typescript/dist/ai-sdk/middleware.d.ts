/**
 * memoroMiddleware for the Vercel AI SDK's `wrapLanguageModel`: on every
 * model call the system prompt ends with memoro's, rebuilt from storage (so
 * a write made by a tool in the previous step is seen in the next), and
 * when the model gives its final answer — a response with no tool call to
 * run — the turn is recorded for search.
 */
import type { MemoroClient } from "../client.js";
import type { MemoroError } from "../errors.js";
import type { LanguageModelMiddleware } from "./spec.js";
/** A finished turn, as it is recorded. */
export interface FinishedTurn {
    conversationId: string;
    question: string;
    answer: string;
}
export interface MemoroMiddlewareOptions {
    client: MemoroClient;
    /** The user your app authenticated; every call reads and records this user's memory. */
    userId: string;
    /** Your conversation (chat) id, under which turns are recorded; a new random id by default. */
    conversationId?: string;
    /**
     * Called when recording a finished turn fails. Without it the failure is
     * thrown by the model call (a stream ends with it), so it is never lost
     * unseen; with it the answer goes through and you decide (log, retry).
     */
    onRecordError?: (error: MemoroError, turn: FinishedTurn) => void | Promise<void>;
}
export declare function memoroMiddleware(options: MemoroMiddlewareOptions): LanguageModelMiddleware;
