"""Names a package imports on first use (PEP 562), so that importing the package stays light:
`import ddpbayes` and `ddpbayes.model` load neither PyMC nor PyTensor until a name needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def on_first_use(package: str, homes: dict[str, str], namespace: dict) -> Callable[[str], object]:
    """The package's `__getattr__`: each name of `homes` imported from its home module when first
    asked for, then kept in the package's `namespace` (its globals)."""

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(homes[name]), name)
        namespace[name] = value
        return value

    return __getattr__


def listing(homes: dict[str, str], namespace: dict) -> Callable[[], list[str]]:
    """The package's `__dir__`: its names with those imported on first use, so that autodoc and tab
    completion list them before they are loaded."""

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __dir__
