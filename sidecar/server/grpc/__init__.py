"""The gRPC port: the ``sidecar.v1.Sidecar`` service over the core, one servicer and its interceptors.

servicer.py    each RPC: convert the request, delegate to the core, convert the answer
handlers.py    the service registered from its descriptor, with decoding that cannot raise
status.py      a failure as a gRPC status with rich details (the packed Failure, ErrorInfo, RetryInfo)
refusals.py    the sidecar's own refusals of an RPC (overloaded, draining, unauthenticated, undecodable)
masking.py     the interceptor that masks configured secrets in every answer
spans.py       the interceptor that makes one SERVER span per RPC, the caller's traceparent its parent

What both ports share is one level up, in ``sidecar.server``: the process (``app``), the in-flight
limit (``admission``), the tokens and transport security (``auth``, ``security``) and the one
converter between the contract and the core (``convert``). The package's name is the library's:
inside it, as everywhere, ``import grpc`` is an absolute import and means grpcio.
"""
