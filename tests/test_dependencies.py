"""What the package imports is what ``pip install .`` installs (issue 58: ``saspa report``
failed after the README's install, matplotlib being only in the test extras).

Every import of another distribution anywhere in the package, at module level or
inside a function, is read from the source and must be a core dependency in
pyproject.toml, or one of the optional ones whose every import is guarded by
``except ImportError`` with a message naming the install command."""

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# optional distributions: the extra that installs each
OPTIONAL = {"pyarrow": "parquet", "bokeh": "dashboard"}


def _distribution_names(requirements):
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def _imports():
    """(module top name, file, guarded) of every import in the package."""
    found = []
    for path in (ROOT / "saspa_dask").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        guarded = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError",
                                                                    "ModuleNotFoundError")
                    for h in node.handlers):
                for inner in node.body:
                    guarded.update(id(n) for n in ast.walk(inner))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.append((name.split(".")[0], path, id(node) in guarded))
    return found


def test_every_import_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _distribution_names(project["dependencies"])
    extras = {k: _distribution_names(v) for k, v in project["optional-dependencies"].items()}
    providers = importlib.metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    problems = []
    for module, path, guarded in _imports():
        if module in stdlib or module == "saspa_dask" or module == "__future__":
            continue
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
        if dists & core:
            continue
        optional = [d for d in dists if d in OPTIONAL]
        if optional and guarded and optional[0] in extras[OPTIONAL[optional[0]]]:
            continue
        problems.append(f"{path.relative_to(ROOT)} imports {module} ({sorted(dists)})"
                        + ("" if guarded else ", unguarded"))
    assert problems == [], problems


def test_report_needs_nothing_beyond_the_core_install():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "matplotlib" in _distribution_names(project["dependencies"])
    for extra in ("test", "bench"):
        assert not {"torch", "gpytorch", "gpy"} & _distribution_names(
            project["optional-dependencies"][extra]), extra
