"""``hot_routes_of`` refuses, when the app is built, a route ``HotRoutes`` could not serve exactly as
FastAPI would, so a handler changed later cannot silently answer differently on the fast path."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import APIRouter, Depends, Request, Response

from emulator.server.hot_routes import hot_routes_of


async def _runtime(request: Request) -> object:
    return object()


async def _fine(request: Request) -> None:
    return None


def _router(endpoint: Callable[..., Any], *dependencies: Callable[..., Any]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(d) for d in dependencies])
    router.get("/things/{name}")(endpoint)
    return router


async def served(name: str, request: Request, rt: object) -> Response:
    return Response(b"")


async def query_in_signature(name: str, request: Request, limit: int = 10) -> Response:
    return Response(b"")


async def serialized(name: str, request: Request) -> dict[str, str]:
    return {}


def blocking(name: str, request: Request) -> Response:
    return Response(b"")


async def needs_more(request: Request, limit: int = 1) -> None:
    return None


def test_a_handler_of_path_parameters_request_and_runtime_is_served() -> None:
    (hot,) = hot_routes_of(_router(served, _fine).routes, [Depends(_fine)], _runtime)
    assert hot.takes_request and hot.runtime is _runtime
    assert [d.__name__ for d in hot.dependencies] == ["_fine", "_fine"]  # the app's, then the router's


@pytest.mark.parametrize("endpoint", [query_in_signature, serialized, blocking], ids=lambda f: f.__name__)
def test_a_handler_fastapi_would_answer_differently_is_refused(endpoint: Callable[..., Any]) -> None:
    refusal = re.escape("HotRoutes: /things/{name}'s handler must be `async`, return a `Response`")
    with pytest.raises(TypeError, match=refusal):
        hot_routes_of(_router(endpoint).routes, [], _runtime)


def test_a_dependency_that_takes_more_than_the_request_is_refused() -> None:
    with pytest.raises(TypeError, match="dependency needs_more must be `async def f"):
        hot_routes_of(_router(served, needs_more).routes, [], _runtime)
