// The operator queues: dead letters (replay), approvals (approve or
// reject) and unknown outcomes (resolve). Each is a live list of the jobs
// in one status; a job acted on here stays on screen with its live status,
// so the operator sees where it went.

import { act, ApiError, call } from './api.js';
import { fill, h, jobLink } from './dom.js';
import { LiveJobs } from './live.js';
import { statusBadge } from './jobs.js';
import { stageSelect } from './job.js';
import { cost, json, jobTitle, num, stageName, time } from './fmt.js';

function queuePage(main, setLive, { title, status, empty, item }) {
  const list = h('div', { class: 'queue', id: 'queue', dataset: { status } });
  const none = h('p', { class: 'muted', id: 'queue-empty' }, empty);
  fill(main, h('h1', {}, title), none, list);
  const acted = new Set();
  const cards = new Map();
  const live = new LiveJobs({
    status, keep: (j) => acted.has(j.id), onState: setLive,
    onPatch: (patches) => {
      for (const p of patches) {
        const old = cards.get(p.id);
        if (p.kind === 'remove') { old?.remove(); cards.delete(p.id); continue; }
        if (old) { old.update(p.job); continue; }
        const card = makeCard(p.job);
        list.insertBefore(card.el, list.children[p.index] || null);
      }
      none.hidden = cards.size > 0;
    },
  });

  function makeCard(job) {
    const card = item(job, () => acted.add(job.id), live);
    card.el.dataset.jobId = job.id;
    cards.set(job.id, { remove: () => card.el.remove(), update: card.update });
    return card;
  }

  (async () => {
    await live.start();
    for (const id of live.order) list.appendChild(makeCard(live.jobs.get(id)).el);
    none.hidden = cards.size > 0;
  })().catch((e) => main.appendChild(h('p', { class: 'error' }, `Cannot load: ${e.message}`)));
  return () => live.close();
}

// actionRow is the reason, the buttons and the outcome of one card.
function actionRow(job, markActed, buttons) {
  const reason = h('input', { class: 'reason', placeholder: 'reason (optional)', maxlength: 500 });
  const msg = h('span', { class: 'action-result' });
  const els = buttons.map(([label, action, path, body]) => h('button', {
    type: 'button', dataset: { action },
    onclick: async () => {
      els.forEach((b) => { b.disabled = true; });
      msg.textContent = '…';
      markActed(); // keep it on screen, whatever its status becomes
      try {
        await act('POST', `/v1/jobs/${encodeURIComponent(job.id)}:${path}`, { ...body(), reason: reason.value });
        msg.textContent = `${label}: done`;
      } catch (e) {
        msg.textContent = e instanceof ApiError ? `refused: ${e.message}` : `failed: ${e.message}`;
        els.forEach((b) => { b.disabled = false; });
      }
    },
  }, label));
  return h('div', { class: 'actions' }, reason, els, msg);
}

function header(job) {
  return h('div', { class: 'card-head' }, jobLink(job.id, jobTitle(job)), ' ', h('span', { class: 'muted' }, job.pipeline), ' ',
    h('span', { class: 'status-cell' }, statusBadge(job.status)));
}

function errorLine(job) {
  return job.error ? h('p', { class: 'last-error' }, h('code', {}, job.error.code || ''), ' ', job.error.message || '') : h('p', { class: 'muted' }, 'no error recorded');
}

export function deadLettersPage(main, setLive) {
  return queuePage(main, setLive, {
    title: 'Dead letters', status: 'DEAD_LETTERED', empty: 'No dead-lettered jobs.',
    item: (job, markActed) => {
      const head = h('div', {}, header(job));
      const err = h('div', {}, errorLine(job));
      const meta = h('p', { class: 'muted' });
      const from = stageSelect();
      const update = (j) => {
        fill(head, header(j));
        fill(err, errorLine(j));
        meta.textContent = `attempt ${j.attempt || 0} · stage ${stageName(j.stage)} · updated ${time(j.update_time)}`;
      };
      update(job);
      const el = h('article', { class: 'card' }, head, err, meta,
        h('div', { class: 'row' }, h('label', {}, 'Replay from ', from)),
        actionRow(job, markActed, [['Replay', 'replay', 'replay', () => (from.value ? { from_stage: from.value } : {})]]));
      return { el, update };
    },
  });
}

export function approvalsPage(main, setLive) {
  return queuePage(main, setLive, {
    title: 'Approvals', status: 'AWAITING_APPROVAL', empty: 'Nothing awaits approval.',
    item: (job, markActed) => {
      const head = h('div', {}, header(job));
      const facts = h('dl', { class: 'facts' });
      const plan = h('pre', { class: 'output plan' });
      const update = (j) => {
        fill(head, header(j));
        fill(facts,
          h('dt', {}, 'Document'), h('dd', {}, `${j.document_name || '(unnamed)'} · ${num(j.document_size_bytes)} bytes`),
          h('dt', {}, 'Model profile'), h('dd', {}, j.model_profile || ''),
          h('dt', {}, 'Cost so far'), h('dd', {}, cost(j.usage?.cost_micros)),
          h('dt', {}, 'Created'), h('dd', {}, time(j.create_time)));
        if (j.output !== undefined) plan.textContent = json(j.output);
      };
      update(job);
      if (job.output === undefined) {
        plan.textContent = 'loading the planned output…';
        call('GET', `/v1/jobs/${encodeURIComponent(job.id)}`).then((r) => { if (r.job.output !== undefined) plan.textContent = json(r.job.output); },
          (e) => { plan.textContent = `cannot load: ${e.message}`; });
      }
      const el = h('article', { class: 'card approval' }, head,
        h('div', { class: 'side-by-side' }, h('div', {}, h('h3', {}, 'Job'), facts), h('div', {}, h('h3', {}, 'Planned output'), plan)),
        actionRow(job, markActed, [['Approve', 'approve', 'approve', () => ({ approve: true })], ['Reject', 'reject', 'approve', () => ({ approve: false })]]));
      return { el, update };
    },
  });
}

export function unknownPage(main, setLive) {
  return queuePage(main, setLive, {
    title: 'Unknown outcomes', status: 'OUTCOME_UNKNOWN', empty: 'No job waits on an unknown outcome.',
    item: (job, markActed) => {
      const head = h('div', {}, header(job));
      const err = h('div', {}, errorLine(job));
      const update = (j) => { fill(head, header(j)); fill(err, errorLine(j)); };
      update(job);
      const el = h('article', { class: 'card' }, head, err,
        h('p', { class: 'muted' }, 'A provider call may or may not have happened. Retry reuses its provider key (a finished call is not billed twice); fail ends the job.'),
        actionRow(job, markActed, [
          ['Resolve: retry', 'resolve-retry', 'resolve', () => ({ resolution: 'RESOLUTION_RETRY' })],
          ['Resolve: fail', 'resolve-fail', 'resolve', () => ({ resolution: 'RESOLUTION_FAIL' })]]));
      return { el, update };
    },
  });
}

