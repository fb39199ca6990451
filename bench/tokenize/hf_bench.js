#!/usr/bin/env node
// Times Hugging Face tokenizers (npm `tokenizers`, the Rust library's official Node binding)
// encoding a JSONL corpus with encodeBatch, for bench_tokenize.py.
//
//   RAYON_NUM_THREADS=N node bench/tokenize/hf_bench.js --tokenizer PATH --corpus FILE
//       [--batch 1024] [--counts FILE] [--ids FILE]
//
// Loading and parsing the corpus is not timed. The timed part is encodeBatch over batches
// of records plus reading each encoding's ids (getIds), which is what a caller needs. The
// thread count is rayon's, so it must be set with RAYON_NUM_THREADS in the environment.
// Prints one JSON object: {"seconds", "tokens", "bytes", "records"}; --counts writes the
// token count of every record, one a line, and --ids all records' ids end to end as
// little-endian uint32, for the per-record check against the Python binding's.
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg) {
  process.stderr.write(`hf_bench: error: ${msg}\n`);
  process.exit(2);
}

function main() {
  const argv = process.argv.slice(2);
  const args = { tokenizer: null, corpus: null, batch: 1024, counts: null, ids: null };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args)) die(`unknown option ${argv[i]}`);
    args[key] = key === 'batch' ? parseInt(argv[++i], 10) : argv[++i];
  }
  if (!args.tokenizer || !args.corpus) die('--tokenizer and --corpus are required');
  const npmDir = process.env.EK_NPM_DIR || path.join(__dirname, '..', '..', '.deps', 'npm');
  const mod = path.join(npmDir, 'node_modules', 'tokenizers');
  if (!fs.existsSync(mod)) die(`Hugging Face tokenizers binding not found at ${mod}; run scripts/setup.sh`);
  const { Tokenizer } = require(mod);

  const texts = fs.readFileSync(args.corpus, 'utf8').split('\n').filter((l) => l.length)
      .map((l) => JSON.parse(l).text);
  let bytes = 0;
  for (const t of texts) bytes += Buffer.byteLength(t, 'utf8');
  const tok = Tokenizer.fromFile(args.tokenizer);

  return (async () => {
    await tok.encodeBatch(texts.slice(0, 64), { addSpecialTokens: false });  // warm-up
    const counts = new Array(texts.length);
    const ids = args.ids ? new Array(texts.length) : null;
    const t0 = process.hrtime.bigint();
    let tokens = 0;
    for (let i = 0; i < texts.length; i += args.batch) {
      const encs = await tok.encodeBatch(texts.slice(i, i + args.batch), { addSpecialTokens: false });
      for (let k = 0; k < encs.length; k++) {
        const got = encs[k].getIds();
        const n = got.length;
        counts[i + k] = n;
        if (ids) ids[i + k] = got;
        tokens += n;
      }
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (args.counts) fs.writeFileSync(args.counts, counts.join('\n') + '\n');
    if (ids) {
      const flat = new Uint32Array(tokens);
      let at = 0;
      for (const r of ids) { flat.set(r, at); at += r.length; }
      fs.writeFileSync(args.ids, Buffer.from(flat.buffer));  // little-endian on x86 and arm
    }
    process.stdout.write(JSON.stringify({ seconds, tokens, bytes, records: texts.length }) + '\n');
  })();
}

Promise.resolve(main()).catch((e) => die(e && e.stack ? e.stack : String(e)));
