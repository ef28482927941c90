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

// refill is fill for a view refreshed on a timer: the new children are
// merged into the old ones, so an element that did not change stays the node
// it was, and one whose tag and attributes did not change keeps its node
// while its children are merged the same way. A refresh then leaves in
// place the link or button a user is clicking (a click is a press and a
// release: a node swapped in between them receives neither), when only a
// count beside it moved. A kept element keeps its listeners, which were
// built from the same data (the same attributes and content).
export function refill(el, ...children) {
  const next = document.createDocumentFragment();
  append(next, children);
  merge(el, [...next.childNodes]);
}

function merge(el, want) {
  const have = [...el.childNodes];
  want.forEach((n, i) => {
    const o = have[i];
    if (!o) el.appendChild(n);
    else if (o.isEqualNode(n)) return;
    else if (o.nodeType === Node.ELEMENT_NODE && n.nodeType === Node.ELEMENT_NODE && o.tagName === n.tagName && sameAttributes(o, n)) merge(o, [...n.childNodes]);
    else el.replaceChild(n, o);
  });
  for (const o of have.slice(want.length)) el.removeChild(o);
}

function sameAttributes(a, b) {
  if (a.attributes.length !== b.attributes.length) return false;
  for (const { name, value } of a.attributes) {
    if (b.getAttribute(name) !== value) return false;
  }
  return true;
}
