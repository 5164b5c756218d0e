/**
 * The parts of the Vercel AI SDK's contracts that memoro's glue touches,
 * written out structurally so that this package imports nothing from `ai`
 * (and works with whichever version the host installed): the language model
 * middleware (specification v3 of `ai` 6, which `ai` 7 accepts beside its v4)
 * and a tool's input schema as a Standard JSON Schema (standardschema.dev),
 * which both versions read. test/ai-sdk.test.ts type-checks these against
 * the real `ai` 7 and `ai` 6.
 */

/** A message of the prompt a language model is called with. */
export interface PromptMessage {
  readonly role: string;
  readonly content: unknown;
  readonly providerOptions?: unknown;
}

/** The options of one language model call; memoro reads and extends `prompt`. */
export interface CallOptions {
  readonly prompt: ReadonlyArray<PromptMessage>;
}

/** A part of what a model generated (text, a tool call, …). */
export interface ContentPart {
  readonly type: string;
  readonly text?: unknown;
  readonly providerExecuted?: unknown;
}

/** A part of a model's stream (a text delta, a tool call, the finish, …). */
export interface StreamPart {
  readonly type: string;
  readonly delta?: unknown;
  readonly providerExecuted?: unknown;
}

export interface GenerateResult {
  readonly content: ReadonlyArray<ContentPart>;
}

export interface StreamResult {
  readonly stream: ReadableStream<StreamPart>;
}

/** The model a middleware wraps. */
export interface ModelInfo {
  readonly provider: string;
  readonly modelId: string;
}

/** A language model middleware for the AI SDK's `wrapLanguageModel`. */
export interface LanguageModelMiddleware {
  readonly specificationVersion: "v3";
  transformParams<P extends CallOptions>(options: {
    type: "generate" | "stream";
    params: P;
    model: ModelInfo;
  }): Promise<P>;
  wrapGenerate<R extends GenerateResult>(options: {
    doGenerate: () => PromiseLike<R>;
    params: CallOptions;
    model: ModelInfo;
  }): Promise<R>;
  wrapStream<R extends StreamResult>(options: {
    doStream: () => PromiseLike<R>;
    params: CallOptions;
    model: ModelInfo;
  }): Promise<R>;
}

/** A Standard Schema that also states its JSON Schema (Standard JSON Schema v1). */
export interface ToolInputSchema {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => { readonly value: Record<string, unknown> };
    readonly jsonSchema: {
      readonly input: (options: { readonly target: string }) => Record<string, unknown>;
      readonly output: (options: { readonly target: string }) => Record<string, unknown>;
    };
    readonly types?: {
      readonly input: Record<string, unknown>;
      readonly output: Record<string, unknown>;
    };
  };
}

/** A tool for `generateText` / `streamText`, as `tool()` of the AI SDK makes it. */
export interface Tool {
  readonly description: string;
  readonly inputSchema: ToolInputSchema;
  execute(input: Record<string, unknown>): Promise<string>;
}
