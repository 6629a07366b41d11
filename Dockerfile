# Strata policy engine: `strata-policy serve` as a non-root user on a read-only root filesystem.
# Build: docker build -t REGISTRY/strata-policy:VERSION .   (docs/operations.md, "The image")
#
# Two stages on one Python base, pinned by digest (refresh it with
# `docker buildx imagetools inspect python:3.11-slim-bookworm` and update both FROM lines):
#   build   — a virtual environment from the hashed runtime lock, then the project, non-editable;
#   runtime — that environment, the entrypoint, and the numba kernels compiled once for a
#             portable CPU target into /opt/strata/numba-cache, which the entrypoint copies into
#             the writable NUMBA_CACHE_DIR at start (deploy/image/entrypoint.sh).
FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91 AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY generated ./generated
COPY strata_policy ./strata_policy
# --no-build-isolation: built with the lock's setuptools, nothing fetched unpinned.
RUN pip install --no-deps --no-build-isolation . \
 && python -c "import grpc_health.v1.health, strata_policy.cli"

FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91 AS runtime

# NUMBA_CPU_NAME=generic: kernels compiled for any x86-64 CPU, so the cache baked here matches
# every node (numba keys its cache on the CPU name and features). Change it and the server
# compiles for the node's CPU at start instead (about a minute).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CPU_NAME=generic \
    NUMBA_CACHE_DIR=/var/cache/strata/numba \
    STRATA_NUMBA_SEED=/opt/strata/numba-cache \
    STRATA_ADDRESS=0.0.0.0:50051 \
    STRATA_HEALTH_ADDRESS=0.0.0.0:8081 \
    STRATA_LOG_FORMAT=json

RUN groupadd --system --gid 10001 strata \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin strata \
 && mkdir -p /var/cache/strata/numba /var/lib/strata \
 && chown 10001:10001 /var/cache/strata/numba /var/lib/strata

COPY --from=build /opt/venv /opt/venv
COPY deploy/image/entrypoint.sh /usr/local/bin/strata-entrypoint
# Compile every kernel from the installed package (run from /, so the import is the one in
# /opt/venv, the path the server runs) into the seed folder, read-only at run time.
WORKDIR /
RUN NUMBA_CACHE_DIR="$STRATA_NUMBA_SEED" python -c \
      "import strata_policy.kernels as k; assert k.__file__.startswith('/opt/venv/'); k.warmup()" \
 && chmod -R a+rX "$STRATA_NUMBA_SEED"

USER 10001:10001
WORKDIR /var/lib/strata
EXPOSE 50051 8081 9090
# For `docker run` (Kubernetes uses its own probes): the plaintext health-only port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; r = g.HealthStub(grpc.insecure_channel('127.0.0.1:8081')).Check(h.HealthCheckRequest(), timeout=2); sys.exit(r.status != h.HealthCheckResponse.SERVING)"]
ENTRYPOINT ["/usr/local/bin/strata-entrypoint"]
CMD ["serve"]
