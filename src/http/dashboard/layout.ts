/**
 * The page shell of the dashboard: header with the signed-in user, the style sheet and the one
 * small script (live updates and confirmations), both inline and allowed by the page's
 * Content-Security-Policy nonce: nothing else may run, so an escaping mistake cannot become a
 * script.
 */
import { html, trustedHtml, type Html } from '../html.js';
import { FLOW_PICTURE_STYLE } from './flowSvg.js';

export interface PageContext {
  user: string;
  /** Whether a sign-out button makes sense (a session cookie, not loopback or Bearer). */
  signedIn: boolean;
  csrf: string;
  nonce: string;
}

const STYLE = `
:root { color-scheme: light dark; --muted: #777; --line: #8884; --ok: #1a7f37; --bad: #cf222e; --wait: #9a6700; --run: #0969da; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; }
header { display: flex; gap: 1em; align-items: center; padding: .6em 1.2em; border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.1em; margin: 0; } header h1 a { color: inherit; text-decoration: none; }
header .who { margin-left: auto; color: var(--muted); }
main { padding: 1em 1.2em; max-width: 80em; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: 600; } .s-completed, .s-done { color: var(--ok); } .s-failed { color: var(--bad); }
.s-cancelled { color: var(--muted); } .s-pending, .s-new { color: var(--wait); } .s-running, .s-ready { color: var(--run); }
form.filters { display: flex; flex-wrap: wrap; gap: .6em; align-items: end; margin-bottom: 1em; }
form.filters label { display: flex; flex-direction: column; font-size: .85em; color: var(--muted); }
form.inline { display: inline; } button { cursor: pointer; }
ul.tree, ul.tree ul { list-style: none; padding-left: 1.2em; margin: 0; border-left: 1px solid var(--line); }
ul.tree > li, ul.tree ul > li { margin: .25em 0; }
.branch { color: var(--muted); font-size: .9em; }
time { white-space: nowrap; }
.step-head { display: flex; flex-wrap: wrap; gap: .6em; align-items: baseline; }
.muted { color: var(--muted); } .error { color: var(--bad); white-space: pre-wrap; }
td.d1 { padding-left: 1.8em; } td.d2 { padding-left: 3.3em; } td.d3 { padding-left: 4.8em; } .schema pre { margin: .2em 0; }
pre { background: #8881; padding: .5em; overflow: auto; max-height: 30em; margin: .3em 0; }
details > summary { cursor: pointer; color: var(--muted); }
.gate { border: 1px solid var(--wait); border-radius: 6px; padding: .6em .8em; margin: .6em 0; }
.gate .message { white-space: pre-wrap; margin: .3em 0 .6em; }
.actions { display: flex; gap: .6em; flex-wrap: wrap; align-items: center; margin: .6em 0; }
.flash { padding: .5em .8em; border: 1px solid var(--bad); border-radius: 6px; color: var(--bad); }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; } dl.meta dt { color: var(--muted); }
` + FLOW_PICTURE_STYLE;

/**
 * Live updates: the server sends an event for every transition (Server-Sent Events from the
 * NOTIFY channel); the page then fetches its own live region again and swaps it in, keeping the
 * open <details> open, and waits while the user is typing in one of its forms. The server's
 * `ready` comes once the page is subscribed: one more read then covers what changed between
 * rendering the page and subscribing (or while the connection was down). A read that brings
 * nothing new swaps nothing, and none swaps while a button is held down (a click is never lost to
 * a refresh). For tests: `data-refreshed` counts the reads finished, `data-held-back` says a read
 * waited for a press.
 */
const SCRIPT = `
(() => {
  const live = document.getElementById('live');
  const stream = document.body.dataset.events;
  // A POST's answer (a refused action, a bulk result) names the page's own address: shown in the
  // address bar instead of the POST's, so a reload GETs the page rather than posting the form again.
  const own = document.body.dataset.pageUrl;
  if (own && new URL(own, location.href).pathname !== location.pathname) history.replaceState(null, '', own);
  document.addEventListener('submit', (e) => {
    const msg = e.target.dataset && e.target.dataset.confirm;
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  if (!live || !stream || !window.EventSource) return;
  let timer = null;
  // A press inside the live region: a swap between its mousedown and mouseup would lose the click
  // (the two would land on different elements), so the swap waits for the release.
  let pressing = false;
  live.addEventListener('pointerdown', () => { pressing = true; });
  const release = () => { if (pressing) setTimeout(() => { pressing = false; }, 0); };
  document.addEventListener('pointerup', release);
  document.addEventListener('pointercancel', release);
  let shown = null;
  const refresh = async () => {
    timer = null;
    const active = document.activeElement;
    if (pressing) { document.body.dataset.heldBack = 'press'; schedule(100); return; }
    if (active && live.contains(active) && active.form && active.value) { schedule(1000); return; }
    // The page's own address (after a POST's answer too: see data-page-url above).
    const res = await fetch(location.href, { headers: { 'x-stepd-fragment': '1' }, credentials: 'same-origin' });
    if (!res.ok) return;
    const text = await res.text();
    if (pressing) { document.body.dataset.heldBack = 'press'; schedule(100); return; }
    if (text !== shown) {
      shown = text;
      const open = new Set([...live.querySelectorAll('details[open][data-key]')].map((d) => d.dataset.key));
      live.innerHTML = text;
      for (const d of live.querySelectorAll('details[data-key]')) if (open.has(d.dataset.key)) d.open = true;
      document.body.dataset.updated = String(Date.now());
    }
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  };
  const schedule = (ms) => { if (!timer) timer = setTimeout(() => refresh().catch(() => {}), ms); };
  const source = new EventSource(stream);
  source.addEventListener('stepd', () => schedule(150));
  // Subscribed (first time or after a reconnect): read once more what changed since the page was made.
  source.addEventListener('ready', () => { document.body.dataset.live = 'on'; schedule(0); });
  source.addEventListener('error', () => { document.body.dataset.live = 'off'; });
})();
`;

/**
 * `pageUrl`: the page's own address (a GET), for a page that may be a POST's answer: the script
 * puts it in the address bar, so a reload (and the live refresh) reads it, never posts the form again.
 */
export function page(ctx: PageContext, opts: { title: string; events?: string; pageUrl?: string; body: Html }): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title} · stepd</title>
<style nonce="${ctx.nonce}">${trustedHtml(STYLE)}</style>
</head>
<body data-events="${opts.events ?? ''}"${opts.pageUrl !== undefined ? html` data-page-url="${opts.pageUrl}"` : ''}>
<header>
  <h1><a href="/">stepd</a></h1>
  <nav><a href="/">workflows</a> · <a href="/schedules">schedules</a></nav>
  <span class="who">signed in as <strong>${ctx.user}</strong></span>
  ${ctx.signedIn ? html`<form class="inline" method="post" action="/sign-out"><input type="hidden" name="csrf" value="${ctx.csrf}"><button>sign out</button></form>` : ''}
</header>
<main>${opts.body}</main>
<script nonce="${ctx.nonce}">${trustedHtml(SCRIPT)}</script>
</body>
</html>`;
}

/** A page without a user (the sign-in form). */
export function bareLayout(nonce: string, title: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · stepd</title><style nonce="${nonce}">${trustedHtml(STYLE)}</style></head>
<body><header><h1>stepd</h1></header><main>${body}</main></body>
</html>`;
}

/** The Content-Security-Policy of a page whose inline style and script carry `nonce`. */
export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
