// The hookrelay console (issue 12): a single-page app over the /v1 API.
// It signs in with an API key (kept in sessionStorage, sent as a Bearer
// token) and calls the same endpoints any client calls, so it shows and
// does exactly what the key may. Pages, by URL hash:
//   #/                                   endpoints
//   #/endpoints/{id}                     one endpoint
//   #/endpoints/{id}/log?<filters>       its delivery log
//   #/endpoints/{id}/messages/{msg_id}   one message, every attempt
//   #/new                                create an endpoint
//   #/dlq?<filters>                      the DLQ: list and replay
// Libraries (vendor/, see NOTICE.md): Preact + htm for the views, uPlot for
// the charts.
import { h, render } from './vendor/preact.js';
import { useState, useEffect, useRef, useCallback } from './vendor/preact-hooks.js';
import htm from './vendor/htm.js';
import uPlot from './vendor/uPlot.js';

const html = htm.bind(h);
const KEY = 'hookrelay.apiKey';

// Outcomes of an attempt (audit.Outcomes), and those that count as failed.
const OUTCOMES = ['delivered', 'retry_scheduled', 'failed', 'gone', 'blocked', 'abandoned', 'exhausted', 'expired',
  'skipped', 'config_error', 'interrupted'];
const FAILURES = 'retry_scheduled,failed,gone,blocked,exhausted,expired,abandoned,skipped,config_error,interrupted';

// ---- the API ---------------------------------------------------------------

class APIError extends Error {
  constructor(status, message, problem) { super(message); this.status = status; this.problem = problem; }
}

let onUnauthorized = () => {};

// idempotencyKey makes one Idempotency-Key per user action (crypto.randomUUID
// needs a secure context; getRandomValues does not).
function idempotencyKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return 'console-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + sessionStorage.getItem(KEY) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method === 'POST') headers['Idempotency-Key'] = idempotencyKey();
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new APIError(0, 'the API did not answer: ' + e.message);
  }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (r.status === 401) onUnauthorized();
  if (!r.ok) {
    const detail = data && (data.detail || data.title);
    throw new APIError(r.status, `${r.status} ${detail || r.statusText}`, data);
  }
  return data;
}

const enc = encodeURIComponent;

// ---- routing ---------------------------------------------------------------

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(qs || '');
  if (parts[0] === 'new') return { page: 'new', query };
  if (parts[0] === 'dlq') return { page: 'dlq', query };
  if (parts[0] === 'endpoints' && parts.length >= 2) {
    if (parts[2] === 'log') return { page: 'log', id: parts[1], query };
    if (parts[2] === 'messages' && parts[3]) return { page: 'message', id: parts[1], msg: parts[3], query };
    return { page: 'endpoint', id: parts[1], query };
  }
  return { page: 'endpoints', query };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute());
  useEffect(() => {
    const f = () => setRoute(parseRoute());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return route;
}

const hrefEndpoint = (id) => `#/endpoints/${enc(id)}`;
const hrefLog = (id, q) => `#/endpoints/${enc(id)}/log` + (q && q.toString() ? '?' + q.toString() : '');
const hrefMessage = (id, msg) => `#/endpoints/${enc(id)}/messages/${enc(msg)}`;

// ---- formatting ------------------------------------------------------------

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;
const timeFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  fractionalSecondDigits: 3, hour12: false,
});

// Time shows an RFC 3339 instant in the viewer's zone, the UTC value on hover.
function Time({ t, none = '—' }) {
  if (!t) return html`<span class="muted">${none}</span>`;
  const d = new Date(t);
  if (isNaN(d)) return html`<span>${t}</span>`;
  return html`<time datetime=${d.toISOString()} title=${'UTC ' + d.toISOString()}>${timeFmt.format(d)}</time>`;
}

function pct(x) { return x === null || x === undefined ? null : (x * 100).toFixed(x >= 0.9995 || x === 0 ? 0 : 1) + '%'; }
function ms(x) { return x === null || x === undefined ? null : x + ' ms'; }
const NoData = () => html`<span class="muted">no data</span>`;
const orNoData = (s) => (s === null || s === undefined ? html`<${NoData} />` : s);

// datetime-local values are local wall time; these convert to and from RFC 3339.
function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
function fromLocalInput(v) { return v ? new Date(v).toISOString() : ''; }

function Status({ status, reason }) {
  return html`<span class=${'badge ' + status} title=${reason || ''}>${status}${reason ? ` (${reason})` : ''}</span>`;
}
function Outcome({ o }) { return html`<span class=${'badge o-' + o}>${o}</span>`; }

function ErrorBox({ err }) {
  if (!err) return null;
  return html`<p class="error" role="alert">${err.message || String(err)}</p>`;
}

// useLoad runs load() on every change of deps; reload() runs it again.
// loading is true from the render where deps change until the answer for
// them arrives (data is then still the previous answer).
function useLoad(load, deps) {
  const key = JSON.stringify(deps);
  const [state, setState] = useState({ key: null, data: null, err: null });
  const [n, setN] = useState(0);
  const current = useRef(key);
  current.current = key;
  useEffect(() => {
    // An answer for other deps is dropped; a reload's answers all land
    // (the newest last), so quick reloads never leave the page loading.
    setState((s) => ({ ...s, key: null }));
    load().then((data) => current.current === key && setState({ key, data, err: null }),
      (err) => current.current === key && setState({ key, data: null, err }));
  }, [key, n]);
  return [{ loading: state.key !== key, data: state.data, err: state.err }, useCallback(() => setN((x) => x + 1), [])];
}

