/**
 * The typed results of MemoroClient's calls, with the names of memoro's
 * Python results in camelCase and times as Dates, and how each is read from
 * the server's answer (typed by src/generated/openapi.ts, so a change of the
 * API breaks the build here rather than a caller at run time).
 */
import type { components } from "./generated/openapi.js";
type Wire = components["schemas"];
/** Who wrote to the block. */
export type Writer = "model" | "user";
/** A user's block as the server holds it (already normalized). */
export interface StoredBlock {
    userId: string;
    /** The raw block, exactly as the system prompt carries it. */
    text: string;
    count: number;
    limit: number;
    /** Send it back as `expectedEtag` to write only if nobody wrote since. */
    etag: string;
    updatedAt: Date;
    updatedBy: Writer;
}
/**
 * What a write did. A rejected write (`tooLong`, `empty`) changes nothing:
 * `block` is still the stored one and `warnings` say why and what to do.
 */
export interface WriteResult {
    outcome: "saved" | "unchanged" | "too_long" | "empty";
    saved: boolean;
    rejected: boolean;
    /** The block stored after the call (null when there is none). */
    block: string | null;
    /** The count of the stored block. */
    count: number;
    /** The count of the text that was sent. */
    attemptedCount: number;
    limit: number;
    overBy: number;
    /** The lines this write removed, in order. */
    removed: string[];
    /** The lines this write added, in order. */
    added: string[];
    warnings: string[];
    etag: string;
}
export interface DeleteResult {
    deleted: boolean;
    removedCount: number;
}
/** What erasing a user removed: nothing of theirs is left anywhere. */
export interface UserDeletion {
    block: boolean;
    auditEntries: number;
    conversations: number;
    turns: number;
    imports: number;
}
/** One recorded write or delete (line content is cut, and blanked by a delete). */
export interface AuditEntry {
    id: number;
    userId: string;
    at: Date;
    writer: Writer;
    operation: "write" | "delete";
    /** "review": the block a memory review proposed (the writer is then the model). */
    source: "review" | null;
    removedLines: string[];
    addedLines: string[];
    removedCount: number;
    addedCount: number;
}
/**
 * A memory review's proposed block: the user's one pending proposal, made
 * from the block whose ETag is `basedOn`, with the lines it would remove
 * and add there. `stale` when the block has changed since (accepting is
 * then refused); `applied` when the review saved it at once.
 */
export interface Proposal {
    userId: string;
    block: string;
    count: number;
    limit: number;
    /** Send it back as `expected` to accept this proposal and no newer one. */
    etag: string;
    basedOn: string;
    removed: string[];
    added: string[];
    createdAt: Date;
    /** The past turns the review read. */
    turnsRead: number;
    /** Newer-than-reviewed turns it did not read: the older ones, past the server's bound. */
    turnsUnread: number;
    stale: boolean;
    applied: boolean;
}
/** One turn's system prompt: the stable part first, the personal block last. */
export interface SystemPrompt {
    /** The whole system prompt as one string. */
    text: string;
    /** The part that does not change between turns (memoro's base prompt, your instructions). */
    stable: string;
    /** The personal block with its header. */
    memory: string;
    /** The last line, after the block: today's date in UTC (`Today is Friday, 2025-01-31 (UTC).`). */
    today: string;
    /** The system message for OpenAI-compatible chat APIs. */
    openai: Wire["SystemMessageOut"][];
    /** `system` blocks for the Anthropic Messages API, the cache breakpoint before the block. */
    anthropic: Wire["SystemBlockOut"][];
}
/** Where a finished turn was stored; `created` is false when its key was already stored. */
export interface RecordedTurn {
    /** memoro's id of the turn, unique across all turns: a handle, not its place. */
    turnId: number;
    conversationId: string;
    /** The turn's place in its conversation: 1 for the first. */
    seq: number;
    created: boolean;
}
/** One past turn found by search, with its best-matching chunk. */
export interface SearchHit {
    /** memoro's id of the turn, unique across all turns: a handle, not its place. */
    turnId: number;
    /** The turn's place in its conversation: 1 for the first. */
    seq: number;
    conversationId: string;
    at: Date;
    text: string;
    score: number;
}
/** Search results, best first; `warnings` say when only keyword search could run. */
export interface SearchHits {
    hits: SearchHit[];
    warnings: string[];
}
/** A conversation as listed, latest first. */
export interface Conversation {
    id: string;
    turns: number;
    firstAt: Date;
    lastAt: Date;
    /** Its title: the one it had where it was imported from, or the last one a recorded turn gave it. */
    title: string | null;
    /** The first line of its first question (or answer). */
    preview: string | null;
}
/** One finished turn: the user's question and the assistant's answer. */
export interface Turn {
    id: number;
    userId: string;
    conversationId: string;
    seq: number;
    question: string;
    answer: string;
    at: Date;
    /** Whether search can find it yet (indexing runs in the background). */
    indexed: boolean;
}
/** What a tool call returns to the model. */
export interface ToolResult {
    text: string;
    isError: boolean;
}
/** A tool as the model sees it: memoro's own name, description and JSON Schema. */
export interface ToolDefinition {
    name: string;
    description: string;
    parameters: Record<string, unknown>;
}
/** What an import did, when it is done. */
export interface ImportReport {
    format: string;
    conversations: number;
    turns: number;
    imported: number;
    alreadyThere: number;
    skipped: Record<string, number>;
    unknownTypes: Record<string, number>;
    failed: number;
    problems: string[];
    /** "restored", or why the export's block was not, or "" (none in it). */
    block: string;
}
/** An uploaded import: how far it is, and its report when done. */
export interface ImportStatus {
    id: string;
    fileName: string;
    format: string;
    size: number;
    status: "uploading" | "queued" | "running" | "done" | "failed";
    readBytes: number;
    report: ImportReport | null;
    error: string | null;
    createdAt: Date;
    finishedAt: Date | null;
}
export declare function storedBlock(userId: string, data: Wire["BlockOut"]): StoredBlock | null;
export declare function writeResult(data: Wire["WriteOut"]): WriteResult;
export declare function deleteResult(data: Wire["DeleteOut"]): DeleteResult;
export declare function userDeletion(data: Wire["UserDeletionOut"]): UserDeletion;
export declare function auditEntry(userId: string, data: Wire["AuditOut"]): AuditEntry;
export declare function proposal(userId: string, data: Wire["ProposalOut"]): Proposal;
export declare function systemPrompt(data: Wire["PromptOut"]): SystemPrompt;
export declare function recordedTurn(data: Wire["TurnOut"]): RecordedTurn;
export declare function searchHits(data: Wire["SearchOut"]): SearchHits;
export declare function conversation(data: Wire["ConversationOut"]): Conversation;
export declare function turn(userId: string, data: Wire["TurnRecord"]): Turn;
export declare function toolResult(data: Wire["ToolCallOut"]): ToolResult;
export declare function toolDefinition(data: Wire["OpenAIToolOut"]): ToolDefinition;
export declare function importStatus(data: Wire["ImportOut"]): ImportStatus;
export {};
