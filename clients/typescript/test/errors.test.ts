/**
 * memoro's errors, from a real server's answers where one can be caused,
 * and from the error envelope for the rest; and many users through one
 * client, each acting only for itself.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";

import {
  BlockChanged,
  ConfigError,
  DiskFull,
  errorFrom,
  Forbidden,
  InvalidInput,
  InvalidUser,
  KeysUnavailable,
  MemoroClient,
  MemoroError,
  MigrationError,
  ModelError,
  NotFound,
  StoreError,
  TooLarge,
  Unauthorized,
  UnknownTool,
  UserErased,
} from "memoro";

import { newUser, PYTHON, testServer } from "./server.js";

/** The error `promise` is rejected with, which must be a `cls`. */
async function refused<T extends MemoroError>(
  promise: Promise<unknown>,
  cls: abstract new (...args: never[]) => T,
): Promise<T> {
  const error = await promise.then(
    () => assert.fail(`expected ${cls.name}`),
    (error: unknown) => error,
  );
  assert.ok(error instanceof cls, `expected ${cls.name}, got ${String(error)}`);
  return error;
}

test("no token, a bad token and an expired one are Unauthorized", async () => {
  const server = await testServer();
  const alice = newUser("alice");
  const anonymous = new MemoroClient({ baseUrl: server.url });
  const none = await refused(anonymous.readBlock(alice), Unauthorized);
  assert.equal(none.status, 401);
  assert.equal(none.code, "unauthorized");

  const forged = new MemoroClient({ baseUrl: server.url, token: () => `${server.sign(alice)}x` });
  await refused(forged.readBlock(alice), Unauthorized);
  const past = Math.floor(Date.now() / 1000) - 3600;
  const expired = new MemoroClient({
    baseUrl: server.url,
    token: (userId) => server.sign(userId, { iat: past - 60, exp: past }),
  });
  const late = await refused(expired.readBlock(alice), Unauthorized);
  assert.match(late.message, /expired/);
});

test("a token that is someone else's is refused before anything is read or written", async () => {
  const server = await testServer();
  const [alice, mallory] = [newUser("alice"), newUser("mallory")];
  const owner = new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
  await owner.writeBlock(alice, "Name: Alice", { writer: "user" });

  // the host's token function hands out mallory's token whatever the user
  const confused = new MemoroClient({ baseUrl: server.url, token: () => server.sign(mallory) });
  const forbidden = await refused(
    confused.writeBlock(alice, "Name: Mallory", { writer: "user" }),
    Forbidden,
  );
  assert.ok(forbidden instanceof Unauthorized);
  assert.equal(forbidden.status, 403);
  assert.match(forbidden.message, /nothing was read or written/);
  assert.equal((await owner.readBlock(alice))?.text, "Name: Alice");
  assert.equal(await owner.readBlock(mallory), null);

  // a client with one user's token says so before it sends anything
  const single = new MemoroClient({ baseUrl: "http://127.0.0.1:9", token: server.sign(mallory) });
  const local = await refused(single.readBlock(alice), InvalidInput);
  assert.equal(local.status, undefined);
  assert.match(local.message, /token is for user/);
});

test("bad input is InvalidInput with the server's message; an unknown tool is UnknownTool", async () => {
  const server = await testServer();
  const client = new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
  const ivan = newUser("ivan");
  const time = await refused(
    client.recordTurn(ivan, "c", { question: "q", answer: "a", at: "yesterday" }),
    InvalidInput,
  );
  assert.equal(time.status, 422);
  assert.match(time.message, /at/);
  const id = await refused(
    client.recordTurn(ivan, "x".repeat(256), { question: "q", answer: "a" }),
    InvalidInput,
  );
  assert.match(id.message, /conversation/);
  await refused(client.conversationTurns(ivan, ""), InvalidInput);
  assert.deepEqual(await client.listConversations(ivan), []); // nothing was stored

  const tool = await refused(client.executeTool(ivan, "memory_read", {}), UnknownTool);
  assert.equal(tool.status, 404);
  assert.match(tool.message, /memory_write/);
});

test("an upload over the server's size is TooLarge, and nothing of it is kept", async () => {
  const server = await testServer();
  const client = new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
  const judy = newUser("judy");
  const big = new Uint8Array(1024 * 1024 + 100_000).fill(0x20); // the test server takes 1 MB
  const error = await refused(client.importFile(judy, big), TooLarge);
  assert.equal(error.status, 413);
  assert.deepEqual(await client.listImports(judy), []);
});

test("an unreachable server is a StoreError that names it", async () => {
  const client = new MemoroClient({ baseUrl: "http://127.0.0.1:9/", token: () => "t" });
  const error = await refused(client.readBlock("alice"), StoreError);
  assert.match(error.message, /the memoro server at http:\/\/127\.0\.0\.1:9 could not be reached/);
  assert.equal(error.status, undefined);
});

