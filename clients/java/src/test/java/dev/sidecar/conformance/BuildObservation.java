package dev.sidecar.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import dev.sidecar.client.Messages;
import dev.sidecar.client.Parts;
import dev.sidecar.client.Requests;
import dev.sidecar.v1.CacheTtl;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.ImageDetail;
import dev.sidecar.v1.Part;
import dev.sidecar.v1.ReasoningEffort;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallResult;

/**
 * A Build case (tests/conformance/README.md, "A Build case"): the request this client's builders
 * ({@link Messages}, {@link Parts}, {@link Requests}) make of a language-neutral description,
 * compared with the case's as protos. Nothing is called.
 */
final class BuildObservation {
  /** The request built; null when a builder refused (then {@link #refused} says why). */
  final CallModelRequest request;
  final String refused;

  private BuildObservation(CallModelRequest request, String refused) {
    this.request = request;
    this.refused = refused;
  }

  static BuildObservation build(JsonObject base, JsonObject build, Path cases) throws Exception {
    Path files = cases.resolve("files");
    CallModelRequest.Builder request = CallModelRequest.newBuilder();
    JsonFormat.parser().merge(base.toString(), request);
    try {
      for (JsonElement step : items(build, "messages")) {
        request.addMessages(step(step.getAsJsonObject(), files));
      }
      if (build.has("options")) {
        options(request, build.getAsJsonObject("options"));
      }
    } catch (IllegalArgumentException refused) {
      return new BuildObservation(null, refused.getClass().getSimpleName() + ": " + refused.getMessage());
    }
    return new BuildObservation(request.build(), null);
  }

  private static dev.sidecar.v1.Message step(JsonObject step, Path files) throws Exception {
    if (step.has("assistant")) {
      CallModelResponse reply = parse(step.get("assistant"), CallModelResponse.newBuilder());
      return Messages.assistant(reply);
    }
    if (step.has("tool_results")) {
      List<ToolCallResult> results = new ArrayList<>();
      for (JsonElement item : step.getAsJsonArray("tool_results")) {
        JsonObject r = item.getAsJsonObject();
        ToolCall call = parse(r.get("call"), ToolCall.newBuilder());
        ExecuteToolResponse outcome =
            r.has("outcome") ? parse(r.get("outcome"), ExecuteToolResponse.newBuilder()) : null;
        List<Part> images = new ArrayList<>();
        for (JsonElement image : items(r, "images")) {
          images.add(image(image.getAsJsonObject(), files));
        }
        Part[] given = images.toArray(new Part[0]);
        if (outcome != null) {
          results.add(Messages.toolResult(call, outcome, given));
        } else {
          boolean isError = r.has("is_error") && r.get("is_error").getAsBoolean();
          results.add(Messages.toolResult(call, r.get("content").getAsString(), isError, given));
        }
      }
      return Messages.toolResults(results);
    }
    Messages.User user = Messages.user(step.get("user").getAsString());
    for (JsonElement doc : items(step, "documents")) {
      JsonObject s = doc.getAsJsonObject();
      if (plain(s, "media_type", "title", "cache")) {
        if (s.has("file")) {
          user.document(files.resolve(s.get("file").getAsString()));
        } else if (s.has("url")) {
          user.documentUrl(s.get("url").getAsString());
        } else if (s.has("text")) {
          user.textDocument(s.get("text").getAsString(), "");
        } else {
          user.document(bytes(s), null);
        }
      } else {
        user.document(document(s, files));
      }
    }
    for (JsonElement image : items(step, "images")) {
      JsonObject s = image.getAsJsonObject();
      if (plain(s, "media_type", "detail", "cache")) {
        if (s.has("file")) {
          user.image(files.resolve(s.get("file").getAsString()));
        } else if (s.has("url")) {
          user.imageUrl(s.get("url").getAsString());
        } else {
          user.image(bytes(s), null);
        }
      } else {
        user.image(image(s, files));
      }
    }
    for (JsonElement item : items(step, "parts")) {
      JsonObject p = item.getAsJsonObject();
      if (p.has("image")) {
        user.part(image(p.getAsJsonObject("image"), files));
      } else if (p.has("document")) {
        user.part(document(p.getAsJsonObject("document"), files));
      } else {
        Part text = Parts.text(p.get("text").getAsString());
        user.part(p.has("cache") ? Parts.cached(text, ttl(p.get("cache"))) : text);
      }
    }
    if (step.has("cache")) {
      user.cache(ttl(step.get("cache")));
    }
    return user.build();
  }

