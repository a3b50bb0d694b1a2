// The tab's stylesheet, bundled as text and added as one <style> element
// (TensorBoard's CSP allows inline styles, not inline scripts).

export const CSS = `
:root {
  --fg: #212121; --fg2: #616161; --fg3: #9e9e9e; --line: #e0e0e0; --bg: #fff; --bg2: #f5f5f5;
  --accent: #f57c00; --link: #1976d2; --err: #c62828; --err-bg: #ffebee; --row: 26px;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 13px/1.4 Roboto, "Segoe UI", "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg2); }
code, pre, .mono { font-family: "Roboto Mono", Menlo, Consolas, monospace; font-size: 12px; }
button, input, select { font: inherit; color: inherit; }

.mm-header { display: flex; align-items: center; gap: 16px; padding: 0 16px; height: 44px; background: var(--bg); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 5; }
.mm-title { font-size: 15px; font-weight: 500; white-space: nowrap; }
.mm-nav { display: flex; gap: 2px; height: 100%; }
.mm-nav button { border: 0; background: none; padding: 0 14px; cursor: pointer; color: var(--fg2); border-bottom: 2px solid transparent; text-transform: uppercase; font-size: 12px; font-weight: 500; letter-spacing: .04em; }
.mm-nav button:hover { color: var(--fg); background: var(--bg2); }
.mm-nav button[aria-selected="true"] { color: var(--accent); border-bottom-color: var(--accent); }
.mm-reload { border: 0; background: none; cursor: pointer; font-size: 16px; color: var(--fg2); border-radius: 50%; width: 28px; height: 28px; }
.mm-reload:hover { background: var(--bg2); color: var(--fg); }
.mm-status { margin-left: auto; color: var(--fg3); font-size: 12px; white-space: nowrap; display: flex; gap: 8px; align-items: center; }
.mm-main { padding: 12px 16px 32px; max-width: 1600px; }

.toolbar { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-end; margin-bottom: 12px; }
.toolbar label { display: flex; flex-direction: column; font-size: 11px; color: var(--fg2); gap: 2px; }
.toolbar label[hidden] { display: none; }
.toolbar select { min-width: 140px; max-width: 320px; width: 100%; padding: 4px 6px; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); text-overflow: ellipsis; }
.meta { color: var(--fg2); font-size: 12px; padding-bottom: 5px; min-width: 0; flex: 1 1 300px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.meta b { color: var(--fg); font-weight: 500; display: inline-block; max-width: 40ch; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }

.panel { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; margin-bottom: 12px; min-width: 0; }
.panel h2 { font-size: 13px; font-weight: 500; margin: 0 0 8px; display: flex; gap: 8px; align-items: baseline; }
.panel h2 small { color: var(--fg3); font-weight: 400; font-size: 12px; min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; align-items: start; }
.grid2 > .panel { margin-bottom: 0; }
.stack { display: flex; flex-direction: column; gap: 12px; margin-bottom: 12px; }

.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(210px, 1fr)); gap: 10px; margin-bottom: 12px; }
.card { background: var(--bg); border: 1px solid var(--line); border-top: 3px solid var(--c, var(--fg)); border-radius: 6px; padding: 8px 12px; min-width: 0; }
.card .label { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--fg2); display: flex; align-items: center; gap: 6px; }
.card .value { font-size: 16px; font-weight: 500; margin-top: 2px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.card .sub { font-size: 12px; color: var(--fg2); margin-top: 1px; overflow: hidden; display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; }
.card.unknown .value { color: var(--fg3); font-style: italic; font-weight: 400; }
.card[title] { cursor: help; }
.peak-cards { grid-template-columns: repeat(6, minmax(0, 1fr)); margin: 10px 0 0; }
@media (max-width: 1000px) { .peak-cards { grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); } }
.peak-why { display: block; margin-top: 8px; color: var(--fg2); line-height: 1.4; }
.peak-card .exact { font-size: 12px; font-variant-numeric: tabular-nums; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.peak-card .sub { -webkit-line-clamp: 3; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; background: var(--c); flex: none; }

.chart { width: 100%; height: 260px; position: relative; border-radius: 4px; }
.chart-canvas { width: 100%; height: 100%; }
.chart:focus-visible, .table-row:focus-visible { outline: 2px solid var(--accent); outline-offset: -2px; }
.sr-only { position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
.load-charts > .panel { margin-bottom: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0 0 8px 2px; font-size: 12px; color: var(--fg2); }

.msg { border-radius: 6px; padding: 10px 12px; margin-bottom: 12px; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 9.5em; overflow: auto; }
.msg.warn { background: #fff8e1; color: #6d4c00; border: 1px solid #ffe082; display: flex; gap: 8px; }
.msg.warn .icon { color: #f57f17; }
.msg.progress { background: var(--bg); color: var(--fg2); border: 1px solid var(--line); display: flex; align-items: center; gap: 12px; }
.progress-bar { flex: 0 0 200px; height: 6px; border-radius: 3px; background: var(--bg2); overflow: hidden; }
.progress-fill { height: 100%; width: 0; background: var(--accent); transition: width .4s; }
.problems .msg { margin-bottom: 6px; }
.more-problems { margin: 0 0 12px; color: var(--err); font-size: 12px; }
.more-problems summary { cursor: pointer; margin-bottom: 6px; }
.chart-empty { padding: 24px 4px; }
.msg.error { background: var(--err-bg); color: var(--err); border: 1px solid #ffcdd2; }
.msg.info { background: #e3f2fd; color: #0d47a1; border: 1px solid #bbdefb; }
.msg .what { font-weight: 500; }
.loading { color: var(--fg3); padding: 8px 0; }

.empty { max-width: 760px; margin: 40px auto; background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: 24px 28px; }
.empty h1 { font-size: 18px; font-weight: 500; margin: 0 0 8px; }
.empty pre { background: var(--bg2); border-radius: 4px; padding: 10px 12px; overflow: auto; }

.table-tools { display: flex; gap: 10px; align-items: center; margin-bottom: 6px; }
.table-tools input { flex: 0 1 340px; padding: 4px 8px; border: 1px solid var(--line); border-radius: 4px; }
.table-tools .count { color: var(--fg3); font-size: 12px; }
.table-tools .spacer { flex: 1; }
.link-button { border: 0; background: none; color: var(--link); cursor: pointer; font-size: 12px; padding: 2px 4px; }
.link-button:hover { text-decoration: underline; }
.table-scroll { overflow: auto; border: 1px solid var(--line); border-radius: 4px; position: relative; }
.table-head, .table-row { display: grid; grid-template-columns: var(--cols); min-width: var(--minw); }
.table-head { position: sticky; top: 0; z-index: 1; background: var(--bg2); border-bottom: 1px solid var(--line); }
.table-head button { border: 0; background: none; text-align: left; padding: 0 8px; height: var(--row); cursor: pointer; font-weight: 500; font-size: 12px; color: var(--fg2); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.table-head button:hover { color: var(--fg); }
.table-head button.num { text-align: right; }
.table-head button[aria-sort="ascending"]::after { content: " ▲"; font-size: 9px; }
.table-head button[aria-sort="descending"]::after { content: " ▼"; font-size: 9px; }
.table-body { position: relative; }
.table-rows { position: absolute; left: 0; right: 0; }
.table-row { height: var(--row); border-bottom: 1px solid #f0f0f0; }
.table-row:hover { background: #fff8e1; }
.table-row.hl { background: #fff3e0; }
.table-row.clickable { cursor: pointer; }
.table-row.group .cell:first-child { color: var(--fg2); }
.table-row.pending .cell { color: var(--fg3); }
.tree-toggle { border: 0; background: none; width: 16px; padding: 0; margin-right: 4px; cursor: pointer; color: var(--fg2); font-size: 11px; display: inline-block; text-align: center; }
.tree-toggle.leaf { cursor: default; }
.tree-toggle:hover:not(.leaf) { color: var(--fg); }
.cell { padding: 0 8px; line-height: var(--row); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; unicode-bidi: isolate; }
.cell.num { text-align: right; font-variant-numeric: tabular-nums; }
.cell.cut-start { direction: rtl; text-align: left; }
.cell.cut-start > * { direction: ltr; unicode-bidi: isolate; }
.out-cell { display: flex; align-items: center; min-width: 0; }
.out-shape { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; min-width: 0; }
.out-bytes { flex: none; white-space: pre; }
.table-row.unattributed { background: repeating-linear-gradient(135deg, #fafafa 0 6px, #f3f3f3 6px 12px); color: var(--fg2); font-style: italic;
  box-shadow: inset 3px 0 0 #ef6c00; }
.table-empty { padding: 10px; color: var(--fg3); }

.chip { display: inline-flex; align-items: center; gap: 5px; }
.badge { display: inline-block; min-width: 62px; text-align: center; font-size: 10px; line-height: 14px; padding: 0 5px; border-radius: 7px; margin-right: 6px; vertical-align: 1px; text-transform: uppercase; letter-spacing: .03em; }
.badge.measured { background: #e8f5e9; color: #2e7d32; }
.badge.derived { background: #ede7f6; color: #5e35b1; }
.badge.unknown { background: #eceff1; color: #546e7a; }
.badge.unattributed { min-width: 0; background: #fff3e0; color: #e65100; font-style: normal; }
.msg.xla { white-space: normal; }
.xla-headline { font-weight: 500; }
.xla-note { margin-top: 4px; }
.err-text { color: var(--err); }

.kv { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 2px 16px; font-size: 12px; margin: 0; }
.kv div { display: flex; gap: 8px; min-width: 0; }
.kv dt { color: var(--fg2); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 55%; flex: none; }
.kv dd { margin: 0; font-family: "Roboto Mono", Menlo, Consolas, monospace; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.recon { width: 100%; border-collapse: collapse; font-size: 12px; }
.recon td { padding: 3px 6px; border-bottom: 1px solid #f0f0f0; }
.recon td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.recon tr.sum td { font-weight: 500; border-top: 1px solid var(--line); }
.ok { color: #2e7d32; }

.compare-runs { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-bottom: 8px; }
.compare-runs label { display: inline-flex; gap: 4px; align-items: center; cursor: pointer; max-width: 360px; min-width: 0; }
.compare-runs label bdi { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.hint { color: var(--fg3); font-size: 12px; }

bdi.name { unicode-bidi: isolate; }
.panel, .card, .msg, .meta, .toolbar label { overflow-wrap: anywhere; }
.optimizer-class { font-weight: 500; margin-bottom: 6px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.optimizer-summary { font-family: "Roboto Mono", Menlo, Consolas, monospace; font-size: 11px; color: var(--fg2); margin-bottom: 8px; max-height: 6em; overflow: auto; overflow-wrap: anywhere; }
.optimizer-section + .optimizer-section { margin-top: 6px; }
.optimizer-heading { font-size: 12px; font-weight: 500; margin-bottom: 2px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.shared-mark { color: var(--fg2); font-size: 11px; }
.recon td:first-child { overflow-wrap: anywhere; }
.pill { display: inline-block; font-size: 12px; color: var(--fg2); background: var(--bg2); border-radius: 10px; padding: 2px 10px; margin: 0 0 8px; max-width: 100%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.pill b { color: #2e7d32; font-weight: 500; }
.share-bar { display: flex; height: 14px; border-radius: 3px; overflow: hidden; background: var(--bg2); }
.share-bar .share { min-width: 2px; border-right: 1px solid rgba(255,255,255,.7); }
.share-bar .share:last-child { border-right: 0; }
.bar-cell { display: inline-flex; align-items: center; gap: 8px; width: 100%; }
.inline-bar { flex: 1; height: 8px; background: var(--bg2); border-radius: 2px; overflow: hidden; }
.inline-bar-fill { display: block; height: 100%; background: #5c6bc0; }
.growth-summary { background: #e8f5e9; color: #1b5e20; border: 1px solid #c8e6c9; border-radius: 6px; padding: 8px 12px; margin-bottom: 12px; overflow-wrap: anywhere; }
.growth-summary.growing { background: #fbe9e7; color: #bf360c; border-color: #ffccbc; }
.growth-summary-head { font-weight: 500; display: flex; gap: 6px; align-items: baseline; }
.growth-elsewhere { margin: -6px 0 12px; padding: 0 2px; color: var(--fg2); overflow-wrap: anywhere; }
.growth-elsewhere .link-button { font-size: inherit; padding: 0 2px; }
.table-note { margin: 6px 0 0; }
i.why { cursor: help; text-decoration: underline dotted; }
.growth-flags { margin: 4px 0 0; padding-left: 22px; color: var(--fg); }
.growth-flags li { margin: 2px 0; }
.growth-flags b { color: #bf360c; font-weight: 500; }
.growth-flags .reason { color: var(--fg2); }
.growth-charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(360px, 100%), 1fr)); gap: 12px; margin-bottom: 12px; }
.growth-charts > .panel { margin-bottom: 0; border-left: 3px solid var(--line); }
.growth-chart.flagged { border-left-color: #d84315; }
.growth-chart h2 { flex-wrap: wrap; row-gap: 0; }
.growth-chart-title { max-width: 100%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.growth-badge { font-size: 10px; font-weight: 500; text-transform: uppercase; letter-spacing: .03em; color: #fff; background: #d84315; border-radius: 7px; padding: 0 6px; line-height: 15px; }
.growth-badge[hidden] { display: none; }
.growth-explain-head { font-size: 13px; font-weight: 500; margin: 4px 0 8px; color: var(--fg2); }
.growth-tables { margin-bottom: 12px; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr)); }
.growth-tables > .panel[hidden] { display: none; }
.badge.new { min-width: 0; margin-right: 0; background: #fbe9e7; color: #bf360c; }
.tip { font-size: 12px; max-width: 420px; }
.tip-head { font-weight: 500; margin-bottom: 3px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.tip-line { display: flex; gap: 12px; justify-content: space-between; }
.tip-foot { color: var(--fg3); margin-top: 3px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
`;
