#!/usr/bin/env python3
"""META.json against the PGXN Meta Spec 1.0.0 (https://pgxn.org/spec/):
its required keys and their forms, the release status, the license (and a
LICENSE file saying it), and agreement with the repository: the version is
idempotency.control's, and every file it names exists.  Prints what is
wrong, one line each, and exits 1; prints a summary and exits 0 otherwise."""
import json
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bad = []
SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+)?$")
LICENSES = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd",
            "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit",
            "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay",
            "sun", "zlib", "open_source", "restricted", "unrestricted", "unknown"}
PHASES = {"configure", "build", "test", "runtime", "develop"}
RELATIONS = {"requires", "recommends", "suggests", "conflicts"}

try:
    with open(os.path.join(root, "META.json")) as f:
        meta = json.load(f)
except (OSError, ValueError) as e:
    print(f"META.json: {e}")
    sys.exit(1)

for key in ("name", "abstract", "maintainer", "license", "provides", "meta-spec", "version"):
    if key not in meta:
        bad.append(f"required key {key!r} missing")
spec = meta.get("meta-spec", {})
if spec.get("version") != "1.0.0":
    bad.append(f"meta-spec.version is {spec.get('version')!r}, not 1.0.0")
name = meta.get("name", "")
if not re.fullmatch(r"[^\s/\\:]{2,}", name):
    bad.append(f"name {name!r}: at least two characters, no space, slash, backslash or colon")
if not SEMVER.match(meta.get("version", "")):
    bad.append(f"version {meta.get('version')!r} is not a semantic version")
if not isinstance(meta.get("abstract"), str) or not meta["abstract"].strip():
    bad.append("abstract is not a non-empty string")
maint = meta.get("maintainer")
if not (isinstance(maint, str) and maint) and not (isinstance(maint, list) and maint and all(isinstance(m, str) and m for m in maint)):
    bad.append("maintainer is not a string or a list of strings")
lic = meta.get("license")
names = [lic] if isinstance(lic, str) else list(lic) if isinstance(lic, (list, dict)) else []
if not names or any(isinstance(lic, (str, list)) and n not in LICENSES for n in names):
    bad.append(f"license {lic!r} is not one of the spec's names")
if meta.get("release_status", "stable") not in ("stable", "testing", "unstable"):
    bad.append(f"release_status {meta.get('release_status')!r}")
control = open(os.path.join(root, "idempotency.control")).read()
default = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.M)
if not default or default.group(1) != meta.get("version"):
    bad.append(f"version {meta.get('version')!r} is not idempotency.control's default_version")
for ext, p in (meta.get("provides") or {}).items():
    for key in ("file", "version"):
        if key not in p:
            bad.append(f"provides.{ext}: {key} missing")
    if "version" in p and not SEMVER.match(p["version"]):
        bad.append(f"provides.{ext}.version {p['version']!r} is not a semantic version")
    if p.get("version") != meta.get("version"):
        bad.append(f"provides.{ext}.version {p.get('version')!r} is not the distribution's")
    for key in ("file", "docfile"):
        if key in p and not os.path.isfile(os.path.join(root, p[key])):
            bad.append(f"provides.{ext}.{key}: no file {p[key]}")
for phase, rels in (meta.get("prereqs") or {}).items():
    if phase not in PHASES:
        bad.append(f"prereqs: unknown phase {phase!r}")
    for rel, reqs in rels.items():
        if rel not in RELATIONS:
            bad.append(f"prereqs.{phase}: unknown relation {rel!r}")
        for dep, ver in reqs.items():
            if not (ver == 0 or (isinstance(ver, str) and (SEMVER.match(ver) or re.match(r"^[<>=!]", ver)))):
                bad.append(f"prereqs.{phase}.{rel}.{dep}: version {ver!r}")
for d in (meta.get("no_index") or {}).get("directory", []):
    if not os.path.isdir(os.path.join(root, d)) and d != "edition/dist":
        bad.append(f"no_index.directory: no directory {d}")
try:
    text = open(os.path.join(root, "LICENSE")).read()
    if lic == "postgresql" and not text.startswith("PostgreSQL License"):
        bad.append("LICENSE does not give the PostgreSQL License that META.json names")
except OSError:
    bad.append("no LICENSE file")

for b in bad:
    print(f"META.json: {b}")
if bad:
    sys.exit(1)
print(f"META.json valid (PGXN Meta Spec 1.0.0): {name} {meta['version']}, {lic}, {meta.get('release_status', 'stable')}")
