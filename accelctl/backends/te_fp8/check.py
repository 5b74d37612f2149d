"""Check te_fp8 plans, and the worker's TE code, against Transformer Engine's own source.

TE does not import without CUDA, but its pure-python meta wheel carries every
``transformer_engine/pytorch/*.py``: found with ``importlib.util.find_spec`` (no ``__init__``
run), read with ``ast``; only the recipe module is loaded, to construct the real recipe.
``check_config`` (a plan's ``te_recipe.json``), ``check_worker_source`` (every ``te.X`` the
worker uses and its parameters), ``check_timm_block_fn`` (the keywords timm passes to
``block_fn``) and ``TeSource.fp8_dims`` (the FP8 GEMM shape rule) return ``Finding`` lists,
empty when the real TE accepts it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from accelctl.backends.findings import Finding
from accelctl.backends.te_fp8.versions import version_tuple
from accelctl.frozen import replace

PYTORCH = "transformer_engine.pytorch"
RECIPE = "transformer_engine.common.recipe"


@dataclass(frozen=True)
class Signature:
    """What a callable accepts, as written in the source."""

    qualname: str
    #: parameters passable by keyword, in order (``self`` dropped)
    params: tuple[str, ...]
    #: parameters without a default
    required: tuple[str, ...]
    varkw: bool
    #: the callable warns with DeprecationWarning (or says "is deprecated")
    deprecated: bool
    #: "pytorch/quantization.py:941"
    where: str


def _package_root(name: str) -> Path | None:
    """A top-level package's folder, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _function_signature(fn: ast.FunctionDef, qualname: str, where: str, method: bool) -> Signature:
    a = fn.args
    positional = [x.arg for x in (*a.posonlyargs, *a.args)]
    pos_defaults = len(a.defaults)
    required = positional[: len(positional) - pos_defaults]
    required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    params = positional[len(a.posonlyargs):] + [x.arg for x in a.kwonlyargs]
    if method and positional:
        first = positional[0]
        params = [p for p in params if p != first]
        required = [p for p in required if p != first]
    return Signature(qualname, tuple(params), tuple(required), a.kwarg is not None, _deprecated(fn), where)


