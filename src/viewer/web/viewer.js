// lingbot-map's live viewer: reads the server's binary stream (/stream; the
// format is described in src/viewer/frame_packet.h) and draws each frame's
// points, its camera and the path as they arrive.
//
// Filtering happens on the GPU: every point carries its confidence level
// and grid level, and the shader hides those below the sliders, so moving a
// slider uploads nothing. Counts come from per-frame tables of those levels.
// window.lingbot exposes the state (the browser tests read it).
import * as THREE from 'three';
import { OrbitControls } from './vendor/OrbitControls.js';

const MSG_HEARTBEAT = 0, MSG_SCENE = 1, MSG_FRAME = 2, MSG_END = 3;
const FRAME_HEADER_BYTES = 128;
const CONF_LEVELS = 256, GRID_LEVELS = 5;
const confidenceOfLevel = (k) => Math.fround(Math.pow(2, k / 32));

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- rendering
const renderer = new THREE.WebGLRenderer({ antialias: false, preserveDrawingBuffer: true });
renderer.setPixelRatio(window.devicePixelRatio);
renderer.setSize(window.innerWidth, window.innerHeight);
renderer.setClearColor(0x15171c);
$('view').appendChild(renderer.domElement);

const scene = new THREE.Scene();
const camera = new THREE.PerspectiveCamera(60, window.innerWidth / window.innerHeight, 0.01, 1000);
camera.position.set(0, 0, 3);
const controls = new OrbitControls(camera, renderer.domElement);
// The model's world has OpenCV axes (y down, z forward); turned 180 degrees
// about x it stands upright in three.js (y up), as in our GLB export.
const world = new THREE.Group();
world.rotation.x = Math.PI;
scene.add(world);

let dirty = true;
const requestRender = () => { dirty = true; };
controls.addEventListener('change', requestRender);
let userMoved = false;
controls.addEventListener('start', () => { userMoved = true; });
window.addEventListener('resize', () => {
  camera.aspect = window.innerWidth / window.innerHeight;
  camera.updateProjectionMatrix();
  renderer.setSize(window.innerWidth, window.innerHeight);
  requestRender();
});

const pointUniforms = {
  pointSize: { value: 2 * window.devicePixelRatio },
  minConf: { value: 19 },
  minGrid: { value: 0 },
};
const pointMaterial = new THREE.ShaderMaterial({
  uniforms: pointUniforms,
  vertexShader: `
    attribute vec3 rgb;
    attribute float conf;
    attribute float grid;
    uniform float pointSize, minConf, minGrid;
    varying vec3 vColor;
    void main() {
      if (conf < minConf || grid < minGrid) {  // filtered out: outside the clip volume
        gl_Position = vec4(2.0, 2.0, 2.0, 1.0);
        gl_PointSize = 0.0;
        return;
      }
      vColor = rgb;
      gl_Position = projectionMatrix * modelViewMatrix * vec4(position, 1.0);
      gl_PointSize = pointSize;
    }`,
  fragmentShader: `
    varying vec3 vColor;
    void main() { gl_FragColor = vec4(vColor, 1.0); }`,
});

// ---------------------------------------------------------------- state
const state = {
  session: 0, width: 0, height: 0, stride: 1, expected: -1,
  frames: [],          // by arrival: { index, c2w, K, points, frustum, count, table, thumb }
  totalPoints: 0,
  done: false, endFrames: -1,
  streams: 0,          // connections made (reconnects included)
  messages: 0,
  firstMessageAt: -1, endAt: -1, handleMs: 0,
  bounds: new THREE.Box3(),
};

const path = new THREE.Line(new THREE.BufferGeometry(), new THREE.LineBasicMaterial({ color: 0xffffff }));
let pathPositions = new Float32Array(3 * 1024);
path.geometry.setAttribute('position', new THREE.BufferAttribute(pathPositions, 3));
path.frustumCulled = false;
world.add(path);

function clearScene() {
  for (const f of state.frames) {
    world.remove(f.points); f.points.geometry.dispose();
    world.remove(f.frustum); f.frustum.geometry.dispose(); f.frustum.material.dispose();
  }
  state.frames = [];
  state.totalPoints = 0;
  state.done = false; state.endFrames = -1;
  state.bounds.makeEmpty();
  path.geometry.setDrawRange(0, 0);
}

