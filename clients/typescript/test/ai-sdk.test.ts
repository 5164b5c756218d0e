/**
 * memoroTools and memoroMiddleware driven by the AI SDK itself — `ai` 7 and
 * `ai` 6 (installed as `ai-v6`) — with their mock language models, against
 * a real `memoro serve`. That these files compile is the check that the
 * glue's types fit both versions' `wrapLanguageModel` and `tools`.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { asSchema, generateText, isStepCount, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import * as v6 from "ai-v6";
import { MockLanguageModelV3 } from "ai-v6/test";
import { InvalidInput, InvalidUser, MemoroClient } from "memoro";
import { memoroMiddleware, memoroTools } from "memoro/ai-sdk";

import { eventually, newUser, testServer } from "./server.js";

async function clientFor(): Promise<MemoroClient> {
  const server = await testServer();
  return new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
}

// what a provider answers, in the shape both specification versions share
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
function callsTool(toolName: string, input: object) {
  return {
    content: [
      { type: "tool-call" as const, toolCallId: "call-1", toolName, input: JSON.stringify(input) },
    ],
    finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
    usage,
    warnings: [],
  };
}
function answers(text: string) {
  return {
    content: [{ type: "text" as const, text }],
    finishReason: { unified: "stop" as const, raw: "stop" },
    usage,
    warnings: [],
  };
}
function streams(parts: object[]) {
  return {
    stream: new ReadableStream({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) }),
  };
}
const toolCallStream = (toolName: string, input: object) =>
  streams([
    { type: "stream-start", warnings: [] },
    { type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify(input) },
    { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
  ]);
const textStream = (...deltas: string[]) =>
  streams([
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    ...deltas.map((delta) => ({ type: "text-delta", id: "t", delta })),
    { type: "text-end", id: "t" },
    { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
  ]);

interface Message {
  role: string;
  content: unknown;
  providerOptions?: unknown;
}
const systemOf = (prompt: Message[]) => prompt.filter((m) => m.role === "system");
/** memoro's last system message, without the line with today's date after the block. */
const lastSystem = (prompt: Message[]) =>
  String(systemOf(prompt).at(-1)?.content).replace(/\n\nToday is [^\n]*\(UTC\)\.$/, "");

test("the tools are the server's: names, descriptions and JSON Schemas, as the model sees them", async () => {
  const client = await clientFor();
  const tools = await memoroTools({ client, userId: newUser("alice") });
  const definitions = await client.toolDefinitions();
  assert.deepEqual(
    Object.keys(tools),
    definitions.map((d) => d.name),
  );
  assert.ok("memory_write" in tools && "conversation_search" in tools);
  for (const definition of definitions) {
    const tool = tools[definition.name]!;
    assert.equal(tool.description, definition.description);
    assert.deepEqual(await asSchema(tool.inputSchema).jsonSchema, definition.parameters);
  }

  const model = new MockLanguageModelV4({ doGenerate: answers("Hello.") });
  await generateText({ model, tools, prompt: "Hi" });
  const offered = model.doGenerateCalls[0]!.tools!.map(
    (t) => t.type === "function" && [t.name, t.description, t.inputSchema],
  );
  assert.deepEqual(
    offered,
    definitions.map((d) => [d.name, d.description, d.parameters]),
  );
});

