/**
 * Memory review through MemoroClient: a `memoro serve` whose chat model is
 * memoro's scripted one proposes a block, the client reads, accepts and
 * dismisses it, with the server's errors as memoro's error classes.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { BlockChanged, MemoroClient, ModelError, NoModel, NoProposal } from "memoro";

import { scriptedLLM, type ScriptedLLM } from "./scripted-llm.js";
import { newUser, startServer, testServer, type Server } from "./server.js";

const BETTER = "Preferred name: Al\nLikes big tasks broken into small steps";

let llm: ScriptedLLM;
let server: Server;

before(async () => {
  llm = await scriptedLLM([
    { call: "memory_write", arguments: { block: BETTER } },
    { say: "NO CHANGE" },
    { say: "I'd rather not." },
    { call: "memory_write", arguments: { block: `${BETTER}\nWrites family stories` } },
    { call: "memory_write", arguments: { block: "Preferred name: Bob\nLoves herons" } },
  ]);
  server = await startServer({
    MEMORO_LLM: "openai",
    MEMORO_LLM_URL: `${llm.url}/v1`,
    MEMORO_LLM_MODEL: "scripted",
    MEMORO_LLM_KEY: "test",
  });
});

after(async () => {
  await server.stop();
  await llm.stop();
});

test("review, read, accept and dismiss a proposal; failures change nothing", async () => {
  const client = new MemoroClient({ baseUrl: server.url, token: (id) => server.sign(id) });
  const ann = newUser("ann");
  await client.writeBlock(ann, "Preferred name: Al\nFocusing on project A this week", {
    writer: "user",
  });
  await client.recordTurn(ann, "plan", {
    question: "I like to break big tasks into small steps.",
    answer: "Noted.",
  });
  assert.equal(await client.proposal(ann), null);

  const made = await client.review(ann);
  assert.ok(made);
  assert.deepEqual(made.removed, ["Focusing on project A this week"]);
  assert.deepEqual(made.added, ["Likes big tasks broken into small steps"]);
  assert.equal(made.turnsRead, 1);
  assert.equal(made.stale, false);
  assert.deepEqual(await client.proposal(ann), made);
  assert.equal((await client.readBlock(ann))?.text.endsWith("this week"), true);

  assert.equal(await client.review(ann), null); // nothing to change: the pending one goes
  assert.equal(await client.proposal(ann), null);
  await assert.rejects(client.review(ann), ModelError);

  const again = await client.review(ann);
  assert.ok(again);
  await assert.rejects(client.acceptProposal(ann, { expected: made.etag }), NoProposal);
  const saved = await client.acceptProposal(ann, { expected: again.etag });
  assert.equal(saved.outcome, "saved");
  assert.equal(saved.block, again.block);
  const [entry] = await client.audit(ann);
  assert.equal(entry?.writer, "model");
  assert.equal(entry?.source, "review");
  await assert.rejects(client.acceptProposal(ann), NoProposal);
  assert.equal(await client.dismissProposal(ann), false);
});

test("a stale proposal is refused with the block as it is now", async () => {
  const client = new MemoroClient({ baseUrl: server.url, token: (id) => server.sign(id) });
  const bob = newUser("bob");
  await client.writeBlock(bob, "Preferred name: Bob", { writer: "user" });
  await client.recordTurn(bob, "birds", { question: "I love herons.", answer: "Nice." });
  const made = await client.review(bob);
  assert.ok(made);
  await client.writeBlock(bob, "Preferred name: Bobby", { writer: "user" });
  assert.equal((await client.proposal(bob))?.stale, true);
  await assert.rejects(client.acceptProposal(bob), (error: unknown) => {
    assert.ok(error instanceof BlockChanged);
    assert.equal(error.current, "Preferred name: Bobby");
    return true;
  });
  assert.equal(await client.proposal(newUser("other")), null); // never another user's
  assert.equal(await client.dismissProposal(bob), true);
});

test("a server without a chat model answers NoModel", async () => {
  const shared = await testServer();
  const client = new MemoroClient({ baseUrl: shared.url, token: (id) => shared.sign(id) });
  await assert.rejects(client.review(newUser("cy")), NoModel);
});
