# syntax=docker/dockerfile:1
# flink-failover: one image for every role (member, control-plane, estimator).
#   docker build -t flink-failover .
#   docker run --rm flink-failover serve --role member --cert-dir /etc/flink-failover/certs ...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# Storage backends baked into the image (extras of pyproject.toml): gcs, azure, oss, hdfs, or "" for S3
# and local files only. The server refuses to start (chart default) when the restore policy allows a
# scheme whose backend is missing, so trim allowedSchemes together with this list. hdfs is not in the
# default: pyarrow's HadoopFileSystem also needs a JVM and the Hadoop client (libhdfs, jars), which this
# slim base does not have; build FROM an image that does (PYTHON_IMAGE) with EXTRAS=...,hdfs.
ARG EXTRAS=gcs,azure,oss,review

# --- builder: compilers live here only (for any dependency without a binary wheel) ---
FROM ${PYTHON_IMAGE} AS builder
ARG EXTRAS
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY webhook ./webhook
# Build our wheel and the wheels of every dependency at the tested versions (constraints.txt), then
# install them (offline, from those wheels only) into a venv that has no pip of its own.
RUN python -m pip wheel --wheel-dir /wheels -c constraints.txt ".${EXTRAS:+[$EXTRAS]}" \
 && python -m venv --without-pip /opt/flink-failover \
 && python -m pip --python /opt/flink-failover/bin/python install --no-index --find-links /wheels \
      "flink-failover${EXTRAS:+[$EXTRAS]}"

# --- runtime: the same base (same interpreter path), no compilers, no pip ---
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/flink-failover/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp \
    FLINK_FAILOVER_CERT_DIR=/etc/flink-failover/certs
RUN groupadd --system --gid 10001 flink-failover \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin flink-failover
COPY --from=builder /opt/flink-failover /opt/flink-failover
# Numeric user so that runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
# 8443: the webhooks (HTTPS); 10352: the estimator's gRPC; 10351: its metrics and probes
EXPOSE 8443 10352 10351
ENTRYPOINT ["flink-failover"]
CMD ["serve", "--role", "member"]
