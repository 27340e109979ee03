"""Offset formats over one neutral model (``model.RawRecord``: key bytes, value bytes or None).

One module per format: ``standalone`` (Connect's FileOffsetBackingStore file), ``cdc_state`` (Flink
CDC / RisingWave state JSON), ``kip875`` (Connect's REST offsets body), ``snapshot`` (Avro backups);
``diff`` plans what a transfer changes. Moving data between them lives in ``emulator.transfer``.
"""
