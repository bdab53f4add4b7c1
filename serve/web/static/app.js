// deputy's dashboard. Plain script, no framework, no build step: it talks to
// the HTTP API of docs/api.md with fetch and EventSource, on the HttpOnly
// session cookie that POST /api/session sets. The token is read from the
// sign-in field once, sent in that one request's body, and forgotten.
//
// Everything shown is built with createElement and textContent: transcripts
// and reports are model output and must never become markup.
'use strict';

(function () {
  const KINDS = ['state', 'progress', 'tool_call', 'tool_result', 'mail'];
  const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'cancelled']);
  const STATE_LABEL = {
    created: 'created', running: 'running', asking: 'asking', paused: 'paused', completed: 'completed',
    failed: 'failed', timed_out: 'timed out', cancelled: 'cancelled',
  };
  const PAGE = 40; // transcript messages per page
  const CLIP = 3000; // characters of a block shown before "Show all"

  const S = {
    runs: [],
    root: null, // the selected run's root id
    tree: null, // its tree (NODE)
    totals: null,
    byId: new Map(), // id -> NODE of the selected tree
    question: '', // the root's open question
    node: null, // the instance open in the side panel
    tab: 'transcript',
    tOffset: null, // transcript page offset; null follows the newest page
    treeES: null,
    listES: null,
    lastTreeEvent: 0,
    lastListEvent: 0,
    perInst: new Map(), // instance -> {tokens, cost} from progress events, for the chart
    points: [], // chart points {t, tokens, cost}
    marks: [], // chart marks {t, state}
    priced: false,
    treeSeq: 0,
    signedIn: false,
    moves: new Map(), // instance -> [{t, to}]: its state moves, for the timeline
    failedRoots: new Map(), // root id -> how many instances of its tree failed or timed out
    types: new Set(), // the types the type filter offers
  };
  const FAILED = new Set(['failed', 'timed_out']);

  const $ = (id) => document.getElementById(id);

  // ---- small helpers ------------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
    return e;
  }

  function tokensOf(u) {
    if (!u) return 0;
    return (u.input_tokens || 0) + (u.output_tokens || 0) + (u.cache_read_tokens || 0) + (u.cache_write_tokens || 0);
  }

  function fmtInt(n) {
    return (n || 0).toLocaleString('en-US');
  }

  function fmtTokens(n) {
    n = n || 0;
    if (n < 1000) return String(n);
    if (n < 1e6) return (n / 1000).toFixed(n < 1e4 ? 1 : 0) + 'k';
    return (n / 1e6).toFixed(n < 1e7 ? 2 : 1) + 'M';
  }

  function fmtCost(c) {
    if (c === undefined || c === null) return '—';
    if (c === 0) return '$0';
    if (c < 0.01) return '$' + c.toFixed(4);
    if (c < 1) return '$' + c.toFixed(3);
    return '$' + c.toFixed(2);
  }

  function usageTitle(u) {
    u = u || {};
    return `input ${fmtInt(u.input_tokens)} · output ${fmtInt(u.output_tokens)} · cache read ` +
      `${fmtInt(u.cache_read_tokens)} · cache write ${fmtInt(u.cache_write_tokens)}`;
  }

  function shortId(id) {
    // A long id (a ULID, say) shares its leading digits within a run; the
    // tail tells instances apart.
    if (!id) return '';
    return id.length > 16 ? '…' + id.slice(-8) : id;
  }

  function firstLine(s, n) {
    s = (s || '').trim().split('\n')[0];
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (!t) return '';
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 5) return 'just now';
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return new Date(t).toLocaleDateString();
  }

  function fmtDuration(ms) {
    if (!(ms >= 0)) return '';
    const s = Math.round(ms / 1000);
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
    return Math.floor(m / 60) + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }

  // fmtSpan is fmtDuration for the short stretches of a timeline.
  function fmtSpan(ms) {
    if (!(ms >= 0)) return '';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 10000) return (ms / 1000).toFixed(1) + 's';
    return fmtDuration(ms);
  }

  function fmtTime(iso) {
    const t = Date.parse(iso);
    return t ? new Date(t).toLocaleString() : '';
  }

  function badge(state) {
    const b = el('span', 'badge state-' + state, STATE_LABEL[state] || state);
    b.dataset.state = state;
    return b;
  }

  function setBadge(e, state) {
    e.className = 'badge state-' + state;
    e.dataset.state = state;
    e.textContent = STATE_LABEL[state] || state;
  }

  // throttle runs fn at most once per ms, the last call always honoured.
  function throttle(fn, ms) {
    let timer = null;
    let last = 0;
    return function () {
      if (timer) return;
      const wait = Math.max(0, last + ms - Date.now());
      timer = setTimeout(() => {
        timer = null;
        last = Date.now();
        Promise.resolve(fn()).catch(report);
      }, wait);
    };
  }

  let toastTimer = null;
  function toast(msg, bad) {
    const t = $('toast');
    t.textContent = msg;
    t.classList.toggle('bad', !!bad);
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 4000);
  }

  function report(err) {
    if (err && err.status === 401) return; // signedOut has said it
    toast(err && err.message ? err.message : String(err), true);
  }

  // ---- the API -------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const opt = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, opt);
    } catch (e) {
      throw new APIError(0, 'network', 'The server cannot be reached.');
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      const err = new APIError(res.status, e.code || 'http_' + res.status, e.message || `${res.status} ${res.statusText}`);
      if (res.status === 401 && path !== '/api/session') signedOut('Your session has ended. Sign in again.');
      throw err;
    }
    return data;
  }

  const enc = encodeURIComponent;

  // ---- signing in and out --------------------------------------------------

  function showSignin(msg) {
    $('boot').hidden = true;
    $('app').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = msg || '';
    $('token').focus();
  }

  async function signIn(ev) {
    ev.preventDefault();
    const field = $('token');
    const token = field.value.trim();
    if (!token) return;
    $('signin-button').disabled = true;
    $('signin-error').textContent = '';
    try {
      await api('POST', '/api/session', { token });
      field.value = '';
      showApp();
    } catch (e) {
      $('signin-error').textContent = e.status === 401 ? 'That token is not the server’s. Check .deputy/token.' : e.message;
      field.select();
    } finally {
      $('signin-button').disabled = false;
    }
  }

  function signedOut(msg) {
    if (!S.signedIn) return;
    S.signedIn = false;
    closeStreams();
    S.root = null;
    S.node = null;
    showSignin(msg);
  }

  async function signOut() {
    try { await api('DELETE', '/api/session'); } catch (e) { /* signed out either way */ }
    signedOut('Signed out.');
  }

  function closeStreams() {
    if (S.treeES) S.treeES.close();
    if (S.listES) S.listES.close();
    S.treeES = S.listES = null;
    setLive();
  }

  // ---- live streams ----------------------------------------------------------

  function setLive() {
    const l = $('live');
    const streams = [S.listES, S.treeES].filter(Boolean);
    let state = 'off';
    if (streams.length) {
      state = streams.every((s) => s.readyState === EventSource.OPEN) ? 'on' : 'wait';
    }
    l.dataset.live = state;
    l.textContent = { on: 'live', wait: 'reconnecting…', off: 'offline' }[state];
  }

  // stream opens an EventSource on path and calls onEvent with each event's
  // JSON. The browser reconnects by itself with Last-Event-ID; a stream the
  // server refused (401, a restart mid-handshake) is closed for good, so
  // after checking the session it is opened again from the last id seen,
  // waiting longer each time it is refused in a row.
  function stream(path, after, onEvent, onReplace, refused) {
    refused = refused || 0;
    const url = after === null ? path : `${path}?after=${after}`;
    const es = new EventSource(url);
    let last = after || 0;
    const handle = (ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      if (data && data.id > last) last = data.id;
      onEvent(data);
    };
    for (const k of KINDS) es.addEventListener(k, handle);
    es.onmessage = handle;
    // The first frame says where the stream starts: a reopen goes on from
    // there, not from the beginning.
    es.addEventListener('ready', (ev) => {
      try {
        const d = JSON.parse(ev.data);
        if (d.last_event_id > last) last = d.last_event_id;
      } catch (e) { /* a malformed frame changes nothing */ }
    });
    es.onopen = () => { refused = 0; setLive(); };
    es.onerror = () => {
      setLive();
      if (es.readyState !== EventSource.CLOSED) return;
      const wait = Math.min(30000, 1000 * 2 ** refused);
      setTimeout(async () => {
        try {
          await api('GET', '/api/session');
        } catch (e) {
          if (e.status === 401) signedOut('Your session has ended. Sign in again.');
          else onReplace(last, refused + 1);
          return;
        }
        onReplace(last, refused + 1);
      }, wait);
    };
    return es;
  }

  function openListStream(after, refused) {
    if (S.listES) S.listES.close();
    const es = stream('/api/events', after, (e) => {
      // A root's move, or any instance failing (its root gets the flag).
      const failed = e.kind === 'state' && e.data && FAILED.has(e.data.to);
      if ((!e.parent && (e.kind === 'state' || e.kind === 'progress')) || failed) loadRunsSoon();
    }, (last, n) => { if (S.listES === es && S.signedIn) openListStream(last, n); }, refused);
    S.listES = es;
    setLive();
  }

  function openTreeStream(root, after, refused) {
    if (S.treeES) S.treeES.close();
    const es = stream(`/api/trees/${enc(root)}/events`, after, (e) => {
      if (S.treeES !== es) return;
      onTreeEvent(e);
    }, (last, n) => { if (S.treeES === es && S.signedIn) openTreeStream(root, last, n); }, refused);
    S.treeES = es;
    setLive();
  }

  function onTreeEvent(e) {
    const d = e.data || {};
    const t = Date.parse(e.at) || Date.now();
    let chartChanged = false;
    if (e.kind === 'progress' || (e.kind === 'state' && d.usage)) {
      const prev = S.perInst.get(e.instance);
      const cur = { tokens: tokensOf(d.usage), cost: typeof d.cost === 'number' ? d.cost : (prev ? prev.cost : 0) };
      if (typeof d.cost === 'number') S.priced = true;
      if (!prev || prev.tokens !== cur.tokens || prev.cost !== cur.cost) {
        S.perInst.set(e.instance, cur);
        let tokens = 0;
        let cost = 0;
        for (const v of S.perInst.values()) { tokens += v.tokens; cost += v.cost; }
        S.points.push({ t, tokens, cost });
        chartChanged = true;
      }
    }
    if (e.kind === 'state' && e.instance === S.root && d.to) {
      S.marks.push({ t, state: d.to });
      chartChanged = true;
    }
    if (e.kind === 'state' && d.to) {
      const ms = S.moves.get(e.instance) || [];
      ms.push({ t, to: d.to });
      S.moves.set(e.instance, ms);
      drawTimelineSoon();
    }
    if (chartChanged) drawChartSoon();
    loadTreeSoon();
    if (S.node && e.instance === S.node && (e.kind !== 'tool_call')) refreshPanelSoon();
  }

  // ---- runs ------------------------------------------------------------------

  // loadRuns reads the roots the state and type filters select (the
  // server filters those), and which trees hold a failure: a run is flagged
  // when any instance of it failed or timed out, its children's included.
  async function loadRuns() {
    const p = new URLSearchParams({ roots: 'true', limit: '200' });
    if ($('runs-filter').value) p.set('state', $('runs-filter').value);
    if ($('runs-type').value) p.set('type', $('runs-type').value);
    const [res, bad] = await Promise.all([api('GET', '/api/instances?' + p),
      api('GET', '/api/instances?state=failed,timed_out&limit=1000')]);
    const failedRoots = new Map();
    for (const f of (bad && bad.instances) || []) {
      const root = f.root || f.id;
      failedRoots.set(root, (failedRoots.get(root) || 0) + 1);
    }
    const sig = JSON.stringify(res) + JSON.stringify([...failedRoots]) + S.root;
    if (sig === S.runsSig) return;
    S.runsSig = sig;
    S.runs = (res && res.instances) || [];
    S.failedRoots = failedRoots;
    for (const r of S.runs) addType(r.type);
    renderRuns();
    if (!S.root && S.runs.length) selectRun(S.runs[0].id);
  }
  const loadRunsSoon = throttle(loadRuns, 700);

  // matches says whether run r has the search text in its task, type or id.
  function matches(r, q) {
    return !q || [r.task, r.type, r.id].some((v) => (v || '').toLowerCase().includes(q));
  }

  function renderRuns() {
    const ul = clear($('runs'));
    const q = $('runs-search').value.trim().toLowerCase();
    const shown = S.runs.filter((r) => matches(r, q));
    const filtered = !!(q || $('runs-filter').value || $('runs-type').value);
    $('runs-empty').hidden = S.runs.length > 0 || filtered;
    $('runs-none').hidden = shown.length > 0 || !filtered;
    for (const r of shown) {
      const li = el('li', 'run-item' + (r.id === S.root ? ' selected' : ''));
      li.dataset.id = r.id;
      li.dataset.state = r.state;
      const b = el('button', 'run-button');
      b.type = 'button';
      const top = el('div', 'run-line');
      top.append(badge(r.state));
      const nf = S.failedRoots.get(r.id) || 0;
      if (nf) {
        li.dataset.failed = String(nf);
        li.classList.add('has-failure');
        const flag = el('span', 'run-flag', `⚠ ${nf} failed`);
        flag.title = `${nf} instance(s) of this run failed or timed out`;
        top.append(flag);
      }
      top.append(el('span', 'run-ago', ago(r.created_at)));
      const task = el('div', 'run-task', firstLine(r.task, 90) || '(no task)');
      task.title = r.task || '';
      const meta = el('div', 'run-meta-line');
      meta.append(el('span', 'mono', shortId(r.id)), el('span', '', r.model || ''));
      b.append(top, task, meta);
      b.addEventListener('click', () => selectRun(r.id));
      li.append(b);
      ul.append(li);
    }
  }

  // ---- the address: the selected run and the list's filters ------------------

  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    return { run: p.get('run') || '', q: p.get('q') || '', state: p.get('state') || '', type: p.get('type') || '' };
  }

  // writeHash keeps the address in step with the page, without a history
  // entry per keystroke.
  function writeHash() {
    const p = new URLSearchParams();
    if (S.root) p.set('run', S.root);
    const q = $('runs-search').value.trim();
    if (q) p.set('q', q);
    if ($('runs-filter').value) p.set('state', $('runs-filter').value);
    if ($('runs-type').value) p.set('type', $('runs-type').value);
    const h = p.toString();
    history.replaceState(null, '', h ? '#' + h : location.pathname + location.search);
  }

  // applyHash sets the filters from the address and returns what it says.
  function applyHash() {
    const h = readHash();
    $('runs-search').value = h.q;
    setSelect($('runs-filter'), h.state, h.state.replace(/,/g, ', '));
    addType(h.type);
    setSelect($('runs-type'), h.type, h.type);
    return h;
  }

  // setSelect selects value, adding it when no option has it (an address
  // written by hand, a type not seen yet).
  function setSelect(sel, value, label) {
    if (value && ![...sel.options].some((o) => o.value === value)) {
      const o = el('option', '', label);
      o.value = value;
      sel.append(o);
    }
    sel.value = value;
  }

  function addType(type) {
    if (!type || S.types.has(type)) return;
    S.types.add(type);
    const o = el('option', '', type);
    o.value = type;
    $('runs-type').append(o);
  }

  async function loadTypes() {
    const res = await api('GET', '/api/definitions');
    for (const d of (res && res.definitions) || []) addType(d.name);
  }

  function selectRun(id) {
    if (S.root === id) return;
    S.root = id;
    S.moves = new Map();
    S.tree = null;
    S.treeSig = '';
    S.byId = new Map();
    S.question = '';
    S.perInst = new Map();
    S.points = [];
    S.marks = [];
    S.priced = false;
    S.answerFor = null;
    disarm($('ctl-cancel'));
    writeHash();
    for (const li of $('runs').children) li.classList.toggle('selected', li.dataset.id === id);
    $('run-empty').hidden = true;
    $('run-view').hidden = false;
    clear($('tree'));
    clear($('totals'));
    clear($('timeline'));
    closePanel();
    drawChart();
    // From the first event: the history draws the chart, then live ones.
    openTreeStream(id, 0);
    loadTree().catch(report);
  }

  // ---- the tree --------------------------------------------------------------

  async function loadTree() {
    const root = S.root;
    if (!root) return;
    const seq = ++S.treeSeq;
    const res = await api('GET', `/api/instances/${enc(root)}/tree`);
    if (seq !== S.treeSeq || root !== S.root) return; // a newer answer is coming
    // Unchanged: the DOM stays as it is (a click or a selection in it is
    // not lost to a rebuild).
    if (res.root.parent) {
      // An address named a subagent: show its run.
      S.root = null;
      selectRun(res.root.root);
      return;
    }
    const sig = JSON.stringify(res);
    if (sig === S.treeSig) return;
    S.tree = res.root;
    S.totals = res.totals;
    S.byId = new Map();
    (function index(n) {
      S.byId.set(n.id, n);
      for (const c of n.children || []) index(c);
    })(S.tree);
    let q = S.tree.question || '';
    if (S.tree.state === 'asking' && !q) {
      const inst = await api('GET', `/api/instances/${enc(root)}`);
      if (root !== S.root) return;
      q = inst.question || '';
    }
    S.question = q;
    S.treeSig = sig;
    renderRun();
    // The run's state in the list follows without waiting for its refresh.
    const li = [...$('runs').children].find((l) => l.dataset.id === root);
    if (li && li.dataset.state !== S.tree.state) loadRunsSoon();
    if (S.node) {
      renderPanelHead();
      if (S.tab === 'details') loadPanel(true).catch(report);
    }
  }
  const loadTreeSoon = throttle(loadTree, 300);

  function renderRun() {
    const r = S.tree;
    setBadge($('run-state'), r.state);
    $('run-task').textContent = firstLine(r.task, 160) || '(no task)';
    $('run-task').title = r.task || '';
    $('run-id').textContent = r.id;
    $('run-model').textContent = r.model || '';
    const end = r.ended_at ? Date.parse(r.ended_at) : Date.now();
    $('run-time').textContent = `started ${fmtTime(r.created_at)} · ${TERMINAL.has(r.state) ? 'took' : 'for'} ` +
      fmtDuration(end - Date.parse(r.created_at));
    document.title = `deputy · ${STATE_LABEL[r.state] || r.state} · ${firstLine(r.task, 40)}`;

    $('ctl-pause').disabled = !(r.state === 'running' || r.state === 'asking');
    $('ctl-resume').disabled = r.state !== 'paused';
    $('ctl-cancel').disabled = TERMINAL.has(r.state);
    if (TERMINAL.has(r.state)) disarm($('ctl-cancel'));

    renderTotals();
    renderQuestion();
    renderApprovals();
    renderOutcome();
    renderTree();
    drawChart();
    drawTimeline();
  }

  function renderTotals() {
    const t = S.totals || {};
    const u = t.usage || {};
    const box = clear($('totals'));
    const items = [
      ['instances', fmtInt(t.instances)],
      ['turns', fmtInt(t.turns)],
      ['tool calls', fmtInt(t.tool_calls)],
      ['tokens', fmtTokens(tokensOf(u)), usageTitle(u)],
      ['output', fmtTokens(u.output_tokens), usageTitle(u)],
      ['cost', fmtCost(t.cost), t.unpriced ? `${t.unpriced} instance(s) unpriced` : ''],
    ];
    if (u.cache_read_tokens) items.splice(5, 0, ['cache read', fmtTokens(u.cache_read_tokens), usageTitle(u)]);
    const failed = [...S.byId.values()].filter((n) => FAILED.has(n.state)).length;
    if (failed) items.splice(1, 0, ['failed', fmtInt(failed), 'instances of this run that failed or timed out']);
    for (const [label, value, title] of items) {
      const d = el('div', 'total');
      d.dataset.total = label;
      const v = el('div', 'total-value', value);
      if (title) d.title = title;
      d.append(v, el('div', 'total-label', label));
      box.append(d);
    }
  }

  function renderQuestion() {
    const r = S.tree;
    const asking = r.state === 'asking';
    const box = $('question');
    box.hidden = !asking;
    if (!asking) return;
    $('question-text').textContent = S.question || '(the question could not be read)';
    if (S.answerFor !== r.id + S.question) {
      // A new question: a fresh box.
      S.answerFor = r.id + S.question;
      $('answer').value = '';
      $('answer-send').disabled = false;
    }
  }

  // Every call of the tree that waits for the person's approval: the
  // instance, the tool, its arguments as the model wrote them, the rule
  // that asked, and Approve / Deny.
  function renderApprovals() {
    // A parent shows its descendant's approval too: one entry per call.
    const seen = new Set();
    const pending = [];
    for (const n of S.byId.values()) {
      const a = n.approval;
      if (!a || seen.has(a.instance_id + ' ' + a.call_id)) continue;
      seen.add(a.instance_id + ' ' + a.call_id);
      pending.push({ node: S.byId.get(a.instance_id) || n, a });
    }
    const box = $('approvals');
    box.hidden = pending.length === 0;
    const sig = JSON.stringify(pending.map((p) => [p.a.instance_id, p.a.call_id]));
    if (box.dataset.sig === sig) return; // unchanged: keep a reason being typed
    box.dataset.sig = sig;
    const ul = clear($('approval-list'));
    for (const { node: n, a } of pending) {
      const id = a.instance_id || n.id;
      const li = el('li', 'approval');
      li.dataset.id = id;
      li.append(el('div', 'approval-head', `${n.type || 'root'} ${shortId(id)} wants to run ${a.tool}`));
      let input = '';
      try {
        input = JSON.stringify(a.input, null, 2);
      } catch (_) {
        input = String(a.input);
      }
      li.append(el('pre', 'approval-input', input));
      if (a.rule) li.append(el('div', 'approval-rule', `asked by the rule ${a.rule}`));
      if (a.reason) li.append(el('div', 'approval-reason', a.reason));
      const reason = el('input', 'approval-why');
      reason.placeholder = 'Why not (for Deny)…';
      reason.setAttribute('aria-label', 'Reason for denying');
      const yes = el('button', 'primary approval-approve', 'Approve');
      const no = el('button', 'approval-deny', 'Deny');
      yes.type = no.type = 'button';
      yes.addEventListener('click', () => decide(id, { approve: true }, li));
      no.addEventListener('click', () => decide(id, { approve: false, reason: reason.value.trim() }, li));
      const row = el('div', 'approval-actions');
      row.append(yes, no, reason);
      li.append(row);
      ul.append(li);
    }
  }

  async function decide(id, body, li) {
    for (const b of li.querySelectorAll('button')) b.disabled = true;
    try {
      await api('POST', `/api/instances/${enc(id)}/approval`, body);
      toast(body.approve ? 'Approved: the call runs.' : 'Denied.');
      await loadTree();
    } catch (e) {
      for (const b of li.querySelectorAll('button')) b.disabled = false;
      report(e);
    }
  }

  function renderOutcome() {
    const r = S.tree;
    const box = $('outcome');
    const ended = TERMINAL.has(r.state);
    box.hidden = !ended;
    if (!ended) return;
    box.className = 'outcome state-' + r.state;
    let title = { completed: 'Report', failed: 'Failed', timed_out: 'Timed out', cancelled: 'Cancelled' }[r.state];
    if (r.stop_reason && r.stop_reason !== 'completed') title += ` (${r.stop_reason.replace(/_/g, ' ')})`;
    if (r.incomplete) title += ' — incomplete';
    $('outcome-title').textContent = title;
    $('outcome-text').textContent = [r.error, r.report].filter(Boolean).join('\n\n') || '(no report)';
  }

  function renderTree() {
    const ul = clear($('tree'));
    if (S.tree) ul.append(nodeItem(S.tree));
  }

  function nodeItem(n) {
    const li = el('li', 'node');
    li.setAttribute('role', 'treeitem');
    li.dataset.id = n.id;
    li.dataset.state = n.state;
    li.dataset.depth = n.depth;
    const row = el('div', 'node-row' + (n.id === S.node ? ' selected' : ''));
    row.tabIndex = 0;
    row.dataset.id = n.id;

    const name = el('span', 'node-name');
    const dot = el('span', 'dot state-' + n.state);
    const head = el('span', 'node-head');
    const type = el('b', 'node-type', n.parent ? n.type || 'subagent' : 'root');
    const id = el('span', 'mono muted node-id', shortId(n.id));
    id.title = n.id;
    const task = el('span', 'node-task', firstLine(n.task, 160));
    task.title = n.task || '';
    head.append(type, task);
    const text = el('span', 'node-text');
    text.append(head);
    if (FAILED.has(n.state)) {
      // A failure is flagged where it happened, with its error's first line.
      li.classList.add('node-failed');
      const why = el('span', 'node-error', '⚠ ' + (firstLine(n.error, 140) || (n.stop_reason || n.state).replace(/_/g, ' ')));
      why.title = n.error || '';
      text.append(why);
    }
    text.append(id);
    name.append(dot, text);

    const cost = el('span', 'num', fmtCost(n.cost));
    const tokens = el('span', 'num', fmtTokens(tokensOf(n.usage)));
    tokens.title = usageTitle(n.usage);
    const st = el('span', 'node-state');
    st.append(badge(n.state));
    row.append(name, st, el('span', 'node-model', n.model || ''), el('span', 'num', fmtInt(n.turns)), tokens, cost);
    row.addEventListener('click', () => openNode(n.id));
    row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); openNode(n.id); } });
    li.append(row);

    const kids = n.children || [];
    if (kids.length) {
      const sub = n.subtree || {};
      const line = el('div', 'subtree');
      line.textContent = `subtree: ${fmtInt(sub.instances)} instances · ${fmtInt(sub.turns)} turns · ` +
        `${fmtTokens(tokensOf(sub.usage))} tokens · ${fmtCost(sub.cost)}`;
      line.title = usageTitle(sub.usage);
      li.append(line);
      const ul = el('ul', 'children');
      ul.setAttribute('role', 'group');
      for (const c of kids) ul.append(nodeItem(c));
      li.append(ul);
    }
    return li;
  }

  // ---- controls ----------------------------------------------------------------

  // disarm puts a two-step button back to its first step.
  function disarm(b) {
    clearTimeout(b._t);
    if (b.dataset.armed) {
      delete b.dataset.armed;
      b.textContent = b.dataset.label;
    }
  }

  async function control(ev) {
    const b = ev.currentTarget;
    const action = b.dataset.action;
    const id = b.dataset.target || S.root;
    if (!id) return;
    if (action === 'cancel' && !b.dataset.armed) {
      // Cancelling loses the rest of the work: a second click confirms.
      b.dataset.label = b.textContent;
      b.dataset.armed = '1';
      b.textContent = 'Click again to cancel';
      b._t = setTimeout(() => disarm(b), 4000);
      return;
    }
    disarm(b);
    b.disabled = true;
    try {
      const inst = await api('POST', `/api/instances/${enc(id)}/${action}`);
      const done = { pause: 'paused', resume: 'running', cancel: 'cancelled' }[action];
      toast(inst.state === done || action === 'resume'
        ? `${shortId(inst.id)} is ${STATE_LABEL[inst.state] || inst.state}.`
        : `${shortId(inst.id)} will be ${done} at its next turn boundary.`);
    } catch (e) {
      report(e);
    }
    await loadTree().catch(report);
    loadRunsSoon();
  }

  async function answer(ev) {
    ev.preventDefault();
    const text = $('answer').value.trim();
    if (!text || !S.root) return;
    $('answer-send').disabled = true;
    try {
      await api('POST', `/api/instances/${enc(S.root)}/answer`, { text });
      $('answer').value = '';
      toast('Answer sent.');
      await loadTree();
    } catch (e) {
      $('answer-send').disabled = false;
      report(e);
    }
  }

  // ---- the chart ---------------------------------------------------------------

  const drawChartSoon = throttle(drawChart, 200);

  function drawChart() {
    const box = clear($('chart'));
    if (box.offsetParent === null) return; // hidden: drawn when shown
    // Drawn at the box's own width, so text is never scaled.
    const W = Math.max(280, Math.floor(box.clientWidth));
    S.chartWidth = W;
    const H = 160;
    const pad = { l: 54, r: 62, t: 22, b: 24 };
    const s = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart-svg' });
    const pts = S.points;
    const r = S.tree;
    const label = `Tokens and cost over the run: ${pts.length ? fmtTokens(pts[pts.length - 1].tokens) + ' tokens' : 'no model calls yet'}`;
    s.append(svg('title', {}, label));
    s.setAttribute('aria-label', label);
    box.append(s);
    if (!pts.length) {
      s.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'No model calls yet.'));
      return;
    }
    const t0 = Math.min(r ? Date.parse(r.created_at) || pts[0].t : pts[0].t, pts[0].t);
    let t1 = pts[pts.length - 1].t;
    if (r && TERMINAL.has(r.state) && r.ended_at) t1 = Math.max(t1, Date.parse(r.ended_at));
    else if (r) t1 = Math.max(t1, Date.now());
    if (t1 - t0 < 1000) t1 = t0 + 1000;
    const maxTok = niceMax(pts[pts.length - 1].tokens);
    const maxCost = niceMax(Math.max(...pts.map((p) => p.cost)));
    const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (W - pad.l - pad.r);
    const yT = (v) => H - pad.b - (v / maxTok) * (H - pad.t - pad.b);
    const yC = (v) => H - pad.b - (maxCost ? v / maxCost : 0) * (H - pad.t - pad.b);

    // Grid and axes.
    for (const f of [0, 0.5, 1]) {
      const y = yT(maxTok * f);
      s.append(svg('line', { x1: pad.l, x2: W - pad.r, y1: y, y2: y, class: 'grid' }));
      s.append(svg('text', { x: pad.l - 6, y: y + 4, 'text-anchor': 'end', class: 'axis axis-tokens' }, fmtTokens(maxTok * f)));
      if (S.priced) {
        s.append(svg('text', { x: W - pad.r + 6, y: y + 4, class: 'axis axis-cost' }, fmtCost(maxCost * f)));
      }
    }
    s.append(svg('text', { x: pad.l, y: H - 6, class: 'axis' }, '0s'));
    s.append(svg('text', { x: (pad.l + W - pad.r) / 2, y: H - 6, 'text-anchor': 'middle', class: 'axis' }, fmtSpan((t1 - t0) / 2)));
    s.append(svg('text', { x: W - pad.r, y: H - 6, 'text-anchor': 'end', class: 'axis' }, fmtSpan(t1 - t0)));

    // Tokens: a step line (the totals change at model calls) with an area.
    let d = `M ${x(t0)} ${yT(0)}`;
    let prev = 0;
    for (const p of pts) {
      d += ` L ${x(p.t)} ${yT(prev)} L ${x(p.t)} ${yT(p.tokens)}`;
      prev = p.tokens;
    }
    d += ` L ${x(t1)} ${yT(prev)}`;
    s.append(svg('path', { d: d + ` L ${x(t1)} ${yT(0)} Z`, class: 'area-tokens' }));
    // The root's waits (asking, paused) as bands up to its next state,
    // over the area and under the lines.
    for (let i = 0; i < S.marks.length; i++) {
      const m = S.marks[i];
      if (m.state !== 'asking' && m.state !== 'paused') continue;
      const next = S.marks[i + 1];
      const xa = x(m.t);
      const xb = next ? x(next.t) : x(t1);
      s.append(svg('rect', { x: xa, y: pad.t, width: Math.max(2, xb - xa), height: H - pad.t - pad.b, class: 'band band-' + m.state }));
      if (xb - xa > 48) s.append(svg('text', { x: xa + 4, y: pad.t - 6, class: 'band-label band-label-' + m.state }, m.state));
    }

    s.append(svg('path', { d, class: 'line-tokens' }));

    if (S.priced) {
      let c = `M ${x(t0)} ${yC(0)}`;
      let pc = 0;
      for (const p of pts) {
        c += ` L ${x(p.t)} ${yC(pc)} L ${x(p.t)} ${yC(p.cost)}`;
        pc = p.cost;
      }
      c += ` L ${x(t1)} ${yC(pc)}`;
      s.append(svg('path', { d: c, class: 'line-cost' }));
    }
    // A dot per model call.
    for (const p of pts) s.append(svg('circle', { cx: x(p.t), cy: yT(p.tokens), r: 2.5, class: 'dot-tokens' }));
    $('chart').parentElement.querySelector('.key-cost').textContent = S.priced ? 'cost (USD)' : 'cost: unpriced';
  }

  // ---- the timeline -------------------------------------------------------------

  const drawTimelineSoon = throttle(drawTimeline, 250);

  function drawTimeline() {
    const box = $('timeline');
    if (!S.tree || box.offsetParent === null) return; // hidden: drawn when shown
    const now = Date.now();
    const rows = [];
    (function walk(n) {
      const sp = window.DeputyTimeline.spans(n, S.moves.get(n.id) || [], now);
      rows.push({ id: n.id, depth: n.depth || 0, label: `${n.parent ? n.type || 'subagent' : 'root'} ${shortId(n.id)}`,
        segs: sp.segs, end: sp.end });
      for (const c of n.children || []) walk(c); // the server's spawn order
    })(S.tree);
    window.DeputyTimeline.draw(box, rows, fmtSpan);
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // ---- the side panel ------------------------------------------------------------

  function openNode(id) {
    if (S.node !== id) {
      S.node = id;
      S.tOffset = null;
    }
    for (const r of document.querySelectorAll('.node-row')) r.classList.toggle('selected', r.dataset.id === id);
    $('panel').hidden = false;
    $('app').classList.add('with-panel');
    renderPanelHead();
    loadPanel().catch(report);
  }

  function closePanel() {
    S.node = null;
    $('panel').hidden = true;
    $('app').classList.remove('with-panel');
    for (const r of document.querySelectorAll('.node-row.selected')) r.classList.remove('selected');
  }

  function renderPanelHead() {
    const n = S.byId.get(S.node);
    if (!n) return;
    setBadge($('panel-state'), n.state);
    $('panel-type').textContent = n.parent ? n.type || 'subagent' : 'root';
    $('panel-id').textContent = n.id;
    $('panel-task').textContent = firstLine(n.task, 200);
    for (const t of document.querySelectorAll('.tab')) {
      t.classList.toggle('active', t.dataset.tab === S.tab);
      t.setAttribute('aria-selected', String(t.dataset.tab === S.tab));
    }
  }

  const refreshPanelSoon = throttle(() => loadPanel(true), 500);

  async function loadPanel(live) {
    const id = S.node;
    if (!id) return;
    const tab = S.tab;
    // Following: the newest transcript page, the details, and a relay that
    // was not there yet.
    if (live && ((tab === 'relay' && !S.relayPending) || (tab === 'transcript' && S.tOffset !== null))) return;
    let content;
    if (tab === 'transcript') content = await transcriptView(id);
    else if (tab === 'relay') content = await relayView(id);
    else if (tab === 'calls') content = await callsView(id);
    else content = detailsView(id);
    if (id !== S.node || tab !== S.tab) return;
    const body = clear($('panel-body'));
    body.append(content);
    if (tab === 'transcript' && S.tOffset === null) body.scrollTop = body.scrollHeight;
  }

  async function transcriptView(id) {
    let off = S.tOffset === null ? 0 : S.tOffset;
    let res = await api('GET', `/api/instances/${enc(id)}/transcript?offset=${off}&limit=${PAGE}`);
    if (S.tOffset === null && res.total > PAGE) {
      off = res.total - PAGE;
      res = await api('GET', `/api/instances/${enc(id)}/transcript?offset=${off}&limit=${PAGE}`);
    }
    const wrap = el('div', 'transcript');
    const msgs = res.messages || [];
    const pager = el('div', 'pager');
    const from = msgs.length ? off + 1 : 0;
    pager.append(el('span', 'muted', `messages ${from}–${off + msgs.length} of ${res.total}`));
    const older = el('button', 'ghost small', '← older');
    older.type = 'button';
    older.disabled = off === 0;
    older.addEventListener('click', () => { S.tOffset = Math.max(0, off - PAGE); loadPanel().catch(report); });
    const newer = el('button', 'ghost small', 'newer →');
    newer.type = 'button';
    newer.disabled = off + msgs.length >= res.total;
    newer.addEventListener('click', () => {
      const next = off + PAGE;
      S.tOffset = next + PAGE >= res.total ? null : next;
      loadPanel().catch(report);
    });
    pager.append(older, newer);
    wrap.append(pager);
    if (!msgs.length) wrap.append(el('p', 'empty', 'No messages yet.'));
    msgs.forEach((m, i) => wrap.append(messageView(m, off + i + 1)));
    const n = S.byId.get(id);
    // The failure is the transcript's last word: shown after its last
    // message, where the page scrolls to.
    if (n && FAILED.has(n.state) && off + msgs.length >= res.total) wrap.append(failureView(n));
    return wrap;
  }

  function failureView(n) {
    const box = el('div', 'transcript-error');
    box.setAttribute('role', 'alert');
    let title = n.state === 'timed_out' ? 'Timed out' : 'Failed';
    if (n.stop_reason) title += ` (${n.stop_reason.replace(/_/g, ' ')})`;
    box.append(el('b', '', title), clipped('blk-out', n.error || '(no error was recorded)'));
    return box;
  }

  // callsView lists each model call of the instance (a turn's call) with
  // every attempt it took: status, error, latency, and the wait before the
  // retry that followed.
  async function callsView(id) {
    const res = await api('GET', `/api/instances/${enc(id)}/attempts`);
    const wrap = el('div', 'calls');
    const all = (res && res.attempts) || [];
    if (!all.length) {
      wrap.append(el('p', 'empty', 'No model calls recorded yet. The built-in scripted model (--model fake) ' +
        'makes no HTTP calls, so its instances record none.'));
      return wrap;
    }
    const turns = new Map();
    for (const a of all) {
      if (!turns.has(a.turn)) turns.set(a.turn, []);
      turns.get(a.turn).push(a);
    }
    for (const [turn, as] of turns) {
      const last = as[as.length - 1];
      const ok = !last.error && (!last.status || last.status < 400);
      const box = el('div', 'call' + (ok ? '' : ' call-failed'));
      box.dataset.turn = turn;
      const head = el('div', 'call-head');
      head.append(el('b', '', `turn ${turn}`), el('span', 'muted', `${as.length} attempt${as.length === 1 ? '' : 's'}`),
        el('span', ok ? 'call-ok' : 'call-bad', ok ? 'ok' : 'failed'), el('span', 'mono muted', last.model || ''));
      const table = el('table', 'attempts');
      const hr = el('tr');
      for (const h of ['#', 'status', 'error', 'latency', 'retry wait']) hr.append(el('th', '', h));
      table.append(hr);
      for (const a of as) {
        const tr = el('tr', 'attempt' + (a.error ? ' attempt-error' : ''));
        tr.dataset.n = a.n;
        const err = [a.reason, a.error].filter(Boolean).join(': ') + (a.discarded ? ' (discarded)' : '');
        const cell = el('td', 'attempt-err', err || '—');
        cell.title = err;
        tr.append(el('td', 'num', a.n), el('td', 'num', a.status || '—'), cell, el('td', 'num', fmtSpan(a.latency_ms)),
          el('td', 'num', a.retry ? fmtSpan(a.wait_ms) : '—'));
        table.append(tr);
      }
      box.append(head, table);
      wrap.append(box);
    }
    return wrap;
  }

  function messageView(m, n) {
    const box = el('div', 'msg msg-' + m.role);
    box.append(el('div', 'msg-role', `${m.role} · #${n}`));
    for (const b of m.content || []) box.append(blockView(b));
    return box;
  }

  function clipped(cls, text) {
    const pre = el('pre', cls);
    if (text.length <= CLIP) {
      pre.textContent = text;
      return pre;
    }
    pre.textContent = text.slice(0, CLIP) + '…';
    const wrap = el('div');
    const more = el('button', 'ghost small', `Show all ${fmtInt(text.length)} characters`);
    more.type = 'button';
    more.addEventListener('click', () => { pre.textContent = text; more.remove(); });
    wrap.append(pre, more);
    return wrap;
  }

  function pretty(raw) {
    if (raw === undefined || raw === null) return '';
    if (typeof raw !== 'string') return JSON.stringify(raw, null, 2);
    try { return JSON.stringify(JSON.parse(raw), null, 2); } catch (e) { return raw; }
  }

  function blockView(b) {
    switch (b.type) {
      case 'text':
        return clipped('blk-text', b.text || '');
      case 'tool_use': {
        const d = el('div', 'blk blk-call');
        const h = el('div', 'blk-head');
        h.append(el('span', 'arrow', '→'), el('b', '', b.name), el('span', 'mono muted', shortId(b.id)));
        d.append(h, clipped('blk-json', pretty(b.input)));
        return d;
      }
      case 'tool_result': {
        const d = el('div', 'blk blk-result' + (b.is_error ? ' blk-error' : ''));
        const h = el('div', 'blk-head');
        h.append(el('span', 'arrow', '←'), el('b', '', b.is_error ? 'error' : 'result'), el('span', 'mono muted', shortId(b.tool_use_id)));
        d.append(h, clipped('blk-out', b.text || ''));
        return d;
      }
      default: {
        const d = el('details', 'blk blk-other');
        d.append(el('summary', '', b.type), clipped('blk-json', pretty(b.raw)));
        return d;
      }
    }
  }

  async function relayView(id) {
    const wrap = el('div', 'relay');
    let r;
    S.relayPending = false;
    try {
      r = await api('GET', `/api/instances/${enc(id)}/relay`);
    } catch (e) {
      if (e.status !== 409) throw e;
      S.relayPending = true;
      wrap.append(el('p', 'empty', 'No relay yet: the instance has not ended. ' + e.message));
      return wrap;
    }
    wrap.append(el('p', 'muted small', 'What the parent agent reads as the spawn tool’s result:'));
    wrap.append(clipped('relay-text', r.text || ''));
    wrap.append(facts([
      ['state', r.state], ['incomplete', r.incomplete ? 'yes' : 'no'], ['error', r.error],
      ['tokens', `${fmtInt(tokensOf(r.usage))} (${usageTitle(r.usage)})`], ['cost', fmtCost(r.cost)],
      ['artifacts', Array.isArray(r.artifacts) ? r.artifacts.join(', ') : r.artifacts ? JSON.stringify(r.artifacts) : ''],
    ]));
    return wrap;
  }

  function detailsView(id) {
    const n = S.byId.get(id) || {};
    const wrap = el('div', 'details');
    wrap.append(facts([
      ['id', n.id], ['parent', n.parent], ['root', n.root], ['type', n.type], ['mode', n.mode], ['model', n.model],
      ['state', STATE_LABEL[n.state] || n.state], ['stop reason', n.stop_reason], ['question', n.question],
      ['turns', fmtInt(n.turns)], ['tool calls', fmtInt(n.tool_calls)], ['tokens', usageTitle(n.usage)],
      ['cost', fmtCost(n.cost)], ['created', fmtTime(n.created_at)], ['updated', fmtTime(n.updated_at)],
      ['ended', n.ended_at ? fmtTime(n.ended_at) : ''], ['error', n.error],
    ]));
    if (n.task) {
      wrap.append(el('h3', '', 'Task'), clipped('prose', n.task));
    }
    if (n.report) {
      wrap.append(el('h3', '', 'Report'), clipped('prose', n.report));
    }
    if (n.parent && !TERMINAL.has(n.state)) {
      const b = el('button', 'danger', 'Cancel this instance');
      b.type = 'button';
      b.dataset.action = 'cancel';
      b.dataset.target = n.id;
      b.addEventListener('click', control);
      wrap.append(b);
    }
    return wrap;
  }

  function facts(rows) {
    const dl = el('dl', 'facts');
    for (const [k, v] of rows) {
      if (v === undefined || v === null || v === '') continue;
      dl.append(el('dt', '', k), el('dd', '', v));
    }
    return dl;
  }

  // ---- a new run -------------------------------------------------------------------

  let defsLoaded = false;
  async function openNewRun() {
    $('nr-error').textContent = '';
    $('new-run').showModal();
    $('nr-task').focus();
    if (defsLoaded) return;
    try {
      const res = await api('GET', '/api/definitions');
      const sel = $('nr-type');
      for (const d of (res && res.definitions) || []) {
        const o = el('option', '', d.name);
        o.value = d.name;
        o.title = d.description || '';
        sel.append(o);
      }
      defsLoaded = true;
    } catch (e) {
      report(e);
    }
  }

  async function newRun(ev) {
    ev.preventDefault();
    const body = { task: $('nr-task').value.trim() };
    if (!body.task) return;
    if ($('nr-type').value) body.type = $('nr-type').value;
    if ($('nr-model').value.trim()) body.model = $('nr-model').value.trim();
    const turns = parseInt($('nr-turns').value, 10);
    if (turns > 0) body.max_turns = turns;
    $('nr-submit').disabled = true;
    try {
      const inst = await api('POST', '/api/instances', body);
      $('new-run').close();
      $('nr-task').value = '';
      await loadRuns();
      selectRun(inst.root || inst.id);
    } catch (e) {
      $('nr-error').textContent = e.message;
    } finally {
      $('nr-submit').disabled = false;
    }
  }

  // ---- start -------------------------------------------------------------------------

  function showApp() {
    S.signedIn = true;
    $('boot').hidden = true;
    $('signin').hidden = true;
    $('app').hidden = false;
    openListStream(null);
    const h = applyHash();
    if (h.run) selectRun(h.run);
    loadRuns().catch(report);
    loadTypes().catch(report);
  }

  function wire() {
    $('signin-form').addEventListener('submit', signIn);
    $('signout').addEventListener('click', signOut);
    for (const id of ['runs-filter', 'runs-type']) {
      $(id).addEventListener('change', () => { writeHash(); loadRuns().catch(report); });
    }
    // The text is matched here, on the list already read: no request per key.
    $('runs-search').addEventListener('input', () => { writeHash(); renderRuns(); });
    for (const id of ['ctl-pause', 'ctl-resume', 'ctl-cancel']) $(id).addEventListener('click', control);
    $('answer-form').addEventListener('submit', answer);
    $('answer').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) $('answer-form').requestSubmit();
    });
    $('panel-close').addEventListener('click', closePanel);
    $('toast').addEventListener('click', () => { $('toast').hidden = true; });
    for (const t of document.querySelectorAll('.tab')) {
      t.addEventListener('click', () => {
        S.tab = t.dataset.tab;
        S.tOffset = null;
        renderPanelHead();
        loadPanel().catch(report);
      });
    }
    $('new-run-open').addEventListener('click', openNewRun);
    $('new-run-form').addEventListener('submit', newRun);
    $('nr-cancel').addEventListener('click', () => $('new-run').close());
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && S.node && !$('new-run').open) closePanel();
    });
    // The chart follows its box's width: the window, the side panel.
    new ResizeObserver(() => {
      if (Math.floor($('chart').clientWidth) !== S.chartWidth) { drawChartSoon(); drawTimelineSoon(); }
    }).observe($('chart'));
    // An address typed or pasted: its run and its filters.
    window.addEventListener('hashchange', () => {
      if (!S.signedIn) return;
      const h = applyHash();
      if (h.run) selectRun(h.run);
      renderRuns();
      loadRuns().catch(report);
    });
    // Relative times and a running run's duration move on.
    setInterval(() => {
      if (!S.signedIn) return;
      if (S.tree && !TERMINAL.has(S.tree.state)) { renderRunClock(); drawChartSoon(); drawTimelineSoon(); }
      for (const li of $('runs').children) {
        const r = S.runs.find((x) => x.id === li.dataset.id);
        const meta = li.querySelector('.run-ago');
        if (r && meta) meta.textContent = ago(r.created_at);
      }
    }, 5000);
  }

  function renderRunClock() {
    const r = S.tree;
    $('run-time').textContent = `started ${fmtTime(r.created_at)} · for ${fmtDuration(Date.now() - Date.parse(r.created_at))}`;
  }

  async function boot() {
    wire();
    try {
      await api('GET', '/api/session');
      showApp();
    } catch (e) {
      showSignin(e.status === 401 ? '' : e.message);
    }
  }

  boot();
})();
