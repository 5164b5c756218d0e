/**
 * The test run: one real `memoro serve` (test/server.ts) for every test
 * file, then `node --test` over the compiled tests. Arguments pick files by
 * name: `node build/test/run.js client errors`.
 */

import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.js";

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((name) => name.endsWith(".test.js"))
  .filter((name) => !wanted.length || wanted.some((word) => name.includes(word)))
  .map((name) => join(here, name));

const started = Date.now();
const server = await startServer();
console.log(`memoro serve answers at ${server.url} (started in ${Date.now() - started} ms)`);
let status = 1;
try {
  const tests = spawn(process.execPath, ["--test", "--test-reporter=spec", ...files], {
    stdio: "inherit",
    env: { ...process.env, MEMORO_TEST_URL: server.url, MEMORO_TEST_SECRET: server.secret },
  });
  status = await new Promise<number>((done) => tests.on("exit", (code) => done(code ?? 1)));
} finally {
  await server.stop();
}
process.exit(status);
