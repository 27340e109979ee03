"""The OpenAPI document, kept honest: the statuses each route really answers, typed bodies, no 422.

FastAPI documents every operation with its own 422 validation answer and an untyped 200, while this
daemon answers Connect's statuses (400/404/409/500/503) with Connect's error body and never 422
(``emulator.server.errors`` turns validation failures into 400). So:

- every route declares its 200 body and its error statuses in one line, ``**documented(Body, 404,
  503)``; the 200 body is documentation only (``response_model=None``): handlers keep returning
  plain dicts, nothing is re-validated or filtered per request, and a test checks real answers
  against the document instead (tests/integration/test_openapi_document.py);
- bodies are the service layer's own ``TypedDict`` declarations where they exist, mirrored into
  ``typing_extensions.TypedDict`` (which pydantic needs on Python 3.11) by ``schema_type``, so the
  document follows the code that builds the bodies;
- ``install_openapi`` removes FastAPI's 422 from every operation and states the formats of
  parameters that are parsed by hand (times, ``kind``, the JSON ``partition``);
- ``parameter_errors_message`` turns pydantic's parameter errors into one sentence naming the
  parameter, which the validation handler answers with 400.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union, get_args, get_origin, get_type_hints

import typing_extensions
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict

from emulator.history.query import DEFAULT_LIMIT, MAX_LIMIT
from emulator.model.errors import ERROR_HEADER
from emulator.model.times import RELATIVE_TIME_PATTERN
from emulator.server.auth.policy import rule_for
from emulator.service.connector_stores import STORES

ERROR_STATUSES: Mapping[int, str] = {
    400: "The request is wrong (body, parameter, connector name or state): Connect's BadRequestException",
    401: "No valid credentials were presented",
    403: "The credentials presented do not allow this operation",
    404: "The connector (or its claim, or its history) is unknown, or the history is disabled",
    409: "Another writer won: a newer claim fenced this one, or the connector runs",
    413: "The request body is larger than the daemon accepts (--max-body-bytes)",
    415: "The request body is not JSON",
    500: "Connect's own 500s (an offset that is not a map of primitives, a sink's consumer-group call), "
    "or the log did not take the write",
    503: "The daemon cannot answer now: its log is not read to its end or not open yet, or did not answer "
    "within --write-timeout, or its disk refused the write (each with Retry-After: ask again then); or the "
    "log cannot be read at all (no Retry-After: waiting will not mend it)",
}
"""What each error status means, as the document describes it where a route does not say more."""

KIND_HEADER: Mapping[str, Any] = {
    ERROR_HEADER: {
        "description": "The error's kind (not_ready, fenced, ...: emulator/server/errors.py lists them), for "
        "programs to match on instead of the message",
        "schema": {"type": "string"},
    }
}
RETRY_AFTER_HEADER: Mapping[str, Any] = {
    "Retry-After": {
        "description": "Seconds to wait before sending the request again; sent only with a 503 that passes "
        "by itself (the Python clients retry those). Absent: asking again would not help",
        "schema": {"type": "integer", "minimum": 0},
    }
}


class ErrorBody(BaseModel):
    """Connect's error body (``ConnectExceptionMapper``); the ``X-Connect-Offsets-Error`` response
    header names the error's kind for programs."""

    model_config = ConfigDict(extra="forbid")

    error_code: int
    """The HTTP status, repeated."""
    message: str
    """What went wrong, in words; Connect's own text where Connect has one."""


ErrorSpec = int | tuple[int, str] | tuple[int, str, Any]
"""An error a route answers: a status, or (status, description), or (status, description, body type)."""


def documented(ok: Any, *errors: ErrorSpec, description: str = "Success") -> dict[str, Any]:
    """Keyword arguments for a route decorator: its 200 body type and the error statuses it answers.

    ``@router.get("/x", **documented(Body, 404, 503))``. Errors carry ``ErrorBody`` unless a third
    element says otherwise; a status without a description takes ``ERROR_STATUSES``'s.
    """
    responses: dict[int | str, dict[str, Any]] = {200: {"model": schema_type(ok), "description": description}}
    for spec in errors:
        status, text, body = _error_spec(spec)
        retry = status == 503 and body is ErrorBody  # /readyz's own 503 reports and never sends it
        headers = {**KIND_HEADER, **(RETRY_AFTER_HEADER if retry else {})}
        responses[status] = {"model": schema_type(body), "description": text, "headers": headers}
    return {"response_model": None, "responses": responses}


