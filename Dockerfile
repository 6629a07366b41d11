# Strata policy engine: a slim image running `strata-policy serve` as a non-root user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NUMBA_CACHE_DIR=/var/cache/strata/numba \
    STRATA_ADDRESS=0.0.0.0:50051 \
    STRATA_LOG_FORMAT=json

RUN groupadd --system --gid 10001 strata \
 && useradd --system --uid 10001 --gid strata --home-dir /home/strata --create-home strata \
 && mkdir -p /var/cache/strata/numba /var/lib/strata \
 && chown -R strata:strata /var/cache/strata /var/lib/strata

WORKDIR /app
COPY requirements.lock pyproject.toml README.md ./
RUN grep -vE '^(pytest|pytest-timeout|hypothesis|mypy|ruff|types-|grpc-stubs|grpcio-testing|grpcio-tools|cryptography|matplotlib|dask|distributed)' requirements.lock > /tmp/runtime.txt \
 && pip install -r /tmp/runtime.txt
COPY generated ./generated
COPY strata_policy ./strata_policy
RUN pip install --no-deps . \
 && python -c "import grpc_health.v1.health"

USER strata:strata
# Compile the numba kernels into the writable cache once, so the first start is fast.
RUN python -c "from strata_policy.kernels import warmup; warmup()"

EXPOSE 50051 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; ch = grpc.insecure_channel('127.0.0.1:50051'); r = g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=2); sys.exit(0 if r.status == h.HealthCheckResponse.SERVING else 1)"]
CMD ["strata-policy", "serve"]
