/** Every call of MemoroClient against a real `memoro serve` in token mode. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { BlockChanged, InvalidInput, MemoroClient, NotFound, type SearchHits } from "memoro";

import { eventually, newUser, testServer } from "./server.js";

async function clientFor(): Promise<MemoroClient> {
  const server = await testServer();
  return new MemoroClient({ baseUrl: server.url, token: (userId) => server.sign(userId) });
}

/** Search until the worker has indexed a turn that matches. */
function found(client: MemoroClient, userId: string, query: string): Promise<SearchHits> {
  return eventually(`a hit for ${JSON.stringify(query)}`, async () => {
    const hits = await client.search(userId, query);
    return hits.hits.length ? hits : undefined;
  });
}

test("the block: read, write, rewrite with its diff, unchanged, delete", async () => {
  const client = await clientFor();
  const alice = newUser("alice");
  assert.equal(await client.readBlock(alice), null);

  const first = await client.writeBlock(alice, "Preferred name: Al\nTracker: al@example.com", {
    writer: "user",
  });
  assert.equal(first.outcome, "saved");
  assert.ok(first.saved && !first.rejected);
  assert.deepEqual(first.added, ["Preferred name: Al", "Tracker: al@example.com"]);
  assert.deepEqual(first.removed, []);
  assert.equal(first.count, 42);

  const stored = await client.readBlock(alice);
  assert.ok(stored);
  assert.equal(stored.userId, alice);
  assert.equal(stored.text, "Preferred name: Al\nTracker: al@example.com");
  assert.equal(stored.updatedBy, "user");
  assert.ok(stored.updatedAt instanceof Date && Date.now() - stored.updatedAt.getTime() < 60_000);
  assert.equal(stored.etag, first.etag);
  assert.equal(stored.limit, 4000);

  const second = await client.writeBlock(alice, "Preferred name: Alice\nTracker: al@example.com", {
    writer: "user",
    expectedEtag: stored.etag,
  });
  assert.deepEqual(
    [second.removed, second.added],
    [["Preferred name: Al"], ["Preferred name: Alice"]],
  );
  const again = await client.writeBlock(alice, "Preferred name: Alice\nTracker: al@example.com", {
    writer: "user",
  });
  assert.equal(again.outcome, "unchanged");

  const deleted = await client.deleteBlock(alice, { writer: "user" });
  assert.deepEqual(deleted, { deleted: true, removedCount: 2 });
  assert.equal(await client.readBlock(alice), null);
  assert.deepEqual(await client.deleteBlock(alice, { writer: "user" }), {
    deleted: false,
    removedCount: 0,
  });
});

test("deleteUser erases everything the user had, and the id works again", async () => {
  const client = await clientFor();
  const erin = newUser("erin");
  await client.writeBlock(erin, "Preferred name: Erin", { writer: "user" });
  await client.recordTurn(erin, "c1", { question: "hello", answer: "hi" });
  assert.deepEqual(await client.deleteUser(erin), {
    block: true,
    auditEntries: 1,
    conversations: 1,
    turns: 1,
    imports: 0,
  });
  assert.equal(await client.readBlock(erin), null);
  assert.deepEqual(await client.listConversations(erin), []);
  const again = await client.deleteUser(erin);
  assert.equal(again.block, false);
  assert.equal(again.conversations, 0);
});

test("a write the rules reject is a result that says why, and nothing changes", async () => {
  const client = await clientFor();
  const bob = newUser("bob");
  await client.writeBlock(bob, "Name: Bob", { writer: "user" });

  const long = await client.writeBlock(bob, "x".repeat(4100), { writer: "user" });
  assert.equal(long.outcome, "too_long");
  assert.ok(long.rejected && !long.saved);
  assert.equal(long.attemptedCount, 4100);
  assert.equal(long.overBy, 100);
  assert.equal(long.block, "Name: Bob");
  assert.match(long.warnings.join(" "), /100/);

  const empty = await client.writeBlock(bob, " \u200b\n", { writer: "user" });
  assert.equal(empty.outcome, "empty");
  assert.match(empty.warnings.join(" "), /delete/i);
  assert.equal((await client.readBlock(bob))?.text, "Name: Bob");
});

test("a stale ETag is refused with the current block; the model's writes go through tools", async () => {
  const client = await clientFor();
  const carol = newUser("carol");
  const start = await client.writeBlock(carol, "Name: Carol", { writer: "user" });
  await client.writeBlock(carol, "Name: Caro", { writer: "user" });

  const stale = client.writeBlock(carol, "Name: Carolyn", {
    writer: "user",
    expectedEtag: start.etag,
  });
  const refused = await stale.then(
    () => assert.fail("a stale ETag was accepted"),
    (error: unknown) => error,
  );
  assert.ok(refused instanceof BlockChanged);
  assert.equal(refused.status, 412);
  assert.equal(refused.current, "Name: Caro");
  assert.equal(refused.etag, (await client.readBlock(carol))?.etag);
  await assert.rejects(
    client.deleteBlock(carol, { writer: "user", expectedEtag: start.etag }),
    BlockChanged,
  );

  await assert.rejects(client.writeBlock(carol, "Name: C", { writer: "model" }), (error) => {
    assert.ok(error instanceof InvalidInput);
    assert.match(error.message, /executeTool/);
    return true;
  });
  assert.equal((await client.readBlock(carol))?.text, "Name: Caro");
});