test("the envelope's code chooses the error, else the status does", () => {
  const cases: [number, unknown, new (...args: never[]) => MemoroError][] = [
    [422, { error: { code: "invalid_input", message: "m" } }, InvalidInput],
    [422, { error: { code: "invalid_user", message: "m" } }, InvalidUser],
    [404, { error: { code: "unknown_tool", message: "m" } }, UnknownTool],
    [413, { error: { code: "too_large", message: "m" } }, TooLarge],
    [404, { error: { code: "not_found", message: "m" } }, NotFound],
    [409, { error: { code: "user_erased", message: "m" } }, UserErased],
    [401, { error: { code: "unauthorized", message: "m" } }, Unauthorized],
    [403, { error: { code: "forbidden", message: "m" } }, Forbidden],
    [503, { error: { code: "keys_unavailable", message: "m" } }, KeysUnavailable],
    [500, { error: { code: "config_error", message: "m" } }, ConfigError],
    [502, { error: { code: "model_error", message: "m" } }, ModelError],
    [503, { error: { code: "store_error", message: "m" } }, StoreError],
    [503, { error: { code: "disk_full", message: "m" } }, DiskFull],
    [503, { error: { code: "migration_error", message: "m" } }, MigrationError],
    [405, { error: { code: "http_error", message: "m" } }, InvalidInput],
    [415, { error: { code: "unsupported_media_type", message: "m" } }, InvalidInput],
    [401, "not JSON", Unauthorized],
    [403, undefined, Forbidden],
    [413, undefined, TooLarge],
    [400, undefined, InvalidInput],
    [502, "<html>Bad gateway</html>", StoreError],
  ];
  for (const [status, body, cls] of cases) {
    const error = errorFrom(status, body);
    assert.equal(error.constructor, cls, `${status} ${JSON.stringify(body)}`);
    assert.equal(error.status, status);
  }
  const plain = errorFrom(502, undefined);
  assert.equal(plain.message, "the memoro server answered 502");
  assert.equal(plain.code, "store_error");
  assert.equal(errorFrom(405, { error: { code: "http_error", message: "m" } }).code, "http_error");

  const changed = errorFrom(412, {
    error: { code: "block_changed", message: "m", current: "", etag: "e" },
  });
  assert.ok(changed instanceof BlockChanged);
  assert.equal(changed.current, null); // no block now
  assert.equal(changed.etag, "e");
});

test("one client serves many users, each only ever with its own memory", async () => {
  const server = await testServer();
  const signed: string[] = [];
  const client = new MemoroClient({
    baseUrl: server.url,
    token: async (userId) => {
      signed.push(userId);
      return server.sign(userId);
    },
  });
  const users = Array.from({ length: 12 }, (_, i) => newUser(`user${i}`));
  await Promise.all(
    users.map((userId, i) =>
      client.writeBlock(userId, `Name: ${userId}\nLucky number: ${i}`, { writer: "user" }),
    ),
  );
  await Promise.all(
    users.map((userId) =>
      client.recordTurn(userId, "only-mine", { question: `I am ${userId}`, answer: "Noted." }),
    ),
  );
  const prompts = await Promise.all(users.map((userId) => client.systemPrompt(userId)));
  prompts.forEach((prompt, i) => {
    assert.ok(prompt.memory.endsWith(`Name: ${users[i]}\nLucky number: ${i}`));
    assert.equal(users.filter((other) => prompt.text.includes(other)).length, 1);
  });
  const turns = await Promise.all(
    users.map((userId) => client.conversationTurns(userId, "only-mine")),
  );
  turns.forEach((own, i) =>
    assert.deepEqual(
      own.map((t) => t.question),
      [`I am ${users[i]}`],
    ),
  );
  assert.deepEqual(new Set(signed), new Set(users));
});

test("every error memoro's Python package defines has its class here", async () => {
  const { stdout } = await promisify(execFile)(PYTHON, [
    "-c",
    "import json, memoro.errors as e\n" +
      "def tree(c): return [c, *(d for s in c.__subclasses__() for d in tree(s))]\n" +
      "print(json.dumps(sorted({(c.__name__, c.code) for c in tree(e.MemoroError)})))",
  ]);
  const classes = new Map<string, typeof MemoroError>(
    Object.values(await import("memoro"))
      .filter(
        (value): value is typeof MemoroError =>
          value === MemoroError || value?.prototype instanceof MemoroError,
      )
      .map((cls) => [cls.name, cls]),
  );
  for (const [name, code] of JSON.parse(stdout) as [string, string][]) {
    assert.equal(classes.get(name)?.code, code, `${name} (${code})`);
    if (name === "MemoroError") continue; // the base class: no answer carries its code
    const made = errorFrom(500, { error: { code, message: "m" } });
    assert.equal(made.constructor.name, name);
  }
});
