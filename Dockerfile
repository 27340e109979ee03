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

# An unprivileged user owning the data directory, mode 0700 (the daemon warns of a data directory
# others can read); a named volume mounted there inherits this owner and mode when it is created.
RUN useradd --system --uid 10001 --home-dir /var/lib/connect-offsets --shell /usr/sbin/nologin connect-offsets \
    && mkdir -p /var/lib/connect-offsets \
    && chown connect-offsets /var/lib/connect-offsets \
    && chmod 700 /var/lib/connect-offsets
USER connect-offsets
WORKDIR /var/lib/connect-offsets

# Inside a container the daemon must listen beyond loopback, and beyond loopback it refuses to start
# without authentication: mount Connect's credentials file, a tokens file or a client CA and name it
# (CONNECT_OFFSETS_CREDENTIALS_FILE, _TOKENS_FILE, _TLS_CLIENT_CA; docs/operations.md, Security), or
# accept an open port with CONNECT_OFFSETS_INSECURE_NO_AUTH=true (docker-compose.yml does, for a
# stack published on 127.0.0.1 only). Nothing here chooses for you.
ENV CONNECT_OFFSETS_HOST=0.0.0.0 \
    CONNECT_OFFSETS_PORT=8081 \
    CONNECT_OFFSETS_DATA_DIR=/var/lib/connect-offsets
EXPOSE 8081

# The slim image has no curl: ask /readyz (200 once the log is read to its end, no credentials needed)
# with Python itself, over https when the daemon serves TLS (its own certificate, on loopback, is not
# checked). A daemon that requires client certificates needs a HEALTHCHECK of its own with one, and
# --allowed-hosts must include 127.0.0.1 for this one.
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=12 \
    CMD ["python", "-c", "import os, ssl, urllib.request; tls = bool(os.environ.get('CONNECT_OFFSETS_TLS_CERT')); urllib.request.urlopen('%s://127.0.0.1:%s/readyz' % ('https' if tls else 'http', os.environ.get('CONNECT_OFFSETS_PORT', '8081')), timeout=4, context=ssl._create_unverified_context() if tls else None)"]

ENTRYPOINT ["connect-offsets"]
CMD ["serve"]
