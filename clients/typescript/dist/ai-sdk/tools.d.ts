/**
 * memoroTools: memoro's tools as Vercel AI SDK tools, with the names,
 * descriptions and JSON Schemas the server defines (fetched from it, so a
 * tool the server adds is offered without a change here). Each call runs on
 * the server for the one user the host authenticated, and the model reads
 * memoro's own result text.
 */
import type { MemoroClient } from "../client.js";
import type { Tool } from "./spec.js";
export interface MemoroToolsOptions {
    client: MemoroClient;
    /** The user your app authenticated; the model can never choose another. */
    userId: string;
}
/** `{ memory_write, memory_delete_all, conversation_search, … }` for `generateText({ tools })`. */
export declare function memoroTools({ client, userId, }: MemoroToolsOptions): Promise<Record<string, Tool>>;
/** The glue acts for one user the host confirmed, never for none. */
export declare function confirmedUser(userId: unknown, what: string): asserts userId is string;