// ---------------------------------------------------------------- messages
function onScene(view) {
  const session = view.getUint32(28, true);
  clearScene();  // a new stream always starts from the beginning
  state.session = session;
  state.width = view.getInt32(8, true);
  state.height = view.getInt32(12, true);
  state.stride = view.getInt32(16, true);
  state.expected = view.getInt32(20, true);
  if (state.streams === 1) setConfLevel(view.getInt32(24, true));
}

// A frustum in camera coordinates at unit depth (apex plus the image's corners), scaled later.
function frustumGeometry(K) {
  const fx = K[0], cx = K[2], fy = K[4], cy = K[5];
  const w = state.width, h = state.height;
  const c = [[0, 0], [w, 0], [w, h], [0, h]].map(([u, v]) => [(u - cx) / fx, (v - cy) / fy, 1]);
  const v = [];
  for (let i = 0; i < 4; ++i) v.push(0, 0, 0, ...c[i]);
  for (let i = 0; i < 4; ++i) v.push(...c[i], ...c[(i + 1) % 4]);
  const g = new THREE.BufferGeometry();
  g.setAttribute('position', new THREE.Float32BufferAttribute(v, 3));
  return g;
}

function onFrame(buffer, view) {
  const index = view.getInt32(4, true);
  const c2w = new Float32Array(buffer, 8, 12).slice();
  const K = new Float32Array(buffer, 56, 9).slice();
  const n = view.getUint32(96, true);
  const origin = new Float32Array(buffer, 100, 3);
  const extent = new Float32Array(buffer, 112, 3);
  const tw = view.getUint16(124, true), th = view.getUint16(126, true);
  let at = FRAME_HEADER_BYTES;
  const positions = new Uint16Array(buffer, at, 3 * n);
  at += Math.ceil((6 * n) / 4) * 4;
  const rgb = new Uint8Array(buffer, at, 3 * n); at += 3 * n;
  const conf = new Uint8Array(buffer, at, n); at += n;
  const grid = new Uint8Array(buffer, at, n); at += n;
  at = Math.ceil(at / 4) * 4;
  const thumb = new Uint8Array(buffer, at, 3 * tw * th);

  const g = new THREE.BufferGeometry();
  g.setAttribute('position', new THREE.BufferAttribute(positions, 3, true));
  g.setAttribute('rgb', new THREE.BufferAttribute(rgb, 3, true));
  g.setAttribute('conf', new THREE.BufferAttribute(conf, 1, false));
  g.setAttribute('grid', new THREE.BufferAttribute(grid, 1, false));
  const points = new THREE.Points(g, pointMaterial);
  points.frustumCulled = false;
  points.position.set(origin[0], origin[1], origin[2]);
  points.scale.set(extent[0], extent[1], extent[2]);
  world.add(points);
  if (n > 0) {
    state.bounds.expandByPoint(new THREE.Vector3(origin[0], origin[1], origin[2]));
    state.bounds.expandByPoint(new THREE.Vector3(origin[0] + extent[0], origin[1] + extent[1], origin[2] + extent[2]));
  }

  // table[g * 256 + k]: points with grid level >= g and confidence level >= k.
  const table = new Uint32Array(GRID_LEVELS * CONF_LEVELS);
  for (let i = 0; i < n; ++i) ++table[grid[i] * CONF_LEVELS + conf[i]];
  for (let gl = 0; gl < GRID_LEVELS; ++gl)  // suffix sums over confidence, then over grid level
    for (let k = CONF_LEVELS - 2; k >= 0; --k) table[gl * CONF_LEVELS + k] += table[gl * CONF_LEVELS + k + 1];
  for (let gl = GRID_LEVELS - 2; gl >= 0; --gl)
    for (let k = 0; k < CONF_LEVELS; ++k) table[gl * CONF_LEVELS + k] += table[(gl + 1) * CONF_LEVELS + k];

  const m = new THREE.Matrix4().set(c2w[0], c2w[1], c2w[2], c2w[3], c2w[4], c2w[5], c2w[6], c2w[7],
                                    c2w[8], c2w[9], c2w[10], c2w[11], 0, 0, 0, 1);
  const frustum = new THREE.LineSegments(frustumGeometry(K), new THREE.LineBasicMaterial());
  frustum.matrixAutoUpdate = false;
  frustum.userData.c2w = m;
  world.add(frustum);

  const i = state.frames.length;
  if (3 * (i + 1) > pathPositions.length) {  // grow the path's buffer
    const bigger = new Float32Array(pathPositions.length * 2);
    bigger.set(pathPositions);
    pathPositions = bigger;
    path.geometry.setAttribute('position', new THREE.BufferAttribute(pathPositions, 3));
  }
  pathPositions.set([c2w[3], c2w[7], c2w[11]], 3 * i);
  path.geometry.attributes.position.needsUpdate = true;
  state.bounds.expandByPoint(new THREE.Vector3(c2w[3], c2w[7], c2w[11]));

  state.frames.push({ index, c2w: m, K, points, frustum, count: n, table, thumb, tw, th });
  state.totalPoints += n;
  if (!userMoved && !ui.follow.checked) frameCamera();  // the view grows with the scene until the user takes over
}

