// Display blocks and tool output: diffs, shell commands, todo lists, briefs, background tasks,
// media, and anything unknown as JSON (docs/web-ui.md, "Tool cards").

import { h } from "./dom.js";
import { highlight } from "./markdown.js";

/** Line diff of two texts (longest common subsequence; large inputs fall back to -old/+new). */
export function lineDiff(oldText, newText) {
  const a = oldText === "" ? [] : oldText.split("\n");
  const b = newText === "" ? [] : newText.split("\n");
  if (a.length * b.length > 4_000_000) return [...a.map((t) => ["-", t]), ...b.map((t) => ["+", t])];
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push([" ", a[i]]);
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

function diffView(block) {
  if (block.is_summary) {
    return h("div", { class: "diff" }, h("div", { class: "diff-head" }, h("span", { class: "diff-path", text: block.path }), h("span", { class: "muted", text: ` ${block.old_text} → ${block.new_text}` })));
  }
  const lines = lineDiff(block.old_text || "", block.new_text || "");
  const adds = lines.filter((l) => l[0] === "+").length;
  const dels = lines.filter((l) => l[0] === "-").length;
  let oldNo = block.old_start || 1;
  let newNo = block.new_start || 1;
  const rows = lines.map(([op, text]) => {
    const left = op === "+" ? "" : oldNo++;
    const right = op === "-" ? "" : newNo++;
    const cls = op === "+" ? "add" : op === "-" ? "del" : "ctx";
    return h("tr", { class: cls }, h("td", { class: "ln", text: left }), h("td", { class: "ln", text: right }), h("td", { class: "op", text: op }), h("td", { class: "code", text }));
  });
  return h(
    "div",
    { class: "diff" },
    h("div", { class: "diff-head" }, h("span", { class: "diff-path", text: block.path }), h("span", { class: "diff-stat" }, h("span", { class: "add-n", text: `+${adds}` }), " ", h("span", { class: "del-n", text: `−${dels}` }))),
    h("div", { class: "diff-scroll" }, h("table", { class: "diff-table" }, h("tbody", null, rows))),
  );
}

export function todoView(items) {
  const mark = { done: "☑", in_progress: "◐", pending: "☐" };
  return h(
    "ul",
    { class: "todo-list" },
    (items || []).map((it) => h("li", { class: `todo-${it.status}` }, h("span", { class: "todo-mark", "aria-hidden": "true", text: mark[it.status] || "☐" }), h("span", { text: it.title }), h("span", { class: "sr-only", text: ` (${it.status})` }))),
  );
}

/** One display block as an element. */
export function displayBlock(block) {
  switch (block && block.type) {
    case "diff":
      return diffView(block);
    case "shell":
      return h("div", { class: "shell-cmd" }, h("pre", null, h("code", { html: `<span class="prompt">$ </span>${highlight(block.command || "", block.language || "bash")}` })));
    case "todo":
      return todoView(block.items);
    case "brief":
      return h("div", { class: "brief", text: block.text });
    case "background_task":
      return h("div", { class: "bg-task" }, h("span", { class: "badge", text: block.kind }), h("code", { text: block.task_id }), " ", h("span", { class: "badge", text: block.status }), " ", h("span", { text: block.description }));
    case "image":
      if (typeof block.url === "string" && /^(https?:|data:image\/)/.test(block.url)) return h("img", { class: "media", src: block.url, alt: block.alt || "image" });
      break;
    default:
      break;
  }
  return h("details", { class: "raw-block" }, h("summary", { text: `${(block && block.type) || "block"} (raw)` }), h("pre", { text: JSON.stringify(block, null, 2) }));
}

/** A part of a tool's output (text, image, video, …). */
export function outputPart(part) {
  if (part.type === "text") return h("pre", { class: "tool-output", text: part.text });
  if (part.type === "think") return h("pre", { class: "tool-output muted", text: part.think });
  const media = part.image_url || part.video_url || part.audio_url;
  if (media && typeof media.url === "string" && /^(https?:|data:)/.test(media.url)) {
    if (part.type === "image_url") return h("img", { class: "media", src: media.url, alt: "tool image" });
    if (part.type === "video_url") return h("video", { class: "media", src: media.url, controls: true });
    if (part.type === "audio_url") return h("audio", { src: media.url, controls: true });
  }
  return h("pre", { class: "tool-output", text: JSON.stringify(part, null, 2) });
}

const MAX_OUTPUT = 20000;

/** A tool's output (a string or a list of parts); long text is cut with a "show all" button. */
export function outputView(output) {
  if (Array.isArray(output)) return h("div", { class: "tool-output-parts" }, output.map(outputPart));
  const text = typeof output === "string" ? output : JSON.stringify(output);
  if (!text) return null;
  if (text.length <= MAX_OUTPUT) return h("pre", { class: "tool-output", text });
  const pre = h("pre", { class: "tool-output", text: `${text.slice(0, MAX_OUTPUT)}\n…` });
  const more = h("button", { type: "button", class: "link-btn", onclick: () => ((pre.textContent = text), more.remove()) }, `Show all (${text.length.toLocaleString()} characters)`);
  return h("div", null, pre, more);
}