  private static Part image(JsonObject s, Path files) {
    String mediaType = s.has("media_type") ? s.get("media_type").getAsString() : null;
    Part part;
    if (s.has("file")) {
      part = Parts.image(files.resolve(s.get("file").getAsString()));
    } else if (s.has("url")) {
      part = Parts.imageUrl(s.get("url").getAsString());
      if (mediaType != null) {
        part = part.toBuilder().setImage(part.getImage().toBuilder().setMediaType(mediaType)).build();
      }
    } else {
      part = Parts.image(bytes(s), mediaType);
    }
    if (s.has("detail")) {
      part = Parts.withDetail(part, DETAILS.get(s.get("detail").getAsString()));
    }
    return s.has("cache") ? Parts.cached(part, ttl(s.get("cache"))) : part;
  }

  private static Part document(JsonObject s, Path files) {
    String mediaType = s.has("media_type") ? s.get("media_type").getAsString() : null;
    String title = s.has("title") ? s.get("title").getAsString() : "";
    Part part;
    if (s.has("text")) {
      part = Parts.textDocument(s.get("text").getAsString(), title);
    } else if (s.has("file")) {
      part = Parts.withTitle(Parts.document(files.resolve(s.get("file").getAsString())), title);
    } else if (s.has("url")) {
      part = Parts.withTitle(Parts.documentUrl(s.get("url").getAsString()), title);
      if (mediaType != null) {
        part = part.toBuilder().setDocument(part.getDocument().toBuilder().setMediaType(mediaType)).build();
      }
    } else {
      part = Parts.withTitle(Parts.document(bytes(s), mediaType), title);
    }
    return s.has("cache") ? Parts.cached(part, ttl(s.get("cache"))) : part;
  }

  private static final Map<String, ImageDetail> DETAILS =
      Map.of("auto", ImageDetail.IMAGE_DETAIL_AUTO, "low", ImageDetail.IMAGE_DETAIL_LOW, "high", ImageDetail.IMAGE_DETAIL_HIGH);
  private static final Map<String, ReasoningEffort> EFFORTS =
      Map.of(
          "minimal", ReasoningEffort.REASONING_EFFORT_MINIMAL,
          "low", ReasoningEffort.REASONING_EFFORT_LOW,
          "medium", ReasoningEffort.REASONING_EFFORT_MEDIUM,
          "high", ReasoningEffort.REASONING_EFFORT_HIGH);

  /** The neutral options through {@link Requests} and the generated builder's setters. */
  private static void options(CallModelRequest.Builder request, JsonObject options) {
    for (Map.Entry<String, JsonElement> option : options.entrySet()) {
      JsonElement v = option.getValue();
      switch (option.getKey()) {
        case "reasoning":
          if (v.getAsJsonPrimitive().isString()) {
            request.setReasoning(Requests.reasoningEffort(EFFORTS.get(v.getAsString())));
          } else {
            request.setReasoning(Requests.reasoningBudget(v.getAsInt()));
          }
          break;
        case "tool_choice":
          request.setToolChoice(Requests.toolChoice(v.getAsString()));
          break;
        case "parallel_tool_calls":
          request.setParallelToolCalls(v.getAsBoolean());
          break;
        case "stop":
          v.getAsJsonArray().forEach(s -> request.addStop(s.getAsString()));
          break;
        case "top_p":
          request.setTopP(v.getAsDouble());
          break;
        case "top_k":
          request.setTopK(v.getAsInt());
          break;
        case "seed":
          request.setSeed(v.getAsLong());
          break;
        case "presence_penalty":
          request.setPresencePenalty(v.getAsDouble());
          break;
        case "frequency_penalty":
          request.setFrequencyPenalty(v.getAsDouble());
          break;
        case "end_user":
          request.setEndUser(v.getAsString());
          break;
        case "system_cache":
          request.setSystemCache(Requests.cache(ttl(v)));
          break;
        case "provider_options":
          request.setProviderOptionsJson(Requests.providerOptions(javaMap(v.getAsJsonObject())));
          break;
        default:
          throw new IllegalStateException("unknown option " + option.getKey());
      }
    }
  }

