package dev.sidecar.client;

import com.google.protobuf.ByteString;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import dev.sidecar.v1.CacheBreakpoint;
import dev.sidecar.v1.CacheTtl;
import dev.sidecar.v1.DocumentPart;
import dev.sidecar.v1.ImageDetail;
import dev.sidecar.v1.ImagePart;
import dev.sidecar.v1.Part;

/**
 * Content parts — text, images and documents — from what an agent has at hand: a file, bytes or a
 * URL.
 *
 * <pre>{@code
 * Part shot = Parts.image(Path.of("shot.png"));                  // its bytes, the media type sniffed
 * Part report = Parts.withTitle(Parts.document(Path.of("q3.pdf")), "Q3 report");
 * Part context = Parts.cached(Parts.text(longContext), CacheTtl.CACHE_TTL_1H);
 * }</pre>
 *
 * <p>Media types come from the bytes (PNG, JPEG, GIF, WebP and PDF signatures), then from the
 * file's suffix; what neither tells is refused here ({@link IllegalArgumentException}), never sent
 * untyped. A document file that is text ({@code .txt}, {@code .md}) is sent as a text document. A
 * file that cannot be read is an {@link UncheckedIOException}.
 */
public final class Parts {
  /** A PDF. */
  public static final String PDF = "application/pdf";
  /** Plain text. */
  public static final String TEXT = "text/plain";

  private static final Map<String, String> IMAGE_SUFFIXES =
      Map.of(".png", "image/png", ".jpg", "image/jpeg", ".jpeg", "image/jpeg", ".gif", "image/gif", ".webp", "image/webp");
  private static final List<String> TEXT_SUFFIXES = List.of(".txt", ".text", ".md", ".markdown");

  private Parts() {}

