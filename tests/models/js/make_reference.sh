#!/bin/bash
# Fixture of chat_template.js_differential: installs @huggingface/jinja (the version pinned
# by package-lock.json beside this script) into OUT_DIR with `npm ci` and writes
# OUT_DIR/reference.jsonl, the reference renderings of make_reference.mjs. Exit 77 (CTest
# SKIP) when node/npm or the npm registry are not available.
# usage: make_reference.sh OUT_DIR SOURCE_DIR
set -u
out=$1 src=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
rm -f "$out/reference.jsonl"
for tool in node npm; do
  if ! command -v $tool >/dev/null; then
    echo "SKIP: '$tool' not found; install nodejs and npm to run the @huggingface/jinja differential test"
    exit 77
  fi
done
if ! cmp -s "$here/package-lock.json" "$out/package-lock.json" || [ ! -f "$out/node_modules/@huggingface/jinja/package.json" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$out/"
  if ! (cd "$out" && npm ci --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-timeout=60000); then
    rm -f "$out/package-lock.json"
    echo "SKIP: 'npm ci' of @huggingface/jinja failed (no network or registry?)"
    exit 77
  fi
fi
node "$here/make_reference.mjs" "$out" "$src" "$out/reference.jsonl.tmp" || exit 1
mv "$out/reference.jsonl.tmp" "$out/reference.jsonl"
