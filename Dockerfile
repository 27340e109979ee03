# The connect-offsets daemon, as docker-compose.yml runs it next to Kafka and Kafka Connect.
# Configured entirely through CONNECT_OFFSETS_<FLAG> environment variables (see docs/configuration.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The whole build context (trimmed by .dockerignore) is installed, then dropped: the image keeps
# only the installed package, so nothing from the work tree shadows it at run time.
COPY . /src
RUN pip install /src && rm -rf /src

# An unprivileged user owning the data directory; a named volume mounted there inherits this owner.
RUN useradd --system --uid 10001 --home-dir /var/lib/connect-offsets --shell /usr/sbin/nologin connect-offsets \
    && mkdir -p /var/lib/connect-offsets \
    && chown connect-offsets /var/lib/connect-offsets
USER connect-offsets
WORKDIR /var/lib/connect-offsets

# Inside a container the daemon must listen beyond loopback; publishing decides who can reach it.
ENV CONNECT_OFFSETS_HOST=0.0.0.0 \
    CONNECT_OFFSETS_PORT=8081 \
    CONNECT_OFFSETS_DATA_DIR=/var/lib/connect-offsets
EXPOSE 8081

# The slim image has no curl: ask /readyz (200 once the log is read to its end) with Python itself.
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=12 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('CONNECT_OFFSETS_PORT', '8081'), timeout=4)"]

ENTRYPOINT ["connect-offsets"]
CMD ["serve"]
