// Runs: every run with its progress, and a run's page with its failed
// items, a Replay button on each and a Retry-failures button for all. A
// run's progress is an aggregate re-read every second (the HTTP face has no
// route for WatchRun yet).

import { act, ApiError, call } from './api.js';
import { fill, h, jobLink, refill } from './dom.js';
import { statusBadge } from './jobs.js';
import { cost, jobTitle, num, seconds, time } from './fmt.js';

const refreshMs = 1000;

// poll calls load now and every refreshMs until the returned dispose.
function poll(load, setLive) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    try {
      await load();
      setLive('live');
    } catch (e) {
      setLive('failed', e instanceof ApiError ? e.problem : { title: 'network', detail: e.message });
    }
    if (!stopped) timer = setTimeout(tick, refreshMs);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

function state(run) { return (run.state || '').replace(/^RUN_STATE_/, ''); }

// bar is the run's progress: terminal items over all.
function bar(p) {
  const items = num(p.items);
  const done = num(p.succeeded) + num(p.failed) + num(p.dead_lettered) + num(p.cancelled);
  const pct = items ? Math.floor((100 * done) / items) : 0;
  const fillEl = h('div', { class: 'bar-fill' });
  fillEl.style.width = `${pct}%`; // CSSOM: the console's CSP allows no style attributes
  return h('div', { class: 'bar', title: `${done} of ${items} items terminal`, dataset: { pct } }, fillEl);
}

function left(p) {
  const d = p.estimated_time_left;
  if (!d) return '-';
  return `${Math.round(parseFloat(d))}s`;
}

// limitText is the provider limit the run's calls draw from: its pace,
// its use (calls in flight of every process, calls waiting in this
// server, 429s) and the time the items left need at its pace.
function limitText(p) {
  const l = p.limit;
  if (!l) return '-';
  const pace = [];
  if (l.requests_per_minute) pace.push(`${num(l.requests_per_minute)} requests/min`);
  if (l.tokens_per_minute) pace.push(`${num(l.tokens_per_minute)} tokens/min`);
  if (l.calls_in_flight_limit) pace.push(`${num(l.calls_in_flight_limit)} in flight`);
  const use = `${num(l.calls_in_flight)} in flight, ${num(l.waiting_calls)} waiting, ${num(l.rate_limited_calls)} 429s`;
  const leftAtLimit = p.limit_time_left ? `, ${Math.round(seconds(p.limit_time_left))}s left at this pace` : '';
  const paused = l.paused_until ? `, paused until ${time(l.paused_until)}` : '';
  return `${l.name}: ${pace.join(', ') || 'no limit known'} · ${use}${leftAtLimit}${paused}`;
}

function progressCells(p) {
  return [
    h('td', { class: 'num', dataset: { field: 'items' } }, num(p.items)),
    h('td', { class: 'num', dataset: { field: 'succeeded' } }, num(p.succeeded)),
    h('td', { class: 'num', dataset: { field: 'failed' } }, num(p.failed) + num(p.dead_lettered)),
    h('td', { class: 'num', dataset: { field: 'reused' } }, num(p.reused)),
    h('td', { class: 'num' }, `${(p.items_per_second || 0).toFixed(1)}/s`),
    h('td', { class: 'num' }, left(p)),
  ];
}

