// Live mode: the page refetches /data.json every poll_s seconds (never faster), shows what
// changed and keeps the user's zoom. A tiny server on 127.0.0.1 changes the model after the
// first fetch. Run: node --test tests/report/
'use strict';
const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const {execFileSync} = require('node:child_process');
const h = require('./harness');

let browser, server, tmp;
before(async () => {
  h.buildPages();
  browser = await h.launch();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ek-report-live-'));
});
after(async () => {
  if (browser) await browser.close();
  if (server) server.close();
  if (tmp) fs.rmSync(tmp, {recursive: true, force: true});
});

test('live: a new incident shows within two poll rounds, the zoom is kept', {timeout: 60000}, async () => {
  const model = JSON.parse(fs.readFileSync(path.join(h.FIXTURES, 'triage-healthy_deadlock.json'), 'utf8'));
  model.live = true;
  model.poll_s = 1;
  const first = JSON.stringify(model);
  model.incidents.push({source: 'watcher', kind: 'hang', summary: 'live-test: step counter stalled',
    ranks: [], hosts: ['node-a', 'node-b'], since: model.time.start + 40, until: null,
    evidence: 'no step for 30 s', gpu_hours: 0.1});
  const second = JSON.stringify(model);
  fs.writeFileSync(path.join(tmp, 'live.json'), first);
  execFileSync(h.EVENKEEL, ['report', '--from-model', path.join(tmp, 'live.json'), '-o', path.join(tmp, 'live.html')]);
  const html = fs.readFileSync(path.join(tmp, 'live.html'));

  const fetches = [], other = [];
  server = http.createServer((req, res) => {
    if (req.url === '/') {
      res.writeHead(200, {'content-type': 'text/html; charset=utf-8'});
      res.end(html);
    } else if (req.url === '/data.json') {
      fetches.push(Date.now());
      res.writeHead(200, {'content-type': 'application/json', 'cache-control': 'no-store'});
      res.end(fetches.length === 1 ? first : second);
    } else {
      other.push(req.url);
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const {port} = server.address();

  const {page} = await h.open(browser, `http://127.0.0.1:${port}/`);
  const readyAt = Date.now();
  const t0 = model.time.start;
  await page.evaluate((t0) => evenkeel.setView(t0 + 10, t0 + 40), t0);
  const rows = () => page.$$eval('#ek-incidents tbody tr', (trs) => trs.map((tr) => tr.textContent));
  assert.equal((await rows()).length, 1);
  await page.waitForFunction(() => document.querySelector('#ek-incidents').textContent.includes('live-test'),
    {timeout: 2 * 1000 + 1500, polling: 50});
  const shownAfter = Date.now() - readyAt;
  console.log(`# live: the new incident showed ${shownAfter} ms after the first render; fetches at +` +
    fetches.map((t) => t - readyAt).join(', +') + ' ms');
  assert.equal((await rows()).length, 2);
  assert.ok(fetches.length >= 2 && fetches.length <= 3, `fetches: ${fetches.length}`);
  for (let i = 1; i < fetches.length; i++) {
    assert.ok(fetches[i] - fetches[i - 1] >= 900, `fetches ${fetches[i] - fetches[i - 1]} ms apart`);
  }
  assert.deepEqual(await page.evaluate(() => evenkeel.view), {t0: t0 + 10, t1: t0 + 40});
  assert.match(await page.$eval('#ek-status', (e) => e.textContent), /^live/);
  // It keeps polling at the same pace and stays quiet in the console.
  const n = fetches.length;
  await new Promise((r) => setTimeout(r, 1300));
  assert.ok(fetches.length >= n + 1 && fetches.length <= n + 2, `fetches: ${fetches.length}`);
  assert.deepEqual(other, []);
  assert.deepEqual(page.problems(), []);
  await page.screenshot({path: path.join(h.SHOTS, 'live.png')});
  await page.close();
});
