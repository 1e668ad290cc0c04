package dev.sidecar.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.MessageOrBuilder;
import com.google.protobuf.util.JsonFormat;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import dev.sidecar.client.FailureKinds;
import dev.sidecar.client.SidecarClient;
import dev.sidecar.client.SidecarException;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ClassifyFailureRequest;
import dev.sidecar.v1.Compaction;
import dev.sidecar.v1.CompactionStep;
import dev.sidecar.v1.ExecuteToolRequest;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.Hop;
import dev.sidecar.v1.HttpDetail;

/**
 * The shared conformance cases ({@code tests/conformance/cases/*.json}) against a live sidecar,
 * through this client.
 *
 * <p>Excluded from a plain {@code mvn test}; {@code -Dconformance=true} runs it. It then needs
 * {@code CONFORMANCE_CASES}, {@code SIDECAR_ADDR}, {@code TOOL_BACKEND_URL} and {@code
 * FAKE_PROVIDER_URL}, and fails, never skips, when one is missing or no case is found.
 *
 * <p>Each case is one dynamic test, done as tests/conformance says: reset both fakes, post the
 * case's {@code setup} scripts, make the {@code before} calls, make the call, and compare the
 * observation (grpc_code, outcome, failure, result text, model text) with {@code expect}, whose
 * strings have {@code ${FAKE_PROVIDER_URL}} and {@code ${TOOL_BACKEND_URL}} replaced by this run's
 * URLs. A key this runner does not know, in the case or in {@code expect}, fails the case rather
 * than being ignored. With {@code CONFORMANCE_REPORT} set, each case's result is appended to that
 * file as one JSON line (tests/conformance/conformance_report.py).
 */
class ConformanceTest {
  /** The deadline of a call whose case names none (tests/conformance: DEFAULT_DEADLINE_MS). */
  static final Duration DEFAULT_DEADLINE = Duration.ofMillis(15_000);

  private static final Set<String> RPCS = Set.of("ExecuteTool", "CallModel", "ClassifyFailure", "StreamModel");
  private static final Set<String> CASE_KEYS =
      Set.of(
          "name", "description", "rpc", "setup", "before", "request", "deadline_ms", "cancel_after_events", "expect",
          "build");
  /** A Build case calls nothing: the client builds a request ({@link BuildObservation}). */
  private static final String BUILD = "Build";
  private static final Set<String> BUILD_EXPECT_KEYS = Set.of("request", "refused");
  private static final Set<String> SETUP_KEYS = Set.of("tool_backend", "provider");
  private static final Set<String> BEFORE_KEYS = Set.of("rpc", "request");
  private static final Set<String> EXPECT_KEYS =
      Set.of(
          "grpc_code", "outcome", "failure", "result_contains", "model_text_contains", "model_text", "served_by",
          "hops", "compaction", "events", "restarts", "stream_text", "final", "provider_disconnected");
  private static final Set<String> HOP_KEYS =
      Set.of("deployment", "kind", "attempts", "skipped", "reason", "reason_contains", "hedge", "cancelled");
  private static final Set<String> COMPACTION_KEYS =
      Set.of("trigger", "tokens_before", "tokens_after", "steps", "messages", "summarizer_calls");
  private static final Set<String> STEP_KEYS = Set.of("strategy", "turns", "tokens_before", "tokens_after");
  private static final Set<String> FAILURE_KEYS =
      Set.of(
          "kind",
          "correctable",
          "message",
          "explanation",
          "attempts",
          "detail",
          "message_contains",
          "explanation_contains",
          "http",
          "retry_after_seconds",
          "stream");
  private static final Set<String> HTTP_KEYS =
      Set.of("status_code", "service", "endpoint", "body", "retry_after_raw");

  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private static Path cases;
  private static String toolBackend;
  private static String provider;
  private static SidecarClient sidecar;

  @BeforeAll
  static void connect() {
    cases = Path.of(env("CONFORMANCE_CASES"));
    toolBackend = trimSlash(env("TOOL_BACKEND_URL"));
    provider = trimSlash(env("FAKE_PROVIDER_URL"));
    sidecar = SidecarClient.connect(env("SIDECAR_ADDR"));
  }

  @AfterAll
  static void disconnect() {
    if (sidecar != null) {
      sidecar.close();
    }
  }

