import { create } from "@bufbuild/protobuf";
import {
  MessageSchema,
  Role,
  ToolCallResultSchema,
  type ExecuteToolResponse,
  type Message,
  type ToolCallResult,
  type ToolResult,
} from "./gen/sidecar/v1/sidecar_pb.js";
import { SidecarError } from "./errors.js";

/** A tool-result message of the OpenAI chat format. */
export interface OpenAIToolMessage {
  role: "tool";
  tool_call_id: string;
  content: string;
}

/** A tool_result content block of the Anthropic Messages format; is_error only on failure. */
export interface AnthropicToolResult {
  type: "tool_result";
  tool_use_id: string;
  content: string;
  is_error?: true;
}

/**
 * The outcome of one ExecuteTool call: a result or a failure. Either way
 * `modelText` is exactly what goes back to the model.
 */
export class ToolOutcome {
  /** The sidecar's answer as received. */
  readonly response: ExecuteToolResponse;
  /** The model's tool-call id the outcome answers. */
  readonly callId: string;
  /** The tool that ran. */
  readonly toolName: string;

  constructor(response: ExecuteToolResponse, callId = "", toolName = "") {
    this.response = response;
    this.callId = response.callId || callId;
    this.toolName = toolName;
  }

  /** What the agent hands back to the model: the result content, or the failure's explanation. */
  get modelText(): string {
    return this.response.modelText;
  }

  /** True when the tool failed. */
  get isError(): boolean {
    return this.response.outcome.case === "failure";
  }

  /** The tool's answer; undefined when it failed. */
  get result(): ToolResult | undefined {
    return this.response.outcome.case === "result" ? this.response.outcome.value : undefined;
  }

  /** The tool's failure as a SidecarError (grpcCode OK: the RPC succeeded); undefined on success. */
  get failure(): SidecarError | undefined {
    return this.response.outcome.case === "failure" ? SidecarError.fromFailure(this.response.outcome.value) : undefined;
  }

  /** Upstream attempts made (0 when refused before sending). */
  get attempts(): number {
    return this.response.attempts;
  }

  /** {"role":"tool","tool_call_id":..,"content":modelText}. */
  toOpenAI(): OpenAIToolMessage {
    return { role: "tool", tool_call_id: this.callId, content: this.modelText };
  }

  /** {"type":"tool_result","tool_use_id":..,"content":modelText} plus "is_error":true on failure. */
  toAnthropic(): AnthropicToolResult {
    const block: AnthropicToolResult = { type: "tool_result", tool_use_id: this.callId, content: this.modelText };
    if (this.isError) block.is_error = true;
    return block;
  }

  /** The sidecar.v1.ToolCallResult to hand back through CallModel. */
  toToolCallResult(): ToolCallResult {
    return create(ToolCallResultSchema, {
      callId: this.callId,
      content: this.modelText,
      isError: this.isError,
      name: this.toolName,
    });
  }
}

/** One ROLE_TOOL message answering every outcome, for the next CallModel. */
export function toolMessage(outcomes: readonly ToolOutcome[]): Message {
  return create(MessageSchema, {
    role: Role.TOOL,
    toolResults: outcomes.map((o) => o.toToolCallResult()),
  });
}
