# podgang image: `podgang webhook` and `podgang grouper` (see charts/podgang).
#
# Engines: Buildah builds it in the test suite (tests/real/test_real_install.py, Buildah 1.28);
# Docker's BuildKit (Docker 23 and later) has every instruction used in its built-in frontend.
# There is no `# syntax=` line on purpose: it makes BuildKit fetch the docker/dockerfile
# frontend image from Docker Hub on every build, which fails offline or behind a registry
# mirror. Docker's legacy builder (DOCKER_BUILDKIT=0) lacks RUN --mount and cannot build it.
#
# Stage 1 builds wheels for podgang and all of its dependencies; the final stage installs
# only those wheels (no index, no compilers, no pip cache) and runs as uid 65532.
# The base image is pinned by tag (the same in both stages); add a digest
# (python:3.11-slim@sha256:...) for byte-for-byte reproducible builds.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Metadata first, so source edits don't invalidate more than they must.
COPY pyproject.toml README.md ./
COPY podgang ./podgang
COPY webhook ./webhook
COPY grouper ./grouper
COPY certs ./certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="podgang" \
      org.opencontainers.image.description="Admission webhook and pod-grouper for gang scheduling on Kubernetes (KAI-Scheduler first)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
# A fixed numeric uid/gid: Kubernetes' runAsNonRoot can only verify a numeric USER.
RUN groupadd --system --gid 65532 podgang \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin podgang
# The wheels are bind-mounted from the build stage, so they never become a layer here.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/*.whl
# 9443: webhook HTTPS (admission, /healthz, /readyz, /metrics); 8080: grouper /metrics, probes.
EXPOSE 9443 8080
USER 65532:65532
ENTRYPOINT ["podgang"]
CMD ["--help"]
