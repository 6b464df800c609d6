"""``POST /placement`` for the control-plane server: the CLI's answer over HTTP (400 on bad input)."""

from __future__ import annotations

import json

from flask import Blueprint, Response, request

from webhook.placement.api import place_request
from webhook.placement.errors import PlacementInputError

blueprint = Blueprint("placement", __name__)


def _error(message: str, status: int = 400) -> Response:
    return Response(json.dumps({"error": message}), status=status, mimetype="application/json")


@blueprint.post("/placement")
def placement() -> Response:
    try:
        body = json.loads(request.get_data(cache=False))
    except (ValueError, RecursionError):
        return _error("request body is not JSON")
    try:
        result = place_request(body)
    except PlacementInputError as exc:
        return _error(str(exc))
    return Response(json.dumps(result), status=200, mimetype="application/json")