  @TestFactory
  Stream<DynamicTest> everyCase() throws IOException {
    if (!Files.isDirectory(cases)) {
      fail("CONFORMANCE_CASES is not a folder: " + cases.toAbsolutePath());
    }
    List<Path> files;
    try (Stream<Path> listed = Files.list(cases)) {
      files = listed.filter(p -> p.toString().endsWith(".json")).sorted().collect(Collectors.toList());
    }
    if (files.isEmpty()) {
      fail("no *.json case in " + cases.toAbsolutePath());
    }
    Set<String> names = new HashSet<>();
    List<DynamicTest> tests = new ArrayList<>();
    for (Path file : files) {
      JsonObject spec = JsonParser.parseString(Files.readString(file, StandardCharsets.UTF_8)).getAsJsonObject();
      String name = spec.has("name") ? spec.get("name").getAsString() : file.getFileName().toString();
      if (!names.add(name)) {
        fail("duplicate case name '" + name + "' (" + file.getFileName() + ")");
      }
      String fileName = file.getFileName().toString();
      tests.add(
          DynamicTest.dynamicTest(name, file.toUri(), () -> reported(name, problems -> run(fileName, spec, problems))));
    }
    return tests.stream();
  }

  // ---------------------------------------------------------------- one case

  /** One case's body: it adds what differs to {@code problems} before it fails. */
  private interface CaseBody {
    void run(List<String> problems) throws Exception;
  }

  /** Runs a case and appends its result to {@code CONFORMANCE_REPORT}, when the harness set it. */
  private static void reported(String name, CaseBody body) throws Exception {
    long startMs = System.currentTimeMillis();
    List<String> problems = new ArrayList<>();
    boolean passed = false;
    try {
      body.run(problems);
      passed = true;
    } catch (Throwable e) {
      if (problems.isEmpty()) {
        problems.add(e.getClass().getSimpleName() + ": " + e.getMessage());
      }
      throw e;
    } finally {
      report(name, passed, problems, startMs);
    }
  }

  /** One line of CONFORMANCE_REPORT (tests/conformance/conformance_report.py). */
  private static void report(String name, boolean passed, List<String> problems, long startMs) throws IOException {
    String path = System.getenv("CONFORMANCE_REPORT");
    if (path == null || path.isEmpty()) {
      return;
    }
    JsonObject line = new JsonObject();
    line.addProperty("name", name);
    line.addProperty("passed", passed);
    JsonArray list = new JsonArray();
    problems.forEach(list::add);
    line.add("problems", list);
    line.addProperty("start_ms", startMs);
    line.addProperty("end_ms", System.currentTimeMillis());
    Files.writeString(
        Path.of(path),
        line + "\n",
        StandardCharsets.UTF_8,
        StandardOpenOption.CREATE,
        StandardOpenOption.APPEND);
  }

  private static void run(String file, JsonObject spec, List<String> problems) throws Exception {
    unknownKeys("case", spec, CASE_KEYS, problems);
    String rpc = required(spec, "rpc").getAsString();
    JsonObject request = required(spec, "request").getAsJsonObject();
    JsonObject expect = expand(required(spec, "expect")).getAsJsonObject();
    if (rpc.equals(BUILD)) {
      unknownKeys("expect", expect, BUILD_EXPECT_KEYS, problems);
      BuildObservation built = BuildObservation.build(request, required(spec, "build").getAsJsonObject(), cases);
      built.check(expect, problems);
      if (!problems.isEmpty()) {
        fail(file + ": " + problems.size() + " mismatch(es)\n  - " + String.join("\n  - ", problems) + "\n  observed: " + built);
      }
      return;
    }
    if (!RPCS.contains(rpc)) {
      fail(file + ": rpc must be one of " + RPCS + " or " + BUILD + ", not '" + rpc + "'");
    }
    unknownKeys("expect", expect, EXPECT_KEYS, problems);
    if (!expect.has("grpc_code")) {
      problems.add("expect: needs grpc_code");
    }
    Duration deadline =
        spec.has("deadline_ms") && !spec.get("deadline_ms").isJsonNull() && spec.get("deadline_ms").getAsLong() > 0
            ? Duration.ofMillis(spec.get("deadline_ms").getAsLong())
            : DEFAULT_DEADLINE;

    post(provider + "/_fake/reset", "{}");
    post(toolBackend + "/_fake/reset", "{}");
    if (spec.has("setup") && !spec.get("setup").isJsonNull()) {
      JsonObject setup = spec.getAsJsonObject("setup");
      unknownKeys("setup", setup, SETUP_KEYS, problems);
      for (JsonElement script : items(setup, "tool_backend")) {
        post(toolBackend + "/_fake/script", script.toString());
      }
      for (JsonElement script : items(setup, "provider")) {
        post(provider + "/_fake/script", script.toString());
      }
    }
    for (JsonElement entry : items(spec, "before")) {
      JsonObject before = entry.getAsJsonObject();
      unknownKeys("before[]", before, BEFORE_KEYS, problems);
      call(required(before, "rpc").getAsString(), required(before, "request").getAsJsonObject(), deadline, null);
    }

    Integer cancelAfter =
        spec.has("cancel_after_events") && !spec.get("cancel_after_events").isJsonNull()
            ? spec.get("cancel_after_events").getAsInt()
            : null;
    Observation got = call(rpc, request, deadline, cancelAfter);
    check(expect, got, problems);
    if (!problems.isEmpty()) {
      fail(
          file + ": " + problems.size() + " mismatch(es)\n  - " + String.join("\n  - ", problems) + "\n  observed: "
              + got);
    }
  }

