// Writes docs/report.png: the 16-GPU deadlock fixture's page at 1200x700, hovering rank 3
// after the onset. Not a test; run after the tests have built the pages:
//   node tests/report/make_readme_png.js
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const h = require('./harness');

(async () => {
  h.buildPages();
  const browser = await h.launch();
  try {
    const {page} = await h.open(browser, h.pageUrl('triage-healthy_deadlock'), {width: 1200, height: 700});
    const t = await page.evaluate(() => evenkeel.data.time.start + 45.5);
    const {x, y} = await page.evaluate((t) => evenkeel.pixelFor(t, 3), t);
    const box = await (await page.$('#ek-util-canvas')).boundingBox();
    await page.mouse.move(box.x + x, box.y + y);
    const out = path.join(h.ROOT, 'docs', 'report.png');
    await page.screenshot({path: out});
    if (page.problems().length) throw new Error(JSON.stringify(page.problems()));
    console.log(`${out}: ${fs.statSync(out).size} bytes`);
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
