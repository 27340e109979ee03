"""Moving offsets between stores and files, byte for byte: export, import, migrate."""
