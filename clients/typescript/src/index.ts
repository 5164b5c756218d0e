/**
 * memoro for TypeScript: MemoroClient, a typed client of a `memoro serve`,
 * and memoro's errors and results. The Vercel AI SDK tools and middleware
 * are in "memoro/ai-sdk".
 */

export { MemoroClient, type ImportFormat, type SearchMode } from "./client.js";
export {
  BlockChanged,
  Busy,
  ConfigError,
  DiskFull,
  errorFrom,
  Forbidden,
  InvalidInput,
  InvalidUser,
  KeysUnavailable,
  MemoroError,
  MigrationError,
  ModelError,
  ModelTimeout,
  NoModel,
  NoProposal,
  NotFound,
  ReviewRunning,
  StoreError,
  TooLarge,
  TurnRunning,
  Unauthorized,
  UnknownTool,
  UserErased,
} from "./errors.js";
export type { ClientOptions, Token } from "./http.js";
export type {
  AuditEntry,
  Conversation,
  DeleteResult,
  ImportReport,
  ImportStatus,
  Proposal,
  RecordedTurn,
  SearchHit,
  SearchHits,
  StoredBlock,
  SystemPrompt,
  ToolDefinition,
  ToolResult,
  Turn,
  UserDeletion,
  Writer,
  WriteResult,
} from "./results.js";
export type { components, paths } from "./generated/openapi.js";
