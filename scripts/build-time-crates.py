#!/usr/bin/env python3
"""Lists the crates of the lock file that only run at build time.

These are proc macros and build scripts' helpers, with everything they pull
in, and nothing that is also linked into a program or test. The workspace
Cargo.toml builds them unoptimised in dev and test builds (see its
`[profile.dev.package]`): rerun this after a dependency change and update
that list.

    python3 scripts/build-time-crates.py
"""

import json
import subprocess

meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}


def is_proc_macro(pid):
    return any("proc-macro" in t["kind"] for t in packages[pid]["targets"])


def reachable(follow):
    seen, stack = set(), list(meta["workspace_members"])
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(d["pkg"] for d in nodes[pid]["deps"] if follow(d))
    return seen


# Linked into something: normal and dev edges, never into a proc macro.
linked = reachable(
    lambda d: not is_proc_macro(d["pkg"])
    and any(k["kind"] in (None, "dev") for k in d["dep_kinds"])
)
everything = reachable(lambda d: True)
linked_names = {packages[p]["name"] for p in linked}
linked_versions = {(packages[p]["name"], packages[p]["version"]) for p in linked}
specs = set()
for pid in everything - linked:
    name, version = packages[pid]["name"], packages[pid]["version"]
    if name not in linked_names:
        specs.add(name)
    elif (name, version) not in linked_versions:
        # Another version of it is linked: name this one by its version.
        # (One version used both ways, as wasmparser is, cannot be split.)
        specs.add(f'"{name}@{version}"')
for spec in sorted(specs, key=lambda s: s.strip('"')):
    print(spec)
