"""The package's surface: every public name is documented, and the type stubs describe
exactly what the native module has (a method added without its stub fails here)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import stoker
import stoker._stoker as native

STUB = Path(stoker.__file__).with_name("_stoker.pyi")


def stub_names():
    """The stubs' public classes, each with its members (those of the stubs' private
    base classes included), and functions (None)."""
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            own = {
                n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else n.target.id
                for n in node.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.AnnAssign))
            }
            for base in node.bases:
                own |= out.get(base.id, set()) if isinstance(base, ast.Name) else set()
            out[node.name] = own
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = None
    return {k: v for k, v in out.items() if not k.startswith("_")}


def public_members(cls):
    return {
        name
        for name in dir(cls)
        if not name.startswith("_") or name in ("__dlpack__", "__dlpack_device__", "__len__", "__iter__", "__next__", "__enter__", "__exit__")
    } - set(dir(object))


def test_every_public_name_is_documented():
    for name in stoker.__all__:
        if name == "__version__":
            continue
        obj = getattr(stoker, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj) and obj.__module__ == "stoker":
            for m in public_members(obj):
                if not m.startswith("__"):
                    assert inspect.getdoc(getattr(obj, m)), f"{name}.{m}"


def test_stubs_match_the_native_module():
    stubs = stub_names()
    exported = {n for n in dir(native) if not n.startswith("_")}
    assert exported == set(stubs), exported ^ set(stubs)
    for name, members in stubs.items():
        if members is None:
            continue
        have = public_members(getattr(native, name))
        assert have <= members | {"__init__"}, (name, have - members)
        missing = {m for m in members if not m.startswith("__")} - have
        assert not missing, (name, missing)


def test_exceptions_form_one_hierarchy():
    for name in ("ConfigError", "SourceError", "SplitError", "SampleError", "DeviceError", "PipelineError", "ResumeError"):
        assert issubclass(getattr(stoker, name), stoker.StokerError)
    assert issubclass(stoker.ConfigError, ValueError)
    assert issubclass(stoker.SourceError, OSError)
    assert issubclass(stoker.ResumeError, ValueError)
    assert issubclass(stoker.BackendUnavailableError, stoker.DeviceError)
