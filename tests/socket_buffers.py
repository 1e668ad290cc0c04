"""What the kernel may hold in the buffers of one loopback TCP connection, on this machine.

A test of flow control (a writer blocked while its reader reads nothing, or little) needs a body
longer than the sockets between can hold, and that is this machine's figure, not a constant: TCP
autotuning grows a socket's send buffer up to ``net.ipv4.tcp_wmem``'s maximum and its receive
buffer up to ``net.ipv4.tcp_rmem``'s (a machine with more memory, or tuned, has larger ones); a
socket that sets its own size gets up to twice ``net.core.wmem_max`` / ``rmem_max``. The figures
are Linux's; elsewhere the test that needs them is skipped, saying so.
"""

from __future__ import annotations

import pytest

__all__ = ["receive_buffer_max", "send_buffer_max"]


def _largest(name: str) -> int:
    try:
        with open(f"/proc/sys/net/{name}") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        pytest.skip(f"no /proc/sys/net/{name}: this machine's socket buffer sizes are not known")


def send_buffer_max() -> int:
    """The most one socket's send buffer may grow to."""
    return max(_largest("ipv4/tcp_wmem"), 2 * _largest("core/wmem_max"))


def receive_buffer_max() -> int:
    """The most one socket's receive buffer may grow to."""
    return max(_largest("ipv4/tcp_rmem"), 2 * _largest("core/rmem_max"))