def _error_spec(spec: ErrorSpec) -> tuple[int, str, Any]:
    if isinstance(spec, int):
        return spec, ERROR_STATUSES[spec], ErrorBody
    if len(spec) == 2:
        return spec[0], spec[1], ErrorBody
    return spec[0], spec[1], spec[2]


# -- bodies ----------------------------------------------------------------------------------------

_mirrors: dict[type, Any] = {}


def schema_type(tp: Any) -> Any:
    """``tp`` with every ``TypedDict`` in it replaced by an equal ``typing_extensions.TypedDict``.

    Pydantic builds schemas only from the latter on Python < 3.12; the service layer declares its
    bodies with the former. Required and ``NotRequired`` keys, nesting, lists, dicts and unions
    are kept, so the schema says exactly what the declaration says.
    """
    if typing_extensions.is_typeddict(tp):
        return _mirror(tp)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (Union, types.UnionType):
        return Union[tuple(schema_type(a) for a in args)]  # noqa: UP007 - built from a tuple at run time
    if origin in (list, dict, Sequence, Mapping) and args:
        generic: Any = {Sequence: list, Mapping: dict}.get(origin, origin)
        return generic[tuple(schema_type(a) for a in args)]
    return tp


_TYPED_DICT: Any = typing_extensions.TypedDict
"""Called with a name computed at run time, which type checkers cannot follow."""


def _mirror(tp: Any) -> Any:
    """Keys are read from the annotations themselves: under ``from __future__ import annotations``,
    Python 3.11 counts every key of a ``typing.TypedDict`` as required in ``__required_keys__``."""
    mirror = _mirrors.get(tp)
    if mirror is None:
        fields: dict[str, Any] = {}
        for name, hint in get_type_hints(tp, include_extras=True).items():
            origin = get_origin(hint)
            if origin is typing_extensions.NotRequired:
                fields[name] = typing_extensions.NotRequired[schema_type(get_args(hint)[0])]
            elif origin is typing_extensions.Required or tp.__total__:
                fields[name] = schema_type(get_args(hint)[0] if origin is typing_extensions.Required else hint)
            else:
                fields[name] = typing_extensions.NotRequired[schema_type(hint)]
        mirror = _TYPED_DICT(tp.__name__, fields)
        mirror.__doc__ = tp.__doc__
        mirror.__module__ = tp.__module__
        _mirrors[tp] = mirror
    return mirror


# -- the document ----------------------------------------------------------------------------------

EPOCH_MS_RANGE = (-62_135_596_800_000, 253_402_300_799_999)
"""Epoch milliseconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: the times an answer can show."""

INT64 = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}

TIME_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "integer", "minimum": EPOCH_MS_RANGE[0], "maximum": EPOCH_MS_RANGE[1]},
        {"type": "string", "pattern": RELATIVE_TIME_PATTERN},
    ],
    "description": "ISO-8601 (a time without a zone is UTC), epoch milliseconds, or now-<duration> "
    "(now-1h, now-30m, now-2d: before the daemon's clock)",
}

QUERY_PARAMETER_SCHEMAS: Mapping[str, dict[str, Any]] = {
    "as_of": TIME_SCHEMA,
    "from": TIME_SCHEMA,
    "to": TIME_SCHEMA,
    "kind": {"type": "string", "enum": ["source", "sink"]},
    "partition": {"type": "string", "contentMediaType": "application/json", "description": "a JSON object"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
    "claim_epoch": {**INT64, "minimum": 1},  # claims are numbered from 1 (routes/offsets.py: claim_epoch_param)
    "sequence_source": {"type": "string", "minLength": 1},
    "epoch": {**INT64, "minimum": 0},  # an archive's epochs count from 0; a claim's from 1 (below)
    "sequence": INT64,
    "store": {"type": "string", "enum": list(STORES)},
    "before": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$", "description": "a page's next"},
}
"""Query parameters the routes take as text and parse themselves: their real format, by name."""

OPERATION_PARAMETER_SCHEMAS: Mapping[tuple[str, str, str], dict[str, Any]] = {
    ("/connectors/{connector}/claim", "delete", "epoch"): {**INT64, "minimum": 1},
}
"""Where one operation reads a parameter of a shared name otherwise: (path, method, name)."""

CONNECTOR_NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    # Connect's names hold no ISO control character; a '/' cannot be one segment (encoded, a 400)
    "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f/]+$",
}
"""The ``{connector}`` path segment, as ``params.connector_name_problem`` lets it through."""