export function runsPage(main, setLive) {
  const body = h('tbody', { id: 'runs-body' });
  fill(main, h('h1', {}, 'Runs'),
    h('table', {}, h('thead', {}, h('tr', {}, ['Run', 'State', 'Progress', 'Items', 'Succeeded', 'Failed', 'Reused', 'Rate', 'Left', 'Created'].map((t) => h('th', {}, t)))), body),
    h('p', { class: 'muted', id: 'runs-empty', hidden: true }, 'No runs yet: oncejob run submit ITEMS.jsonl --run NAME'));
  return poll(async () => {
    const { runs = [] } = await call('GET', '/v1/runs?page_size=100');
    refill(body, runs.map((r) => h('tr', { dataset: { runId: r.id, state: state(r) } },
      h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(r.id)}`, class: 'run-link' }, r.name || r.id)),
      h('td', {}, state(r)), h('td', {}, bar(r.progress || {})), progressCells(r.progress || {}), h('td', {}, time(r.create_time)))));
    document.getElementById('runs-empty').hidden = runs.length > 0;
  }, setLive);
}

// batchRows are a run's provider batches: the provider's status, the run's
// lines in each (and those answered), their price class and cost.
function batchRows(batches) {
  return batches.map((b) => h('tr', { dataset: { batchId: b.batch_id, status: b.status } },
    h('td', { class: 'batch-id' }, b.batch_id),
    h('td', {}, h('span', { class: `status batch-${b.status}`, dataset: { field: 'batch-status' } }, (b.status || '').replace(/_/g, ' '))),
    h('td', { class: 'num', dataset: { field: 'lines' } }, num(b.lines)),
    h('td', { class: 'num', dataset: { field: 'answered' } }, num(b.answered_lines)),
    h('td', { dataset: { field: 'price-class' } }, b.price_class || ''),
    h('td', { class: 'num', dataset: { field: 'cost' } }, cost(b.cost_micros)),
    h('td', {}, time(b.create_time)), h('td', {}, time(b.expire_time))));
}

// runPage is one run: its progress, Retry failures, its provider batches
// and its failed items, each with Replay.
export function runPage(main, id, setLive) {
  const facts = h('dl', { class: 'facts', id: 'run-facts' });
  const failed = h('tbody', { id: 'failed-body' });
  const msg = h('span', { class: 'action-result', id: 'retry-result' });
  const retry = h('button', { type: 'button', id: 'retry-failures', onclick: async () => {
    retry.disabled = true;
    msg.textContent = '…';
    try {
      const r = await act('POST', `/v1/runs/${encodeURIComponent(id)}:retryFailures`, {});
      msg.textContent = `replayed ${num(r.replayed)} jobs`;
    } catch (e) {
      msg.textContent = e instanceof ApiError ? `refused: ${e.message}` : `failed: ${e.message}`;
    }
    retry.disabled = false;
  } }, 'Retry failures');
  const batches = h('tbody', { id: 'batches-body' });
  const batchSection = h('section', { id: 'run-batches', hidden: true }, h('h2', {}, 'Provider batches'),
    h('table', {}, h('thead', {}, h('tr', {}, ['Batch', 'Status', 'Lines', 'Answered', 'Price', 'Cost', 'Created', 'Expires'].map((t) => h('th', {}, t)))), batches),
    h('p', { class: 'muted', id: 'batches-empty' }, 'No batch sent yet.'));
  fill(main, h('h1', { id: 'run-title' }, 'Run'), facts, h('div', { class: 'actions' }, retry, msg),
    batchSection,
    h('h2', {}, 'Failed items'),
    h('table', {}, h('thead', {}, h('tr', {}, ['Job', 'Status', 'Last error', 'Attempt', ''].map((t) => h('th', {}, t)))), failed),
    h('p', { class: 'muted', id: 'failed-empty' }, 'No failed items.'));
  const acted = new Map(); // job id -> its Replay outcome, kept across refreshes

  function replayButton(job) {
    const b = h('button', { type: 'button', dataset: { action: 'replay' }, onclick: async () => {
      b.disabled = true;
      acted.set(job.id, '…');
      try {
        await act('POST', `/v1/jobs/${encodeURIComponent(job.id)}:replay`, {});
        acted.set(job.id, 'Replay: done');
      } catch (e) {
        acted.set(job.id, `refused: ${e.message}`);
      }
    } }, 'Replay');
    return b;
  }

  return poll(async () => {
    const [{ run }, dead, fail, { batches: sent = [] }] = await Promise.all([
      call('GET', `/v1/runs/${encodeURIComponent(id)}`),
      call('GET', `/v1/jobs?run_id=${encodeURIComponent(id)}&status=JOB_STATUS_DEAD_LETTERED&page_size=100`),
      call('GET', `/v1/jobs?run_id=${encodeURIComponent(id)}&status=JOB_STATUS_FAILED&page_size=100`),
      call('GET', `/v1/runs/${encodeURIComponent(id)}/batches`),
    ]);
    const p = run.progress || {};
    batchSection.hidden = !run.provider_batch && sent.length === 0;
    refill(batches, batchRows(sent));
    document.getElementById('batches-empty').hidden = sent.length > 0;
    document.getElementById('run-title').textContent = `Run ${run.name || run.id}`;
    refill(facts,
      h('dt', {}, 'State'), h('dd', { dataset: { field: 'state' } }, state(run)),
      h('dt', {}, 'Progress'), h('dd', {}, bar(p)),
      h('dt', {}, 'Items'), h('dd', { dataset: { field: 'items' } }, num(p.items)),
      h('dt', {}, 'Succeeded'), h('dd', { dataset: { field: 'succeeded' } }, num(p.succeeded)),
      h('dt', {}, 'Failed'), h('dd', { dataset: { field: 'failed' } }, num(p.failed) + num(p.dead_lettered)),
      h('dt', {}, 'Running, waiting'), h('dd', {}, num(p.queued) + num(p.running) + num(p.retry_wait) + num(p.awaiting_approval) + num(p.outcome_unknown)),
      h('dt', {}, 'Reused'), h('dd', { dataset: { field: 'reused' } }, num(p.reused)),
      h('dt', {}, 'Rate, left'), h('dd', {}, `${(p.items_per_second || 0).toFixed(1)}/s, ${left(p)}`),
      h('dt', {}, 'Provider limit'), h('dd', { dataset: { field: 'limit' } }, limitText(p)),
      h('dt', {}, 'Cost'), h('dd', {}, `${num(p.usage?.llm_calls)} calls, ${cost(p.usage?.cost_micros)}`),
      h('dt', {}, 'Pipeline'), h('dd', {}, run.pipeline || '-'),
      h('dt', {}, 'Provider batch'), h('dd', { dataset: { field: 'provider-batch' } }, run.provider_batch
        ? (p.provider_batch_window ? `yes, waiting on batches (window ${Math.round(parseFloat(p.provider_batch_window) / 3600)} h)` : 'yes')
        : 'no'),
      h('dt', {}, 'Created'), h('dd', {}, time(run.create_time)));
    const jobs = [...(dead.jobs || []), ...(fail.jobs || [])];
    // A replayed job stays listed with its live status, so the click shows where it went.
    const shown = new Set(jobs.map((j) => j.id));
    const kept = await Promise.all([...acted.keys()].filter((k) => !shown.has(k)).map((k) => call('GET', `/v1/jobs/${encodeURIComponent(k)}`).then((r) => r.job)));
    refill(failed, [...jobs, ...kept].map((j) => h('tr', { dataset: { jobId: j.id } },
      h('td', {}, jobLink(j.id, jobTitle(j))), h('td', { class: 'status-cell' }, statusBadge(j.status)),
      h('td', { class: 'last-error' }, j.error ? `${j.error.code}: ${j.error.message}` : ''), h('td', { class: 'num' }, j.attempt || 0),
      h('td', {}, acted.has(j.id) ? h('span', { class: 'action-result' }, acted.get(j.id)) : replayButton(j)))));
    document.getElementById('failed-empty').hidden = jobs.length + kept.length > 0;
  }, setLive);
}
