/**
 * memoroMiddleware for the Vercel AI SDK's `wrapLanguageModel`: on every
 * model call the system prompt ends with memoro's, rebuilt from storage (so
 * a write made by a tool in the previous step is seen in the next), and
 * when the model gives its final answer — a response with no tool call to
 * run — the turn is recorded for search.
 */

import type { MemoroClient } from "../client.js";
import type { MemoroError } from "../errors.js";
import type { SystemPrompt } from "../results.js";
import type {
  CallOptions,
  ContentPart,
  LanguageModelMiddleware,
  ModelInfo,
  PromptMessage,
  StreamPart,
} from "./spec.js";
import { confirmedUser } from "./tools.js";

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

export function memoroMiddleware(options: MemoroMiddlewareOptions): LanguageModelMiddleware {
  const { client, userId, onRecordError } = options;
  confirmedUser(userId, "memoroMiddleware");
  const conversationId = options.conversationId ?? crypto.randomUUID();

  async function record(params: CallOptions, answer: string): Promise<void> {
    const turn = { conversationId, question: question(params.prompt), answer };
    if (!turn.question.trim() && !turn.answer.trim()) return;
    try {
      await client.recordTurn(userId, conversationId, turn);
    } catch (error) {
      if (onRecordError === undefined) throw error;
      await onRecordError(error as MemoroError, turn);
    }
  }

  return {
    specificationVersion: "v3",

    async transformParams({ params, model }) {
      const system = await client.systemPrompt(userId);
      const prompt = params.prompt;
      const first = prompt.findIndex((message) => message.role !== "system");
      const end = first === -1 ? prompt.length : first;
      // after the host's own system messages: stable parts first, the block last
      const extended = [
        ...prompt.slice(0, end),
        ...systemMessages(system, model),
        ...prompt.slice(end),
      ];
      return { ...params, prompt: extended };
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      if (!result.content.some(callsATool)) {
        await record(params, result.content.map(text).join(""));
      }
      return result;
    },

    async wrapStream({ doStream, params }) {
      const result = await doStream();
      let answer = "";
      let unfinished = false;
      const recorder = new TransformStream<StreamPart, StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta" && typeof part.delta === "string") answer += part.delta;
          if (callsATool(part) || part.type === "error") unfinished = true;
          controller.enqueue(part);
        },
        async flush() {
          if (!unfinished) await record(params, answer);
        },
      });
      return { ...result, stream: result.stream.pipeThrough(recorder) };
    },
  };
}

/**
 * memoro's system prompt as messages: one, or for Anthropic's models the
 * stable part with the cache breakpoint, then the block and today's date.
 */
function systemMessages(system: SystemPrompt, model: ModelInfo): PromptMessage[] {
  if (!model.provider.includes("anthropic")) return [{ role: "system", content: system.text }];
  return [
    {
      role: "system",
      content: system.stable,
      providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } },
    },
    { role: "system", content: system.memory },
    ...(system.today ? [{ role: "system" as const, content: system.today }] : []),
  ];
}

/** A tool call the host's loop will run: the model has not answered yet. */
function callsATool(part: ContentPart | StreamPart): boolean {
  return part.type === "tool-call" && part.providerExecuted !== true;
}

function text(part: ContentPart): string {
  return part.type === "text" && typeof part.text === "string" ? part.text : "";
}

/** The text of the user's last message: the question of this turn. */
function question(prompt: ReadonlyArray<PromptMessage>): string {
  const last = prompt.findLast((message) => message.role === "user");
  if (last === undefined) return "";
  if (typeof last.content === "string") return last.content;
  if (!Array.isArray(last.content)) return "";
  return last.content
    .map((part: { type?: unknown; text?: unknown }) =>
      part.type === "text" && typeof part.text === "string" ? part.text : "",
    )
    .filter(Boolean)
    .join("\n");
}
