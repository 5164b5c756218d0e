/**
 * docs/typescript.md's complete AI SDK agent, run as written: the real
 * Anthropic provider of the AI SDK talking to memoro's scripted model,
 * against a real `memoro serve`.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { MemoroClient } from "memoro";

import { scriptedLLM } from "./scripted-llm.js";
import { PACKAGE_DIR, testServer } from "./server.js";

const run = promisify(execFile);
const GUIDE = join(PACKAGE_DIR, "..", "..", "docs", "typescript.md");

async function example(heading: string): Promise<string> {
  const section = (await readFile(GUIDE, "utf8")).split(heading)[1]?.split("\n## ")[0] ?? "";
  const code = /```ts\n(.*?)```/s.exec(section)?.[1];
  assert.ok(code, `no TypeScript example after ${heading}`);
  return code;
}

interface SystemBlock {
  text: string;
  cache_control?: unknown;
}

test("the guide's AI SDK agent saves the name and the next conversation starts with it", async () => {
  const server = await testServer();
  const folder = join(PACKAGE_DIR, "build", "docs");
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, "agent.ts"), await example("## A complete AI SDK agent"));
  const tsc = join(PACKAGE_DIR, "node_modules", "typescript", "bin", "tsc");
  const options = [
    "--module",
    "nodenext",
    "--target",
    "es2022",
    "--lib",
    "es2023",
    "--types",
    "node",
  ];
  await run(process.execPath, [
    tsc,
    ...options,
    "--strict",
    "--skipLibCheck",
    join(folder, "agent.ts"),
  ]).catch((error: { stdout: string }) =>
    assert.fail(`the guide's example does not compile:\n${error.stdout}`),
  );

  const llm = await scriptedLLM([
    { call: "memory_write", arguments: { block: "Preferred name: Al" } },
    { say: "Will do, Al!" },
    { say: "You are Al." },
  ]);
  let requests: Record<string, unknown>[] = [];
  try {
    const { stdout } = await run(process.execPath, [join(folder, "agent.js")], {
      env: {
        ...process.env,
        MEMORO_URL: server.url,
        MEMORO_SECRET: server.secret,
        ANTHROPIC_BASE_URL: `${llm.url}/v1`,
        ANTHROPIC_API_KEY: "test",
      },
    });
    assert.equal(stdout, "Will do, Al!\nYou are Al.\n");
  } finally {
    requests = await llm.stop();
  }

  const memory = new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
  const prompt = await memory.systemPrompt("alice");
  const system = requests.map((request) => request.system as SystemBlock[]);
  assert.equal(system.length, 3);
  // the host's instructions, memoro's base prompt with the cache breakpoint, the block, the date
  assert.deepEqual(
    system[2]!.map((block) => [block.text, block.cache_control]),
    [
      ["You are a helpful assistant.", undefined],
      [prompt.stable, { type: "ephemeral" }],
      [prompt.memory, undefined],
      [prompt.today, undefined],
    ],
  );
  assert.match(system[0]!.at(-2)!.text, /\(empty: nothing is remembered/);
  assert.ok(system[1]!.at(-2)!.text.endsWith("\nPreferred name: Al")); // right after the tool call
  assert.deepEqual(
    (await memory.conversationTurns("alice", "chat-1")).map((t) => [t.question, t.answer]),
    [["Call me Al from now on.", "Will do, Al!"]],
  );
});
