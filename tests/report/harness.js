// Shared by the report page's browser tests: builds the pages with `evenkeel report` when
// their sources changed, and drives Debian's Chromium with puppeteer-core from the
// project's .deps/npm. A missing browser, binary or package is an error, never a skip.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {execFileSync} = require('node:child_process');

const ROOT = path.resolve(__dirname, '..', '..');
const NPM = path.join(ROOT, '.deps', 'npm', 'node_modules');
const CHROMIUM = process.env.EK_CHROMIUM || '/usr/bin/chromium';
const FIXTURES = path.join(ROOT, 'build', 'report-fixtures');
const PAGES = path.join(ROOT, 'build', 'report-pages');
const SHOTS = path.join(ROOT, 'build', 'report-screenshots');
const PYTHON = fs.existsSync(path.join(ROOT, '.venv', 'bin', 'python'))
  ? path.join(ROOT, '.venv', 'bin', 'python') : 'python3';

function requireDep(name) {
  try {
    return require(require.resolve(name, {paths: [NPM]}));
  } catch (e) {
    throw new Error(`${name} is missing from ${NPM}: run scripts/setup.sh ` +
      `(npm install --save-exact uplot@1.6.32 puppeteer-core@24.43.1 there) [${e.message}]`);
  }
}
const puppeteer = requireDep('puppeteer-core');
if (!fs.existsSync(CHROMIUM)) {
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set EK_CHROMIUM)`);
}

const newest = (files) => Math.max(...files.map((f) => fs.statSync(f).mtimeMs));
const listDir = (d) => fs.readdirSync(d).map((f) => path.join(d, f));

// Test files may run in parallel: one builds while the others wait (a lock folder).
function locked(fn) {
  const lock = path.join(ROOT, 'build', 'report-build.lock');
  fs.mkdirSync(path.dirname(lock), {recursive: true});
  const deadline = Date.now() + 600000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      // A lock older than 10 minutes was left by a killed run.
      if (Date.now() - fs.statSync(lock).mtimeMs > 600000) fs.rmSync(lock, {recursive: true, force: true});
      if (Date.now() > deadline) throw new Error(`${lock} is held: another test run is building`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(lock, {recursive: true, force: true});
  }
}

// Builds the pages with the real binary: every triage fixture through `evenkeel report
// --telemetry` (the C++ classifier's verdicts), the 1,024-GPU x 6 h case from
// make_scale_telemetry's CSVs, and the synthetic whole-run models of make_model.py through
// `evenkeel report --from-model`. Rebuilt when a source is newer than a stamp file.
const EVENKEEL = process.env.EVENKEEL || path.join(ROOT, 'build', 'src', 'cli', 'evenkeel');
const MAKE_SCALE = path.join(ROOT, 'build', 'bench', 'report', 'make_scale_telemetry');
const SCALE = path.join(ROOT, 'build', 'report-scale');

function buildPages() {
  return locked(buildPagesUnlocked);
}

function evenkeel(args) {
  return execFileSync(EVENKEEL, args, {cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit']}).toString();
}

// The scale case's telemetry (1.2 GB of CSV), made once.
function scaleTelemetry() {
  const stamp = path.join(SCALE, '.done');
  if (!fs.existsSync(stamp)) {
    for (const exe of [EVENKEEL, MAKE_SCALE]) {
      if (!fs.existsSync(exe)) throw new Error(`${exe} is missing: build first (scripts/setup.sh)`);
    }
    execFileSync(MAKE_SCALE, [SCALE], {stdio: ['ignore', 'ignore', 'inherit']});
    fs.writeFileSync(stamp, '');
  }
  return fs.readdirSync(SCALE).filter((f) => f.endsWith('.csv')).sort().map((f) => path.join(SCALE, f));
}

function buildPagesUnlocked() {
  if (!fs.existsSync(EVENKEEL)) throw new Error(`${EVENKEEL} is missing: build first (scripts/setup.sh)`);
  const triage = path.join(ROOT, 'testdata', 'triage');
  const cases = fs.readdirSync(triage).sort();
  const src = [EVENKEEL, path.join(ROOT, 'tools', 'report', 'make_model.py'),
    ...cases.flatMap((d) => listDir(path.join(triage, d)))];
  const stamp = path.join(PAGES, '.stamp');
  fs.mkdirSync(FIXTURES, {recursive: true});
  fs.mkdirSync(PAGES, {recursive: true});
  fs.mkdirSync(SHOTS, {recursive: true});
  const names = [...cases.map((c) => 'triage-' + c), 'sft16-3h', 'partial', 'deadlock1024-6h'];
  if (fs.existsSync(stamp) && fs.statSync(stamp).mtimeMs >= newest(src)) return names;
  for (const c of cases) {
    const csvs = listDir(path.join(triage, c)).filter((f) => f.endsWith('.csv'));
    const json = path.join(FIXTURES, `triage-${c}.json`);
    evenkeel(['report', '--telemetry', ...csvs, '--json', '-o', json]);
    evenkeel(['report', '--from-model', json, '-o', path.join(PAGES, `triage-${c}.html`)]);
  }
  execFileSync(PYTHON, [path.join(ROOT, 'tools', 'report', 'make_model.py'), '--out', FIXTURES],
    {cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit']});
  for (const m of ['sft16-3h', 'partial']) {
    evenkeel(['report', '--from-model', path.join(FIXTURES, m + '.json'), '-o', path.join(PAGES, m + '.html')]);
  }
  evenkeel(['report', '--telemetry', ...scaleTelemetry(), '-o', path.join(PAGES, 'deadlock1024-6h.html')]);
  fs.writeFileSync(stamp, '');
  return names;
}

async function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ek-report-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--user-data-dir=${profile}`],
  });
  const close = browser.close.bind(browser);
  browser.close = async () => {
    await close();
    fs.rmSync(profile, {recursive: true, force: true});
  };
  return browser;
}

// A page that records console messages and page errors; `problems()` lists errors and
// warnings.
async function open(browser, url, {width = 1280, height = 900} = {}) {
  const page = await browser.newPage();
  await page.setViewport({width, height, deviceScaleFactor: 1});
  const log = [];
  page.on('console', (m) => log.push({type: m.type(), text: m.text()}));
  page.on('pageerror', (e) => log.push({type: 'pageerror', text: String(e)}));
  page.on('requestfailed', (r) => log.push({type: 'requestfailed', text: r.url()}));
  const t0 = Date.now();
  await page.goto(url, {waitUntil: 'load'});
  await page.evaluate(() => window.evenkeel.ready.then(() => null));
  const ms = Date.now() - t0;
  page.problems = () => log.filter((m) => m.type === 'error' || m.type === 'warn' ||
    m.type === 'warning' || m.type === 'pageerror' || m.type === 'requestfailed');
  return {page, ms};
}

const pageUrl = (name) => 'file://' + path.join(PAGES, name + '.html');

module.exports = {ROOT, FIXTURES, PAGES, SHOTS, EVENKEEL, buildPages, scaleTelemetry, launch, open, pageUrl};
