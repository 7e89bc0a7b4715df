# paimond container image: slim Python, a non-root user, `paimond` as the entrypoint, and a
# root filesystem that can be mounted read-only: the process writes only to its warehouse and
# to /tmp (TMPDIR; an emptyDir in Kubernetes, `--tmpfs /tmp` with `docker run --read-only`).
#
#   docker build -t paimond:0.1.0 .
#   docker run --read-only --tmpfs /tmp --stop-timeout 45 -p 9181:9181 \
#     -v ./paimond.toml:/etc/paimond/paimond.toml:ro paimond:0.1.0      (the daemon)
#   docker run --rm paimond:0.1.0 --help                               (any other command)
#
# deploy/README.md explains the choices; tests/project/test_deploy.py checks them.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1
# The application lives in its own venv, without pip (nothing installs at run time). The build
# stage builds paimond's wheel from the tree (package discovery: nothing listed here) and installs
# it with the versions locked in uv.lock, compiling .pyc files now since none can be written later.
RUN pip install uv==0.13.9 && python -m venv --without-pip /opt/paimond
WORKDIR /src
COPY . .
RUN uv export --frozen --no-dev --no-emit-project --no-hashes -o /tmp/locked.txt \
    && uv build --wheel -o /tmp/dist . \
    && uv pip install --python /opt/paimond/bin/python --compile-bytecode \
       --constraint /tmp/locked.txt /tmp/dist/paimond-*.whl

FROM python:3.11-slim
LABEL org.opencontainers.image.title="paimond" \
      org.opencontainers.image.description="Maintenance daemon for Apache Paimon tables" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid, so that Kubernetes can check runAsNonRoot and a securityContext can
# name the same ids. No home directory: HOME is /tmp, the one writable place.
RUN groupadd --system --gid 10001 paimond \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin paimond
# Owned by root and read-only to paimond: the process cannot change its own code.
COPY --from=build /opt/paimond /opt/paimond
ENV PATH=/opt/paimond/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1 \
    HOME=/tmp \
    TMPDIR=/tmp
USER 10001:10001
WORKDIR /tmp
# /metrics, /healthz, /readyz and POST /trigger.
EXPOSE 9181
# paimond stops scheduling on SIGTERM and lets a running commit finish within shutdown.grace_s
# (30 s by default): give it longer than that before SIGKILL (docker's --stop-timeout / -t).
STOPSIGNAL SIGTERM
# Docker's own health status for `paimond run` (Kubernetes uses its probes instead). The slim
# image has no curl: Python's urllib asks /healthz, and a refused connection or a non-2xx
# answer exits non-zero.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PAIMOND_HTTP_PORT', '9181'), timeout=4)"]
ENTRYPOINT ["paimond"]
# The image's default is the daemon; any other command replaces these arguments.
CMD ["run", "--config", "/etc/paimond/paimond.toml"]