def install_openapi(app: FastAPI) -> None:
    """Serve the document as FastAPI builds it, minus its 422s, with hand-parsed parameters described."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            for path, method, operation in _operations_with_paths(document):
                operation.get("responses", {}).pop("422", None)
                _declare_guard_statuses(path, method, operation)
                for parameter in operation.get("parameters", []):
                    name, place = parameter["name"], parameter.get("in")
                    schema = OPERATION_PARAMETER_SCHEMAS.get((path, method, name)) or QUERY_PARAMETER_SCHEMAS.get(name)
                    if place == "query" and schema is not None:
                        parameter["schema"] = dict(schema)
                    elif place == "path" and name == "connector":
                        parameter["schema"] = dict(CONNECTOR_NAME_SCHEMA)
            schemas = document.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_GUARD_STATUSES: Mapping[int, str] = {
    400: "The Host header is not one the daemon serves (--allowed-hosts)",
    401: ERROR_STATUSES[401],
    403: ERROR_STATUSES[403],
    415: "A write without Content-Type: application/json (bodies or not)",
}
_WRITES = {"post", "patch", "put", "delete"}


def _declare_guard_statuses(path: str, method: str, operation: dict[str, Any]) -> None:
    """What the security guards in front of every route can answer, declared where it applies:
    400 for a Host not served and 401 for credentials that do not hold (any route, public ones
    included), 403 outside the principal's scopes (every route but the public ones), 415 for a
    write without the JSON content type. Routes declare only their own statuses; these follow from
    ``emulator.server.auth`` (the policy says which routes are public)."""
    rule = rule_for(method.upper(), path)
    statuses = [400, 401]
    if rule is None or rule.access != "public":
        statuses.append(403)
    if method in _WRITES:
        statuses.append(415)
    responses = operation.setdefault("responses", {})
    for status in statuses:
        responses.setdefault(
            str(status),
            {
                "description": _GUARD_STATUSES[status],
                "headers": dict(KIND_HEADER),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            },
        )


def _operations_with_paths(document: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return [
        (path, method, op)
        for path, item in document.get("paths", {}).items()
        for method, op in item.items()
        if method in methods
    ]


# -- parameter errors ------------------------------------------------------------------------------

_PLACES = {"query": "query parameter", "path": "path parameter", "header": "header", "cookie": "cookie"}

_EXPECTED: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "missing": lambda _: "is required",
    "int_parsing": lambda _: "must be an integer",
    "int_type": lambda _: "must be an integer",
    "int_from_float": lambda _: "must be a whole number",
    "int_parsing_size": lambda _: "is too long for an integer",
    "bool_parsing": lambda _: "must be true or false",
    "bool_type": lambda _: "must be true or false",
    "float_parsing": lambda _: "must be a number",
    "greater_than_equal": lambda ctx: f"must be at least {ctx.get('ge')}",
    "greater_than": lambda ctx: f"must be greater than {ctx.get('gt')}",
    "less_than_equal": lambda ctx: f"must be at most {ctx.get('le')}",
    "less_than": lambda ctx: f"must be less than {ctx.get('lt')}",
    "string_too_long": lambda ctx: f"must be at most {ctx.get('max_length')} characters long",
    "string_too_short": lambda ctx: f"must be at least {ctx.get('min_length')} characters long",
    "literal_error": lambda ctx: f"must be one of {ctx.get('expected')}",
    "enum": lambda ctx: f"must be one of {ctx.get('expected')}",
}

_SHOWN_INPUT_CHARS = 60


def parameter_errors_message(errors: Sequence[Any]) -> str:
    """One sentence per failed parameter, e.g. ``Query parameter 'claim_epoch' must be an integer,
    got 'abc'``, joined with ``; ``: what a person can act on, instead of pydantic's repr."""
    sentences = [_sentence(e) for e in errors if isinstance(e, Mapping)]
    return "; ".join(sentences) if sentences else "The request's parameters are invalid"


def _sentence(error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    place = _PLACES.get(loc[0], "parameter") if loc else "parameter"
    name = loc[-1] if len(loc) > 1 else "?"
    expected = _EXPECTED.get(str(error.get("type")))
    if expected is not None:
        what = expected(error.get("ctx") or {})
    else:
        what = f"is invalid: {_lower_first(str(error.get('msg', 'not accepted')))}"
    sentence = f"{place[0].upper()}{place[1:]} '{name}' {what}"
    if error.get("type") != "missing" and "input" in error:
        sentence += f", got {_shown(error['input'])}"
    return sentence


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else repr(str(value))
    if len(text) > _SHOWN_INPUT_CHARS:
        return f"{text[:_SHOWN_INPUT_CHARS]}… ({len(str(value))} characters)"
    return text
