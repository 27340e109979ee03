"""The offsets operations behind the API, CLI and clients, free of HTTP.

- ``offsets``: KIP-875 list/get/alter/reset — Connect's checks in Connect's order, then one
  strategy per request: ``source_strategy`` (offsets-topic records) or ``sink_strategy``
  (the consumer group, through ``sinks``);
- ``checks``: readiness, existence, connector type, the STOPPED rule;
- ``write_guard``: claims and commit sequences; ``writer``: append, acknowledge, apply to the view;
- ``claims``, ``records`` (raw export/import, history rollback), ``history`` (archive reads),
  ``health`` (readiness and counters);
- ``bodies``: request parsing; ``results``: the typed shapes the API turns into bodies.
"""
