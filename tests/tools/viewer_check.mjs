// Drives the browser viewer (src/viewer/web) in Debian's chromium, headless,
// through playwright-core, and prints one JSON line of what the page holds,
// for tests/viewer/viewer_browser_test.cpp to check against predictions.npz.
//
//   node viewer_check.mjs --log RUN_STDERR_FILE | --url URL
//        [--frames N]            wait until the page holds N frames and the run's end
//        [--screenshot FILE]     a screenshot once loaded, and how many of its pixels are not background
//        [--conf-levels a,b,..]  then move the confidence slider to each level
//        [--downsample D]        then the downsample slider to D (x2^D)
//        [--reconnect]           first a page that closes mid-stream, then one that reloads
//                                mid-stream; the report is of the last page
//        [--signal FILE]         with --reconnect: create FILE once the reload is done (the
//                                test holds back the run's remaining frames until then)
//        [--glb FILE]            then click the page's GLB button and save the download as FILE
//        [--time-renders N]      then the time per frame of N renders of the view turning
//        [--timeout SECONDS]
// The URL is read from the line "viewer: open URL" that `run --view` writes
// on stderr, so the tests can use --port 0.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import zlib from 'node:zlib';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const flag = (name) => args.includes(name);
const timeoutMs = Number(opt('--timeout', '60')) * 1000;
const deadline = Date.now() + timeoutMs;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function viewerUrl() {
  if (opt('--url')) return opt('--url');
  const log = opt('--log');
  while (Date.now() < deadline) {
    const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
    const m = text.match(/viewer: open (http:\/\/\S+)/);
    if (m) return m[1];
    if (/error:/.test(text)) throw new Error(`the run failed: ${text}`);
    await sleep(100);
  }
  throw new Error(`no viewer URL in ${log}`);
}

// A PNG's pixels (8-bit RGB or RGBA, not interlaced: what Chromium writes),
// decoded here so the blank-screenshot check does not trust the page.
function decodePng(bytes) {
  let at = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (at < bytes.length) {
    const n = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const body = bytes.subarray(at + 8, at + 8 + n);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0); height = body.readUInt32BE(4);
      if (body[8] !== 8 || body[12] !== 0) throw new Error('PNG: only 8-bit, non-interlaced');
      channels = { 2: 3, 6: 4 }[body[9]];
      if (!channels) throw new Error(`PNG: colour type ${body[9]}`);
    } else if (type === 'IDAT') idat.push(body);
    at += 12 + n;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels, out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; ++y) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; ++x) {
      const v = raw[y * (stride + 1) + 1 + x];
      const a = x >= channels ? out[y * stride + x - channels] : 0;
      const b = y > 0 ? out[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? out[(y - 1) * stride + x - channels] : 0;
      let p;
      if (filter === 0) p = 0; else if (filter === 1) p = a; else if (filter === 2) p = b;
      else if (filter === 3) p = (a + b) >> 1;
      else { const q = a + b - c, pa = Math.abs(q - a), pb = Math.abs(q - b), pc = Math.abs(q - c);
             p = pa <= pb && pa <= pc ? a : pb <= pc ? b : c; }
      out[y * stride + x] = (v + p) & 255;
    }
  }
  return { width, height, channels, pixels: out };
}

async function waitFor(page, predicate, what) {
  while (Date.now() < deadline) {
    if (await page.evaluate(predicate).catch(() => false)) return;
    await sleep(50);
  }
  const state = await page.evaluate(() => window.lingbot && { frames: lingbot.frames, done: lingbot.done }).catch((e) => String(e));
  throw new Error(`timed out waiting for ${what}: ${JSON.stringify(state)}`);
}

const snapshot = (page) => page.evaluate(() => ({
  frames: lingbot.frames, cameras: lingbot.cameras, points: lingbot.points, visible_points: lingbot.visiblePoints,
  done: lingbot.done, end_frames: lingbot.endFrames, streams: lingbot.streams, stride: lingbot.stride,
  frame_indices: lingbot.frameIndices, path_length: lingbot.pathLength, load_ms: lingbot.loadMs,
}));

async function moveSlider(page, id, value) {
  await page.evaluate(([id, value]) => {
    const el = document.getElementById(id);
    el.value = String(value);
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, [id, value]);
}

const url = await viewerUrl();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Software WebGL (SwiftShader): CI machines have no GPU.
  args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--ignore-gpu-blocklist'],
});
const report = { url };
try {
  const context = await browser.newContext({ viewport: { width: 800, height: 600 } });
  const errors = [];
  const open = async () => {
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url);
    return page;
  };
  const frames = Number(opt('--frames', '0'));
  let page = await open();
  if (flag('--reconnect')) {
    // A page that goes away mid-stream, then one that reloads mid-stream.
    await waitFor(page, () => window.lingbot && lingbot.frames >= 1, 'a first frame');
    report.first_page = await snapshot(page);
    await page.close();
    page = await open();
    await waitFor(page, () => window.lingbot && lingbot.frames >= 1, 'a first frame on the second page');
    report.second_page_before_reload = await snapshot(page);
    await page.reload();
    if (opt('--signal')) fs.writeFileSync(opt('--signal'), 'reloaded\n');
  }
  await waitFor(page, `window.lingbot && lingbot.done && lingbot.frames >= ${frames}`, `${frames} frames and the end`);
  report.loaded = await snapshot(page);
  if (opt('--screenshot')) {
    await page.evaluate(() => lingbot.requestRender());
    await page.waitForTimeout(300);
    const png = await page.screenshot({ path: opt('--screenshot') });
    const { width, height, channels, pixels } = decodePng(png);
    // Pixels of the 3D view that differ from its background (0x15171c), away from the panel and the thumbnail.
    let lit = 0, total = 0;
    for (let y = 0; y < height; ++y) {
      for (let x = Math.floor(width * 0.4); x < Math.floor(width * 0.6); ++x) {
        const i = (y * width + x) * channels;
        ++total;
        if (Math.abs(pixels[i] - 0x15) + Math.abs(pixels[i + 1] - 0x17) + Math.abs(pixels[i + 2] - 0x1c) > 24) ++lit;
      }
    }
    report.screenshot = { width, height, lit_pixels: lit, sampled_pixels: total };
  }
  report.by_conf_level = {};
  for (const level of (opt('--conf-levels', '') || '').split(',').filter((s) => s !== '')) {
    await moveSlider(page, 'conf', Number(level));
    report.by_conf_level[level] = (await snapshot(page)).visible_points;
  }
  if (opt('--downsample')) {
    await moveSlider(page, 'downsample', Number(opt('--downsample')));
    report.downsampled_points = (await snapshot(page)).visible_points;
  }
  if (opt('--glb')) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#glb')]);
    await download.saveAs(opt('--glb'));
    report.glb_visible_points = (await snapshot(page)).visible_points;
  }
  if (opt('--time-renders')) {
    report.ms_per_render = await page.evaluate((n) => lingbot.timeRenders(n), Number(opt('--time-renders')));
  }
  report.longest_frame_gap_ms = await page.evaluate(() => lingbot.longestFrameGapMs);
  report.message_handling_ms = await page.evaluate(() => lingbot.handleMs);
  report.page_errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
