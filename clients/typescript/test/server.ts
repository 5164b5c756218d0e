/**
 * A real `memoro serve` for the tests: token mode, a fresh MEMORO_HOME, a
 * free port read from its banner, and HS256 user tokens signed here with its
 * secret. `test/run.ts` starts one for every test file; a file run alone
 * starts its own.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** clients/typescript, from build/test/. */
export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const REPOSITORY = resolve(PACKAGE_DIR, "..", "..");
/** The memoro to run: the checkout's .venv unless MEMORO_PYTHON names another. */
export const PYTHON = process.env.MEMORO_PYTHON ?? join(REPOSITORY, ".venv", "bin", "python");

export interface Server {
  url: string;
  secret: string;
  /** A token for `userId`, as the host's auth would issue it. */
  sign(userId: string, claims?: Record<string, unknown>): string;
  stop(): Promise<void>;
}

export function signer(secret: string): Server["sign"] {
  return (userId, claims = {}) => {
    const now = Math.floor(Date.now() / 1000);
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const unsigned = `${part({ alg: "HS256", typ: "JWT" })}.${part({ sub: userId, iat: now, exp: now + 600, ...claims })}`;
    return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
  };
}

/** A user id no other test uses, so tests can share one server. */
export function newUser(name: string): string {
  return `${name}-${randomUUID().slice(0, 8)}`;
}

/** Start `memoro serve --port 0` and wait until it answers. */
export async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const home = mkdtempSync(join(tmpdir(), "memoro-ts-"));
  const secret = randomBytes(32).toString("hex");
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("MEMORO_")),
  );
  const server = spawn(PYTHON, ["-m", "memoro", "serve", "--host", "127.0.0.1", "--port", "0"], {
    env: {
      ...inherited,
      MEMORO_HOME: home,
      MEMORO_AUTH: "token",
      MEMORO_SECRET: secret,
      MEMORO_EMBEDDER: "keyword",
      MEMORO_IMPORT_MAX_MB: "1",
      MEMORO_LOG_LEVEL: "warning",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const stop = async () => {
    await ended(server);
    rmSync(home, { recursive: true, force: true });
  };
  try {
    const url = await banner(server);
    await answering(`${url}/healthz`);
    return { url, secret, sign: signer(secret), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function banner(server: ChildProcess): Promise<string> {
  const seen: string[] = [];
  const lines = createInterface({ input: server.stderr! });
  const timer = setTimeout(() => server.kill(), 60_000);
  try {
    for await (const line of lines) {
      seen.push(line);
      const found = /Memory settings page: (http:\/\/[^/\s]+)\//.exec(line);
      if (found) {
        lines.on("line", () => {}); // keep draining stderr
        return found[1]!;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  throw new Error(`memoro serve (${PYTHON}) ended before its banner:\n${seen.join("\n")}`);
}

async function answering(url: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`nothing answers at ${url}: ${error}`);
    }
    await new Promise((done) => setTimeout(done, 50));
  }
}

function ended(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    server.once("exit", () => done());
    server.kill("SIGTERM");
  });
}

let shared: Promise<Server> | undefined;

/**
 * The server of this test run: the one `test/run.ts` started (its address
 * and secret in the environment), else one started for this file and
 * stopped when the file's tests end.
 */
export function testServer(): Promise<Server> {
  const url = process.env.MEMORO_TEST_URL;
  const secret = process.env.MEMORO_TEST_SECRET;
  if (url && secret) {
    return Promise.resolve({ url, secret, sign: signer(secret), stop: async () => {} });
  }
  if (shared === undefined) {
    shared = startServer();
    process.once("beforeExit", () => void shared?.then((server) => server.stop()));
  }
  return shared;
}

/** Poll `check` until it returns a value other than undefined, or fail after `seconds`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  seconds = 30,
): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not within ${seconds} s: ${what}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}
