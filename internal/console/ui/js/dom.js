// Tiny DOM helpers. Everything from the API is rendered as text (textContent), never as HTML.

// h builds an element: h('button', {type: 'button', onclick: f}, 'Text', child, ...).
// Attributes starting with "on" are listeners; `class`, `for`, aria-* and data-* are set as
// attributes; strings become text nodes.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and appends children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let uid = 0;
// field is a labelled input: returns {wrap, input}.
export function field(label, attrs = {}, tag = 'input') {
  const id = attrs.id || `f${++uid}`;
  const input = h(tag, { ...attrs, id });
  const wrap = h('div', { class: 'field' }, h('label', { for: id }, label), input);
  return { wrap, input };
}

// table renders rows in a scrolling box: cols is [[header, row => text|Node], ...].
export function table(caption, cols, rows, empty = 'None yet.') {
  if (!rows || rows.length === 0) return h('p', { class: 'muted' }, empty);
  // The region is named apart from the section around it: landmarks need names of their own.
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': `${caption} table`, tabindex: '0' },
    h('table', {},
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, cols.map(([name]) => h('th', { scope: 'col' }, name)))),
      h('tbody', {}, rows.map(r => h('tr', {}, cols.map(([, get]) => h('td', {}, get(r) ?? '')))))));
}

// badge shows an agent or domain status.
export function badge(status) {
  const s = String(status || 'unknown');
  return h('span', { class: `badge badge-${s.replace(/[^a-z_-]/gi, '')}` }, s);
}

export function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

// money is an amount in millionths of currency (the model proxy's costMicros) as text, as
// the platform writes it elsewhere: two decimals when it is whole cents ("$5.00"), up to six
// otherwise ("$0.00017", "$4.99949").
export function money(micros, currency) {
  const v = (micros ?? 0) / 1e6;
  const digits = (micros ?? 0) % 10000 === 0 ? 2 : 6;
  return new Intl.NumberFormat('en-US', { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: digits }).format(v);
}
