"""The one error a configuration problem raises."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(Exception):
    """The configuration is invalid; the message names key, value and what is wrong."""
