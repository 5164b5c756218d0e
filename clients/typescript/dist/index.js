/**
 * memoro for TypeScript: MemoroClient, a typed client of a `memoro serve`,
 * and memoro's errors and results. The Vercel AI SDK tools and middleware
 * are in "memoro/ai-sdk".
 */
export { MemoroClient } from "./client.js";
export { BlockChanged, Busy, ConfigError, DiskFull, errorFrom, Forbidden, InvalidInput, InvalidUser, KeysUnavailable, MemoroError, MigrationError, ModelError, ModelTimeout, NoModel, NoProposal, NotFound, ReviewRunning, StoreError, TooLarge, TurnRunning, Unauthorized, UnknownTool, UserErased, } from "./errors.js";
