/**
 * memoro for the Vercel AI SDK (`ai` 6 or 7): `memoroTools` gives the model
 * memoro's tools for one user, `memoroMiddleware` (for `wrapLanguageModel`)
 * ends every call's system prompt with the user's memory and records the
 * finished turn. Nothing here imports `ai`: the host's own copy runs them.
 */
export { memoroMiddleware } from "./middleware.js";
export { memoroTools } from "./tools.js";
