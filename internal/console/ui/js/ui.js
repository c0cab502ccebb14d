// Page-wide feedback: the error banner (role=alert) and toasts (aria-live=polite).
import { h, fill } from './dom.js';
import { ApiError } from './api.js';

export function showError(err, context) {
  if (err && err.name === 'AbortError') return;
  const banner = document.getElementById('banner');
  const status = err instanceof ApiError && err.status ? `${err.status} ` : '';
  const msg = err instanceof ApiError || (err && err.message) ? err.message : String(err);
  fill(banner,
    h('strong', {}, context ? `${context}: ` : 'Error: '),
    h('span', { class: 'banner-msg' }, `${status}${msg}`),
    h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss error', onclick: clearError }, '×'));
  banner.hidden = false;
}

export function clearError() {
  const banner = document.getElementById('banner');
  banner.hidden = true;
  banner.replaceChildren();
}

export function toast(text) {
  const el = h('div', { class: 'toast' }, text);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), 5000);
}

// action wraps a button handler: disables the button while it runs, shows errors in the
// banner and success as a toast.
export function action(label, fn, done) {
  return async (ev) => {
    const btn = ev && ev.currentTarget;
    if (ev && ev.preventDefault) ev.preventDefault();
    if (btn) btn.disabled = true;
    try {
      const out = await fn();
      clearError();
      if (done) toast(typeof done === 'function' ? done(out) : done);
      return out;
    } catch (err) {
      showError(err, label);
    } finally {
      if (btn) btn.disabled = false;
    }
  };
}

// section is a titled panel of the agent page.
export function section(title, ...children) {
  const id = 'sec-' + title.toLowerCase().replace(/[^a-z]+/g, '-');
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}
