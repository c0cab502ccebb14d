// The REST client: every call goes to the facade's public API with the pasted token.
// The token lives in sessionStorage only (gone when the tab closes or on "Sign out").

const KEY = 'agentplane.token';

export const token = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

// ApiError carries the contract's message ({"error": "..."} on /v0, the same or
// {"error": {"reason", "details"}} on /v3) and the status.
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

function messageOf(status, body, fallback) {
  const e = body && body.error;
  if (typeof e === 'string' && e) return e;
  if (e && typeof e === 'object') return e.details || e.reason || e.message || fallback;
  if (body && typeof body.message === 'string') return body.message;
  return fallback || `HTTP ${status}`;
}

// api performs one request and returns the decoded JSON body, or throws ApiError.
export async function api(method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${token.get()}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts.signal });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'The API could not be reached. Is the platform running?');
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) throw new ApiError(resp.status, messageOf(resp.status, data, resp.statusText), data);
  return data;
}

export const get = (p, o) => api('GET', p, undefined, o);
export const post = (p, b = {}) => api('POST', p, b);
export const put = (p, b) => api('PUT', p, b);
export const del = (p) => api('DELETE', p);

export const agentPath = (id, rest = '') => `/v0/agents/${encodeURIComponent(id)}${rest}`;

// sse reads a Server-Sent Events stream with fetch (an EventSource cannot send the
// Authorization header): path requested with init and the bearer token, onEvent(name, data,
// stop) called per event (its data lines joined; null when it had none). It resolves when the
// stream ends or stop() is called, and rejects with ApiError when the route refuses.
export async function sse(path, init, onEvent) {
  const resp = await fetch(path, {
    ...init, headers: { ...init.headers, Authorization: `Bearer ${token.get()}`, Accept: 'text/event-stream' },
  });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, messageOf(resp.status, body, resp.statusText), body);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '', event = 'message', data = [], stopped = false;
  const stop = () => { stopped = true; reader.cancel().catch(() => {}); };
  while (!stopped) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while (!stopped && (nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        onEvent(event, data.length ? data.join('\n') : null, stop);
        event = 'message';
        data = [];
      } else if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
  }
}

// streamLogs follows GET /v0/agents/{id}/logs?follow=true. onLine gets each `data:` line,
// onError the message of an `event: error`; it resolves when the stream ends (`event: end`,
// or the server closes) and rejects with ApiError when the route refuses.
export function streamLogs(id, { signal, onLine, onError, tail = 100 }) {
  return sse(agentPath(id, `/logs?follow=true&tail=${tail}`), { signal }, (event, text, stop) => {
    if (event === 'end') stop();
    else if (text === null) return;
    else if (event === 'error') onError(text);
    else onLine(text);
  });
}
