// A job's page: its event timeline as it happens (WatchJob), stages with
// their cost and whether they were reused, the LLM attempt journal,
// output, error, usage, deliveries, and the operator actions its status
// allows.

import { act, ApiError, call, watch } from './api.js';
import { fill, h, jobLink } from './dom.js';
import { statusBadge } from './jobs.js';
import { cost, json, jobTitle, num, outcomeName, priorityName, stageName, stages, statusName, terminal, time, untilText } from './fmt.js';

export function jobPage(main, id, setLive) {
  const summary = h('section', { id: 'job-summary' });
  const actions = h('section', { id: 'job-actions', class: 'actions' });
  const timeline = h('ol', { id: 'timeline', class: 'timeline' });
  const detail = h('section', { id: 'job-detail' });
  const deliveries = h('section', { id: 'deliveries' });
  fill(main,
    h('p', {}, h('a', { href: '#/jobs' }, '← Jobs')),
    summary, actions,
    h('div', { class: 'columns' },
      h('section', {}, h('h2', {}, 'Timeline'), timeline),
      detail),
    deliveries);

  let lastSeq = '';
  let stream = null;
  let disposed = false;
  let job = null;

  function startWatch() {
    if (stream) stream.close();
    stream = watch(`/v1/jobs/${encodeURIComponent(id)}:watch`, {
      lastEventId: lastSeq,
      onState: setLive,
      onEvent: (r, seq) => {
        lastSeq = seq;
        const e = r.event;
        timeline.appendChild(h('li', { dataset: { seq: String(e.seq), status: statusName(e.status) } },
          h('span', { class: 'seq' }, `#${e.seq}`), ' ', statusBadge(e.status), ' ',
          h('span', { class: 'stage' }, stageName(e.stage)), ' ',
          h('span', { class: 'muted' }, `attempt ${e.attempt || 0} · ${time(e.time)}`),
          e.message ? h('div', { class: 'message' }, e.message) : null,
          e.next_attempt_time ? h('div', { class: 'next-try' }, `next try ${time(e.next_attempt_time)}`) : null));
        refresh();
      },
      onEnd: () => setLive('ended'),
    });
  }

  let refreshTimer = null;
  let refreshAgain = false;
  function refresh() {
    if (refreshTimer) { refreshAgain = true; return; }
    load();
    refreshTimer = setTimeout(() => { refreshTimer = null; if (refreshAgain) { refreshAgain = false; refresh(); } }, 300);
  }

  async function load() {
    try {
      const r = await call('GET', `/v1/jobs/${encodeURIComponent(id)}?view=JOB_VIEW_FULL`);
      if (disposed) return;
      job = r.job;
      render(job);
      loadDeliveries();
    } catch (e) {
      fill(summary, h('p', { class: 'error' }, `Cannot load job ${id}: ${e.message}`));
    }
  }

  function render(j) {
    fill(summary,
      h('h1', {}, jobTitle(j), ' ', statusBadge(j.status)),
      h('dl', { class: 'facts' },
        fact('Job id', j.id), fact('Pipeline', `${j.pipeline} v${j.pipeline_version || 0}`),
        fact('Prompt version', j.prompt_version), fact('Model profile', j.model_profile),
        fact('Stage', stageName(j.stage)), fact('Attempt', String(j.attempt || 0)),
        fact('Attempts spent', h('span', { id: 'job-attempts-spent' }, String(j.attempts_spent || 0))),
        j.next_attempt_time ? fact('Next try', h('span', { id: 'job-next-try' }, `${time(j.next_attempt_time)} (${untilText(j.next_attempt_time)})`,
          j.error?.code === 'PROVIDER_LIMIT_WAIT' ? ' · waiting for the provider limit' : '')) : null,
        fact('Priority', priorityName(j.priority)),
        j.run_id ? fact('Run', h('a', { href: `#/runs/${encodeURIComponent(j.run_id)}` }, j.run_id)) : null,
        fact('Document', `${j.document_name || '(unnamed)'} · ${j.document_media_type || ''} · ${num(j.document_size_bytes)} bytes`),
        fact('Idempotency key', j.idempotency_key), fact('Dedup key', j.dedup_key),
        j.deduplicated_from ? fact('Deduplicated from', jobLink(j.deduplicated_from)) : null,
        fact('Created', time(j.create_time)), fact('Updated', time(j.update_time)),
        j.finish_time ? fact('Finished', time(j.finish_time)) : null,
        fact('Usage', `${num(j.usage?.prompt_tokens)} prompt + ${num(j.usage?.completion_tokens)} completion tokens · ${j.usage?.llm_calls || 0} billed calls · cost ${cost(j.usage?.cost_micros)}`),
        j.labels ? fact('Labels', json(j.labels)) : null,
        j.params ? fact('Params', json(j.params)) : null));
    renderActions(j);
    const attempts = j.llm_attempts || [];
    const stageCost = new Map();
    for (const a of attempts) {
      if (!a.billed) continue;
      const k = `${stageName(a.stage)}/${a.chunk || 0}`;
      stageCost.set(k, (stageCost.get(k) || 0) + num(a.cost_micros));
    }
    fill(detail,
      j.error ? h('section', { class: 'job-error', id: 'job-error' }, h('h2', {}, 'Error'),
        h('p', {}, h('code', {}, j.error.code || ''), ' ', j.error.message || '', j.error.retryable ? ' (retryable)' : '')) : null,
      h('h2', {}, 'Output'),
      j.output ? h('pre', { class: 'output', id: 'job-output' }, json(j.output)) : h('p', { class: 'muted' }, 'No output yet.'),
      h('h2', {}, 'Stages'),
      table(['Stage', 'Chunk', 'Result', 'Cost', 'Attempt', 'Code', 'Stage key', 'Size', 'At'], (j.checkpoints || []).map((c) => {
        const chunk = c.chunk === undefined ? 0 : c.chunk;
        return [stageName(c.stage), chunk < 0 ? 'all' : String(chunk),
          c.reused_from_job_id ? h('span', {}, 'reused from ', jobLink(c.reused_from_job_id)) : 'computed',
          cost(stageCost.get(`${stageName(c.stage)}/${chunk}`) || 0), String(c.attempt || 0), c.code_version || '',
          h('code', { title: c.stage_key }, (c.stage_key || '').slice(0, 24) + '…'), String(num(c.output_size_bytes)), time(c.create_time)];
      }), 'stages'),
      h('h2', {}, 'LLM attempts'),
      table(['At', 'Attempt', 'Stage', 'Provider key', 'Model', 'Outcome', 'Billed', 'Tokens', 'Cost', 'Latency', 'Request id', 'Error'], attempts.map((a) => [
        time(a.create_time), String(a.job_attempt || 0), `${stageName(a.stage)}/${a.chunk || 0}`, h('code', {}, a.provider_key || ''),
        a.model || '', h('span', { class: `outcome oc-${outcomeName(a.outcome)}` }, outcomeName(a.outcome)), a.billed ? 'yes' : 'no',
        `${num(a.prompt_tokens)} + ${num(a.completion_tokens)}`, cost(a.cost_micros), `${num(a.latency_ms)} ms`,
        a.provider_request_id || '', a.error || '']), 'attempts'));
  }

  function renderActions(j) {
    const s = statusName(j.status);
    const reason = h('input', { class: 'reason', placeholder: 'reason (optional)', maxlength: 500 });
    const msg = h('span', { class: 'action-result' });
    const run = (method, path, body) => async () => {
      msg.textContent = '…';
      try {
        await act(method, path, { ...body, reason: reason.value });
        msg.textContent = 'done';
        startWatch(); // a replayed or approved job moves on after its stream ended
        refresh();
      } catch (e) {
        msg.textContent = e instanceof ApiError ? `refused: ${e.message}` : `failed: ${e.message}`;
      }
    };
    const path = (verb) => `/v1/jobs/${encodeURIComponent(j.id)}:${verb}`;
    const buttons = [];
    if (s === 'FAILED' || s === 'DEAD_LETTERED') {
      const from = stageSelect();
      buttons.push(h('label', {}, 'from ', from),
        h('button', { type: 'button', dataset: { action: 'replay' }, onclick: () => run('POST', path('replay'), from.value ? { from_stage: from.value } : {})() }, 'Replay'));
    }
    if (s === 'AWAITING_APPROVAL') {
      buttons.push(h('button', { type: 'button', dataset: { action: 'approve' }, onclick: run('POST', path('approve'), { approve: true }) }, 'Approve'),
        h('button', { type: 'button', dataset: { action: 'reject' }, onclick: run('POST', path('approve'), { approve: false }) }, 'Reject'));
    }
    if (s === 'OUTCOME_UNKNOWN') {
      buttons.push(h('button', { type: 'button', dataset: { action: 'resolve-retry' }, onclick: run('POST', path('resolve'), { resolution: 'RESOLUTION_RETRY' }) }, 'Resolve: retry'),
        h('button', { type: 'button', dataset: { action: 'resolve-fail' }, onclick: run('POST', path('resolve'), { resolution: 'RESOLUTION_FAIL' }) }, 'Resolve: fail'));
    }
    if (!terminal(j.status)) {
      buttons.push(h('button', { type: 'button', dataset: { action: 'cancel' }, onclick: run('POST', path('cancel'), {}) }, 'Cancel'));
    }
    fill(actions, buttons.length ? [reason, ...buttons, msg] : []);
  }

  // Deliveries of the job's events to the tenant's sinks (DeliveryService):
  // re-read with the job, since a transition announces events, and every
  // second while one is pending (a relay, not the job, moves it).
  let deliveriesTimer = null;
  async function loadDeliveries() {
    clearTimeout(deliveriesTimer);
    try {
      const r = await call('GET', `/v1/deliveries?${new URLSearchParams({ job_id: id, include_attempts: 'true', page_size: '100' })}`);
      if (disposed) return;
      const list = r.deliveries || [];
      fill(deliveries, h('h2', {}, 'Deliveries'),
        list.length ? table(['Event', 'Sink', 'Status', 'Attempts', 'Last outcome', 'Reference', 'Error', 'Updated', ''],
          list.map((d) => [h('code', {}, d.event_id || ''), d.sink || '',
            h('span', { class: `status dl-${deliveryStatus(d.status)}` }, deliveryStatus(d.status)), String(d.attempts || 0),
            (d.last_outcome || '').replace(/^DELIVERY_OUTCOME_/, ''), d.external_ref || '', d.last_error || '', time(d.update_time),
            deliveryStatus(d.status) === 'DEAD_LETTERED' ? retryButton(d) : '']), 'deliveries-table')
          : h('p', { class: 'muted' }, 'No deliveries: no sink of this tenant is subscribed to its events, or none was announced yet.'),
        (r.disabled_sinks || []).map((x) => h('p', { class: 'error' }, `Sink ${x.sink} is disabled since ${time(x.disable_time)}: ${x.reason || ''}`)));
      if (list.some((d) => deliveryStatus(d.status) === 'PENDING')) deliveriesTimer = setTimeout(loadDeliveries, 1000);
    } catch (e) {
      fill(deliveries, h('h2', {}, 'Deliveries'), h('p', { class: 'muted' }, e instanceof ApiError && e.status === 501
        ? 'This server keeps no deliveries (its store has no relay).' : `Cannot load deliveries: ${e.message}`));
    }
  }

  // RetryDelivery needs no idempotency key: only a dead-lettered delivery
  // moves, so a repeated click queues nothing again.
  function retryButton(d) {
    const b = h('button', { type: 'button', dataset: { action: 'retry-delivery' }, onclick: async () => {
      b.disabled = true;
      try {
        await call('POST', `/v1/deliveries/${encodeURIComponent(d.id)}:retry`, { body: {} });
      } catch (e) {
        b.replaceWith(h('span', { class: 'error' }, `refused: ${e.message}`));
        return;
      }
      loadDeliveries();
    } }, 'Retry');
    return b;
  }

  load();
  startWatch();
  return () => { disposed = true; if (stream) stream.close(); clearTimeout(refreshTimer); clearTimeout(deliveriesTimer); };
}

export function stageSelect() {
  return h('select', { class: 'from-stage' },
    h('option', { value: '' }, 'last checkpoint'),
    stages.filter((s) => s !== 'PUBLISHED').map((s) => h('option', { value: `JOB_STAGE_${s}` }, s)));
}

const deliveryStatus = (s) => (s || '').replace(/^DELIVERY_STATUS_/, '') || '-';

function fact(name, value) {
  return [h('dt', {}, name), h('dd', {}, value === undefined || value === null || value === '' ? '-' : value)];
}

function table(head, rows, id) {
  if (!rows.length) return h('p', { class: 'muted', id }, 'None yet.');
  return h('table', { id, class: 'detail' },
    h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}
