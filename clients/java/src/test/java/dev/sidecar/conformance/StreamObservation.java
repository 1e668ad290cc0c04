package dev.sidecar.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import dev.sidecar.client.ModelStream;
import dev.sidecar.client.SidecarException;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.StreamModelEvent;
import dev.sidecar.v1.StreamRestart;

/**
 * What a StreamModel call showed (tests/conformance/README.md, "A StreamModel case"): the events'
 * kinds in order, the restarts, the stream's accumulated text, the final reply or the failure, and
 * (for {@code cancel_after_events}) whether the fake provider saw the sidecar leave.
 */
final class StreamObservation {
  /** How long the runner polls the fake provider for client_disconnected after a cancel. */
  static final Duration DISCONNECT_WAIT = Duration.ofSeconds(5);

  static final long DISCONNECT_POLL_MS = 20;

  static final Set<String> RESTART_KEYS = Set.of("cause", "reason", "attempt", "reason_contains");
  static final Set<String> FINAL_KEYS = Set.of("attempts", "corrections", "output_budget_raised", "finish_reason");
  static final Set<String> STREAM_DETAIL_KEYS = Set.of("partial_text", "reason", "deltas_sent", "reason_contains");

  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  final List<String> events = new ArrayList<>();
  final List<StreamRestart> restarts = new ArrayList<>();
  String text = "";
  CallModelResponse finalResponse;
  SidecarException failure;
  Boolean providerDisconnected;

  private StreamObservation() {}

  /**
   * Reads {@code stream} to its end (cancelling it after {@code cancelAfter} events, when not
   * null); a failure while reading is kept, not thrown.
   */
  static StreamObservation read(ModelStream stream, Integer cancelAfter, String provider, String model)
      throws IOException, InterruptedException {
    StreamObservation out = new StreamObservation();
    try (stream) {
      for (StreamModelEvent event : stream) {
        out.events.add(event.getEventCase().name().toLowerCase(Locale.ROOT));
        if (event.hasRestart()) {
          out.restarts.add(event.getRestart());
        }
        if (cancelAfter != null && out.events.size() == cancelAfter) {
          stream.cancel();
        }
      }
    } catch (SidecarException failed) {
      out.failure = failed;
    }
    out.text = stream.text();
    out.finalResponse = stream.finalResponse().orElse(null);
    if (cancelAfter != null) {
      out.providerDisconnected = providerDisconnected(provider, model);
    }
    return out;
  }

  /** Polls the fake provider until its last request for {@code model} records the client leaving. */
  private static boolean providerDisconnected(String provider, String model) throws IOException, InterruptedException {
    URI uri = URI.create(provider + "/_fake/requests?model=" + URLEncoder.encode(model, StandardCharsets.UTF_8));
    long deadline = System.nanoTime() + DISCONNECT_WAIT.toNanos();
    while (true) {
      HttpRequest request = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET().build();
      HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
      JsonArray records = JsonParser.parseString(response.body()).getAsJsonArray();
      if (records.size() > 0) {
        JsonElement left = records.get(records.size() - 1).getAsJsonObject().get("client_disconnected");
        if (left != null && left.isJsonPrimitive() && left.getAsBoolean()) {
          return true;
        }
      }
      if (System.nanoTime() >= deadline) {
        return false;
      }
      Thread.sleep(DISCONNECT_POLL_MS);
    }
  }

  @Override
  public String toString() {
    return "events=" + events + " text=" + quote(text) + " restarts=" + restarts.size()
        + (failure != null ? " failure=" + failure.kindName() : "");
  }

  // ---------------------------------------------------------------- judging

  /** Compares events, restarts, stream_text, final and provider_disconnected with {@code expect}. */
  void check(JsonObject expect, List<String> problems) {
    if (expect.has("events")) {
      List<String> want = new ArrayList<>();
      expect.getAsJsonArray("events").forEach(e -> want.add(e.getAsString()));
      same("events", want, events, problems);
    }
    if (expect.has("stream_text")) {
      same("stream_text", expect.get("stream_text").getAsString(), text, problems);
    }
    if (expect.has("provider_disconnected")) {
      same("provider_disconnected", expect.get("provider_disconnected").getAsBoolean(), providerDisconnected, problems);
    }
    if (expect.has("restarts")) {
      checkRestarts(expect.getAsJsonArray("restarts"), problems);
    }
    if (expect.has("final")) {
      checkFinal(expect.get("final"), problems);
    }
  }

