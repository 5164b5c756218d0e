/**
 * MemoroClient: the calls of memoro's Python client (memoro.client), in
 * camelCase, answered by a `memoro serve` over HTTP. Every call names the
 * user it acts for; the server takes the user from the token, never from an
 * argument, and refuses a token that is someone else's.
 */
import type { paths } from "./generated/openapi.js";
import { type ClientOptions } from "./http.js";
import type { AuditEntry, Conversation, DeleteResult, ImportStatus, Proposal, RecordedTurn, SearchHits, StoredBlock, SystemPrompt, ToolDefinition, ToolResult, Turn, UserDeletion, Writer, WriteResult } from "./results.js";
/** The formats `importFile` reads; "auto" tells them apart. */
export type ImportFormat = NonNullable<paths["/v1/imports"]["post"]["requestBody"]>["content"]["multipart/form-data"]["format"];
/** How conversation search ranks: both signals together (the default), or one. */
export type SearchMode = NonNullable<NonNullable<paths["/v1/search"]["get"]["parameters"]["query"]>["mode"]>;
export declare class MemoroClient {
    #private;
    constructor(options: ClientOptions);
    /** Where the server answers. */
    get baseUrl(): string;
    /** The user's block, or null when nothing is remembered. */
    readBlock(userId: string): Promise<StoredBlock | null>;
    /**
     * Replace the whole block. Over HTTP the writer is always "user" (the
     * model writes through `executeTool`). A stale `expectedEtag` throws
     * BlockChanged; a block the rules reject (too long, empty) is a result
     * whose outcome and warnings say why, and nothing changes.
     */
    writeBlock(userId: string, block: string, options: {
        writer: Writer;
        expectedEtag?: string;
    }): Promise<WriteResult>;
    /** Delete everything remembered about the user (the block's row; earlier audit lines blanked). */
    deleteBlock(userId: string, options: {
        writer: Writer;
        expectedEtag?: string;
    }): Promise<DeleteResult>;
    /**
     * Erase everything memoro holds for the user (DELETE /v1/me): the block and
     * its audit, every conversation, imports and uploads. It cannot be undone;
     * the user id can be used again at once.
     */
    deleteUser(userId: string): Promise<UserDeletion>;
    /** The user's audit log, newest first: at most `limit` entries (1 to 1,000; more is InvalidInput). */
    audit(userId: string, options?: {
        limit?: number;
    }): Promise<AuditEntry[]>;
    /**
     * Have the server's chat model review the user's block against the turns
     * since the last review: the new pending proposal (with `apply`, the block
     * saved as the model's review), or null when nothing should change. The
     * server's own deadline ends it; a failed review changes nothing
     * (ModelError, ModelTimeout; NoModel when the server has no chat model;
     * ReviewRunning while another review of the user runs).
     */
    review(userId: string, options?: {
        apply?: boolean;
    }): Promise<Proposal | null>;
    /** The pending proposal (`stale` when the block changed since), or null. */
    proposal(userId: string): Promise<Proposal | null>;
    /**
     * Save the pending proposal through the server's one save, as the
     * model's review, only if the block is still the one it was made from
     * (else BlockChanged, and nothing changes: ask for a fresh review). With
     * `expected` (the proposal's etag), only that proposal (else NoProposal).
     */
    acceptProposal(userId: string, options?: {
        expected?: string;
    }): Promise<WriteResult>;
    /** Drop the pending proposal; false when there was none. */
    dismissProposal(userId: string): Promise<boolean>;
    /**
     * This turn's system prompt, rebuilt from storage: memoro's base prompt,
     * then `instructions` (your agent's own, stable), then the block.
     */
    systemPrompt(userId: string, options?: {
        instructions?: string;
    }): Promise<SystemPrompt>;
    /**
     * Store a finished turn; the server indexes it in the background (search
     * finds it a moment later). `at` defaults to now; `key` makes the call
     * idempotent (sent again, the turn is stored once: the server answers 200
     * instead of 201 with the stored turn, and `created` is false);
     * `title` names the conversation (left out, its title stays as it is).
     */
    recordTurn(userId: string, conversationId: string, turn: {
        question: string;
        answer: string;
        at?: Date | string;
        key?: string;
        title?: string;
    }): Promise<RecordedTurn>;
    /**
     * The user's past turns that best match `query`, best first. With no user
     * nothing is sent and nothing comes back.
     */
    search(userId: string | null | undefined, query: string, options?: {
        limit?: number;
        mode?: SearchMode;
    }): Promise<SearchHits>;
    /** The user's conversations, latest first: `limit` of them (all by default) after skipping `offset`. */
    listConversations(userId: string, options?: {
        limit?: number;
        offset?: number;
    }): Promise<Conversation[]>;
    /** One conversation's turns, in order (none: an empty list). */
    conversationTurns(userId: string, conversationId: string): Promise<Turn[]>;
    /** Delete a conversation (gone from search at once); false when there was none. */
    deleteConversation(userId: string, conversationId: string): Promise<boolean>;
    /**
     * Run a tool call the model made, for this user. Bad arguments are not an
     * error: the result says what is wrong, for the model to read and correct.
     */
    executeTool(userId: string, name: string, args: Record<string, unknown> | string | null | undefined): Promise<ToolResult>;
    /** memoro's tools as the model sees them, as the server defines them (fetched once). */
    toolDefinitions(): Promise<ToolDefinition[]>;
    /**
     * Import an export (ChatGPT, Claude.ai, Open WebUI, LibreChat,
     * SillyTavern, memoro's own): the zip or the JSON, uploaded whole; a
     * worker on the server imports it. Follow it with `importStatus`.
     */
    importFile(userId: string, file: Blob | ArrayBuffer | Uint8Array | string, options?: {
        fileName?: string;
        format?: ImportFormat;
    }): Promise<ImportStatus>;
    /** How far an import is, and its report when done; NotFound for an id the user has not. */
    importStatus(userId: string, importId: string): Promise<ImportStatus>;
    /** The user's recent imports. */
    listImports(userId: string): Promise<ImportStatus[]>;
    /**
     * Everything the server holds about the user, as the JSON text of
     * memoro's export format (it imports back), piece by piece as it streams.
     */
    export(userId: string): AsyncGenerator<string, void, undefined>;
}
