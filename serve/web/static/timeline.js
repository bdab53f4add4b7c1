// The run's timeline: a row per instance of the tree, in tree order, with
// a bar for each stretch of a state (waiting to start, running, asking its
// parent or the person, paused) and a mark where it ended. Built from the
// instances' state events (the store's transitions, as the tree's event
// stream replays them from the first), so it needs no API of its own.
// Plain SVG, drawn at the box's width like the chart.
'use strict';

window.DeputyTimeline = (function () {
  const NS = 'http://www.w3.org/2000/svg';
  const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'cancelled']);
  const LABEL = { created: 'waiting', running: 'running', asking: 'asking', paused: 'paused' };

  function svg(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // spans turns one instance's record and state moves ([{t, to}], in
  // order) into stretches [{from, to, state}] and its end ({t, state} or
  // null). It starts at its creation, waiting (spawned or queued) until its
  // first move to running. A wait for a parallelism slot comes after that
  // move and has no event of its own, so it is drawn as running.
  function spans(n, moves, now) {
    const segs = [];
    let state = 'created';
    let from = Date.parse(n.created_at) || (moves.length ? moves[0].t : now);
    let end = null;
    for (const m of moves) {
      if (m.to === state || m.t < from) { state = m.to; continue; }
      if (m.t > from) segs.push({ from, to: m.t, state });
      state = m.to;
      from = m.t;
      if (TERMINAL.has(state)) { end = { t: m.t, state }; break; }
    }
    if (!end && TERMINAL.has(n.state)) {
      // Its last moves are not read yet: the record has how it ended.
      const t = Date.parse(n.ended_at) || from;
      if (t > from) segs.push({ from, to: t, state: TERMINAL.has(state) ? 'running' : state });
      end = { t, state: n.state };
    } else if (!end && now > from) {
      segs.push({ from, to: now, state });
    }
    return { segs, end };
  }

  // draw fills box with rows [{id, label, depth, segs, end}]; fmt formats a
  // duration in milliseconds.
  function draw(box, rows, fmt) {
    while (box.firstChild) box.removeChild(box.firstChild);
    if (!rows.length) return;
    let t0 = Infinity;
    let t1 = -Infinity;
    for (const r of rows) {
      for (const s of r.segs) { t0 = Math.min(t0, s.from); t1 = Math.max(t1, s.to); }
      if (r.end) { t0 = Math.min(t0, r.end.t); t1 = Math.max(t1, r.end.t); }
    }
    if (!(t1 > t0)) t1 = t0 + 1000;
    const W = Math.max(320, Math.floor(box.clientWidth));
    const rowH = 22;
    const pad = { l: 200, r: 16, t: 6, b: 22 };
    const H = pad.t + rows.length * rowH + pad.b;
    const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (W - pad.l - pad.r);
    const s = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'timeline-svg' });
    s.append(svg('title', {}, `Timeline of ${rows.length} instance(s) over ${fmt(t1 - t0)}`));
    rows.forEach((r, i) => {
      const y = pad.t + i * rowH;
      const g = svg('g', { class: 'tl-row', 'data-id': r.id });
      // The label keeps to its column: about 6.5 px a character at 11.5 px.
      const room = Math.floor((pad.l - 14 - r.depth * 12) / 6.5);
      const label = r.label.length > room ? r.label.slice(0, room - 1) + '…' : r.label;
      const text = svg('text', { x: 8 + r.depth * 12, y: y + 15, class: 'tl-label' }, label);
      text.append(svg('title', {}, r.label));
      g.append(text);
      g.append(svg('line', { x1: pad.l, x2: W - pad.r, y1: y + rowH / 2, y2: y + rowH / 2, class: 'tl-track' }));
      for (const sg of r.segs) {
        const rect = svg('rect', { x: x(sg.from), y: y + 4, width: Math.max(1.5, x(sg.to) - x(sg.from)), height: rowH - 8,
          rx: 2, class: 'tl-seg tl-' + sg.state, 'data-state': sg.state });
        rect.append(svg('title', {}, `${LABEL[sg.state] || sg.state} ${fmt(sg.to - sg.from)} (from ${fmt(sg.from - t0)})`));
        g.append(rect);
      }
      if (r.end) {
        const mark = svg('rect', { x: x(r.end.t) - 1.5, y: y + 2, width: 3, height: rowH - 4,
          class: 'tl-end tl-end-' + r.end.state, 'data-state': r.end.state });
        mark.append(svg('title', {}, `${r.end.state.replace('_', ' ')} at ${fmt(r.end.t - t0)}`));
        g.append(mark);
      }
      s.append(g);
    });
    const axisY = H - 6;
    s.append(svg('text', { x: pad.l, y: axisY, class: 'axis' }, '0s'));
    s.append(svg('text', { x: (pad.l + W - pad.r) / 2, y: axisY, 'text-anchor': 'middle', class: 'axis' }, fmt((t1 - t0) / 2)));
    s.append(svg('text', { x: W - pad.r, y: axisY, 'text-anchor': 'end', class: 'axis' }, fmt(t1 - t0)));
    box.append(s);
  }

  return { spans, draw };
})();
