/**
 * A minimal agent loop on the sidecar: call the model, run each tool call it
 * makes through ExecuteTool, hand model_text back, repeat until it answers.
 *
 *   SIDECAR_ADDR=127.0.0.1:50051 npm start -- "How does the sidecar retry rate limits?"
 */
import { pathToFileURL } from "node:url";
import {
  Role,
  SidecarClient,
  SidecarError,
  toolDefinitions,
  toolMessage,
  type CallModelInput,
  type ToolOutcome,
} from "@sidecar-dev/sidecar-client";

export interface AgentOptions {
  /** A catalog model id; the first in the catalog when omitted. */
  model?: string;
  maxTurns?: number;
  /** Each tool call's outcome, as it happens. */
  trace?: (line: string) => void;
  signal?: AbortSignal;
}

export async function runAgent(client: SidecarClient, task: string, options: AgentOptions = {}): Promise<string> {
  const { maxTurns = 8, trace = () => {}, signal } = options;
  const tools = toolDefinitions(await client.listTools({ signal }));
  const model = options.model ?? (await client.listModels({ signal }))[0]?.id;
  if (!model) throw new Error("the catalog has no model");
  const job = { jobId: `example-${Date.now()}` };
  const messages: NonNullable<CallModelInput["messages"]> = [{ role: Role.USER, text: task }];
  for (let turn = 1; turn <= maxTurns; turn++) {
    let reply;
    try {
      reply = await client.callModel({ model, messages, tools, job }, { signal, timeoutMs: 60_000 });
    } catch (err) {
      if (err instanceof SidecarError) {
        throw new Error(`turn ${turn}: the model call failed (${err.kindName}, correctable=${err.correctable}): ${err.message}`);
      }
      throw err;
    }
    const calls = reply.message?.toolCalls ?? [];
    if (calls.length === 0) return reply.message?.text ?? "";
    messages.push(reply.message!);
    const outcomes: ToolOutcome[] = [];
    for (const call of calls) {
      const outcome = await client.runToolCall(call, job, { signal }); // a tool's failure is an outcome
      trace(`turn ${turn}: ${call.name} -> ${outcome.isError ? `failure ${outcome.failure?.kindName}` : "result"}`);
      outcomes.push(outcome);
    }
    messages.push(toolMessage(outcomes)); // each model_text goes back as it is
  }
  throw new Error(`no answer after ${maxTurns} turns`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const client = new SidecarClient(process.env.SIDECAR_ADDR);
  const task = process.argv[2] ?? "Find what the documentation says about retries and summarise it.";
  runAgent(client, task, { model: process.env.SIDECAR_MODEL, trace: (line) => console.error(line) })
    .then((answer) => console.log(answer))
    .catch((err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      process.exitCode = 1;
    })
    .finally(() => client.close());
}
