// The console's entry point: hash routes, the API key prompt, the live
// indicator.

import { forgetApiKey, setApiKey, setUnauthenticatedHandler, apiKey } from './api.js';
import { jobsPage } from './jobs.js';
import { jobPage } from './job.js';
import { approvalsPage, deadLettersPage, unknownPage } from './queues.js';
import { runPage, runsPage } from './runs.js';

const main = document.getElementById('main');
const liveEl = document.getElementById('live');
const authDialog = document.getElementById('auth');
const authForm = document.getElementById('auth-form');
const authKey = document.getElementById('auth-key');
const authError = document.getElementById('auth-error');
const signout = document.getElementById('signout');

let dispose = () => {};

function setLive(state, problem) {
  liveEl.textContent = state;
  liveEl.className = `live live-${state}`;
  liveEl.title = problem ? `${problem.title || ''}: ${problem.detail || ''}` : 'live updates';
}

function route() {
  dispose();
  dispose = () => {};
  setLive('connecting');
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean);
  const section = parts[0] || 'jobs';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.nav === section);
  if (section === 'jobs' && parts[1]) dispose = jobPage(main, decodeURIComponent(parts[1]), setLive);
  else if (section === 'runs' && parts[1]) dispose = runPage(main, decodeURIComponent(parts[1]), setLive);
  else if (section === 'runs') dispose = runsPage(main, setLive);
  else if (section === 'dead-letters') dispose = deadLettersPage(main, setLive);
  else if (section === 'approvals') dispose = approvalsPage(main, setLive);
  else if (section === 'unknown') dispose = unknownPage(main, setLive);
  else dispose = jobsPage(main, params, setLive);
}

// The server refused the key, or there is none and it is not in dev mode.
setUnauthenticatedHandler(() => {
  if (authDialog.open) return;
  dispose();
  dispose = () => {};
  authError.hidden = !apiKey();
  authError.textContent = apiKey() ? 'The server refused this key.' : '';
  forgetApiKey();
  authKey.value = '';
  authDialog.showModal();
});

authForm.addEventListener('submit', (e) => {
  e.preventDefault();
  setApiKey(authKey.value.trim());
  authKey.value = '';
  authDialog.close();
  signout.hidden = false;
  route();
});

signout.addEventListener('click', () => { forgetApiKey(); location.reload(); });
signout.hidden = !apiKey();
window.addEventListener('hashchange', route);
route();