test("the audit lists every write and delete, newest first", async () => {
  const client = await clientFor();
  const dave = newUser("dave");
  await client.writeBlock(dave, "Name: Dave", { writer: "user" });
  await client.executeTool(dave, "memory_write", { block: "Name: Dave\nCity: Oslo" });
  await client.deleteBlock(dave, { writer: "user" });

  const audit = await client.audit(dave);
  assert.deepEqual(
    audit.map((entry) => [entry.operation, entry.writer, entry.removedCount, entry.addedCount]),
    [
      ["delete", "user", 2, 0],
      ["write", "model", 0, 1],
      ["write", "user", 0, 1],
    ],
  );
  assert.ok(audit.every((entry) => entry.userId === dave && entry.at instanceof Date));
  assert.deepEqual((await client.audit(dave, { limit: 1 })).length, 1);
  assert.equal((await client.audit(dave, { limit: 1000 })).length, 3);
  await assert.rejects(client.audit(dave, { limit: 1001 }), (error) => {
    assert.ok(error instanceof InvalidInput); // as the server's own rule, never cut to 1,000
    assert.equal(error.message, "limit must be a whole number from 1 to 1000");
    return true;
  });
});

test("the system prompt ends with the block, in text, OpenAI and Anthropic shapes", async () => {
  const client = await clientFor();
  const erin = newUser("erin");
  await client.writeBlock(erin, "Preferred name: Em", { writer: "user" });

  const prompt = await client.systemPrompt(erin, { instructions: "You are a travel agent." });
  assert.equal(prompt.memory, "Personal memory (18/4,000 characters)\nPreferred name: Em");
  assert.match(prompt.today, /^Today is [A-Za-z]+, \d{4}-\d{2}-\d{2} \(UTC\)\.$/);
  assert.ok(prompt.text.endsWith(`\n\n${prompt.memory}\n\n${prompt.today}`));
  assert.ok(prompt.stable.endsWith("You are a travel agent."));
  assert.deepEqual(prompt.openai, [{ role: "system", content: prompt.text }]);
  assert.deepEqual(prompt.anthropic, [
    { type: "text", text: prompt.stable, cache_control: { type: "ephemeral" } },
    { type: "text", text: prompt.memory },
    { type: "text", text: prompt.today },
  ]);
  const plain = await client.systemPrompt(erin);
  assert.ok(!plain.stable.includes("travel agent"));
});

test("turns: recorded once per key, listed, opened, found by search, deleted", async () => {
  const client = await clientFor();
  const frank = newUser("frank");
  const first = await client.recordTurn(frank, "trip/2025", {
    question: "Which flight did we pick to Lisbon?",
    answer: "TAP 9:40 from Oslo, seat 12A.",
    at: new Date("2025-05-01T10:00:00Z"),
    key: "message-1",
    title: "Lisbon trip",
  });
  assert.deepEqual(
    { ...first, turnId: 0 },
    {
      turnId: 0,
      conversationId: "trip/2025",
      seq: 1,
      created: true,
    },
  );
  const retry = await client.recordTurn(frank, "trip/2025", {
    question: "Which flight did we pick to Lisbon?",
    answer: "TAP 9:40 from Oslo, seat 12A.",
    key: "message-1",
  });
  assert.deepEqual([retry.turnId, retry.created], [first.turnId, false]);
  await client.recordTurn(frank, "a/..", {
    question: "Dots too?",
    answer: "Yes.",
    at: "2025-06-01T08:00:00Z",
  });

  const conversations = await client.listConversations(frank);
  assert.deepEqual(
    conversations.map((c) => [c.id, c.turns, c.preview]),
    [
      ["a/..", 1, "Dots too?"],
      ["trip/2025", 1, "Which flight did we pick to Lisbon?"],
    ],
  );
  assert.equal(conversations[1]?.firstAt.toISOString(), "2025-05-01T10:00:00.000Z");
  assert.deepEqual(
    conversations.map((c) => c.title),
    [null, "Lisbon trip"],
  );
  assert.deepEqual(
    (await client.listConversations(frank, { limit: 1, offset: 1 })).map((c) => c.id),
    ["trip/2025"],
  );

  const turns = await client.conversationTurns(frank, "trip/2025");
  assert.equal(turns.length, 1);
  assert.equal(turns[0]?.answer, "TAP 9:40 from Oslo, seat 12A.");
  assert.equal(turns[0]?.userId, frank);
  assert.deepEqual(await client.conversationTurns(frank, "never-was"), []);

  const hits = await found(client, frank, "Lisbon flight");
  assert.equal(hits.hits[0]?.conversationId, "trip/2025");
  assert.deepEqual([hits.hits[0]?.turnId, hits.hits[0]?.seq], [first.turnId, 1]);
  assert.ok(hits.hits[0]?.at instanceof Date && typeof hits.hits[0]?.score === "number");
  assert.match(hits.hits[0]?.text ?? "", /TAP 9:40/);
  assert.deepEqual(
    (await client.search(frank, "Lisbon", { limit: 1, mode: "keyword" })).hits.length,
    1,
  );

  assert.equal(await client.deleteConversation(frank, "trip/2025"), true);
  assert.equal(await client.deleteConversation(frank, "trip/2025"), false);
  assert.deepEqual((await client.search(frank, "Lisbon flight")).hits, []);
  assert.equal(await client.deleteConversation(frank, "a/.."), true);
});

