// measure.mjs: how far the gateway's token estimate (bytes of the JSON-RPC
// response / 4, results/results.go) is from real tokenizers' counts.
//
// A measuring tool, not a test: it is not part of CI or `make test`, and
// nothing in the module imports it. Run it by hand:
//
//	cd scripts/tokens
//	npm ci                       # pinned: @anthropic-ai/tokenizer 0.0.4, gpt-tokenizer 4.0.0
//	node measure.mjs NAME=FILE[,FILE...] ...
//	./corpora.sh                 # builds the corpora from files on a Debian machine and runs this
//
// Each FILE is taken as one tool's result: its text is written the way a
// tools/call result is on the wire,
//
//	{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":<JSON-escaped text>}]}}
//
// (JSON.stringify: non-ASCII stays raw UTF-8, as most servers write it;
// Go's encoding/json would also write < > & as \u003c, \u003e, \u0026).
// Per corpus (the sum over its files) it prints the response's bytes, the
// estimate (bytes / 4), the tokens of the text alone (what the model reads)
// by each tokenizer, and estimate / actual: over 1, the estimate counts more
// tokens than there are (it errs on the side of refusing); under 1, fewer.
//
// Tokenizers: @anthropic-ai/tokenizer is Claude's older public tokenizer
// (Claude 2 era, NFKC then BPE, as its countTokens does); Claude 3 and later
// use tokenizers that are not published, so its counts are a proxy only.
// gpt-tokenizer gives OpenAI's cl100k_base (GPT-4, GPT-3.5) and o200k_base
// (GPT-4o and later). Special-token strings in the text count as plain text.
//
// Flags: --json prints the rows as JSON; --files also prints each file.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { encode as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { encode as o200k } from 'gpt-tokenizer/encoding/o200k_base';

const require = createRequire(import.meta.url);
const claude = require('@anthropic-ai/tokenizer').getTokenizer();
const plain = { disallowedSpecial: new Set() };

const tokenizers = [
  ['claude (0.0.4)', (t) => claude.encode(t.normalize('NFKC'), 'all').length],
  ['cl100k', (t) => cl100k(t, plain).length],
  ['o200k', (t) => o200k(t, plain).length],
];

function response(text) {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    result: { content: [{ type: 'text', text }] },
  });
}

function measure(name, files) {
  const row = { corpus: name, files: files.length, textBytes: 0, responseBytes: 0, tokens: {} };
  for (const [tk] of tokenizers) row.tokens[tk] = 0;
  const perFile = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const f = { corpus: `  ${file}`, files: 1, textBytes: Buffer.byteLength(text), responseBytes: Buffer.byteLength(response(text)), tokens: {} };
    for (const [tk, count] of tokenizers) f.tokens[tk] = count(text);
    row.textBytes += f.textBytes;
    row.responseBytes += f.responseBytes;
    for (const [tk] of tokenizers) row.tokens[tk] += f.tokens[tk];
    perFile.push(f);
  }
  return [row, perFile];
}

const args = process.argv.slice(2);
const asJSON = args.includes('--json');
const showFiles = args.includes('--files');
const specs = args.filter((a) => !a.startsWith('--'));
if (specs.length === 0) {
  console.error('usage: node measure.mjs [--json] [--files] NAME=FILE[,FILE...] ...');
  process.exit(2);
}

const rows = [];
for (const spec of specs) {
  const eq = spec.indexOf('=');
  const name = eq > 0 ? spec.slice(0, eq) : spec;
  const files = (eq > 0 ? spec.slice(eq + 1) : spec).split(',').filter(Boolean);
  const [row, perFile] = measure(name, files);
  rows.push(row);
  if (showFiles && files.length > 1) rows.push(...perFile);
}

for (const r of rows) {
  r.estimate = Math.floor(r.responseBytes / 4);
  r.ratio = {};
  for (const [tk] of tokenizers) r.ratio[tk] = r.estimate / r.tokens[tk];
}

if (asJSON) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  const head = ['corpus', 'files', 'text B', 'response B', 'B/4'];
  for (const [tk] of tokenizers) head.push(`${tk} tok`, 'est/act');
  const lines = [head];
  for (const r of rows) {
    const l = [r.corpus, r.files, r.textBytes, r.responseBytes, r.estimate];
    for (const [tk] of tokenizers) l.push(r.tokens[tk], r.ratio[tk].toFixed(2));
    lines.push(l.map(String));
  }
  const md = (l) => `| ${l.join(' | ')} |`;
  console.log(md(lines[0]));
  console.log(md(lines[0].map((h, i) => (i === 0 ? '---' : '---:'))));
  for (const l of lines.slice(1)) console.log(md(l));
}
