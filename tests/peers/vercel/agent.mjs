// The Vercel AI SDK (`ai` + a provider package) as a peer of the sidecar's HTTP port.
//
//   node agent.mjs <sidecar HTTP url> generate|stream|resend [compatible|openai|anthropic]
//
// The model is one of the sidecar's fronts, through the provider package named last (each at its defaults):
// `compatible` (the default) is @ai-sdk/openai-compatible's chat model on <url>/v1/chat/completions,
// `openai` is @ai-sdk/openai's default model, which speaks the Responses API (<url>/v1/responses), and
// `anthropic` is @ai-sdk/anthropic's (<url>/v1/messages; its tools carry `eager_input_streaming: true`).
// The tools are the sidecar's own,
// listed and called over its MCP front (<url>/mcp, JSON-RPC tools/list and tools/call). A tool whose
// call the sidecar answers with isError goes back to the model as the SDK's error-text output: the
// sidecar's model_text, byte for byte (a thrown Error would reach the model as "Error: ..."). Runs generateText or streamText with a tool loop and prints
// one JSON line: what the run saw. tests/peers/test_peer_vercel_ai.py drives it. `resend` is one generateText
// with no tools and the SDK's default retries (2, re-sending a 429 or 5xx 2 s, then 4 s, apart): it prints
// each try's status and x-sidecar-replayed header (tests/fronts/test_http_resends.py).
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";

const [base, mode, providerName = "compatible"] = process.argv.slice(2);
const providers = {
  compatible: () => createOpenAICompatible({ name: "sidecar", baseURL: `${base}/v1`, apiKey: "unused-by-the-sidecar" }).chatModel("gpt"),
  openai: () => createOpenAI({ baseURL: `${base}/v1`, apiKey: "unused-by-the-sidecar" })("gpt"),
  anthropic: () => createAnthropic({ baseURL: `${base}/v1`, apiKey: "unused-by-the-sidecar" })("claude"),
};
if (!base || !["generate", "stream", "resend"].includes(mode) || !(providerName in providers)) {
  console.error("usage: node agent.mjs <sidecar HTTP url> generate|stream|resend [compatible|openai|anthropic]");
  process.exit(2);
}
const model = providers[providerName]();

if (mode === "resend") {
  try {
    await generateText({ model, prompt: "hi" }); // maxRetries left at its default
    console.log(JSON.stringify({ statuses: [], replayed: [] }));
  } catch (error) {
    const tries = error.errors ?? [error]; // a RetryError holds every try's error
    const statuses = tries.map((e) => e.statusCode ?? null);
    const replayed = tries.map((e) => e.responseHeaders?.["x-sidecar-replayed"] ?? null);
    console.log(JSON.stringify({ statuses, replayed }));
  }
  process.exit(0);
}

let rpcId = 0;
async function mcp(method, params) {
  const response = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`MCP ${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

const wanted = new Set(["fetch", "fail_fetch"]);
const failures = []; // the sidecar's model_text of each failed call, in order
const { tools: listed } = await mcp("tools/list", {});
const tools = Object.fromEntries(
  listed
    .filter((t) => wanted.has(t.name))
    .map((t) => [
      t.name,
      tool({
        description: t.description,
        inputSchema: jsonSchema(t.inputSchema),
        execute: async (args) => {
          const result = await mcp("tools/call", { name: t.name, arguments: args });
          const text = result.content.map((c) => c.text).join("");
          if (result.isError) failures.push(text);
          return { text, isError: result.isError };
        },
        toModelOutput: ({ output }) => ({ type: output.isError ? "error-text" : "text", value: output.text }),
      }),
    ]),
);

const common = { model, tools, stopWhen: stepCountIs(5), maxRetries: 0, prompt: "read doc-1" };

function stepsOf(steps) {
  return steps.map((s) => ({
    finishReason: s.finishReason,
    toolCalls: s.toolCalls.map((c) => c.toolName),
    toolErrors: s.toolResults.filter((r) => r.output.isError).map((r) => r.output.text),
  }));
}

if (mode === "generate") {
  const run = await generateText(common);
  console.log(JSON.stringify({ text: run.text, steps: stepsOf(run.steps), failures }));
} else {
  const run = streamText(common);
  const deltas = [];
  for await (const delta of run.textStream) deltas.push(delta);
  const steps = stepsOf(await run.steps);
  console.log(JSON.stringify({ text: deltas.join(""), deltas: deltas.length, steps, failures }));
}