def _deprecated(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.endswith("warn") and "DeprecationWarning" in ast.unparse(node):
                return True
    return False


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def _dataclass_signature(cls: ast.ClassDef, qualname: str, where: str) -> Signature:
    params, required = [], []
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            if "ClassVar" in ast.unparse(st.annotation):
                continue
            params.append(st.target.id)
            if st.value is None:
                required.append(st.target.id)
    return Signature(qualname, tuple(params), tuple(required), False, False, where)


def _top_level_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(st.name)
        elif isinstance(st, ast.Assign):
            out.update(t.id for t in st.targets if isinstance(t, ast.Name))
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            out.add(st.target.id)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            out.update((al.asname or al.name).split(".")[0] for al in st.names)
    return out


class TeSource:
    """Transformer Engine's python source, read (never imported) from an installed package."""

    def __init__(self, root: Path, version: str) -> None:
        self.root = Path(root)
        self.version = version
        self._trees: dict[str, ast.Module | None] = {}

    @classmethod
    def locate(cls) -> "TeSource | None":
        root = _package_root("transformer_engine")
        if root is None or not (root / "pytorch" / "transformer.py").exists():
            return None
        try:
            version = importlib.metadata.version("transformer-engine")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return cls(root, version)

    # -- reading modules ------------------------------------------------------------------

    def module_file(self, dotted: str) -> Path | None:
        parts = dotted.split(".")
        if parts[0] != "transformer_engine":
            return None
        base = self.root.joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.exists():
                return candidate
        return None

    def _tree(self, dotted: str) -> ast.Module | None:
        if dotted not in self._trees:
            path = self.module_file(dotted)
            self._trees[dotted] = ast.parse(path.read_text(encoding="utf-8")) if path else None
        return self._trees[dotted]

    def _where(self, dotted: str, node: ast.AST) -> str:
        path = self.module_file(dotted)
        rel = path.relative_to(self.root) if path else dotted
        return f"{rel}:{getattr(node, 'lineno', 0)}"

    def module_names(self, dotted: str) -> set[str]:
        tree = self._tree(dotted)
        return _top_level_names(tree) if tree else set()

    @cached_property
    def exports(self) -> dict[str, tuple[str, str]]:
        """Names of ``transformer_engine.pytorch`` -> (defining module, name there)."""
        return self._imports_of(PYTORCH)

    def _imports_of(self, dotted: str) -> dict[str, tuple[str, str]]:
        tree = self._tree(dotted)
        out: dict[str, tuple[str, str]] = {}
        if tree is None:
            return out
        is_pkg = (self.module_file(dotted) or Path()).name == "__init__.py"
        for st in tree.body:
            if isinstance(st, ast.ImportFrom):
                mod = self._absolute(dotted, st.module or "", st.level, is_pkg)
                for al in st.names:
                    out[al.asname or al.name] = (mod, al.name)
        return out

    @staticmethod
    def _absolute(current: str, module: str, level: int, is_pkg: bool) -> str:
        if level == 0:
            return module
        base = current.split(".")
        base = base if is_pkg else base[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def resolve(self, dotted: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """Where ``dotted.name`` is defined: (module, def node), following re-exports."""
        tree = self._tree(dotted)
        if tree is None or depth > 6:
            return None
        for st in tree.body:
            if isinstance(st, (ast.FunctionDef, ast.ClassDef)) and st.name == name:
                return dotted, st
        imported = self._imports_of(dotted).get(name)
        if imported:
            mod, orig = imported
            if self.module_file(f"{mod}.{orig}") is not None:  # a submodule
                return None
            return self.resolve(mod, orig, depth + 1)
        return None

    def signature(self, dotted: str, name: str) -> Signature | None:
        found = self.resolve(dotted, name)
        if found is None:
            return None
        mod, node = found
        qual = f"{mod}.{name}"
        if isinstance(node, ast.FunctionDef):
            return _function_signature(node, qual, self._where(mod, node), method=False)
        assert isinstance(node, ast.ClassDef)
        for st in node.body:
            if isinstance(st, ast.FunctionDef) and st.name == "__init__":
                return _function_signature(st, qual, self._where(mod, st), method=True)
        if _is_dataclass(node):
            return _dataclass_signature(node, qual, self._where(mod, node))
        for base in node.bases:  # inherited __init__ from a class of the same module
            if isinstance(base, ast.Name):
                sig = self.signature(mod, base.id)
                if sig is not None:
                    return replace(sig, qualname=qual)
        return None

    def export_signature(self, name: str) -> Signature | None:
        if name not in self.exports:
            return None
        mod, orig = self.exports[name]
        return self.signature(mod, orig)

    # -- the recipe module, loaded for real -----------------------------------------------

    @cached_property
    def recipe_module(self):
        """``transformer_engine/common/recipe/__init__.py`` executed standalone (stdlib + pydantic)."""
        path = self.module_file(RECIPE)
        name = "_accelctl_te_recipe"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # pydantic dataclasses look their module up while being built
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module

    def fp8_dims(self) -> tuple[int, int] | None:
        """(rows, cols) of ``assert_dim_for_fp8_exec``: ``prod(shape[:-1]) % rows``, ``shape[-1] % cols``."""
        found = self.resolve("transformer_engine.pytorch.utils", "assert_dim_for_fp8_exec")
        if found is None:
            return None
        mods = [n.right.value for n in ast.walk(found[1])
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and isinstance(n.right, ast.Constant)]
        return (int(mods[0]), int(mods[1])) if len(mods) >= 2 else None


# ---------------------------------------------------------------------------------- checks


def _check_call(sig: Signature, keywords: list[str], positional: int, has_splat: bool, subject: str,
                te: TeSource) -> list[Finding]:
    out = []
    for kw in keywords:
        if kw not in sig.params and not sig.varkw:
            out.append(Finding(subject, f"{sig.qualname} has no parameter {kw!r} in TE {te.version} ({sig.where})"))
    if not has_splat:
        given = set(keywords) | set(sig.params[:positional])
        missing = [p for p in sig.required if p not in given]
        if missing:
            out.append(Finding(subject, f"{sig.qualname} needs {', '.join(missing)} (TE {te.version}, {sig.where})"))
    return out


def check_config(cfg: dict[str, Any], te: TeSource | None = None) -> list[Finding]:
    """Check a plan's ``te_recipe.json`` content against the TE source read."""
    te = te or TeSource.locate()
    if te is None:
        return [Finding("transformer_engine", "not installed: pip install --no-deps transformer-engine==2.20.2")]
    out: list[Finding] = []
    want, have = version_tuple(cfg["transformer_engine"]), version_tuple(te.version)
    if want[: len(want)] != have[: len(want)]:
        out.append(Finding("te_recipe.json: transformer_engine", f"the plan targets TE {cfg['transformer_engine']} "
                           f"but the source read is TE {te.version}; install the targeted version to check it"))
    layer = cfg["layer"]
    sig = te.export_signature(layer["class"])
    if sig is None:
        out.append(Finding("te_recipe.json: layer",
                           f"transformer_engine.pytorch has no {layer['class']} in TE {te.version}"))
    else:
        out += _check_call(sig, list(layer["kwargs"]), 0, True, "te_recipe.json: layer", te)
    if not cfg.get("fp8"):
        return out
    api = cfg["autocast"]
    sig = te.export_signature(api["function"])
    subject = "te_recipe.json: autocast"
    if sig is None:
        out.append(Finding(subject, f"transformer_engine.pytorch has no {api['function']} in TE {te.version}"))
    else:
        if sig.deprecated:
            out.append(Finding(subject, f"te.{api['function']} is deprecated in TE {te.version} ({sig.where}); "
                                        "a plan must use the API of the version it targets"))
        out += _check_call(sig, [*api["kwargs"], api["recipe_keyword"]], 0, False, subject, te)
    out += check_recipe(cfg["recipe"], te)
    return out


def check_recipe(rec: dict[str, Any], te: TeSource) -> list[Finding]:
    """Construct the real recipe; also refuse kwargs it would silently ignore."""
    subject = "te_recipe.json: recipe"
    try:
        module = te.recipe_module
    except Exception as exc:  # noqa: BLE001 - pydantic missing, or the module changed shape
        return [Finding(subject, f"cannot load {RECIPE} standalone: {type(exc).__name__}: {exc}")]
    cls = getattr(module, rec["class"], None)
    if cls is None:
        return [Finding(subject, f"{RECIPE} has no {rec['class']} in TE {te.version}")]
    kwargs = dict(rec["kwargs"])
    fields = {f.name for f in dataclasses.fields(cls)}
    out = [Finding(subject, f"{rec['class']} has no field {k!r} (TE would silently ignore it)")
           for k in kwargs if k not in fields]
    fmt = kwargs.get("fp8_format")
    if fmt is not None:
        if fmt not in module.Format.__members__:
            members = ", ".join(module.Format.__members__)
            return [*out, Finding(subject, f"Format has no member {fmt!r} (members: {members})")]
        kwargs["fp8_format"] = module.Format[fmt]
    try:
        cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - pydantic ValidationError, AssertionError ...
        out.append(Finding(subject, f"{rec['class']}(...) rejected it: {exc}"))
    return out


def _aliases(tree: ast.Module) -> tuple[set[str], dict[str, str], list[tuple[str, str, ast.AST]]]:
    """(names bound to transformer_engine.pytorch, names bound to other TE modules -> module,
    names imported from TE modules as (module, name, node))."""
    te_names: set[str] = set()
    modules: dict[str, str] = {}
    imported: list[tuple[str, str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.name == PYTORCH and al.asname:
                    te_names.add(al.asname)
                elif al.name.startswith("transformer_engine.") and al.asname:
                    modules[al.asname] = al.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer_engine"):
            for al in node.names:
                full = f"{node.module}.{al.name}"
                if full == PYTORCH:
                    te_names.add(al.asname or al.name)
                elif full == RECIPE:
                    modules[al.asname or al.name] = full
                else:
                    imported.append((node.module, al.name, node))
    return te_names, modules, imported


def check_worker_source(path: str | Path, te: TeSource | None = None) -> list[Finding]:
    """Check the TE names, calls and subclasses in a worker module (read with ``ast``)."""
    te = te or TeSource.locate()
    if te is None:
        return [Finding("transformer_engine", "not installed: pip install --no-deps transformer-engine==2.20.2")]
    path = Path(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    te_names, modules, imported = _aliases(tree)
    out: list[Finding] = []

    def at(node: ast.AST) -> str:
        return f"{path.name}:{getattr(node, 'lineno', 0)}"

    for mod, name, node in imported:
        names = te.exports if mod == PYTORCH else te.module_names(mod)
        if name not in names:
            out.append(Finding(at(node), f"{mod} has no {name} in TE {te.version}"))
    def deprecated(node: ast.AST, name: str) -> None:
        sig = te.export_signature(name)
        if sig is not None and sig.deprecated:
            out.append(Finding(at(node), f"te.{name} is deprecated in TE {te.version} ({sig.where})"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in te_names and node.attr not in te.exports:
                out.append(Finding(at(node), f"transformer_engine.pytorch has no {node.attr} in TE {te.version}"))
            elif node.value.id in te_names:
                deprecated(node, node.attr)
            elif node.value.id in modules and node.attr not in te.module_names(modules[node.value.id]):
                out.append(Finding(at(node), f"{modules[node.value.id]} has no {node.attr} in TE {te.version}"))
        elif isinstance(node, ast.Call):
            func = node.func
            keywords = [k.arg for k in node.keywords if k.arg is not None]
            splat = any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args)
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in te_names:
                sig = te.export_signature(func.attr)
                if sig is not None:
                    out += _check_call(sig, keywords, len(node.args), splat, at(node), te)
            elif (isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2
                  and isinstance(node.args[0], ast.Name) and node.args[0].id in te_names
                  and isinstance(node.args[1], ast.Constant)):
                # getattr(te, "name", default) may probe for a name on purpose: only a deprecated
                # name is a finding (a missing one is, without a default)
                name = node.args[1].value
                if name not in te.exports and len(node.args) == 2:
                    out.append(Finding(at(node), f"transformer_engine.pytorch has no {name} in TE {te.version}"))
                elif name in te.exports:
                    deprecated(node, name)
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in te_names:
                    sig = te.export_signature(base.attr)
                    if sig is not None:
                        out += _check_super_init(node, sig, te, at)
    return out


def _check_super_init(cls: ast.ClassDef, sig: Signature, te: TeSource, at) -> list[Finding]:
    out = []
    calls = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "__init__" and isinstance(n.func.value, ast.Call)
             and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"]
    if not calls:
        return [Finding(at(cls), f"{cls.name} subclasses {sig.qualname} but never calls super().__init__")]
    for call in calls:
        keywords = [k.arg for k in call.keywords if k.arg is not None]
        # a **splat holds the plan's layer kwargs, checked by check_config; the required
        # parameters must be given explicitly all the same
        positional = len(call.args)
        out += _check_call(sig, keywords, positional, False, at(call), te)
    return out


def check_timm_block_fn(path: str | Path, class_name: str = "TEBlock") -> list[Finding]:
    """The worker's block takes, by name, only keywords timm's VisionTransformer passes to block_fn."""
    root = _package_root("timm")
    if root is None:
        return [Finding("timm", "not installed")]
    src = root / "models" / "vision_transformer.py"
    tree = ast.parse(src.read_text(encoding="utf-8"))
    passed: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        dicts = {t.id: {k.value for k in st.value.keys if isinstance(k, ast.Constant)}
                 for st in ast.walk(fn) if isinstance(st, ast.Assign) and isinstance(st.value, ast.Dict)
                 for t in st.targets if isinstance(t, ast.Name)}
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "block_fn":
                for k in call.keywords:
                    if k.arg is not None:
                        passed.add(k.arg)
                    elif isinstance(k.value, ast.Name):
                        passed |= dicts.get(k.value.id, set())
    if not passed:
        return [Finding(str(src), "no block_fn(...) call found in timm's VisionTransformer")]
    worker = ast.parse(Path(path).read_text(encoding="utf-8"))
    out = []
    for cls in ast.walk(worker):
        if isinstance(cls, ast.ClassDef) and cls.name == class_name:
            init = next(st for st in cls.body if isinstance(st, ast.FunctionDef) and st.name == "__init__")
            sig = _function_signature(init, class_name, f"{Path(path).name}:{init.lineno}", method=True)
            for p in sig.params:
                if p not in passed:
                    out.append(Finding(sig.where, f"timm's VisionTransformer never passes {p!r} to block_fn "
                                                  f"(it passes {', '.join(sorted(passed))})"))
            for p in ("dim", "num_heads"):
                if p not in sig.params:
                    out.append(Finding(sig.where, f"{class_name} must take {p!r}"))
            return out
    return [Finding(str(path), f"no class {class_name}")]
