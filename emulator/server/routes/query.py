"""Query parameters of the hottest routes, read with one pydantic validation per request.

FastAPI solves each query parameter a route declares in its signature on every request, with
annotation introspection per parameter (hundreds of ``isinstance`` calls for a PATCH's six
parameters). On the offsets routes, which every Connect-side commit and every read goes through,
that was the largest single part of a dry-run PATCH's daemon CPU beyond ``/healthz``
(benchmarks/RESULTS.md, round 10). Those routes declare their parameters as a pydantic model instead,
read them with ``RouteQuery.read`` and publish them with ``RouteQuery.openapi``:

- the same values: the last value of a repeated parameter, unknown parameters ignored, lax parsing
  (``true``/``1``/``yes``… for booleans), as FastAPI reads a signature's parameters;
- the same refusals: a ``RequestValidationError`` with ``("query", name)`` locations, which
  ``emulator.server.errors`` turns into the same one-sentence 400;
- the same document: the parameter objects FastAPI would generate from an equivalent signature
  (tests/unit/test_route_query.py builds that signature and compares).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["QueryModel", "RouteQuery"]


class QueryModel(BaseModel):
    """A route's query parameters: field name = parameter name; unknown parameters are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


M = TypeVar("M", bound=QueryModel)


class RouteQuery(Generic[M]):
    def __init__(self, model: type[M]) -> None:
        self.model = model

    def read(self, request: Request) -> M:
        """The request's parameters, validated; ``RequestValidationError`` (a 400) if one is not."""
        try:
            return self.model.model_validate(dict(request.query_params))
        except ValidationError as exc:
            raise RequestValidationError([_as_fastapi(error) for error in exc.errors(include_url=False)]) from None

    def openapi(self) -> dict[str, Any]:
        """``openapi_extra`` for the route: its query parameters, as FastAPI describes a signature's."""
        schema = self.model.model_json_schema()
        required = set(schema.get("required", ()))
        parameters = []
        for name, field in self.model.model_fields.items():
            parameter: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": schema["properties"][name],
            }
            if field.description:
                parameter["description"] = field.description
            parameters.append(parameter)
        return {"parameters": parameters}


def _as_fastapi(error: Any) -> dict[str, Any]:
    """A model's error as FastAPI reports a parameter's: located in the query, and a missing one's
    input None (the model's is the whole query)."""
    located: dict[str, Any] = {**error, "loc": ("query", *error["loc"])}
    if error["type"] == "missing":
        located["input"] = None
    return located
