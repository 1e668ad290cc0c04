# syntax=docker/dockerfile:1.7
# The sidecar image: multi-stage, non-root, health-checked through the gRPC health service.
# It installs the server the way `pip install .` does: the server names the contract distribution
# (protos/python) by its path, so both are built in the build stage into one venv, copied whole.

FROM golang:1.25-bookworm AS probe
# grpc-health-probe speaks grpc.health.v1 for the HEALTHCHECK below (go install names it grpc-health-probe;
# the same name in the image and in the sidecar's start-up line).
RUN GOBIN=/out go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY protos/python/ protos/python/
COPY pyproject.toml README.md constraints.txt ./
COPY sidecar/ sidecar/
# The versions `make test` passed with (constraints.txt), compiled to bytecode at install; then the venv's own pip and
# setuptools go (24 MB that nothing runs: BENCHMARKS.md, "The image").
RUN python -m venv /opt/sidecar \
 && /opt/sidecar/bin/pip install --no-cache-dir -c constraints.txt . \
 && /opt/sidecar/bin/pip uninstall --yes setuptools pip

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system sidecar && useradd --system --gid sidecar --home-dir /nonexistent --shell /usr/sbin/nologin sidecar
COPY --from=build /opt/sidecar /opt/sidecar
ENV PATH=/opt/sidecar/bin:$PATH
COPY --from=probe /out/grpc-health-probe /usr/local/bin/grpc-health-probe
USER sidecar:sidecar
EXPOSE 50051
# The probe asks the health service, which needs no token (server.auth exempts it). With server.tls,
# override it to speak TLS, e.g. (add -tls-client-cert/-tls-client-key under mTLS):
#   --health-cmd 'grpc-health-probe -addr=127.0.0.1:50051 -service=sidecar.v1.Sidecar -tls
#                 -tls-ca-cert=/run/secrets/ca.crt -tls-server-name=sidecar.internal'
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["grpc-health-probe", "-addr=127.0.0.1:50051", "-service=sidecar.v1.Sidecar"]
# The container listens beyond loopback (0.0.0.0), so `sidecar serve` requires transport security
# and refuses to start without it (docs/security.md). Mount a config at /etc/sidecar/config.yaml
# whose server section reads, e.g.:
#
#   server:
#     listen: 0.0.0.0:50051
#     auth: {tokens: ["${AGENT_A_TOKEN}", "${AGENT_B_TOKEN}"]}     # one per agent, from the environment
#     tls: {cert: /run/secrets/sidecar.crt, key: /run/secrets/sidecar.key}   # mounted secrets
#
#   docker run -v $PWD/sidecar.yaml:/etc/sidecar/config.yaml:ro -v $PWD/secrets:/run/secrets:ro \
#     -e AGENT_A_TOKEN -e AGENT_B_TOKEN -e OPENAI_API_KEY -p 50051:50051 sidecar:local
#
# Tokens without TLS cross the network in the clear: alone they fit a private network only.
ENTRYPOINT ["sidecar"]
CMD ["serve", "--config", "/etc/sidecar/config.yaml"]