  /** What a call produced, in the terms of a case's {@code expect}. */
  private static final class Observation {
    String grpcCode = "OK";
    String outcome;
    Failure failure;
    String resultText;
    String modelText;
    String servedBy = "";
    List<Hop> hops = List.of();
    Compaction compaction;
    StreamObservation stream;
    String raw = "";

    @Override
    public String toString() {
      return "grpc_code=" + grpcCode + " outcome=" + outcome + (stream != null ? " " + stream : "") + "\n  " + raw;
    }
  }

  /** One call; {@code cancelAfter}: a StreamModel cancelled after that many events (null: read to the end). */
  private static Observation call(String rpc, JsonObject requestJson, Duration deadline, Integer cancelAfter)
      throws Exception {
    String json = requestJson.toString();
    Observation out = new Observation();
    try {
      switch (rpc) {
        case "ExecuteTool":
          {
            ExecuteToolResponse response = sidecar.executeTool(parse(json, ExecuteToolRequest.getDefaultInstance()), deadline);
            out.raw = print(response);
            out.outcome = response.hasFailure() ? "failure" : "result";
            out.failure = response.hasFailure() ? response.getFailure() : null;
            out.resultText = response.hasResult() ? response.getResult().getContent() : null;
            out.modelText = response.getModelText();
            break;
          }
        case "CallModel":
          {
            CallModelResponse response = sidecar.callModel(parse(json, CallModelRequest.getDefaultInstance()), deadline);
            out.raw = print(response);
            out.outcome = "result";
            out.resultText = response.getMessage().getText();
            out.servedBy = response.getServedBy();
            out.hops = response.getHopsList();
            out.compaction = response.hasCompaction() ? response.getCompaction() : null;
            break;
          }
        case "StreamModel":
          {
            CallModelRequest request = parse(json, CallModelRequest.getDefaultInstance());
            out.stream =
                StreamObservation.read(sidecar.streamModel(request, deadline), cancelAfter, provider, request.getModel());
            out.outcome = "result";
            CallModelResponse response = out.stream.finalResponse;
            if (response != null) {
              out.raw = print(response);
              out.resultText = response.getMessage().getText();
              out.servedBy = response.getServedBy();
              out.hops = response.getHopsList();
              out.compaction = response.hasCompaction() ? response.getCompaction() : null;
            }
            if (out.stream.failure != null) {
              throw out.stream.failure;
            }
            break;
          }
        case "ClassifyFailure":
          {
            Failure failure = sidecar.classifyFailure(parse(json, ClassifyFailureRequest.getDefaultInstance()), deadline);
            out.raw = print(failure);
            out.outcome = failure.getKind() == FailureKind.FAILURE_KIND_UNSPECIFIED ? "result" : "failure";
            out.failure = failure;
            break;
          }
        default:
          fail("rpc must be one of " + RPCS + ", not '" + rpc + "'");
      }
    } catch (SidecarException error) {
      out.grpcCode = error.grpcCode().name();
      out.outcome = "failure";
      out.failure = error.failure();
      out.hops = error.hops();
      out.raw = error + "\n  " + print(error.failure());
    }
    return out;
  }

  // ---------------------------------------------------------------- judging

