"""Who may use the daemon, and how: authentication, scopes, and the guards every request passes.

One module per job, in the order a request meets them:

- ``guards`` — ASGI middleware: the ``Host`` header (DNS rebinding), authentication (sets
  ``emulator.model.principal.current_principal``) and the ``Content-Type`` of writes;
- ``authenticate`` — credentials → ``Principal`` (HTTP Basic, bearer tokens, TLS client certificates);
- ``credentials`` — the files behind it (Connect's credentials file, tokens, scopes), reloaded on change;
- ``properties`` — ``java.util.Properties`` syntax, as Connect reads its credentials file;
- ``tokens`` — minting and hashing bearer tokens;
- ``scopes`` — ``read``/``write``/``claim``/``admin`` on connector-name patterns;
- ``policy`` — which scope each route needs (one table; a route without a line is refused);
- ``tls`` — the server's TLS context and the client certificate's subject;
- ``config`` — the security settings checked together (no open port without authentication);
- ``status`` — what ``/status`` shows to whom.

docs/operations.md ("Security") is the operator's guide to all of it.
"""
