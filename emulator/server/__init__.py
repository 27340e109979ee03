"""The daemon: settings, wiring of log, view and services, the HTTP routes, and the one mapping
from domain errors to HTTP (``errors``)."""