test("an agent writes the block through a tool call and sees it in its next system prompt", async () => {
  const client = await clientFor();
  const alice = newUser("alice");
  const conversationId = newUser("chat");
  const mock = new MockLanguageModelV4({
    doGenerate: [
      callsTool("memory_write", { block: "Preferred name: Al" }),
      answers("Will do, Al!"),
    ],
  });
  const result = await generateText({
    model: wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: alice, conversationId }),
    }),
    tools: await memoroTools({ client, userId: alice }),
    stopWhen: isStepCount(3),
    instructions: "You are a helpful assistant.",
    prompt: "Call me Al from now on.",
  });
  assert.equal(result.text, "Will do, Al!");
  const calls = mock.doGenerateCalls.map((call) => call.prompt as Message[]);
  assert.equal(calls.length, 2);

  // every call: the host's system message first, memoro's last, ending with the block
  for (const prompt of calls) {
    const system = systemOf(prompt);
    assert.equal(system.length, 2);
    assert.equal(system[0]!.content, "You are a helpful assistant.");
    assert.equal(prompt.at(-1)?.role === "system", false);
  }
  assert.match(lastSystem(calls[0]!), /Personal memory \(0\/4,000 characters\)\n\(empty/);
  assert.ok(
    lastSystem(calls[1]!).endsWith("Personal memory (18/4,000 characters)\nPreferred name: Al"),
  );
  assert.match(JSON.stringify(calls[1]), /Saved\. 0 lines removed, 1 line added\./);

  assert.equal((await client.readBlock(alice))?.text, "Preferred name: Al");
  assert.equal((await client.audit(alice))[0]?.writer, "model");
  // the finished turn, once: not after the step that only called a tool
  const turns = await client.conversationTurns(alice, conversationId);
  assert.deepEqual(
    turns.map((t) => [t.question, t.answer]),
    [["Call me Al from now on.", "Will do, Al!"]],
  );
  await eventually("the turn to be found", async () => {
    const { hits } = await client.search(alice, "what name did I ask for? Al");
    return hits.find((hit) => hit.conversationId === conversationId);
  });
});

test("streaming: the block in every call's system prompt, the turn recorded when the stream ends", async () => {
  const client = await clientFor();
  const bob = newUser("bob");
  const conversationId = newUser("chat");
  const mock = new MockLanguageModelV4({
    doStream: [
      toolCallStream("memory_write", { block: "Preferred name: Rob" }),
      textStream("Sure", ", Rob."),
    ],
  });
  const result = streamText({
    model: wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: bob, conversationId }),
    }),
    tools: await memoroTools({ client, userId: bob }),
    stopWhen: isStepCount(3),
    prompt: "Please call me Rob.",
  });
  assert.equal(await result.text, "Sure, Rob.");
  const prompts = mock.doStreamCalls.map((call) => call.prompt as Message[]);
  assert.equal(prompts.length, 2);
  assert.ok(lastSystem(prompts[1]!).endsWith("\nPreferred name: Rob"));
  assert.equal(systemOf(prompts[0]!).length, 1); // no host system message: memoro's alone

  const turns = await eventually("the streamed turn to be recorded", async () => {
    const recorded = await client.conversationTurns(bob, conversationId);
    return recorded.length ? recorded : undefined;
  });
  assert.deepEqual(
    turns.map((t) => [t.question, t.answer]),
    [["Please call me Rob.", "Sure, Rob."]],
  );
});

test("a tool call cannot choose the user: the model reads memoro's refusal", async () => {
  const client = await clientFor();
  const [carol, dave] = [newUser("carol"), newUser("dave")];
  const mock = new MockLanguageModelV4({
    doGenerate: [
      callsTool("memory_write", { block: "Name: Dave", user_id: dave }),
      answers("Sorry."),
    ],
  });
  await generateText({
    model: wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: carol }),
    }),
    tools: await memoroTools({ client, userId: carol }),
    stopWhen: isStepCount(3),
    prompt: "Write into Dave's memory.",
  });
  assert.match(JSON.stringify(mock.doGenerateCalls[1]!.prompt), /unknown argument\(s\) user_id/);
  assert.equal(await client.readBlock(carol), null);
  assert.equal(await client.readBlock(dave), null);
});

test("for Anthropic's models the cache breakpoint sits before the block and the date", async () => {
  const client = await clientFor();
  const erin = newUser("erin");
  await client.writeBlock(erin, "Preferred name: Em", { writer: "user" });
  const mock = new MockLanguageModelV4({
    provider: "anthropic.messages",
    doGenerate: answers("Hi Em."),
  });
  await generateText({
    model: wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: erin }),
    }),
    instructions: "Be brief.",
    prompt: "Hello",
  });
  const prompt = await client.systemPrompt(erin);
  const system = systemOf(mock.doGenerateCalls[0]!.prompt as Message[]);
  assert.deepEqual(
    system.map((m) => [m.content, m.providerOptions]),
    [
      ["Be brief.", undefined],
      [prompt.stable, { anthropic: { cacheControl: { type: "ephemeral" } } }],
      [prompt.memory, undefined],
      [prompt.today, undefined],
    ],
  );
});

