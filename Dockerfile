# syntax=docker/dockerfile:1
# karmada-agent image: the wheel installed into a virtualenv on distroless Python.
#
# Both stages run Debian 12's Python 3.11 at /usr/bin/python3.11, so the venv built in the first
# stage (its interpreter is a symlink to that path) works unchanged in the second.
# `make image-check` repeats the wheel -> venv steps without Docker, checks this file, reports
# the runtime stage's size against its budget and proves every dependency has a wheel for both
# platforms below.
#
# Platforms: linux/amd64 and linux/arm64, e.g.
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/karmada-agent:<tag> .
# The builder runs on the platform being built ($TARGETPLATFORM, under emulation on another
# host), so pip picks that platform's wheels; --only-binary=:all: means nothing is compiled
# and the builder carries no compiler.
#
# Variants: the default image loads certificate, token and in-cluster credentials. Kubeconfigs
# whose user has an exec plugin or an auth-provider need the `kubernetes` package (about 126 MB
# with its dependencies): build with --build-arg EXTRAS=exec-auth for that.
#
# Size: the runtime stage adds the venv (and a copy of the console script) to the base image,
# gcr.io/distroless/python3-debian12, published at about 53 MB uncompressed for amd64
# (approximate: image-check has no image engine to measure it);
# `make image-check` fails when what this file adds exceeds its budget.

ARG VERSION=0.1.0

FROM --platform=$TARGETPLATFORM debian:12-slim AS builder
ARG TARGETPLATFORM
# Optional extras of the wheel, comma-separated (exec-auth); empty for the default image.
ARG EXTRAS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY bootstrap ./bootstrap
# The wheel carries the deploy/ manifests that `karmada-bootstrap register` renders.
COPY deploy ./deploy
# Build the wheel in a throwaway venv, then install it (with its dependencies, from wheels only)
# into /opt/venv, the path it keeps in the runtime image. No pip or setuptools stays behind.
RUN python3.11 -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && python3.11 -m venv --without-pip /opt/venv \
 && wheel="$(ls /wheels/karmada_pull_agent-*.whl)" \
 && /opt/build/bin/pip --python /opt/venv/bin/python install --no-cache-dir --only-binary=:all: "${wheel}${EXTRAS:+[$EXTRAS]}" \
 && mkdir -p /out/bin \
 && cp /opt/venv/bin/karmada-agent /out/bin/karmada-agent

FROM gcr.io/distroless/python3-debian12:nonroot
ARG VERSION
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=unknown
LABEL org.opencontainers.image.title="karmada-agent" \
      org.opencontainers.image.description="Pull-mode member agent for Karmada (Python)" \
      org.opencontainers.image.source="https://github.com/karmada-pull-agent/karmada-pull-agent" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /opt/venv /opt/venv
# Upstream's manifests start the agent as /bin/karmada-agent; the console script's shebang points
# at /opt/venv/bin/python, so a plain copy works from there too.
COPY --from=builder /out/bin/karmada-agent /bin/karmada-agent
ENV PATH=/opt/venv/bin:/usr/bin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KARMADA_AGENT_GIT_COMMIT=${GIT_COMMIT} \
    KARMADA_AGENT_BUILD_DATE=${BUILD_DATE}
USER 65532:65532
ENTRYPOINT ["/opt/venv/bin/karmada-agent"]
