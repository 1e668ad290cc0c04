# syntax=docker/dockerfile:1.7
# The sidecar image: multi-stage, non-root, health-checked through the gRPC health service.
# It installs the server the way `pip install .` does: the server names the contract distribution
# (protos/python) by its path, so both are built in the build stage into one venv, copied whole.

FROM golang:1.25-bookworm AS probe
# grpc-health-probe speaks grpc.health.v1 for the HEALTHCHECK below.
RUN GOBIN=/out go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY protos/python/ protos/python/
COPY pyproject.toml README.md ./
COPY sidecar/ sidecar/
RUN python -m venv /opt/sidecar && /opt/sidecar/bin/pip install --no-cache-dir .

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system sidecar && useradd --system --gid sidecar --home-dir /nonexistent --shell /usr/sbin/nologin sidecar
COPY --from=build /opt/sidecar /opt/sidecar
ENV PATH=/opt/sidecar/bin:$PATH
COPY --from=probe /out/grpc-health-probe /usr/local/bin/grpc_health_probe
USER sidecar:sidecar
EXPOSE 50051
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["grpc_health_probe", "-addr=127.0.0.1:50051", "-service=sidecar.v1.Sidecar"]
# Mount a config at /etc/sidecar/config.yaml and pass `--config /etc/sidecar/config.yaml`;
# with none, the embedded default (local provider and tool backend, no keys) is served.
ENTRYPOINT ["sidecar"]
CMD ["serve", "--listen", "0.0.0.0:50051"]