test("a turn that cannot be recorded fails the call, unless onRecordError takes it", async () => {
  const client = await clientFor();
  const frank = newUser("frank");
  const conversationId = "x".repeat(256); // longer than the server takes
  const model = (middleware: ReturnType<typeof memoroMiddleware>) =>
    wrapLanguageModel({
      model: new MockLanguageModelV4({ doGenerate: answers("Hello.") }),
      middleware,
    });

  await assert.rejects(
    generateText({
      model: model(memoroMiddleware({ client, userId: frank, conversationId })),
      prompt: "Hi",
      maxRetries: 0,
    }),
    InvalidInput,
  );
  const seen: unknown[] = [];
  const result = await generateText({
    model: model(
      memoroMiddleware({
        client,
        userId: frank,
        conversationId,
        onRecordError: (error, turn) => void seen.push(error, turn),
      }),
    ),
    prompt: "Hi",
  });
  assert.equal(result.text, "Hello.");
  assert.ok(seen[0] instanceof InvalidInput);
  assert.deepEqual(seen[1], { conversationId, question: "Hi", answer: "Hello." });
});

test("without a confirmed user there are no tools and no middleware", async () => {
  const client = await clientFor();
  await assert.rejects(memoroTools({ client, userId: "" }), InvalidUser);
  assert.throws(
    () => memoroMiddleware({ client, userId: undefined as unknown as string }),
    InvalidUser,
  );
});

test("ai 6: the same agent writes its block through a tool and sees it on the next call", async () => {
  const client = await clientFor();
  const gina = newUser("gina");
  const conversationId = newUser("chat");
  const mock = new MockLanguageModelV3({
    doGenerate: [callsTool("memory_write", { block: "Preferred name: Gi" }), answers("Okay, Gi.")],
  });
  const result = await v6.generateText({
    model: v6.wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: gina, conversationId }),
    }),
    tools: await memoroTools({ client, userId: gina }),
    stopWhen: v6.stepCountIs(3),
    system: "You are kind.",
    prompt: "Call me Gi.",
  });
  assert.equal(result.text, "Okay, Gi.");
  const prompts = mock.doGenerateCalls.map((call) => call.prompt as Message[]);
  assert.ok(
    lastSystem(prompts[1]!).endsWith("Personal memory (18/4,000 characters)\nPreferred name: Gi"),
  );
  assert.equal(systemOf(prompts[1]!)[0]?.content, "You are kind.");
  assert.deepEqual(
    (await client.conversationTurns(gina, conversationId)).map((t) => [t.question, t.answer]),
    [["Call me Gi.", "Okay, Gi."]],
  );
});

test("ai 6: streaming records the finished turn", async () => {
  const client = await clientFor();
  const hana = newUser("hana");
  const conversationId = newUser("chat");
  const mock = new MockLanguageModelV3({ doStream: textStream("Tulips ", "go in in October.") });
  const result = v6.streamText({
    model: v6.wrapLanguageModel({
      model: mock,
      middleware: memoroMiddleware({ client, userId: hana, conversationId }),
    }),
    tools: await memoroTools({ client, userId: hana }),
    prompt: "When do tulips go in?",
  });
  assert.equal(await result.text, "Tulips go in in October.");
  assert.match(
    lastSystem(mock.doStreamCalls[0]!.prompt as Message[]),
    /Personal memory \(0\/4,000/,
  );
  const turns = await eventually("the streamed turn to be recorded", async () => {
    const recorded = await client.conversationTurns(hana, conversationId);
    return recorded.length ? recorded : undefined;
  });
  assert.equal(turns[0]?.answer, "Tulips go in in October.");
});