  /** A JSON object as maps, lists, strings, booleans and (whole) numbers, in its order. */
  private static Map<String, Object> javaMap(JsonObject object) {
    Map<String, Object> out = new LinkedHashMap<>();
    object.entrySet().forEach(e -> out.put(e.getKey(), javaValue(e.getValue())));
    return out;
  }

  private static Object javaValue(JsonElement value) {
    if (value.isJsonObject()) {
      return javaMap(value.getAsJsonObject());
    }
    if (value.isJsonArray()) {
      List<Object> out = new ArrayList<>();
      value.getAsJsonArray().forEach(v -> out.add(javaValue(v)));
      return out;
    }
    if (value.isJsonNull()) {
      return null;
    }
    if (value.getAsJsonPrimitive().isBoolean()) {
      return value.getAsBoolean();
    }
    if (value.getAsJsonPrimitive().isNumber()) {
      double number = value.getAsDouble();
      return number == Math.rint(number) ? (Object) value.getAsLong() : (Object) number;
    }
    return value.getAsString();
  }

  private static CacheTtl ttl(JsonElement cache) {
    if (cache.getAsJsonPrimitive().isBoolean()) {
      return CacheTtl.CACHE_TTL_UNSPECIFIED;
    }
    return cache.getAsString().equals("5m") ? CacheTtl.CACHE_TTL_5M : CacheTtl.CACHE_TTL_1H;
  }

  private static boolean plain(JsonObject spec, String... extras) {
    for (String extra : extras) {
      if (spec.has(extra)) {
        return false;
      }
    }
    return true;
  }

  private static byte[] bytes(JsonObject spec) {
    return Base64.getDecoder().decode(spec.get("data").getAsString());
  }

  @SuppressWarnings("unchecked")
  private static <M extends Message> M parse(JsonElement json, Message.Builder builder)
      throws InvalidProtocolBufferException {
    JsonFormat.parser().merge(json.toString(), builder);
    return (M) builder.build();
  }

  private static List<JsonElement> items(JsonObject object, String key) {
    List<JsonElement> out = new ArrayList<>();
    if (object.has(key) && !object.get(key).isJsonNull()) {
      object.getAsJsonArray(key).forEach(out::add);
    }
    return out;
  }

  // ---------------------------------------------------------------- judging

  /** Adds to {@code problems} each way the build differs from {@code expect} (each differing field by its path). */
  void check(JsonObject expect, List<String> problems) throws InvalidProtocolBufferException {
    if (expect.has("refused")) {
      if (refused == null) {
        problems.add("refused: want the builder to refuse, it built a request");
      }
      return;
    }
    if (refused != null) {
      problems.add("request: the builder refused: " + refused);
      return;
    }
    CallModelRequest want = parse(expect.get("request"), CallModelRequest.newBuilder());
    if (want.equals(request)) {
      return;
    }
    int before = problems.size();
    differences("request", json(want), json(request), problems);
    if (problems.size() == before) {
      problems.add("request: the protos differ");
    }
  }

  private static JsonElement json(CallModelRequest request) throws InvalidProtocolBufferException {
    return JsonParser.parseString(JsonFormat.printer().print(request));
  }

  private static void differences(String at, JsonElement want, JsonElement got, List<String> problems) {
    if (want != null && got != null && want.isJsonObject() && got.isJsonObject()) {
      JsonObject w = want.getAsJsonObject();
      JsonObject g = got.getAsJsonObject();
      TreeSet<String> keys = new TreeSet<>(w.keySet());
      keys.addAll(g.keySet());
      for (String key : keys) {
        differences(at + "." + key, w.get(key), g.get(key), problems);
      }
      return;
    }
    if (want != null && got != null && want.isJsonArray() && got.isJsonArray()
        && want.getAsJsonArray().size() == got.getAsJsonArray().size()) {
      JsonArray w = want.getAsJsonArray();
      JsonArray g = got.getAsJsonArray();
      for (int i = 0; i < w.size(); i++) {
        differences(at + "[" + i + "]", w.get(i), g.get(i), problems);
      }
      return;
    }
    if (want == null ? got != null : !want.equals(got)) {
      problems.add(at + ": want " + want + ", got " + got);
    }
  }

  @Override
  public String toString() {
    try {
      return refused != null ? "refused: " + refused : JsonFormat.printer().omittingInsignificantWhitespace().print(request);
    } catch (InvalidProtocolBufferException unprintable) {
      return String.valueOf(request);
    }
  }
}
