"""A wire format's tests: its reading and rendering through a real sidecar, what it carries, its
official SDK judging the fake (a format's own ``test_<format>_shapes.py`` belongs here too)."""
