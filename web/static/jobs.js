// The jobs page: a live list with status and pipeline filters, counts per
// status, and a submit form.
//
// The counts follow the stream the rows follow: a change that moves a row
// moves its count at once (the row's status before and after), and the
// counts are read again after the change (at most once a second, the last
// answer asked for wins) to take in what the loaded rows do not show. They
// are first read after the list, so a change between the two is never
// lost: it comes through the watch, which starts at the list's cursor.

import { act, call } from './api.js';
import { fill, h, jobLink } from './dom.js';
import { LiveJobs } from './live.js';
import { jobTitle, stageName, statusName, statuses, time } from './fmt.js';

export function statusBadge(s) {
  const name = statusName(s);
  return h('span', { class: `status st-${name}` }, name);
}

function jobRow(job) {
  return h('tr', { dataset: { jobId: job.id, status: statusName(job.status) } },
    h('td', {}, jobLink(job.id, jobTitle(job))),
    h('td', {}, job.pipeline || ''),
    h('td', { class: 'status-cell' }, statusBadge(job.status)),
    h('td', {}, stageName(job.stage)),
    h('td', { class: 'num' }, String(job.attempt || 0)),
    h('td', {}, time(job.update_time)),
    h('td', {}, time(job.create_time)));
}

export function jobsPage(main, params, setLive) {
  const status = (params.get('status') || '').toUpperCase();
  const pipeline = params.get('pipeline') || '';
  const go = (s, p) => {
    const q = new URLSearchParams();
    if (s) q.set('status', s);
    if (p) q.set('pipeline', p);
    location.hash = `#/jobs${q.toString() ? `?${q}` : ''}`;
  };

  const statusSelect = h('select', { id: 'filter-status', onchange: () => go(statusSelect.value, pipelineInput.value.trim()) },
    h('option', { value: '' }, 'any status'),
    statuses.map((s) => h('option', { value: s, selected: s === status }, s)));
  const pipelineInput = h('input', { id: 'filter-pipeline', placeholder: 'any pipeline', value: pipeline });
  const filters = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); go(statusSelect.value, pipelineInput.value.trim()); } },
    h('label', {}, 'Status ', statusSelect), h('label', {}, 'Pipeline ', pipelineInput), h('button', { type: 'submit' }, 'Filter'));
  const counts = h('div', { class: 'counts', id: 'counts' });
  const tbody = h('tbody', { id: 'jobs-body' });
  const table = h('table', { class: 'jobs', id: 'jobs' },
    h('thead', {}, h('tr', {}, ['Job', 'Pipeline', 'Status', 'Stage', 'Attempt', 'Updated', 'Created'].map((c) => h('th', {}, c)))),
    tbody);
  const empty = h('p', { class: 'muted', id: 'jobs-empty', hidden: true }, 'No jobs yet.');
  const moreButton = h('button', { type: 'button', hidden: true, onclick: () => more() }, 'Load older jobs');
  fill(main, h('h1', {}, 'Jobs'), submitForm(), filters, counts, table, empty, moreButton);

  const rows = new Map();
  const live = new LiveJobs({
    status, pipeline,
    onState: setLive,
    onPatch: (patches) => {
      for (const p of patches) {
        const old = rows.get(p.id);
        if (p.kind === 'remove') { old?.remove(); rows.delete(p.id); continue; }
        const row = jobRow(p.job);
        rows.set(p.id, row);
        if (old) old.replaceWith(row);
        else tbody.insertBefore(row, tbody.children[p.index] || null);
      }
      empty.hidden = rows.size > 0;
      changes++;
      moveCounts(patches);
      refreshCounts();
    },
  });

  // tally is what the chips show: jobs per status and in all.
  let tally = null;
  function renderCounts() {
    if (!tally) return;
    fill(counts,
      h('a', { href: '#/jobs', class: `count${status ? '' : ' active'}`, dataset: { status: 'ALL' } }, 'all ', h('b', {}, String(tally.total))),
      statuses.map((s) => h('a', {
        href: `#/jobs?${new URLSearchParams({ status: s, ...(pipeline ? { pipeline } : {}) })}`,
        class: `count st-${s}${s === status ? ' active' : ''}${tally.by[s] ? '' : ' zero'}`, dataset: { status: s },
      }, `${s} `, h('b', {}, String(tally.by[s] || 0)))));
  }
  // moveCounts moves the counts as the rows moved: a new row adds one to
  // its status, a row that changed status moves one from the old to the
  // new.
  function moveCounts(patches) {
    if (!tally) return;
    for (const p of patches) {
      const now = statusName(p.job.status);
      if (p.kind === 'insert') {
        if (status) continue; // a job that came into the filter: from where, the next read says
        tally.by[now] = (tally.by[now] || 0) + 1;
        tally.total++;
        continue;
      }
      const was = statusName(p.before?.status);
      if (!p.before || was === now) continue;
      tally.by[was] = Math.max(0, (tally.by[was] || 0) - 1);
      tally.by[now] = (tally.by[now] || 0) + 1;
    }
    renderCounts();
  }

  let countTimer = null;
  let countAgain = false;
  let countAsked = 0; // the latest request; an older answer is stale
  let changes = 0; // changes the rows took; one during a read makes it stale
  async function loadCounts() {
    const q = new URLSearchParams();
    if (pipeline) q.set('pipeline', pipeline);
    const asked = ++countAsked;
    const seen = changes;
    try {
      const r = await call('GET', `/v1/jobs:count?${q}`);
      if (asked !== countAsked) return; // a later read was asked for: it wins
      if (seen !== changes) {
        // A change came while the read was in flight: the answer may
        // predate it (and overwrite its move) or hold it (and the move
        // counts it twice). The moved tally stays; a read after it decides.
        countAgain = true;
        if (!countTimer) refreshCounts();
        return;
      }
      tally = { total: Number(r.total || 0), by: Object.fromEntries((r.counts || []).map((c) => [statusName(c.status), Number(c.count)])) };
      renderCounts();
    } catch (_) { /* counts are secondary; the next change retries */ }
  }
  // Counts are re-read at most once a second while changes flow.
  function refreshCounts() {
    if (countTimer) { countAgain = true; return; }
    loadCounts();
    countTimer = setTimeout(() => { countTimer = null; if (countAgain) { countAgain = false; refreshCounts(); } }, 1000);
  }

  async function more() {
    const added = await live.more();
    for (const j of added) { const r = jobRow(j); rows.set(j.id, r); tbody.appendChild(r); }
    moreButton.hidden = !live.nextPageToken;
  }

  (async () => {
    await live.start();
    // After the list: every change after its cursor comes through the
    // watch, so these counts miss nothing the rows show.
    const counted = loadCounts();
    const frag = document.createDocumentFragment();
    for (const id of live.order) { const r = jobRow(live.jobs.get(id)); rows.set(id, r); frag.appendChild(r); }
    fill(tbody, frag);
    empty.hidden = rows.size > 0;
    moreButton.hidden = !live.nextPageToken;
    await counted;
    performance.mark('oncejob:jobs-rendered');
  })().catch((e) => main.appendChild(h('p', { class: 'error' }, `Cannot load jobs: ${e.message}`)));

  return () => { live.close(); clearTimeout(countTimer); };
}