  private static void check(JsonObject expect, Observation got, List<String> problems) {
    if (expect.has("grpc_code")) {
      same("grpc_code", expect.get("grpc_code").getAsString(), got.grpcCode, problems);
    }
    if (expect.has("outcome")) {
      same("outcome", text(expect.get("outcome")), got.outcome, problems);
    }
    if (expect.has("failure")) {
      JsonElement want = expect.get("failure");
      if (want.isJsonNull()) {
        if (got.failure != null) {
          problems.add("failure: want absent, got " + print(got.failure));
        }
      } else if (got.failure == null) {
        problems.add("failure: want " + want + ", got absent");
      } else {
        checkFailure(want.getAsJsonObject(), got.failure, problems);
      }
    }
    contains("result_text", expect, "result_contains", got.resultText, problems);
    contains("model_text", expect, "model_text_contains", got.modelText, problems);
    if (expect.has("model_text")) {
      same("model_text", text(expect.get("model_text")), got.modelText, problems);
    }
    checkRoute(expect, got, problems);
    if (expect.has("compaction")) {
      checkCompaction(expect.get("compaction"), got.compaction, problems);
    }
    if (got.stream != null) {
      got.stream.check(expect, problems);
    } else if (expect.has("events") || expect.has("restarts") || expect.has("final")) {
      problems.add("expect: events, restarts and final are a StreamModel case's");
    }
  }

  /** served_by equal; hops as many as listed, each given key equal (reason_contains: a substring). */
  private static void checkRoute(JsonObject expect, Observation got, List<String> problems) {
    if (expect.has("served_by")) {
      same("served_by", text(expect.get("served_by")), got.servedBy, problems);
    }
    if (!expect.has("hops")) {
      return;
    }
    JsonArray want = expect.getAsJsonArray("hops");
    if (want.size() != got.hops.size()) {
      problems.add("hops: want " + want.size() + " hops, got " + got.hops.size() + ": " + got.hops);
      return;
    }
    for (int i = 0; i < want.size(); i++) {
      JsonObject w = want.get(i).getAsJsonObject();
      Hop g = got.hops.get(i);
      String at = "hops[" + i + "]";
      unknownKeys("expect." + at, w, HOP_KEYS, problems);
      if (w.has("deployment")) {
        same(at + ".deployment", text(w.get("deployment")), g.getDeployment(), problems);
      }
      if (w.has("kind")) {
        same(at + ".kind", text(w.get("kind")), FailureKinds.name(g.getKind()), problems);
      }
      if (w.has("attempts")) {
        same(at + ".attempts", w.get("attempts").getAsInt(), g.getAttempts(), problems);
      }
      if (w.has("skipped")) {
        same(at + ".skipped", w.get("skipped").getAsBoolean(), g.getSkipped(), problems);
      }
      if (w.has("reason")) {
        same(at + ".reason", text(w.get("reason")), g.getReason(), problems);
      }
      contains(at + ".reason", w, "reason_contains", g.getReason(), problems);
      if (w.has("hedge")) {
        same(at + ".hedge", w.get("hedge").getAsBoolean(), g.getHedge(), problems);
      }
      if (w.has("cancelled")) {
        same(at + ".cancelled", w.get("cancelled").getAsBoolean(), g.getCancelled(), problems);
      }
    }
  }

  /**
   * compaction: null absent; an object present with each given key equal, steps as many as listed
   * (each given key equal), messages equal as canonical proto3 JSON.
   */
  private static void checkCompaction(JsonElement want, Compaction got, List<String> problems) {
    if (want.isJsonNull()) {
      if (got != null) {
        problems.add("compaction: want none, got " + print(got));
      }
      return;
    }
    if (got == null) {
      problems.add("compaction: want " + want + ", got none");
      return;
    }
    JsonObject w = want.getAsJsonObject();
    unknownKeys("expect.compaction", w, COMPACTION_KEYS, problems);
    JsonObject g = new JsonObject();
    g.addProperty("trigger", got.getTrigger().name().replaceFirst("^COMPACTION_TRIGGER_", ""));
    g.addProperty("tokens_before", got.getTokensBefore());
    g.addProperty("tokens_after", got.getTokensAfter());
    g.addProperty("summarizer_calls", got.getSummarizerCalls());
    JsonArray messages = new JsonArray();
    got.getMessagesList().forEach(m -> messages.add(JsonParser.parseString(print(m))));
    g.add("messages", messages);
    for (String key : List.of("trigger", "tokens_before", "tokens_after", "summarizer_calls", "messages")) {
      if (w.has(key) && !sameJson(w.get(key), g.get(key))) {
        problems.add("compaction." + key + ": want " + w.get(key) + ", got " + g.get(key));
      }
    }
    if (!w.has("steps")) {
      return;
    }
    JsonArray steps = w.getAsJsonArray("steps");
    if (steps.size() != got.getStepsCount()) {
      problems.add("compaction.steps: want " + steps.size() + " steps, got " + got.getStepsCount() + ": " + got.getStepsList());
      return;
    }
    for (int i = 0; i < steps.size(); i++) {
      JsonObject ws = steps.get(i).getAsJsonObject();
      CompactionStep gs = got.getSteps(i);
      String at = "compaction.steps[" + i + "]";
      unknownKeys("expect." + at, ws, STEP_KEYS, problems);
      if (ws.has("strategy")) {
        same(at + ".strategy", text(ws.get("strategy")), gs.getStrategy().name().replaceFirst("^COMPACTION_STRATEGY_", ""), problems);
      }
      if (ws.has("turns")) {
        List<Integer> turns = new ArrayList<>();
        ws.getAsJsonArray("turns").forEach(t -> turns.add(t.getAsInt()));
        same(at + ".turns", turns, gs.getTurnsList(), problems);
      }
      if (ws.has("tokens_before")) {
        same(at + ".tokens_before", ws.get("tokens_before").getAsInt(), gs.getTokensBefore(), problems);
      }
      if (ws.has("tokens_after")) {
        same(at + ".tokens_after", ws.get("tokens_after").getAsInt(), gs.getTokensAfter(), problems);
      }
    }
  }

