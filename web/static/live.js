// LiveJobs keeps a list of jobs true as they change: one page of ListJobs,
// then WatchJobs from that page's watch_cursor (every change committed
// after the page was read), so nothing between the two is missed. The
// watch is not filtered by status, so a job leaving the filtered status is
// seen too; the pipeline filter is the server's.

import { call, watch } from './api.js';
import { ms, statusName } from './fmt.js';

export class LiveJobs {
  // status: a status name ('' any); pipeline ('' any); keep(job): rows that
  // stay although they no longer match (e.g. acted on in this view);
  // onPatch(patches): [{kind: 'insert'|'update'|'remove', id, job, before}]
  // after each batch; onState: the watch's state.
  constructor({ status = '', pipeline = '', pageSize = 100, keep = () => false, onPatch, onState }) {
    Object.assign(this, { status, pipeline, pageSize, keep, onPatch, onState });
    this.jobs = new Map();
    this.order = []; // ids, newest created first
    this.nextPageToken = '';
    this.queue = [];
    this.scheduled = false;
    this.stream = null;
  }

  query(extra) {
    const q = new URLSearchParams(extra);
    if (this.pipeline) q.set('pipeline', this.pipeline);
    return q;
  }

  // start loads the first page and starts the watch; it returns the page.
  async start() {
    const q = this.query({ page_size: String(this.pageSize) });
    if (this.status) q.set('status', `JOB_STATUS_${this.status}`);
    const page = await call('GET', `/v1/jobs?${q}`);
    for (const j of page.jobs || []) {
      this.jobs.set(j.id, j);
      this.order.push(j.id);
    }
    this.nextPageToken = page.next_page_token || '';
    this.stream = watch(`/v1/jobs:watch?${this.query({ after_cursor: page.watch_cursor || '' })}`, {
      onEvent: (c) => this.enqueue(c),
      onState: this.onState,
    });
    return page;
  }

  // more loads the next page (older jobs).
  async more() {
    if (!this.nextPageToken) return [];
    const q = this.query({ page_size: String(this.pageSize), page_token: this.nextPageToken });
    if (this.status) q.set('status', `JOB_STATUS_${this.status}`);
    const page = await call('GET', `/v1/jobs?${q}`);
    const added = [];
    for (const j of page.jobs || []) {
      if (this.jobs.has(j.id)) continue;
      this.jobs.set(j.id, j);
      this.order.push(j.id);
      added.push(j);
    }
    this.nextPageToken = page.next_page_token || '';
    return added;
  }

  close() { if (this.stream) this.stream.close(); }

  matches(job) {
    return (!this.status || statusName(job.status) === this.status) && (!this.pipeline || job.pipeline === this.pipeline);
  }

  // enqueue batches changes that arrive together into one DOM update.
  enqueue(change) {
    this.queue.push(change);
    if (!this.scheduled) {
      this.scheduled = true;
      setTimeout(() => this.flush(), 0);
    }
  }

  flush() {
    this.scheduled = false;
    const changes = this.queue;
    this.queue = [];
    const patches = [];
    for (const c of changes) {
      const p = this.apply(c.job);
      if (p) patches.push(p);
    }
    if (patches.length) this.onPatch(patches);
    document.dispatchEvent(new CustomEvent('oncejob:changes-applied', { detail: changes.map((c) => c.event) }));
  }

  // apply merges one changed job and says how the list changed.
  apply(job) {
    const before = this.jobs.get(job.id);
    if (before && ms(before.update_time) > ms(job.update_time)) return null; // an older snapshot
    if (before && job.output === undefined && before.output !== undefined && statusName(before.status) === statusName(job.status)) {
      job = { ...job, output: before.output }; // changes carry no output
    }
    if (!this.matches(job) && !this.keep(job)) {
      if (!before) return null;
      this.jobs.delete(job.id);
      this.order.splice(this.order.indexOf(job.id), 1);
      return { kind: 'remove', id: job.id, job, before };
    }
    this.jobs.set(job.id, job);
    if (before) return { kind: 'update', id: job.id, job, before };
    // A job this list has not loaded: in place by creation, unless it is
    // older than the loaded pages reach (the next page will bring it).
    const key = (j) => [ms(j.create_time), j.id];
    const newer = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
    const k = key(job);
    let i = 0;
    while (i < this.order.length && newer(key(this.jobs.get(this.order[i])), k)) i++;
    if (i === this.order.length && this.nextPageToken) {
      this.jobs.delete(job.id);
      return null;
    }
    this.order.splice(i, 0, job.id);
    return { kind: 'insert', id: job.id, job, index: i };
  }
}
