// DOM helpers: elements are built with text nodes (never from strings of HTML), except where a
// caller passes `html` produced by the escaping Markdown renderer.

/** h("div", {class: "x", onclick: fn, title: "t"}, child, "text", [more]) */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k === "html") el.innerHTML = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "value") el.value = v;
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function relTime(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 86400 * 14) return `${Math.floor(s / 86400)} d ago`;
  return new Date(t).toLocaleDateString();
}

export function shortPath(p) {
  if (!p) return "";
  const parts = p.split("/").filter(Boolean);
  return parts.length <= 2 ? p : `…/${parts.slice(-2).join("/")}`;
}

let toastBox = null;
/** A short message at the bottom of the screen. */
export function toast(text, kind = "info") {
  if (!toastBox) {
    toastBox = h("div", { class: "toasts", role: "status", "aria-live": "polite" });
    document.body.appendChild(toastBox);
  }
  const t = h("div", { class: `toast toast-${kind}`, text });
  toastBox.appendChild(t);
  setTimeout(() => t.remove(), kind === "error" ? 8000 : 4000);
}

/** A modal dialog; resolves with what `build` passes to `done` (or null when dismissed). */
export function modal(title, build) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "modal" });
    let settled = false;
    const done = (value) => {
      if (settled) return;
      settled = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    dialog.append(
      h("div", { class: "modal-head" }, h("h2", { text: title }), h("button", { class: "icon-btn", type: "button", title: "Close", "aria-label": "Close", onclick: () => done(null) }, "✕")),
      build(done),
    );
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(null);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    const first = dialog.querySelector("input, textarea, select, button.primary");
    if (first) first.focus();
  });
}

export function confirmDialog(title, text, okLabel = "OK", danger = false) {
  return modal(title, (done) =>
    h(
      "div",
      { class: "modal-body" },
      h("p", { text }),
      h(
        "div",
        { class: "modal-actions" },
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
        h("button", { type: "button", class: danger ? "primary danger" : "primary", onclick: () => done(true) }, okLabel),
      ),
    ),
  ).then((v) => v === true);
}

export function promptDialog(title, label, initial = "", okLabel = "Save") {
  return modal(title, (done) => {
    const input = h("input", { type: "text", value: initial, "aria-label": label });
    const form = h(
      "form",
      { class: "modal-body", onsubmit: (e) => (e.preventDefault(), done(input.value)) },
      h("label", { class: "field" }, h("span", { text: label }), input),
      h("div", { class: "modal-actions" }, h("button", { type: "button", onclick: () => done(null) }, "Cancel"), h("button", { type: "submit", class: "primary" }, okLabel)),
    );
    setTimeout(() => input.select(), 0);
    return form;
  });
}

const ICONS = {
  clip: "M16.5 6.5 8.9 14.1a2 2 0 0 0 2.8 2.8l7.6-7.6a4 4 0 0 0-5.7-5.7L5.9 11.3a6 6 0 0 0 8.5 8.5l6.1-6.1",
  folder: "M3 6.5A1.5 1.5 0 0 1 4.5 5H9l2 2h8.5A1.5 1.5 0 0 1 21 8.5v9a1.5 1.5 0 0 1-1.5 1.5h-15A1.5 1.5 0 0 1 3 17.5z",
  file: "M6 3h8l4 4v14H6z M14 3v4h4",
};

/** A small line icon (SVG, so it renders without emoji fonts). */
export function icon(name) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", ICONS[name] || "");
  svg.appendChild(path);
  return svg;
}