// ---- sign-in ---------------------------------------------------------------

function SignIn({ onSignIn, message }) {
  const [key, setKey] = useState('');
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit(e) {
    e.preventDefault();
    setBusy(true); setErr(null);
    sessionStorage.setItem(KEY, key.trim());
    try {
      await api('GET', '/v1/endpoints');
      onSignIn();
    } catch (e2) {
      sessionStorage.removeItem(KEY);
      setErr(e2.status === 401 ? new Error('This API key is unknown or revoked.') : e2);
    } finally { setBusy(false); }
  }
  return html`<main id="main" class="signin" tabindex="-1">
    <h1>hookrelay console</h1>
    <p>Sign in with an API key (<code>hookrelay apikeys create --tenant T</code>, or <code>--admin</code> to see every tenant).
      The key stays in this browser tab only (session storage).</p>
    ${message && html`<p class="notice" role="status">${message}</p>`}
    <form id="signin" onSubmit=${submit}>
      <label for="apikey">API key</label>
      <input id="apikey" name="apikey" type="password" autocomplete="off" spellcheck="false" required autofocus
        placeholder="hrk_…" value=${key} onInput=${(e) => setKey(e.target.value)} />
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
    <${ErrorBox} err=${err} />
  </main>`;
}

// ---- endpoints -------------------------------------------------------------

async function loadEndpoints() {
  try {
    const r = await api('GET', '/v1/endpoints?include=stats');
    return { endpoints: r.data, statsErr: r.data.some((e) => e.stats_24h) || r.data.length === 0 ? null : 'no stats in the answer' };
  } catch (e) {
    if (e.status === 401) throw e;
    const r = await api('GET', '/v1/endpoints'); // the list without figures
    return { endpoints: r.data, statsErr: e.message };
  }
}

function EndpointsPage() {
  const [{ loading, data, err }, reload] = useLoad(loadEndpoints, []);
  const [filter, setFilter] = useState('');
  const eps = (data ? data.endpoints : []).filter((e) => {
    const f = filter.trim().toLowerCase();
    return !f || [e.id, e.url, e.tenantid || '', e.status, e.health || ''].some((s) => s.toLowerCase().includes(f));
  });
  return html`<section aria-labelledby="h-endpoints">
    <h1 id="h-endpoints">Endpoints</h1>
    <div class="toolbar">
      <label for="ep-filter">Filter by ID, URL, tenant or health</label>
      <input id="ep-filter" type="search" value=${filter} onInput=${(e) => setFilter(e.target.value)} />
      <button type="button" onClick=${reload}>Refresh</button>
      <a id="link-new" class="button" href="#/new">Create endpoint</a>
    </div>
    <${ErrorBox} err=${err} />
    ${data && data.statsErr && html`<p class="notice" role="status">Figures of the last 24 h are unavailable (${data.statsErr}): shown as “no data”.</p>`}
    ${loading && !data ? html`<p class="muted">Loading…</p>` : html`
    <table id="endpoints" class="grid">
      <caption>${eps.length} endpoint${eps.length === 1 ? '' : 's'}; figures over the last 24 whole hours and this hour so far</caption>
      <thead><tr><th scope="col">Endpoint</th><th scope="col">URL</th><th scope="col">Tenant</th><th scope="col">Health</th>
        <th scope="col" class="num">Attempts</th><th scope="col" class="num">Success rate</th><th scope="col" class="num">p99 latency</th>
        <th scope="col">Last attempt</th><th scope="col"><span class="sr">Links</span></th></tr></thead>
      <tbody>${eps.map((e) => {
        const s = e.stats_24h || {};
        const bad = s.success_rate !== null && s.success_rate !== undefined && s.success_rate < 0.9;
        return html`<tr key=${e.id} class=${bad ? 'bad' : ''} data-endpoint=${e.id}>
          <th scope="row"><a href=${hrefEndpoint(e.id)}>${e.id}</a></th>
          <td class="url">${e.url}</td><td>${e.tenantid || html`<span class="muted">none</span>`}</td>
          <td class="health"><${Status} status=${e.health || e.status} reason=${e.status_reason} /></td>
          <td class="num">${orNoData(s.attempts)}</td>
          <td class="num">${orNoData(pct(s.success_rate))}</td>
          <td class="num">${orNoData(ms(s.latency_p99_ms))}</td>
          <td><${Time} t=${s.last_attempt_at} none=${e.stats_24h ? 'none' : 'no data'} /></td>
          <td><a href=${hrefLog(e.id)} aria-label=${'Delivery log of ' + e.id}>log</a></td>
        </tr>`;
      })}</tbody>
    </table>`}
  </section>`;
}

// ---- one endpoint ----------------------------------------------------------

