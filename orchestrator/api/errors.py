"""Every error answer in one shape (`ErrorBody`), and how the API's exceptions map to it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from agents.core.store_faults import STORE_UNAVAILABLE, store_unavailable
from orchestrator.api.guards import retry_after
from orchestrator.errors import Overloaded, ServiceError
from orchestrator.schemas import ErrorBody

__all__ = ["COMMON_ERRORS", "NOT_FOUND", "as_json", "error_response", "install_error_handlers"]

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}

# The error answers every /v1 route may give, for the OpenAPI document.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        400: "The body is not valid JSON.",
        413: "The body is larger than the service accepts.",
        422: "The request is invalid (the details name each field).",
        429: "Too many requests from this caller, or too many runs; see Retry-After.",
        503: "The service is starting or stopping, or the run store is unavailable; see "
        "Retry-After.",
    }.items()
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such run."}
}


def error_response(
    status: int, code: str, message: str, details: Any = None, **headers: str
) -> Response:
    """An error answer: `{"error": {"code", "message", "details"}}`."""
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def as_json(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """The same error answers, documented as JSON on a route whose own answer is not.

    FastAPI would give them the route's media type.
    """
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        status: {
            "description": answer["description"],
            "content": {"application/json": {"schema": schema}},
        }
        for status, answer in responses.items()
    }


def install_error_handlers(app: FastAPI) -> None:
    """Answer service errors, invalid requests and HTTP errors in the one shape."""

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> Response:
        headers = dict(exc.headers)
        if isinstance(exc, Overloaded):
            headers["Retry-After"] = retry_after(exc.retry_after_s)
        return error_response(exc.status, exc.code, exc.message, exc.details or None, **headers)

    async def unavailable(_: Request, exc: Exception) -> Response:
        if not store_unavailable(exc):
            raise exc  # a bug in a query stays a 500
        # Only the kind of failure: a database error's text may quote a statement and its data.
        cause = getattr(exc, "orig", None) or exc
        message = f"the run store is unavailable ({type(cause).__name__}); retry later"
        return error_response(503, "store_unavailable", message, **{"Retry-After": "5"})

    # The database stopped, refused, timed out or dropped the connection.
    for kind in (*STORE_UNAVAILABLE, DBAPIError):
        app.add_exception_handler(kind, unavailable)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = [
            {
                "field": ".".join(str(p) for p in e["loc"]),
                "message": e["msg"],
                "type": e["type"],
            }
            for e in exc.errors()
        ]  # the offending input is not echoed: it may be large, or a secret
        if any(p["type"] == "json_invalid" for p in problems):
            return error_response(
                400, "invalid_json", "the request body is not valid JSON", problems
            )
        first = problems[0] if problems else {"field": "", "message": "invalid request"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        return error_response(422, "validation_error", message, problems)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route on the path only.
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return error_response(exc.status_code, code, str(exc.detail), **headers)


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)
