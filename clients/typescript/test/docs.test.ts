/**
 * docs/typescript.md run as written: a project set up with the guide's own
 * commands (its `npm install`s stood in for by links to this package and to
 * the AI SDK it would get: `ai` 6 with `@ai-sdk/anthropic` 3, as on Node.js
 * 20, and `ai` 7 with `@ai-sdk/anthropic` 4, as on 22), the guide's examples
 * type-checked there and the complete agent run with the guide's command,
 * `tsx`, against a real `memoro serve` and memoro's scripted model speaking
 * Anthropic's API.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";

import { MemoroClient } from "memoro";

import { scriptedLLM } from "./scripted-llm.js";
import { PACKAGE_DIR, startServer, testServer } from "./server.js";

const run = promisify(execFile);
const GUIDE = join(PACKAGE_DIR, "..", "..", "docs", "typescript.md");
const MODULES = join(PACKAGE_DIR, "node_modules");

/** The fenced blocks of one language in the guide's section under `heading`. */
async function blocks(heading: string, language: "ts" | "sh"): Promise<string[]> {
  const section = (await readFile(GUIDE, "utf8")).split(heading)[1]?.split("\n## ")[0] ?? "";
  const found = [...section.matchAll(new RegExp("```" + language + "\\n(.*?)```", "gs"))];
  assert.ok(found.length, `no ${language} block after ${heading}`);
  return found.map((match) => match[1]!);
}

/** What `npm install` gives the project, for each AI SDK the guide names. */
const SDKS = {
  "ai 6": { ai: "ai-v6", anthropic: "anthropic-v3", fresh: true },
  "ai 7": { ai: "ai", anthropic: join("@ai-sdk", "anthropic"), fresh: false },
} as const;

type Sdk = keyof typeof SDKS;

const projects = new Map<Sdk, Promise<string>>();

// the projects live in this package's build/ (their own imports reach its
// node_modules): none outlives the run
after(() => rm(join(PACKAGE_DIR, "build", "docs"), { recursive: true, force: true }));

/** The project for `sdk`, made once per run. */
function project(sdk: Sdk): Promise<string> {
  if (!projects.has(sdk)) projects.set(sdk, makeProject(sdk));
  return projects.get(sdk)!;
}

/**
 * A project made by the guide's set-up commands in `build/docs/<sdk>`: its
 * `npm init` and `npm pkg` run as written, each package its `npm install`
 * names linked from here. The project's folder.
 */
async function makeProject(sdk: Sdk): Promise<string> {
  const folder = join(PACKAGE_DIR, "build", "docs", sdk.replace(" ", ""));
  await rm(folder, { recursive: true, force: true });
  await mkdir(join(folder, "node_modules", "@ai-sdk"), { recursive: true });
  const [setup] = await blocks("## Set up a project", "sh");
  const installed: string[] = [];
  for (const line of setup!.split("\n")) {
    const words = line.split("#")[0]!.trim().split(/\s+/);
    if (words[0] !== "npm") continue;
    if (words[1] === "install") installed.push(...words.slice(2).filter((w) => !w.startsWith("-")));
    else await run("npm", words.slice(1), { cwd: folder });
  }
  assert.deepEqual(installed, [
    "./path/to/memoro/clients/typescript",
    "ai",
    "@ai-sdk/anthropic",
    "tsx",
  ]);
  // this package as a packed install holds it (its manifest and dist/): a
  // link to the package itself would make a loop, the project being inside it
  const memoro = join(folder, "node_modules", "memoro");
  await mkdir(memoro);
  await copyFile(join(PACKAGE_DIR, "package.json"), join(memoro, "package.json"));
  const links: [string, string][] = [
    [join("memoro", "dist"), join(PACKAGE_DIR, "dist")],
    ["ai", join(MODULES, SDKS[sdk].ai)],
    [join("@ai-sdk", "anthropic"), join(MODULES, SDKS[sdk].anthropic)],
  ];
  for (const [name, target] of links) await symlink(target, join(folder, "node_modules", name));
  return folder;
}

interface SystemBlock {
  text: string;
  cache_control?: unknown;
}

test("the guide's set-up makes an ES module project and its examples type-check with ai 6 and 7", async () => {
  const files: string[] = [];
  for (const sdk of Object.keys(SDKS) as Sdk[]) {
    const folder = await project(sdk);
    const manifest = JSON.parse(await readFile(join(folder, "package.json"), "utf8")) as {
      type?: string;
    };
    assert.equal(manifest.type, "module", "top-level await needs an ES module project");
    const [client] = await blocks("## The server and its users", "ts");
    const [agent] = await blocks("## A complete AI SDK agent", "ts");
    files.push(join(folder, "client.ts"), join(folder, "agent.ts"));
    await writeFile(files.at(-2)!, client!);
    await writeFile(files.at(-1)!, agent!);
  }
  const tsc = join(MODULES, "typescript", "bin", "tsc");
  const options = ["--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext"];
  await run(
    process.execPath,
    [tsc, ...options, "--target", "es2022", "--types", "node", ...files],
    {
      cwd: dirname(files[0]!),
    },
  ).catch((error: { stdout: string }) =>
    assert.fail(`the guide's examples do not compile:\n${error.stdout}`),
  );
});

for (const sdk of Object.keys(SDKS) as Sdk[]) {
  test(`the guide's AI SDK agent runs as written with ${sdk}: it saves the name and the next conversation starts with it`, async () => {
    const folder = await project(sdk);
    const [agent] = await blocks("## A complete AI SDK agent", "ts");
    await writeFile(join(folder, "agent.ts"), agent!);
    const [command] = (await blocks("## A complete AI SDK agent", "sh")).filter((block) =>
      block.includes("agent.ts"),
    );
    assert.match(command!, /^MEMORO_SECRET=… ANTHROPIC_API_KEY=… npx tsx agent\.ts$/m);

    // the example's user starts empty: the one shared server for one SDK, a fresh one for the other
    const server = SDKS[sdk].fresh ? await startServer() : await testServer();
    const llm = await scriptedLLM([
      { call: "memory_write", arguments: { block: "Preferred name: Al" } },
      { say: "Will do, Al!" },
      { say: "You are Al." },
    ]);
    let requests: Record<string, unknown>[] = [];
    try {
      const tsx = join(MODULES, "tsx", "dist", "cli.mjs");
      const { stdout } = await run(process.execPath, [tsx, "agent.ts"], {
        cwd: folder,
        env: {
          ...process.env,
          MEMORO_URL: server.url,
          MEMORO_SECRET: server.secret,
          ANTHROPIC_BASE_URL: `${llm.url}/v1`,
          ANTHROPIC_API_KEY: "test",
        },
      });
      assert.equal(stdout, "Will do, Al!\nYou are Al.\n");
      requests = await llm.stop();

      const memory = new MemoroClient({ baseUrl: server.url, token: (id) => server.sign(id) });
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
    } finally {
      if (!requests.length) await llm.stop();
      await server.stop();
    }
  });
}
