# Runyard server image: `runyard serve` on PostgreSQL (DATABASE_URL), with Redis if REDIS_URL is set.
# Graphs come from /app/langgraph.json (the bundled examples); mount your own project over
# /app/project and set RUNYARD_CONFIG=/app/project/langgraph.json to serve yours.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RUNYARD_DATA_DIR=/data \
    RUNYARD_CONFIG=/app/langgraph.json

WORKDIR /app

COPY pyproject.toml README.md ./
COPY runyard ./runyard
RUN pip install . && rm -rf runyard

COPY langgraph.json ./
COPY examples ./examples

RUN useradd --create-home --uid 10001 runyard \
    && mkdir -p /data \
    && chown runyard:runyard /data
USER runyard

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ok', timeout=2)"]

CMD ["runyard", "serve", "--host", "0.0.0.0", "--port", "8000"]
