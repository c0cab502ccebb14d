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

// streamLogs follows GET /v0/agents/{id}/logs?follow=true (Server-Sent Events) with fetch (an
// EventSource cannot send the Authorization header). onLine gets each `data:` line, onError
// the message of an `event: error`; it resolves when the stream ends (`event: end`, or the
// server closes) and rejects with ApiError when the route refuses.
export async function streamLogs(id, { signal, onLine, onError, tail = 100 }) {
  const resp = await fetch(agentPath(id, `/logs?follow=true&tail=${tail}`), {
    headers: { Authorization: `Bearer ${token.get()}`, Accept: 'text/event-stream' }, signal,
  });
  if (!resp.ok) {
    let data = null;
    try { data = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, messageOf(resp.status, data, resp.statusText), data);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = 'message';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (data.length) {
          const text = data.join('\n');
          if (event === 'error') onError(text);
          else if (event === 'end') { reader.cancel().catch(() => {}); return; }
          else onLine(text);
        } else if (event === 'end') { reader.cancel().catch(() => {}); return; }
        event = 'message';
        data = [];
      } else if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
  }
}
