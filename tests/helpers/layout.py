"""Where the package and its tests lie, and which test file mirrors a module (``rcattr/<dir>/<name>.py`` is tested in
``tests/<dir>/test_<name>.py``): the rule test_package enforces and the 5.2 leg's selection check reads."""

from __future__ import annotations

from pathlib import Path

import rcattr

PACKAGE = Path(rcattr.__file__).parent
TESTS = Path(__file__).resolve().parents[1]


def mirrored_test(module: Path) -> Path:
    """``rcattr/<dir>/<name>.py`` -> ``tests/<dir>/test_<name>.py`` (a private ``_name`` -> ``test_name``)."""
    relative = module.relative_to(PACKAGE)
    return TESTS / relative.parent / f"test_{relative.stem.lstrip('_')}.py"
