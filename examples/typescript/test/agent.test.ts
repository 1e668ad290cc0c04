import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import {
  CORRECTABLE_LINE,
  FailureKind,
  RestartCause,
  Role,
  SidecarClient,
  sidecarServiceDefinition,
  type StreamModelEvent,
} from "@sidecar-dev/sidecar-client";
import { printEvents, runAgent } from "../src/agent.js";

const NOT_FOUND = `No document 'doc-404' exists.\n${CORRECTABLE_LINE}`;
const ANSWER = `answer after call_7 is_error=true: ${NOT_FOUND}`;
const TIMED_OUT = "The deadline passed: the stream had sent 1 delta.";

type Req = Record<string, any>;
type Handler = (call: { request: Req }, callback: grpc.sendUnaryData<unknown>) => void;
type StreamHandler = (call: grpc.ServerWritableStream<Req, unknown>) => void;

/** What the scripted model answers once a tool result is in: what the tool said, quoted. */
function answerTo(request: Req): string | undefined {
  const last = request.messages.at(-1);
  if (last.role !== Role.TOOL) return undefined;
  const r = last.toolResults[0];
  return `answer after ${r.callId} is_error=${r.isError}: ${r.content}`;
}

const toolCallReply = (text: string) => ({
  message: { role: Role.ASSISTANT, text, toolCalls: [{ id: "call_7", name: "fetch_doc", argumentsJson: '{"doc_id":"doc-404"}' }] },
});

/**
 * A false start, restarted, then the tool call in two fragments; then the answer in two halves.
 * Model "deadline" ends its answer with DEADLINE_EXCEEDED after one delta.
 */
const streamModel: StreamHandler = (call) => {
  const send = (...events: unknown[]) => events.forEach((e) => call.write(e));
  const answer = answerTo(call.request);
  if (answer === undefined) {
    send(
      { event: { case: "text", value: { text: "Let me " } } },
      { event: { case: "restart", value: { cause: RestartCause.UPSTREAM_FAULT, reason: "connection dropped", attempt: 2 } } },
      { event: { case: "text", value: { text: "Looking it up." } } },
      { event: { case: "toolCall", value: { index: 0, id: "call_7", name: "fetch_doc", argumentsFragment: '{"doc_id":' } } },
      { event: { case: "toolCall", value: { index: 0, argumentsFragment: '"doc-404"}' } } },
      { event: { case: "final", value: toolCallReply("Looking it up.") } },
    );
  } else if (call.request.model === "deadline") {
    send({ event: { case: "text", value: { text: answer.slice(0, 10) } } });
    call.emit("error", { code: grpc.status.DEADLINE_EXCEEDED, details: TIMED_OUT });
    return;
  } else {
    const half = Math.floor(answer.length / 2);
    send(
      { event: { case: "text", value: { text: answer.slice(0, half) } } },
      { event: { case: "text", value: { text: answer.slice(half) } } },
      { event: { case: "final", value: { message: { role: Role.ASSISTANT, text: answer } } } },
    );
  }
  call.end();
};

/** Asks for one tool call, then answers with what the tool said. */
const scripted: Record<string, Handler | StreamHandler> = {
  ListTools: (_c, cb) => cb(null, { tools: [{ definition: { name: "fetch_doc" } }] }),
  ListModels: (_c, cb) => cb(null, { models: [{ id: "scripted" }] }),
  CallModel: ({ request }, cb) => {
    const answer = answerTo(request);
    cb(null, answer === undefined ? toolCallReply("") : { message: { role: Role.ASSISTANT, text: answer } });
  },
  StreamModel: streamModel,
  ExecuteTool: ({ request }, cb) =>
    cb(null, {
      outcome: { case: "failure", value: { kind: FailureKind.RESOURCE_NOT_FOUND, correctable: true, explanation: NOT_FOUND } },
      modelText: NOT_FOUND,
      callId: request.callId,
    }),
  ClassifyFailure: (_c, cb) => cb(null, {}),
};

describe("the agent loop", () => {
  let server: grpc.Server;
  let client: SidecarClient;
  before(async () => {
    server = new grpc.Server();
    server.addService(sidecarServiceDefinition(), scripted);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    client = new SidecarClient(`127.0.0.1:${port}`);
  });
  after(() => {
    client.close();
    server.forceShutdown();
  });

  it("hands a tool's failure back to the model as model_text", async () => {
    const trace: string[] = [];
    const answer = await runAgent(client, "read doc-404", { trace: (l) => trace.push(l) });
    assert.equal(answer, ANSWER);
    assert.deepEqual(trace, ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]);
  });

  it("streamed, shows each event and voids what a restart voids", async () => {
    const trace: string[] = [];
    const screen = new Screen();
    const answer = await runAgent(client, "read doc-404", { trace: (l) => trace.push(l), show: (e) => screen.show(e) });
    assert.equal(answer, ANSWER);
    assert.deepEqual(trace, ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]);
    assert.deepEqual(screen.restarts, ["connection dropped"]);
    assert.deepEqual(screen.replies, ["Looking it up.", ANSWER]);
  });

  it("streamed, prints deltas as they come and marks a restart", async () => {
    let printed = "";
    await runAgent(client, "read doc-404", { show: printEvents((text) => (printed += text)) });
    assert.equal(printed, `Let me \n--- restarted (connection dropped): discard the text above ---\nLooking it up.\n${ANSWER}\n`);
  });

  it("streamed, ends with a stream's failure as callModel's", async () => {
    const screen = new Screen();
    await assert.rejects(
      runAgent(client, "read doc-404", { model: "deadline", show: (e) => screen.show(e) }),
      new Error(`turn 2: the model call failed (JOB_TIMEOUT, correctable=false): ${TIMED_OUT}`),
    );
    assert.equal(screen.current, ANSWER.slice(0, 10)); // what the stream had sent; no final came
  });
});

/** What a terminal keeps of each streamed reply: its text since its last restart. */
class Screen {
  readonly replies: string[] = [];
  readonly restarts: string[] = [];
  current = "";

  show(event: StreamModelEvent): void {
    const e = event.event;
    if (e.case === "text") this.current += e.value.text;
    else if (e.case === "restart") {
      this.restarts.push(e.value.reason);
      this.current = "";
    } else if (e.case === "final") {
      this.replies.push(this.current);
      this.current = "";
    }
  }
}

describe("the agent loop against a real sidecar", { skip: process.env.SIDECAR_ADDR ? false : "SIDECAR_ADDR is not set" }, () => {
  for (const streamed of [false, true]) {
    it(`answers after running a tool (${streamed ? "StreamModel" : "CallModel"})`, async () => {
      const client = new SidecarClient(process.env.SIDECAR_ADDR);
      const screen = new Screen();
      try {
        const trace: string[] = [];
        const answer = await runAgent(client, "Find what the documentation says about retries.", {
          model: process.env.SIDECAR_MODEL,
          trace: (l) => trace.push(l),
          maxTurns: 6,
          show: streamed ? (e) => screen.show(e) : undefined,
        });
        assert.ok(answer.length > 0);
        assert.match(trace[0] ?? "", /^turn 1: /);
        if (streamed) assert.equal(screen.replies.at(-1), answer);
      } finally {
        client.close();
      }
    });
  }
});
