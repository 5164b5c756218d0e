/** The committed wire types are what the live server's OpenAPI document generates. */

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { GENERATED, typesFrom } from "./openapi-types.js";
import { testServer } from "./server.js";

test("src/generated/openapi.ts matches the server's /openapi.json", async () => {
  const server = await testServer();
  const document: unknown = await (await fetch(`${server.url}/openapi.json`)).json();
  const committed = await readFile(GENERATED, "utf8");
  assert.ok(
    committed === (await typesFrom(document)),
    "the server's OpenAPI document changed: run `npm run generate` in clients/typescript," +
      " rebuild, and commit src/generated/openapi.ts and dist/",
  );
});
