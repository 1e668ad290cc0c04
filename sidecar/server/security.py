"""Transport security of the gRPC port: TLS / mTLS credentials, and who may listen where.

    server.tls            cert + key: TLS; + client_ca: mTLS (a client without a certificate signed
                          by client_ca is refused in the handshake)
    server.auth           bearer tokens (``sidecar.server.auth``)
    server.allow_insecure serve beyond loopback with neither (a private network only)

``exposure_refusal`` is what ``sidecar serve`` checks before it binds: an address beyond loopback
with neither TLS nor tokens is refused unless ``allow_insecure`` says so. Loopback is 127.0.0.0/8,
::1 and ``localhost``; a unix socket is local. Any other host, ``0.0.0.0`` and ``[::]`` included,
is beyond loopback. ``is_loopback_peer`` is the same question about a caller: whether the address it
called from is loopback (``server.admin.read_on_loopback``).

``server_credentials`` reads the PEM files once, when the server starts; a file that cannot be
read, is not PEM, or a key that does not match the certificate is a ``ConfigError`` naming the key.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from urllib.parse import unquote

import grpc

from sidecar.config import ConfigError, ServerConfig, TlsConfig

__all__ = ["exposure_refusal", "is_local", "is_loopback_peer", "server_credentials", "server_ssl_context"]

_PEM_BEGIN = b"-----BEGIN "


def is_local(listen: str) -> bool:
    """Whether ``listen`` (``host:port`` or ``unix:/path``) can be reached from this machine only."""
    if listen.startswith("unix:"):
        return True
    host = listen.rpartition(":")[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def is_loopback_peer(peer: str) -> bool:
    """Whether a caller's address is loopback (127.0.0.0/8, ::1, either mapped into IPv6): an HTTP client's
    host (``127.0.0.1``, ``::1``) or gRPC's peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``, the brackets
    possibly %-escaped). A unix socket's peer, a name or anything unparsable is not."""
    scheme, colon, rest = peer.partition(":")
    host = unquote(rest).rpartition(":")[0] if colon and scheme in ("ipv4", "ipv6") else peer
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def exposure_refusal(listen: str, server: ServerConfig) -> str | None:
    """Why serving ``listen`` with ``server``'s settings is refused, or None when it is not."""
    if is_local(listen) or server.tls is not None or server.auth is not None or server.allow_insecure:
        return None
    return (
        f"refusing to listen on {listen} without transport security: any machine that reaches it could "
        "call models and tools on this sidecar's keys. Set server.tls (cert, key; client_ca for mTLS) "
        "and/or server.auth (tokens from the environment), or server.allow_insecure: true on a private "
        "network only; a loopback address or a unix socket needs neither"
    )


def _read(key: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"server.tls.{key}: cannot read {path}: {exc.strerror or exc}") from None
    if _PEM_BEGIN not in data:
        raise ConfigError(f"server.tls.{key}: {path} is not a PEM file (no '-----BEGIN' line)")
    return data


def _no_password() -> bytes:
    """An encrypted key is refused rather than prompted for (gRPC cannot use one either)."""
    return b""


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """The gRPC server credentials of ``tls``, checked with the standard library's TLS first."""
    cert, key = _read("cert", tls.cert), _read("key", tls.key)
    client_ca = _read("client_ca", tls.client_ca) if tls.client_ca else None
    server_ssl_context(tls)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def server_ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    """The standard library's TLS context of ``tls`` (the HTTP port's; the gRPC port's check):
    a client certificate signed by ``client_ca`` required when it is set."""
    for key, path in (("cert", tls.cert), ("key", tls.key), ("client_ca", tls.client_ca)):
        if path:
            _read(key, path)  # each file readable and PEM, named in the error
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(tls.cert, tls.key, password=_no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"server.tls.cert / server.tls.key: {tls.cert} and {tls.key} are not a certificate and its "
            f"unencrypted private key ({exc.reason or exc})"
        ) from None
    if tls.client_ca:
        try:
            context.load_verify_locations(cafile=tls.client_ca)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"server.tls.client_ca: {tls.client_ca} holds no usable CA certificate ({exc.reason or exc})"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context
