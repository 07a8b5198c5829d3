#!/usr/bin/env python3
"""The house check (`make test` runs it; `python3 scripts/house.py` alone
prints the same): the crates' layering, their share of the product's lines,
and import circles between the files of a crate.

The rules, as ARCHITECTURE.md states them:
- the pure core (baton-domain) depends on no AWS crate, no Lambda runtime,
  no HTTP client and not on tokio (a dev-dependency at most);
- a crate depends only on crates below it: api < telemetry < domain,
  client < store < service < functions; no function depends on another; the
  runner depends on the contract, the client and the pure core only (it
  evaluates an action's expressions with the domain's language), the AWS provisioner
  (which talks to Baton through its API) on the contract, the client, the
  telemetry and the pure core only; nothing shipped depends on the local
  stack's test equipment;
- no two files of a crate import each other, directly or around a loop
  (a module naming its own ancestors' items is not counted: a parent and
  its child files are one concept split into files).

A file imports another when a `use` line or a path in its non-test code
names an item of that module (`crate::a::b`, `super::x`, `self::y`);
declaring a child module (`mod x;`) and re-exporting its items
(`pub use x::Y;`, a facade) are not imports. Test code (files named
`tests.rs`, `mod tests` blocks) is left out: a test may look anywhere.
"""

import json
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each layer may depend on the ones before it in this order.
LAYERS = ["baton-api", "baton-telemetry", "baton-domain", "baton-client", "baton-store", "baton-service"]
FORBIDDEN_IN_DOMAIN = re.compile(r"^(aws-|aws_|lambda|tokio|reqwest|hyper|axum)")
TEST_EQUIPMENT = "baton-localstack"
MAY_USE_TEST_EQUIPMENT = {"baton-devhost", "baton-tests", "baton-runner-tests", "baton-bench", "baton-localstack"}


def metadata():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)["packages"]


def layering(packages):
    problems = []
    names = {p["name"] for p in packages}
    for p in packages:
        name = p["name"]
        normal = [d["name"] for d in p["dependencies"] if d["kind"] is None]
        own = [d for d in normal if d in names]
        if name == "baton-domain":
            problems += [f"baton-domain depends on {d}" for d in normal if FORBIDDEN_IN_DOMAIN.match(d)]
        if name in LAYERS:
            rank = LAYERS.index(name)
            for d in own:
                if d not in LAYERS or LAYERS.index(d) >= rank:
                    problems.append(f"{name} depends on {d}, which is not below it")
        if "/functions/" in p["manifest_path"]:
            for d in own:
                if d not in LAYERS:
                    problems.append(f"the function {name} depends on {d}")
        if name == "baton-aws-provisioner":
            allowed = ("baton-api", "baton-client", "baton-telemetry", "baton-domain")
            problems += [f"the AWS provisioner depends on {d}" for d in own if d not in allowed]
        if name == "baton-runner":
            allowed = ("baton-api", "baton-client", "baton-domain")
            problems += [f"the runner depends on {d}" for d in own if d not in allowed]
        if TEST_EQUIPMENT in own and name not in MAY_USE_TEST_EQUIPMENT:
            problems.append(f"{name} depends on the test equipment ({TEST_EQUIPMENT})")
    return problems


def product_files(src):
    for base, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in ("tests", "fixtures")]
        for f in files:
            if f.endswith(".rs") and f != "tests.rs":
                yield os.path.join(base, f)


def without_tests(text):
    """The file's text before its `#[cfg(test)] mod tests` block (which, by
    the project's style, closes a file)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+\s*\{", text, re.M)
    return text[: m.start()] if m else text


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel[0] == "bin":
        return None
    return tuple(rel)


PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*?)\}", re.S)


def circles(src):
    modules = {}
    for path in product_files(src):
        mod = module_of(src, path)
        if mod is not None:
            modules[mod] = path
    edges = defaultdict(set)
    for mod, path in modules.items():
        with open(path, encoding="utf-8") as fh:
            text = without_tests(fh.read())
        declared = text
        # Declarations and facades are not imports.
        text = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?mod \w+;\s*$", "", text, flags=re.M)
        text = re.sub(r"^\s*pub(\([^)]*\))?\s+use\s+(self::)?[a-z_]+::[^;]*;", "", text, flags=re.M | re.S)
        text = re.sub(r"//[^\n]*", "", text)
        named = []
        for m in GROUP.finditer(text):
            for item in re.split(r"[,{}\s]+", m.group(3)):
                if item and item != "self":
                    named.append((m.group(1), m.group(2) + "::" + item.split("::")[0]))
        for m in PATH.finditer(text):
            named.append((m.group(1), m.group(2)))
        # Paths from a child module declared here (`mod x;` then `x::f()`).
        for child in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+);", declared, re.M):
            if re.search(r"(?<![:\w])" + child + r"::", text):
                named.append(("self", "::" + child))
        for anchor, rest in named:
            parts = [p for p in rest.split("::") if p]
            if anchor == "crate":
                base = ()
            elif anchor == "self":
                base = mod
            else:
                base = mod[:-1]
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            target = tuple(base) + tuple(parts)
            while target and target not in modules:
                target = target[:-1]
            # A module naming its own ancestors' items is one concept split
            # into files (Rust lets a child see its parent's private items):
            # not an import between rooms.
            if target != mod and target in modules and mod[: len(target)] != target:
                edges[mod].add(target)
    return modules, edges


def strongly_connected(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def lines(src):
    total = 0
    for path in product_files(src):
        with open(path, encoding="utf-8") as fh:
            total += sum(1 for line in without_tests(fh.read()).splitlines() if line.strip())
    return total


def main():
    packages = metadata()
    problems = layering(packages)
    sizes = {}
    for p in packages:
        src = os.path.join(os.path.dirname(p["manifest_path"]), "src")
        if not os.path.isdir(src):
            continue
        rel = os.path.relpath(os.path.dirname(p["manifest_path"]), ROOT)
        group = "functions/*" if rel.startswith("functions/") else rel
        sizes[group] = sizes.get(group, 0) + lines(src)
        modules, edges = circles(src)
        for comp in strongly_connected(modules, edges):
            files = sorted(os.path.relpath(modules[m], ROOT) for m in comp)
            problems.append(f"import circle in {p['name']}: " + ", ".join(files))
    total = sum(v for k, v in sizes.items() if not k.startswith("tests"))
    print("product lines by crate (non-blank, test code left out):")
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        if name.startswith("tests"):
            continue
        print(f"  {name:<14} {n:>6}  {100.0 * n / total:5.1f} %")
    print(f"  {'all':<14} {total:>6}")
    print("crate graph (each crate and the Baton crates it depends on):")
    names = {p["name"] for p in packages}
    for p in sorted(packages, key=lambda p: p["name"]):
        if "/functions/" in p["manifest_path"] and p["name"] != "baton-aws-provisioner":
            continue
        own = sorted(d["name"] for d in p["dependencies"] if d["kind"] is None and d["name"] in names)
        if len(own) > 8:
            own = own[:3] + [f"… {len(own) - 3} more"]
        print(f"  {p['name']} -> {', '.join(own) or '(none)'}")
    print("  (each function -> the layers below baton-service, never another function)")
    if problems:
        print("house rules broken:")
        for problem in problems:
            print(f"  {problem}")
        return 1
    print("house rules hold: layering as ARCHITECTURE.md says, no import circle in any crate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