  private void checkRestarts(JsonArray want, List<String> problems) {
    if (want.size() != restarts.size()) {
      problems.add("restarts: want " + want.size() + " restarts, got " + restarts.size() + ": " + restarts);
      return;
    }
    for (int i = 0; i < want.size(); i++) {
      JsonObject w = want.get(i).getAsJsonObject();
      StreamRestart g = restarts.get(i);
      String at = "restarts[" + i + "]";
      unknownKeys("expect." + at, w, RESTART_KEYS, problems);
      if (w.has("cause")) {
        same(at + ".cause", w.get("cause").getAsString(), g.getCause().name().replaceFirst("^RESTART_CAUSE_", ""), problems);
      }
      if (w.has("attempt")) {
        same(at + ".attempt", w.get("attempt").getAsInt(), g.getAttempt(), problems);
      }
      checkReason(at, w, g.getReason(), problems);
    }
  }

  private void checkFinal(JsonElement want, List<String> problems) {
    if (want.isJsonNull()) {
      if (finalResponse != null) {
        problems.add("final: want none, got one (attempts " + finalResponse.getAttempts() + ")");
      }
      return;
    }
    if (finalResponse == null) {
      problems.add("final: want " + want + ", got none");
      return;
    }
    JsonObject w = want.getAsJsonObject();
    unknownKeys("expect.final", w, FINAL_KEYS, problems);
    if (w.has("attempts")) {
      same("final.attempts", w.get("attempts").getAsInt(), finalResponse.getAttempts(), problems);
    }
    if (w.has("corrections")) {
      same("final.corrections", w.get("corrections").getAsInt(), finalResponse.getCorrections(), problems);
    }
    if (w.has("output_budget_raised")) {
      same(
          "final.output_budget_raised",
          w.get("output_budget_raised").getAsBoolean(),
          finalResponse.getOutputBudgetRaised(),
          problems);
    }
    if (w.has("finish_reason")) {
      String reason = finalResponse.getFinishReason().name().replaceFirst("^FINISH_REASON_", "");
      same("final.finish_reason", w.get("finish_reason").getAsString(), reason, problems);
    }
  }

  /** {@code expect.failure.stream}: null means absent, an object each given key. */
  static void checkDetail(JsonElement want, Failure got, List<String> problems) {
    if (want.isJsonNull()) {
      if (got.hasStream()) {
        problems.add("failure.stream: want absent, got " + got.getStream());
      }
      return;
    }
    if (!got.hasStream()) {
      problems.add("failure.stream: want " + want + ", got absent");
      return;
    }
    JsonObject w = want.getAsJsonObject();
    unknownKeys("expect.failure.stream", w, STREAM_DETAIL_KEYS, problems);
    if (w.has("partial_text")) {
      same("failure.stream.partial_text", w.get("partial_text").getAsString(), got.getStream().getPartialText(), problems);
    }
    if (w.has("deltas_sent")) {
      same("failure.stream.deltas_sent", w.get("deltas_sent").getAsInt(), got.getStream().getDeltasSent(), problems);
    }
    checkReason("failure.stream", w, got.getStream().getReason(), problems);
  }

  private static void checkReason(String where, JsonObject want, String got, List<String> problems) {
    if (want.has("reason")) {
      same(where + ".reason", want.get("reason").getAsString(), got, problems);
    }
    if (want.has("reason_contains") && !got.contains(want.get("reason_contains").getAsString())) {
      problems.add(where + ".reason: want it to contain " + quote(want.get("reason_contains").getAsString())
          + ", got " + quote(got));
    }
  }

  private static void unknownKeys(String where, JsonObject object, Set<String> known, List<String> problems) {
    for (String key : object.keySet()) {
      if (!known.contains(key)) {
        problems.add(where + ": unknown key '" + key + "' (the Java runner does not check it)");
      }
    }
  }

  private static void same(String what, Object want, Object got, List<String> problems) {
    if (!Objects.equals(want, got)) {
      problems.add(what + ": want " + quote(want) + ", got " + quote(got));
    }
  }

  private static String quote(Object value) {
    if (!(value instanceof String)) {
      return String.valueOf(value);
    }
    return "\"" + ((String) value).replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\"") + "\"";
  }
}