function onMessage(buffer) {
  const t0 = performance.now();
  try {
    return handleMessage(buffer);
  } finally {
    state.handleMs += performance.now() - t0;  // the page's own cost per message, rendering aside
  }
}

function handleMessage(buffer) {
  const view = new DataView(buffer);
  const type = view.getUint8(0);
  state.messages += 1;
  if (state.firstMessageAt < 0) state.firstMessageAt = performance.now();
  if (type === MSG_SCENE) onScene(view);
  else if (type === MSG_FRAME) onFrame(buffer, view);
  else if (type === MSG_END) {
    state.done = true;
    state.endFrames = view.getInt32(4, true);
    state.endAt = performance.now();
  } else if (type !== MSG_HEARTBEAT) console.warn('unknown message type', type);
  return type;
}

// ---------------------------------------------------------------- the stream
// Splits the byte stream into messages (uint32 length, then the message),
// copying each into its own ArrayBuffer so typed arrays can view it.
class MessageSplitter {
  constructor() { this.chunks = []; this.length = 0; }
  push(chunk) { this.chunks.push(chunk); this.length += chunk.length; }
  take(n) {
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - filled);
      out.set(c.subarray(0, k), filled);
      filled += k;
      if (k === c.length) this.chunks.shift(); else this.chunks[0] = c.subarray(k);
    }
    this.length -= n;
    return out;
  }
  peekLength() {
    if (this.length < 4) return -1;
    const head = this.take(4);
    this.chunks.unshift(head); this.length += 4;
    return new DataView(head.buffer).getUint32(0, true);
  }
  next() {
    const n = this.peekLength();
    if (n < 0 || this.length < 4 + n) return null;
    this.take(4);
    return this.take(n).buffer;
  }
}

const yieldToPage = () => new Promise((resolve) => setTimeout(resolve, 0));

async function readStream() {
  state.streams += 1;
  setStatus('connected');
  const response = await fetch('./stream', { cache: 'no-store' });
  if (!response.ok) throw new Error(`stream: HTTP ${response.status}`);
  const reader = response.body.getReader();
  const splitter = new MessageSplitter();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    splitter.push(value);
    // Long bursts (a saved result arrives at once) are handled in slices of
    // ~10 ms, so the page stays responsive while a million points load.
    let sliceStart = performance.now();
    let changed = false;
    for (let m = splitter.next(); m; m = splitter.next()) {
      const type = onMessage(m);
      changed = changed || type !== MSG_HEARTBEAT;
      if (performance.now() - sliceStart > 10) {
        afterMessages();
        await yieldToPage();
        sliceStart = performance.now();
      }
    }
    if (changed) afterMessages();
  }
}

