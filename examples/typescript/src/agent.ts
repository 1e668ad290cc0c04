/**
 * A minimal agent loop on the sidecar: call the model, run each tool call it
 * makes through ExecuteTool, hand model_text back, repeat until it answers.
 * With --stream each reply is streamed (StreamModel) and printed as it is
 * written; a restart event voids what was printed since the last one, and the
 * final reply is what the loop uses.
 *
 *   SIDECAR_ADDR=127.0.0.1:50051 npm start -- "How does the sidecar retry rate limits?"
 *   SIDECAR_ADDR=127.0.0.1:50051 npm start -- --stream "..."
 */
import { pathToFileURL } from "node:url";
import {
  Role,
  SidecarClient,
  SidecarError,
  toolDefinitions,
  toolMessage,
  type CallModelInput,
  type CallModelResponse,
  type StreamModelEvent,
  type ToolOutcome,
} from "@sidecar-dev/sidecar-client";

export interface AgentOptions {
  /** A catalog model id; the first in the catalog when omitted. */
  model?: string;
  maxTurns?: number;
  /** Each tool call's outcome, as it happens. */
  trace?: (line: string) => void;
  /** With it, each reply is streamed (StreamModel) and every event goes to it as it arrives. */
  show?: (event: StreamModelEvent) => void;
  signal?: AbortSignal;
}

/** Each model call's deadline; the retries beneath stay within it. */
const MODEL_TIMEOUT_MS = 60_000;

export async function runAgent(client: SidecarClient, task: string, options: AgentOptions = {}): Promise<string> {
  const { maxTurns = 8, trace = () => {}, show, signal } = options;
  const tools = toolDefinitions(await client.listTools({ signal }));
  const model = options.model ?? (await client.listModels({ signal }))[0]?.id;
  if (!model) throw new Error("the catalog has no model");
  const job = { jobId: `example-${Date.now()}` };
  const messages: NonNullable<CallModelInput["messages"]> = [{ role: Role.USER, text: task }];
  for (let turn = 1; turn <= maxTurns; turn++) {
    let reply;
    try {
      reply = await modelReply(client, { model, messages, tools, job }, { signal, timeoutMs: MODEL_TIMEOUT_MS }, show);
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

/**
 * One model call: callModel, or streamModel with each event shown as it comes. A stream's failure
 * rejects with the SidecarError callModel rejects with.
 */
async function modelReply(
  client: SidecarClient,
  request: CallModelInput,
  options: { signal?: AbortSignal; timeoutMs: number },
  show?: (event: StreamModelEvent) => void,
): Promise<CallModelResponse> {
  if (!show) return client.callModel(request, options);
  const stream = client.streamModel(request, options);
  for await (const event of stream) show(event);
  return stream.collect(); // the whole reply, whatever restarts came before it
}

/** Shows a stream on a terminal: text as it comes; a restart voids what was printed, and says so. */
export function printEvents(write: (text: string) => void): (event: StreamModelEvent) => void {
  return (event) => {
    const e = event.event;
    if (e.case === "text") write(e.value.text);
    else if (e.case === "restart") write(`\n--- restarted (${e.value.reason}): discard the text above ---\n`);
    else if (e.case === "final" && e.value.message?.text) write("\n"); // the reply's last line ends
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const client = new SidecarClient(process.env.SIDECAR_ADDR);
  const args = process.argv.slice(2);
  const streamed = args.includes("--stream");
  const task = args.find((a) => a !== "--stream") ?? "Find what the documentation says about retries and summarise it.";
  const show = streamed ? printEvents((text) => process.stdout.write(text)) : undefined;
  runAgent(client, task, { model: process.env.SIDECAR_MODEL, trace: (line) => console.error(line), show })
    .then((answer) => {
      if (!streamed) console.log(answer); // streamed, it has been printed as it came
    })
    .catch((err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      process.exitCode = 1;
    })
    .finally(() => client.close());
}
