package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import dev.sidecar.v1.CacheTtl;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.DocumentPart;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.ImageDetail;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.Part;
import dev.sidecar.v1.ReasoningEffort;
import dev.sidecar.v1.ReasoningPart;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallResult;
import dev.sidecar.v1.ToolChoiceMode;

/** Parts, Messages and Requests: what the builders put in each field. */
class ContentTest {
  private static final byte[] PNG = "\u0089PNG\r\n\u001a\n\0\0\0\rIHDR".getBytes(StandardCharsets.ISO_8859_1);
  private static final byte[] PDF = "%PDF-1.4\n%%EOF\n".getBytes(StandardCharsets.ISO_8859_1);

  @TempDir Path dir;

  private Path file(String name, byte[] data) throws Exception {
    return Files.write(dir.resolve(name), data);
  }

  private static List<Part.KindCase> kinds(List<Part> parts) {
    return parts.stream().map(Part::getKindCase).collect(Collectors.toList());
  }

  @Test
  void aTextTurnIsStillPlainText() {
    assertEquals(
        Message.newBuilder().setRole(Role.ROLE_USER).setText("hi").build(), Messages.user("hi").build());
  }

  @Test
  void anImageFileBecomesAnImagePartBeforeTheQuestion() throws Exception {
    Message message = Messages.user("what is this?").image(file("shot.png", PNG)).build();
    assertEquals("", message.getText());
    assertEquals(List.of(Part.KindCase.IMAGE, Part.KindCase.TEXT), kinds(message.getPartsList()));
    assertEquals("image/png", message.getParts(0).getImage().getMediaType());
    assertArrayEquals(PNG, message.getParts(0).getImage().getData().toByteArray());
    assertEquals("what is this?", message.getParts(1).getText());
  }

  @Test
  void mediaTypesComeFromTheBytesThenTheSuffix() throws Exception {
    assertEquals("image/jpeg", Parts.mediaTypeOf(new byte[] {(byte) 0xff, (byte) 0xd8, (byte) 0xff, 0}));
    assertEquals("image/gif", Parts.mediaTypeOf("GIF89a..".getBytes(StandardCharsets.ISO_8859_1)));
    assertEquals("image/webp", Parts.mediaTypeOf("RIFF\0\0\0\0WEBPVP8 ".getBytes(StandardCharsets.ISO_8859_1)));
    assertEquals(Parts.PDF, Parts.mediaTypeOf(PDF));
    assertEquals("", Parts.mediaTypeOf("plain".getBytes(StandardCharsets.UTF_8)));
    assertEquals("image/webp", Parts.image(file("odd.webp", new byte[] {0, 1})).getImage().getMediaType());
    IllegalArgumentException unknown =
        assertThrows(IllegalArgumentException.class, () -> Parts.image("not an image".getBytes(StandardCharsets.UTF_8), null));
    assertTrue(unknown.getMessage().contains("give its media type"), unknown.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Messages.user("x").image(file("notes.bin", new byte[] {1})));
    assertThrows(UncheckedIOException.class, () -> Messages.user("x").image(dir.resolve("missing.png")));
    Part detailed = Parts.withDetail(Parts.imageUrl("https://example.com/a.png"), ImageDetail.IMAGE_DETAIL_LOW);
    assertEquals(ImageDetail.IMAGE_DETAIL_LOW, detailed.getImage().getDetail());
    assertThrows(IllegalArgumentException.class, () -> Parts.withDetail(Parts.text("x"), ImageDetail.IMAGE_DETAIL_LOW));
  }

  @Test
  void documentsComeBeforeImagesAndTheCacheMarksTheLastPart() throws Exception {
    Message message =
        Messages.user("look")
            .image(PNG, null)
            .imageUrl("https://example.com/a.png")
            .document(file("report.pdf", PDF))
            .document(PDF, null)
            .documentUrl("https://example.com/r.pdf")
            .document(file("notes.md", "# notes".getBytes(StandardCharsets.UTF_8)))
            .textDocument("a b", "ab")
            .part(Parts.cached(Parts.text("context"), CacheTtl.CACHE_TTL_5M))
            .cache(CacheTtl.CACHE_TTL_1H)
            .build();
    List<Part> parts = message.getPartsList();
    assertEquals(
        List.of(
            Part.KindCase.DOCUMENT, Part.KindCase.DOCUMENT, Part.KindCase.DOCUMENT, Part.KindCase.DOCUMENT,
            Part.KindCase.DOCUMENT, Part.KindCase.IMAGE, Part.KindCase.IMAGE, Part.KindCase.TEXT, Part.KindCase.TEXT),
        kinds(parts));
    DocumentPart pdf = DocumentPart.newBuilder().setData(ByteString.copyFrom(PDF)).setMediaType(Parts.PDF).build();
    assertEquals(pdf, parts.get(0).getDocument());
    assertEquals(pdf, parts.get(1).getDocument());
    assertEquals(DocumentPart.newBuilder().setUrl("https://example.com/r.pdf").build(), parts.get(2).getDocument());
    assertEquals(DocumentPart.newBuilder().setText("# notes").setMediaType(Parts.TEXT).build(), parts.get(3).getDocument());
    assertEquals(
        DocumentPart.newBuilder().setText("a b").setMediaType(Parts.TEXT).setTitle("ab").build(), parts.get(4).getDocument());
    assertEquals(CacheTtl.CACHE_TTL_5M, parts.get(7).getCache().getTtl());
    assertEquals(CacheTtl.CACHE_TTL_1H, parts.get(8).getCache().getTtl());
    assertFalse(parts.subList(0, 7).stream().anyMatch(Part::hasCache));
    assertThrows(IllegalArgumentException.class, () -> Parts.document("plain".getBytes(StandardCharsets.UTF_8), null));
    assertEquals("Q3", Parts.withTitle(Parts.documentUrl("https://example.com/q.pdf"), "Q3").getDocument().getTitle());
  }

