"""The daemon: settings, wiring of log, view and service, and the HTTP routes."""
