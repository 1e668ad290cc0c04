"""sidecar: one failure policy for every model call and tool call an agent makes."""

__version__ = "0.1.0"
