"""Architecture rules, checked on the source with ``ast`` (nothing of doctrans is imported):

* the import graph of ``doctrans`` (module-level and function-level ``import`` / ``from …
  import``) has no cycle;
* no module imports another module's private name (``from doctrans.x import _name``);
* in ``doctrans.dp`` dependencies point one way: ``generator`` imports neither ``train`` nor
  ``apply``, ``apply`` does not import ``train``;
* packages form layers (``LAYERS``) and imports point down (or within a layer's package);
* outside ``doctrans.models`` no ``getattr``/``hasattr`` reads a model (the contract in
  ``models/interface.py`` lists what may be read);
* no module is over ``MAX_LINES`` lines, outside ``models/backbones/`` (``LONG_MODULES`` lists
  the exceptions with their reason);
* no click command has more than ``MAX_OPTIONS`` options unless its ``--help`` shows them in
  sections (``cli.options.SectionedCommand``) — this one imports ``doctrans.cli`` (click only).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "doctrans"

# The package layers, lowest first: a module may import modules of its own layer's package or of
# lower layers, never of a higher one. Top-level modules (``doctrans.cli``, ``doctrans.stages``,
# ``doctrans`` itself) are the top layer, which wires the others together.
LAYERS = [
    {"utils", "layers", "version"},   # version: the package version, read by the trainer and the CLI
    {"data"},
    {"models"},
    {"config", "decoding"},   # decoding: the beam search settings (config.DecodeConfig), read by the CLI
    {"runtime"},          # device, checkpoint I/O, torchrun process groups
    {"training"},         # the training loop; dev BLEU comes in as a callable
    {"inference"},        # search, translate; input transforms come in as an interface
    {"dp"},               # the dropped-pronoun system (implements inference's input transform)
    {"evaluation"},       # scoring, discourse metrics, dev BLEU
    {"experiments"},      # the experiment tables
    {"serve"},            # the HTTP server over a translator (doctrans serve)
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None]]:
    """(imported doctrans module, imported name or None) for every import statement anywhere
    in the module, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            for a in node.names:
                if f"{base}.{a.name}" in modules:           # from package import module
                    out.append((f"{base}.{a.name}", None))
                elif base in modules:
                    out.append((base, a.name))
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str | None]]]]:
    modules = _modules()
    imports = {m: _imports(m, p, modules) for m, p in modules.items()}
    return {m: {d for d, _ in imps if d != m} for m, imps in imports.items()}, imports


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, …, a], or None (iterative DFS)."""
    state: dict[str, int] = {}                      # 1 = on the stack, 2 = done
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_import_graph_has_no_cycle():
    graph, _ = _graph()
    assert "doctrans.dp.generator" in graph and len(graph) > 30     # the walk found the package
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_find_cycle_reports_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_names_imported_across_modules():
    _, imports = _graph()
    bad = [f"{m}: from {src} import {n}" for m, imps in imports.items() for src, n in imps
           if n and n.startswith("_") and not n.startswith("__") and src != m]
    assert not bad, "private imports:\n" + "\n".join(bad)


def test_dp_dependencies_point_one_way():
    graph, imports = _graph()
    assert not graph["doctrans.dp.generator"] & {"doctrans.dp.train", "doctrans.dp.apply"}
    assert "doctrans.dp.train" not in graph["doctrans.dp.apply"]
    models = {"labeler", "thesis"}
    for m in ("doctrans.dp.generator", "doctrans.dp.train", "doctrans.dp.apply"):  # no model named
        tree = ast.parse(_modules()[m].read_text(encoding="utf-8"))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & models, m
        assert not {src for src, _ in imports[m]} & {f"doctrans.dp.models.{x}" for x in models}, m


def _layer(module: str) -> int:
    """Index of ``module``'s package (or top-level module, e.g. ``config``) in ``LAYERS``; the
    other top-level modules (``cli``, ``stages``, ``__main__``) are above every layer."""
    parts = module.split(".")
    if parts[1] == "cli":                           # the command line: a package of the top layer
        return len(LAYERS)
    for k, layer in enumerate(LAYERS):
        if parts[1] in layer:
            return k
    if len(parts) == 2 and not (PACKAGE / parts[1]).is_dir():
        return len(LAYERS)
    raise AssertionError(f"{module}: package doctrans.{parts[1]} is in no layer of LAYERS")


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} → {d}" for m, deps in graph.items() for d in deps
                  if m != "doctrans" and d != "doctrans" and _layer(d) > _layer(m))


def test_imports_point_down_the_layers():
    graph, _ = _graph()
    bad = _upward(graph)
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_layer_check_catches_an_upward_import():
    graph = {"doctrans.training.train": {"doctrans.inference.translate", "doctrans.models.build"},
             "doctrans.inference.translate": {"doctrans.runtime.device"}, "doctrans.cli": {"doctrans.dp.apply"}}
    assert _upward(graph) == ["doctrans.training.train → doctrans.inference.translate"]


MODEL_ATTRIBUTES = {"context_sents", "context_block", "context_needs_target", "context_filter", "inference_cache",
                    "explain_blocks", "auxiliary_losses", "backbone", "max_source_len", "document"}


def test_no_model_attribute_read_by_getattr_outside_models():
    """``getattr(x, "name")`` / ``hasattr(x, "name")`` outside ``doctrans.models`` never names a
    model attribute: a model is read through the contract (``models/interface.py``)."""
    bad = []
    for name, path in _modules().items():
        if name.startswith("doctrans.models"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in MODEL_ATTRIBUTES):
                bad.append(f"{name}:{node.lineno}: {node.func.id}(…, {node.args[1].value!r})")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == "model"):
                bad.append(f"{name}:{node.lineno}: {node.func.id}(model, …)")
    assert not bad, "\n".join(bad)


MAX_LINES = 600
# Modules over MAX_LINES that stay so for now, with the reason; remove a row when its module is split.
LONG_MODULES = {
    "doctrans/models/reconstructor.py": "a model component (thesis ch. 5 reconstructor): one model, one file, "
                                        "as the backbones",
}


def test_no_module_over_the_line_limit():
    root = PACKAGE.parent
    sizes = {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(PACKAGE.rglob("*.py")) if "backbones" not in p.relative_to(PACKAGE).parts}
    long = {m: n for m, n in sizes.items() if n > MAX_LINES}
    assert sorted(set(long) - set(LONG_MODULES)) == [], f"modules over {MAX_LINES} lines: {long}"
    stale = sorted(m for m in LONG_MODULES if sizes.get(m, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): drop them from LONG_MODULES: {stale}"


MAX_OPTIONS = 25


def _leaf_commands(group, path=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _leaf_commands(cmd, path + (name,))
        else:
            yield " ".join(path + (name,)), cmd


def test_commands_with_many_options_show_them_in_sections():
    import click

    from doctrans.cli import cli
    from doctrans.cli.options import SectionedCommand

    commands = dict(_leaf_commands(cli))
    assert {"translate", "annotate-dp corpus", "score bleu", "table context"} <= set(commands)   # the walk works
    counts = {name: sum(isinstance(p, click.Option) for p in cmd.params) for name, cmd in commands.items()}
    assert counts["translate"] > MAX_OPTIONS                                                    # the rule bites
    bad = [f"{name}: {n} options" for name, n in counts.items()
           if n > MAX_OPTIONS and not isinstance(commands[name], SectionedCommand)]
    assert not bad, f"more than {MAX_OPTIONS} options without sections (cli.options.SectionedCommand):\n" + \
        "\n".join(bad)


def test_no_module_reads_the_top_level_package():
    """``from doctrans import __version__`` in the trainer and the CLI went through
    ``doctrans/__init__`` (the Python API's lazy entry point); the version lives in
    ``doctrans/version.py`` and modules inside the package import what they need from its module."""
    _, imports = _graph()
    bad = sorted(f"{m}: from doctrans import {n}" for m, imps in imports.items() if m != "doctrans"
                 for d, n in imps if d == "doctrans" and n is not None)
    assert not bad, bad


# --- the translate path (issue 71) ---------------------------------------------------------------

# Where the translate / serve / API settings are declared (``utils.settings.setting`` fields): the
# one place each default is written.
DECLARED = {"decoding.py": ("DecodeConfig",),
            "inference/config.py": ("ModelOptions", "SearchOptions", "IOOptions", "DPOptions"),
            "serve/limits.py": ("Limits",)}
API_ALIASES = {"beam_size": "beam", "length_penalty": "lenpen", "max_batch_size": "batch_sentences"}
# The modules of the translate path, where no other default of those settings may be written.
TRANSLATE_PATH = ("cli/translate.py", "cli/serve.py", "cli/tables.py", "cli/options.py", "api.py", "stages.py",
                  "inference/", "serve/", "experiments/")
# Same name, another setting (with the reason); "file: where name".
OTHER_SETTINGS = {
    "api.py: load(engine)": "the API's own choice: auto = ctranslate2 for an exported directory, else native",
    "cli/tables.py: --compute-type": "table context: the CTranslate2 rows' compute type (int8 as the results table)",
    "experiments/context_table.py: ContextTableConfig.compute_type": "the same, the table's config",
    "cli/tables.py: --checkpoint": "which checkpoint of each run (last | best), not a checkpoint path",
    "experiments/base.py: RunTableConfig.checkpoint": "the same, the tables' config",
    "cli/tables.py: --prepared": "the tables' prepared dataset (test files, references), not BPE codes",
    "experiments/base.py: TableConfig.prepared": "the same, the tables' config",
    "experiments/dp_table.py: DPTableConfig.nbest": "the N of the DP table's N-best mixture rows",
    "cli/tables.py: --nbest": "the same, table dp's option",
    "inference/collection.py: TextReading.script": "a plain errors mode (no script given): no conversion",
    "inference/subtitle_files.py: SubtitleDoc.encoding": "the encoding a subtitle file was read in, a record field",
    "stages.py: shortlist(threads)": "doctrans shortlist's eflomal samplers",
}


def _literal(node) -> bool:
    """A default written as a literal that chooses something: not None, "", False or () (the
    values that mean "not asked for"), e.g. 5, 1.0, "auto", 0 (0 is a choice: greedy, all cores…)."""
    if isinstance(node, ast.Constant):
        return not (node.value is None or node.value is False or node.value == "")
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_literal(e) for e in node.elts)
    return False


def _declared_settings(root: Path = PACKAGE) -> set[str]:
    names = set()
    for rel, classes in DECLARED.items():
        path = root / rel
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                names |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return names


def _defaults_written_again(root: Path = PACKAGE) -> list[str]:
    """Every default of a declared setting written again on the translate path, as "file: where
    name = value": a click option with the setting's flag and a literal default, a function
    parameter of its name (or the API's alias) with one, a class field of its name with one
    (outside the declaring classes); less ``OTHER_SETTINGS``."""
    names, found = _declared_settings(root), []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(TRANSLATE_PATH):
            continue
        declaring = DECLARED.get(rel, ())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + \
                    [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
                found += [(f"{rel}: {node.name}({arg.arg})", d) for arg, d in pairs
                          if API_ALIASES.get(arg.arg, arg.arg) in names]
            elif isinstance(node, ast.ClassDef) and node.name not in declaring:
                found += [(f"{rel}: {node.name}.{s.target.id}", s.value) for s in node.body
                          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None
                          and s.target.id in names]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "option":
                flags = [c.value for c in node.args if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                named = [f for f in flags if f.startswith("--") and f[2:].replace("-", "_") in names]
                found += [(f"{rel}: {named[0]}", k.value) for k in node.keywords if k.arg == "default" and named]
    return sorted(f"{where} = {ast.unparse(value)}" for where, value in found
                  if _literal(value) and where not in OTHER_SETTINGS)


def test_each_translate_setting_default_is_written_once():
    """The defaults of ``doctrans translate`` / ``serve`` / the Python API are their fields'
    (``inference/config.py``, ``config.DecodeConfig``, ``serve/limits.py``); the options, keywords
    and functions of the translate path take them from there (``cli.options.setting_option``,
    ``utils.settings.default_of``) — the beam's 5 was once written in 9 places, ``warmup_beam``'s
    default was 1 in the config and 0 in ``translate_documents``."""
    again = _defaults_written_again()
    assert not again, "defaults written again (take them from the field):\n" + "\n".join(again)
    assert {"beam", "warmup_beam", "history_chunk", "group_lines", "max_lines"} <= _declared_settings()
    stale = sorted(k for k in OTHER_SETTINGS if not (PACKAGE / k.split(":")[0]).is_file())
    assert not stale, stale


def test_default_check_finds_a_literal_default(tmp_path):
    (tmp_path / "inference").mkdir()
    (tmp_path / "decoding.py").write_text("class DecodeConfig:\n    beam: int = setting(5)\n", encoding="utf-8")
    (tmp_path / "inference" / "search.py").write_text(
        "def beam_search(model, beam=5, variants=1, shortlist=None):\n    pass\n", encoding="utf-8")
    (tmp_path / "api.py").write_text("def load(path, beam_size=5):\n    pass\n", encoding="utf-8")
    assert _defaults_written_again(tmp_path) == ["api.py: load(beam_size) = 5",
                                                 "inference/search.py: beam_search(beam) = 5"]


MAX_PARAMETERS = 10


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def test_no_inference_function_has_more_than_ten_parameters():
    """Settings travel as objects (``SearchOptions``, ``ModelOptions``…), not one argument each:
    ``translate_documents`` once took 17 parameters, ``beam_search`` 13."""
    bad = [f"{path.relative_to(PACKAGE).as_posix()}:{fn.lineno}: {fn.name} ({_parameters(fn)})"
           for path in sorted((PACKAGE / "inference").rglob("*.py"))
           for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
           if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _parameters(fn) > MAX_PARAMETERS]
    assert not bad, f"functions of over {MAX_PARAMETERS} parameters:\n" + "\n".join(bad)


def test_translating_imports_no_training_module(tmp_path):
    """``doctrans translate`` (the shipped sentence model, one line) loads no module of
    ``doctrans.training``: each stage wires only what it needs (``stages.py``)."""
    import subprocess
    import sys

    src = tmp_path / "in.zh"
    src.write_text("他来了。\n", encoding="utf-8")
    code = ("import sys\nfrom click.testing import CliRunner\nfrom doctrans.cli import cli\n"
            f"r = CliRunner().invoke(cli, ['translate', '--sentence', '--threads', '1', '-i', {str(src)!r}, '-o', "
            f"{str(tmp_path / 'out.en')!r}])\nassert r.exit_code == 0, r.output\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('doctrans'))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = r.stdout.split()
    assert "doctrans.inference.translate" in loaded and (tmp_path / "out.en").read_text(encoding="utf-8").strip()
    assert not [m for m in loaded if m.startswith("doctrans.training")], loaded
