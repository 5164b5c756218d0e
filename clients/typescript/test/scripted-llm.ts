/**
 * memoro's scripted chat model (memoro.testing.ScriptedLLM, from the
 * checkout's .venv) over real HTTP: the OpenAI and Anthropic wire formats,
 * one scripted step per request, and every request it was sent.
 */

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

import { PYTHON } from "./server.js";

export type Step = { say: string } | { call: string; arguments?: object };

const SERVE = `
import json, sys
from memoro.testing import ScriptedLLM, call, say
steps = [call(s["call"], s.get("arguments")) if "call" in s else say(s["say"])
         for s in json.loads(sys.argv[1])]
with ScriptedLLM(steps) as llm:
    print(llm.url, flush=True)
    sys.stdin.read()  # until the test is done with it
    print(json.dumps(llm.requests), flush=True)
`;

export interface ScriptedLLM {
  url: string;
  /** Stop it; the request bodies it was sent, in order. */
  stop(): Promise<Record<string, unknown>[]>;
}

export async function scriptedLLM(steps: Step[]): Promise<ScriptedLLM> {
  const llm = spawn(PYTHON, ["-c", SERVE, JSON.stringify(steps)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: llm.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error("the scripted model ended before it said where it listens");
  return {
    url: first.value,
    async stop() {
      llm.stdin.end();
      const requests = await lines.next();
      return requests.done ? [] : (JSON.parse(requests.value) as Record<string, unknown>[]);
    },
  };
}
