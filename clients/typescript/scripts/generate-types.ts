/**
 * Regenerate src/generated/openapi.ts from the OpenAPI document of a real
 * `memoro serve` (the checkout's, started here): `npm run generate`.
 */

import { writeFile } from "node:fs/promises";

import { GENERATED, typesFrom } from "../test/openapi-types.js";
import { startServer } from "../test/server.js";

const server = await startServer();
try {
  const document: unknown = await (await fetch(`${server.url}/openapi.json`)).json();
  await writeFile(GENERATED, await typesFrom(document));
  console.log(`wrote ${GENERATED}`);
} finally {
  await server.stop();
}
