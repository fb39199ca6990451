#!/usr/bin/env node
// The parity oracle: Hugging Face tokenizers (npm `tokenizers`, the official Node binding
// of the Rust library) run over JSON lines, writing exactly what `evenkeel tokenize` writes.
//
//   node tests/tokenize/hf_encode.js --tokenizer PATH/tokenizer.json [--out FILE] [FILE...]
//     reads {"text": "..."} lines (stdin when no FILE), writes {"ids":[1,2,3]} lines in order.
//     ids are tokenizer.encode(text, add_special_tokens=false): added tokens in the text are
//     matched, no BOS/EOS is added.
//   node tests/tokenize/hf_encode.js --tokenizer PATH --decode [--out FILE] [FILE...]
//     reads {"ids":[...]} lines, writes {"text":"..."} lines: tokenizer.decode(ids,
//     skip_special_tokens=false).
//
// Encoding goes through encodeBatch in batches (the same ids as encode one by one, which
// --single does; batching only spreads the work over rayon threads). The binding is found in $EK_NPM_DIR or
// <repo>/.deps/npm (installed by scripts/setup.sh); if it or the tokenizer file is missing,
// this exits 2 with an error rather than producing anything.
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg, code = 2) {
  process.stderr.write(`hf_encode: error: ${msg}\n`);
  process.exit(code);
}

function loadBinding() {
  const npmDir = process.env.EK_NPM_DIR || path.join(__dirname, '..', '..', '.deps', 'npm');
  const mod = path.join(npmDir, 'node_modules', 'tokenizers');
  if (!fs.existsSync(mod)) die(`Hugging Face tokenizers binding not found at ${mod}; run scripts/setup.sh`);
  return require(mod);
}

function parseArgs(argv) {
  const args = { tokenizer: null, out: null, decode: false, single: false, batch: 512, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--tokenizer') args.tokenizer = argv[++i];
    else if (a.startsWith('--tokenizer=')) args.tokenizer = a.slice(12);
    else if (a === '--out') args.out = argv[++i];
    else if (a === '--decode') args.decode = true;
    else if (a === '--single') args.single = true;
    else if (a === '--batch') args.batch = parseInt(argv[++i], 10);
    else if (a === '-h' || a === '--help') {
      process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 13).join('\n') + '\n');
      process.exit(0);
    } else if (a.startsWith('--')) die(`unknown option ${a}`);
    else args.files.push(a);
  }
  if (!args.tokenizer) die('--tokenizer PATH is required');
  if (!fs.existsSync(args.tokenizer)) die(`tokenizer file not found: ${args.tokenizer}; run scripts/setup.sh`);
  return args;
}

const kStrictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// Yields [source name, line number, line text] for every line of every input.
function* inputLines(files) {
  const sources = files.length ? files : ['-'];
  for (const f of sources) {
    // Invalid UTF-8 must not be turned into U+FFFD silently: the oracle refuses it.
    let data;
    try {
      data = kStrictUtf8.decode(fs.readFileSync(f === '-' ? 0 : f));
    } catch (e) {
      die(`${f}: ${e.code === 'ERR_ENCODING_INVALID_ENCODED_DATA' ? 'not valid UTF-8' : e.message}`);
    }
    const lines = data.split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    for (let i = 0; i < lines.length; i++) yield [f, i + 1, lines[i]];
  }
}

const kLoneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function parseRecord(src, lineNo, line, field) {
  let rec;
  try {
    rec = JSON.parse(line);
  } catch (e) {
    die(`${src}:${lineNo}: not JSON: ${e.message}`);
  }
  const v = rec === null ? undefined : rec[field];
  if (field === 'text') {
    if (typeof v !== 'string') die(`${src}:${lineNo}: no "text" string`);
    // The binding would silently turn a lone surrogate into U+FFFD; the oracle refuses.
    if (kLoneSurrogate.test(v)) die(`${src}:${lineNo}: lone surrogate in text`);
  } else if (!Array.isArray(v)) {
    die(`${src}:${lineNo}: no "ids" array`);
  }
  return v;
}

class Output {
  constructor(outPath) {
    this.fd = outPath ? fs.openSync(outPath, 'w') : 1;
  }
  write(s) {
    const buf = Buffer.from(s, 'utf8');
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(this.fd, buf, off, buf.length - off);
      } catch (e) {
        if (e.code === 'EPIPE') process.exit(1);  // reader went away (| head)
        if (e.code !== 'EAGAIN') throw e;  // stdout may be a non-blocking pipe
      }
    }
  }
  close() {
    if (this.fd !== 1) fs.closeSync(this.fd);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { Tokenizer } = loadBinding();
  const tok = Tokenizer.fromFile(args.tokenizer);
  const out = new Output(args.out);
  let batch = [];
  const flush = async () => {
    if (!batch.length) return;
    let text = '';
    if (args.decode) {
      const texts = await tok.decodeBatch(batch, false);
      for (const t of texts) text += JSON.stringify({ text: t }) + '\n';
    } else if (args.single) {
      for (const t of batch) {
        const e = await tok.encode(t, null, { addSpecialTokens: false });
        text += '{"ids":[' + e.getIds().join(',') + ']}\n';
      }
    } else {
      const encs = await tok.encodeBatch(batch, { addSpecialTokens: false });
      for (const e of encs) text += '{"ids":[' + e.getIds().join(',') + ']}\n';
    }
    out.write(text);
    batch = [];
  };
  for (const [src, lineNo, line] of inputLines(args.files)) {
    batch.push(parseRecord(src, lineNo, line, args.decode ? 'ids' : 'text'));
    if (batch.length >= args.batch) await flush();
  }
  await flush();
  out.close();
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