// submitForm submits a pasted text or a file; one idempotency key per
// click, reused if the request is retried.
function submitForm() {
  const pipeline = h('input', { name: 'pipeline', value: 'summarize', required: true, size: 14 });
  const name = h('input', { name: 'name', placeholder: 'document name' });
  const text = h('textarea', { name: 'text', rows: 3, placeholder: 'Paste a document…' });
  const file = h('input', { type: 'file', name: 'file' });
  const out = h('span', { class: 'muted' });
  const form = h('form', { class: 'submit', id: 'submit-form', onsubmit: async (e) => {
    e.preventDefault();
    const doc = { name: name.value };
    if (file.files.length) {
      const f = file.files[0];
      const bytes = new Uint8Array(await f.arrayBuffer());
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      doc.data = btoa(bin);
      doc.media_type = f.type || 'text/plain';
      if (!doc.name) doc.name = f.name;
    } else {
      doc.text = text.value;
    }
    out.textContent = 'submitting…';
    try {
      const r = await act('POST', '/v1/jobs', { pipeline: pipeline.value.trim(), document: doc });
      fill(out, 'submitted ', jobLink(r.job.id, jobTitle(r.job)));
      text.value = '';
      file.value = '';
    } catch (err) {
      out.textContent = `refused: ${err.message}`;
    }
  } },
  h('details', {}, h('summary', {}, 'Submit a document'),
    h('div', { class: 'row' }, h('label', {}, 'Pipeline ', pipeline), h('label', {}, 'Name ', name), h('label', {}, 'File ', file)),
    text, h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Submit'), out)));
  return form;
}
