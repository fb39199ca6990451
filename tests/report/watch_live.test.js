// The live page from the real watcher: two `evenkeel agent`s replay the healthy-to-deadlock
// fixture (node-a, node-b), `evenkeel watch --http` serves the page, and the page must show
// the deadlock incident within two poll rounds of the watcher opening it.
// Run: node --test tests/report/
'use strict';
const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const {spawn} = require('node:child_process');
const h = require('./harness');

let browser, tmp;
const procs = [];
before(async () => {
  browser = await h.launch();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ek-watch-live-'));
});
after(async () => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
  if (browser) await browser.close();
  if (tmp) fs.rmSync(tmp, {recursive: true, force: true});
});

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => {
    const {port} = s.address();
    s.close(() => resolve(port));
  });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test('live from evenkeel watch --http: a new incident shows within two poll rounds', {timeout: 120000}, async () => {
  const fixture = path.join(h.ROOT, 'testdata', 'triage', 'healthy_deadlock');
  const run = path.join(tmp, 'run.toml');
  fs.writeFileSync(run, ['[run]', 'name = "live"', '[cluster]', 'nodes = 2', 'gpus_per_node = 8',
    'hosts = ["node-a", "node-b"]', '[watch]', 'poll_s = 1', 'profile = "B300"', 'hang_floor_s = 600', ''].join('\n'));
  const ports = [await freePort(), await freePort()];
  ['node-a', 'node-b'].forEach((host, i) => {
    fs.mkdirSync(path.join(tmp, 'hb-' + host));
    procs.push(spawn(h.EVENKEEL, ['agent', run, '--listen', `127.0.0.1:${ports[i]}`, '--host', host,
      '--heartbeat-dir', path.join(tmp, 'hb-' + host), '--telemetry', 'replay', path.join(fixture, host + '.csv'),
      '--replay-from', '18', '--replay-hold'], {stdio: 'ignore'}));
  });
  const log = path.join(tmp, 'watch.jsonl');
  procs.push(spawn(h.EVENKEEL, ['watch', run, '--agents', ports.map((p) => `127.0.0.1:${p}`).join(','),
    '--state-dir', path.join(tmp, 'state'), '--log', log, '--http', '127.0.0.1:0'], {stdio: 'ignore'}));
  const lines = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').filter(Boolean)
    .map((l) => JSON.parse(l)) : []);
  const url = (await waitFor('the page URL', () => lines().find((e) => e.event === 'page'), 15000)).url;
  const {page} = await h.open(browser, url);
  assert.equal(await page.evaluate(() => evenkeel.data.live), true);
  const opened = await waitFor('the deadlock incident in the watcher log', () => lines().find(
    (e) => e.event === 'incident_opened' && e.incident.kind === 'deadlock'), 60000);
  const openedAt = Date.now();
  await page.waitForFunction(() => document.querySelector('#ek-incidents') &&
    /deadlock/.test(document.querySelector('#ek-incidents').textContent), {timeout: 10000, polling: 50});
  const lag = Date.now() - openedAt;
  console.log(`# live page showed the watcher's deadlock ${lag} ms after it was logged: ${opened.incident.summary}`);
  assert.ok(lag <= 2 * 1000 + 300, `shown ${lag} ms after the watcher opened it (two poll rounds: 2000 ms)`);
  const st = await page.evaluate(() => ({world: evenkeel.data.ranks.length, band: evenkeel.data.verdicts.band.length}));
  assert.equal(st.world, 16);
  assert.ok(st.band >= 1);
  assert.deepEqual(page.problems(), []);
  await page.screenshot({path: path.join(h.SHOTS, 'watch-live.png')});
  await page.close();
});