  /** JSON values equal, numbers by value (1 and 1.0 alike). */
  private static boolean sameJson(JsonElement a, JsonElement b) {
    if (a.isJsonPrimitive() && b.isJsonPrimitive() && a.getAsJsonPrimitive().isNumber() && b.getAsJsonPrimitive().isNumber()) {
      return a.getAsDouble() == b.getAsDouble();
    }
    return a.equals(b);
  }

  private static void checkFailure(JsonObject want, Failure got, List<String> problems) {
    unknownKeys("expect.failure", want, FAILURE_KEYS, problems);
    if (want.has("kind")) {
      same("failure.kind", text(want.get("kind")), FailureKinds.name(got.getKind()), problems);
    }
    if (want.has("correctable")) {
      same("failure.correctable", want.get("correctable").getAsBoolean(), got.getCorrectable(), problems);
    }
    if (want.has("message")) {
      same("failure.message", text(want.get("message")), got.getMessage(), problems);
    }
    if (want.has("explanation")) {
      same("failure.explanation", text(want.get("explanation")), got.getExplanation(), problems);
    }
    if (want.has("attempts")) {
      same("failure.attempts", want.get("attempts").getAsInt(), got.getAttempts(), problems);
    }
    if (want.has("detail")) {
      String detail =
          got.getDetailCase() == Failure.DetailCase.DETAIL_NOT_SET
              ? null
              : got.getDetailCase().name().toLowerCase(Locale.ROOT);
      same("failure.detail", text(want.get("detail")), detail, problems);
    }
    contains("failure.message", want, "message_contains", got.getMessage(), problems);
    contains("failure.explanation", want, "explanation_contains", got.getExplanation(), problems);
    if (want.has("http")) {
      JsonElement http = want.get("http");
      if (http.isJsonNull()) {
        if (got.hasHttp()) {
          problems.add("failure.http: want absent, got " + print(got.getHttp()));
        }
      } else if (!got.hasHttp()) {
        problems.add("failure.http: want " + http + ", got absent");
      } else {
        checkHttp(http.getAsJsonObject(), got.getHttp(), problems);
      }
    }
    if (want.has("stream")) {
      StreamObservation.checkDetail(want.get("stream"), got, problems);
    }
    if (want.has("retry_after_seconds")) {
      JsonElement seconds = want.get("retry_after_seconds");
      Double actual =
          got.hasRetryAfter() ? got.getRetryAfter().getSeconds() + got.getRetryAfter().getNanos() / 1e9 : null;
      if (seconds.isJsonNull()) {
        if (actual != null) {
          problems.add("failure.retry_after_seconds: want absent, got " + actual);
        }
      } else if (actual == null || Math.abs(actual - seconds.getAsDouble()) > 1e-3) {
        problems.add("failure.retry_after_seconds: want " + seconds + ", got " + actual);
      }
    }
  }