  @Test
  void aReplyGoesBackWithItsReasoningByteIdentical() {
    Message reply =
        Message.newBuilder()
            .setRole(Role.ROLE_ASSISTANT)
            .setText("checking")
            .addToolCalls(ToolCall.newBuilder().setId("toolu_1").setName("get_weather").setArgumentsJson("{\"city\": \"Paris\"}"))
            .addReasoning(ReasoningPart.newBuilder().setText("Let me think…\n").setSignature("EqQBCgIYAhIM+/=").setFormat("anthropic"))
            .addReasoning(ReasoningPart.newBuilder().setRedactedData("EmwKAhgBEgy3va3pzix/LafPsn4a").setFormat("anthropic"))
            .build();
    assertEquals(reply.toByteString(), Messages.assistant(reply).toByteString());
    assertEquals(
        reply.toByteString(), Messages.assistant(CallModelResponse.newBuilder().setMessage(reply).build()).toByteString());
  }

  @Test
  void aToolResultCarriesImagesAfterItsText() {
    ToolCall call = ToolCall.newBuilder().setId("call_1").setName("screenshot").build();
    ToolCallResult shot = Messages.toolResult(call, "the page", false, Parts.image(PNG, null));
    assertEquals("", shot.getContent());
    assertEquals(List.of(Part.KindCase.TEXT, Part.KindCase.IMAGE), kinds(shot.getPartsList()));
    ExecuteToolResponse failed =
        ExecuteToolResponse.newBuilder()
            .setModelText("boom")
            .setFailure(Failure.newBuilder().setKind(FailureKind.FAILURE_KIND_EXTERNAL_SERVICE))
            .build();
    ToolCallResult plain = Messages.toolResult(ToolCall.newBuilder().setId("call_2").setName("fetch").build(), failed);
    assertEquals("boom", plain.getContent());
    assertTrue(plain.getIsError());
    assertEquals(0, plain.getPartsCount());
    assertThrows(IllegalArgumentException.class, () -> Messages.toolResult(call, "x", false, Parts.document(PDF, null)));
    Message message = Messages.toolResults(shot, plain);
    assertEquals(Role.ROLE_TOOL, message.getRole());
    assertEquals(2, message.getToolResultsCount());
  }

  @Test
  void requestControls() {
    assertEquals(ToolChoiceMode.TOOL_CHOICE_MODE_AUTO, Requests.toolChoice("auto").getMode());
    assertEquals(ToolChoiceMode.TOOL_CHOICE_MODE_NONE, Requests.toolChoice("none").getMode());
    assertEquals(ToolChoiceMode.TOOL_CHOICE_MODE_REQUIRED, Requests.toolChoice("required").getMode());
    assertEquals(ToolChoiceMode.TOOL_CHOICE_MODE_TOOL, Requests.toolChoice("get_weather").getMode());
    assertEquals("get_weather", Requests.toolChoice("get_weather").getName());
    assertThrows(IllegalArgumentException.class, () -> Requests.toolChoice(""));
    assertEquals(2048, Requests.reasoningBudget(2048).getBudgetTokens());
    assertEquals(ReasoningEffort.REASONING_EFFORT_HIGH, Requests.reasoningEffort(ReasoningEffort.REASONING_EFFORT_HIGH).getEffort());
    assertEquals(CacheTtl.CACHE_TTL_1H, Requests.cache(CacheTtl.CACHE_TTL_1H).getTtl());
    assertEquals(
        "{\"anthropic\":{\"metadata\":{\"user_id\":\"u\"}}}",
        Requests.providerOptions(Map.of("anthropic", Map.of("metadata", Map.of("user_id", "u")))));
    assertEquals("{\"openai\":{\"n\":0.5}}", Requests.providerOptions(Map.of("openai", Map.of("n", 0.5))));
    assertThrows(IllegalArgumentException.class, () -> Requests.providerOptions(Map.of("openai", Double.NaN)));
  }
}
