"""The public surface is deliberate: this test changes when it does."""

from __future__ import annotations

import aiocoord
import aiocoord.testing


def test_every_exported_name_exists_and_says_it_is_public() -> None:
    for module in (aiocoord, aiocoord.testing):
        for name in module.__all__:
            assert hasattr(module, name), name
        public = {n for n in vars(module) if n[0] not in "_@"} - {"testing"}
        assert public <= set(module.__all__) | {"annotations"}, public - set(module.__all__)


def test_errors_share_one_root() -> None:
    for name in aiocoord.__all__:
        obj = getattr(aiocoord, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, aiocoord.CoordinationError), name
            assert name.endswith("Error")


def test_aiozk_does_not_leak_into_the_public_surface() -> None:
    for name in aiocoord.__all__:
        module = getattr(getattr(aiocoord, name), "__module__", "") or ""
        assert not module.startswith("aiozk"), name
