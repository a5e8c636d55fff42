// attnlab's attention explorer: the page around the JSON in #attnlab-attention.
//
// Model view: a grid of every layer (rows) and head (columns) of the shown group, each a small
// map. Head view: the selected map, large, with the tokens on both axes; hover or click a token
// (or a cell) to read the weights it gives (a query: its row) or receives (a key: its column).
// No library, no network: everything here is drawn on canvases and plain elements.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("attnlab-attention").textContent);

  // ---- colours: viridis, interpolated from its published anchor colours -------------------
  const ANCHORS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
                   "#6ece58", "#b5de2b", "#fde725"];
  // a key a causal query cannot see: light grey, dark grey on a dark page (the stylesheet's
  // --masked-cell; light grey there outshone the weights beside it), read again when the system
  // turns dark or light with the page open (see the events)
  const maskedCell = () => {
    const hex = getComputedStyle(document.documentElement).getPropertyValue("--masked-cell").trim();
    return /^#[0-9a-f]{6}$/i.test(hex) ? [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16))
      : [226, 226, 226];
  };
  let MASKED = maskedCell();
  const LUT = (function () {
    const rgb = ANCHORS.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
    const lut = [];
    for (let i = 0; i < 256; i++) {
      const x = (i / 255) * (rgb.length - 1);
      const a = Math.min(Math.floor(x), rgb.length - 2);
      const f = x - a;
      lut.push(rgb[a].map((c, k) => Math.round(c + f * (rgb[a + 1][k] - c))));
    }
    return lut;
  })();
  const colour = (w, max) => LUT[Math.max(0, Math.min(255, Math.round((w / max) * 255)))];
  const css = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;
  // A weight is shown at the precision it is stored to (data.digits), so the number read is the
  // model's weight rounded once: showing fewer digits would round a rounded number again
  // (0.07849 stored 0.0785, shown 0.079).
  const DIGITS = Number.isInteger(data.digits) ? data.digits : 4;
  const fixed = (w) => w.toFixed(DIGITS);

  // ---- the model: groups of layers, tokens per layer --------------------------------------
  const groups = [];
  data.layers.forEach((layer, index) => {
    let g = groups.find((x) => x.name === layer.group);
    if (!g) groups.push((g = { name: layer.group, layers: [] }));
    g.layers.push(index);
  });
  const GROUP_NAMES = { encoder: "encoder self-attention", decoder: "decoder self-attention",
                        cross: "cross-attention", self: "self-attention",
                        causal: "causal self-attention" };
  const queryTokens = (l) => l.query_tokens || data.query_tokens;
  const keyTokens = (l) => l.key_tokens || data.key_tokens;
  // a key the query cannot see: a causal layer's later keys, and the cells the data marks
  // masked (every head's weight exactly 0, as a mask makes it: a graph's non-edge)
  const masked = (l, i, j) => (l.kind === "causal" && j > i) ||
    (l.masked !== undefined && l.masked[i][j] === 1);

  // data.focus: the row --input names (a graph's node), pinned from the start
  // rowScale: colour each row from 0 to its own largest weight (null: the default, per layer)
  // average and chosenHead: the reader's choices, kept while a layer cannot follow them (a
  // graph run's one-head output layer: no mean, no head 2), so stepping back to a layer of
  // more heads shows the mean, or head 2, again (they were dropped on the way)
  const state = { group: 0, layer: 0, head: 0, chosenHead: 0, average: false,
                  pinned: data.focus || null, active: null, rowScale: null };
  const meanCache = new Map();

  const current = () => data.layers[groups[state.group].layers[state.layer]];
  const averaging = () => state.average && current().weights.length > 1;  // the mean is shown
  function shownMap() {  // [query][key] of the selected head, or the mean over heads
    const layer = current();
    if (!averaging()) return layer.weights[state.head];
    if (layer.mean) return layer.mean;  // taken before rounding: the rounded heads' is off
    const key = groups[state.group].layers[state.layer];
    if (!meanCache.has(key)) {
      const H = layer.weights.length;
      meanCache.set(key, layer.weights[0].map((row, i) =>
        row.map((_, j) => layer.weights.reduce((s, head) => s + head[i][j], 0) / H)));
    }
    return meanCache.get(key);
  }
  const maxOf = (map) => map.reduce((m, row) => row.reduce((a, w) => Math.max(a, w), m), 1e-12);
  const rowMax = (row) => row.reduce((a, w) => Math.max(a, w), 1e-12);
  // A causal map's first query can only see itself: its weight of 1 would set the scale and
  // leave the rest near-black, so causal layers are scaled row by row unless the user
  // chooses the shared scale; other layers share one scale (rows there compare).
  const byRow = (layer) => (state.rowScale === null ? layer.kind === "causal" : state.rowScale);

  // ---- page skeleton ----------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    children.forEach((c) => node.appendChild(c));
    return node;
  }
  // cut by characters (code points), not UTF-16 halves: an emoji is never split in two
  const short = (text, n) => {
    const chars = [...text];
    return chars.length > n ? chars.slice(0, n - 1).join("") + "…" : text;
  };
  const visible = (t) => (t === "" ? "·" : t.replace(/\n/g, "⏎").replace(/^ +$/, (s) => "␣".repeat(s.length)));

  // which weights the page shows and what the run reached (metrics.json), as the data's
  // "shown" texts write them: a reader comparing runs reads them beside the attention
  function runRecord(record) {
    if (!record) return [];
    const weights = el("p", { class: "run-weights" },
      el("span", { class: "record-label", text: "weights " }),
      document.createTextNode(record.shown.weights));
    if (record.metrics === null || record.metrics === undefined) {
      return [weights, el("p", { class: "run-metrics none", text: record.note || "no metrics" })];
    }
    // the scores of other weights than those shown (--checkpoint last of a --keep-best run)
    // say whose they are, over the list
    const of = record.shown.metrics_of
      ? [el("p", { class: "run-metrics-of", text: record.shown.metrics_of })] : [];
    const list = el("dl", { class: "run-metrics",
                            "aria-label": "the run's metrics (metrics.json)" });
    record.shown.metrics.forEach(([name, value]) => {
      const finite = record.metrics[name] !== null;
      list.appendChild(el("div", { class: finite ? "metric" : "metric not-finite" },
        el("dt", { text: name }), el("dd", { text: value })));
    });
    return [weights, ...of, list];
  }

  // the keys there is something to move between: a one-head model has no other head and no
  // heads to average (the hint and a checkbox that did nothing said it had)
  const headsOf = (g) => Math.max(...g.layers.map((i) => data.layers[i].weights.length));
  function hint() {
    const many = (n) => n > 1;
    return ["Hover a token or a cell to read its weights · click to pin, Esc to unpin · " +
            "Tab: token by token",
            groups.some((g) => many(headsOf(g))) && "←/→ head",
            groups.some((g) => many(g.layers.length)) && "↑/↓ layer",
            groups.some((g) => many(headsOf(g))) && "a: average the heads",
            "r: scale each row", many(groups.length) && "g: next group"]
      .filter(Boolean).join(" · ");
  }

  const body = document.body;
  const header = el("header", {},
    el("h1", { text: data.title || "attention" }),
    el("p", { class: "meta", text: [data.task && `task ${data.task}`, data.run && `run ${data.run}`,
      `${data.layers.length} attention layer${data.layers.length === 1 ? "" : "s"}`]
      .filter(Boolean).join(" · ") }),
    ...runRecord(data.record),
    el("p", { class: "hint", text: hint() }));
  const groupBar = el("div", { class: "groups", role: "tablist" });
  const average = el("input", { type: "checkbox", id: "average-heads" });
  const rowScale = el("input", { type: "checkbox", id: "row-scale" });
  const averageLabel = el("label", { class: "average", for: "average-heads" }, average,
                          document.createTextNode(" average the heads"));
  const toolbar = el("div", { class: "toolbar" }, groupBar, averageLabel,
    el("label", { class: "average", for: "row-scale",
                  title: "colour each row from 0 to its own largest weight" }, rowScale,
       document.createTextNode(" scale each row")),
    el("span", { id: "layer-label", "aria-live": "polite" }));
  const grid = el("div", { class: "grid", id: "grid", role: "group",
                           "aria-label": "every layer and head: ← → head, ↑ ↓ layer" });
  const modelView = el("section", { class: "model-view" }, el("h2", { text: "every layer and head" }), grid);
  const mainMap = el("canvas", { id: "main-map", role: "img" });  // named in describeMap
  const qLabels = el("div", { class: "qlabels" });
  const kLabels = el("div", { class: "klabels" });
  const mapBox = el("div", { class: "map-box" }, el("div", { class: "corner" },
    el("span", { class: "axis-k", text: "keys →" }), el("span", { class: "axis-q", text: "queries ↓" })),
    kLabels, qLabels, mainMap);
  const legendBar = el("canvas", { class: "legend-bar", width: "160", height: "12" });
  const legendMax = el("span", { class: "legend-max" });
  const legendNote = el("span", { class: "legend-note" });
  const legend = el("div", { id: "legend" }, el("span", { text: "0" }), legendBar, legendMax,
    el("span", { class: "legend-title", text: "attention weight" }), legendNote);
  const readout = el("div", { id: "readout", "aria-live": "polite" });  // read out as it changes
  const scroller = el("div", { class: "scroll" }, mapBox);
  const headView = el("section", { class: "head-view" }, legend, scroller);
  // the panel the group tabs switch, inside the page's main landmark
  const panel = el("div", { id: "attnlab-panel", class: "panel", role: "tabpanel" }, modelView,
    headView, el("section", { class: "readout-box" }, el("h2", { text: "weights" }), readout));
  body.append(header, toolbar, el("main", {}, panel));
  body.tabIndex = -1;

  // ---- the model view ----------------------------------------------------------------------
  function paint(canvas, layer, map) {  // one pixel per weight; CSS or drawImage scales it
    const T = map.length, S = map[0].length, shared = maxOf(map), rows = byRow(layer);
    canvas.width = S; canvas.height = T;
    const ctx = canvas.getContext("2d");
    const img = ctx.createImageData(S, T);
    for (let i = 0; i < T; i++) {
      const row = map[i], max = rows ? rowMax(row) : shared;
      for (let j = 0; j < S; j++) {
        const c = masked(layer, i, j) ? MASKED : colour(row[j], max);
        const p = 4 * (i * S + j);
        img.data[p] = c[0]; img.data[p + 1] = c[1]; img.data[p + 2] = c[2]; img.data[p + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
  }

  // as many columns as the layer with the most heads: a layer with fewer leaves its row's
  // last cells empty (else its neighbours' maps would slide under other layers' labels)
  function gridHeads() {
    return Math.max(...groups[state.group].layers.map((index) => data.layers[index].weights.length));
  }

  // 330 px for the maps, or what the page has beside its padding and the layer labels: a
  // notebook's output on a phone (a 242 px frame) cut off the last heads' maps
  function thumbSize() {
    const room = Math.min(330, body.clientWidth - 76);
    return Math.max(18, Math.min(64, Math.floor(room / gridHeads()) - 4));
  }

  let builtSize = 0;  // the small maps' size when last drawn (a resize that keeps it redraws none)
  function buildGrid() {
    grid.textContent = "";
    const g = groups[state.group];
    const H = gridHeads();
    const size = builtSize = thumbSize();
    grid.style.gridTemplateColumns = `2.6em repeat(${H}, ${size}px)`;
    // "h1", "h2", ... where a column has room for "h16"; else "1", "2", ... under the corner's
    // "head" (16 heads' labels ran together: "h10h11h12")
    const named = size >= 22;
    grid.appendChild(el("span", { class: "corner-label", text: named ? "" : "head" }));
    for (let h = 0; h < H; h++) {
      grid.appendChild(el("span", { class: "head-label", text: named ? `h${h + 1}` : `${h + 1}` }));
    }
    g.layers.forEach((index, l) => {
      const layer = data.layers[index];
      grid.appendChild(el("span", { class: "layer-label", text: `L${l + 1}` }));
      for (let h = 0; h < layer.weights.length; h++) {
        // a button to a screen reader, named and pressed or not; one tab stop for the whole
        // grid (the shown head's), where ← → ↑ ↓ move as they do anywhere on the page
        const c = el("canvas", { class: "thumb", "data-layer": String(l), "data-head": String(h),
                                 title: `layer ${l + 1}, head ${h + 1}`, role: "button",
                                 "aria-label": `layer ${l + 1}, head ${h + 1}`, tabindex: "-1" });
        c.style.width = c.style.height = `${size}px`;
        paint(c, layer, layer.weights[h]);
        c.addEventListener("click", () => showHead(l, h));
        c.addEventListener("keydown", (e) => {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); showHead(l, h); }
        });
        grid.appendChild(c);
      }
      for (let h = layer.weights.length; h < H; h++) {
        grid.appendChild(el("span", { class: "no-head" }));
      }
    });
  }

  // ---- the head view -----------------------------------------------------------------------
  const LINE = 14;  // px: one label's line
  const KEY_ROW = 84;  // px: the key labels' row above the map (explorer.css: .map-box)
  let cell = 12;
  let pixels = null;  // the shown map, one pixel per weight

  function placeLabels(box, tokens, axis) {
    box.textContent = "";
    const every = Math.max(1, Math.ceil(LINE / cell));  // thin the text when cells are small
    const texts = tokens.map((t) => visible(String(t)));
    // Single characters (an lm's) thinned to every k-th read as gibberish ("t o t o s n"):
    // a shown label carries the run of characters up to the next one ("the q", "uick ").
    // (text, not symbols: a reversal's one-digit tokens are not to be read as numbers)
    const chars = every > 1 && texts.every((t) => [...t].length === 1) && texts.includes("␣");
    // keys that fit across their column (an lm's characters, a reversal's digits) stand
    // upright: turned on their side, "t", "h", "e" read as strokes on a projector
    box.classList.toggle("upright", axis === "k" && every === 1 &&
                         widest(texts.map((t) => short(t, 10))) + 2 <= cell);
    tokens.forEach((token, i) => {
      const text = texts[i];
      // named by the token itself: its shown label may be a run of the next characters
      // ("uick␣" for "u"), cut ("…"), or hidden where the labels are thinned
      const name = `${axis === "q" ? "query" : "key"} ${i}: ${text}`;
      const item = el("div", { class: axis === "q" ? "qtok" : "ktok", "data-index": String(i),
                               title: name, "aria-label": name, "aria-pressed": "false" });
      const shown = i % every === 0;
      const run = short(shown && chars ? texts.slice(i, i + every).join("") : text,
                        axis === "q" ? 14 : 10);
      item.appendChild(el("span", { class: shown ? "label" : "label thin", "data-run": run,
                                    "data-text": short(text, axis === "q" ? 14 : 10),
                                    text: run }));
      if (axis === "q") { item.style.top = `${i * cell}px`; item.style.height = `${cell}px`; }
      else { item.style.left = `${i * cell}px`; item.style.width = `${cell}px`; }
      item.addEventListener("mouseenter", () => hover({ axis, index: i }));
      item.addEventListener("mouseleave", () => hover(null));
      item.addEventListener("click", () => pin({ axis, index: i }));
      // reachable without a mouse: Tab moves from token to token and shows its weights as a
      // hover does, Enter or Space pins it
      item.tabIndex = 0;
      item.setAttribute("role", "button");
      item.addEventListener("focus", () => hover({ axis, index: i }));
      item.addEventListener("blur", () => hover(null));
      item.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pin({ axis, index: i }); }
      });
      box.appendChild(item);
    });
  }

  // the query labels' column: as wide as the widest shown label is drawn (short symbols leave
  // the map more room in a narrow frame), between the corner's words and 14 wide characters.
  // Measured in the labels' font, bold as when hovered, not counted in characters: a Chinese
  // or Japanese character, or a capital Cyrillic letter, is much wider than a Latin letter, and
  // counted ones were cut with "…" though the column had room for them.
  let measurer = null;
  function widest(texts) {  // px of the widest of ``texts`` in the labels' font, bold
    if (!measurer) {
      measurer = document.createElement("canvas").getContext("2d");
      measurer.font = `600 12px ${getComputedStyle(body).fontFamily}`;
    }
    return texts.reduce((w, t) => Math.max(w, measurer.measureText(t).width), 0);
  }
  const columns = new Map();  // query tokens -> px
  function queryColumn() {
    const tokens = queryTokens(current());
    if (!columns.has(tokens)) {
      const wide = widest(tokens.map((t) => short(visible(String(t)), 14)));
      columns.set(tokens, Math.max(64, Math.min(180, Math.ceil(wide) + 10)));
    }
    return columns.get(tokens);
  }

  function drawMain() {
    const layer = current(), map = shownMap();
    const T = map.length, S = map[0].length, max = maxOf(map);
    // beside the labels; before the first layout (an iframe not yet laid out) the window's
    // width, so the map is never drawn wider than the page that shows it
    const labelColumn = queryColumn();
    mapBox.style.setProperty("--qcol", `${labelColumn}px`);
    const room = (scroller.clientWidth || Math.max(0, window.innerWidth - 300)) - labelColumn - 6;
    // a page of its own fits the map in the window's height under its key labels (at 1280 x
    // 800 a reversal's 16th row was below the fold); a notebook's frame grows to the page
    // instead, so there a height taken from the frame's would feed back. The window's height
    // never shrinks a cell below a label's line: in a short window (1280 x 450) cells of 12 px
    // hid every other key label, and the map still did not fit; there the page scrolls.
    const tall = embedded ? 520 : window.innerHeight - KEY_ROW - 12 -
      (scroller.getBoundingClientRect().top + window.scrollY);
    const high = Math.min(Math.floor(520 / T), Math.max(LINE, Math.floor(tall / T)));
    cell = Math.max(4, Math.min(40, Math.floor(Math.max(200, room) / S), high));
    mainMap.width = S * cell; mainMap.height = T * cell;
    // a key label is a line wide, centred on its column: on thin columns the first one
    // reaches left of the map, so the corner's words step aside by as much
    mapBox.style.setProperty("--spill", `${Math.max(0, Math.ceil((LINE - cell) / 2))}px`);
    mainMap.dataset.rows = String(T); mainMap.dataset.cols = String(S);
    const key = `${state.group}/${state.layer}/${averaging() ? "mean" : state.head}/` +
      `${byRow(layer) ? "row" : "map"}`;
    if (!pixels || pixels.key !== key) {  // painted once per map; a hover only redraws it
      pixels = document.createElement("canvas");
      pixels.key = key;
      paint(pixels, layer, map);
    }
    const ctx = mainMap.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(pixels, 0, 0, S * cell, T * cell);
    const focus = state.pinned || state.active;
    if (focus) {
      ctx.strokeStyle = "#ff3b30"; ctx.lineWidth = 2;
      if (focus.axis === "q") ctx.strokeRect(1, focus.index * cell + 1, S * cell - 2, cell - 2);
      else ctx.strokeRect(focus.index * cell + 1, 1, cell - 2, T * cell - 2);
    }
    describeMap(layer, map, focus);
    mapBox.style.setProperty("--cols", `${S * cell}px`);
    mapBox.style.setProperty("--rows", `${T * cell}px`);
    // legend
    const lctx = legendBar.getContext("2d");
    for (let x = 0; x < legendBar.width; x++) {
      lctx.fillStyle = css(LUT[Math.round((x / (legendBar.width - 1)) * 255)]);
      lctx.fillRect(x, 0, 1, legendBar.height);
    }
    rowScale.checked = byRow(layer);
    legendMax.textContent = byRow(layer) ? "row's largest" : fixed(max);
    legendNote.textContent = (byRow(layer) ? "scale: each row from 0 to its own largest weight"
      : "scale: 0 to this map's largest weight") +
      (layer.kind === "causal" ? " · grey: a later token, which a query cannot see" : "") +
      (layer.masked ? " · grey: masked, no weight (a graph's non-edge, a padded key)" : "");
  }

  // the map's text alternative: which map, its size, and the weight of the cell under the
  // pointer (the token labels read out a whole row or column)
  function describeMap(layer, map, focus) {
    const qs = queryTokens(layer), ks = keyTokens(layer);
    let text = `attention map, ${mapName()}: ${map.length} queries × ${map[0].length} keys`;
    if (focus && focus.cell !== undefined) {
      const i = focus.index, j = focus.cell;
      const q = visible(String(qs[i])), k = visible(String(ks[j]));
      text += `; query ${i} “${q}”, key ${j} “${k}”: ` +
        (masked(layer, i, j) ? "masked" : `weight ${fixed(map[i][j])}`);
    }
    mainMap.setAttribute("aria-label", text);
  }

  // the labels are made anew for each map shown: a label the keyboard is on is focused again
  // in its new making (← → ↑ ↓ a r g and a resize would otherwise drop the reader's place);
  // past the end of a shorter group's tokens (g from source token 9 to a 4-token decoder
  // input), on that group's last token of the same axis
  function labelsFor() {
    const layer = current();
    const on = document.activeElement;
    const kind = on && ["qtok", "ktok"].find((c) => on.classList.contains(c));
    const index = kind && Number(on.dataset.index);
    placeLabels(qLabels, queryTokens(layer), "q");
    placeLabels(kLabels, keyTokens(layer), "k");
    const all = kind ? document.querySelectorAll(`.${kind}`) : [];
    const again = all[Math.min(index, all.length - 1)];
    if (again) again.focus({ preventScroll: true });
  }

  function markTokens() {  // the token labels as nothing is shown, but the pinned one pressed
    document.querySelectorAll(".qtok.on, .ktok.on, .covered").forEach((n) => {
      n.classList.remove("on", "covered");
      const label = n.querySelector(".label");  // back to the run of characters it stood for
      if (label && label.dataset.run !== undefined) label.textContent = label.dataset.run;
    });
    document.querySelectorAll('[aria-pressed="true"]:is(.qtok, .ktok)').forEach(
      (n) => n.setAttribute("aria-pressed", "false"));
    const held = state.pinned && document.querySelector(
      `.${state.pinned.axis}tok[data-index="${state.pinned.index}"]`);
    if (held) held.setAttribute("aria-pressed", "true");  // pinned: said, not only seen
  }

  function showReadout() {
    const focus = state.pinned || state.active;
    readout.textContent = "";
    markTokens();
    if (!focus) {
      readout.appendChild(el("p", { class: "empty", text: "Hover a token or a cell of the large map." }));
      return;
    }
    const layer = current(), map = shownMap();
    const qs = queryTokens(layer), ks = keyTokens(layer);
    const isQuery = focus.axis === "q";
    const others = isQuery ? ks : qs;
    const values = isQuery ? map[focus.index] : map.map((row) => row[focus.index]);
    const token = visible(String((isQuery ? qs : ks)[focus.index]));
    const mark = document.querySelector(`.${isQuery ? "qtok" : "ktok"}[data-index="${focus.index}"]`);
    if (mark) {  // its label shows (its own token); the thinned-in labels it would touch step aside
      mark.classList.add("on");
      const label = mark.querySelector(".label");
      if (label) label.textContent = label.dataset.text;
      const every = Math.max(1, Math.ceil(LINE / cell));
      for (let n = focus.index - every + 1; n < focus.index + every; n++) {
        const near = mark.parentNode.children[n];
        if (n !== focus.index && near) near.classList.add("covered");
      }
    }
    readout.appendChild(el("p", { class: "about", text: isQuery
      ? `query ${focus.index} “${token}” gives its attention to:`
      : `key ${focus.index} “${token}” receives from:` }));
    const top = Math.max(...values, 1e-12);
    const list = el("ol", { class: "weights" });
    values.forEach((w, k) => {
      const hidden = isQuery ? masked(layer, focus.index, k) : masked(layer, k, focus.index);
      // a masked key says so in words, where its bar would be: grey alone was lost on a
      // screen reader (which read "0.000") and on a reader who cannot tell the grey
      const bar = hidden ? el("span", { class: "masked-note", text: "masked" })
        : el("span", { class: "bar" }, el("i", {}));
      if (!hidden) bar.firstChild.style.width = `${(100 * w) / top}%`;
      const weight = el("span", { class: "weight", text: fixed(w) });
      weight.setAttribute(isQuery ? "data-key" : "data-query", String(k));
      const row = el("li", { class: hidden ? "masked" : "" },
        el("span", { class: "tok" }, el("span", { class: "idx", text: String(k) }),
           document.createTextNode(short(visible(String(others[k])), 16))), bar, weight);
      if (focus.cell === k) {
        row.classList.add("here");
        row.setAttribute("aria-current", "true");
      }
      list.appendChild(row);
    });
    readout.appendChild(list);
    if (focus.cell !== undefined) {
      const here = list.children[focus.cell];
      if (here) here.scrollIntoView({ block: "nearest" });
    }
  }

  function mapName() {  // "cross-attention · layer 2 · head 1"
    const g = groups[state.group], layer = current();
    const place = groups.length > 1 ? `${GROUP_NAMES[g.name] || g.name} · ` : "";
    return averaging()
      ? `${place}layer ${state.layer + 1} · mean of ${layer.weights.length} heads`
      : `${place}layer ${state.layer + 1} · head ${state.head + 1}`;
  }

  function render(full) {
    groupBar.querySelectorAll("button.group").forEach((b, i) => {
      b.classList.toggle("active", i === state.group);
      b.setAttribute("aria-selected", String(i === state.group));
      b.tabIndex = i === state.group ? 0 : -1;  // one tab stop: the tabs pattern of WAI-ARIA
    });
    panel.setAttribute("aria-labelledby", `group-${state.group}`);
    // this layer's heads (a graph run's 1-head output layer after its 2-head layers)
    averageLabel.hidden = current().weights.length === 1;  // nothing to average: not offered
    average.checked = state.average;
    const onThumb = document.activeElement && document.activeElement.matches("canvas.thumb");
    if (full) { buildGrid(); }
    grid.querySelectorAll("canvas.thumb").forEach((c) => {
      const l = Number(c.dataset.layer), h = Number(c.dataset.head);
      const shown = l === state.layer && (averaging() || h === state.head);
      c.classList.toggle("selected", shown);
      c.setAttribute("aria-pressed", String(shown));
      c.tabIndex = l === state.layer && h === state.head ? 0 : -1;
      if (onThumb && c.tabIndex === 0) c.focus();
    });
    document.getElementById("layer-label").textContent = mapName();
    drawMain();
    labelsFor();
    showReadout();
  }

  function select(group, layer, head) {
    const full = group !== state.group;
    const g = groups[group];
    state.group = group;
    state.layer = Math.max(0, Math.min(layer, g.layers.length - 1));
    state.head = Math.max(0, Math.min(head, data.layers[g.layers[state.layer]].weights.length - 1));
    if (full) { state.pinned = null; state.active = null; }
    render(full);
  }

  // a head chosen (its map clicked, ← or →) is shown, even while the heads were averaged
  function showHead(layer, head) {
    state.average = false; average.checked = false;
    state.chosenHead = head;
    select(state.group, layer, head);
  }

  function hover(focus) {
    state.active = focus;
    if (!state.pinned) { drawMain(); showReadout(); }
  }
  function pin(focus) {
    const same = state.pinned && focus && state.pinned.axis === focus.axis &&
      state.pinned.index === focus.index && state.pinned.cell === focus.cell;
    state.pinned = same ? null : focus;
    drawMain(); showReadout();
  }

  // ---- events ------------------------------------------------------------------------------
  groups.forEach((g, i) => {
    const b = el("button", { class: "group", "data-group": g.name, role: "tab", type: "button",
                             id: `group-${i}`, "aria-controls": "attnlab-panel",
                             text: GROUP_NAMES[g.name] || g.name });
    b.addEventListener("click", () => select(i, state.layer, state.chosenHead));
    groupBar.appendChild(b);
  });
  // on a group's tab, ← → Home End move between the groups (the tabs pattern), not the heads
  groupBar.addEventListener("keydown", (e) => {
    const n = groups.length;
    const to = { ArrowLeft: state.group + n - 1, ArrowRight: state.group + 1, Home: 0,
                 End: n - 1 }[e.key];
    if (to === undefined || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault(); e.stopPropagation();
    select(to % n, state.layer, state.chosenHead);
    groupBar.children[state.group].focus();
  });
  average.addEventListener("change", () => { state.average = average.checked; render(false); });
  rowScale.addEventListener("change", () => { state.rowScale = rowScale.checked; render(true); });
  const cellAt = (event) => {
    const r = mainMap.getBoundingClientRect();
    const j = Math.floor(((event.clientX - r.left) / r.width) * mainMap.width / cell);
    const i = Math.floor(((event.clientY - r.top) / r.height) * mainMap.height / cell);
    return { axis: "q", index: Math.max(0, Math.min(i, Number(mainMap.dataset.rows) - 1)),
             cell: Math.max(0, Math.min(j, Number(mainMap.dataset.cols) - 1)) };
  };
  mainMap.addEventListener("mousemove", (e) => {
    const f = cellAt(e);
    const a = state.active;
    if (!a || a.index !== f.index || a.cell !== f.cell || a.axis !== "q") hover(f);
  });
  mainMap.addEventListener("mouseleave", () => hover(null));
  mainMap.addEventListener("click", (e) => pin(cellAt(e)));
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const g = groups[state.group];
    const H = current().weights.length;
    const moves = {
      ArrowLeft: () => showHead(state.layer, (state.head + H - 1) % H),
      ArrowRight: () => showHead(state.layer, (state.head + 1) % H),
      ArrowUp: () => select(state.group, (state.layer + g.layers.length - 1) % g.layers.length,
                            state.chosenHead),
      ArrowDown: () => select(state.group, (state.layer + 1) % g.layers.length, state.chosenHead),
      a: () => {
        if (averageLabel.hidden) return;  // one head: no mean of it
        average.checked = !average.checked; state.average = average.checked; render(false);
      },
      r: () => { state.rowScale = !byRow(current()); render(true); },
      g: () => select((state.group + 1) % groups.length, state.layer, state.chosenHead),
      Escape: () => { state.pinned = null; drawMain(); showReadout(); },
    };
    if (moves[e.key]) { e.preventDefault(); moves[e.key](); }
  });

  // Inline in a notebook or a docs page (an iframe): no height tied to the iframe's (that
  // would feed back), and the page tells the iframe its height, so nothing is clipped or
  // left below the fold of a fixed-height frame. A resize redraws the map to fit.
  const embedded = window.parent !== window;
  if (embedded) body.classList.add("embedded");
  let lastHeight = 0;
  function reportHeight() {
    // the body's own height (the document's is at least the frame's, so it could only grow)
    const height = Math.ceil(body.getBoundingClientRect().height) + 2;
    if (embedded && height !== lastHeight) {
      lastHeight = height;
      window.parent.postMessage({ attnlabHeight: height }, "*");
    }
  }
  let lastWidth = window.innerWidth, pending = false;
  let lastTall = window.innerHeight;
  window.addEventListener("resize", () => {
    // a height change alone: nothing in a frame; a page of its own fits its map to it
    if (pending || window.innerWidth === lastWidth &&
        (embedded || window.innerHeight === lastTall)) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false; lastWidth = window.innerWidth; lastTall = window.innerHeight;
      // the small maps rebuilt only when their size changes (144 maps of 128 × 128 on the
      // benchmark page were all repainted at every step of a window's drag)
      render(thumbSize() !== builtSize); reportHeight();
    });
  });

  if (embedded && window.ResizeObserver) new ResizeObserver(reportHeight).observe(body);

  // the system turned dark (or light) with the page open: the canvases' masked cells are pixels,
  // not CSS, so they are painted again in the new --masked-cell (they stayed light grey)
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
  if (dark) {
    dark.addEventListener("change", () => { MASKED = maskedCell(); pixels = null; render(true); });
  }

  // select(group, layer, head) as a reader's choice of head: the head ↑/↓ keep, as a click's
  window.attnlab = {
    data, state,
    select: (group, layer, head) => { state.chosenHead = head; select(group, layer, head); },
  };
  render(true);
  reportHeight();
  window.attnlab.readyMs = performance.now();  // since navigation started (benchmarks/explorer.py)
  body.dataset.ready = "1";
})();
