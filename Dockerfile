# Runyard server image of this repository: `runyard serve` on PostgreSQL (DATABASE_URL), with
# Redis if REDIS_URL is set, serving the bundled examples (/app/langgraph.json).
#   docker build --network host -t runyard:latest .
# For your own project, `runyard build` (or `runyard dockerfile`) in its folder writes the same
# image with your graphs and dependencies in it; see docs/deploying.md.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/runyard/bin:$PATH
# One virtual environment, which works on any Debian-like base (python3 with venv).
RUN python3 -m venv /opt/runyard

WORKDIR /app

# A regular (not editable) install: the wheel carries the migrations.
COPY pyproject.toml README.md ./
COPY runyard ./runyard
RUN pip install . && rm -rf runyard build

COPY langgraph.json ./
COPY examples ./examples

RUN useradd --create-home --uid 10001 runyard \
    && mkdir -p /data \
    && chown runyard:runyard /data
ENV RUNYARD_CONFIG=/app/langgraph.json \
    RUNYARD_DATA_DIR=/data
USER runyard

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ok', timeout=2)"]

# Every interface, and the bundled examples configure no auth: run it with
# RUNYARD_ALLOW_UNAUTHENTICATED=true only behind a gateway that authenticates (otherwise
# `runyard serve` refuses to start). docker-compose.yml runs it on 127.0.0.1 behind nginx.
CMD ["runyard", "serve", "--host", "0.0.0.0", "--port", "8000"]