async function connectForever() {
  for (;;) {
    try {
      await readStream();
    } catch (e) {
      console.warn(e);
    }
    setStatus(state.done ? 'finished; server gone' : 'disconnected; retrying');
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// ---------------------------------------------------------------- controls
const ui = {
  conf: $('conf'), size: $('size'), downsample: $('downsample'), first: $('first'), last: $('last'),
  live: $('live'), follow: $('follow'), play: $('play'),
};
let playing = null;

function setStatus(text) {
  state.statusText = text;
  $('status').textContent = text;
}

function setConfLevel(k) { ui.conf.value = k; applyControls(); }

function visibleRange() {
  const n = state.frames.length;
  if (n === 0) return [0, -1];
  const last = ui.live.checked ? n - 1 : Math.min(Number(ui.last.value), n - 1);
  return [Math.min(Number(ui.first.value), last), last];
}

function visiblePoints() {
  const [a, b] = visibleRange();
  const key = Number(ui.downsample.value) * CONF_LEVELS + Number(ui.conf.value);
  let sum = 0;
  for (let i = a; i <= b; ++i) sum += state.frames[i].table[key];
  return sum;
}

// The frustum size follows the scene: 5% of its bounding box's diagonal.
function frustumScale() {
  if (state.bounds.isEmpty()) return 0.1;
  const d = state.bounds.getSize(new THREE.Vector3()).length();
  return d > 0 ? 0.05 * d : 0.1;
}

function applyControls(fromStream = false) {
  const n = state.frames.length;
  ui.first.max = ui.last.max = Math.max(0, n - 1);
  if (ui.live.checked) ui.last.value = Math.max(0, n - 1);
  pointUniforms.minConf.value = Number(ui.conf.value);
  pointUniforms.minGrid.value = Number(ui.downsample.value);
  pointUniforms.pointSize.value = Number(ui.size.value) * window.devicePixelRatio;
  const [a, b] = visibleRange();
  const total = Math.max(state.expected, n, 2) - 1;
  const s = frustumScale();
  const scale = new THREE.Matrix4().makeScale(s, s, s);
  for (let i = 0; i < n; ++i) {
    const f = state.frames[i];
    const shown = i >= a && i <= b;
    f.points.visible = shown;
    f.frustum.visible = shown;
    f.frustum.matrix.multiplyMatrices(f.c2w, scale);
    f.frustum.material.color.setHSL(0.66 * (1 - f.index / total), 0.9, 0.55);  // blue (first) to red (last)
  }
  path.geometry.setDrawRange(a, Math.max(0, b - a + 1));
  $('conf-value').textContent = confidenceOfLevel(Number(ui.conf.value)).toFixed(3);
  $('size-value').textContent = ui.size.value;
  $('downsample-value').textContent = String(state.stride * (1 << Number(ui.downsample.value)));
  $('first-value').textContent = a;
  $('last-value').textContent = b;
  $('counts').textContent = `${n} frames, ${visiblePoints().toLocaleString()} of ${state.totalPoints.toLocaleString()} points`;
  $('status').textContent = state.done ? `finished (${state.endFrames} frames)` : (state.statusText || '');
  showThumbnail(b);
  if (ui.follow.checked) followCamera(b);
  if (fromStream) streamRenderWanted = true; else requestRender();
}

// New data asks for a redraw, but not more often than the drawing allows:
// after a draw, the next waits for four times what the last one took (at
// least 100 ms), so that a slow GPU (or software GL) drawing millions of
// points still leaves the page most of its time to load and to respond.
let streamRenderWanted = false;
function afterMessages() { applyControls(true); }

function showThumbnail(i) {
  if (i < 0 || i >= state.frames.length) return;
  const f = state.frames[i];
  if (f.tw === 0) return;
  const canvas = $('thumb');
  if (canvas.width !== f.tw || canvas.height !== f.th) { canvas.width = f.tw; canvas.height = f.th; }
  const image = new ImageData(f.tw, f.th);
  for (let p = 0, q = 0; p < f.tw * f.th; ++p, q += 3) {
    image.data[4 * p] = f.thumb[q]; image.data[4 * p + 1] = f.thumb[q + 1];
    image.data[4 * p + 2] = f.thumb[q + 2]; image.data[4 * p + 3] = 255;
  }
  canvas.getContext('2d').putImageData(image, 0, 0);
}

// Follow mode: the view is frame i's camera (OpenCV camera axes turned into
// three.js's: x right, y up, looking down -z), with the model's field of view.
function followCamera(i) {
  if (i < 0) return;
  const f = state.frames[i];
  const flip = new THREE.Matrix4().makeScale(1, -1, -1);
  const m = new THREE.Matrix4().multiplyMatrices(world.matrixWorld, f.c2w).multiply(flip);
  m.decompose(camera.position, camera.quaternion, new THREE.Vector3());
  camera.fov = THREE.MathUtils.radToDeg(2 * Math.atan(state.height / 2 / f.K[4]));
  camera.updateProjectionMatrix();
}

// Free orbit: look at the scene's middle from a distance that shows it all.
function frameCamera() {
  world.updateMatrixWorld();
  const box = state.bounds.clone().applyMatrix4(world.matrixWorld);
  if (box.isEmpty()) return;
  const centre = box.getCenter(new THREE.Vector3());
  const size = Math.max(box.getSize(new THREE.Vector3()).length(), 0.1);
  controls.target.copy(centre);
  camera.position.copy(centre).add(new THREE.Vector3(0, 0.2 * size, 0.6 * size));
  camera.near = size / 1000; camera.far = size * 100;
  camera.updateProjectionMatrix();
  controls.update();
}

for (const input of [ui.conf, ui.size, ui.downsample, ui.first, ui.live]) input.addEventListener('input', applyControls);
ui.last.addEventListener('input', () => { ui.live.checked = false; applyControls(); });
ui.follow.addEventListener('input', () => {
  controls.enabled = !ui.follow.checked;
  if (!ui.follow.checked) { camera.fov = 60; frameCamera(); }
  applyControls();
});
ui.play.addEventListener('click', () => {
  if (playing) { clearInterval(playing); playing = null; ui.play.textContent = 'play'; return; }
  ui.live.checked = false;
  ui.last.value = ui.first.value;
  ui.play.textContent = 'pause';
  playing = setInterval(() => {
    const next = Number(ui.last.value) + 1;
    if (next >= state.frames.length) { ui.play.click(); return; }
    ui.last.value = next;
    applyControls();
  }, 100);
});
$('screenshot').addEventListener('click', () => {
  renderer.render(scene, camera);
  const a = document.createElement('a');
  a.href = renderer.domElement.toDataURL('image/png');
  a.download = 'lingbot-view.png';
  a.click();
});
$('glb').addEventListener('click', () => {
  const [first, last] = visibleRange();
  const a = document.createElement('a');
  a.href = `./scene.glb?conf=${ui.conf.value}&downsample=${ui.downsample.value}&first=${first}&last=${last}`;
  a.download = 'scene.glb';
  a.click();
});

// The longest gap between two animation frames while the stream loads:
// how long the page froze at worst (docs/PERF.md's load figures).
let lastTick = -1, longestGap = 0, lastRenderAt = -1, lastRenderCost = 0, renderedLastTick = false;
function animate() {
  requestAnimationFrame(animate);
  const now = performance.now();
  if (lastTick >= 0 && !state.done) longestGap = Math.max(longestGap, now - lastTick);
  if (renderedLastTick) lastRenderCost = now - lastTick;  // the draw shows up in the gap to this frame
  lastTick = now;
  renderedLastTick = false;
  if (streamRenderWanted && now - lastRenderAt >= Math.max(100, 4 * lastRenderCost)) {
    streamRenderWanted = false;
    dirty = true;
  }
  if (!dirty) return;
  lastRenderAt = now;
  renderedLastTick = true;
  dirty = false;
  renderer.render(scene, camera);
  state.renders = (state.renders || 0) + 1;
}
animate();

// What the browser tests read.
window.lingbot = {
  get frames() { return state.frames.length; },
  // Counted from the scene graph: the frustums drawn, the vertices of the point clouds.
  get cameras() { return world.children.filter((o) => o.isLineSegments).length; },
  get points() {
    return world.children.filter((o) => o.isPoints).reduce((n, o) => n + o.geometry.attributes.position.count, 0);
  },
  get visiblePoints() { return visiblePoints(); },
  get done() { return state.done; },
  get endFrames() { return state.endFrames; },
  get streams() { return state.streams; },
  get stride() { return state.stride; },
  get frameIndices() { return state.frames.map((f) => f.index); },
  get pathLength() { return path.geometry.drawRange.count; },
  get loadMs() { return state.endAt >= 0 ? state.endAt : -1; },
  get renders() { return state.renders || 0; },
  get longestFrameGapMs() { return longestGap; },
  get handleMs() { return state.handleMs; },
  confidenceOfLevel,
  requestRender,
  // Milliseconds per frame over n renders with the view turning (each read
  // back, so the GPU's work is inside the measurement): is the page interactive?
  timeRenders(n) {
    const gl = renderer.getContext(), pixel = new Uint8Array(4);
    const t0 = performance.now();
    for (let i = 0; i < n; ++i) {
      world.rotation.y += 0.01;
      renderer.render(scene, camera);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
    }
    world.rotation.y = 0;
    requestRender();
    return (performance.now() - t0) / n;
  },
};
connectForever();
