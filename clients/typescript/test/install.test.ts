/**
 * The package as a user gets it: `npm install <this folder>` into a new
 * project, a TypeScript program compiled there with the project's own
 * settings, run against the server.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { MemoroClient } from "memoro";

import { newUser, PACKAGE_DIR, testServer } from "./server.js";

const run = promisify(execFile);

const PROGRAM = `
import { MemoroClient, type SearchHit } from "memoro";
import { memoroMiddleware, memoroTools } from "memoro/ai-sdk";

declare const process: { argv: string[] };
const [baseUrl, token, user] = process.argv.slice(2) as [string, string, string];

const memory = new MemoroClient({ baseUrl, token });
await memory.writeBlock(user, "Preferred name: Al", { writer: "user" });
const prompt = await memory.systemPrompt(user);
await memory.recordTurn(user, "first-chat", {
  question: "Which flight did we pick to Lisbon?",
  answer: "TAP 9:40 from Oslo, seat 12A.",
});
let hit: SearchHit | undefined;
for (let tries = 0; tries < 300 && hit === undefined; tries++) {
  hit = (await memory.search(user, "Lisbon flight")).hits[0];
  if (hit === undefined) await new Promise((done) => setTimeout(done, 100));
}
const tools = await memoroTools({ client: memory, userId: user });
const middleware = memoroMiddleware({ client: memory, userId: user });
console.log(JSON.stringify({
  memory: prompt.memory,
  found: hit?.text,
  tools: Object.keys(tools),
  middleware: middleware.specificationVersion,
}));
`;

const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    lib: ["ES2023", "DOM"],
    types: [],
    strict: true,
    skipLibCheck: false,
    outDir: "out",
  },
};

test("a project that npm installs the folder writes a block, reads the prompt, records and finds a turn", async () => {
  const server = await testServer();
  const project = await mkdtemp(join(tmpdir(), "memoro-user-"));
  try {
    await writeFile(
      join(project, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    await writeFile(join(project, "tsconfig.json"), JSON.stringify(TSCONFIG));
    await writeFile(join(project, "main.ts"), PROGRAM);
    await run("npm", ["install", "--no-audit", "--no-fund", "--offline", PACKAGE_DIR], {
      cwd: project,
    });
    const tsc = join(PACKAGE_DIR, "node_modules", "typescript", "bin", "tsc");
    await run(process.execPath, [tsc, "-p", project]).catch((error: { stdout: string }) => {
      assert.fail(`the program does not compile against the installed package:\n${error.stdout}`);
    });

    const user = newUser("alice");
    const { stdout } = await run(process.execPath, [
      join(project, "out", "main.js"),
      server.url,
      server.sign(user),
      user,
    ]);
    const shown = JSON.parse(stdout) as Record<string, unknown>;
    assert.equal(shown.memory, "Personal memory (18/4,000 characters)\nPreferred name: Al");
    assert.match(String(shown.found), /TAP 9:40 from Oslo/);
    const definitions = await new MemoroClient({ baseUrl: server.url }).toolDefinitions();
    assert.deepEqual(
      shown.tools,
      definitions.map((tool) => tool.name),
    );
    assert.equal(shown.middleware, "v3");
  } finally {
    await rm(project, { recursive: true, force: true });
  }
});