test("search with no user sends nothing and finds nothing", async () => {
  const client = new MemoroClient({ baseUrl: "http://127.0.0.1:9" }); // nothing listens there
  assert.deepEqual(await client.search(undefined, "anything"), { hits: [], warnings: [] });
  assert.deepEqual(await client.search("", "anything"), { hits: [], warnings: [] });
});

test("tool calls run on the server for the user, and bad arguments come back as text", async () => {
  const client = await clientFor();
  const gina = newUser("gina");
  const saved = await client.executeTool(gina, "memory_write", { block: "Preferred name: Gi" });
  assert.equal(saved.isError, false);
  assert.match(saved.text, /^Saved\. 0 lines removed, 1 line added\./);
  const asJson = await client.executeTool(
    gina,
    "memory_write",
    '{"block": "Preferred name: Gigi"}',
  );
  assert.match(asJson.text, /- Preferred name: Gi\n/);

  const chosen = await client.executeTool(gina, "memory_write", { block: "x", user_id: "someone" });
  assert.equal(chosen.isError, true);
  assert.match(chosen.text, /unknown argument\(s\) user_id/);
  const nothing = await client.executeTool(gina, "conversation_search", { query: "nothing here" });
  assert.match(nothing.text, /No past conversation matches/);
  const forget = await client.executeTool(gina, "memory_delete_all", null);
  assert.match(forget.text, /^Deleted the whole personal memory block/);

  const definitions = await client.toolDefinitions();
  const served = (await (await fetch(`${client.baseUrl}/v1/tools`)).json()) as {
    function: { name: string; description: string; parameters: object };
  }[];
  assert.deepEqual(
    definitions,
    served.map((tool) => tool.function),
  );
  assert.equal(await client.toolDefinitions(), await client.toolDefinitions()); // asked once
});

test("export gives everything as memoro's format, and it imports back", async () => {
  const client = await clientFor();
  const hana = newUser("hana");
  const copy = newUser("hana-copy");
  await client.writeBlock(hana, "Preferred name: Hana", { writer: "user" });
  await client.recordTurn(hana, "garden", {
    question: "When do tulips go in?",
    answer: "In October.",
  });

  let text = "";
  for await (const piece of client.export(hana)) text += piece;
  const exported = JSON.parse(text) as Record<string, unknown>;
  for await (const piece of client.export(hana)) {
    assert.equal(piece[0], "{"); // and stopping early closes the answer
    break;
  }
  assert.ok(JSON.stringify(exported).includes("When do tulips go in?"));

  const started = await client.importFile(copy, new TextEncoder().encode(text), {
    fileName: "memoro-export.json",
    format: "memoro",
  });
  assert.equal(started.fileName, "memoro-export.json");
  assert.ok(["queued", "running", "done"].includes(started.status));
  const done = await eventually("the import to finish", async () => {
    const status = await client.importStatus(copy, started.id);
    return status.status === "done" || status.status === "failed" ? status : undefined;
  });
  assert.equal(done.error, null);
  assert.equal(done.report?.format, "memoro");
  assert.equal(done.report?.imported, 1);
  assert.equal(done.report?.block, "restored");
  assert.ok(done.finishedAt instanceof Date);
  assert.equal((await client.readBlock(copy))?.text, "Preferred name: Hana");
  assert.deepEqual(
    (await client.conversationTurns(copy, "garden")).map((turn) => turn.answer),
    ["In October."],
  );
  assert.deepEqual(
    (await client.listImports(copy)).map((status) => status.id),
    [started.id],
  );
  await assert.rejects(client.importStatus(copy, "no-such-import"), NotFound);
});
