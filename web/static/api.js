// The console's client of the HTTP API: JSON calls with the tab's API key,
// idempotency keys made once per intent, and Server-Sent Events read over
// fetch (EventSource cannot send an Authorization header) with
// Last-Event-ID resumption.

const keyStorage = 'oncejob.apiKey';

export function apiKey() { return sessionStorage.getItem(keyStorage) || ''; }
export function setApiKey(k) { sessionStorage.setItem(keyStorage, k); }
export function forgetApiKey() { sessionStorage.removeItem(keyStorage); }

// onUnauthenticated is called when the server refuses the key (or its
// absence); the app asks for one.
let onUnauthenticated = () => {};
export function setUnauthenticatedHandler(fn) { onUnauthenticated = fn; }

// ApiError is a problem (RFC 9457) the API answered.
export class ApiError extends Error {
  constructor(problem) {
    super(problem.detail || problem.title || 'request failed');
    this.problem = problem;
    this.status = problem.status || 0;
  }
}

// newKey is a random UUID (v4) for an idempotency key, also in contexts
// where crypto.randomUUID is not available (plain http on a LAN address).
export function newKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const k = apiKey();
  if (k) h.Authorization = `Bearer ${k}`;
  return h;
}

async function problemOf(resp) {
  try {
    const p = await resp.json();
    if (p && typeof p === 'object') return p;
  } catch (_) { /* not JSON */ }
  return { status: resp.status, title: resp.statusText };
}

// call sends one request and returns the JSON answer, or throws ApiError.
export async function call(method, path, { body, idempotencyKey } = {}) {
  const extra = {};
  if (body !== undefined) extra['Content-Type'] = 'application/json';
  if (idempotencyKey) extra['Idempotency-Key'] = idempotencyKey;
  const resp = await fetch(path, { method, headers: headers(extra), body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401) onUnauthenticated();
  if (!resp.ok) throw new ApiError(await problemOf(resp));
  return resp.json();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// act performs one operator intent (a click): one idempotency key for the
// intent, reused on every retry of a network failure, 429 or 503, so a
// retried click is applied once.
export async function act(method, path, body) {
  const key = newKey();
  for (let attempt = 0; ; attempt++) {
    try {
      return await call(method, path, { body, idempotencyKey: key });
    } catch (e) {
      const retryable = !(e instanceof ApiError) || e.status === 429 || e.status === 503;
      if (!retryable || attempt >= 4) throw e;
      await sleep(Math.min(4000, 250 * 2 ** attempt) * Math.random() + 100);
    }
  }
}

// watch reads an event stream of the API and calls onEvent(data, id) for
// each event, in order, once: on a dropped connection it reconnects with
// Last-Event-ID, so the server resumes after the last event received.
// onEnd runs when the server ends the stream (a job reached a terminal
// status); onState('live' | 'reconnecting' | 'failed', problem) reports the
// connection. It returns { close() }.
export function watch(path, { lastEventId = '', onEvent, onEnd = () => {}, onState = () => {} }) {
  const ctl = new AbortController();
  let last = lastEventId;
  let retryMs = 1000;
  let closed = false;
  let failures = 0;

  async function once() {
    const h = headers({ Accept: 'text/event-stream' });
    if (last) h['Last-Event-ID'] = last;
    const resp = await fetch(path, { headers: h, signal: ctl.signal, cache: 'no-store' });
    if (!resp.ok) {
      const p = await problemOf(resp);
      if (resp.status === 401) onUnauthenticated();
      // Client errors will not heal by retrying.
      return { done: resp.status >= 400 && resp.status < 500 && resp.status !== 429, problem: p };
    }
    onState('live');
    failures = 0;
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let ev = { id: null, event: '', data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { done: false };
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (ev.data.length) {
            const type = ev.event || 'message';
            if (ev.id !== null) last = ev.id;
            const data = JSON.parse(ev.data.join('\n'));
            if (type === 'message') onEvent(data, last);
            else if (type === 'end') { onEnd(); return { done: true }; }
            else if (type === 'problem') onState('reconnecting', data);
          }
          ev = { id: null, event: '', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue; // heartbeat
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let val = i < 0 ? '' : line.slice(i + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'id') ev.id = val;
        else if (field === 'event') ev.event = val;
        else if (field === 'data') ev.data.push(val);
        else if (field === 'retry' && /^\d+$/.test(val)) retryMs = Number(val);
      }
    }
  }

  (async () => {
    while (!closed) {
      let r;
      try {
        r = await once();
      } catch (e) {
        if (closed) return;
        r = { done: false };
      }
      if (closed) return;
      if (r.done) {
        if (r.problem) onState('failed', r.problem);
        return;
      }
      onState('reconnecting', r.problem);
      failures++;
      await sleep(Math.min(10000, retryMs * Math.min(failures, 5)));
    }
  })();

  return { close() { closed = true; ctl.abort(); } };
}