const RANGES = { '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3, '7d': 7 * 24 * 3600e3 };

function Chart({ id, title, series, data, range, yLabel, yMax }) {
  const ref = useRef(null);
  useEffect(() => {
    if (!ref.current || !data) return undefined;
    const width = Math.max(320, ref.current.clientWidth || 600);
    const plot = new uPlot({
      width, height: 220,
      scales: { x: { time: true, range: () => range }, y: { range: (u, min, max) => [0, yMax || Math.max(1, max || 0) * 1.1] } },
      axes: [{}, { label: yLabel, size: 60 }],
      series: [{ label: 'time' }, ...series.map((x) => ({ points: { show: true, size: 5 }, ...x }))],
    }, data, ref.current);
    return () => plot.destroy();
  }, [data]);
  return html`<figure class="chart">
    <figcaption id=${id + '-cap'}>${title}</figcaption>
    <div id=${id} ref=${ref} role="img" aria-labelledby=${id + '-cap'}></div>
  </figure>`;
}

// dense returns one bucket per step of [from, to): the API leaves out the
// buckets without attempts; their counts are 0 and their rates unknown.
function dense(buckets, from, to, stepMs) {
  const byStart = new Map(buckets.map((b) => [Math.floor(Date.parse(b.start) / stepMs), b]));
  const out = [];
  for (let i = Math.floor(from / stepMs); i * stepMs < to; i++) {
    out.push(byStart.get(i) || { start: new Date(i * stepMs).toISOString(), attempts: 0, delivered: 0, failed: 0, throttled: 0,
      success_rate: null, latency_p50_ms: null, latency_p99_ms: null });
  }
  return out;
}

function StatsCharts({ id }) {
  const [gran, setGran] = useState('minute');
  const [range, setRange] = useState('1h');
  const g = range === '7d' ? 'hour' : gran; // the API serves at most 24 h per minute
  const [{ loading, data, err }] = useLoad(async () => {
    const to = new Date();
    const from = new Date(to - RANGES[range]);
    return api('GET', `/v1/endpoints/${enc(id)}/stats?from=${enc(from.toISOString())}&to=${enc(to.toISOString())}&granularity=${g}`);
  }, [id, g, range]);
  const from = data ? Date.parse(data.from) : 0;
  const to = data ? Date.parse(data.to) : 0;
  const b = data ? dense(data.buckets || [], from, to, g === 'hour' ? 3600e3 : 60e3) : [];
  const xs = b.map((x) => Date.parse(x.start) / 1000);
  const col = (f) => b.map((x) => (x[f] === null || x[f] === undefined ? null : f === 'success_rate' ? x[f] * 100 : x[f]));
  const total = b.reduce((n, x) => n + (x.attempts || 0), 0);
  const xr = [from / 1000, to / 1000];
  return html`<section aria-labelledby="h-charts">
    <h2 id="h-charts">Success rate and latency</h2>
    <div class="toolbar">
      <label for="stats-range">Range</label>
      <select id="stats-range" value=${range} onChange=${(e) => setRange(e.target.value)}>
        ${Object.keys(RANGES).map((r) => html`<option value=${r}>last ${r}</option>`)}
      </select>
      <label for="stats-gran">Per</label>
      <select id="stats-gran" value=${g} onChange=${(e) => setGran(e.target.value)}>
        <option value="minute" disabled=${range === '7d'}>minute</option><option value="hour">hour</option>
      </select>
    </div>
    ${err ? html`<p class="notice" id="stats-nodata" role="status">No data: the figures could not be read (${err.message}).</p>`
      : loading && !data ? html`<p class="muted">Loading…</p>`
      : total === 0 ? html`<p class="notice" id="stats-nodata" role="status">No data: no attempts in this range.</p>`
      : html`<p class="muted">${total} attempts in the last ${range}, per ${g}; times in ${ZONE}.</p>
        <div class="charts">
          <${Chart} id="chart-success" title="Success rate (%)" yLabel="%" yMax=${100} data=${[xs, col('success_rate')]} range=${xr}
            series=${[{ label: 'success rate %', stroke: '#1a7f37', width: 2 }]} />
          <${Chart} id="chart-latency" title="Latency (ms)" yLabel="ms" data=${[xs, col('latency_p50_ms'), col('latency_p99_ms')]} range=${xr}
            series=${[{ label: 'p50 ms', stroke: '#0969da', width: 2 }, { label: 'p99 ms', stroke: '#bc4c00', width: 2 }]} />
          <${Chart} id="chart-attempts" title="Attempts" yLabel="attempts" range=${xr}
            data=${[xs, col('delivered'), col('failed'), col('throttled')]}
            series=${[{ label: 'delivered', stroke: '#1a7f37' }, { label: 'failed', stroke: '#cf222e' }, { label: 'throttled', stroke: '#9a6700' }]} />
        </div>`}
  </section>`;
}

function Counts({ c }) {
  if (!c) return html`<${NoData} />`;
  return html`${c.attempts} attempts, ${c.delivered} delivered, ${c.failed} failed; success ${orNoData(pct(c.success_rate))}`;
}

function Actions({ ep, onChange }) {
  const [busy, setBusy] = useState(false);
  const [msg, setMsg] = useState(null);
  const [err, setErr] = useState(null);
  const [secret, setSecret] = useState(null);
  const [reason, setReason] = useState('');
  const [since, setSince] = useState(toLocalInput(new Date(Date.now() - 3600e3).toISOString()));
  const [includeFailed, setIncludeFailed] = useState(false);
  const [confirmRotate, setConfirmRotate] = useState(false);
  async function run(what, fn) {
    setBusy(true); setErr(null); setMsg(null);
    try { setMsg(await fn()); onChange(); } catch (e) { setErr(new Error(what + ': ' + e.message)); } finally { setBusy(false); }
  }
  const base = `/v1/endpoints/${enc(ep.id)}`;
  return html`<section aria-labelledby="h-actions">
    <h2 id="h-actions">Actions</h2>
    <div class="actions">
      <div class="action">
        <button id="btn-enable" type="button" disabled=${busy || ep.status === 'active'}
          onClick=${() => run('enable', async () => { await api('POST', base + '/enable'); return 'Enabled.'; })}>Enable</button>
      </div>
      <form class="action" onSubmit=${(e) => { e.preventDefault(); run('disable', async () => { await api('POST', base + '/disable', reason ? { reason } : undefined); return 'Disabled.'; }); }}>
        <label for="disable-reason">Reason (optional)</label>
        <input id="disable-reason" value=${reason} onInput=${(e) => setReason(e.target.value)} />
        <button id="btn-disable" type="submit" disabled=${busy || ep.status === 'disabled'}>Disable</button>
      </form>
      <div class="action">
        ${confirmRotate ? html`<span>The current secrets keep signing for 24 h.</span>
          <span><button id="btn-rotate-confirm" type="button" disabled=${busy} onClick=${() => {
            setConfirmRotate(false);
            run('rotate', async () => {
              const r = await api('POST', base + '/secret/rotate');
              setSecret(r.secret);
              return html`Secret rotated; the previous secrets expire at <${Time} t=${r.previous_expire_at} />.`;
            });
          }}>Rotate now</button> <button type="button" onClick=${() => setConfirmRotate(false)}>Cancel</button></span>`
          : html`<button id="btn-rotate" type="button" disabled=${busy} onClick=${() => setConfirmRotate(true)}>Rotate secret…</button>`}
      </div>
      <form class="action" onSubmit=${(e) => {
        e.preventDefault();
        run('recover', async () => {
          const r = await api('POST', base + '/recover', { since: fromLocalInput(since), include_failed: includeFailed });
          return `Recovery ${r.id}: ${r.found} messages found, ${r.queued} queued for delivery.`;
        });
      }}>
        <label for="recover-since">Recover messages since (your time, ${ZONE})</label>
        <input id="recover-since" type="datetime-local" required value=${since} onInput=${(e) => setSince(e.target.value)} />
        <label class="check"><input id="recover-failed" type="checkbox" checked=${includeFailed}
          onChange=${(e) => setIncludeFailed(e.target.checked)} /> include permanent failures (4xx)</label>
        <button id="btn-recover" type="submit" disabled=${busy}>Recover</button>
      </form>
    </div>
    <div aria-live="polite" id="action-result">${msg && html`<p class="ok">${msg}</p>`}</div>
    <${ErrorBox} err=${err} />
    ${secret && html`<div class="secret" role="alert">
      <p><strong>New signing secret — shown only this once.</strong> Give it to the receiver now.</p>
      <label for="new-secret">New secret</label>
      <input id="new-secret" readonly value=${secret} size="60" onFocus=${(e) => e.target.select()} />
      <button type="button" onClick=${() => navigator.clipboard && navigator.clipboard.writeText(secret)}>Copy</button>
      <button type="button" onClick=${() => setSecret(null)}>I have saved it: hide</button>
    </div>`}
  </section>`;
}

function EndpointPage({ id }) {
  const [{ data: ep, err }, reload] = useLoad(() => api('GET', `/v1/endpoints/${enc(id)}`), [id]);
  const [{ data: health, err: herr }, reloadHealth] = useLoad(() => api('GET', `/v1/endpoints/${enc(id)}/health`), [id]);
  const again = () => { reload(); reloadHealth(); };
  if (err) return html`<section><h1>Endpoint ${id}</h1><${ErrorBox} err=${err} /><p><a href="#/">All endpoints</a></p></section>`;
  if (!ep) return html`<p class="muted">Loading…</p>`;
  return html`<section aria-labelledby="h-endpoint">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Endpoints</a> › ${id}</nav>
    <h1 id="h-endpoint">Endpoint <code>${ep.id}</code> <${Status} status=${ep.status} reason=${ep.status_reason} /></h1>
    <p><a id="link-log" href=${hrefLog(ep.id)}>Delivery log</a> · <a href=${hrefLog(ep.id, new URLSearchParams({ outcome: FAILURES }))}>Failures only</a></p>
    <div class="cols">
      <section aria-labelledby="h-config" class="card">
        <h2 id="h-config">Configuration</h2>
        <dl id="config">
          <dt>URL</dt><dd class="url">${ep.url}</dd>
          <dt>Tenant</dt><dd>${ep.tenantid || html`<span class="muted">none</span>`}</dd>
          <dt>Event types</dt><dd>${ep.event_types.map((t) => html`<code>${t}</code> `)}</dd>
          <dt>Rate</dt><dd>${ep.rate_per_sec} requests/s, at most ${ep.max_in_flight} in flight</dd>
          <dt>Timeouts</dt><dd>${ep.timeout} per request, ${ep.connect_timeout} to connect</dd>
          <dt>Signing secrets</dt><dd>${ep.secrets.map((s) => html`<div><code>${s.masked}</code>${s.expires_at && html` expires <${Time} t=${s.expires_at} />`}</div>`)}</dd>
          <dt>Created</dt><dd><${Time} t=${ep.created_at} /></dd>
          <dt>Updated</dt><dd><${Time} t=${ep.updated_at} /> (version ${ep.version})</dd>
          ${ep.config_error && html`<dt>Config errors</dt><dd>${ep.config_error.map((f) => html`<div>${f.field}: ${f.reason}</div>`)}</dd>`}
        </dl>
      </section>
      <section aria-labelledby="h-health" class="card">
        <h2 id="h-health">Health</h2>
        ${herr ? html`<p class="notice">No data: ${herr.message}</p>` : !health ? html`<p class="muted">Loading…</p>` : html`
        <dl id="health">
          <dt>Status</dt><dd><${Status} status=${health.status} reason=${health.reason} /></dd>
          <dt>Failing since</dt><dd><${Time} t=${health.failing_since} none="not failing" /></dd>
          <dt>Last success</dt><dd><${Time} t=${health.last_success_at} none="none" /></dd>
          <dt>Last attempt</dt><dd><${Time} t=${health.last_attempt_at} none="none" /></dd>
          <dt>Last hour</dt><dd><${Counts} c=${health.last_hour} /></dd>
          <dt>Last 24 hours</dt><dd><${Counts} c=${health.last_day} /></dd>
        </dl>`}
      </section>
    </div>
    <${StatsCharts} id=${ep.id} />
    <${Actions} ep=${ep} onChange=${again} />
  </section>`;
}

// ---- the delivery log ------------------------------------------------------

const FILTERS = ['since', 'until', 'outcome', 'event_type', 'event_id', 'webhook_id'];

// LogPage is remounted for each query (App keys it), so the form starts
// from the URL's filters and never overwrites what is being typed.
function LogPage({ id, query }) {
  const qkey = query.toString();
  const [form, setForm] = useState(() => ({
    since: toLocalInput(query.get('since')), until: toLocalInput(query.get('until')),
    outcome: query.get('outcome') || '', event_type: query.get('event_type') || '',
    event_id: query.get('event_id') || query.get('webhook_id') || '',
    limit: query.get('limit') || '50',
  }));
  const [{ loading, data, err }] = useLoad(() => {
    const q = new URLSearchParams();
    for (const f of FILTERS) if (query.get(f)) q.set(f, query.get(f));
    q.set('limit', query.get('limit') || '50');
    if (query.get('cursor')) q.set('cursor', query.get('cursor'));
    return api('GET', `/v1/endpoints/${enc(id)}/attempts?${q}`);
  }, [id, qkey]);
  function apply(e) {
    e.preventDefault();
    const term = form.event_id.trim();
    const q = new URLSearchParams();
    if (form.since) q.set('since', fromLocalInput(form.since));
    if (form.until) q.set('until', fromLocalInput(form.until));
    if (form.outcome) q.set('outcome', form.outcome);
    if (form.event_type.trim()) q.set('event_type', form.event_type.trim());
    if (term) q.set(term.startsWith('msg_') ? 'webhook_id' : 'event_id', term); // msg_…: a webhook-id
    if (form.limit !== '50') q.set('limit', form.limit);
    location.hash = hrefLog(id, q);
  }
  const set = (f) => (e) => setForm({ ...form, [f]: e.target.value });
  const page = Number(query.get('page') || '1');
  function older() {
    const q = new URLSearchParams(query);
    q.set('cursor', data.next_cursor);
    q.set('page', String(page + 1));
    location.hash = hrefLog(id, q);
  }
  const newest = new URLSearchParams(query);
  newest.delete('cursor'); newest.delete('page');
  const rows = data ? data.data : [];
  return html`<section aria-labelledby="h-log">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Endpoints</a> › <a href=${hrefEndpoint(id)}>${id}</a> › log</nav>
    <h1 id="h-log">Delivery log of <code>${id}</code></h1>
    <form id="log-filters" class="filters" onSubmit=${apply}>
      <div><label for="f-since">From (${ZONE})</label><input id="f-since" type="datetime-local" value=${form.since} onInput=${set('since')} /></div>
      <div><label for="f-until">To (${ZONE})</label><input id="f-until" type="datetime-local" value=${form.until} onInput=${set('until')} /></div>
      <div><label for="f-outcome">Outcome</label>
        <select id="f-outcome" value=${form.outcome} onChange=${set('outcome')}>
          <option value="">any</option>
          <option value=${FAILURES}>any failure</option>
          ${OUTCOMES.map((o) => html`<option value=${o}>${o}</option>`)}
        </select></div>
      <div><label for="f-type">Event type</label><input id="f-type" value=${form.event_type} onInput=${set('event_type')} placeholder="invoice.paid" /></div>
      <div><label for="f-id">Event ID or webhook-id</label><input id="f-id" value=${form.event_id} onInput=${set('event_id')} placeholder="evt-1 or msg_…" /></div>
      <div><label for="f-limit">Rows per page</label>
        <select id="f-limit" value=${form.limit} onChange=${set('limit')}>${[...new Set(['10', '20', '50', '100', '500', form.limit])].sort((a, b) => a - b).map((n) => html`<option value=${n}>${n}</option>`)}</select></div>
      <div class="buttons"><button id="f-apply" type="submit">Apply filters</button>
        <a class="button" href=${hrefLog(id)}>Clear</a></div>
    </form>
    <${ErrorBox} err=${err} />
    ${loading && !data ? html`<p class="muted">Loading…</p>` : html`
    <table id="log" class="grid">
      <caption>Page ${page}: ${rows.length} attempt${rows.length === 1 ? '' : 's'}, newest first${loading ? ' (loading…)' : ''}</caption>
      <thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Type</th><th scope="col" class="num">Attempt</th>
        <th scope="col" class="num">Status</th><th scope="col">Outcome</th><th scope="col" class="num">Latency</th><th scope="col">Error</th>
        <th scope="col">Next attempt</th><th scope="col">Message</th></tr></thead>
      <tbody>${rows.map((a) => html`<tr key=${a.attempt_id} data-attempt=${a.attempt_id} data-outcome=${a.outcome}>
        <td><${Time} t=${a.attempted_at} /></td><td><code>${a.event_id}</code></td><td>${a.event_type}</td>
        <td class="num">${a.attempt_number}</td><td class="num">${a.http_status || '—'}</td><td><${Outcome} o=${a.outcome} /></td>
        <td class="num">${a.latency_ms} ms</td><td class="err">${[a.error_class, a.error_message].filter(Boolean).join(': ')}</td>
        <td><${Time} t=${a.next_attempt_at} none="" /></td>
        <td><a href=${hrefMessage(id, a.webhook_id)} aria-label=${'Message ' + a.webhook_id}>${a.webhook_id}</a></td>
      </tr>`)}</tbody>
    </table>
    ${rows.length === 0 && html`<p class="notice" role="status">No attempts match these filters.</p>`}
    <nav class="pager" aria-label="Pages">
      ${page > 1 && html`<a class="button" href=${hrefLog(id, newest)}>Newest</a>`}
      ${data && data.next_cursor && html`<button id="btn-older" type="button" onClick=${older}>Older</button>`}
    </nav>`}
  </section>`;
}

// ---- one message -----------------------------------------------------------

function Headers({ hs, none, cls }) {
  if (!hs || hs.length === 0) return html`<span class="muted">${none}</span>`;
  return html`<pre class=${'headers ' + cls}>${hs.map((f) => `${f.name}: ${f.value}`).join('\n')}</pre>`;
}

function MessagePage({ id, msg }) {
  const [{ data, err }, reload] = useLoad(() => api('GET', `/v1/endpoints/${enc(id)}/messages/${enc(msg)}`), [id, msg]);
  const [resend, setResend] = useState(null);
  const [rerr, setRerr] = useState(null);
  const [busy, setBusy] = useState(false);
  // After a resend, read the message again every 2 s for a minute.
  useEffect(() => {
    if (!resend) return undefined;
    let n = 0;
    const t = setInterval(() => { reload(); if (++n >= 30) clearInterval(t); }, 2000);
    return () => clearInterval(t);
  }, [resend]);
  async function doResend() {
    setBusy(true); setRerr(null);
    try { setResend(await api('POST', `/v1/endpoints/${enc(id)}/messages/${enc(msg)}/resend`)); } catch (e) { setRerr(e); } finally { setBusy(false); }
  }
  const as = data ? data.attempts : [];
  const first = as[as.length - 1];
  return html`<section aria-labelledby="h-msg">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Endpoints</a> › <a href=${hrefEndpoint(id)}>${id}</a> › <a href=${hrefLog(id)}>log</a> › message</nav>
    <h1 id="h-msg">Message <code>${msg}</code></h1>
    <${ErrorBox} err=${err} />
    ${first && html`<dl class="summary">
      <dt>Event</dt><dd><code>${first.event_id}</code> (${first.event_type})</dd>
      <dt>Endpoint</dt><dd><a href=${hrefEndpoint(id)}>${id}</a>${first.url_host && html` (${first.url_host})`}</dd>
      <dt>Attempts</dt><dd>${as.length}; latest <${Outcome} o=${as[0].outcome} /></dd>
    </dl>`}
    <div class="toolbar">
      <button id="btn-resend" type="button" disabled=${busy || !data} onClick=${doResend}>Resend</button>
      <button type="button" onClick=${reload}>Refresh</button>
    </div>
    <div aria-live="polite" id="resend-result">${resend && html`<p class="ok">Resent as delivery <code>${resend.resend_id}</code>: its attempts appear below as they happen.</p>`}</div>
    <${ErrorBox} err=${rerr} />
    <p class="muted">Headers as sent and received (credentials redacted; the signature is never shown); the body's first 512 bytes.</p>
    <ol id="attempts" class="attempts" reversed>
      ${as.map((a) => html`<li key=${a.attempt_id} class="card" data-outcome=${a.outcome} data-delivery=${a.delivery_id}>
        <h2>Attempt ${a.attempt_number} <${Outcome} o=${a.outcome} /> <small><${Time} t=${a.attempted_at} /></small></h2>
        <dl>
          <dt>Delivery</dt><dd><code>${a.delivery_id}</code>${a.delivery_id.startsWith('rs_') ? ' (a resend)' : ''}</dd>
          <dt>Request headers</dt><dd><${Headers} hs=${a.request_headers} none="no request sent" cls="req-headers" /></dd>
          <dt>Body preview</dt><dd>${a.body_preview ? html`<pre class="body body-preview">${a.body_preview}</pre>` : html`<span class="muted">none</span>`}</dd>
          <dt>Response status</dt><dd>${a.http_status || html`<span class="muted">no response</span>`}</dd>
          <dt>Response headers</dt><dd><${Headers} hs=${a.response_headers} none="no response" cls="resp-headers" /></dd>
          <dt>Response body</dt><dd>${a.response_body ? html`<pre class="body">${a.response_body}</pre>` : html`<span class="muted">empty</span>`}</dd>
          <dt>Latency</dt><dd>${a.latency_ms} ms</dd>
          <dt>Error</dt><dd>${a.error_class ? html`<code>${a.error_class}</code> ${a.error_message}` : html`<span class="muted">none</span>`}</dd>
          <dt>Next attempt due</dt><dd><${Time} t=${a.next_attempt_at} none=${a.outcome === 'retry_scheduled' ? 'unknown' : 'none: final'} /></dd>
        </dl>
      </li>`)}
    </ol>
  </section>`;
}

// ---- the shell -------------------------------------------------------------

// Who shows whose data the key sees (GET /v1/me).
function Who() {
  const [{ data }] = useLoad(() => api('GET', '/v1/me'), []);
  if (!data) return html`<span class="who muted">key …</span>`;
  return html`<span class="who" id="who">${data.role === 'admin' ? html`admin (every tenant)` : html`tenant <strong>${data.tenantid || 'none'}</strong>`}${' · key '}<code>${data.key_id}</code></span>`;
}

// ---- create an endpoint ----------------------------------------------------

function NewEndpointPage() {
  const [form, setForm] = useState({ url: '', event_types: '', id: '', tenantid: '', rate_per_sec: '', max_in_flight: '', timeout: '' });
  const [{ data: me }] = useLoad(() => api('GET', '/v1/me'), []);
  const [err, setErr] = useState(null);
  const [created, setCreated] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (f) => (e) => setForm({ ...form, [f]: e.target.value });
  async function submit(e) {
    e.preventDefault();
    setBusy(true); setErr(null);
    const body = { url: form.url.trim() };
    const types = form.event_types.split(',').map((t) => t.trim()).filter(Boolean);
    if (types.length) body.event_types = types;
    if (form.id.trim()) body.id = form.id.trim();
    if (form.tenantid.trim()) body.tenantid = form.tenantid.trim();
    if (form.rate_per_sec) body.rate_per_sec = Number(form.rate_per_sec);
    if (form.max_in_flight) body.max_in_flight = Number(form.max_in_flight);
    if (form.timeout.trim()) body.timeout = form.timeout.trim();
    try { setCreated(await api('POST', '/v1/endpoints', body)); } catch (e2) { setErr(e2); } finally { setBusy(false); }
  }
  const admin = me && me.role === 'admin';
  const fieldErr = (f) => err && err.problem && (err.problem.errors || []).filter((x) => x.field === f).map((x) => x.reason).join('; ');
  const field = (f, label, attrs = {}, hint = '') => html`<div>
    <label for=${'n-' + f}>${label}</label>
    <input id=${'n-' + f} name=${f} value=${form[f]} onInput=${set(f)} aria-describedby=${'n-' + f + '-hint'}
      aria-invalid=${fieldErr(f) ? 'true' : 'false'} ...${attrs} />
    <small id=${'n-' + f + '-hint'} class=${fieldErr(f) ? 'error' : 'muted'}>${fieldErr(f) || hint}</small></div>`;
  return html`<section aria-labelledby="h-new">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Endpoints</a> › new</nav>
    <h1 id="h-new">Create an endpoint</h1>
    ${created ? html`<div class="secret" role="alert" id="created">
      <p>Created <a id="link-created" href=${hrefEndpoint(created.endpoint.id)}><code>${created.endpoint.id}</code></a>.</p>
      ${created.secret && html`<p><strong>Its signing secret — shown only this once.</strong> Give it to the receiver now.</p>
      <label for="created-secret">Signing secret</label>
      <input id="created-secret" readonly value=${created.secret} size="60" onFocus=${(e) => e.target.select()} />`}
    </div>` : html`<form id="new-endpoint" class="filters" onSubmit=${submit}>
      ${field('url', 'URL', { type: 'url', required: true, placeholder: 'https://example.com/webhooks', autofocus: true })}
      ${field('event_types', 'Event types (comma-separated)', { placeholder: '*' }, 'default: every type (*)')}
      ${admin && field('id', 'ID', { placeholder: 'ep_…' }, 'default: ep_ and 26 random characters')}
      ${admin && field('tenantid', 'Tenant', {}, 'the tenant whose events it receives')}
      ${field('rate_per_sec', 'Requests per second', { type: 'number', min: '0.001', step: 'any', placeholder: '10' }, 'default 10')}
      ${field('max_in_flight', 'Max in flight', { type: 'number', min: '1', max: '1000', placeholder: '4' }, 'default 4')}
      ${field('timeout', 'Request timeout', { placeholder: '10s' }, 'a Go duration, e.g. 10s')}
      <div class="buttons"><button id="btn-create" type="submit" disabled=${busy}>Create endpoint</button></div>
    </form>`}
    <${ErrorBox} err=${err} />
  </section>`;
}

// ---- the DLQ ---------------------------------------------------------------

function DLQPage({ query }) {
  const [form, setForm] = useState(() => ({
    endpoint_id: query.get('endpoint_id') || '', since: toLocalInput(query.get('since')), until: toLocalInput(query.get('until')),
  }));
  const [{ loading, data, err }, reload] = useLoad(() => {
    const q = new URLSearchParams();
    for (const f of ['endpoint_id', 'since', 'until']) if (query.get(f)) q.set(f, query.get(f));
    return api('GET', `/v1/dlq?${q}`);
  }, [query.toString()]);
  const [{ data: eps }] = useLoad(() => api('GET', '/v1/endpoints'), []);
  const [replayed, setReplayed] = useState(null);
  const [rerr, setRerr] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (f) => (e) => setForm({ ...form, [f]: e.target.value });
  function apply(e) {
    e.preventDefault();
    const q = new URLSearchParams();
    if (form.endpoint_id) q.set('endpoint_id', form.endpoint_id);
    if (form.since) q.set('since', fromLocalInput(form.since));
    if (form.until) q.set('until', fromLocalInput(form.until));
    location.hash = '#/dlq' + (q.toString() ? '?' + q : '');
  }
  const rows = data ? data.data : [];
  const ep = query.get('endpoint_id');
  // The records shown are at or after since (default: 24 h ago, as the API).
  const since = query.get('since') || (rows.length ? rows[0].at : new Date(Date.now() - 24 * 3600e3).toISOString());
  async function replay() {
    setBusy(true); setRerr(null);
    const body = { endpoint_id: ep, since };
    if (query.get('until')) body.until = query.get('until');
    try { setReplayed(await api('POST', '/v1/dlq/replay', body)); reload(); } catch (e2) { setRerr(e2); } finally { setBusy(false); }
  }
  return html`<section aria-labelledby="h-dlq">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Endpoints</a> › DLQ</nav>
    <h1 id="h-dlq">Dead-letter queue</h1>
    <p class="muted">Deliveries that ended without success (retries exhausted, permanent failure, expired, skipped). Replay sends them again as new deliveries with the same webhook-id.</p>
    <form id="dlq-filters" class="filters" onSubmit=${apply}>
      <div><label for="d-endpoint">Endpoint</label>
        <select id="d-endpoint" value=${form.endpoint_id} onChange=${set('endpoint_id')}>
          <option value="">every endpoint</option>
          ${(eps ? eps.data : []).map((e) => html`<option value=${e.id}>${e.id}</option>`)}
          ${form.endpoint_id && !(eps && eps.data.some((e) => e.id === form.endpoint_id)) && html`<option value=${form.endpoint_id}>${form.endpoint_id}</option>`}
        </select></div>
      <div><label for="d-since">From (${ZONE})</label><input id="d-since" type="datetime-local" value=${form.since} onInput=${set('since')} /></div>
      <div><label for="d-until">To (${ZONE})</label><input id="d-until" type="datetime-local" value=${form.until} onInput=${set('until')} /></div>
      <div class="buttons"><button id="d-apply" type="submit">Apply filters</button> <a class="button" href="#/dlq">Clear</a></div>
    </form>
    <${ErrorBox} err=${err} />
    ${loading && !data ? html`<p class="muted">Loading…</p>` : html`
    <table id="dlq" class="grid">
      <caption>${rows.length} record${rows.length === 1 ? '' : 's'}, oldest first${query.get('since') ? '' : ', from the last 24 hours'}${data && data.truncated ? ' (more matched: narrow the range)' : ''}</caption>
      <thead><tr><th scope="col">Put in the DLQ</th><th scope="col">Endpoint</th><th scope="col">Message</th><th scope="col">Event</th>
        <th scope="col">Reason</th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr key=${r.partition + ':' + r.offset} data-webhook=${r.webhook_id}>
        <td><${Time} t=${r.at} /></td><td><a href=${hrefEndpoint(r.endpoint_id)}>${r.endpoint_id}</a></td>
        <td><a href=${hrefMessage(r.endpoint_id, r.webhook_id)} aria-label=${'Message ' + r.webhook_id}>${r.webhook_id}</a></td>
        <td><code>${r.event_id || ''}</code> ${r.event_type || ''}</td><td><${Outcome} o=${r.reason} /></td>
        <td class="num">${r.attempts}</td><td class="err">${r.last_error || ''}</td></tr>`)}</tbody>
    </table>
    ${rows.length === 0 && html`<p class="notice" role="status">No DLQ records match these filters.</p>`}`}
    <div class="toolbar">
      <button id="btn-replay" type="button" disabled=${busy || !ep || rows.length === 0} onClick=${replay}
        aria-describedby="replay-hint">Replay these</button>
      <small id="replay-hint" class="muted">${ep ? `replays the records of ${ep} from the shown range` : 'choose one endpoint to replay its records'}</small>
    </div>
    <div aria-live="polite" id="replay-result">${replayed && html`<p class="ok">Replayed ${replayed.replayed} deliver${replayed.replayed === 1 ? 'y' : 'ies'} of <code>${replayed.endpoint_id}</code>.</p>`}</div>
    <${ErrorBox} err=${rerr} />
  </section>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(!!sessionStorage.getItem(KEY));
  const [message, setMessage] = useState(null);
  const route = useRoute();
  onUnauthorized = () => { sessionStorage.removeItem(KEY); setMessage('The API key was refused (unknown or revoked): sign in again.'); setSignedIn(false); };
  useEffect(() => { const m = document.getElementById('main'); if (m && signedIn) m.focus({ preventScroll: true }); }, [route.page, route.id, route.msg]);
  if (!signedIn) return html`<${SignIn} message=${message} onSignIn=${() => { setMessage(null); setSignedIn(true); }} />`;
  let page;
  switch (route.page) {
    case 'endpoint': page = html`<${EndpointPage} id=${route.id} />`; break;
    case 'log': page = html`<${LogPage} key=${route.id + '?' + route.query} id=${route.id} query=${route.query} />`; break;
    case 'message': page = html`<${MessagePage} id=${route.id} msg=${route.msg} />`; break;
    case 'new': page = html`<${NewEndpointPage} />`; break;
    case 'dlq': page = html`<${DLQPage} key=${'dlq?' + route.query} query=${route.query} />`; break;
    default: page = html`<${EndpointsPage} />`;
  }
  return html`
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById('main').focus(); }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/">hookrelay</a>
      <nav aria-label="Main"><a href="#/">Endpoints</a> <a href="#/dlq">DLQ</a> <a href="#/new">New endpoint</a></nav>
      <span class="muted">times in ${ZONE} (hover for UTC)</span>
      <${Who} />
      <button id="signout" type="button" onClick=${() => { sessionStorage.removeItem(KEY); setSignedIn(false); }}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">${page}</main>`;
}

const root = document.getElementById('app');
root.textContent = ''; // the "Loading" line of index.html
render(html`<${App} />`, root);
