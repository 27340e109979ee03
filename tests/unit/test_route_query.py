"""A route that reads its query parameters through ``RouteQuery`` answers and documents exactly as
FastAPI does for the same parameters declared in the handler's signature.

Each model of the offsets routes is turned back into such a signature, on a FastAPI app of its own,
and the two are compared: the OpenAPI parameter objects, and for generated query strings (repeated
and unknown parameters, every spelling of a boolean, numbers out of shape, empty values) the values
read or, for a refusal, the errors (location, type, input) the daemon turns into its 400 sentence.
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any
from urllib.parse import urlencode

import pytest
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from emulator.server.routes.offsets import AlterQuery, GetQuery, ListQuery, ResetQuery
from emulator.server.routes.query import QueryModel, RouteQuery


class RequiredAndDescribed(QueryModel):
    """Shapes the offsets routes do not use (yet): a required parameter, a described one, a bound."""

    epoch: int
    limit: int = Field(10, ge=1, description="How many")


MODELS = [ListQuery, GetQuery, AlterQuery, ResetQuery, RequiredAndDescribed]


@functools.cache
def _apps(model: type[QueryModel]) -> tuple[FastAPI, FastAPI]:
    """(FastAPI reading the model's fields from a signature, the same route reading ``RouteQuery``)."""
    route_query = RouteQuery(model)

    def declared(**values: Any) -> dict[str, Any]:
        return values

    declared.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[(field.annotation, Query(description=field.description), *field.metadata)],
                default=inspect.Parameter.empty if field.is_required() else field.default,
            )
            for name, field in model.model_fields.items()
        ]
    )

    def read(request: Request) -> dict[str, Any]:
        return route_query.read(request).model_dump()

    def errors(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse([{k: e[k] for k in ("loc", "type", "input") if k in e} for e in exc.errors()], 400)

    by_signature, by_model = FastAPI(), FastAPI()
    by_signature.get("/r")(declared)
    by_model.get("/r", openapi_extra=route_query.openapi())(read)
    for app in (by_signature, by_model):
        app.add_exception_handler(RequestValidationError, errors)  # type: ignore[arg-type]
    return by_signature, by_model


@functools.cache
def _clients(model: type[QueryModel]) -> tuple[TestClient, TestClient]:
    by_signature, by_model = _apps(model)
    return TestClient(by_signature), TestClient(by_model)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_the_document_lists_the_parameters_fastapi_would(model: type[QueryModel]) -> None:
    by_signature, by_model = _apps(model)
    expected = by_signature.openapi()["paths"]["/r"]["get"]["parameters"]
    assert by_model.openapi()["paths"]["/r"]["get"]["parameters"] == expected


_VALUES = st.sampled_from(
    ["true", "false", "True", "FALSE", "1", "0", "yes", "no", "on", "off", "t", "f", "", "maybe",
     "7", "-3", "+4", " 5", "1.0", "1e3", "0x10", "9223372036854775808", "x" * 40, "é", "source"]
)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_values_and_refusals_are_fastapis(model: type[QueryModel], data: st.DataObject) -> None:
    names = st.sampled_from([*model.model_fields, "unknown"])
    pairs = data.draw(st.lists(st.tuples(names, _VALUES), max_size=5))
    query = urlencode(pairs)
    by_signature, by_model = _clients(model)
    expected = by_signature.get(f"/r?{query}")
    got = by_model.get(f"/r?{query}")
    assert (got.status_code, got.json()) == (expected.status_code, expected.json()), query
