/**
 * The parts of the Vercel AI SDK's contracts that memoro's glue touches,
 * written out structurally so that this package imports nothing from `ai`
 * (and works with whichever version the host installed): the language model
 * middleware (specification v3 of `ai` 6, which `ai` 7 accepts beside its v4)
 * and a tool's input schema as a Standard JSON Schema (standardschema.dev),
 * which both versions read. test/ai-sdk.test.ts type-checks these against
 * the real `ai` 7 and `ai` 6.
 */
export {};
