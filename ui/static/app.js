// The auditor page: read-only views of a shredd server (GET requests with
// the token of this tab's session storage) and the offline verifier
// (verify.js). No framework, no build step, nothing from elsewhere.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const TOKEN = 'shredd.token';
  const PAGE = 25;
  const served = location.protocol === 'http:' || location.protocol === 'https:';
  // What a route may name: a forget id (32 hex digits) and a holder id
  // (shredd.ValidHolder), never "." or "..", which would make the
  // request's URL another API path.
  const FORGET_ID = /^[0-9a-f]{32}$/;
  const HOLDER_ID = /^[A-Za-z0-9._:@-]{1,128}$/;
  const validHolder = (id) => typeof id === 'string' && HOLDER_ID.test(id) && id !== '.' && id !== '..';

  // Offline mode. Opened from a file the page has no server: it is offline
  // for good, and its policy is tightened to forbid every connection (a
  // policy added by a <meta> only ever restricts). Served, it is offline
  // while the verifier is shown: its refreshes stop and get() refuses to
  // send anything, so no request leaves the page while it verifies.
  let offline = !served;
  if (!served) {
    const m = document.createElement('meta');
    m.httpEquiv = 'Content-Security-Policy';
    m.content = "connect-src 'none'";
    document.head.append(m);
  }

  class OfflineError extends Error {}
  class SignedOut extends Error {}
  // apiURL builds the URL of an API path from its segments, each
  // percent-encoded on its own (encodeURIComponent: a "/" in one is data,
  // not a separator), and refuses any whose URL would not be exactly that
  // path under this page's /v1/.
  function apiURL(segments, query) {
    for (const s of segments) {
      if (typeof s !== 'string' || s === '' || s === '.' || s === '..') throw new Error('refused: an empty, "." or ".." path segment');
    }
    const path = segments.map(encodeURIComponent).join('/');
    const base = new URL('../v1/', location.href);
    const u = new URL(path, base);
    if (u.origin !== base.origin || u.pathname !== base.pathname + path) throw new Error('refused: the request would leave the API path');
    if (query) u.search = query.toString();
    return u.toString();
  }
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k);
    return e;
  };
  const stamp = (t) => (t ? new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—');
  const token = () => sessionStorage.getItem(TOKEN);

  class HTTPError extends Error {
    constructor(status, problem) {
      super((problem && (problem.title + (problem.detail ? ': ' + problem.detail : ''))) || 'HTTP ' + status);
      this.status = status; this.code = problem && problem.code;
    }
  }
  // session counts sign-ins and sign-outs: an answer that arrives after a
  // sign-out is dropped, never shown.
  let session = 0;
  async function get(segments, query, as) {
    if (offline) throw new OfflineError('offline: the page sends no request while the verifier is shown');
    const url = apiURL(segments, query);
    const mine = session;
    const resp = await fetch(url, { headers: { Authorization: 'Bearer ' + token() }, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
    if (mine !== session) throw new SignedOut('signed out');
    if (!resp.ok) {
      let p = null;
      try { p = await resp.json(); } catch (e) { /* not problem+json */ }
      if (resp.status === 401) signOut();
      throw new HTTPError(resp.status, p);
    }
    const body = await (as === 'text' ? resp.text() : as === 'blob' ? resp.blob() : resp.json());
    if (mine !== session) throw new SignedOut('signed out');
    return body;
  }
  // quiet errors: a sign-out or the offline mode, never shown as a failure.
  const quietError = (e) => e instanceof SignedOut || e instanceof OfflineError;
  function download(blob, name) {
    const a = el('a', { href: URL.createObjectURL(blob), download: name });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
  function showError(where, err) {
    if (quietError(err)) return;
    where.replaceChildren(el('p', { class: 'error', role: 'alert', text: err.message }));
  }
  const holderLink = (h) => el('a', { href: '#/holders/' + encodeURIComponent(h), class: 'mono', text: h });
  // labelled gives each cell of a table's body the name of its column
  // (data-label): on a phone a row is shown as a card of labelled values.
  function labelled(table) {
    const names = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
    for (const tr of table.tBodies[0].rows) [...tr.cells].forEach((td, i) => { if (names[i] && td.colSpan === 1) td.dataset.label = names[i]; });
    return table;
  }
  // joined lists links (or text) with ", ".
  const joined = (items) => items.flatMap((x, i) => (i === 0 ? [x] : [', ', x]));

  // ---- routing ----
  const views = ['signin', 'forgets', 'forget', 'holders', 'log', 'verify'];
  let timer = null;
  function show(name) {
    for (const v of views) $('view-' + v).hidden = v !== name;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === name || (name === 'forget' && a.dataset.view === 'forgets'));
    $('signout').hidden = !token();
    document.body.dataset.view = name;
    offline = !served || name === 'verify';
    document.body.dataset.offline = String(offline);
  }
  // parseRoute reads "#/view/arg": at most one argument, percent-decoded
  // once; null when the hash is malformed.
  function parseRoute() {
    const parts = (location.hash || '#/forgets').slice(1).split('/');
    if (parts[0] !== '' || parts.length > 3) return null;
    let arg = '';
    if (parts.length === 3) {
      try { arg = decodeURIComponent(parts[2]); } catch (e) { return null; }
    }
    return { view: parts[1] || 'forgets', arg, hasArg: parts.length === 3 };
  }
  function route() {
    clearInterval(timer); timer = null;
    const r = parseRoute();
    if (r && r.view === 'verify') { show('verify'); return; }
    if (!served) { show('verify'); return; } // from disk there is no server to ask
    if (!token()) { show('signin'); return; }
    if (!r) { show('forgets'); showError($('forgets-table').tBodies[0], new Error('This address names no view of the page.')); return; }
    switch (r.view) {
      case 'forget':
        show('forget');
        if (!FORGET_ID.test(r.arg)) { clearForget(); showError($('forget-error'), new Error('Not a forget id (32 hex digits): nothing was asked.')); return; }
        loadForget(r.arg); break;
      case 'holders':
        show('holders');
        if (r.hasArg && r.arg !== '' && !validHolder(r.arg)) {
          holders.open = '';
          $('holder-title').hidden = true;
          showError($('holder-result'), new Error('Not a holder id (1 to 128 of A-Z a-z 0-9 . _ : @ -, and not "." or ".."): nothing was asked.'));
          loadHolders();
        } else showHolders(r.arg);
        timer = setInterval(() => { if (!document.hidden) loadHolders(true); }, 3000); break;
      case 'log': show('log'); loadLog(); break;
      default: show('forgets'); loadForgets(); timer = setInterval(() => { if (!document.hidden) loadForgets(true); }, 3000);
    }
  }
  window.addEventListener('hashchange', route);

  // ---- sign in, sign out ----
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    // A pasted token loses the ASCII line ends and spaces around it (no
    // token holds any); this is sign-in, not evidence.
    const t = $('token').value.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
    $('signin-error').textContent = '';
    session++;
    sessionStorage.setItem(TOKEN, t);
    offline = false; // signing in asks the server, whatever the view
    try {
      // GET /v1/log/key needs the audit scope (503 no_log: a server
      // without a log, still an audit token).
      try { await get(['log', 'key'], null, 'text'); } catch (e) { if (!(e.status === 503 && e.code === 'no_log')) throw e; }
      $('token').value = '';
      if (!location.hash || location.hash === '#/signin') location.hash = '#/forgets'; else route();
    } catch (e) {
      sessionStorage.removeItem(TOKEN);
      $('signin-error').textContent = e.status === 403 ? 'This token does not have the audit scope.' : e.status === 401 ? 'This token is not valid (unknown, expired or revoked).' : e.message;
    }
  });
  // clearAll removes from the document everything a signed-in view showed
  // (rows, the forget's timeline, the holders' work, the log) and the
  // verifier's inputs and verdict: after a sign-out nothing of it is left,
  // hidden or not.
  function clearAll() {
    for (const t of document.querySelectorAll('table')) for (const b of t.tBodies) b.replaceChildren();
    for (const id of ['counts', 'holder-result', 'timeline', 'owing', 'blocked-by', 'forget-error', 'checkpoint-fields', 'checks', 'verify-details']) $(id).replaceChildren();
    for (const id of ['forget-id', 'forget-state', 'forget-deadline', 'holder-name', 'checkpoint-text', 'log-key', 'page-label', 'holders-page', 'forgets-updated', 'holders-updated']) $(id).textContent = '';
    $('forget-state').className = 'badge';
    $('holder-title').hidden = true;
    $('verify-form').reset(); chosen.clear();
    const verdict = $('verdict');
    verdict.replaceChildren(); verdict.className = 'verdict';
    delete verdict.dataset.verified; delete verdict.dataset.failed; delete verdict.dataset.code; delete verdict.dataset.subject;
    list.state = ''; list.cursors = ['']; list.page = 0; $('state-filter').value = '';
    holders.cursors = ['']; holders.page = 0; holders.open = '';
    current = null; checkpoint = '';
  }
  function signOut() {
    session++;
    clearInterval(timer); timer = null;
    sessionStorage.removeItem(TOKEN);
    clearAll();
  }
  $('signout').addEventListener('click', () => { signOut(); location.hash = '#/signin'; route(); });

  // ---- forgets ----
  const list = { state: '', cursors: [''], page: 0 };
  async function loadForgets(quiet) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (list.state) q.set('state', list.state);
    if (list.cursors[list.page]) q.set('cursor', list.cursors[list.page]);
    let res;
    try { res = await get(['forgets'], q); } catch (e) {
      if (e.status === 401) { route(); return; }
      if (!quiet) showError($('forgets-table').tBodies[0], e);
      return;
    }
    const counts = $('counts');
    counts.replaceChildren(...['committed', 'shredded', 'erased', 'blocked', 'overdue', 'requested'].map((st) =>
      el('button', { type: 'button', class: 'count state-' + st + (list.state === st ? ' active' : ''), 'data-state': st, 'aria-pressed': String(list.state === st) },
        el('span', { class: 'n', text: String(res.counts[st] || 0) }), el('span', { text: st }))));
    const body = $('forgets-table').tBodies[0];
    body.replaceChildren(...res.forgets.filter((f) => FORGET_ID.test(f.forget)).map((f) => el('tr', { 'data-forget': f.forget, 'data-state': f.state },
      el('td', {}, el('a', { href: '#/forget/' + f.forget, class: 'mono', text: f.forget })),
      el('td', {}, el('span', { class: 'badge state-' + f.state, text: f.state + (f.overdue && f.state !== 'overdue' ? ' (late)' : '') })),
      el('td', { text: stamp(f.requested_at) }), el('td', { text: stamp(f.deadline) }))));
    if (res.forgets.length === 0) body.replaceChildren(el('tr', {}, el('td', { colspan: '4', class: 'muted', text: 'No forgets' + (list.state ? ' in state ' + list.state : '') + '.' })));
    labelled($('forgets-table'));
    list.cursors[list.page + 1] = res.next || null;
    $('newer').disabled = list.page === 0;
    $('older').disabled = !res.next;
    $('page-label').textContent = 'page ' + (list.page + 1);
    $('forgets-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }
  $('counts').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-state]');
    if (!b) return;
    list.state = list.state === b.dataset.state ? '' : b.dataset.state;
    $('state-filter').value = list.state;
    list.cursors = ['']; list.page = 0; loadForgets();
  });
  $('state-filter').addEventListener('change', () => { list.state = $('state-filter').value; list.cursors = ['']; list.page = 0; loadForgets(); });
  $('refresh').addEventListener('click', () => loadForgets());
  $('older').addEventListener('click', () => { if (list.cursors[list.page + 1]) { list.page++; loadForgets(); } });
  $('newer').addEventListener('click', () => { if (list.page > 0) { list.page--; loadForgets(); } });

  // ---- one forget ----
  let current = null;
  function cond(f, name) { return (f.verification || []).find((c) => c.name === name) || { status: 'pending', reason: '' }; }
  const condHolders = (c) => (Array.isArray(c.holders) ? c.holders.filter(validHolder) : []);
  // timelineSteps: each milestone done, pending or failed. A step after a
  // pending one is never shown done (green), even when its own condition
  // already holds: it is "ready", met but waiting on an earlier step.
  function timelineSteps(f) {
    const st = (ok, failed) => (failed ? 'failed' : ok ? 'done' : 'pending');
    const tprop = f.committed_at ? new Date(new Date(f.committed_at).getTime() + f.t_prop_seconds * 1000).toISOString() : null;
    const leases = cond(f, 'workers_quiesced'), acks = cond(f, 'cascade_closed'), closure = cond(f, 'closure_intact');
    const blockers = closure.status === 'failed' ? condHolders(closure) : [];
    const epochDone = !!f.shredded_at;
    const steps = [
      { name: 'committed', label: 'Committed', at: f.committed_at, state: st(!!f.committed_at), note: f.committed_at ? 'subject key deleted' : 'not committed yet' },
      { name: 'barrier', label: 'Barrier', at: f.committed_at, state: st(!!f.committed_at), note: 'at registration ' + f.barrier },
      { name: 'epoch', label: 'Epoch', at: f.shredded_at, state: st(epochDone),
        note: epochDone ? (f.epoch ? 'root epoch ' + f.epoch + ': old root versions destroyed' : 'the subject\'s own key deleted') : 'waiting for a root epoch to destroy the old root versions' },
      { name: 'cache-ttl', label: 'Cache TTL', at: tprop, state: st(cond(f, 'read_path_converged').status === 'ok' || (tprop && Date.now() >= Date.parse(tprop))), note: f.t_prop_seconds + ' s after commit' },
      { name: 'leases', label: 'Leases', at: null, state: st(leases.status === 'ok'), note: leases.status === 'ok' ? 'none live' : 'live leases' },
      { name: 'acks', label: 'Acks', at: null, state: st(acks.status === 'ok', closure.status === 'failed'),
        note: blockers.length ? 'blocked by ' + blockers.join(', ') : acks.status === 'ok' ? 'cascade closed' : 'acks owed' },
      { name: 'erased', label: 'Erased', at: f.erased_at, state: st(!!f.erased_at, f.state === 'blocked'), note: f.state === 'blocked' ? 'blocked' : f.erased_at ? 'attested' : 'pending' },
    ];
    let waiting = false;
    for (const s of steps) {
      if (waiting && s.state === 'done') { s.state = 'ready'; s.at = null; s.note += ' (waits for an earlier step)'; }
      if (s.state === 'pending') waiting = true;
    }
    return steps;
  }
  const SVGNS = 'http://www.w3.org/2000/svg';
  function marker(state) {
    const svg = document.createElementNS(SVGNS, 'svg');
    svg.setAttribute('viewBox', '0 0 20 20'); svg.setAttribute('class', 'marker'); svg.setAttribute('aria-hidden', 'true');
    const c = document.createElementNS(SVGNS, 'circle');
    c.setAttribute('cx', '10'); c.setAttribute('cy', '10'); c.setAttribute('r', '8');
    svg.append(c);
    if (state !== 'pending') {
      const p = document.createElementNS(SVGNS, 'path');
      p.setAttribute('d', state === 'failed' ? 'M6 6l8 8M14 6l-8 8' : 'M5.5 10.5l3 3 6-7');
      svg.append(p);
    }
    return svg;
  }
  function clearForget() {
    current = null;
    for (const id of ['timeline', 'owing', 'blocked-by', 'forget-error']) $(id).replaceChildren();
    for (const id of ['verification', 'conditions']) $(id).tBodies[0].replaceChildren();
    $('forget-id').textContent = ''; $('forget-state').textContent = ''; $('forget-state').className = 'badge'; $('forget-deadline').textContent = '';
    $('get-attestation').disabled = $('get-export').disabled = true;
  }
  function renderForget(f) {
    current = f;
    $('forget-error').replaceChildren();
    $('forget-id').textContent = f.forget;
    const badge = $('forget-state');
    badge.textContent = f.state; badge.className = 'badge state-' + f.state;
    $('forget-deadline').textContent = 'deadline ' + stamp(f.deadline) + (f.overdue ? ' — missed' : '');
    $('timeline').replaceChildren(...timelineSteps(f).map((s) => el('li', { class: 'step ' + s.state, 'data-step': s.name },
      marker(s.state), el('span', { class: 'label', text: s.label }),
      el('span', { class: 'when', text: s.at ? stamp(s.at) : s.state === 'done' ? 'done' : s.state === 'ready' ? 'met' : '—' }),
      el('span', { class: 'note', text: s.note }))));
    const rows = (cs) => cs.map((c) => el('tr', { 'data-condition': c.name }, el('td', { class: 'mono', text: c.name }),
      el('td', {}, el('span', { class: 'badge status-' + c.status, text: c.status })), el('td', { text: c.reason })));
    $('verification').tBodies[0].replaceChildren(...rows(f.verification || []));
    $('conditions').tBodies[0].replaceChildren(...rows(f.conditions || []));
    labelled($('verification')); labelled($('conditions'));
    // Who blocks it: the holders of a failed closure_intact (the API's
    // verification names them), each a link to its page.
    const closure = cond(f, 'closure_intact'), blockers = closure.status === 'failed' ? condHolders(closure) : [];
    $('blocked-by').replaceChildren(...(blockers.length
      ? [el('strong', { text: 'Blocked by ' + (blockers.length === 1 ? 'holder ' : 'holders ') }), ...joined(blockers.map(holderLink)),
        el('span', { text: ': ' + (blockers.length === 1 ? 'its' : 'their') + ' latest inventory holds artifacts or kinds shredd never registered. The forget stays blocked until ' +
          (blockers.length === 1 ? 'it reports' : 'each reports') + ' a clean inventory.' })]
      : f.state === 'blocked' ? [el('strong', { text: 'Blocked: ' }), el('span', { text: closure.reason || 'a condition cannot be proven.' })] : []));
    $('blocked-by').hidden = !blockers.length && f.state !== 'blocked';
    const acks = cond(f, 'cascade_closed'), owing = condHolders(acks);
    $('owing').replaceChildren(...(acks.status === 'ok' ? [el('span', { text: 'None: every plaintext-held artifact is acked (or there are none).' })]
      : owing.length ? [...joined(owing.map(holderLink)), el('span', { class: 'muted', text: ' — ' + acks.reason })]
        : [el('span', { text: acks.reason || 'Not yet known.' })]));
    $('get-attestation').disabled = $('get-export').disabled = f.state !== 'erased';
  }
  async function loadForget(id) {
    if (!current || current.forget !== id) clearForget();
    try { renderForget(await get(['forgets', id])); } catch (e) { if (e.status === 401) route(); else showError($('forget-error'), e); return; }
    timer = setInterval(async () => { if (!document.hidden && current && current.state !== 'erased') { try { renderForget(await get(['forgets', id])); } catch (e) { /* shown on the next load */ } } }, 3000);
  }
  $('get-attestation').addEventListener('click', async () => { try { download(await get(['forgets', current.forget, 'attestation'], null, 'blob'), 'attestation-' + current.forget + '.json'); } catch (e) { showError($('forget-error'), e); } });
  $('get-export').addEventListener('click', async () => { try { download(await get(['forgets', current.forget, 'export'], null, 'blob'), 'shredd-export-' + current.forget + '.tar.gz'); } catch (e) { showError($('forget-error'), e); } });

  // ---- holders ----
  const holders = { cursors: [''], page: 0, open: '' };
  const plural = (n, one, many) => n + ' ' + (n === 1 ? one : many);
  async function loadHolders(quiet) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (holders.cursors[holders.page]) q.set('cursor', holders.cursors[holders.page]);
    let res;
    try { res = await get(['holders'], q); } catch (e) {
      if (e.status === 401) { route(); return; }
      if (!quiet) showError($('holders-table').tBodies[0], e);
      return;
    }
    const body = $('holders-table').tBodies[0];
    body.replaceChildren(...res.holders.filter((h) => validHolder(h.holder)).map((h) => {
      const inv = h.inventory;
      return el('tr', { 'data-holder': h.holder, 'data-pending': String(h.pending_artifacts) },
        el('td', {}, holderLink(h.holder)),
        el('td', {}, h.pending_artifacts > 0
          ? el('span', { class: 'badge status-pending', text: plural(h.pending_artifacts, 'artifact', 'artifacts') + ' in ' + plural(h.pending_forgets, 'forget', 'forgets') })
          : el('span', { class: 'badge status-ok', text: 'none' })),
        el('td', { class: 'last-ack', text: h.last_ack_at ? stamp(h.last_ack_at) : 'never' }),
        el('td', { class: 'inventory' }, inv
          ? el('span', { class: 'badge ' + (inv.clean ? 'status-ok' : 'status-failed'), text: inv.clean ? 'clean' : 'blocks forgets' })
          : el('span', { class: 'muted', text: 'never reported' }),
        inv ? el('span', { class: 'muted', text: ' ' + plural(inv.items, 'item', 'items') + (inv.clean ? '' : ', ' + plural(inv.unknown_artifacts, 'unknown artifact', 'unknown artifacts') + ', ' + plural(inv.unknown_kinds, 'unknown kind', 'unknown kinds')) + ', ' + stamp(inv.reported_at) }) : ''),
        el('td', { text: stamp(h.created_at) }));
    }));
    if (res.holders.length === 0) body.replaceChildren(el('tr', {}, el('td', { colspan: '5', class: 'muted', text: 'No holder is registered.' })));
    labelled($('holders-table'));
    holders.cursors[holders.page + 1] = res.next || null;
    $('holders-prev').disabled = holders.page === 0;
    $('holders-next').disabled = !res.next;
    $('holders-page').textContent = 'page ' + (holders.page + 1);
    $('holders-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }
  async function loadPurges(id) {
    const out = $('holder-result');
    $('holder-title').hidden = false;
    $('holder-name').textContent = id;
    try {
      const res = await get(['holders', id, 'purges']);
      if (id !== holders.open) return; // another holder was opened meanwhile
      if (res.purges.length === 0) { out.replaceChildren(el('p', { text: id + ' owes no purge: every plaintext-held artifact of an open forget is acked.' })); return; }
      out.replaceChildren(el('div', { class: 'table-wrap' }, labelled(el('table', { id: 'purges' }, el('thead', {}, el('tr', {}, el('th', { text: 'Forget' }), el('th', { text: 'Artifacts to purge and ack' }))),
        el('tbody', {}, ...res.purges.filter((p) => FORGET_ID.test(p.forget)).map((p) => el('tr', {}, el('td', {}, el('a', { href: '#/forget/' + p.forget, class: 'mono', text: p.forget })),
          el('td', { class: 'mono', text: p.artifacts.length + ': ' + p.artifacts.join(' ') }))))))));
    } catch (e) { if (e.status === 401) route(); else showError(out, e.status === 404 ? new Error('No holder ' + id + ' is registered.') : e); }
  }
  function showHolders(id) {
    if (id !== holders.open) { holders.open = id; $('holder-result').replaceChildren(); $('holder-title').hidden = true; }
    loadHolders();
    if (id) loadPurges(id);
  }
  $('holders-refresh').addEventListener('click', () => { loadHolders(); if (holders.open) loadPurges(holders.open); });
  $('holders-next').addEventListener('click', () => { if (holders.cursors[holders.page + 1]) { holders.page++; loadHolders(); } });
  $('holders-prev').addEventListener('click', () => { if (holders.page > 0) { holders.page--; loadHolders(); } });

  // ---- the log ----
  let checkpoint = '';
  async function loadLog() {
    try {
      checkpoint = await get(['log', 'checkpoint'], null, 'text');
      const c = ShreddVerify.parseCheckpointText(new TextEncoder().encode(checkpoint));
      $('checkpoint-text').textContent = checkpoint;
      $('checkpoint-fields').replaceChildren(el('dt', { text: 'Origin' }), el('dd', { class: 'mono', text: c.origin }),
        el('dt', { text: 'Tree size' }), el('dd', { id: 'tree-size', text: String(c.size) }),
        el('dt', { text: 'Root hash' }), el('dd', { class: 'mono', text: ShreddVerify.b64encode(c.hash) }));
      $('log-key').textContent = await get(['log', 'key'], null, 'text'); // as served, nothing trimmed
    } catch (e) { if (e.status === 401) route(); else showError($('checkpoint-fields'), e.code === 'no_log' ? new Error('This server keeps no transparency log.') : e); }
  }
  $('save-checkpoint').addEventListener('click', () => { if (checkpoint) download(new Blob([checkpoint], { type: 'text/plain' }), 'saved.checkpoint'); });

  // ---- the verifier (offline) ----
  // The form's evidence goes to the reader as bytes, as
  // docs/transparency.md §10a says of the page's fields: a chosen file's
  // bytes unchanged; a key typed or pasted into a field is the file of the
  // field's text with one LF appended when it does not end in LF; the
  // witness field is split at LF only, each non-empty piece one key. Nothing
  // is trimmed: which bytes may surround a key is the reader's rule, not the
  // form's.
  const bytesOf = (file) => file.arrayBuffer().then((b) => new Uint8Array(b));
  const readFile = (input) => (input.files && input.files[0] ? bytesOf(input.files[0]) : Promise.resolve(null));
  // chosen holds, for each key field, the file chosen with its picker; the
  // field shows the file's text, and an edit of the field (an input event)
  // drops the file: the typed text is used instead.
  const chosen = new Map();
  const shown = new TextDecoder('utf-8', { ignoreBOM: true }); // for display only: never read back
  for (const [picker, field] of [['v-key-file', 'v-key'], ['v-logkey-file', 'v-logkey']]) {
    $(picker).addEventListener('change', async () => {
      const file = $(picker).files && $(picker).files[0];
      if (!file) { if (chosen.delete(field)) $(field).value = ''; return; }
      chosen.set(field, file);
      const b = await bytesOf(file);
      if (chosen.get(field) === file) $(field).value = shown.decode(b);
    });
    $(field).addEventListener('input', () => { chosen.delete(field); $(picker).value = ''; });
  }
  // typedFile is the file a key typed into a field stands for: its text,
  // with one LF appended when it does not end in one; null when the field
  // is empty (no key given).
  const typedFile = (text) => (text === '' ? null : text.endsWith('\n') ? text : text + '\n');
  // keyBytes is a key field's file: the chosen file's bytes, else the
  // typed text's.
  const keyBytes = (field) => (chosen.has(field) ? bytesOf(chosen.get(field)) : Promise.resolve(typedFile($(field).value)));
  // witnessKeys splits the witness field at LF only; each non-empty piece
  // is one key, as given (the key grammar allows no final LF).
  const witnessKeys = (text) => text.split('\n').filter((k) => k !== '');
  // UsageError is a form the reader cannot be asked about (no file chosen,
  // a count that is not a number): the reader's usage errors, shown alike.
  class UsageError extends Error { constructor(message) { super(message); this.code = 'usage'; } }
  // cliStamp is how `shredd verify` prints a time (RFC 3339 in UTC, "-"
  // when unset); the statement's own text is that, once verified.
  const cliStamp = (t) => (typeof t === 'string' && t !== '' && !t.startsWith('0001-01-01') ? t : '-');
  const dash = (s) => (s === '' ? '-' : s);
  // renderDetails shows what the statement says, as `shredd verify`
  // prints it under its checks (cmd/shredd/verify.go, details): the forget,
  // the timeline, the key evidence, the artifacts, the holder acks, the
  // conditions with their evidence and the residuals. Not verified, it is
  // shown as read, marked as such: nothing in it counts.
  function renderDetails(r) {
    const out = $('verify-details');
    const st = r.statement, p = st && st.predicate;
    if (!p || typeof p !== 'object' || !p.forget) { out.replaceChildren(); return; }
    const arr = (x) => (Array.isArray(x) ? x : []);
    const t = p.timeline || {}, k = p.key_evidence || {};
    const arts = arr(p.artifacts);
    const sealed = arts.filter((a) => a && a.closed_by === 'sealed_key_destroyed').length, acked = arts.filter((a) => a && a.closed_by === 'holder_ack').length;
    const fields = [
      ['forget', String(p.forget)],
      ['timeline', 'requested ' + cliStamp(t.requested) + ', committed ' + cliStamp(t.committed) + ', shredded ' + cliStamp(t.shredded) + ', erased ' + cliStamp(t.erased)],
      ['root store', String(k.root_store) + (k.root_key_config && k.root_key_config.name ? ' (key ' + k.root_key_config.name + ')' : '') + ', epoch ' + k.epoch +
        ', root versions destroyed: ' + dash(arr(k.retired_root_versions).join(', '))],
      ['artifacts', arts.length + ': ' + sealed + ' sealed (their key is destroyed), ' + acked + ' plaintext-held, purged with a signed holder ack'],
      ['holder acks', dash(arr(p.holder_acks).map((h) => h.holder + ' (' + arr(h.artifacts).length + ' artifacts)').join(', '))],
    ];
    if (r.origin) fields.push(['log', String(r.origin)]);
    const table = (id, head, rows) => el('div', { class: 'table-wrap' }, labelled(el('table', { id }, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { text: h })))),
      el('tbody', {}, ...rows))));
    out.replaceChildren(
      el('h2', { text: r.verified ? 'What the attestation says' : 'What the attestation says (NOT VERIFIED: shown as read, nothing in it counts)' }),
      el('dl', { class: 'fields', id: 'details-fields' }, ...fields.flatMap(([n, v]) => [el('dt', { text: n }), el('dd', { 'data-field': n, text: v })])),
      el('h3', { text: 'Conditions' }),
      table('details-conditions', ['Condition', 'Status', 'Evidence'], arr(p.conditions).map((c) => el('tr', { 'data-condition': String(c.name) },
        el('td', { class: 'mono', text: String(c.name) }), el('td', {}, el('span', { class: 'badge status-' + (c.status === 'ok' ? 'ok' : 'pending'), text: String(c.status) })),
        el('td', { text: String(c.evidence) })))),
      el('h3', { text: 'Residuals (what this attestation cannot rule out)' }),
      table('details-residuals', ['Kind', 'Description'], arr(p.residuals).map((x) => el('tr', { 'data-residual': String(x.kind) },
        el('td', { class: 'mono', text: String(x.kind) }), el('td', { text: String(x.description) })))));
  }
  $('verify-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const verdict = $('verdict');
    verdict.className = 'verdict'; verdict.textContent = 'Checking…'; $('checks').replaceChildren(); $('verify-details').replaceChildren();
    $('witnesses').replaceChildren(); $('witnesses').hidden = true;
    delete verdict.dataset.verified; delete verdict.dataset.failed; delete verdict.dataset.code; delete verdict.dataset.subject;
    let r;
    try {
      const data = await readFile($('v-file'));
      if (!data) throw new UsageError('choose the export (.tar.gz) or the attestation (.json) to verify');
      if ($('v-witnesses-required').validity.badInput) throw new UsageError('witnesses required: not a whole number');
      // The subject and the salt as typed (the reader refuses a malformed
      // salt as a usage error); an empty field is one not given.
      const given = (id) => ($(id).value === '' ? null : $(id).value);
      const opts = { key: await keyBytes('v-key'), logKey: await keyBytes('v-logkey'), subject: given('v-subject'), salt: given('v-salt'),
        saved: await readFile($('v-saved')), witnesses: witnessKeys($('v-witnesses').value), witnessesRequired: given('v-witnesses-required') };
      r = ShreddVerify.isGzip(data) ? await ShreddVerify.verifyExport(data, opts) : await ShreddVerify.verifyAttestation(data, opts);
    } catch (e) {
      const message = String(e && e.message);
      // A usage error thrown (the form's own, or the reader's): the
      // inputs cannot be checked. Anything else thrown is a fault of the
      // verifier, never a verdict on the evidence: said as such.
      r = e && e.code === 'usage' ? { verified: false, failed: 'usage', code: 'usage', reason: message, checks: [] }
        : { verified: false, failed: 'verifier', code: '', reason: 'the verifier stopped on an error of its own (please report it): ' + message, checks: [] };
    }
    const checks = Array.isArray(r.checks) ? r.checks : [];
    const subject = checks.find((c) => c.check === 'subject');
    const subjectUnchecked = !subject || subject.ok === null;
    const usage = !r.verified && r.code === 'usage';
    verdict.dataset.verified = String(r.verified);
    verdict.dataset.failed = r.failed;
    verdict.dataset.code = r.code || '';
    verdict.dataset.subject = subjectUnchecked ? 'unchecked' : subject.ok ? 'checked' : 'failed';
    verdict.className = 'verdict ' + (r.verified ? 'ok' : 'bad');
    const p = r.statement && r.statement.predicate;
    let says;
    if (usage) says = ' — the form cannot be checked as filled in: ' + r.reason;
    else if (!r.verified) says = ' — ' + r.failed + ' failed: ' + r.reason;
    else if (r.forget) says = ' forget ' + r.forget + ' is attested erased and every step of it is in log ' + r.origin;
    else says = ' the subject\'s data was ' + (p ? p.claim : 'erased') + ' (forget ' + (p ? p.forget : '?') + ', ' + cliStamp(p && p.timeline && p.timeline.erased) + ')';
    const kids = [el('strong', { text: r.verified ? 'VERIFIED' : usage ? 'NOT CHECKED' : 'NOT VERIFIED' }), el('span', { text: says })];
    // The reason code and the section of the spec that defines it
    // (ShreddVerify.sectionOf).
    if (!r.verified && r.code) {
      const section = r.section || ShreddVerify.sectionOf(r.code);
      kids.push(el('span', { class: 'reason-code', 'data-code': r.code, 'data-section': section, text: ' [' + [r.code, section].filter(Boolean).join(', ') + ']' }));
    }
    if (r.verified && subjectUnchecked) {
      kids.push(el('p', { class: 'unchecked', text: 'The subject was not checked (no subject id and salt given): this export is shown to be about some subject\'s forget, not about whose.' }));
    }
    verdict.replaceChildren(...kids);
    $('checks').replaceChildren(...checks.map((c) => el('li', { class: c.ok === true ? 'ok' : c.ok === false ? 'bad' : 'skip', 'data-check': c.check },
      el('span', { class: 'mark', text: c.ok === true ? 'ok' : c.ok === false ? 'FAIL' : '–' }), el('span', { class: 'name', text: c.check }), el('span', { class: 'detail', text: c.detail }))));
    renderWitnesses(r.witnessed);
    renderDetails(r);
  });
  // renderWitnesses lists each witness given: cosigned (and when), missing
  // (no cosignature of it on the checkpoint) or invalid (one that does not
  // verify), and how many were required.
  function renderWitnesses(w) {
    const out = $('witnesses');
    if (!w) { out.replaceChildren(); out.hidden = true; return; }
    const row = (name, status, cls, detail) => el('li', { class: cls, 'data-witness': name, 'data-status': status },
      el('span', { class: 'mark', text: status }), el('span', { class: 'name', text: name }), el('span', { class: 'detail', text: detail }));
    out.replaceChildren(
      el('li', { class: w.valid.length >= w.required ? 'ok' : 'bad' }, el('span', { class: 'mark', text: w.valid.length + '/' + w.required }),
        el('span', { class: 'name', text: 'witnesses' }), el('span', { class: 'detail', text: w.valid.length + ' valid cosignatures, ' + w.required + ' required' })),
      ...w.valid.map((c) => row(c.witness, 'cosigned', 'ok', 'cosigned at ' + c.time)),
      ...w.missing.map((n) => row(n, 'missing', 'bad', 'no cosignature on the checkpoint')),
      ...w.invalid.map((n) => row(n, 'invalid', 'bad', 'a cosignature that does not verify')));
    out.hidden = false;
  }

  route();
})();
