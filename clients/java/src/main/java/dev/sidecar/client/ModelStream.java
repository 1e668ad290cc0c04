package dev.sidecar.client;

import io.grpc.Context;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Supplier;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.ReasoningDelta;
import dev.sidecar.v1.ReasoningPart;
import dev.sidecar.v1.StreamModelEvent;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallDelta;

/**
 * One StreamModel call: the reply as the model writes it, read once, like a {@code
 * DirectoryStream}. Close it (try-with-resources) to cancel the RPC when leaving early.
 *
 * <pre>{@code
 * try (ModelStream stream = sidecar.streamModel(request, Duration.ofMinutes(2))) {
 *   for (StreamModelEvent event : stream) {         // a break, then close(), cancels the RPC
 *     if (event.hasRestart()) { ... }               // what came before is void
 *     if (event.hasText()) System.out.print(event.getText().getText());
 *   }
 *   CallModelResponse reply = stream.finalResponse().orElseThrow();
 * }
 * }</pre>
 *
 * <p>What the stream keeps while it is read:
 *
 * <pre>
 * event       text / toolCalls / reasoning            restarts   finalResponse
 * text        text += delta                           -          -
 * tool_call   toolCalls[index] grows by the fragment  -          -
 * reasoning   reasoning[index]: text += delta; its    -          -
 *             signature / redacted data when they come
 * restart     all emptied: what came before is void   += 1       -
 * final       -                                       -          the whole reply
 * </pre>
 *
 * <p>To pass the reasoning back on the next turn, add {@code Messages.assistant(reply)}: the final
 * reply's reasoning is the same, with the wire format that made it.
 *
 * <p>A failure is thrown by {@code hasNext()} / {@code next()} as the {@link SidecarException}
 * {@code callModel} throws for it, after every event sent before it (and again on each later
 * call); STREAM_INTERRUPTED is a {@link StreamInterruptedException} carrying the partial text.
 * {@link #cancel()} (from any thread), {@link #close()}, or cancelling the {@link Context} the
 * stream was opened in cancels the RPC; a read blocked on it then throws JOB_CANCELLED.
 */
public final class ModelStream implements Iterable<StreamModelEvent>, AutoCloseable {
  /** The message of the SYSTEM failure {@link #collect()} throws when no final event came. */
  public static final String NO_FINAL_MESSAGE = "The StreamModel stream ended without its final event.";

  private final Context.CancellableContext context;
  private final Iterator<StreamModelEvent> events;
  private final StringBuilder text = new StringBuilder();
  private final TreeMap<Integer, ToolCall.Builder> toolCalls = new TreeMap<>();
  private final TreeMap<Integer, ReasoningPart.Builder> reasoning = new TreeMap<>();
  private final Reader reader = new Reader();
  private int restarts;
  private CallModelResponse finalResponse;
  private SidecarException failure;
  private boolean ended;
  private boolean iterated;

  /** Opens the call ({@code open}: the blocking stub's) in a cancellable child of the current context. */
  ModelStream(Supplier<Iterator<StreamModelEvent>> open) {
    this.context = Context.current().withCancellation();
    Context previous = context.attach();
    try {
      this.events = open.get();
    } catch (StatusRuntimeException failed) {
      context.cancel(failed);
      throw SidecarException.fromThrowable(failed);
    } finally {
      context.detach(previous);
    }
  }

  /** The events, once: a second call throws {@link IllegalStateException}. */
  @Override
  public Iterator<StreamModelEvent> iterator() {
    if (iterated) {
      throw new IllegalStateException("a ModelStream is read once");
    }
    iterated = true;
    return reader;
  }

  /** Reads the rest of the stream and returns the final reply ({@link #text()} holds its text). */
  public CallModelResponse collect() {
    while (reader.hasNext()) {
      reader.next();
    }
    if (finalResponse == null) {
      Failure noFinal =
          Failure.newBuilder()
              .setKind(FailureKind.FAILURE_KIND_SYSTEM)
              .setMessage(NO_FINAL_MESSAGE)
              .setExplanation(FailureKinds.explanation(NO_FINAL_MESSAGE, false))
              .build();
      throw SidecarException.fromFailure(noFinal);
    }
    return finalResponse;
  }

  /** The text since the last restart, joined. */
  public String text() {
    return text.toString();
  }

  /** The tool calls assembled from their fragments since the last restart, by index. */
  public List<ToolCall> toolCalls() {
    List<ToolCall> calls = new ArrayList<>(toolCalls.size());
    toolCalls.values().forEach(call -> calls.add(call.build()));
    return calls;
  }

  /** The reasoning parts assembled from their deltas since the last restart, by index. */
  public List<ReasoningPart> reasoning() {
    List<ReasoningPart> parts = new ArrayList<>(reasoning.size());
    reasoning.values().forEach(part -> parts.add(part.build()));
    return parts;
  }

  /** The number of restart events received. */
  public int restarts() {
    return restarts;
  }

  /** The whole reply, as {@code callModel} returns it; empty until the final event. */
  public Optional<CallModelResponse> finalResponse() {
    return Optional.ofNullable(finalResponse);
  }

  /** Cancels the RPC (from any thread); nothing once it has ended. */
  public void cancel() {
    context.cancel(null);
  }

  /** Cancels the RPC if it is still running. */
  @Override
  public void close() {
    cancel();
  }

  private void absorb(StreamModelEvent event) {
    switch (event.getEventCase()) {
      case TEXT:
        text.append(event.getText().getText());
        break;
      case TOOL_CALL:
        ToolCallDelta delta = event.getToolCall();
        ToolCall.Builder call = toolCalls.computeIfAbsent(delta.getIndex(), index -> ToolCall.newBuilder());
        if (call.getId().isEmpty()) {
          call.setId(delta.getId());
        }
        if (call.getName().isEmpty()) {
          call.setName(delta.getName());
        }
        call.setArgumentsJson(call.getArgumentsJson() + delta.getArgumentsFragment());
        break;
      case REASONING:
        ReasoningDelta piece = event.getReasoning();
        ReasoningPart.Builder part = reasoning.computeIfAbsent(piece.getIndex(), index -> ReasoningPart.newBuilder());
        part.setText(part.getText() + piece.getText());
        if (!piece.getSignature().isEmpty()) {
          part.setSignature(piece.getSignature());
        }
        if (!piece.getRedactedData().isEmpty()) {
          part.setRedactedData(piece.getRedactedData());
        }
        break;
      case RESTART:
        text.setLength(0);
        toolCalls.clear();
        reasoning.clear();
        restarts++;
        break;
      case FINAL:
        finalResponse = event.getFinal();
        break;
      default:
        break;
    }
  }

  /** The one iterator: the generated blocking iterator, its failures rebuilt. */
  private final class Reader implements Iterator<StreamModelEvent> {
    @Override
    public boolean hasNext() {
      if (failure != null) {
        throw failure;
      }
      if (ended) {
        return false;
      }
      try {
        if (events.hasNext()) {
          return true;
        }
      } catch (StatusRuntimeException failed) {
        failure = SidecarException.fromThrowable(failed);
        context.cancel(null);
        throw failure;
      }
      ended = true;
      context.cancel(null); // releases the context; the call has ended
      return false;
    }

    @Override
    public StreamModelEvent next() {
      if (!hasNext()) {
        throw new NoSuchElementException("the stream has ended");
      }
      StreamModelEvent event = events.next();
      absorb(event);
      return event;
    }
  }
}
