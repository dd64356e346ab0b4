// The auditor page: read-only views of a shredd server (GET requests with
// the token of this tab's session storage) and the offline verifier
// (verify.js). No framework, no build step, nothing from elsewhere.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const TOKEN = 'shredd.token';
  const PAGE = 25;
  const served = location.protocol === 'http:' || location.protocol === 'https:';
  const api = (path) => new URL('../v1/' + path, location.href).toString();
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
  async function get(path, as) {
    const resp = await fetch(api(path), { headers: { Authorization: 'Bearer ' + token() }, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
    if (!resp.ok) {
      let p = null;
      try { p = await resp.json(); } catch (e) { /* not problem+json */ }
      if (resp.status === 401) { sessionStorage.removeItem(TOKEN); }
      throw new HTTPError(resp.status, p);
    }
    return as === 'text' ? resp.text() : as === 'blob' ? resp.blob() : resp.json();
  }
  function download(blob, name) {
    const a = el('a', { href: URL.createObjectURL(blob), download: name });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
  function showError(where, err) {
    where.replaceChildren(el('p', { class: 'error', role: 'alert', text: err.message }));
  }

  // ---- routing ----
  const views = ['signin', 'forgets', 'forget', 'holders', 'log', 'verify'];
  let timer = null;
  function show(name) {
    for (const v of views) $('view-' + v).hidden = v !== name;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === name || (name === 'forget' && a.dataset.view === 'forgets'));
    $('signout').hidden = !token();
    document.body.dataset.view = name;
  }
  function route() {
    clearInterval(timer);
    const [, view, arg] = (location.hash || '#/forgets').split('/');
    if (view === 'verify') { show('verify'); return; }
    if (!served) { show('verify'); return; } // from disk there is no server to ask
    if (!token()) { show('signin'); return; }
    switch (view) {
      case 'forget': show('forget'); loadForget(arg); break;
      case 'holders': show('holders'); showHolders(arg); timer = setInterval(() => { if (!document.hidden) loadHolders(true); }, 3000); break;
      case 'log': show('log'); loadLog(); break;
      default: show('forgets'); loadForgets(); timer = setInterval(() => { if (!document.hidden) loadForgets(true); }, 3000);
    }
  }
  window.addEventListener('hashchange', route);

  // ---- sign in ----
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    $('signin-error').textContent = '';
    sessionStorage.setItem(TOKEN, t);
    try {
      // GET /v1/log/key needs the audit scope (503 no_log: a server
      // without a log, still an audit token).
      try { await get('log/key', 'text'); } catch (e) { if (!(e.status === 503 && e.code === 'no_log')) throw e; }
      $('token').value = '';
      if (!location.hash || location.hash === '#/signin') location.hash = '#/forgets'; else route();
    } catch (e) {
      sessionStorage.removeItem(TOKEN);
      $('signin-error').textContent = e.status === 403 ? 'This token does not have the audit scope.' : e.status === 401 ? 'This token is not valid (unknown, expired or revoked).' : e.message;
    }
  });
  $('signout').addEventListener('click', () => { sessionStorage.removeItem(TOKEN); location.hash = '#/signin'; route(); });

  // ---- forgets ----
  const list = { state: '', cursors: [''], page: 0 };
  async function loadForgets(quiet) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (list.state) q.set('state', list.state);
    if (list.cursors[list.page]) q.set('cursor', list.cursors[list.page]);
    let res;
    try { res = await get('forgets?' + q.toString()); } catch (e) {
      if (e.status === 401) { route(); return; }
      if (!quiet) showError($('forgets-table').tBodies[0], e);
      return;
    }
    const counts = $('counts');
    counts.replaceChildren(...['committed', 'shredded', 'erased', 'blocked', 'overdue', 'requested'].map((st) =>
      el('button', { type: 'button', class: 'count state-' + st + (list.state === st ? ' active' : ''), 'data-state': st, 'aria-pressed': String(list.state === st) },
        el('span', { class: 'n', text: String(res.counts[st] || 0) }), el('span', { text: st }))));
    const body = $('forgets-table').tBodies[0];
    body.replaceChildren(...res.forgets.map((f) => el('tr', { 'data-forget': f.forget, 'data-state': f.state },
      el('td', {}, el('a', { href: '#/forget/' + f.forget, class: 'mono', text: f.forget })),
      el('td', {}, el('span', { class: 'badge state-' + f.state, text: f.state + (f.overdue && f.state !== 'overdue' ? ' (late)' : '') })),
      el('td', { text: stamp(f.requested_at) }), el('td', { text: stamp(f.deadline) }))));
    if (res.forgets.length === 0) body.replaceChildren(el('tr', {}, el('td', { colspan: '4', class: 'muted', text: 'No forgets' + (list.state ? ' in state ' + list.state : '') + '.' })));
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
  function timelineSteps(f) {
    const st = (ok, failed) => (failed ? 'failed' : ok ? 'done' : 'pending');
    const tprop = f.committed_at ? new Date(new Date(f.committed_at).getTime() + f.t_prop_seconds * 1000).toISOString() : null;
    const leases = cond(f, 'workers_quiesced'), acks = cond(f, 'cascade_closed'), closure = cond(f, 'closure_intact');
    return [
      { name: 'committed', label: 'Committed', at: f.committed_at, state: st(!!f.committed_at), note: 'subject key deleted' },
      { name: 'barrier', label: 'Barrier', at: f.committed_at, state: st(!!f.committed_at), note: 'at registration ' + f.barrier },
      { name: 'epoch', label: 'Epoch', at: f.shredded_at, state: st(!!f.shredded_at), note: f.epoch ? 'root epoch ' + f.epoch : 'root versions destroyed' },
      { name: 'cache-ttl', label: 'Cache TTL', at: tprop, state: st(cond(f, 'read_path_converged').status === 'ok' || (tprop && Date.now() >= Date.parse(tprop))), note: f.t_prop_seconds + ' s after commit' },
      { name: 'leases', label: 'Leases', at: null, state: st(leases.status === 'ok'), note: leases.status === 'ok' ? 'none live' : 'live leases' },
      { name: 'acks', label: 'Acks', at: null, state: st(acks.status === 'ok', closure.status === 'failed'), note: acks.status === 'ok' ? 'cascade closed' : 'acks owed' },
      { name: 'erased', label: 'Erased', at: f.erased_at, state: st(!!f.erased_at, f.state === 'blocked'), note: f.state === 'blocked' ? 'blocked' : f.erased_at ? 'attested' : 'pending' },
    ];
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
      p.setAttribute('d', state === 'done' ? 'M5.5 10.5l3 3 6-7' : 'M6 6l8 8M14 6l-8 8');
      svg.append(p);
    }
    return svg;
  }
  function renderForget(f) {
    current = f;
    $('forget-id').textContent = f.forget;
    const badge = $('forget-state');
    badge.textContent = f.state; badge.className = 'badge state-' + f.state;
    $('forget-deadline').textContent = 'deadline ' + stamp(f.deadline) + (f.overdue ? ' — missed' : '');
    $('timeline').replaceChildren(...timelineSteps(f).map((s) => el('li', { class: 'step ' + s.state, 'data-step': s.name },
      marker(s.state), el('span', { class: 'label', text: s.label }), el('span', { class: 'when', text: s.at ? stamp(s.at) : s.state === 'done' ? 'done' : '—' }),
      el('span', { class: 'note', text: s.note }))));
    const rows = (cs) => cs.map((c) => el('tr', { 'data-condition': c.name }, el('td', { class: 'mono', text: c.name }),
      el('td', {}, el('span', { class: 'badge status-' + c.status, text: c.status })), el('td', { text: c.reason })));
    $('verification').tBodies[0].replaceChildren(...rows(f.verification || []));
    $('conditions').tBodies[0].replaceChildren(...rows(f.conditions || []));
    const acks = cond(f, 'cascade_closed');
    $('owing').textContent = acks.status === 'ok' ? 'None: every plaintext-held artifact is acked (or there are none).' : acks.reason || 'Not yet known.';
    $('get-attestation').disabled = $('get-export').disabled = f.state !== 'erased';
  }
  async function loadForget(id) {
    if (!/^[0-9a-f]{32}$/.test(id || '')) { location.hash = '#/forgets'; return; }
    try { renderForget(await get('forgets/' + id)); } catch (e) { if (e.status === 401) route(); else showError($('owing'), e); return; }
    timer = setInterval(async () => { if (!document.hidden && current && current.state !== 'erased') { try { renderForget(await get('forgets/' + id)); } catch (e) { /* shown on the next load */ } } }, 3000);
  }
  $('get-attestation').addEventListener('click', async () => { try { download(await get('forgets/' + current.forget + '/attestation', 'blob'), 'attestation-' + current.forget + '.json'); } catch (e) { showError($('owing'), e); } });
  $('get-export').addEventListener('click', async () => { try { download(await get('forgets/' + current.forget + '/export', 'blob'), 'shredd-export-' + current.forget + '.tar.gz'); } catch (e) { showError($('owing'), e); } });

  // ---- holders ----
  const holders = { cursors: [''], page: 0, open: '' };
  const plural = (n, one, many) => n + ' ' + (n === 1 ? one : many);
  async function loadHolders(quiet) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (holders.cursors[holders.page]) q.set('cursor', holders.cursors[holders.page]);
    let res;
    try { res = await get('holders?' + q.toString()); } catch (e) {
      if (e.status === 401) { route(); return; }
      if (!quiet) showError($('holders-table').tBodies[0], e);
      return;
    }
    const body = $('holders-table').tBodies[0];
    body.replaceChildren(...res.holders.map((h) => {
      const inv = h.inventory;
      return el('tr', { 'data-holder': h.holder, 'data-pending': String(h.pending_artifacts) },
        el('td', {}, el('a', { href: '#/holders/' + encodeURIComponent(h.holder), class: 'mono', text: h.holder })),
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
      const res = await get('holders/' + encodeURIComponent(id) + '/purges');
      if (res.purges.length === 0) { out.replaceChildren(el('p', { text: id + ' owes no purge: every plaintext-held artifact of an open forget is acked.' })); return; }
      out.replaceChildren(el('div', { class: 'table-wrap' }, el('table', { id: 'purges' }, el('thead', {}, el('tr', {}, el('th', { text: 'Forget' }), el('th', { text: 'Artifacts to purge and ack' }))),
        el('tbody', {}, ...res.purges.map((p) => el('tr', {}, el('td', {}, el('a', { href: '#/forget/' + p.forget, class: 'mono', text: p.forget })),
          el('td', { class: 'mono', text: p.artifacts.length + ': ' + p.artifacts.join(' ') })))))));
    } catch (e) { if (e.status === 401) route(); else showError(out, e.status === 404 ? new Error('No holder ' + id + ' is registered.') : e); }
  }
  function showHolders(arg) {
    let id = '';
    try { id = arg ? decodeURIComponent(arg) : ''; } catch (e) { id = ''; }
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
      checkpoint = await get('log/checkpoint', 'text');
      const c = ShreddVerify.parseCheckpointText(new TextEncoder().encode(checkpoint));
      $('checkpoint-text').textContent = checkpoint;
      $('checkpoint-fields').replaceChildren(el('dt', { text: 'Origin' }), el('dd', { class: 'mono', text: c.origin }),
        el('dt', { text: 'Tree size' }), el('dd', { id: 'tree-size', text: String(c.size) }),
        el('dt', { text: 'Root hash' }), el('dd', { class: 'mono', text: ShreddVerify.b64encode(c.hash) }));
      $('log-key').textContent = (await get('log/key', 'text')).trim();
    } catch (e) { if (e.status === 401) route(); else showError($('checkpoint-fields'), e.code === 'no_log' ? new Error('This server keeps no transparency log.') : e); }
  }
  $('save-checkpoint').addEventListener('click', () => { if (checkpoint) download(new Blob([checkpoint], { type: 'text/plain' }), 'saved.checkpoint'); });

  // ---- the verifier (offline) ----
  const readFile = (input) => (input.files && input.files[0] ? input.files[0].arrayBuffer().then((b) => new Uint8Array(b)) : Promise.resolve(null));
  for (const [file, field] of [['v-key-file', 'v-key'], ['v-logkey-file', 'v-logkey']]) {
    $(file).addEventListener('change', async () => { const b = await readFile($(file)); if (b) $(field).value = new TextDecoder().decode(b).trim(); });
  }
  $('verify-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const verdict = $('verdict');
    verdict.className = 'verdict'; verdict.textContent = 'Checking…'; $('checks').replaceChildren();
    delete verdict.dataset.verified; delete verdict.dataset.failed;
    let r;
    try {
      const data = await readFile($('v-file'));
      const opts = { key: $('v-key').value, logKey: $('v-logkey').value, subject: $('v-subject').value, salt: $('v-salt').value, saved: await readFile($('v-saved')) };
      r = ShreddVerify.isGzip(data) ? await ShreddVerify.verifyExport(data, opts) : await ShreddVerify.verifyAttestation(data, opts);
    } catch (e) {
      r = { verified: false, failed: 'browser', reason: String(e && e.message), checks: [{ check: 'browser', ok: false, detail: String(e && e.message) }] };
    }
    verdict.dataset.verified = String(r.verified);
    verdict.dataset.failed = r.failed;
    verdict.className = 'verdict ' + (r.verified ? 'ok' : 'bad');
    verdict.replaceChildren(el('strong', { text: r.verified ? 'VERIFIED' : 'NOT VERIFIED' }),
      el('span', { text: r.verified ? (r.forget ? ' forget ' + r.forget + ' is attested erased and every step of it is in log ' + r.origin : ' the subject\'s data was cryptographically erased') : ' — ' + r.failed + ' failed: ' + r.reason }));
    $('checks').replaceChildren(...r.checks.map((c) => el('li', { class: c.ok === true ? 'ok' : c.ok === false ? 'bad' : 'skip', 'data-check': c.check },
      el('span', { class: 'mark', text: c.ok === true ? 'ok' : c.ok === false ? 'FAIL' : '–' }), el('span', { class: 'name', text: c.check }), el('span', { class: 'detail', text: c.detail }))));
  });

  route();
})();
