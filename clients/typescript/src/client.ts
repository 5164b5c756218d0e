/**
 * MemoroClient: the calls of memoro's Python client (memoro.client), in
 * camelCase, answered by a `memoro serve` over HTTP. Every call names the
 * user it acts for; the server takes the user from the token, never from an
 * argument, and refuses a token that is someone else's.
 */

import { errorFrom, InvalidInput } from "./errors.js";
import type { paths } from "./generated/openapi.js";
import { body, type ClientOptions, Transport } from "./http.js";
import * as read from "./results.js";
import type {
  AuditEntry,
  Conversation,
  DeleteResult,
  ImportStatus,
  Proposal,
  RecordedTurn,
  SearchHits,
  StoredBlock,
  SystemPrompt,
  ToolDefinition,
  ToolResult,
  Turn,
  UserDeletion,
  Writer,
  WriteResult,
} from "./results.js";

/** The JSON answer of an operation, as the document states it (a type error where there is none). */
type Json<
  P extends keyof paths,
  M extends keyof paths[P],
  S extends number = 200,
> = paths[P][M] extends {
  responses: { [K in S]: { content: { "application/json": infer T } } };
}
  ? T
  : { "no JSON answer with this status": [P, M, S] };

/** The formats `importFile` reads; "auto" tells them apart. */
export type ImportFormat = NonNullable<
  paths["/v1/imports"]["post"]["requestBody"]
>["content"]["multipart/form-data"]["format"];

/** How conversation search ranks: both signals together (the default), or one. */
export type SearchMode = NonNullable<
  NonNullable<paths["/v1/search"]["get"]["parameters"]["query"]>["mode"]
>;

export class MemoroClient {
  readonly #http: Transport;
  #tools: Promise<ToolDefinition[]> | undefined;

  constructor(options: ClientOptions) {
    this.#http = new Transport(options);
  }

  /** Where the server answers. */
  get baseUrl(): string {
    return this.#http.baseUrl;
  }

