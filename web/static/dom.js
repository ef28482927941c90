// DOM building without HTML strings: every value becomes a text node or an
// attribute set through the DOM, so no data can become markup.

// h builds an element. attrs: class, dataset (object), on<event>
// (listener), anything else as an attribute; false/null/undefined skip.
// children: nodes, strings (as text) or arrays of them; null skips.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// jobLink is a link to a job's page showing text.
export function jobLink(id, text) {
  return h('a', { href: `#/jobs/${encodeURIComponent(id)}`, class: 'job-link' }, text || id);
}

// fill replaces el's children with children, as h takes them.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}
