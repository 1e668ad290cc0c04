package dev.sidecar.client;

import com.google.protobuf.Descriptors.EnumDescriptor;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.SidecarOuterClass;

/**
 * The taxonomy's fixed words: kind names, the correctable kinds and the two retry lines. Which
 * kinds are correctable and the lines are the contract's, read from the options of {@link
 * FailureKind} in the generated code ({@code (sidecar.v1.correctable)}, {@code correctable_line},
 * {@code uncorrectable_line}).
 */
public final class FailureKinds {
  private static final EnumDescriptor KINDS = FailureKind.getDescriptor();

  /** The retry line of a correctable failure, exactly as the model reads it. */
  public static final String CORRECTABLE_LINE =
      KINDS.getOptions().getExtension(SidecarOuterClass.correctableLine);

  /** The retry line of an uncorrectable failure, exactly as the model reads it. */
  public static final String UNCORRECTABLE_LINE =
      KINDS.getOptions().getExtension(SidecarOuterClass.uncorrectableLine);

  /** The {@code google.rpc.ErrorInfo} domain of every sidecar failure. */
  public static final String DOMAIN = "sidecar";

  /** The prefix every {@link FailureKind} constant carries in the proto. */
  public static final String PREFIX = "FAILURE_KIND_";

  /** The kinds the contract marks {@code (sidecar.v1.correctable)}. */
  private static final Set<FailureKind> CORRECTABLE = correctableKinds();

  private static Set<FailureKind> correctableKinds() {
    Set<FailureKind> kinds = EnumSet.noneOf(FailureKind.class);
    for (FailureKind kind : FailureKind.values()) {
      if (kind != FailureKind.UNRECOGNIZED
          && kind.getValueDescriptor().getOptions().getExtension(SidecarOuterClass.correctable)) {
        kinds.add(kind);
      }
    }
    return kinds;
  }

  private FailureKinds() {}

  /** True for the kinds where the caller's input was wrong and a corrected call may succeed. */
  public static boolean isCorrectable(FailureKind kind) {
    return CORRECTABLE.contains(kind);
  }

  /** The kind's name without its prefix, e.g. {@code RESOURCE_NOT_FOUND}; the ErrorInfo reason. */
  public static String name(FailureKind kind) {
    if (kind == FailureKind.UNRECOGNIZED) {
      return "UNRECOGNIZED";
    }
    String name = kind.name();
    return name.startsWith(PREFIX) ? name.substring(PREFIX.length()) : name;
  }

  /** The kind named {@code name}, with or without the prefix; empty for any other word. */
  public static Optional<FailureKind> parse(String name) {
    if (name == null || name.isBlank()) {
      return Optional.empty();
    }
    String upper = name.trim().toUpperCase(Locale.ROOT);
    String full = upper.startsWith(PREFIX) ? upper : PREFIX + upper;
    for (FailureKind kind : FailureKind.values()) {
      if (kind != FailureKind.UNRECOGNIZED && kind.name().equals(full)) {
        return Optional.of(kind);
      }
    }
    return Optional.empty();
  }

  /** The retry line the model reads for a failure that is, or is not, correctable. */
  public static String retryLine(boolean correctable) {
    return correctable ? CORRECTABLE_LINE : UNCORRECTABLE_LINE;
  }

  /** {@code message}, a newline, and the retry line: the sidecar's explanation format. */
  public static String explanation(String message, boolean correctable) {
    return message + "\n" + retryLine(correctable);
  }
}
