"""How ``state`` reaches a Redis beyond its URL: Sentinel's nodes and service (``state.sentinel``), TLS's
files (``state.tls``), and the checks a URL gets with them (``check_dial``)::

    state.sentinel   nodes: [host:port, ...], service: <master name>, db, and the sentinels' own
                     username / password (requirepass on the sentinels), from ${NAME}
    state.tls        ca_file (else the system's CAs), cert_file + key_file (mTLS): PEM files, each
                     checked to be a readable file when the config is loaded
    state.username   the ACL user, and state.password (from ${NAME}) its password: for the URL's
    state.password   server or Sentinel's primary; a password in the URL too is refused (one place)

TLS is configured here, never in the URL's query: one way for a URL and for Sentinel (which has no
URL), the paths checked at load with their own names, and no ``ssl_cert_reqs=none`` to turn
verification off: a server's certificate is always verified, host name included.
"""

from __future__ import annotations

import os
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from pydantic import AfterValidator, Field, SecretStr, model_validator

from sidecar.config.secrets import password as url_password
from sidecar.core.settings import Strict

__all__ = ["RedisTlsConfig", "SentinelConfig", "check_dial"]


def _file(value: str) -> str:
    if not os.path.isfile(value) or not os.access(value, os.R_OK):
        raise ValueError("not a readable file")
    return value


PemFile = Annotated[str, AfterValidator(_file)]


def _node(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError("a sentinel is host:port (port 1-65535)")
    return value


class RedisTlsConfig(Strict):
    """TLS to Redis (and to the sentinels): the server verified against ``ca_file`` or the system's CAs."""

    ca_file: PemFile | None = None
    """CA certificates (PEM) the server's certificate must chain to; unset: the system's trust store."""
    cert_file: PemFile | None = None
    """This client's certificate (PEM), for a server that asks for one (``tls-auth-clients yes``)."""
    key_file: PemFile | None = None
    """Its private key (PEM)."""

    @model_validator(mode="after")
    def _pair(self) -> RedisTlsConfig:
        if self.key_file and not self.cert_file:
            raise ValueError("state.tls.key_file needs state.tls.cert_file (the certificate it is the key of)")
        return self


class SentinelConfig(Strict):
    """Redis Sentinel: the sentinels asked for the primary of ``service``, followed through a failover."""

    nodes: Annotated[list[Annotated[str, AfterValidator(_node)]], Field(min_length=1, max_length=32)]
    """The sentinels, ``host:port`` each (three or more, so that a failover has a quorum)."""
    service: Annotated[str, Field(min_length=1, max_length=128)]
    """The name the sentinels monitor the primary under (``sentinel monitor <service> ...``)."""
    db: Annotated[int, Field(ge=0, le=65535)] = 0
    username: SecretStr | None = None
    """The sentinels' own ACL user, when they have one."""
    password: SecretStr | None = None
    """The sentinels' own password (``requirepass`` in sentinel.conf), from ``${NAME}``."""


def check_dial(
    url: str | None, sentinel: SentinelConfig | None, tls: RedisTlsConfig | None, user: bool, has_password: bool
) -> None:
    """Raise ValueError (a message naming the field, never a value) when the ways to reach Redis disagree."""
    if url and sentinel is not None:
        raise ValueError("state.url and state.sentinel both set: give one (a URL, or the sentinels to ask)")
    if not url and sentinel is None:
        raise ValueError("the redis backend needs state.url (e.g. url: ${REDIS_URL}) or state.sentinel")
    if user and not has_password:
        raise ValueError("state.username needs state.password (an ACL user logs in with both)")
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError("state.url must be a redis://, rediss:// or unix:// URL (value not shown)")
    if any(k.startswith("ssl") for k, _ in parse_qsl(parts.query)):
        raise ValueError(
            "state.url: TLS settings go in state.tls (ca_file, cert_file, key_file), not in the URL's query "
            "(value not shown)"
        )
    if tls is not None and parts.scheme != "rediss":
        raise ValueError("state.tls needs a rediss:// URL in state.url (value not shown)")
    if has_password and url_password(url):
        raise ValueError("state.password and a password in state.url: give one of them (value not shown)")
