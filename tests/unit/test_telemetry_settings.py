"""Telemetry settings and the attributes they give a recipe (no server, no SDK needed)."""

from __future__ import annotations

import pytest

import aiocoord
from aiocoord import Telemetry, _telemetry


def test_a_name_comes_from_the_longest_listed_prefix() -> None:
    telemetry = Telemetry(names={"/orders": "orders", "/orders/eu": "orders-eu", "/": "all"})
    assert telemetry.name_for("/orders/eu/lock") == "orders-eu"
    assert telemetry.name_for("/orders/us/lock") == "orders"
    assert telemetry.name_for("/orders") == "orders"
    assert telemetry.name_for("/ordersx") == "all"  # a prefix is whole path components
    assert Telemetry().name_for("/a") is None


def test_metrics_carry_the_kind_and_name_and_the_path_only_on_request() -> None:
    tags = _telemetry.recipe_tags(Telemetry(names={"/a": "a"}), "mutex", "/a/b", "/ns")
    assert tags.metric_attributes == {"aiocoord.recipe": "mutex", "aiocoord.name": "a"}
    assert tags.span_attributes["aiocoord.path"] == "/ns/a/b"
    with_paths = _telemetry.recipe_tags(Telemetry(paths=True), "queue", "/q", None)
    assert with_paths.metric_attributes == {"aiocoord.recipe": "queue", "aiocoord.path": "/q"}
    assert with_paths.metric_with_outcome("ok")["aiocoord.outcome"] == "ok"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"paths": 1},
        {"names": ["/a"]},
        {"names": {"/a": 1}},
        {"names": {"a": "x"}},
        {"request_metrics": "yes"},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises((aiocoord.ArgumentTypeError, aiocoord.InvalidPathError)):
        Telemetry(**kwargs)  # type: ignore[arg-type]


def test_a_client_refuses_anything_but_telemetry_settings() -> None:
    with pytest.raises(aiocoord.ArgumentTypeError):
        aiocoord.connect("127.0.0.1:1", telemetry={"paths": True})  # type: ignore[arg-type]
    assert aiocoord.connect("127.0.0.1:1").telemetry == Telemetry()
    assert not Telemetry().request_metrics  # opt-in: a measurement per request


def test_without_the_api_every_entry_point_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_telemetry, "AVAILABLE", False)
    tags = _telemetry.recipe_tags(Telemetry(), "mutex", "/a")
    with _telemetry.span("x", tags, duration=_telemetry.WAIT) as scope:
        scope.set("k", 1)
        scope.outcome("ok")
        assert not scope.recording
    assert _telemetry.start_hold("x", tags) is None
    assert _telemetry.detached_context() is None
    _telemetry.record("aiocoord.request.duration", 1.0)
    _telemetry.add("aiocoord.retries", 1)