  async #json<T>(request: Parameters<Transport["send"]>[0]): Promise<T> {
    return (await (await this.#http.send(request)).json()) as T;
  }

  /** The user's block, or null when nothing is remembered. */
  async readBlock(userId: string): Promise<StoredBlock | null> {
    const data = await this.#json<Json<"/v1/memory", "get">>({
      method: "GET",
      path: "/v1/memory",
      userId,
    });
    return read.storedBlock(userId, data);
  }

  /**
   * Replace the whole block. Over HTTP the writer is always "user" (the
   * model writes through `executeTool`). A stale `expectedEtag` throws
   * BlockChanged; a block the rules reject (too long, empty) is a result
   * whose outcome and warnings say why, and nothing changes.
   */
  async writeBlock(
    userId: string,
    block: string,
    options: { writer: Writer; expectedEtag?: string },
  ): Promise<WriteResult> {
    userWriter(options.writer, "; the model writes through executeTool");
    const response = await this.#http.fetch({
      method: "PUT",
      path: "/v1/memory",
      userId,
      json: { block },
      headers: ifMatch(options.expectedEtag),
    });
    const data = await body(response);
    // a rejected write (too long, empty) is a 422 that carries its result
    const rejected =
      response.status === 422 && typeof data === "object" && data !== null && "outcome" in data;
    if (!response.ok && !rejected) throw errorFrom(response.status, data);
    return read.writeResult(data as Json<"/v1/memory", "put">);
  }

  /** Delete everything remembered about the user (the block's row; earlier audit lines blanked). */
  async deleteBlock(
    userId: string,
    options: { writer: Writer; expectedEtag?: string },
  ): Promise<DeleteResult> {
    userWriter(options.writer);
    const data = await this.#json<Json<"/v1/memory", "delete">>({
      method: "DELETE",
      path: "/v1/memory",
      userId,
      headers: ifMatch(options.expectedEtag),
    });
    return read.deleteResult(data);
  }

  /**
   * Erase everything memoro holds for the user (DELETE /v1/me): the block and
   * its audit, every conversation, imports and uploads. It cannot be undone;
   * the user id can be used again at once.
   */
  async deleteUser(userId: string): Promise<UserDeletion> {
    const data = await this.#json<Json<"/v1/me", "delete">>({
      method: "DELETE",
      path: "/v1/me",
      userId,
    });
    return read.userDeletion(data);
  }

  /** The user's audit log, newest first: at most `limit` entries (1 to 1,000; more is InvalidInput). */
  async audit(userId: string, options: { limit?: number } = {}): Promise<AuditEntry[]> {
    const limit = options.limit ?? 100;
    const data = await this.#json<Json<"/v1/memory/audit", "get">>({
      method: "GET",
      path: "/v1/memory/audit",
      userId,
      query: { limit },
    });
    return data.map((entry) => read.auditEntry(userId, entry));
  }

  /**
   * Have the server's chat model review the user's block against the turns
   * since the last review: the new pending proposal (with `apply`, the block
   * saved as the model's review), or null when nothing should change. The
   * server's own deadline ends it; a failed review changes nothing
   * (ModelError, ModelTimeout; NoModel when the server has no chat model;
   * ReviewRunning while another review of the user runs).
   */
  async review(userId: string, options: { apply?: boolean } = {}): Promise<Proposal | null> {
    const data = await this.#json<Json<"/v1/memory/review", "post">>({
      method: "POST",
      path: "/v1/memory/review",
      userId,
      json: { apply: options.apply ?? false },
      timeoutMs: null,
    });
    return data.proposal ? read.proposal(userId, data.proposal) : null;
  }

  /** The pending proposal (`stale` when the block changed since), or null. */
  async proposal(userId: string): Promise<Proposal | null> {
    const data = await this.#json<Json<"/v1/memory/proposal", "get">>({
      method: "GET",
      path: "/v1/memory/proposal",
      userId,
    });
    return data.proposal ? read.proposal(userId, data.proposal) : null;
  }

  /**
   * Save the pending proposal through the server's one save, as the
   * model's review, only if the block is still the one it was made from
   * (else BlockChanged, and nothing changes: ask for a fresh review). With
   * `expected` (the proposal's etag), only that proposal (else NoProposal).
   */
  async acceptProposal(userId: string, options: { expected?: string } = {}): Promise<WriteResult> {
    const data = await this.#json<Json<"/v1/memory/proposal/accept", "post">>({
      method: "POST",
      path: "/v1/memory/proposal/accept",
      userId,
      headers: ifMatch(options.expected),
    });
    return read.writeResult(data);
  }

  /** Drop the pending proposal; false when there was none. */
  async dismissProposal(userId: string): Promise<boolean> {
    const response = await this.#http.fetch({
      method: "DELETE",
      path: "/v1/memory/proposal",
      userId,
    });
    const data = response.status === 204 ? null : await body(response);
    if (response.status === 404 && code(data) === "no_proposal") return false;
    if (!response.ok) throw errorFrom(response.status, data);
    return true;
  }

  /**
   * This turn's system prompt, rebuilt from storage: memoro's base prompt,
   * then `instructions` (your agent's own, stable), then the block.
   */
  async systemPrompt(
    userId: string,
    options: { instructions?: string } = {},
  ): Promise<SystemPrompt> {
    const data = await this.#json<Json<"/v1/prompt", "get">>({
      method: "GET",
      path: "/v1/prompt",
      userId,
      query: { instructions: options.instructions || undefined },
    });
    return read.systemPrompt(data);
  }

  /**
   * Store a finished turn; the server indexes it in the background (search
   * finds it a moment later). `at` defaults to now; `key` makes the call
   * idempotent (sent again, the turn is stored once: the server answers 200
   * instead of 201 with the stored turn, and `created` is false);
   * `title` names the conversation (left out, its title stays as it is).
   */
  async recordTurn(
    userId: string,
    conversationId: string,
    turn: { question: string; answer: string; at?: Date | string; key?: string; title?: string },
  ): Promise<RecordedTurn> {
    const at = turn.at instanceof Date ? turn.at.toISOString() : turn.at;
    const data = await this.#json<Json<"/v1/turns", "post", 200 | 201>>({
      method: "POST",
      path: "/v1/turns",
      userId,
      json: {
        conversation: conversationId,
        question: turn.question,
        answer: turn.answer,
        at,
        key: turn.key,
        title: turn.title,
      },
    });
    return read.recordedTurn(data);
  }

  /**
   * The user's past turns that best match `query`, best first. With no user
   * nothing is sent and nothing comes back.
   */
  async search(
    userId: string | null | undefined,
    query: string,
    options: { limit?: number; mode?: SearchMode } = {},
  ): Promise<SearchHits> {
    if (!userId) return { hits: [], warnings: [] };
    const data = await this.#json<Json<"/v1/search", "get">>({
      method: "GET",
      path: "/v1/search",
      userId,
      query: { q: query, limit: options.limit ?? 5, mode: options.mode ?? "hybrid" },
    });
    return read.searchHits(data);
  }

  /** The user's conversations, latest first: `limit` of them (all by default) after skipping `offset`. */
  async listConversations(
    userId: string,
    options: { limit?: number; offset?: number } = {},
  ): Promise<Conversation[]> {
    const data = await this.#json<Json<"/v1/conversations", "get">>({
      method: "GET",
      path: "/v1/conversations",
      userId,
      query: { limit: options.limit, offset: options.offset ?? 0 },
    });
    return data.map(read.conversation);
  }

  /** One conversation's turns, in order (none: an empty list). */
  async conversationTurns(userId: string, conversationId: string): Promise<Turn[]> {
    const response = await this.#http.fetch({
      method: "GET",
      path: conversationPath(conversationId),
      userId,
    });
    if (response.status === 404) return [];
    await raiseFor(response);
    const data = (await response.json()) as Json<"/v1/conversations/{conversation_id}", "get">;
    return data.map((turn) => read.turn(userId, turn));
  }

  /** Delete a conversation (gone from search at once); false when there was none. */
  async deleteConversation(userId: string, conversationId: string): Promise<boolean> {
    const response = await this.#http.fetch({
      method: "DELETE",
      path: conversationPath(conversationId),
      userId,
    });
    if (response.status === 404) return false;
    await raiseFor(response);
    return true;
  }

  /**
   * Run a tool call the model made, for this user. Bad arguments are not an
   * error: the result says what is wrong, for the model to read and correct.
   */
  async executeTool(
    userId: string,
    name: string,
    args: Record<string, unknown> | string | null | undefined,
  ): Promise<ToolResult> {
    const data = await this.#json<Json<"/v1/tools/{name}", "post">>({
      method: "POST",
      path: `/v1/tools/${encodeURIComponent(name)}`,
      userId,
      json: { arguments: args ?? null },
    });
    return read.toolResult(data);
  }

  /** memoro's tools as the model sees them, as the server defines them (fetched once). */
  toolDefinitions(): Promise<ToolDefinition[]> {
    this.#tools ??= this.#json<Json<"/v1/tools", "get">>({
      method: "GET",
      path: "/v1/tools",
      query: { format: "openai" },
    }).then(
      (data) => (data as Extract<typeof data, { type: "function" }[]>).map(read.toolDefinition),
      (error: unknown) => {
        this.#tools = undefined; // not remembered: the next call asks again
        throw error;
      },
    );
    return this.#tools;
  }

  /**
   * Import an export (ChatGPT, Claude.ai, Open WebUI, LibreChat,
   * SillyTavern, memoro's own): the zip or the JSON, uploaded whole; a
   * worker on the server imports it. Follow it with `importStatus`.
   */
  async importFile(
    userId: string,
    file: Blob | ArrayBuffer | Uint8Array | string,
    options: { fileName?: string; format?: ImportFormat } = {},
  ): Promise<ImportStatus> {
    const form = new FormData();
    const blob = file instanceof Blob ? file : new Blob([file as BlobPart]);
    const named = (file as { name?: unknown }).name;
    form.append(
      "file",
      blob,
      options.fileName ?? (typeof named === "string" ? named : "export.json"),
    );
    if (options.format !== undefined) form.append("format", options.format);
    const data = await this.#json<Json<"/v1/imports", "post", 202>>({
      method: "POST",
      path: "/v1/imports",
      userId,
      form,
    });
    return read.importStatus(data);
  }

  /** How far an import is, and its report when done; NotFound for an id the user has not. */
  async importStatus(userId: string, importId: string): Promise<ImportStatus> {
    const data = await this.#json<Json<"/v1/imports/{import_id}", "get">>({
      method: "GET",
      path: `/v1/imports/${encodeURIComponent(importId)}`,
      userId,
    });
    return read.importStatus(data);
  }

  /** The user's recent imports. */
  async listImports(userId: string): Promise<ImportStatus[]> {
    const data = await this.#json<Json<"/v1/imports", "get">>({
      method: "GET",
      path: "/v1/imports",
      userId,
    });
    return data.map(read.importStatus);
  }

  /**
   * Everything the server holds about the user, as the JSON text of
   * memoro's export format (it imports back), piece by piece as it streams.
   */
  async *export(userId: string): AsyncGenerator<string, void, undefined> {
    const response = await this.#http.send({ method: "GET", path: "/v1/export", userId });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let finished = false;
    try {
      for (;;) {
        const next = await reader.read();
        if (next.done) {
          finished = true;
          return;
        }
        yield next.value;
      }
    } finally {
      if (!finished) await reader.cancel(); // the caller stopped early: close the answer
    }
  }
}

async function raiseFor(response: Response): Promise<void> {
  if (!response.ok) throw errorFrom(response.status, await body(response));
}

function code(data: unknown): string | undefined {
  const error = (data as { error?: { code?: unknown } } | null)?.error;
  return typeof error?.code === "string" ? error.code : undefined;
}

function userWriter(writer: Writer, hint = ""): void {
  if (writer !== "user") {
    throw new InvalidInput(`over HTTP the writer is always 'user'${hint}`);
  }
}

function ifMatch(etag: string | undefined): Record<string, string> {
  return etag === undefined ? {} : { "If-Match": `"${etag}"` };
}

function conversationPath(conversationId: string): string {
  if (conversationId === "") throw new InvalidInput("a conversation id cannot be empty");
  // dots escaped too: an id such as "a/.." must reach the server, not be resolved away
  return `/v1/conversations/${encodeURIComponent(conversationId).replace(/\./g, "%2E")}`;
}