  /** The media type the bytes' signature says (PNG, JPEG, GIF, WebP, PDF); {@code ""} when none. */
  public static String mediaTypeOf(byte[] data) {
    if (startsWith(data, 0, (byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n')) {
      return "image/png";
    }
    if (startsWith(data, 0, (byte) 0xff, (byte) 0xd8, (byte) 0xff)) {
      return "image/jpeg";
    }
    if (startsWith(data, 0, 'G', 'I', 'F', '8', '7', 'a') || startsWith(data, 0, 'G', 'I', 'F', '8', '9', 'a')) {
      return "image/gif";
    }
    if (startsWith(data, 0, 'R', 'I', 'F', 'F') && startsWith(data, 8, 'W', 'E', 'B', 'P')) {
      return "image/webp";
    }
    if (startsWith(data, 0, '%', 'P', 'D', 'F', '-')) {
      return PDF;
    }
    return "";
  }

  /** A text part. */
  public static Part text(String text) {
    return Part.newBuilder().setText(text).build();
  }

  /** An inline image; a null or empty {@code mediaType} is read from the bytes' signature. */
  public static Part image(byte[] data, String mediaType) {
    String type = mediaType == null ? "" : mediaType;
    if (type.isEmpty()) {
      type = mediaTypeOf(data);
      if (!type.startsWith("image/")) {
        throw new IllegalArgumentException("the image's bytes are no PNG, JPEG, GIF or WebP; give its media type");
      }
    }
    return image(ImagePart.newBuilder().setData(ByteString.copyFrom(data)).setMediaType(type));
  }

  /** The image in a file: its bytes, the media type from their signature or else the suffix. */
  public static Part image(Path path) {
    byte[] data = read(path);
    String type = mediaTypeOf(data);
    if (!type.startsWith("image/")) {
      type = IMAGE_SUFFIXES.getOrDefault(suffix(path), "");
    }
    if (type.isEmpty()) {
      throw new IllegalArgumentException(
          "the image " + path + " is no PNG, JPEG, GIF or WebP; give its bytes and media type");
    }
    return image(data, type);
  }

  /** An image the provider fetches: an https, http or data: URL. */
  public static Part imageUrl(String url) {
    return image(ImagePart.newBuilder().setUrl(url));
  }

  /**
   * An inline document: a null or empty {@code mediaType} is application/pdf when the bytes are a
   * PDF (refused otherwise); text/plain makes it a text document of the bytes (UTF-8).
   */
  public static Part document(byte[] data, String mediaType) {
    String type = mediaType == null ? "" : mediaType;
    if (type.equals(TEXT)) {
      return textDocument(utf8(data), "");
    }
    if (type.isEmpty()) {
      if (!mediaTypeOf(data).equals(PDF)) {
        throw new IllegalArgumentException("the document's bytes are no PDF; give its media type, or a text document");
      }
      type = PDF;
    }
    return document(DocumentPart.newBuilder().setData(ByteString.copyFrom(data)).setMediaType(type));
  }

  /** The document in a file: a PDF (by its signature or a .pdf suffix), or a .txt/.text/.md/.markdown text. */
  public static Part document(Path path) {
    byte[] data = read(path);
    String suffix = suffix(path);
    if (mediaTypeOf(data).equals(PDF) || suffix.equals(".pdf")) {
      return document(data, PDF);
    }
    if (TEXT_SUFFIXES.contains(suffix)) {
      return document(data, TEXT);
    }
    throw new IllegalArgumentException(
        "the document " + path + " is no PDF and no text file " + TEXT_SUFFIXES + "; give its bytes and media type");
  }

  /** A PDF the provider fetches, by its https URL. */
  public static Part documentUrl(String url) {
    return document(DocumentPart.newBuilder().setUrl(url));
  }

  /** A plain-text document with a title the model may cite ({@code ""} for none). */
  public static Part textDocument(String text, String title) {
    return document(DocumentPart.newBuilder().setText(text).setMediaType(TEXT).setTitle(nonNull(title)));
  }

  /** {@code part} with a title (a document's). */
  public static Part withTitle(Part part, String title) {
    if (!part.hasDocument()) {
      throw new IllegalArgumentException("a title is a document's");
    }
    return part.toBuilder().setDocument(part.getDocument().toBuilder().setTitle(nonNull(title))).build();
  }

  /** {@code part} with how closely the model looks at it (an image's). */
  public static Part withDetail(Part part, ImageDetail detail) {
    if (!part.hasImage()) {
      throw new IllegalArgumentException("a detail is an image's");
    }
    return part.toBuilder().setImage(part.getImage().toBuilder().setDetail(detail)).build();
  }

  /** {@code part} as a cache breakpoint living {@code ttl} (CACHE_TTL_UNSPECIFIED: the provider's default). */
  public static Part cached(Part part, CacheTtl ttl) {
    return part.toBuilder().setCache(CacheBreakpoint.newBuilder().setTtl(ttl)).build();
  }

  private static Part image(ImagePart.Builder image) {
    return Part.newBuilder().setImage(image).build();
  }

  private static Part document(DocumentPart.Builder document) {
    return Part.newBuilder().setDocument(document).build();
  }

  private static byte[] read(Path path) {
    try {
      return Files.readAllBytes(path);
    } catch (IOException unreadable) {
      throw new UncheckedIOException("cannot read " + path, unreadable);
    }
  }

  private static String suffix(Path path) {
    String name = path.getFileName() == null ? "" : path.getFileName().toString();
    int dot = name.lastIndexOf('.');
    return dot < 0 ? "" : name.substring(dot).toLowerCase(Locale.ROOT);
  }

  private static String utf8(byte[] data) {
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(data))
          .toString();
    } catch (CharacterCodingException notText) {
      throw new IllegalArgumentException("a text document is UTF-8", notText);
    }
  }

  private static String nonNull(String text) {
    return text == null ? "" : text;
  }

  private static boolean startsWith(byte[] data, int at, int... prefix) {
    if (data.length < at + prefix.length) {
      return false;
    }
    for (int i = 0; i < prefix.length; i++) {
      if (data[at + i] != (byte) prefix[i]) {
        return false;
      }
    }
    return true;
  }
}
