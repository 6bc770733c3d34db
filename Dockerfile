# syntax=docker/dockerfile:1.7
# ki's image: the `ki` command with the Hatchet extra; `docker compose` runs it as `ki worker`.
#   docker build -t ki .
#   docker run --rm ki --help
# Configuration is environment only (compose.yaml sets KI_DATABASE_URL, KI_DATA_DIR, HATCHET_CLIENT_*).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    KI_DATA_DIR=/data

# libgomp1: onnxruntime (built-in OCR); libglib2.0-0/libgl1: pypdfium2 and rapidocr's image stack
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 libglib2.0-0 libgl1 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY ki ./ki
RUN pip install ".[hatchet,opensearch]"

# A token minted by the compose stack (hatchet-token service) is read from HATCHET_CLIENT_TOKEN_FILE
# when HATCHET_CLIENT_TOKEN is empty.
COPY <<'SH' /usr/local/bin/ki-entrypoint
#!/bin/sh
set -e
if [ -z "${HATCHET_CLIENT_TOKEN}" ] && [ -n "${HATCHET_CLIENT_TOKEN_FILE}" ] && [ -s "${HATCHET_CLIENT_TOKEN_FILE}" ]; then
  HATCHET_CLIENT_TOKEN="$(cat "${HATCHET_CLIENT_TOKEN_FILE}")"
  export HATCHET_CLIENT_TOKEN
fi
[ -n "${HATCHET_CLIENT_TOKEN}" ] || unset HATCHET_CLIENT_TOKEN
exec ki "$@"
SH
RUN chmod +x /usr/local/bin/ki-entrypoint && useradd --create-home --uid 1000 ki \
    && mkdir -p /data && chown ki:ki /data
USER ki
VOLUME ["/data"]
ENTRYPOINT ["ki-entrypoint"]
CMD ["worker"]
