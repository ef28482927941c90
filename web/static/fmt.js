// Formatting of API values for display. int64 fields arrive as strings.

export const statuses = ['QUEUED', 'RUNNING', 'RETRY_WAIT', 'AWAITING_APPROVAL', 'OUTCOME_UNKNOWN',
  'SUCCEEDED', 'FAILED', 'CANCELLED', 'DEAD_LETTERED'];
export const stages = ['UPLOADED', 'TEXT_EXTRACTED', 'CHUNKS_READY', 'LLM_DONE', 'VALIDATED', 'PUBLISHED'];

export const statusName = (s) => (s || '').replace(/^JOB_STATUS_/, '') || 'UNSPECIFIED';
export const stageName = (s) => (s || '').replace(/^JOB_STAGE_/, '') || '-';
export const outcomeName = (s) => (s || '').replace(/^LLM_OUTCOME_/, '') || '-';
export const priorityName = (s) => (s || '').replace(/^PRIORITY_/, '').toLowerCase() || 'interactive';
// untilText is how long until ts, e.g. "in 12s"; "due" once it passed.
export const untilText = (ts) => {
  const s = Math.round((Date.parse(ts) - Date.now()) / 1000);
  return s > 0 ? `in ${s}s` : 'due';
};
// seconds is a google.protobuf.Duration's JSON ("12.5s") as a number.
export const seconds = (d) => (d ? parseFloat(d) : 0);
export const num = (x) => Number(x || 0);
export const cost = (micros) => (num(micros) / 1e6).toFixed(6);
export const time = (ts) => (ts ? new Date(ts).toLocaleString() : '');
export const ms = (ts) => (ts ? Date.parse(ts) : 0);
export const terminal = (s) => ['SUCCEEDED', 'FAILED', 'CANCELLED', 'DEAD_LETTERED'].includes(statusName(s));
// jobTitle names a job by its document: the document's name, or for an
// unnamed one (pasted text, a run's item) its kind and size and the job
// id's first part - never the bare id alone (issue 30).
export const jobTitle = (j) => j.document_name ||
  `(unnamed ${j.document_media_type || 'document'}, ${num(j.document_size_bytes)} bytes) ${String(j.id || '').slice(0, 8)}`;
export const json = (v) => JSON.stringify(v, null, 2);