  private static void checkHttp(JsonObject want, HttpDetail got, List<String> problems) {
    unknownKeys("expect.failure.http", want, HTTP_KEYS, problems);
    if (want.has("status_code")) {
      same("failure.http.status_code", want.get("status_code").getAsInt(), got.getStatusCode(), problems);
    }
    if (want.has("service")) {
      same("failure.http.service", text(want.get("service")), got.getService(), problems);
    }
    if (want.has("endpoint")) {
      same("failure.http.endpoint", text(want.get("endpoint")), got.getEndpoint(), problems);
    }
    if (want.has("body")) {
      same("failure.http.body", text(want.get("body")), got.getBody(), problems);
    }
    if (want.has("retry_after_raw")) {
      String actual = got.hasRetryAfterRaw() ? got.getRetryAfterRaw() : null;
      same("failure.http.retry_after_raw", text(want.get("retry_after_raw")), actual, problems);
    }
  }

  // ---------------------------------------------------------------- plumbing

  /**
   * {@code value} with {@code ${FAKE_PROVIDER_URL}} and {@code ${TOOL_BACKEND_URL}} in its strings
   * replaced by this run's URLs (the fakes' ports change from run to run).
   */
  private static JsonElement expand(JsonElement value) {
    if (value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()) {
      String text =
          value.getAsString().replace("${FAKE_PROVIDER_URL}", provider).replace("${TOOL_BACKEND_URL}", toolBackend);
      return new JsonPrimitive(text);
    }
    if (value.isJsonArray()) {
      JsonArray out = new JsonArray();
      value.getAsJsonArray().forEach(item -> out.add(expand(item)));
      return out;
    }
    if (value.isJsonObject()) {
      JsonObject out = new JsonObject();
      value.getAsJsonObject().entrySet().forEach(entry -> out.add(entry.getKey(), expand(entry.getValue())));
      return out;
    }
    return value;
  }

  @SuppressWarnings("unchecked")
  private static <M extends Message> M parse(String json, M prototype) throws InvalidProtocolBufferException {
    Message.Builder builder = prototype.newBuilderForType();
    JsonFormat.parser().merge(json, builder);
    return (M) builder.build();
  }

  private static String print(MessageOrBuilder message) {
    try {
      return JsonFormat.printer().omittingInsignificantWhitespace().print(message);
    } catch (InvalidProtocolBufferException unprintable) {
      return message.toString();
    }
  }

  private static void post(String url, String body) throws IOException, InterruptedException {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(url))
            .timeout(Duration.ofSeconds(10))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
            .build();
    HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
    if (response.statusCode() / 100 != 2) {
      fail("POST " + url + " answered " + response.statusCode() + ": " + response.body() + "\n  sent: " + body);
    }
  }

  private static List<JsonElement> items(JsonObject object, String key) {
    if (!object.has(key) || object.get(key).isJsonNull()) {
      return List.of();
    }
    List<JsonElement> out = new ArrayList<>();
    object.getAsJsonArray(key).forEach(out::add);
    return out;
  }

  private static JsonElement required(JsonObject object, String key) {
    if (!object.has(key) || object.get(key).isJsonNull()) {
      fail("the case has no '" + key + "'");
    }
    return object.get(key);
  }

  private static String text(JsonElement value) {
    return value == null || value.isJsonNull() ? null : value.getAsString();
  }

  private static void unknownKeys(String where, JsonObject object, Set<String> known, List<String> problems) {
    for (String key : object.keySet()) {
      if (!known.contains(key)) {
        problems.add(where + ": unknown key '" + key + "' (the Java runner does not check it)");
      }
    }
  }

  private static void same(String what, Object want, Object got, List<String> problems) {
    if (want == null ? got != null : !want.equals(got)) {
      problems.add(what + ": want " + quote(want) + ", got " + quote(got));
    }
  }

  private static void contains(String what, JsonObject expect, String key, String got, List<String> problems) {
    if (expect.has(key)) {
      String part = text(expect.get(key));
      if (part != null && (got == null || !got.contains(part))) {
        problems.add(what + ": want it to contain " + quote(part) + ", got " + quote(got));
      }
    }
  }

  private static String quote(Object value) {
    if (!(value instanceof String)) {
      return String.valueOf(value);
    }
    return "\"" + ((String) value).replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\"") + "\"";
  }

  private static String env(String name) {
    String value = System.getenv(name);
    if (value == null || value.isBlank()) {
      fail(
          name + " is not set: the conformance run needs CONFORMANCE_CASES, SIDECAR_ADDR, TOOL_BACKEND_URL"
              + " and FAKE_PROVIDER_URL (without -Dconformance=true this test is not run at all)");
    }
    return value.trim();
  }

  private static String trimSlash(String url) {
    return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
  }
}
