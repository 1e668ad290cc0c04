"""Tools: HTTP tool backends run under the per-service throttle and circuit."""
