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

// -- reading the server's answers ------------------------------------------------

export function storedBlock(userId: string, data: Wire["BlockOut"]): StoredBlock | null {
  if (data.updated_at === null || data.updated_by === null) return null;
  return {
    userId,
    text: data.block,
    count: data.count,
    limit: data.limit,
    etag: data.etag,
    updatedAt: new Date(data.updated_at),
    updatedBy: data.updated_by,
  };
}

export function writeResult(data: Wire["WriteOut"]): WriteResult {
  return {
    outcome: data.outcome,
    saved: data.saved,
    rejected: data.outcome === "too_long" || data.outcome === "empty",
    block: data.block || null,
    count: data.count,
    attemptedCount: data.attempted_count,
    limit: data.limit,
    overBy: data.over_by,
    removed: data.removed,
    added: data.added,
    warnings: data.warnings,
    etag: data.etag,
  };
}

export function deleteResult(data: Wire["DeleteOut"]): DeleteResult {
  return { deleted: data.deleted, removedCount: data.removed_count };
}

export function userDeletion(data: Wire["UserDeletionOut"]): UserDeletion {
  return {
    block: data.block,
    auditEntries: data.audit_entries,
    conversations: data.conversations,
    turns: data.turns,
    imports: data.imports,
  };
}

export function auditEntry(userId: string, data: Wire["AuditOut"]): AuditEntry {
  return {
    id: data.id,
    userId,
    at: new Date(data.at),
    writer: data.writer,
    operation: data.operation,
    source: data.source ?? null,
    removedLines: data.removed_lines,
    addedLines: data.added_lines,
    removedCount: data.removed_count,
    addedCount: data.added_count,
  };
}

export function proposal(userId: string, data: Wire["ProposalOut"]): Proposal {
  return {
    userId,
    block: data.block,
    count: data.count,
    limit: data.limit,
    etag: data.etag,
    basedOn: data.based_on,
    removed: data.removed,
    added: data.added,
    createdAt: new Date(data.created_at),
    turnsRead: data.turns_read,
    turnsUnread: data.turns_unread,
    stale: data.stale,
    applied: data.applied,
  };
}

export function systemPrompt(data: Wire["PromptOut"]): SystemPrompt {
  const { text, stable, memory, today, openai, anthropic } = data;
  return { text, stable, memory, today, openai, anthropic };
}

export function recordedTurn(data: Wire["TurnOut"]): RecordedTurn {
  return {
    turnId: data.turn_id,
    conversationId: data.conversation,
    seq: data.seq,
    created: data.created,
  };
}

export function searchHits(data: Wire["SearchOut"]): SearchHits {
  return {
    hits: data.hits.map((hit) => ({
      turnId: hit.turn_id,
      seq: hit.seq,
      conversationId: hit.conversation,
      at: new Date(hit.at),
      text: hit.text,
      score: hit.score,
    })),
    warnings: data.warnings,
  };
}

export function conversation(data: Wire["ConversationOut"]): Conversation {
  return {
    id: data.id,
    turns: data.turns,
    firstAt: new Date(data.first_at),
    lastAt: new Date(data.last_at),
    title: data.title,
    preview: data.preview,
  };
}

export function turn(userId: string, data: Wire["TurnRecord"]): Turn {
  return {
    id: data.id,
    userId,
    conversationId: data.conversation,
    seq: data.seq,
    question: data.question,
    answer: data.answer,
    at: new Date(data.at),
    indexed: data.indexed,
  };
}

export function toolResult(data: Wire["ToolCallOut"]): ToolResult {
  return { text: data.text, isError: data.is_error };
}

export function toolDefinition(data: Wire["OpenAIToolOut"]): ToolDefinition {
  const { name, description, parameters } = data.function;
  return { name, description, parameters };
}

export function importStatus(data: Wire["ImportOut"]): ImportStatus {
  const report = data.report;
  return {
    id: data.id,
    fileName: data.file_name,
    format: data.format,
    size: data.size,
    status: data.status,
    readBytes: data.read_bytes,
    report: report && {
      format: report.format,
      conversations: report.conversations,
      turns: report.turns,
      imported: report.imported,
      alreadyThere: report.already_there,
      skipped: report.skipped,
      unknownTypes: report.unknown_types,
      failed: report.failed,
      problems: report.problems,
      block: report.block,
    },
    error: data.error,
    createdAt: new Date(data.created_at),
    finishedAt: data.finished_at === null ? null : new Date(data.finished_at),
  };
}
