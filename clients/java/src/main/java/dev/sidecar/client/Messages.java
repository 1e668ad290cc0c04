package dev.sidecar.client;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import dev.sidecar.v1.CacheBreakpoint;
import dev.sidecar.v1.CacheTtl;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.Part;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallResult;

/**
 * The turns of a conversation: a user turn with images and documents, the assistant turn that
 * passes a reply back with its reasoning unchanged, and tool results with images.
 *
 * <pre>{@code
 * Message question = Messages.user("what is this?").image(Path.of("shot.png")).build();
 * CallModelResponse reply = sidecar.callModel(request);
 * conversation.add(Messages.assistant(reply));   // reasoning byte-identical: its signature is verified
 * conversation = Messages.compacted(conversation, reply);   // the history the sidecar compacted, if it did
 * }</pre>
 */
public final class Messages {
  private Messages() {}

  /** A user turn: {@code text} alone, or with what the builder adds (see {@link User}). */
  public static User user(String text) {
    return new User(text);
  }

  /**
   * The model's reply, ready to add to the conversation: its text, tool calls and reasoning exactly
   * as they came (byte-identical: the provider verifies the reasoning's signature).
   */
  public static Message assistant(CallModelResponse reply) {
    return assistant(reply.getMessage());
  }

  /** {@link #assistant(CallModelResponse)} of the reply's message. */
  public static Message assistant(Message reply) {
    return Message.newBuilder()
        .setRole(Role.ROLE_ASSISTANT)
        .setText(reply.getText())
        .addAllToolCalls(reply.getToolCallsList())
        .addAllParts(reply.getPartsList())
        .addAllReasoning(reply.getReasoningList())
        .build();
  }

  /**
   * The conversation to go on with: the reply's compacted messages when the sidecar compacted the
   * conversation to fit ({@code reply.getCompaction()}), else {@code messages}; a new mutable list
   * either way, to add {@link #assistant(CallModelResponse)} to.
   */
  public static List<Message> compacted(List<Message> messages, CallModelResponse reply) {
    return new ArrayList<>(reply.hasCompaction() ? reply.getCompaction().getMessagesList() : messages);
  }

  /**
   * The outcome of an agent's own tool for the model: {@code content} and, with images, parts: the
   * text, then the images.
   */
  public static ToolCallResult toolResult(ToolCall call, String content, boolean isError, Part... images) {
    ToolCallResult.Builder result =
        ToolCallResult.newBuilder().setCallId(call.getId()).setName(call.getName()).setIsError(isError);
    String text = content == null ? "" : content;
    if (images.length == 0) {
      return result.setContent(text).build();
    }
    if (!text.isEmpty()) {
      result.addParts(Parts.text(text));
    }
    for (Part image : images) {
      if (image.hasDocument()) {
        throw new IllegalArgumentException("a tool result carries text and images only");
      }
      result.addParts(image);
    }
    return result.build();
  }

  /** An ExecuteTool outcome for the model (its model text; is_error on a failure), with images. */
  public static ToolCallResult toolResult(ToolCall call, ExecuteToolResponse outcome, Part... images) {
    return toolResult(call, ToolResults.modelText(outcome), ToolResults.isError(outcome), images);
  }

  /** One ROLE_TOOL message handing the results back. */
  public static Message toolResults(List<ToolCallResult> results) {
    return Message.newBuilder().setRole(Role.ROLE_TOOL).addAllToolResults(results).build();
  }

  /** {@link #toolResults(List)} of the results given. */
  public static Message toolResults(ToolCallResult... results) {
    return toolResults(List.of(results));
  }

  /**
   * A user turn being built: the text alone, or ordered parts: the documents, the images, the
   * parts added, then the text (media before the question about it, as the providers advise).
   */
  public static final class User {
    private final String text;
    private final List<Part> documents = new ArrayList<>();
    private final List<Part> images = new ArrayList<>();
    private final List<Part> parts = new ArrayList<>();
    private CacheBreakpoint cache;

    private User(String text) {
      this.text = text == null ? "" : text;
    }

    /** Adds the image in a file (see {@link Parts#image(Path)}). */
    public User image(Path path) {
      images.add(Parts.image(path));
      return this;
    }

    /** Adds an inline image (a null or empty media type: read from the bytes). */
    public User image(byte[] data, String mediaType) {
      images.add(Parts.image(data, mediaType));
      return this;
    }

    /** Adds an image by URL. */
    public User imageUrl(String url) {
      images.add(Parts.imageUrl(url));
      return this;
    }

    /** Adds an image part as it is (from {@link Parts}, with a detail or a cache breakpoint), among the images. */
    public User image(Part image) {
      if (!image.hasImage()) {
        throw new IllegalArgumentException("not an image part: " + image.getKindCase());
      }
      images.add(image);
      return this;
    }

    /** Adds the document in a file (a PDF or a text file). */
    public User document(Path path) {
      documents.add(Parts.document(path));
      return this;
    }

    /** Adds an inline document (a null or empty media type: a PDF). */
    public User document(byte[] data, String mediaType) {
      documents.add(Parts.document(data, mediaType));
      return this;
    }

    /** Adds a PDF by URL. */
    public User documentUrl(String url) {
      documents.add(Parts.documentUrl(url));
      return this;
    }

    /** Adds a plain-text document with its title. */
    public User textDocument(String text, String title) {
      documents.add(Parts.textDocument(text, title));
      return this;
    }

    /** Adds a document part as it is (from {@link Parts}, with a title or a cache breakpoint), among the documents. */
    public User document(Part document) {
      if (!document.hasDocument()) {
        throw new IllegalArgumentException("not a document part: " + document.getKindCase());
      }
      documents.add(document);
      return this;
    }

    /** Adds a part as it is (after the documents and images). */
    public User part(Part part) {
      parts.add(Objects.requireNonNull(part, "part"));
      return this;
    }

    /** Makes the message's last part a cache breakpoint living {@code ttl}. */
    public User cache(CacheTtl ttl) {
      cache = CacheBreakpoint.newBuilder().setTtl(ttl).build();
      return this;
    }

    /** The message. */
    public Message build() {
      List<Part> content = new ArrayList<>(documents);
      content.addAll(images);
      content.addAll(parts);
      if (content.isEmpty() && cache == null) {
        return Message.newBuilder().setRole(Role.ROLE_USER).setText(text).build();
      }
      if (!text.isEmpty()) {
        content.add(Parts.text(text));
      }
      if (cache != null && !content.isEmpty()) {
        int last = content.size() - 1;
        content.set(last, content.get(last).toBuilder().setCache(cache).build());
      }
      return Message.newBuilder().setRole(Role.ROLE_USER).addAllParts(content).build();
    }
  }
}
