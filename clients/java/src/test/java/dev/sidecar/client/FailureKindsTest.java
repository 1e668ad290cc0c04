package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import dev.sidecar.v1.FailureKind;

/** The client says of every kind what the contract says. */
class FailureKindsTest {
  /**
   * What the contract says of each kind, as data: written by tools/protogen.py from sidecar.proto
   * (its --check fails when stale); every client's tests compare their answers with it.
   */
  private static final Path FAILURE_KINDS_FILE = Path.of("../../tests/conformance/failure_kinds.json");

  @Test
  void everyKindIsCorrectableAndWordedAsTheContractSays() throws IOException {
    JsonObject contract =
        JsonParser.parseString(Files.readString(FAILURE_KINDS_FILE, StandardCharsets.UTF_8)).getAsJsonObject();
    String correctableLine = contract.get("correctable_line").getAsString();
    String uncorrectableLine = contract.get("uncorrectable_line").getAsString();
    assertEquals(correctableLine, FailureKinds.CORRECTABLE_LINE);
    assertEquals(uncorrectableLine, FailureKinds.UNCORRECTABLE_LINE);

    List<Integer> numbers = new ArrayList<>();
    for (JsonElement element : contract.getAsJsonArray("kinds")) {
      JsonObject want = element.getAsJsonObject();
      int number = want.get("number").getAsInt();
      boolean correctable = want.get("correctable").getAsBoolean();
      FailureKind kind = FailureKind.forNumber(number);
      numbers.add(number);
      assertEquals(want.get("name").getAsString(), FailureKinds.name(kind));
      assertEquals(correctable, FailureKinds.isCorrectable(kind), FailureKinds.name(kind));
      assertEquals(correctable ? correctableLine : uncorrectableLine, FailureKinds.retryLine(FailureKinds.isCorrectable(kind)));
    }
    List<Integer> known = new ArrayList<>();
    for (FailureKind kind : FailureKind.values()) {
      if (kind != FailureKind.UNRECOGNIZED) {
        known.add(kind.getNumber());
      }
    }
    assertEquals(known, numbers);
  }
}
