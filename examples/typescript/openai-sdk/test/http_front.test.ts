// The official openai npm package against the sidecar's OpenAI-compatible front, as a real peer.
//
// Run by `make test` (clients/clients.mk) through tests/http_peer.py, which starts the fakes and
// a real sidecar with its HTTP port on and sets SIDECAR_HTTP_URL and FAKE_PROVIDER_URL:
//   .venv/bin/python tests/http_peer.py exec -- sh -c 'cd examples/typescript/openai-sdk && npm test'
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import OpenAI from "openai";

const base = process.env.SIDECAR_HTTP_URL;
const provider = process.env.FAKE_PROVIDER_URL;

/** The next answers of one upstream model of the fake provider. */
async function script(model: string, steps: object[]): Promise<void> {
  const answered = await fetch(`${provider}/_fake/script`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, steps }),
  });
  assert.equal(answered.status, 200, await answered.text());
}

type Sidecar = { kind?: string; attempts?: number; explanation?: string; correctable?: boolean };

function sidecarOf(value: unknown): Sidecar {
  return ((value as { sidecar?: Sidecar } | undefined)?.sidecar ?? {}) as Sidecar;
}

describe("the openai npm package against the sidecar", { skip: base ? false : "SIDECAR_HTTP_URL is not set" }, () => {
  // maxRetries 0: the sidecar retries beneath the SDK, within one budget (docs/http.md).
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
  const user = (content: string) => [{ role: "user" as const, content }];

  it("gets a plain reply, with the attempts it took", async () => {
    await script("fake-gpt", [{ preset: "rate_limit" }, {}]);
    const { data, response } = await client.chat.completions.create({ model: "gpt", messages: user("hello") }).withResponse();
    assert.equal(data.choices[0]?.message.content, "You said: hello");
    assert.equal(data.choices[0]?.finish_reason, "stop");
    assert.equal(response.headers.get("x-sidecar-attempts"), "2");
    assert.equal((data as unknown as { sidecar: Sidecar }).sidecar.attempts, 2);
  });

  it("streams a reply from an Anthropic model, chunk by chunk", async () => {
    const stream = await client.chat.completions.create({
      model: "claude",
      messages: user("one two three"),
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage += chunk.usage?.completion_tokens ?? 0;
    }
    assert.equal(text, "You said: one two three");
    assert.ok(usage > 0);
  });

  it("calls a tool and reads its result", async () => {
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "search",
          description: "Search the documents",
          parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
        },
      },
    ];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = user("retries");
    const first = await client.chat.completions.create({ model: "gpt", messages, tools });
    const choice = first.choices[0];
    assert.equal(choice?.finish_reason, "tool_calls");
    const call = choice?.message.tool_calls?.[0];
    assert.ok(call && call.type === "function");
    assert.equal(call.function.name, "search");
    assert.deepEqual(JSON.parse(call.function.arguments), { query: "retries" });
    messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: "doc-2: back off with jitter" });
    const second = await client.chat.completions.create({ model: "gpt", messages, tools });
    assert.equal(second.choices[0]?.message.content, "Based on the tool result: doc-2: back off with jitter");
  });

  it("gets structured output, corrected beneath it", async () => {
    await script("fake-gpt", [{ preset: "bad_json" }]);
    const schema = { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"] };
    const reply = await client.chat.completions.create({
      model: "gpt",
      messages: user("who?"),
      response_format: { type: "json_schema", json_schema: { name: "person", schema } },
    });
    const person = JSON.parse(reply.choices[0]?.message.content ?? "null") as { name: string; age: number };
    assert.equal(typeof person.name, "string");
    assert.equal(typeof person.age, "number");
    assert.equal((reply as unknown as { sidecar: { corrections: number } }).sidecar.corrections, 1);
  });

  it("reads rate limits the sidecar could not wait out as RateLimitError", async () => {
    await script("fake-gpt-limited", Array(4).fill({ preset: "rate_limit" }));
    const error = await client.chat.completions.create({ model: "gpt-limited", messages: user("hi") }).then(
      () => assert.fail("the call succeeded"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof OpenAI.RateLimitError, String(error));
    assert.equal(error.status, 429);
    assert.equal(error.headers.get("x-sidecar-attempts"), "4");
    assert.equal(error.headers.get("x-should-retry"), "false");
    const sidecar = sidecarOf(error.error);
    assert.equal(sidecar.kind, "UPSTREAM_RETRIES_EXHAUSTED");
    assert.equal(sidecar.correctable, false);
    assert.match(sidecar.explanation ?? "", /\[This error is not correctable/);
  });

  it("reads an overload it could not wait out as InternalServerError 503", async () => {
    await script("fake-gpt-overloaded", Array(4).fill({ preset: "overloaded" }));
    const error = await client.chat.completions.create({ model: "gpt-overloaded", messages: user("hi") }).then(
      () => assert.fail("the call succeeded"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof OpenAI.InternalServerError, String(error));
    assert.equal(error.status, 503);
    assert.equal(error.code, "overloaded");
  });

  it("reads an unknown model as NotFoundError and a bad request as BadRequestError", async () => {
    const missing = await client.chat.completions.create({ model: "nope", messages: user("hi") }).then(
      () => assert.fail("the call succeeded"),
      (e: unknown) => e,
    );
    assert.ok(missing instanceof OpenAI.NotFoundError, String(missing));
    assert.equal(sidecarOf(missing.error).kind, "MODEL_NOT_FOUND");
    const bad = await client.chat.completions.create({ model: "gpt", messages: user("hi"), n: 3 }).then(
      () => assert.fail("the call succeeded"),
      (e: unknown) => e,
    );
    assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
    assert.equal(bad.param, "n");
  });

  it("lists the catalog", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids, ["gpt", "claude", "gpt-limited", "gpt-overloaded"]);
  });
});
